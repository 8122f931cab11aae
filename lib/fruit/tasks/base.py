"""The interface every task implements (see docs/contracts.md §1)."""

from __future__ import annotations

from abc import ABC, abstractmethod

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
        """The linear-rule output (tasks.md §5)."""

    @abstractmethod
    def accepts(self, sentence: Tokens) -> bool:
        """Whether the task's grammar generates this marker-free sentence."""

    @abstractmethod
    def partial_match(self, output: Tokens, reference: Tokens) -> bool:
        """The paper's partial-accuracy check of one output against one reference."""

    @abstractmethod
    def generate(self, seed: int, sizes: dict[str, int] | None = None) -> dict[str, list[Example]]:
        """Sample the splits (tasks.md §2); same seed, same output."""

    def subject_modifier(self, sentence: Tokens) -> str:
        """What modifies the subject NP of a marker-free sentence: "none", "PP" or "RC".

        Used for the split statistics (subject relative-clause and prepositional-phrase
        shares, tasks.md §4). Every task overrides it.
        """
        raise NotImplementedError(f"{self.slug}: subject_modifier is not implemented")

    def target(self, source: Tokens) -> Tokens:
        """The published-style target of a source that ends in a marker."""
        *sentence, marker = source
        if marker == self.identity_marker:
            return list(sentence)
        if marker == self.transform_marker:
            return self.transform(sentence)
        raise ValueError(
            f"{self.slug}: unknown marker {marker!r}; expected "
            f"{self.identity_marker!r} or {self.transform_marker!r}"
        )


def first_word_match(output: Tokens, reference: Tokens) -> bool:
    """Question formation partial accuracy (tasks.md §3.1): same first word."""
    return len(output) >= 1 and len(reference) >= 1 and output[0] == reference[0]


def second_word_match(output: Tokens, reference: Tokens) -> bool:
    """Passivization partial accuracy (tasks.md §3.3): same second word."""
    return len(output) >= 2 and len(reference) >= 2 and output[1] == reference[1]
