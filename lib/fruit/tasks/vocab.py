"""The vocabulary of a task (docs/paper.md §1).

Content types are the whitespace-separated tokens of the training file (source and
target pooled), sorted by code point, with ids 0..V-1. Two special symbols follow:
EOS = V (the output vocabulary has V+1 entries) and BOS = V+1 (transformer input).
There is no UNK: encoding an unknown token is an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fruit.errors import FruitError

EOS = "<eos>"
BOS = "<bos>"


class Vocabulary:
    def __init__(self, types: Iterable[str]):
        types = sorted(set(types))
        for t in types:
            if not t or any(c.isspace() for c in t):
                raise FruitError(f"invalid vocabulary token {t!r}: tokens are non-empty, no spaces")
        self.types: tuple[str, ...] = tuple(types)
        self._ids = {t: i for i, t in enumerate(self.types)}

    @classmethod
    def from_examples(cls, examples: Iterable[tuple[Sequence[str], Sequence[str]]]) -> Vocabulary:
        """All types of the sources and targets of (training) examples."""
        types: set[str] = set()
        for source, target in examples:
            types.update(source)
            types.update(target)
        return cls(types)

    @property
    def size(self) -> int:
        """V, the number of content types."""
        return len(self.types)

    @property
    def eos_id(self) -> int:
        return len(self.types)

    @property
    def bos_id(self) -> int:
        return len(self.types) + 1

    def __len__(self) -> int:
        return len(self.types)

    def __contains__(self, token: str) -> bool:
        return token in self._ids

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self.types == other.types

    def __repr__(self) -> str:
        return f"Vocabulary(size={self.size})"

    def check_known(self, examples: Iterable[tuple[Sequence[str], Sequence[str]]], name: str):
        """Every token of ``examples`` (sources and targets) is in the vocabulary; else a
        FruitError naming ``name:line`` and the token (there is no <unk>: a model could
        never read or produce it). Run on every split before training starts."""
        for i, (source, target) in enumerate(examples, 1):
            for part, tokens in (("source", source), ("target", target)):
                unknown = [t for t in tokens if t not in self._ids]
                if unknown:
                    raise FruitError(
                        f"{name}:{i}: the {part} token {unknown[0]!r} is not in the vocabulary "
                        "(the tokens of the training file; there is no <unk>)"
                    )

    def encode(self, tokens: Sequence[str]) -> list[int]:
        try:
            return [self._ids[t] for t in tokens]
        except KeyError as e:
            raise FruitError(
                f"token {e.args[0]!r} is not in the vocabulary (built from the training file; "
                "there is no <unk>)"
            ) from None

    def decode(self, ids: Iterable[int]) -> list[str]:
        out = []
        for i in ids:
            i = int(i)
            if 0 <= i < len(self.types):
                out.append(self.types[i])
            elif i == self.eos_id:
                out.append(EOS)
            elif i == self.bos_id:
                out.append(BOS)
            else:
                raise FruitError(f"id {i} is outside the vocabulary (0..{self.bos_id})")
        return out
