"""benchmarks/same_runs.py: which differences between two run folders count."""

from __future__ import annotations

import json


def _run(folder, seconds, loss, warnings=()):
    folder.mkdir()
    (folder / "log.csv").write_text(f"examples_seen,train_loss,seconds\n100,{loss},{seconds}\n")
    metrics = {"full": {"test": 0.5}, "train_seconds": seconds, "warnings": list(warnings)}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def test_timings_and_warnings_do_not_count_numbers_do(benchmark_script, tmp_path):
    same_runs = benchmark_script("same_runs")
    a = _run(tmp_path / "a", 1.0, 2.5)
    b = _run(tmp_path / "b", 9.0, 2.5, warnings=["resumed by commit x"])
    assert same_runs.differences(a, b) == []
    c = _run(tmp_path / "c", 1.0, 2.6)
    assert same_runs.differences(a, c) == ["log.csv"]
    metrics = json.loads((c / "metrics.json").read_text())
    metrics["full"]["test"] = 0.25
    (c / "metrics.json").write_text(json.dumps(metrics))
    assert same_runs.differences(a, c) == ["log.csv", "metrics.json full"]


def test_the_other_checkout_must_be_one(benchmark_script, tmp_path, capsys):
    import pytest

    same_runs = benchmark_script("same_runs")
    with pytest.raises(SystemExit):
        same_runs.main([str(tmp_path)])
    assert "is not a checkout of this repository" in capsys.readouterr().err
