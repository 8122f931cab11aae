"""Helpers of the explore notebook, on small untrained models (no training needed)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch

from fruit.errors import FruitError
from fruit.explore import (
    LoadedRun,
    best_outputs,
    first_words,
    stack_action_figure,
    stack_actions,
    target_probability,
)
from fruit.models import build_model
from fruit.tasks import Vocabulary, get_task

WORDS = ["quest", "sleeps", "the"]  # a 3-word vocabulary; "quest" is question formation's marker


def tiny_run(architecture: str, words=WORDS) -> LoadedRun:
    torch.manual_seed(0)
    vocab = Vocabulary.from_examples([(list(words), [])])
    model = build_model(architecture, vocab_size=vocab.size, d=8, dropout=0.0).eval()
    config = {
        "task": "question-formation",
        "architecture": architecture,
        "d": 8,
        "model_options": {"dropout": 0.0},
    }
    return LoadedRun(Path("."), config, model, vocab, get_task("question-formation"))


@pytest.mark.parametrize("architecture", ["Tf+Sup", "RNN+Nd"])
def test_beam_search_is_exact_when_wide_enough(architecture):
    """With a beam wider than every hypothesis, beam search must return exactly the brute-force
    distribution over outputs of length < max_tokens, and the probabilities of all outputs plus
    those of the unfinished length-3 prefixes sum to 1."""
    run = tiny_run(architecture)
    source = ["the", "sleeps", "quest"]
    words = run.vocab.decode(list(range(run.vocab.size)))
    brute = {}
    for n in range(3):
        for y in itertools.product(words, repeat=n):
            brute[y] = target_probability(run, source, list(y))
    # k = 40 keeps every hypothesis: 2k >= 9 live prefixes x 4 continuations
    everything = best_outputs(run, source, k=40, max_tokens=3)
    found = [f for f in everything if f[2]]
    assert all(len(y) == 3 for y, _, finished in everything if not finished)
    assert {tuple(y): p for y, p, _ in found}.keys() == brute.keys()
    for y, p, _ in found:
        assert math.isclose(p, brute[tuple(y)], rel_tol=1e-4)
    probs = [p for _, p, _ in found]
    assert probs == sorted(probs, reverse=True)
    # mass left for outputs of 3+ tokens = sum over 3-token prefixes of p(prefix)
    prefixes = torch.tensor(
        [run.vocab.encode(source + list(y)) for y in itertools.product(words, repeat=3)]
    )
    with torch.no_grad():
        logp = run.model(prefixes).log_softmax(-1)  # (27, 7, V+1); position t predicts w_{t+1}
    n = len(source)
    picked = logp[:, n : n + 3].gather(-1, prefixes[:, n:].unsqueeze(-1))  # p(y_1..y_3 | x)
    longer = float(picked.sum((1, 2)).exp().sum())
    assert math.isclose(sum(brute.values()) + longer, 1.0, rel_tol=1e-4)


def test_first_words_is_a_distribution_that_matches_teacher_forcing():
    run = tiny_run("Tf+Nd")
    source = ["the", "sleeps", "quest"]
    dist = first_words(run, source, k=run.vocab.size + 1)
    assert math.isclose(sum(p for _, p in dist), 1.0, rel_tol=1e-5)
    assert "<eos>" in dict(dist)
    assert math.isclose(dict(dist)["<eos>"], target_probability(run, source, []), rel_tol=1e-4)


@pytest.mark.parametrize(
    "architecture, names, labels, positions",
    [
        ("Tf+Sup", ["layer 3 (Sup)"], ("push", "pop", "no-op"), 5),  # BOS + 4 tokens
        ("Tf+Nd+Nd", ["layer 2 (Nd)", "layer 4 (Nd)"], ("push", "replace", "pop"), 5),
        ("RNN+Sup+R", ["stack (Sup)"], ("push", "pop", "no-op"), 4),
        ("LSTM+Nd", ["stack (Nd)"], ("push", "replace", "pop"), 4),
        ("Tf", [], (), 0),
    ],
)
def test_stack_actions_per_architecture(architecture, names, labels, positions):
    run = tiny_run(architecture)
    tokens = ["the", "sleeps", "quest", "the"]
    actions = stack_actions(run, tokens)
    assert [a.name for a in actions] == names
    for a in actions:
        assert a.labels == labels
        assert a.mass.shape == (3, positions)
        assert len(a.tokens) == positions and a.tokens[-1] == "the"
        assert torch.allclose(a.mass.sum(0), torch.ones(positions), atol=1e-5)
        assert bool((a.mass >= 0).all())
    fig = stack_action_figure(actions, title=architecture)
    assert len(fig.axes) >= max(len(actions), 1)


def test_source_adds_the_marker_and_rejects_unknown_words():
    run = tiny_run("Tf", words=[*WORDS, "decl"])
    assert run.source("the sleeps") == ["the", "sleeps", "quest"]
    assert run.source("the sleeps quest") == ["the", "sleeps", "quest"]
    assert run.source("the sleeps", marker="decl")[-1] == "decl"
    with pytest.raises(FruitError, match="walrus"):
        run.source("the walrus sleeps")


def test_load_run_defaults_to_the_automatic_device(tmp_path):
    """load_run rebuilds a saved model on fruit.device.resolve_device("auto") unless told."""
    import json

    from fruit.device import resolve_device
    from fruit.explore import load_run

    data = tmp_path / "data" / "question-formation"
    data.mkdir(parents=True)
    (data / "train.tsv").write_text("the sleeps quest\tsleeps the\n", encoding="utf-8")
    run = tiny_run("Tf+Sup")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = {**run.config, "data_dir": str(tmp_path / "data"), "vocab_size": run.vocab.size}
    (run_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    torch.save({"model": run.model.state_dict()}, run_dir / "best.pt")
    loaded = load_run(run_dir)
    assert loaded.device.type == resolve_device("auto").type
    assert load_run(run_dir, device="cpu").device.type == "cpu"
    tokens = torch.tensor([run.vocab.encode(["the", "sleeps", "quest"])])
    with torch.no_grad():
        assert torch.allclose(loaded.model(tokens.to(loaded.device)).cpu(), run.model(tokens))


def test_a_long_string_wraps_the_heat_map_into_rows_of_equal_cells():
    """60 positions: two rows of 30 per stack, titled with their positions, every row as
    wide as the first (so labels stay legible), each position shown once."""
    from fruit.explore import HEATMAP_POSITIONS, StackActions

    mass = torch.softmax(torch.randn(3, 2 * HEATMAP_POSITIONS + 5), 0)
    tokens = [f"w{i}" for i in range(mass.shape[1])]
    fig = stack_action_figure([StackActions("layer 3 (Nd)", ("a", "b", "c"), tokens, mass)])
    heat = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in heat] == [
        "layer 3 (Nd) (positions 1-30)",
        "layer 3 (Nd) (positions 31-60)",
        "layer 3 (Nd) (positions 61-65)",
    ]
    shown = [t.get_text() for ax in heat for t in ax.get_xticklabels() if t.get_text()]
    assert shown == tokens
    assert len({len(ax.get_xticklabels()) for ax in heat}) == 1
