"""benchmarks/launches.py: the dispatcher count of a training step's operations.

Oracle: a computation whose ATen operations are known by hand."""

from __future__ import annotations

import torch


def test_the_counter_splits_compute_operations_from_views(benchmark_script):
    launches = benchmark_script("launches")
    x, y = torch.ones(3, 4), torch.full((3, 4), 2.0)
    with launches.Counter(sites=True) as counter:
        z = (x * y + x).t()  # mul, add: two kernels; t: a view
        z.sum()  # one more kernel
    assert counter.ops == {"mul": 1, "add": 1, "t": 1, "sum": 1}
    assert counter.compute() == 3
    assert {name for name, _ in counter.sites} == {"mul", "add", "sum"}  # views not placed


def test_a_training_step_is_counted_and_placed(benchmark_script, capsys):
    launches = benchmark_script("launches")
    counter = launches.count_step("LSTM", length=5, strings=3, sites=True)
    assert counter.compute() > 0 and counter.ops["addmm"] + counter.ops["mm"] > 0
    assert any("training/objective.py" in where for _, where in counter.sites)
    assert launches.main(["--arch", "LSTM", "--length", "5", "--strings", "3"]) == 0
    assert "LSTM" in capsys.readouterr().out.splitlines()[2]
