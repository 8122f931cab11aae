"""Every documentation reference in the repository resolves inside the repository.

Code, tests, notebooks, benchmarks and the docs point to sections of the Markdown
files in ``docs/`` in three forms:

* ``<name>.md §<number>``, also lists and ranges such as ``§4.1, §4.5``,
  ``§4.1/§4.3``, ``§2-§9`` or ``§4.1-4.7`` (the name may carry a path, e.g.
  ``docs/paper.md §6.1``);
* ``<name>.md "<heading text>"``;
* ``[D<n>]`` (also ``[D8, D9]``): a deviation from the paper's text, which must
  have a heading ``D<n>. ...`` in ``docs/paper.md``.

The file must exist (its path from the repository root, else ``docs/<name>.md``,
else ``<name>.md`` at the root) and the section number or the quoted heading must
be one of its headings (``## 6. ...``, ``### 6.1 ...``; fenced code is ignored).
The scan is plain Python over text files (hidden files and build folders skipped;
notebooks are read as their JSON text) and takes well under a second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED_FOLDERS = ("lib", "tests", "notebooks", "benchmarks", "docs")
SCANNED_FILES = ("README.md",)
DEVIATIONS = "docs/paper.md"  # where the [Dn] headings live
SKIPPED_FOLDERS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".ruff_cache"}
THIS_FILE = Path(__file__).resolve()  # its docstring shows the forms; not references

_NUMBER = r"\d+(?:\.\d+)*"
_FILE = r"(?P<file>[A-Za-z0-9_][A-Za-z0-9_./-]*\.md)"
SECTION_REF = re.compile(
    _FILE
    + r" (?P<sections>§ ?"
    + _NUMBER
    # further items: ", §n" / "/§n" / " and §n", or a range "-§n" / "-n" / "–n"
    + rf"(?:(?:\s*(?:,|/|and)\s*§ ?{_NUMBER})|(?:\s*[-–]\s*§? ?{_NUMBER}))*)"
)
QUOTED_REF = re.compile(_FILE + r' \\?"(?P<heading>[^"\\\n]+)\\?"')
DEVIATION_REF = re.compile(r"\[(?P<tags>D\d+(?:\s*,\s*D\d+)*)\]")
HEADING = re.compile(r"^#{1,6}\s+(?P<text>.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Reference:
    path: str  # file it occurs in, relative to the repository root
    line: int
    text: str  # the reference as written


@dataclass(frozen=True)
class Headings:
    numbers: frozenset[str]  # "6", "6.1", ...
    titles: frozenset[str]  # normalised heading texts, with and without their number
    deviations: frozenset[int]  # n of every "Dn." heading


def _normalise(text: str) -> str:
    return " ".join(text.replace("`", "").split()).casefold()


def headings_of(text: str) -> Headings:
    numbers, titles, deviations = set(), set(), set()
    in_fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else HEADING.match(line)
        if m is None:
            continue
        title = m["text"]
        titles.add(_normalise(title))
        number = re.match(rf"({_NUMBER})\.?(?:\s+(?P<rest>.*))?$", title)
        if number:
            numbers.add(number[1])
            if number["rest"]:
                titles.add(_normalise(number["rest"]))
        deviation = re.match(r"D(\d+)\.(?:\s+(?P<rest>.*))?$", title)
        if deviation:
            deviations.add(int(deviation[1]))
    return Headings(frozenset(numbers), frozenset(titles), frozenset(deviations))


def resolve(name: str) -> Path | None:
    """The Markdown file a reference names, or None when the repository has none."""
    for candidate in (ROOT / name, ROOT / "docs" / Path(name).name, ROOT / Path(name).name):
        if candidate.is_file():
            return candidate
    return None


@cache
def headings(path: Path) -> Headings:
    return headings_of(path.read_text(encoding="utf-8"))


def section_numbers(sections: str) -> list[str]:
    """The numbers a list such as ``§4.1, §4.5`` or a range such as ``§4.1-4.7`` names
    (a range by its two ends)."""
    return re.findall(_NUMBER, sections)


def scanned_files() -> list[Path]:
    files = [ROOT / name for name in SCANNED_FILES if (ROOT / name).is_file()]
    for folder in SCANNED_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            relative = path.relative_to(ROOT).parts
            if (
                not path.is_file()
                or path.resolve() == THIS_FILE
                or any(p.startswith(".") or p in SKIPPED_FOLDERS for p in relative)
                or any(p.endswith(".egg-info") for p in relative)
            ):
                continue
            files.append(path)
    return files


def read_text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def problems_in(path: Path, text: str) -> list[tuple[Reference, str]]:
    """(reference, what is wrong) for every reference in ``text`` that does not resolve."""
    relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    out = []

    def where(m: re.Match) -> Reference:
        return Reference(relative, text.count("\n", 0, m.start()) + 1, m[0])

    for m in SECTION_REF.finditer(text):
        target = resolve(m["file"])
        if target is None:
            out.append((where(m), f"no file {m['file']} in the repository (docs/ or the root)"))
            continue
        missing = [n for n in section_numbers(m["sections"]) if n not in headings(target).numbers]
        if missing:
            shown = ", ".join("§" + n for n in missing)
            out.append((where(m), f"{target.relative_to(ROOT)} has no heading {shown}"))
    for m in QUOTED_REF.finditer(text):
        target = resolve(m["file"])
        if target is None:
            out.append((where(m), f"no file {m['file']} in the repository (docs/ or the root)"))
        elif _normalise(m["heading"]) not in headings(target).titles:
            out.append((where(m), f"{target.relative_to(ROOT)} has no heading {m['heading']!r}"))
    deviation_file = ROOT / DEVIATIONS
    for m in DEVIATION_REF.finditer(text):
        known = headings(deviation_file).deviations if deviation_file.is_file() else frozenset()
        missing = [t for t in re.findall(r"\d+", m["tags"]) if int(t) not in known]
        if missing:
            shown = ", ".join(f"D{n}." for n in missing)
            out.append((where(m), f"{DEVIATIONS} has no heading {shown}"))
    return out


def references_in(text: str) -> list[str]:
    """Every reference of the three forms in ``text``, as written (for the self-test)."""
    found = [m[0] for m in SECTION_REF.finditer(text)]
    found += [m[0] for m in QUOTED_REF.finditer(text)]
    found += [m[0] for m in DEVIATION_REF.finditer(text)]
    return found


# ------------------------------------------------------------------------------------ tests


def test_the_reference_forms_are_recognised():
    text = (
        "see example.md §6.1; docs/example.md §2-§9, other.md §4.1/§4.3 and x.md §4.1-4.7, "
        'the end (y.md §11.) then z.md "Some Heading" and [D4], [D8, D9]; '
        'not: results/tables/a.md, b.md`` or c.md" x" or §5 alone'
    )
    assert references_in(text) == [
        "example.md §6.1",
        "docs/example.md §2-§9",
        "other.md §4.1/§4.3",
        "x.md §4.1-4.7",
        "y.md §11",
        'z.md "Some Heading"',
        "[D4]",
        "[D8, D9]",
    ]
    assert section_numbers("§4.1-4.7") == ["4.1", "4.7"]
    assert section_numbers("§1, §3, §5") == ["1", "3", "5"]


def test_headings_are_read_outside_code_fences():
    found = headings_of(
        "# Title\n## 6. The stack\n### 6.1 Actions\n```\n## 9. not a heading\n```\n"
        "### D8. Search epochs\n## Profiles\n"
    )
    assert found.numbers == {"6", "6.1"}
    assert found.deviations == {8}
    assert {"the stack", "6. the stack", "profiles"} <= found.titles
    assert "not a heading" not in " ".join(found.titles)


def test_every_documentation_reference_resolves():
    checked = 0
    problems = []
    for path in scanned_files():
        text = read_text(path)
        if text is None:
            continue
        checked += len(references_in(text))
        problems += problems_in(path, text)
    assert checked > 0, "no references found at all: is the scan looking in the right place?"
    report = "\n".join(f"{r.path}:{r.line}: {r.text!r}: {why}" for r, why in problems)
    assert not problems, f"{len(problems)} references do not resolve:\n{report}"
