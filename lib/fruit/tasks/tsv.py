"""Reading and writing the data files: one ``SOURCE<TAB>TARGET`` line per example.

Fields are tokens joined by single spaces (docs/tasks.md §1). Reading checks the format
strictly and reports the file, the line and what was expected.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from fruit.errors import FruitError
from fruit.io import atomic_open

Example = tuple[list[str], list[str]]


def parse_line(line: str, where: str) -> Example:
    """Parse one line (without its newline); ``where`` is ``"file:line"`` for errors."""
    fields = line.split("\t")
    if len(fields) != 2:
        raise FruitError(
            f"{where}: expected 'SOURCE<TAB>TARGET' (exactly one tab), found {len(fields) - 1} tabs"
        )
    out = []
    for name, field in zip(("source", "target"), fields):
        tokens = [sys.intern(t) for t in field.split(" ")]
        if not field or "" in tokens:
            raise FruitError(
                f"{where}: expected the {name} as tokens separated by single spaces, "
                f"found {field!r}"
            )
        out.append(tokens)
    return out[0], out[1]


def read_tsv(path: str | os.PathLike) -> list[Example]:
    """All examples of a data file; a FruitError names ``file:line`` on bad input."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FruitError(f"{path}: file not found") from None
    except OSError as e:
        raise FruitError(f"{path}: cannot read ({e.strerror})") from None
    return parse_tsv(data, str(path))


def parse_tsv(data: bytes, name: str) -> list[Example]:
    """The examples of a file's bytes; ``name`` (a path or URL) is used in errors."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise FruitError(f"{name}:{line}: expected UTF-8 text") from None
    if text and not text.endswith("\n"):
        text += "\n"
    lines = text.split("\n")[:-1]
    examples = []
    for i, line in enumerate(lines, 1):
        if line.endswith("\r"):
            line = line[:-1]
        examples.append(parse_line(line, f"{name}:{i}"))
    return examples


def format_example(source: Sequence[str], target: Sequence[str]) -> str:
    return " ".join(source) + "\t" + " ".join(target) + "\n"


def write_tsv(path: str | os.PathLike, examples: Iterable[tuple[Sequence[str], Sequence[str]]]):
    """Write examples atomically (a reader never sees a half-written file)."""
    with atomic_open(path, "w") as f:
        for source, target in examples:
            f.write(format_example(source, target))
