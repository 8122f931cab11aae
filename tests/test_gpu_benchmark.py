"""benchmarks/gpu.py, the prepared GPU check of issue 32: its CPU half (the same code on
CPU cores, tiny and fast) and its time guard."""

from __future__ import annotations

import json
import subprocess
import sys


def test_the_cpu_half_measures_one_and_two_runs_and_writes_its_figures(repo_root, tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, str(repo_root / "benchmarks" / "gpu.py"), "--device", "cpu",
               "--arch", "Tf", "--runs", "2", "--seconds", "0.2", "--strings", "200",
               "--budget-seconds", "90", "--out", str(out)]  # fmt: skip
    env = {"PYTHONPATH": str(repo_root / "lib"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "gpu.json").read_text())
    assert record["card"] == "cpu" and record["budgets"] == [512, 1024, 1536, 2048]
    fills = record["fills"]["Tf"]
    assert set(fills) == {"1", "2"}
    for k, fill in fills.items():
        assert fill["aggregate"] > 0
        assert fill["per_run"] * int(k) == fill["aggregate"]
    text = (out / "gpu.txt").read_text()
    rows = [line.split() for line in text.splitlines() if line.startswith("Tf ")]
    assert [row[:2] for row in rows] == [["Tf", "1"], ["Tf", "2"]]
    assert "# authors: skipped (no --rau-src; rau is never a dependency)" in text


def test_a_budget_too_short_skips_each_fill_and_still_writes(benchmark_script, tmp_path, capsys):
    gpu = benchmark_script("gpu")
    args = ["--device", "cpu", "--arch", "Tf", "--runs", "2", "--strings", "50",
            "--budget-seconds", "1", "--out", str(tmp_path)]  # fmt: skip
    assert gpu.main(args) == 0
    text = (tmp_path / "gpu.txt").read_text()
    assert "# K = 1: skipped, the time budget would not cover it" in text
    assert "# K = 2: skipped" in text
    assert json.loads((tmp_path / "gpu.json").read_text())["fills"] == {}


def test_unknown_architectures_are_refused(benchmark_script, capsys):
    import pytest

    with pytest.raises(SystemExit):
        benchmark_script("gpu").main(["--arch", "Tf+Xyz", "--out", "x"])
    assert "unknown architecture 'Tf+Xyz'" in capsys.readouterr().err


def test_the_cpu_half_measures_the_steps_against_todays(repo_root, tmp_path):
    """--step plain --step graphs: each architecture once per kind (the graph path's
    stand-in on the CPU), every shape of the cycle stepped before the timing, and the
    ratios over the first kind in gpu.txt."""
    out = tmp_path / "out"
    command = [sys.executable, str(repo_root / "benchmarks" / "gpu.py"), "--device", "cpu",
               "--arch", "Tf+Sup", "--runs", "1", "--seconds", "0.3", "--strings", "200",
               "--step", "plain", "--step", "graphs", "--cycle", "8",
               "--budget-seconds", "90", "--out", str(out)]  # fmt: skip
    env = {"PYTHONPATH": str(repo_root / "lib"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "gpu.json").read_text())
    assert set(record["fills"]) == {"Tf+Sup@plain", "Tf+Sup@graphs"}
    assert record["steps"] == ["plain", "graphs"] and record["cycle"] == 8
    text = (out / "gpu.txt").read_text()
    assert "# the steps over plain" in text
    today = record["fills"]["Tf+Sup@plain"]["1"]["aggregate"]
    graphs = record["fills"]["Tf+Sup@graphs"]["1"]["aggregate"]
    assert f"#   Tf+Sup graphs K = 1: {graphs / today:.2f}x" in text
