"""Question formation from Mueller et al.: English with *have* and German (docs/tasks.md §4.2, §4.5).

hierarchical rule (move-main): front the main-clause auxiliary, the one right after
    the subject NP, and replace the final "." by "?";
linear rule (move-first, §5.1): front the first auxiliary of the sentence.
Withheld from ``quest`` examples: a relative clause on the subject.
"""

from __future__ import annotations

from fruit.tasks.base import (
    Tokens,
    auxiliary_pair,
    first_index,
    first_word_match,
    front,
    same_number_opposite_polarity,
)
from fruit.tasks.generation import GrammarTask


class QuestionFormation(GrammarTask):
    identity_marker = "decl"
    transform_marker = "quest"
    partial_kind = "first-word"
    auxiliaries: frozenset[str]
    prepositions: frozenset[str]
    relative_clause_openers: frozenset[str]  # the word after the subject's "Det N"

    def subject_end(self, sentence: Tokens) -> int | None:
        """Index of the first token after the subject NP (None: the sentence has none)."""
        raise NotImplementedError

    def subject_modifier(self, sentence: Tokens) -> str:
        # The word after "Det N" tells: a relative clause opener, a preposition or neither.
        third = sentence[2] if len(sentence) > 2 else None
        if third in self.relative_clause_openers:
            return "RC"
        return "PP" if third in self.prepositions else "none"

    def main_auxiliary(self, sentence: Tokens) -> int:
        i = self.subject_end(sentence)
        if i is None or i >= len(sentence) or sentence[i] not in self.auxiliaries:
            raise self.malformed(sentence, "no main auxiliary after the subject")
        return i

    def transform(self, sentence: Tokens) -> Tokens:
        return front(sentence, self.main_auxiliary(sentence))

    def linear(self, sentence: Tokens) -> Tokens:
        first = first_index(sentence, self.auxiliaries)
        if first is None:
            raise self.malformed(sentence, f"no auxiliary ({', '.join(sorted(self.auxiliaries))})")
        return front(sentence, first)

    def partial_match(self, output: Tokens, reference: Tokens) -> bool:
        return first_word_match(output, reference)

    def withheld(self, sentence: Tokens) -> bool:
        return self.subject_modifier(sentence) == "RC"

    def gen_class(self, annotated: Tokens, sentence: Tokens) -> str | None:
        pair = auxiliary_pair(sentence, self.auxiliaries)
        if pair is None or not self.contrasting(*pair):
            return None
        return self.relative_clause_kind(annotated, sentence)

    def contrasting(self, first: str, main: str) -> bool:
        """The gen filter on the two auxiliaries of a withheld sentence."""
        raise NotImplementedError

    def relative_clause_kind(self, annotated: Tokens, sentence: Tokens) -> str:
        """ "SRC" or "ORC": the subject's relative clause (the gen quota class)."""
        raise NotImplementedError

    def gen_quota(self, size: int) -> dict[str, int]:
        # Mueller's quota: at most 2/3 subject relative clauses, 1/3 object ones. The ORC
        # cap has one line of slack (3,334 of 10,000): the pool stops at `size`, so the
        # split is 6,667/3,333 when SRC fills first, else 6,666/3,334 (docs/tasks.md §4.2).
        src = round(2 * size / 3)
        return {"SRC": src, "ORC": size - src + 1}


class QuestionFormationWithHave(QuestionFormation):
    slug = "question-formation-with-have"
    grammar_file = "question-formation-with-have.cfg"
    auxiliaries = frozenset({"have", "has", "haven't", "hasn't"})
    singular_auxiliaries = frozenset({"has", "hasn't"})
    relative_clause_openers = frozenset({"who", "that"})
    prepositions = frozenset({"around", "near", "with", "upon", "by", "behind", "above", "below"})

    def subject_end(self, sentence: Tokens) -> int | None:
        # Every relative clause holds exactly one auxiliary (docs/tasks.md §4.1): after a
        # subject RC the main auxiliary is the second one, otherwise the first.
        auxiliaries = [i for i, token in enumerate(sentence) if token in self.auxiliaries]
        nth = 1 if self.subject_modifier(sentence) == "RC" else 0
        return auxiliaries[nth] if len(auxiliaries) > nth else None

    def contrasting(self, first: str, main: str) -> bool:
        return same_number_opposite_polarity(first, main, self.singular_auxiliaries)

    def relative_clause_kind(self, annotated: Tokens, sentence: Tokens) -> str:
        # SRC: the relative pronoun is followed by the auxiliary; ORC: by the RC's subject.
        return "SRC" if sentence[3] in self.auxiliaries else "ORC"


class QuestionFormationInGerman(QuestionFormation):
    slug = "question-formation-in-german"
    grammar_file = "question-formation-in-german.cfg"
    auxiliaries = frozenset({"kann", "können", "hat", "haben"})
    modal = frozenset({"kann", "können"})
    singular_auxiliaries = frozenset({"kann", "hat"})
    prepositions = frozenset({"bei", "neben", "hinter", "über", "unter"})
    relative_clause_openers = frozenset({","})

    def subject_end(self, sentence: Tokens) -> int | None:
        modifier = self.subject_modifier(sentence)
        if modifier == "RC":  # the relative clause runs up to its closing comma
            close = first_index(sentence[3:], {","})
            return None if close is None else close + 4
        return 5 if modifier == "PP" else 2

    def contrasting(self, first: str, main: str) -> bool:
        same_number = (first in self.singular_auxiliaries) == (main in self.singular_auxiliaries)
        return same_number and (first in self.modal) != (main in self.modal)

    def relative_clause_kind(self, annotated: Tokens, sentence: Tokens) -> str:
        # The relative pronoun's annotation says which rule made the RC: {RN}
        # (nominative pronoun: subject RC) or {RA} (accusative: object RC). The
        # surface form alone is ambiguous for plural "die".
        marker = next(t for t in annotated if t in ("{RN}", "{RA}"))
        return "SRC" if marker == "{RN}" else "ORC"
