"""Question formation from Mueller et al.: English with *have* and German (tasks.md §4.2, §4.5).

hierarchical rule (move-main): front the main-clause auxiliary, the one right after
    the subject NP, and replace the final "." by "?";
linear rule (move-first, §5.1): front the first auxiliary of the sentence.
Withheld from ``quest`` examples: a relative clause on the subject.
"""

from __future__ import annotations

from fruit.tasks.base import Tokens, first_word_match
from fruit.tasks.generation import GrammarTask


class QuestionFormation(GrammarTask):
    identity_marker = "decl"
    transform_marker = "quest"
    partial_kind = "first-word"
    auxiliaries: frozenset[str]
    prepositions: frozenset[str]

    def subject_end(self, sentence: Tokens) -> int:
        """Index of the first token after the subject NP."""
        raise NotImplementedError

    def subject_modifier(self, sentence: Tokens) -> str:
        raise NotImplementedError

    def main_auxiliary(self, sentence: Tokens) -> int:
        i = self.subject_end(sentence)
        if i >= len(sentence) or sentence[i] not in self.auxiliaries:
            raise ValueError(f"{self.slug}: no main auxiliary after the subject in {sentence}")
        return i

    def transform(self, sentence: Tokens) -> Tokens:
        return _front(sentence, self.main_auxiliary(sentence))

    def linear(self, sentence: Tokens) -> Tokens:
        first = next(i for i, token in enumerate(sentence) if token in self.auxiliaries)
        return _front(sentence, first)

    def partial_match(self, output: Tokens, reference: Tokens) -> bool:
        return first_word_match(output, reference)

    def withheld(self, sentence: Tokens) -> bool:
        return self.subject_modifier(sentence) == "RC"

    def gen_quota(self, size: int) -> dict[str, int]:
        # Mueller's quota: at most 2/3 subject relative clauses, 1/3 object ones.
        src = round(2 * size / 3)
        return {"SRC": src, "ORC": size - src + 1}


def _front(sentence: Tokens, i: int) -> Tokens:
    """sentence[i], the rest in order, with the final '.' replaced by '?'."""
    assert sentence[-1] == ".", sentence
    return [sentence[i], *sentence[:i], *sentence[i + 1 : -1], "?"]


class QuestionFormationWithHave(QuestionFormation):
    slug = "question-formation-with-have"
    grammar_file = "question-formation-with-have.cfg"
    auxiliaries = frozenset({"have", "has", "haven't", "hasn't"})
    singular_auxiliaries = frozenset({"has", "hasn't"})
    relative_pronouns = frozenset({"who", "that"})
    prepositions = frozenset({"around", "near", "with", "upon", "by", "behind", "above", "below"})

    def subject_modifier(self, sentence: Tokens) -> str:
        third = sentence[2] if len(sentence) > 2 else None
        if third in self.relative_pronouns:
            return "RC"
        return "PP" if third in self.prepositions else "none"

    def subject_end(self, sentence: Tokens) -> int:
        # Every relative clause holds exactly one auxiliary (tasks.md §4.1): after a
        # subject RC the main auxiliary is the second one, otherwise the first.
        auxiliaries = [i for i, token in enumerate(sentence) if token in self.auxiliaries]
        return auxiliaries[1] if self.subject_modifier(sentence) == "RC" else auxiliaries[0]

    def gen_class(self, annotated: Tokens, sentence: Tokens) -> str | None:
        auxiliaries = [t for t in sentence if t in self.auxiliaries]
        if len(auxiliaries) != 2:
            return None
        a, b = auxiliaries
        same_number = (a in self.singular_auxiliaries) == (b in self.singular_auxiliaries)
        opposite_polarity = a.endswith("n't") != b.endswith("n't")
        if not (same_number and opposite_polarity):
            return None
        # SRC: the relative pronoun is followed by the auxiliary; ORC: by the RC's subject.
        return "SRC" if sentence[3] in self.auxiliaries else "ORC"


class QuestionFormationInGerman(QuestionFormation):
    slug = "question-formation-in-german"
    grammar_file = "question-formation-in-german.cfg"
    auxiliaries = frozenset({"kann", "können", "hat", "haben"})
    modal = frozenset({"kann", "können"})
    singular_auxiliaries = frozenset({"kann", "hat"})
    prepositions = frozenset({"bei", "neben", "hinter", "über", "unter"})

    def subject_modifier(self, sentence: Tokens) -> str:
        third = sentence[2] if len(sentence) > 2 else None
        if third == ",":
            return "RC"
        return "PP" if third in self.prepositions else "none"

    def subject_end(self, sentence: Tokens) -> int:
        modifier = self.subject_modifier(sentence)
        if modifier == "RC":  # the relative clause runs up to its closing comma
            return sentence.index(",", 3) + 1
        return 5 if modifier == "PP" else 2

    def gen_class(self, annotated: Tokens, sentence: Tokens) -> str | None:
        auxiliaries = [t for t in sentence if t in self.auxiliaries]
        if len(auxiliaries) != 2:
            return None
        a, b = auxiliaries
        same_number = (a in self.singular_auxiliaries) == (b in self.singular_auxiliaries)
        one_modal = (a in self.modal) != (b in self.modal)
        if not (same_number and one_modal):
            return None
        # The relative pronoun's annotation says which rule made the RC: {RN}
        # (nominative pronoun: subject RC) or {RA} (accusative: object RC). The
        # surface form alone is ambiguous for plural "die".
        marker = next(t for t in annotated if t in ("{RN}", "{RA}"))
        return "SRC" if marker == "{RN}" else "ORC"
