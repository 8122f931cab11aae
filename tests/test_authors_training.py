"""benchmarks/authors_training.py: clear errors on bad arguments, and (where rau is
installed) that rau's weights copied into our Tf through the two vocabularies give rau's
logits, while a wrong row mapping is caught by the script's own check."""

from __future__ import annotations

import json
import random

import pytest


def test_refuses_a_folder_that_is_not_rau(benchmark_script, tmp_path):
    script = benchmark_script("authors_training")
    with pytest.raises(SystemExit, match="not a rau checkout"):
        script.main(["--rau-src", str(tmp_path), "--run", str(tmp_path), "--out", str(tmp_path)])


def test_refuses_a_run_of_another_architecture(benchmark_script, tmp_path):
    script = benchmark_script("authors_training")
    (tmp_path / "rau").mkdir()
    (tmp_path / "rau" / "cli.py").write_text("")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps({"architecture": "Tf+Nd"}))
    with pytest.raises(SystemExit, match="Tf\\+Nd run; this check covers Tf only"):
        script.main(
            ["--rau-src", str(tmp_path), "--run", str(tmp_path / "run"), "--out", str(tmp_path)]
        )


def test_a_left_lock_stops_before_rau_runs(benchmark_script, tmp_path):
    script = benchmark_script("authors_training")
    model = tmp_path / "model"
    model.mkdir()
    (model / "checkpoint.pt").write_bytes(b"")
    (model / "training.lock").write_bytes(b"")
    with pytest.raises(SystemExit, match="training.lock exists: .* delete it and run again"):
        script.train(tmp_path, {}, tmp_path, model, None)


def test_rau_weights_in_our_tf_give_raus_logits(benchmark_script):
    pytest.importorskip("rau", reason="rau is not installed (it is never a project dependency)")
    import torch

    from fruit.tasks import Vocabulary

    script = benchmark_script("authors_training")
    bench = benchmark_script("authors_transformer")

    vocab = Vocabulary(["a", "b", "c", "d", "e", "f", "g"])
    their_tokens = list(vocab.types)
    random.Random(1).shuffle(their_tokens)  # rau numbers the words in another order
    d = 12
    authors = bench.Authors(vocab.size, d, 10, torch.Generator().manual_seed(0))
    theirs = authors.model.eval()
    ours, rows = script.into_ours(theirs, their_tokens, vocab, d)
    assert rows[: vocab.size] == [their_tokens.index(t) for t in vocab.types]
    strings = [[1, 2, 3, 4, 5, 6], [0, 6], [3, 3, 3, 1]]
    assert script.check_same_function(ours, theirs, authors.interface, rows, strings) < 1e-5
    # The identity mapping is wrong here, and the check sees it.
    identity = list(range(vocab.size + 2))
    assert script.check_same_function(ours, theirs, authors.interface, identity, strings) > 1e-3


@pytest.mark.parametrize("arch", ["Tf+Nd", "Tf+Sup"])
def test_our_stack_attention_is_raus_function_without_the_sigmoid(benchmark_script, arch, capsys):
    """[D1]: with pushed_activation="none" our weights in rau's model give rau's logits;
    with the paper's sigmoid they do not (benchmarks/authors_nd.py exits 1 otherwise)."""
    pytest.importorskip("rau", reason="rau is not installed (it is never a project dependency)")
    script = benchmark_script("authors_nd")
    assert script.main(["--arch", arch, "--vocab-size", "7", "--d", "12"]) == 0
    out = capsys.readouterr().out
    assert 'pushed_activation="none"' in out and "same function" in out
    assert "differs, as expected" in out
