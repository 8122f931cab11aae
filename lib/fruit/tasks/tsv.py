"""Reading and writing the data files: one ``SOURCE<TAB>TARGET`` line per example.

Fields are tokens joined by single spaces (docs/tasks.md §1). Every data file fruit
reads -- generated, published, downloaded or a user's own -- goes through ``parse_tsv``,
which checks the format strictly and reports the file, the line and what was expected.
One policy for encodings and line ends, the same for every file:

* UTF-8 only. A UTF-8 byte-order mark at the very start (some Windows editors write
  one) is dropped: it is never part of the first token. A file in UTF-16 or UTF-32
  (recognised by its byte-order mark) or with bytes that are not UTF-8 is refused.
* Lines end in LF or CRLF (the CR is dropped); the last line may lack its line end.
  A carriage return anywhere else (old Mac line ends) is refused.
* Tokens are non-empty and separated by single ASCII spaces. Any other whitespace
  (tab inside a field, no-break space, ...), control character or invisible format
  character (zero-width space, a byte-order mark inside the file, ...) is refused with
  its code point: it would silently become part of a token and of the vocabulary.
* Every line holds an example: an empty line is refused.

Writing is always UTF-8, LF, no byte-order mark, atomically.
"""

from __future__ import annotations

import codecs
import os
import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

from fruit.errors import FruitError
from fruit.io import atomic_open

Example = tuple[list[str], list[str]]

# Characters no token may hold: whitespace other than the separating space (the tab is
# split off first), C0/C1 controls, and the invisible format characters editors insert.
_FORBIDDEN = re.compile(
    r"[^\S ]|[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f"
    r"\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
_WIDE_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


_CONTROL_NAMES = {"\r": "CARRIAGE RETURN", "\t": "TAB", "\x00": "NUL", "\x0b": "LINE TABULATION"}


def _character(c: str) -> str:
    return f"U+{ord(c):04X} ({_CONTROL_NAMES.get(c) or unicodedata.name(c, 'a control character')})"


def parse_line(line: str, where: str) -> Example:
    """Parse one line (without its line end); ``where`` is ``"file:line"`` for errors."""
    bad = _FORBIDDEN.search(line.replace("\t", " "))
    if bad:
        hint = " (old Mac line ends? use LF or CRLF)" if bad.group() == "\r" else ""
        raise FruitError(
            f"{where}: the character {_character(bad.group())} at column {bad.start() + 1} "
            f"is not allowed in a token{hint}"
        )
    fields = line.split("\t")
    if not line.strip():
        raise FruitError(f"{where}: an empty line (expected 'SOURCE<TAB>TARGET')")
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
    """The examples of a file's bytes; ``name`` (a path or URL) is used in errors.
    The policy for encodings and line ends is the module's (see above)."""
    if data.startswith(_WIDE_BOMS):
        raise FruitError(f"{name}: the file is UTF-16 or UTF-32 text; save it as UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
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


def check_sources(examples: Sequence[Example], markers: Sequence[str], name: str) -> None:
    """Every source is a sentence followed by one of ``markers`` (a task's identity and
    transformation markers); a FruitError names ``name:line`` otherwise."""
    for i, (source, _) in enumerate(examples, 1):
        if source[-1] not in markers or len(source) < 2:
            wanted = " or ".join(repr(m) for m in markers)
            found = " ".join(source)
            if len(found) > 80:  # a whole long line would make a megabyte of an error
                found = found[:60] + f" ... ({len(found):,} characters)"
            raise FruitError(
                f"{name}:{i}: expected a source ending in the marker {wanted} "
                f"after at least one word, found {found!r}"
            )


def format_example(source: Sequence[str], target: Sequence[str]) -> str:
    return " ".join(source) + "\t" + " ".join(target) + "\n"


def write_tsv(path: str | os.PathLike, examples: Iterable[tuple[Sequence[str], Sequence[str]]]):
    """Write examples atomically (a reader never sees a half-written file)."""
    with atomic_open(path, "w") as f:
        for source, target in examples:
            f.write(format_example(source, target))
