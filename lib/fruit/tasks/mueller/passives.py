"""Passivization from Mueller et al.: English and German (docs/tasks.md §4.4, §4.7, §5.3, §9).

hierarchical rule (move-object): the object NP (with its PP) becomes the subject of a
    passive; the whole active subject NP (with its PP) becomes the agent;
linear rule (move-second): the second NP of the sentence becomes the subject, the
    first NP (without its PP) the agent; the object disappears.
Withheld from ``passiv`` examples: a prepositional phrase on the subject.
"""

from __future__ import annotations

from fruit.tasks.base import Tokens, first_index, second_word_match
from fruit.tasks.generation import GrammarTask, lexicon


class Passivization(GrammarTask):
    identity_marker = "decl"
    transform_marker = "passiv"
    partial_kind = "second-word"
    prepositions: frozenset[str]

    def subject_modifier(self, sentence: Tokens) -> str:
        return "PP" if len(sentence) > 2 and sentence[2] in self.prepositions else "none"

    def split(self, sentence: Tokens) -> tuple[Tokens, str, Tokens]:
        """(subject NP, verb, object NP) of ``Subject Verb Object .``."""
        i = 5 if self.subject_modifier(sentence) == "PP" else 2
        if len(sentence) < i + 4 or sentence[i] not in self.verbs or sentence[-1] != ".":
            raise self.malformed(
                sentence, "expected 'Det N [Prep Det N] Verb Det N [Prep Det N] .'"
            )
        return sentence[:i], sentence[i], sentence[i + 1 : -1]

    def withheld(self, sentence: Tokens) -> bool:
        return self.subject_modifier(sentence) == "PP"

    def partial_match(self, output: Tokens, reference: Tokens) -> bool:
        return second_word_match(output, reference)

    def second_np(self, sentence: Tokens) -> Tokens:
        """docs/tasks.md §5.3: from the first determiner at index >= 2, 'Det N' or 'Det N Prep Det N'."""
        j = first_index(sentence[2:], self.oblique_determiners)
        if j is None or j + 3 >= len(sentence):
            raise self.malformed(sentence, "no second noun phrase after the first two words")
        j += 2
        long = j + 2 < len(sentence) and sentence[j + 2] in self.prepositions
        return sentence[j : j + (5 if long else 2)]

    def first_verb(self, sentence: Tokens) -> str:
        i = first_index(sentence[2:], self.verbs)
        if i is None:
            raise self.malformed(sentence, "no verb after the first two words")
        return sentence[i + 2]


class EnglishPassivization(Passivization):
    slug = "passivization"
    grammar_file = "passivization.cfg"
    prepositions = frozenset({"around", "near", "with", "upon", "by", "behind", "above", "below"})
    oblique_determiners = frozenset({"the", "some", "my", "your", "our", "her"})

    @property
    def singular_nouns(self) -> frozenset[str]:
        return lexicon(self.grammar, "N_S")

    @property
    def verbs(self) -> frozenset[str]:
        return lexicon(self.grammar, "V_trans")

    def _passive(self, patient: Tokens, verb: str, agent: Tokens) -> Tokens:
        be = "was" if patient[1] in self.singular_nouns else "were"
        return [*patient, be, verb, "by", *agent, "."]

    def transform(self, sentence: Tokens) -> Tokens:
        subject, verb, obj = self.split(sentence)
        return self._passive(obj, verb, subject)

    def linear(self, sentence: Tokens) -> Tokens:
        return self._passive(self.second_np(sentence), self.first_verb(sentence), sentence[:2])


# German morphology (docs/tasks.md §4.7). Columns: nominative singular, accusative
# singular, dative singular, nominative = accusative plural, dative plural.
GERMAN_DETERMINERS = [
    ("der", "den", "dem", "die", "den"),
    ("ein", "einen", "einem", "einige", "einigen"),
    ("mein", "meinen", "meinem", "meine", "meinen"),
    ("dein", "deinen", "deinem", "deine", "deinen"),
    ("unser", "unseren", "unserem", "unsere", "unseren"),
    ("ihr", "ihren", "ihrem", "ihre", "ihren"),
]
GERMAN_NOUNS = [
    ("Molch", "Molch", "Molch", "Molche", "Molchen"),
    ("Löwe", "Löwen", "Löwen", "Löwen", "Löwen"),
    ("Pfau", "Pfau", "Pfau", "Pfaue", "Pfauen"),
    ("Kater", "Kater", "Kater", "Kater", "Katern"),
    ("Rabe", "Raben", "Raben", "Raben", "Raben"),
    ("Salamander", "Salamander", "Salamander", "Salamander", "Salamandern"),
    ("Dinosaurier", "Dinosaurier", "Dinosaurier", "Dinosaurier", "Dinosauriern"),
    ("Papagei", "Papagei", "Papagei", "Papageie", "Papageien"),
    ("Geier", "Geier", "Geier", "Geier", "Geiern"),
    ("Wellensittich", "Wellensittich", "Wellensittich", "Wellensittiche", "Wellensittichen"),
    ("Esel", "Esel", "Esel", "Esel", "Eseln"),
    ("Hund", "Hund", "Hund", "Hunde", "Hunden"),
    ("Ziesel", "Ziesel", "Ziesel", "Ziesel", "Zieseln"),
]
# past singular, past plural, passive participle
GERMAN_VERBS = [
    ("unterhielt", "unterhielten", "unterhalten"),
    ("amüsierte", "amüsierten", "amüsiert"),
    ("nervte", "nervten", "genervt"),
    ("erfreute", "erfreuten", "erfreut"),
    ("verwirrte", "verwirrten", "verwirrt"),
    ("bewunderte", "bewunderten", "bewundert"),
    ("akzeptierte", "akzeptierten", "akzeptiert"),
    ("bedauerte", "bedauerten", "bedauert"),
    ("tröstete", "trösteten", "getröstet"),
]
SG, PL = "sg", "pl"
# (number, case) -> column of the tables above
_COLUMN = {
    (SG, "nom"): 0,
    (SG, "acc"): 1,
    (SG, "dat"): 2,
    (PL, "nom"): 3,
    (PL, "acc"): 3,
    (PL, "dat"): 4,
}


