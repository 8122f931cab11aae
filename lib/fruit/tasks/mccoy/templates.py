"""The template tables of docs/tasks.md Appendix A and their allocation to split sizes."""

from __future__ import annotations

from fruit.tasks.mccoy.lexicon import OBJECT_TYPES


def allocate(total: int, weights: list[float]) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainders; deterministic)."""
    s = sum(weights)
    if total <= 0 or s <= 0:
        return [0] * len(weights)
    exact = [total * w / s for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (counts[i] - exact[i], i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


# A template: (marker kind, subject modifier, object type) -> count.
Table = dict[tuple[str, str, str], int]


def table(rows: str, marker: str) -> Table:
    """Parse an Appendix A block: one line per subject modifier, six object-type counts."""
    out: Table = {}
    for line in rows.strip().splitlines():
        modifier, *counts = line.split()
        for object_type, count in zip(OBJECT_TYPES, counts):
            if int(count):
                out[(marker, modifier, object_type)] = int(count)
    return out
