"""docs/extending.md, executed: a copy of the package gets the tutorial's files and
registry entries (a toy task, a stack kind, three new architectures), then every command block runs in
it as a user would type it. The page cannot go stale without this test failing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "extending.md"
STEP = re.compile(
    r"^<!-- tutorial: (?P<what>[^\n]+?) -->\n```[a-z]*\n(?P<body>.*?)^```", re.S | re.M
)


def steps() -> list[tuple[str, str]]:
    found = [(m["what"].strip(), m["body"]) for m in STEP.finditer(PAGE.read_text())]
    assert found, f"{PAGE} has no tutorial steps"
    return found


def apply(what: str, body: str, root: Path) -> None:
    """A ``file PATH`` or ``insert into PATH after MARKER`` step."""
    if what.startswith("file "):
        path = root / what[len("file ") :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        return
    match = re.fullmatch(r"insert into (?P<path>\S+) after (?P<marker>.+)", what)
    assert match, f"unknown tutorial step {what!r}"
    path = root / match["path"]
    lines = path.read_text().splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if match["marker"] in line), None)
    assert at is not None, f"{match['marker']!r} is not in {match['path']}"
    path.write_text("".join(lines[: at + 1]) + body + "".join(lines[at + 1 :]))


def run(command: list[str], root: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(root / "lib")}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.timeout(1800)  # a whole `fruit run` of the toy profile, reports included
def test_the_extending_tutorial_runs_as_written(tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(REPO / "lib", root / "lib", ignore=shutil.ignore_patterns("*.egg-info"))
    shutil.copytree(REPO / "notebooks", root / "notebooks")  # fruit run executes them
    outputs = []
    for what, body in steps():
        if what == "run":
            for line in filter(None, (line.strip() for line in body.splitlines())):
                words = re.findall(r'"[^"]*"|\S+', line)
                words = [w.strip('"') for w in words]
                assert words[0] == "fruit", line
                outputs.append(run([sys.executable, "-m", "fruit", *words[1:]], root))
        elif what == "python":
            outputs.append(run([sys.executable, "-c", body], root))
        else:
            apply(what, body, root)
    text = "\n".join(outputs)
    # the dry-run plans and costs the new architectures on the new task
    assert "aux-fronting/Tf+Nd@4,5: 2 runs" in text and "aux-fronting/LSTM+Nd+Sup: 2 runs" in text
    assert "aux-fronting/LSTM+PP: 2 runs" in text  # the stack kind of one's own
    # the task derived from question formation generated its splits
    assert (root / "data" / "main-negation" / "gen.tsv").is_file()
    # V from the task's own training file; its statistics, nothing published beside them
    assert "aux-fronting  V=" in text and "aux-fronting  train" in text
    # `fruit run` of the profile, reports included, wrote what `fruit report` writes
    made = root / "results" / "tables" / "toy"
    again = root / "tables-again" / "toy"
    assert sorted(p.name for p in made.iterdir()) == sorted(p.name for p in again.iterdir())
    for path in made.iterdir():
        assert path.read_bytes() == (again / path.name).read_bytes(), path.name
    assert (root / "results" / "notebooks" / "toy" / "report.ipynb").is_file()
    # the report has a row for each, without the paper's columns
    table = (root / "results" / "tables" / "toy" / "aux-fronting.md").read_text()
    assert "| Tf+Nd@4,5 |" in table and "| LSTM+Nd+Sup |" in table and "| LSTM+PP |" in table
    assert not (root / "results" / "tables" / "toy" / "aux-fronting.comparison.md").exists()
    # the smoke run of the transformer, and the explore API on the two-stack LSTM
    assert (
        root
        / "results"
        / "runs"
        / "smoke"
        / "aux-fronting"
        / "Tf+Nd@4,5"
        / "final-0"
        / "metrics.json"
    ).is_file()
    assert "stack 1 (Nd) ('push', 'replace', 'pop')" in text
    assert "stack 2 (Sup) ('push', 'pop', 'no-op')" in text
    assert "stack (PP) ('push', 'pop') (2, 7)" in text  # the kind's own labels


# The contract tests: every registered task and architecture keeps them, the tutorial's
# too; the tests of the paper's facts iterate the paper's lists, so registering more
# leaves them green.
CONTRACT_TESTS = (
    "tests/test_tasks_contract.py",
    "tests/test_tasks_framework.py",
    "tests/test_sizing.py",
    "tests/test_reporting.py",
    "tests/test_reporting_paper.py",
)


@pytest.mark.timeout(2400)  # the contract tests once more, in a copy of the package
def test_the_contract_tests_hold_with_the_tutorials_extensions_registered(tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(REPO / "lib", root / "lib", ignore=shutil.ignore_patterns("*.egg-info"))
    for what, body in steps():
        if what not in ("run", "python"):
            apply(what, body, root)
    env = {**os.environ, "PYTHONPATH": str(root / "lib")}
    check = subprocess.run(
        [sys.executable, "-c", "from fruit.tasks import TASKS; from fruit.names import "
         "ARCHITECTURES; print('aux-fronting' in TASKS, 'Tf+Nd@4,5' in ARCHITECTURES)"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert check.stdout.split() == ["True", "True"], check.stdout + check.stderr
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
         "-o", "addopts=-m 'not slow and not gpu'", *CONTRACT_TESTS],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "[aux-fronting] PASSED" in done.stdout  # the contract ran over the new tasks too
    assert "[main-negation] PASSED" in done.stdout
