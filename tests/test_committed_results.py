"""The committed tables are what the committed run records give: for every profile whose
run records are in git (results/runs/<profile>/), `fruit report` regenerates
results/tables/<profile>/ byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from fruit import reporting

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "results" / "runs"
PROFILES = (
    sorted(p.name for p in RUNS.iterdir() if p.is_dir() and any(p.rglob("metrics.json")))
    if RUNS.is_dir()
    else []
)


@pytest.mark.parametrize(
    "profile",
    PROFILES or [pytest.param(None, marks=pytest.mark.skip(reason="no committed run records"))],
)
def test_committed_tables_match_the_committed_records(profile, tmp_path):
    committed = REPO / "results" / "tables" / profile
    assert committed.is_dir(), f"records of {profile} are committed but its tables are not"
    reporting.report(RUNS, profile, tables_dir=tmp_path, figures=False, paper=False)
    made = {p.name: p.read_bytes() for p in (tmp_path / profile).iterdir()}
    assert made, "fruit report wrote nothing"
    for name, data in made.items():
        assert (committed / name).is_file(), f"results/tables/{profile}/{name} is not committed"
        assert (committed / name).read_bytes() == data, (
            f"results/tables/{profile}/{name} differs from what the committed records give; "
            f"run `fruit report --profile {profile}`"
        )
