"""The committed tables are what the committed run records give: for every profile whose
run records are in git (results/runs/<profile>/), `fruit report` regenerates
results/tables/<profile>/ byte for byte."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fruit import reporting
from fruit.io import RESUME_FILES

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "results" / "runs"


def _tracked() -> list[str] | None:
    """The files git tracks under results/runs; None outside a git checkout."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return None
    return subprocess.run(
        ["git", "ls-files", "results/runs"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()


TRACKED = _tracked()
# the profiles with committed finished runs (on disk, outside git)
PROFILES = (
    sorted({Path(f).parts[2] for f in TRACKED if Path(f).name == "metrics.json"})
    if TRACKED is not None
    else sorted(p.name for p in RUNS.iterdir() if p.is_dir() and any(p.rglob("metrics.json")))
    if RUNS.is_dir()
    else []
)


@pytest.fixture(scope="module")
def tracked_runs(tmp_path_factory):
    """The run records git tracks, copied to a folder of their own: what a clean checkout
    has. Records on this disk that git does not track (a smoke run, a campaign's runs not
    committed yet) would otherwise enter the tables, and the claims' run-level pools read
    every profile. Outside a git checkout, results/runs as it is."""
    if TRACKED is None:
        return RUNS
    root = tmp_path_factory.mktemp("tracked")
    for name in TRACKED:
        if Path(name).suffix in (".json", ".csv") and (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / name, root / name)
    return root / "results" / "runs"


@pytest.mark.parametrize(
    "profile",
    PROFILES or [pytest.param(None, marks=pytest.mark.skip(reason="no committed run records"))],
)
def test_committed_tables_match_the_committed_records(profile, tracked_runs, tmp_path):
    committed = REPO / "results" / "tables" / profile
    assert committed.is_dir(), f"records of {profile} are committed but its tables are not"
    reporting.report(tracked_runs, profile, tables_dir=tmp_path, figures=False, paper=False)
    made = {p.name: p.read_bytes() for p in (tmp_path / profile).iterdir()}
    assert made, "fruit report wrote nothing"
    stale = sorted({p.name for p in committed.iterdir() if p.is_file()} - set(made))
    assert not stale, (
        f"results/tables/{profile}/ holds {stale}, which fruit report no longer writes"
    )
    for name, data in made.items():
        assert (committed / name).is_file(), f"results/tables/{profile}/{name} is not committed"
        assert (committed / name).read_bytes() == data, (
            f"results/tables/{profile}/{name} differs from what the committed records give; "
            f"run `fruit report --profile {profile}`"
        )


def test_committed_resume_files_are_those_of_paused_runs_only():
    """A paused run's resume files may be committed to carry it to the next machine
    (docs/campaign.md); they must come with what it goes on from, and go once the run
    finished."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to say about what is committed")
    listed = subprocess.run(
        ["git", "ls-files", "results/runs"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    tracked = set(listed)
    folders = {str(Path(f).parent) for f in listed if Path(f).name in RESUME_FILES}
    for folder in sorted(folders):
        assert f"{folder}/metrics.json" not in tracked, (
            f"{folder} finished: `git rm --cached` its resume files"
        )
        # checkpoint.pt is what it goes on from, config.json says which commit started it;
        # best.pt and paused.json are there once it validated / paused (not at a deadline)
        needed = ("checkpoint.pt", "config.json", "log.csv")
        missing = [name for name in needed if f"{folder}/{name}" not in tracked]
        assert not missing, f"{folder}: its resume files are committed without {missing}"
