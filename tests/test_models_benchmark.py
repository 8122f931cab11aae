"""benchmarks/models.py: batching under the token budget, and skipping without data."""

from __future__ import annotations

import random


def test_batches_respect_budget(benchmark_script):
    bench = benchmark_script("models")
    rng = random.Random(0)
    strings = [[0] * rng.randint(1, 40) for _ in range(500)]
    batches = bench.make_batches(strings, 256)
    assert sorted(map(len, strings)) == sorted(len(w) for b in batches for w in b)
    for b in batches:
        assert len(b) == 1 or len(b) * max(map(len, b)) <= 256
    # Greedy: adding the next string of the sorted order would break the budget.
    ordered = sorted(batches, key=lambda b: max(map(len, b)))
    for b, nxt in zip(ordered, ordered[1:]):
        assert (len(b) + 1) * len(min(nxt, key=len)) > 256


def test_benchmark_skips_without_data(benchmark_script, tmp_path, capsys):
    bench = benchmark_script("models")
    assert bench.main(["--data-dir", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().out


def test_train_step_loss_is_the_mean_string_cross_entropy(benchmark_script):
    """The benchmark's loss against per-string cross-entropy without padding, before the step."""
    import torch
    import torch.nn.functional as F

    from fruit.models import build_model

    bench = benchmark_script("models")
    torch.manual_seed(0)
    vocab_size = 5
    model = build_model("Tf+Sup", vocab_size=vocab_size, d=8, dropout=0.0)
    batch = [[1, 2, 3], [4], [0, 0, 1, 2, 3, 4]]
    with torch.no_grad():
        expected = sum(
            float(
                F.cross_entropy(
                    model(torch.tensor([w]))[0], torch.tensor(w + [vocab_size]), reduction="sum"
                )
            )
            for w in batch
        ) / len(batch)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = bench.train_step(model, optimizer, batch, vocab_size)
    assert abs(loss - expected) < 1e-4 * max(1.0, expected)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_target_report_uses_each_models_own_base(benchmark_script):
    bench = benchmark_script("models")
    speed = {"Tf": 100.0, "Tf+Nd": 49.0, "Tf+Sup": 70.0, "LSTM": 200.0, "LSTM+Sup": 120.0}
    speed |= {"LSTM+Nd": 51.0, "RNN+Sup": 50.0}  # RNN+Sup: its base was not measured
    lines = bench.target_report(speed)
    assert lines == [
        "# target Tf+Nd >= 0.500 of Tf: 0.490 NOT met",
        "# target Tf+Sup >= 0.667 of Tf: 0.700 met",
        "# target LSTM+Sup >= 0.667 of LSTM: 0.600 NOT met",
        "# target LSTM+Nd >= 0.250 of LSTM: 0.255 met",
    ]
    assert [bench.base_of(a) for a in ("Tf+Sup+Sup", "RNN+Nd+R", "LSTM")] == ["Tf", "RNN", "LSTM"]


def test_benchmark_rejects_an_unknown_architecture(benchmark_script, capsys):
    import pytest

    bench = benchmark_script("models")
    with pytest.raises(SystemExit):
        bench.main(["--arch", "LSTM+Foo"])
    err = capsys.readouterr().err
    assert "unknown architecture 'LSTM+Foo'; valid choices: Tf, Tf+Sup" in err


def test_workers_benchmark_skips_without_data(benchmark_script, tmp_path, capsys):
    bench = benchmark_script("workers")
    assert bench.main(["--data-dir", str(tmp_path), "--seconds", "1"]) == 0
    assert "skipped" in capsys.readouterr().out
