"""The Mueller et al. split-generation pipeline (docs/tasks.md §2.1), for grammar-based tasks.

1. sample a sentence top-down from the grammar (annotation markers included);
2. skip it if the same annotated string was sampled before (global de-duplication);
3. flip a fair coin for the marker;
4. a transformation-marked sentence with the *withheld* structure goes to the gen pool
   (if it passes the task's gen filter and quota), anything else to the
   in-distribution pool, each only while the pool is not full;
5. shuffle; train, dev and test are consecutive slices of the in-distribution pool.

De-duplication makes the mix of a split depend on the size of the pool (frequent
short sentences run out), so the pools are never smaller than at the paper's sizes
(111,000 + 10,000): smaller splits are prefixes of the paper-size splits of the same
seed and have the published distribution.

We also never put the same (surface sentence, marker) pair in two places, so that no
train source can equal a test or gen source even where two derivations give the
same surface string (German question formation).
"""

from __future__ import annotations

import random
from abc import abstractmethod
from functools import cached_property

from fruit.errors import FruitError
from fruit.tasks.base import PAPER_SIZES, SPLITS, Example, Task, Tokens
from fruit.tasks.grammar import Grammar, strip


def full_sizes(sizes: dict[str, int] | None) -> dict[str, int]:
    sizes = {**PAPER_SIZES, **(sizes or {})}
    unknown = set(sizes) - set(SPLITS)
    if unknown:
        raise FruitError(
            f"unknown split {sorted(unknown)[0]!r}; valid choices: {', '.join(SPLITS)}"
        )
    if any(not isinstance(n, int) or n < 0 for n in sizes.values()):
        raise FruitError(f"split sizes must be non-negative integers, got {sizes}")
    return sizes


class GrammarTask(Task):
    """A task whose sentences are samples of a weighted grammar."""

    grammar_file: str

    @cached_property
    def grammar(self) -> Grammar:
        return Grammar.load(self.grammar_file)

    def accepts(self, sentence: Tokens) -> bool:
        return self.grammar.accepts(sentence)

    @abstractmethod
    def withheld(self, sentence: Tokens) -> bool:
        """Whether the sentence has the structure withheld from transformation examples."""

    def gen_class(self, annotated: Tokens, sentence: Tokens) -> str | None:
        """The quota class of a withheld sentence, or None if it fails the gen filter."""
        return "all"

    def gen_quota(self, size: int) -> dict[str, int]:
        """The most gen examples of each class."""
        return {"all": size}

    def generate(self, seed: int, sizes: dict[str, int] | None = None) -> dict[str, list[Example]]:
        sizes = full_sizes(sizes)
        rng = random.Random(f"fruit:{self.slug}:{seed}")
        # Slots in the shuffled pools: each split starts where its paper-size slot starts.
        room = {split: max(sizes[split], PAPER_SIZES[split]) for split in SPLITS}
        n_in = room["train"] + room["dev"] + room["test"]
        n_gen = room["gen"]
        quota = self.gen_quota(n_gen)
        taken = dict.fromkeys(quota, 0)
        in_pool: list[Tokens] = []
        gen_pool: list[Tokens] = []
        seen_annotated: set[str] = set()
        used_sources: set[str] = set()
        budget = 50 * (n_in + n_gen) + 100_000
        for _ in range(budget):
            if len(in_pool) >= n_in and len(gen_pool) >= n_gen:
                break
            annotated = self.grammar.sample(rng)
            key = " ".join(annotated)
            if key in seen_annotated:
                continue
            seen_annotated.add(key)
            transform = rng.random() < 0.5
            sentence = strip(annotated)
            marker = self.transform_marker if transform else self.identity_marker
            source = " ".join(sentence) + " " + marker
            if source in used_sources:
                continue
            if transform and self.withheld(sentence):
                if len(gen_pool) >= n_gen:
                    continue
                kind = self.gen_class(annotated, sentence)
                if kind is None or taken.get(kind, 0) >= quota.get(kind, 0):
                    continue
                taken[kind] += 1
                gen_pool.append(sentence + [marker])
            else:
                if len(in_pool) >= n_in:
                    continue
                in_pool.append(sentence + [marker])
            used_sources.add(source)
        else:
            raise FruitError(
                f"{self.slug}: could not fill the splits {sizes} within {budget} samples "
                "(the grammar's language may be too small for these sizes)"
            )
        rng.shuffle(in_pool)
        rng.shuffle(gen_pool)
        a, b = room["train"], room["train"] + room["dev"]
        sources = {
            "train": in_pool[: sizes["train"]],
            "dev": in_pool[a : a + sizes["dev"]],
            "test": in_pool[b : b + sizes["test"]],
            "gen": gen_pool[: sizes["gen"]],
        }
        return {
            split: [(source, self.target(source)) for source in sources[split]] for split in SPLITS
        }


def lexicon(grammar: Grammar, *symbols: str) -> frozenset[str]:
    """The words that the given pre-terminal symbols rewrite to."""
    return frozenset(r.rhs[0] for s in symbols for r in grammar.by_lhs[s])
