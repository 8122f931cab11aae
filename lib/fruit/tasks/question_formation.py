"""question-formation (McCoy ``question``; tasks.md §4.1).

``my raven does change . quest`` -> ``does my raven change ?``: the main
auxiliary (the one right after the subject noun phrase) moves to the front.
The linear rule (move-first, §5.1) fronts the first auxiliary instead.
"""

from __future__ import annotations

import random

from fruit.errors import FruitError
from fruit.tasks.base import Tokens
from fruit.tasks.mccoy import AUX_NUMBER, PRESENT_AUX, McCoyTask, Slot, parse, table

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
            raise FruitError(
                f"{self.slug}: expected a main auxiliary "
                f"({', '.join(sorted(QUESTION_AUXILIARIES))}) at token {main + 1} of "
                f"{' '.join(sentence)!r}"
            )
        return [sentence[main], *sentence[:main], *sentence[main + 1 : -1], "?"]

    def linear(self, sentence: Tokens) -> Tokens:
        """move-first: front the first auxiliary of the sentence."""
        for i, token in enumerate(sentence):
            if token in QUESTION_AUXILIARIES:
                return [token, *sentence[:i], *sentence[i + 1 : -1], "?"]
        raise FruitError(f"{self.slug}: no auxiliary in {' '.join(sentence)!r}")

    def partial_match(self, output: Tokens, reference: Tokens) -> bool:
        """First-word check (tasks.md §3.1)."""
        return bool(output) and bool(reference) and output[0] == reference[0]

    def is_withheld(self, sentence: Tokens) -> bool:
        """A subject with a relative clause."""
        return self.subject_modifier(sentence) == "RC"

    def gen_filter(self, sentence: Tokens) -> bool:
        """Exactly two auxiliaries, of the same number and opposite polarity."""
        auxiliaries = [t for t in sentence if t in QUESTION_AUXILIARIES]
        if len(auxiliaries) != 2:
            return False
        first, main = auxiliaries
        return AUX_NUMBER[first] == AUX_NUMBER[main] and first.endswith("n't") != main.endswith(
            "n't"
        )

    def spell(self, items: list, rng: random.Random) -> Tokens:
        out: Tokens = []
        for item in items:
            if isinstance(item, Slot):
                out += [PRESENT_AUX[(item.number, item.negated)], item.lemma]
            else:
                out.append(item)
        return out


TASK = QuestionFormation()