def _inflect(table, form: str, number: str, cases: tuple[str, ...], to_case: str) -> str | None:
    """The ``to_case`` form (of ``number``) of the word whose form in one of ``cases`` is ``form``."""
    for row in table:
        if any(row[_COLUMN[number, case]] == form for case in cases):
            return row[_COLUMN[number, to_case]]
    return None


def _numbers(table, form: str, cases: tuple[str, ...]) -> set[str]:
    return {n for n in (SG, PL) if _inflect(table, form, n, cases, "nom") is not None}


class GermanPassivization(Passivization):
    slug = "passivization-in-german"
    grammar_file = "passivization-in-german.cfg"
    prepositions = frozenset({"bei", "neben", "hinter", "über", "unter"})
    # any accusative or dative determiner form (docs/tasks.md §5.3)
    oblique_determiners = frozenset(row[c] for row in GERMAN_DETERMINERS for c in (1, 2, 3, 4))
    verbs = frozenset(v for row in GERMAN_VERBS for v in row[:2])
    participle = {v: row[2] for row in GERMAN_VERBS for v in row[:2]}

    def _to_case(self, np: Tokens, number: str, cases: tuple[str, ...], to_case: str) -> Tokens:
        """Re-inflect the determiner and head noun of an NP; a PP after them stays."""
        det = noun = None
        if len(np) >= 2:
            det = _inflect(GERMAN_DETERMINERS, np[0], number, cases, to_case)
            noun = _inflect(GERMAN_NOUNS, np[1], number, cases, to_case)
        if det is None or noun is None:
            raise self.malformed(
                np, f"cannot read a determiner and noun ({number} {'/'.join(cases)})"
            )
        return [det, noun, *np[2:]]

    def _passive(self, patient: Tokens, number: str, verb: str, agent_dative: Tokens) -> Tokens:
        werden = "wurde" if number == SG else "wurden"
        return [*patient, werden, "von", *agent_dative, self.participle[verb], "."]

    def _agent(self, subject: Tokens) -> Tokens:
        number = SG if subject[0] in {row[0] for row in GERMAN_DETERMINERS} else PL
        return self._to_case(subject, number, ("nom",), "dat")

    def transform(self, sentence: Tokens) -> Tokens:
        subject, verb, obj = self.split(sentence)
        # The object's accusative determiner shows its number unambiguously.
        number = SG if obj[0] in {row[1] for row in GERMAN_DETERMINERS} else PL
        patient = self._to_case(obj, number, ("acc",), "nom")
        return self._passive(patient, number, verb, self._agent(subject))

    def linear(self, sentence: Tokens) -> Tokens:
        second = self.second_np(sentence)
        cases = ("acc", "dat")
        numbers = _numbers(GERMAN_DETERMINERS, second[0], cases) & _numbers(
            GERMAN_NOUNS, second[1], cases
        )
        number = PL if numbers == {PL} else SG  # ambiguous: singular (docs/tasks.md §5.3)
        patient = self._to_case(second, number, cases, "nom")
        return self._passive(patient, number, self.first_verb(sentence), self._agent(sentence[:2]))


NOMINATIVE_SINGULAR_DETERMINERS = frozenset(row[0] for row in GERMAN_DETERMINERS)
_WEAK_NOUN_FIX = {"Löwen": "Löwe", "Raben": "Rabe"}


def fix_german_passive(source: Tokens, target: Tokens) -> Tokens:
    """docs/tasks.md §9: the upstream files leave weak singular objects accusative
    (``der Löwen wurde ...``); give them their nominative form. Nothing else changes."""
    if (
        source[-1] == "passiv"
        and len(target) >= 2
        and target[0] in NOMINATIVE_SINGULAR_DETERMINERS
        and target[1] in _WEAK_NOUN_FIX
    ):
        return [target[0], _WEAK_NOUN_FIX[target[1]], *target[2:]]
    return target
