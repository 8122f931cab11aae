"""tense-reinflection and tense-reinflection-with-do (McCoy ``tense`` and
``tense_aux``; docs/tasks.md §4.6, §4.3).

A past-tense sentence is put in the present: every finite word (the verb, or the
auxiliary ``did/didn't`` in the with-do variant) agrees with its grammatical
subject (agree-main). The linear rule (agree-recent, §5.2) makes it agree with the
most recent noun instead.
"""

from __future__ import annotations

import random

from fruit.tasks.base import Tokens
from fruit.tasks.mccoy.lexicon import (
    AUXILIARIES,
    LEMMA,
    NUMBER,
    PAST,
    PAST_AUX,
    PRESENT_AUX,
    THIRD_SINGULAR,
)
from fruit.tasks.mccoy.parser import parse
from fruit.tasks.mccoy.pos import pos_main_verb_match
from fruit.tasks.mccoy.sampler import PP_NUMBERS_FREE, Slot
from fruit.tasks.mccoy.task import McCoyTask
from fruit.tasks.mccoy.templates import table

# Appendix A: dev+test pooled counts; columns intrans, none, PP, SRC-intrans, SRC-trans, ORC.
TENSE_IN_DISTRIBUTION = {
    **table(
        """
        none        260 575 526 198 179 192
        PP          603 527 568 183 186 184
        SRC-intrans 165 171 185  65  65  66
        SRC-trans   192 179 169  69  67  59
        ORC         177 209 164  65  75  61
        """,
        "identity",
    ),
    **table(
        """
        none        272 556 579 180 189 186
        PP          295 281 288  89  91 100
        SRC-intrans 189 200 203  67  61  71
        SRC-trans    93  86  96  29  31  28
        ORC          92  89  96  27  28  24
        """,
        "transform",
    ),
}
# The published gen split, measured the same way (every line has the agreement conflict).
TENSE_GENERALIZATION = table(
    """
    PP        1537 1521 1467 477 530 513
    SRC-trans  475  490  492 172 164 157
    ORC        524  527  502 148 167 137
    """,
    "transform",
)

WITH_DO_IN_DISTRIBUTION = {
    **table(
        """
        none        357 466 362 154 184 162
        PP          952 371 285 120 135 116
        SRC-intrans 416 169 128  53  46  44
        SRC-trans   434 156 100  64  50  50
        ORC         432 157 128  68  57  57
        """,
        "identity",
    ),
    **table(
        """
        none        325 509 351 148 183 159
        PP          653 221 161  95  78  90
        SRC-intrans 422 148 104  51  59  51
        SRC-trans   246  87  50  28  23  28
        ORC         217  91  60  25  34  30
        """,
        "transform",
    ),
}
WITH_DO_GENERALIZATION = table(
    """
    PP        2053 754 563 211 260 263
    SRC-trans 1451 561 388 168 205 180
    ORC       1470 516 379 199 176 203
    """,
    "transform",
)

# The with-do grammar (docs/tasks.md §4.3) has no "singular head + plural PP noun" rule:
# P(head, PP noun) = (0.5*0.2, 0.5*1/6, 0.5*1/6), normalised.
PP_NUMBERS_WITH_DO = ((("sg", "sg"), 6.0), (("pl", "sg"), 5.0), (("pl", "pl"), 5.0))


class TenseReinflection(McCoyTask):
    identity_marker = "PAST"
    transform_marker = "PRESENT"
    partial_kind = "pos-main-verb"

    def __init__(self, with_do: bool):
        self.with_do = with_do
        if with_do:
            self.slug = "tense-reinflection-with-do"
            self.grammar_file = "mccoy_tense_aux.gr"
            self.in_distribution = WITH_DO_IN_DISTRIBUTION
            self.generalization = WITH_DO_GENERALIZATION
            self.pp_numbers = PP_NUMBERS_WITH_DO
        else:
            self.slug = "tense-reinflection"
            self.grammar_file = "mccoy_tense.gr"
            self.in_distribution = TENSE_IN_DISTRIBUTION
            self.generalization = TENSE_GENERALIZATION
            self.pp_numbers = PP_NUMBERS_FREE

    def _source_word(self, word: str) -> str:
        # The grammars generate present sentences; sources are in the past.
        if self.with_do:
            return PAST_AUX[word.endswith("n't")] if word in AUXILIARIES else word
        return PAST[LEMMA[word]] if word in LEMMA else word

    def _is_finite(self, word: str) -> bool:
        return word in AUXILIARIES if self.with_do else word in LEMMA

    def _present(self, word: str, number: str) -> str:
        """The present form of a finite word that agrees with ``number``."""
        if self.with_do:
            return PRESENT_AUX[(number, word.endswith("n't"))]
        lemma = LEMMA[word]
        return THIRD_SINGULAR[lemma] if number == "sg" else lemma

    def transform(self, sentence: Tokens) -> Tokens:
        """agree-main: each finite word agrees with its grammatical subject."""
        out = list(sentence)
        for finite, controller in parse(sentence).agreement():
            if not self._is_finite(sentence[finite]):
                raise self.malformed(
                    sentence,
                    f"expected {'an auxiliary' if self.with_do else 'a verb'} "
                    f"at token {finite + 1}",
                )
            out[finite] = self._present(sentence[finite], NUMBER[sentence[controller]])
        return out

    def linear(self, sentence: Tokens) -> Tokens:
        """agree-recent: each finite word agrees with the most recent noun."""
        parse(sentence)  # FruitError if it is not a sentence of the McCoy grammars
        out, number = [], None
        for word in sentence:
            if word in NUMBER:
                number = NUMBER[word]
            elif self._is_finite(word):
                if number is None:
                    raise self.malformed(sentence, "a verb before any noun")
                word = self._present(word, number)
            out.append(word)
        return out

    def partial_match(self, output: Tokens, reference: Tokens) -> bool:
        """POS sequence + main verb (docs/tasks.md §3.2)."""
        return pos_main_verb_match(output, reference, "A" if self.with_do else "V")

    def is_withheld(self, sentence: Tokens) -> bool:
        """Agreement with the most recent noun differs from agreement with the subject."""
        sentence = self.strip_marker(sentence)
        return self.linear(sentence) != self.transform(sentence)

    def spell(self, items: list, rng: random.Random) -> Tokens:
        out: Tokens = []
        for item in items:
            if not isinstance(item, Slot):
                out.append(item)
            elif self.with_do:
                out += [PAST_AUX[item.negated], item.lemma]
            else:
                out.append(PAST[item.lemma])
        return out


TASK = TenseReinflection(with_do=False)
TASK_WITH_DO = TenseReinflection(with_do=True)
