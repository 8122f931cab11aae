"""`fruit run --profile smoke` with the real train notebook: on a LocalCluster (then again:
nothing is retrained), and through a real `dask scheduler` + two `dask worker`s on
127.0.0.1 with the same metrics."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fruit.experiments import load_profile
from test_experiments_cluster import dask_processes, fruit_run

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "train.ipynb"


def _metrics(results: Path) -> dict[str, dict]:
    runs = results / "runs" / "smoke"
    found = {}
    for path in sorted(runs.glob("*/*/*/metrics.json")):
        m = json.loads(path.read_text())
        m.pop("train_seconds")
        found[str(path.parent.relative_to(runs))] = m
    return found


@pytest.fixture(scope="module")
def local_smoke(tmp_path_factory):
    """The smoke profile on a 2-worker LocalCluster, tables and figures included."""
    if not NOTEBOOK.is_file():
        pytest.skip("notebooks/train.ipynb is not there yet")
    home = tmp_path_factory.mktemp("smoke")
    start = time.monotonic()
    first = fruit_run(
        "--profile", "smoke", "--workers", "2", "--device", "cpu", "--notebook", str(NOTEBOOK),
        cwd=home, timeout=900,
    )  # fmt: skip
    seconds = time.monotonic() - start
    assert first.returncode == 0, first.stdout + first.stderr
    print(f"\nsmoke profile, first run: {seconds:.1f} s")
    return home, first, seconds


def test_smoke_profile_runs_then_finds_everything_complete(local_smoke):
    home, first, _ = local_smoke
    profile = load_profile("smoke")
    n_runs = (
        len(profile.tasks)
        * len(profile.architectures)
        * (profile.search_trials + profile.final_runs)
    )
    assert f"runs: {n_runs} trained, 0 found complete, 0 failed, of {n_runs}" in first.stdout
    metrics = _metrics(home / "results")
    assert len(metrics) == n_runs
    assert all(m["status"] in ("complete", "diverged") for m in metrics.values())
    # the final runs use the winning search setting (lowest best validation cross-entropy)
    for task in profile.tasks:
        for arch in profile.architectures:
            trials = [metrics[f"{task}/{arch}/search-{i}"] for i in range(profile.search_trials)]
            best = min(trials, key=lambda m: m["best_validation_cross_entropy"])
            final = metrics[f"{task}/{arch}/final-0"]
            assert (final["learning_rate"], final["batch_tokens"]) == (
                best["learning_rate"],
                best["batch_tokens"],
            )
    # every run leaves its executed notebook; reports were made and say they are reduced-scale
    assert all((home / "results/runs/smoke" / name / "train.ipynb").is_file() for name in metrics)
    assert list((home / "results/tables/smoke").glob("*.md"))
    assert list((home / "figures/smoke").glob("*.png"))
    assert "reduced-scale profile: smoke" in "".join(
        p.read_text() for p in (home / "results/tables/smoke").glob("*.md")
    )

    stamps = {p: p.stat().st_mtime_ns for p in (home / "results/runs/smoke").rglob("*.*")}
    start = time.monotonic()
    again = fruit_run(
        "--profile", "smoke", "--workers", "2", "--device", "cpu", "--notebook", str(NOTEBOOK),
        "--skip-reports", cwd=home, timeout=600,
    )  # fmt: skip
    seconds = time.monotonic() - start
    print(f"smoke profile, second run: {seconds:.1f} s")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"runs: 0 trained, {n_runs} found complete, 0 failed" in again.stdout
    changed = [p for p, t in stamps.items() if p.stat().st_mtime_ns != t and p.name != "plan.json"]
    assert not changed, f"a complete run was touched: {changed}"


@pytest.mark.slow
def test_smoke_through_a_dask_scheduler_gives_the_same_metrics(local_smoke, tmp_path: Path):
    home, _, _ = local_smoke
    with dask_processes(tmp_path) as address:
        remote = fruit_run(
            "--profile", "smoke", "--scheduler", address, "--device", "cpu", "--notebook", str(NOTEBOOK),
            "--results", str(tmp_path / "results"), "--data-dir", str(tmp_path / "data"), "--skip-reports",
            cwd=home, timeout=900,
        )  # fmt: skip
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert f"Dask scheduler {address} (2 workers)" in remote.stdout
    # same seeds, freshly generated data (same data seed): the same numbers
    assert (tmp_path / "data/question-formation/train.tsv").read_text() == (
        home / "data/smoke/question-formation/train.tsv"
    ).read_text()
    assert _metrics(tmp_path / "results") == _metrics(home / "results")
