"""The README stays a newcomer's page, and every link of the Markdown pages resolves.

README.md: at most 300 lines, "Using it" within its first 150 (the evidence lives in
docs/results.md). Every relative Markdown link ``[text](target)`` and image in README.md
and docs/*.md names a file of the repository, and a ``#fragment`` names one of that
file's headings (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _outside_fences(text: str):
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def _anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {
        _anchor(line.lstrip("#"))
        for line in _outside_fences(path.read_text("utf-8"))
        if line.startswith("#")
    }


def test_the_readme_is_short_and_says_how_to_use_it_early():
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= 300, (
        f"README.md has {len(lines)} lines; the evidence goes to docs/results.md"
    )
    using = next((i for i, line in enumerate(lines) if line.startswith("## Using it")), None)
    assert using is not None and using < 150, "'## Using it' must come within the first 150 lines"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page):
    broken = []
    for line in _outside_fences(page.read_text("utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked offline
                continue
            file, _, fragment = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists():
                broken.append(f"{target} (no such file)")
            elif fragment and path.suffix == ".md" and fragment not in _anchors(path):
                broken.append(f"{target} (no heading with that anchor)")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_anchor_rule_on_a_known_heading():
    assert _anchor(" On a GPU: what has been checked, and what to expect") == (
        "on-a-gpu-what-has-been-checked-and-what-to-expect"
    )
