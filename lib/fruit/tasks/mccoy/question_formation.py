"""question-formation (McCoy ``question``; docs/tasks.md §4.1).

``my raven does change . quest`` -> ``does my raven change ?``: the main
auxiliary (the one right after the subject noun phrase) moves to the front.
The linear rule (move-first, §5.1) fronts the first auxiliary instead.
"""

from __future__ import annotations

import random

from fruit.tasks.base import (
    Tokens,
    auxiliary_pair,
    first_index,
    first_word_match,
    front,
    same_number_opposite_polarity,
)
from fruit.tasks.mccoy.lexicon import PRESENT_AUX
from fruit.tasks.mccoy.parser import parse
from fruit.tasks.mccoy.sampler import Slot
from fruit.tasks.mccoy.task import McCoyTask
from fruit.tasks.mccoy.templates import table

# Appendix A: dev+test pooled counts; columns intrans, none, PP, SRC-intrans, SRC-trans, ORC.
IN_DISTRIBUTION = {
    **table(
        """
        none         35  850  897  581  309  303
        PP          373  341  372  228  127  118
        SRC-intrans 104  120  128   81   41   42
        SRC-trans   115  116  111   83   38   49
        ORC         216  217  248  152   86   79
        """,
        "identity",
    ),
    **table(
        """
        none         30  858  915  573  286  268
        PP          348  352  350  226  117  117
        """,
        "transform",
    ),
}

# The published gen split, measured the same way: subject RC, exactly two
# auxiliaries (so no object RC), SRC 6,667 : ORC 3,333.
GENERALIZATION = table(
    """
    SRC-intrans 1883  636  685  0  0  0
    SRC-trans   2053  708  702  0  0  0
    ORC         1985  658  690  0  0  0
    """,
    "transform",
)

QUESTION_AUXILIARIES = frozenset(PRESENT_AUX.values())
SINGULAR_AUXILIARIES = frozenset(PRESENT_AUX["sg", negated] for negated in (False, True))


class QuestionFormation(McCoyTask):
    slug = "question-formation"
    identity_marker = "decl"
    transform_marker = "quest"
    partial_kind = "first-word"
    grammar_file = "mccoy_question.gr"
    in_distribution = IN_DISTRIBUTION
    generalization = GENERALIZATION

    def transform(self, sentence: Tokens) -> Tokens:
        """move-main: front the auxiliary that follows the subject noun phrase."""
        main = parse(sentence).finite
        if sentence[main] not in QUESTION_AUXILIARIES:
            raise self.malformed(
                sentence,
                f"expected a main auxiliary ({', '.join(sorted(QUESTION_AUXILIARIES))}) "
                f"at token {main + 1}",
            )
        return front(sentence, main)

    def linear(self, sentence: Tokens) -> Tokens:
        """move-first: front the first auxiliary of the sentence."""
        parse(sentence)  # FruitError if it is not a sentence of the McCoy grammars
        first = first_index(sentence, QUESTION_AUXILIARIES)
        if first is None:
            raise self.malformed(
                sentence, f"no auxiliary ({', '.join(sorted(QUESTION_AUXILIARIES))})"
            )
        return front(sentence, first)

    def partial_match(self, output: Tokens, reference: Tokens) -> bool:
        """First-word check (docs/tasks.md §3.1)."""
        return first_word_match(output, reference)

    def is_withheld(self, sentence: Tokens) -> bool:
        """A subject with a relative clause."""
        return self.subject_modifier(sentence) == "RC"

    def gen_filter(self, sentence: Tokens) -> bool:
        """Exactly two auxiliaries, of the same number and opposite polarity."""
        pair = auxiliary_pair(sentence, QUESTION_AUXILIARIES)
        return pair is not None and same_number_opposite_polarity(*pair, SINGULAR_AUXILIARIES)

    def spell(self, items: list, rng: random.Random) -> Tokens:
        out: Tokens = []
        for item in items:
            if isinstance(item, Slot):
                out += [PRESENT_AUX[(item.number, item.negated)], item.lemma]
            else:
                out.append(item)
        return out


TASK = QuestionFormation()
