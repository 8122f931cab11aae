"""One structural parser for the three spellings of a McCoy sentence (docs/tasks.md §2.2).

``Det N`` noun phrases, optionally modified by a PP (``Prep Det N``) or a relative
clause, and a main clause ``Subject VerbGroup (Object) .``; a verb group is
``Aux V`` or a tensed ``V``. The grammar files are the independent check
(``fruit.tasks.grammar`` recognizes them).
"""

from __future__ import annotations

from dataclasses import dataclass

from fruit.errors import FruitError
from fruit.tasks.base import Tokens
from fruit.tasks.mccoy.lexicon import (
    AUXILIARIES,
    DETERMINERS,
    LEMMA,
    NUMBER,
    PREPOSITIONS,
    RELATIVIZERS,
    VERBS_INTRANS,
    VERBS_TRANS,
)

_DET = frozenset(DETERMINERS)
_PREP = frozenset(PREPOSITIONS)
_REL = frozenset(RELATIVIZERS)


@dataclass(frozen=True)
class NounPhrase:
    """``Det N`` with its modifier; indices into the sentence."""

    head: int  # the head noun
    end: int  # one past the last token
    modifier: str  # one of MODIFIERS
    inner: int | None = None  # the PP's noun, the ORC's subject or the SRC-trans object
    finite: int | None = None  # the RC's finite word (auxiliary or tensed verb)

    @property
    def controller(self) -> int | None:
        """The noun the RC's finite word agrees with (SRC: the head; ORC: its own subject)."""
        if self.finite is None:
            return None
        return self.inner if self.modifier == "ORC" else self.head


@dataclass(frozen=True)
class Parse:
    """The structure of a McCoy sentence (marker-free, ending in ``.``)."""

    subject: NounPhrase
    finite: int  # the main clause's finite word (auxiliary or tensed verb)
    object: NounPhrase | None

    @property
    def object_type(self) -> str:
        return "intrans" if self.object is None else self.object.modifier

    def agreement(self) -> list[tuple[int, int]]:
        """(finite word, the noun it agrees with) for every clause, left to right."""
        pairs = [(self.subject.finite, self.subject.controller), (self.finite, self.subject.head)]
        if self.object is not None:
            pairs.append((self.object.finite, self.object.controller))
        return sorted((f, c) for f, c in pairs if f is not None)


class _ParseError(Exception):
    pass


def _expect(tokens: Tokens, i: int, words, what: str) -> None:
    if i >= len(tokens) or tokens[i] not in words:
        found = repr(tokens[i]) if i < len(tokens) else "the end"
        raise _ParseError(f"expected {what} at token {i + 1}, found {found}")


def _verb_group(tokens: Tokens, i: int) -> tuple[int, int]:
    """(finite word, one past the lexical verb): ``Aux V`` or a tensed ``V``."""
    finite = i
    if i < len(tokens) and tokens[i] in AUXILIARIES:
        i += 1
    _expect(tokens, i, LEMMA, "a verb")
    return finite, i + 1


def _noun_phrase(tokens: Tokens, i: int) -> NounPhrase:
    _expect(tokens, i, _DET, "a determiner")
    _expect(tokens, i + 1, NUMBER, "a noun")
    head, j = i + 1, i + 2
    if j < len(tokens) and tokens[j] in _PREP:
        _expect(tokens, j + 1, _DET, "a determiner")
        _expect(tokens, j + 2, NUMBER, "a noun")
        return NounPhrase(head, j + 3, "PP", inner=j + 2)
    if j < len(tokens) and tokens[j] in _REL:
        if j + 1 < len(tokens) and tokens[j + 1] in _DET:  # ORC: Rel Det N (Aux) V_trans
            _expect(tokens, j + 2, NUMBER, "a noun")
            finite, k = _verb_group(tokens, j + 3)
            if LEMMA[tokens[k - 1]] not in VERBS_TRANS:
                raise _ParseError(f"expected a transitive verb at token {k}")
            return NounPhrase(head, k, "ORC", inner=j + 2, finite=finite)
        finite, k = _verb_group(tokens, j + 1)
        if LEMMA[tokens[k - 1]] in VERBS_INTRANS:
            return NounPhrase(head, k, "SRC-intrans", finite=finite)
        _expect(tokens, k, _DET, "a determiner")
        _expect(tokens, k + 1, NUMBER, "a noun")
        return NounPhrase(head, k + 2, "SRC-trans", inner=k + 1, finite=finite)
    return NounPhrase(head, j, "none")


def parse(sentence: Tokens) -> Parse:
    """The structure of a marker-free sentence; FruitError if it has none."""
    try:
        subject = _noun_phrase(sentence, 0)
        finite, k = _verb_group(sentence, subject.end)
        obj = None
        if LEMMA[sentence[k - 1]] in VERBS_TRANS:
            obj = _noun_phrase(sentence, k)
            k = obj.end
        _expect(sentence, k, {"."}, "'.'")
        if k + 1 != len(sentence):
            raise _ParseError(f"expected the end after '.' at token {k + 1}")
    except _ParseError as e:
        raise FruitError(
            f"not a sentence of the McCoy grammars: {' '.join(sentence)!r}: {e}"
        ) from None
    return Parse(subject, finite, obj)


def subject_modifier_of(sentence: Tokens) -> str:
    """ "none" | "PP" | "RC" for the sentence's subject."""
    modifier = parse(sentence).subject.modifier
    return modifier if modifier in ("none", "PP") else "RC"
