"""benchmarks/authors_transformer.py: skipping without rau or data, the speed summary,
and (where rau is installed) that rau's transformer with our weights is our Tf."""

from __future__ import annotations

import pytest


def test_benchmark_skips_without_rau_or_data(benchmark_script, tmp_path, capsys):
    bench = benchmark_script("authors_transformer")
    assert bench.main(["--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "skipped" in out
    if bench.rau_missing() is None:
        assert "not found" in out
    else:
        assert "rau is not importable" in out


def test_speeds_against_hand_computed_values(benchmark_script):
    bench = benchmark_script("authors_transformer")
    times = {
        "ours": [(1.0, 100), (2.0, 300)],  # 400 tokens in 3 s
        "authors": [(2.0, 100), (2.0, 300)],  # 400 tokens in 4 s
    }
    got = bench.speeds(times, "authors")
    steps, per_step, speed, ratio, median = got["ours"]
    assert (steps, per_step, speed) == (2, 1.5, 400 / 3)
    assert ratio == pytest.approx(4 / 3)
    assert median == pytest.approx((2.0 + 1.0) / 2)  # per-batch ratios 2 and 1
    assert got["authors"][3:] == (1.0, 1.0)


def test_rau_with_our_weights_computes_our_function(benchmark_script):
    pytest.importorskip("rau", reason="rau is not installed (it is never a project dependency)")
    import torch

    bench = benchmark_script("authors_transformer")
    torch.manual_seed(0)
    V, d = 7, 12
    ours = bench.Ours(V, d=d)
    authors = bench.Authors(V, d, 10, torch.Generator().manual_seed(0))
    assert sum(p.numel() for p in ours.model.parameters()) == sum(
        p.numel() for p in authors.model.parameters()
    )
    strings = [[1, 2, 3, 4, 5, 6], [0, 6], [3, 3, 3, 1]]
    assert bench.same_function(ours, authors, strings) < 1e-5
    # A planted hyperparameter mismatch is seen: their layer 3 made post-norm.
    (encoder,) = [m for m in authors.model.modules() if isinstance(m, torch.nn.TransformerEncoder)]
    encoder.layers[2].norm_first = False
    assert bench.same_function(ours, authors, strings) > 1e-2
