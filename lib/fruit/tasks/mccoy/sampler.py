"""Expanding a McCoy template (subject modifier, object type) into a sentence of verb slots.

A sampled sentence is a list of words and ``Slot`` s; each task spells the slots
(``McCoyTask.spell``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fruit.tasks.mccoy.lexicon import (
    DETERMINERS,
    NOUNS_PL,
    NOUNS_SG,
    PREPOSITIONS,
    RELATIVIZERS,
    VERBS_INTRANS,
    VERBS_TRANS,
)


@dataclass(frozen=True)
class Slot:
    """A verb slot before spelling: its lemma, its agreement number, its polarity."""

    lemma: str
    number: str
    negated: bool


# Number patterns (head, PP noun) and weights for a PP-modified noun phrase.
PP_NUMBERS_FREE = (
    (("sg", "sg"), 1.0),
    (("sg", "pl"), 1.0),
    (("pl", "sg"), 1.0),
    (("pl", "pl"), 1.0),
)


class Sampler:
    """Expands a template (subject modifier, object type) into a sentence of slots."""

    def __init__(self, rng: random.Random, pp_numbers):
        self.rng = rng
        self.pp_patterns = [p for p, _ in pp_numbers]
        self.pp_weights = [w for _, w in pp_numbers]

    def noun(self, number: str) -> str:
        return self.rng.choice(NOUNS_SG if number == "sg" else NOUNS_PL)

    def slot(self, verbs, number: str) -> Slot:
        return Slot(self.rng.choice(verbs), number, self.rng.random() < 0.5)

    def noun_phrase(self, modifier: str) -> tuple[str, list]:
        """(head number, items) of ``Det N`` + modifier."""
        rng = self.rng
        if modifier == "PP":
            ((number, pp_number),) = rng.choices(self.pp_patterns, self.pp_weights)
        else:
            number = rng.choice(("sg", "pl"))
        items = [rng.choice(DETERMINERS), self.noun(number)]
        if modifier == "PP":
            items += [rng.choice(PREPOSITIONS), rng.choice(DETERMINERS), self.noun(pp_number)]
        elif modifier != "none":
            inner = rng.choice(("sg", "pl"))
            items.append(rng.choice(RELATIVIZERS))
            if modifier == "SRC-intrans":
                items.append(self.slot(VERBS_INTRANS, number))
            elif modifier == "SRC-trans":
                items += [self.slot(VERBS_TRANS, number), rng.choice(DETERMINERS), self.noun(inner)]
            else:  # ORC
                items += [rng.choice(DETERMINERS), self.noun(inner), self.slot(VERBS_TRANS, inner)]
        return number, items

    def sentence(self, subject_modifier: str, object_type: str) -> list:
        number, items = self.noun_phrase(subject_modifier)
        if object_type == "intrans":
            items.append(self.slot(VERBS_INTRANS, number))
        else:
            items.append(self.slot(VERBS_TRANS, number))
            items += self.noun_phrase(object_type)[1]
        items.append(".")
        return items
