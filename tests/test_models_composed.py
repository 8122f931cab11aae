"""Architectures beyond the paper's fifteen, from descriptions (fruit.names): stack layers
at any transformer position, stack RNNs with several stacks. Oracles: the step API
(incremental decoding) against the batched forward, the parameter count of the built
modules against the sizing expression assembled from the building blocks, and causality."""

from __future__ import annotations

import pytest
import torch
from test_models import V, decode_stepwise, padded_batch, scramble

from fruit.errors import FruitError
from fruit.models import build_model, num_parameters, parameter_count, parse_architecture
from fruit.models.sizing import choose_d

COMPOSED = [
    "Tf(-,-,-,Nd,Nd)",
    "Tf(Sup,-,Nd)",
    "LSTM(Nd,Sup)",
    "RNN(Sup,Sup)+R",
    "LSTM(Nd,Nd)+R",
]


def small(description: str) -> torch.nn.Module:
    d = 16 if description.startswith("Tf") else 12
    return build_model(description, vocab_size=V, d=d, sup_size=3, nd_size=2)


@pytest.mark.parametrize("description", COMPOSED)
def test_stepwise_decoding_equals_forward(description):
    torch.manual_seed(0)
    model = scramble(small(description)).eval()
    tokens = padded_batch([7, 3, 5])
    with torch.no_grad():
        full = model(tokens)
        assert full.shape == (3, 8, V + 1)
        assert (full - decode_stepwise(model, tokens)).abs().max().item() <= 1e-5
        changed = tokens.clone()
        changed[:, 4:] = (changed[:, 4:] + 1) % V  # causality: w_5.. do not move 0..4
        assert torch.equal(model(changed)[:, :5], full[:, :5])


@pytest.mark.parametrize("description", COMPOSED)
def test_parameters_match_the_sizing_expression_and_choose_d(description):
    model = small(description)
    spec = parse_architecture(description)
    expected = parameter_count(description, model.d, V, sup_size=3, nd_size=2)
    assert num_parameters(model) == expected
    d = choose_d(description, 68)
    step = spec.num_heads if spec.transformer else 1
    here = abs(parameter_count(description, d, 68) - 200_000)
    assert here <= abs(parameter_count(description, d + step, 68) - 200_000)
    assert here <= abs(parameter_count(description, d - step, 68) - 200_000)


@pytest.mark.parametrize("description", COMPOSED)
def test_every_stack_reports_its_actions_and_learns(description):
    model = scramble(small(description)).train()
    tokens = padded_batch([6, 6])
    logits, weights = model(tokens, return_actions=True)
    spec = parse_architecture(description)
    assert len(weights) == len(spec.stack_kinds)
    for w in weights:
        assert w.shape[:2] in ((2, 6), (2, 7)) and torch.isfinite(w).all()
    logits.sum().backward()
    for name, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_a_stack_rnn_reads_every_stack():
    """Each stack's reading reaches the output: zeroing one stack's heads changes it."""
    model = scramble(small("LSTM(Nd,Sup)+R")).eval()
    tokens = padded_batch([6])
    with torch.no_grad():
        base = model(tokens)
        for heads in model.stacks:
            saved = heads.pushed.weight.clone()
            heads.pushed.weight.mul_(3.0)
            assert not torch.allclose(model(tokens), base)
            heads.pushed.weight.copy_(saved)


@pytest.mark.parametrize(
    "description, message",
    [
        ("Tf(-,-,Xd)", "unknown layer"),
        ("LSTM(-)", "unknown layer"),
        ("Tf()", "at least one layer"),
        ("Tf(-,Nd)+R", "stack RNNs only"),
        ("RNN()+R", "needs a stack"),
        ("GRU(Nd)", "unknown base network"),
        ("Tf-Nd", "unknown architecture"),
    ],
)
def test_bad_descriptions_are_named(description, message):
    with pytest.raises(FruitError, match=message):
        parse_architecture(description)


def test_old_one_stack_checkpoints_load():
    """A stack RNN's state saved before models could have several stacks (heads named
    actions.* and pushed.*) loads into today's model."""
    model = build_model("LSTM+Nd", vocab_size=V, d=12)
    old = {k.replace("stacks.0.", ""): v.clone() + 1.0 for k, v in model.state_dict().items()}
    assert "actions.weight" in old and "bottom" in old
    model.load_state_dict(old)
    assert torch.equal(model.stacks[0].actions.weight, old["actions.weight"])
