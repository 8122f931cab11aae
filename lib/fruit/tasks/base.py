"""The interface every task implements (see docs/contracts.md §1)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection

from fruit.errors import FruitError

Tokens = list[str]
Example = tuple[Tokens, Tokens]  # (source including marker, target)

SPLITS = ("train", "dev", "test", "gen")
PAPER_SIZES = {"train": 100_000, "dev": 1_000, "test": 10_000, "gen": 10_000}


class Task(ABC):
    """One syntactic transformation task.

    Sentences are lists of tokens. A *source* is a sentence followed by its task
    marker; a *sentence* (as taken by ``transform``/``linear``/``accepts``) is the
    source without the marker.
    """

    slug: str
    identity_marker: str
    transform_marker: str
    partial_kind: str  # "first-word" | "pos-main-verb" | "second-word"

    @abstractmethod
    def transform(self, sentence: Tokens) -> Tokens:
        """The hierarchical (correct) output for the transformation marker."""

    @abstractmethod
    def linear(self, sentence: Tokens) -> Tokens:
        """The linear-rule output (docs/tasks.md §5)."""

    @abstractmethod
    def accepts(self, sentence: Tokens) -> bool:
        """Whether the task's grammar generates this marker-free sentence."""

    @abstractmethod
    def partial_match(self, output: Tokens, reference: Tokens) -> bool:
        """The paper's partial-accuracy check of one output against one reference."""

    @abstractmethod
    def generate(self, seed: int, sizes: dict[str, int] | None = None) -> dict[str, list[Example]]:
        """Sample the splits (docs/tasks.md §2); same seed, same output."""

    def subject_modifier(self, sentence: Tokens) -> str:
        """What modifies the subject NP of a marker-free sentence: "none", "PP" or "RC".

        Used for the split statistics (subject relative-clause and prepositional-phrase
        shares, docs/tasks.md §4). Every task overrides it.
        """
        raise NotImplementedError(f"{self.slug}: subject_modifier is not implemented")

    def target(self, source: Tokens) -> Tokens:
        """The published-style target of a source that ends in a marker."""
        marker = source[-1] if source else None
        if marker == self.identity_marker:
            return list(source[:-1])
        if marker == self.transform_marker:
            return self.transform(list(source[:-1]))
        raise FruitError(
            f"{self.slug}: unknown marker {marker!r} at the end of {' '.join(source)!r}; "
            f"valid choices: {self.identity_marker}, {self.transform_marker}"
        )

    def malformed(self, sentence: Tokens, problem: str) -> FruitError:
        """The error for a sentence that a rule cannot apply to."""
        return FruitError(f"{self.slug}: {problem} in {' '.join(sentence)!r}")


# ------------------------------------------------------------- shared rule pieces


def first_index(sentence: Tokens, words: Collection[str]) -> int | None:
    """Index of the first token of ``sentence`` that is one of ``words`` (None: none is)."""
    return next((i for i, token in enumerate(sentence) if token in words), None)


def front(sentence: Tokens, i: int) -> Tokens:
    """Question formation: ``sentence[i]`` first, the rest in order, the final '.' made '?'.

    FruitError if the sentence does not end in '.' (or ``i`` is that '.').
    """
    if not sentence or sentence[-1] != ".":
        raise FruitError(f"expected a sentence ending in '.', got {' '.join(sentence)!r}")
    if not 0 <= i < len(sentence) - 1:
        raise FruitError(f"no word {i + 1} to front in {' '.join(sentence)!r}")
    return [sentence[i], *sentence[:i], *sentence[i + 1 : -1], "?"]


def auxiliary_pair(sentence: Tokens, auxiliaries: Collection[str]) -> tuple[str, str] | None:
    """The two auxiliaries of a sentence, in order; None unless it has exactly two."""
    found = [token for token in sentence if token in auxiliaries]
    return (found[0], found[1]) if len(found) == 2 else None


def same_number_opposite_polarity(a: str, b: str, singular: Collection[str]) -> bool:
    """The English question gen filter (docs/tasks.md §4.1, §4.5): both auxiliaries singular
    or both plural, exactly one of them negated ("n't")."""
    return (a in singular) == (b in singular) and a.endswith("n't") != b.endswith("n't")


def first_word_match(output: Tokens, reference: Tokens) -> bool:
    """Question formation partial accuracy (docs/tasks.md §3.1): same first word."""
    return len(output) >= 1 and len(reference) >= 1 and output[0] == reference[0]


def second_word_match(output: Tokens, reference: Tokens) -> bool:
    """Passivization partial accuracy (docs/tasks.md §3.3): same second word."""
    return len(output) >= 2 and len(reference) >= 2 and output[1] == reference[1]
