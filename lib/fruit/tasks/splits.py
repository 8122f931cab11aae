"""Writing a task's splits in the data-directory layout (docs/contracts.md §1).

``DIR/<task>/{train,dev,test,gen}.tsv`` plus ``DIR/<task>/gen.linear.tsv``, whose
targets are the linear-rule outputs (docs/tasks.md §5) of the gen sources.
"""

from __future__ import annotations

import os
from pathlib import Path

from fruit.errors import FruitError
from fruit.tasks import get_task
from fruit.tasks.base import SPLITS, Example, Task
from fruit.tasks.tsv import write_tsv


def linear_examples(task: Task, gen: list[Example]) -> list[Example]:
    """(source, linear-rule target) for every gen example."""
    return [(source, task.linear(source[:-1])) for source, _ in gen]


def write_task(out: str | os.PathLike, task: Task, splits: dict[str, list[Example]]) -> Path:
    """Write one task's four splits and its gen.linear.tsv; each file atomically."""
    folder = Path(out) / task.slug
    for split in SPLITS:
        write_tsv(folder / f"{split}.tsv", splits[split])
    write_tsv(folder / "gen.linear.tsv", linear_examples(task, splits["gen"]))
    return folder


def generate_task(out: str | os.PathLike, slug: str, seed: int, sizes=None) -> Path:
    """Sample one task's splits with a seed and write them."""
    task = get_task(slug)
    return write_task(out, task, task.generate(seed=seed, sizes=sizes))


def generate_train(task: Task, seed: int, size: int, exclude: set[str]) -> list[Example]:
    """``size`` generated training examples none of whose sentences (marker removed,
    tokens joined by spaces) is in ``exclude``."""
    extra = len(exclude) // 4 + 1000
    for _ in range(6):
        sizes = {"train": size + extra, "dev": 0, "test": 0, "gen": 0}
        examples = task.generate(seed=seed, sizes=sizes)["train"]
        kept = [e for e in examples if " ".join(e[0][:-1]) not in exclude]
        if len(kept) >= size:
            return kept[:size]
        extra *= 4
    raise FruitError(f"{task.slug}: cannot generate {size} training examples outside dev/test/gen")
