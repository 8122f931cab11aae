"""Stack RNN controllers run step by step (recurrent.Cells) against PyTorch's nn.RNN / nn.LSTM,
dropout placement (docs/paper.md §4), and gradients of the whole model against plain autograd."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fruit.models.recurrent as recurrent
from fruit.models import build_model
from fruit.models.recurrent import RecurrentCore
from fruit.stacks.bruteforce import superposition_bruteforce

F64 = torch.float64


def random_core(kind, input_size, d, seed=0):
    torch.manual_seed(seed)
    core = RecurrentCore(kind, input_size, d, 3, dropout=0.3).double()
    with torch.no_grad():
        for p in core.parameters():
            p.uniform_(-0.5, 0.5)
    return core


@pytest.mark.parametrize("kind", ["RNN", "LSTM"])
def test_cells_equal_pytorch_rnn(kind):
    """Cells (token part projected ahead, extra part per step) = nn.RNN / nn.LSTM on [token; extra]."""
    B, n, token_size, extra_size, d = 3, 6, 5, 4, 7
    core = random_core(kind, token_size + extra_size, d).eval()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randn(B, n, token_size, generator=g, dtype=F64)
    extra = torch.randn(B, n, extra_size, generator=g, dtype=F64)
    with torch.no_grad():
        core.rnn.bias_hh_l1.uniform_(-0.5, 0.5)  # a duplicate bias, if present, is still added
    state = core.initial_state(B)
    expected, expected_state = core(torch.cat((tokens, extra), -1), state)
    cells = core.unroll(token_size)
    projected = cells.project(tokens)
    hidden = cells.initial(state)
    for t in range(n):
        h, hidden = cells.step(projected[:, t], extra[:, t], hidden)
        assert (h - expected[:, t]).abs().max() < 1e-12
    if kind == "LSTM":
        h_n = torch.stack([layer[0] for layer in hidden])
        c_n = torch.stack([layer[1] for layer in hidden])
        assert (h_n - expected_state[0]).abs().max() < 1e-12
        assert (c_n - expected_state[1]).abs().max() < 1e-12
    else:
        assert (torch.stack(hidden) - expected_state).abs().max() < 1e-12


@pytest.mark.parametrize("kind", ["RNN", "LSTM"])
def test_cells_dropout_only_between_layers(kind, monkeypatch):
    """§4: inputs of layers 2 and 3 are Drop(h below); recurrences use the undropped h."""
    core = random_core(kind, 6, 5).train()
    calls = []

    def recording_dropout(x, p, training):
        calls.append((x, p, training))
        return x * 2.0  # a visible, deterministic "mask"

    monkeypatch.setattr(recurrent.F, "dropout", recording_dropout)
    B = 2
    g = torch.Generator().manual_seed(2)
    tokens, extra = (
        torch.randn(B, 3, generator=g, dtype=F64),
        torch.randn(B, 3, generator=g, dtype=F64),
    )
    cells = core.unroll(3)
    hidden = cells.initial(core.initial_state(B))
    h, new = cells.step(cells.project(tokens), extra, hidden)
    assert len(calls) == 2 and all(p == 0.3 and training for _, p, training in calls)
    tops = [layer[0] if kind == "LSTM" else layer for layer in new]
    assert calls[0][0] is tops[0] and calls[1][0] is tops[1]
    # Reference: nn.RNN/LSTM layer by layer with the input doubled (= the fake dropout).
    rnn = core.rnn
    u = torch.cat((tokens, extra), -1)
    for k in range(3):
        state = tuple(x[k : k + 1] for x in core.initial_state(B)) if kind == "LSTM" else None
        if kind == "LSTM":
            layer = torch.nn.LSTM(u.size(-1), 5, 1, batch_first=True).double()
        else:
            layer = torch.nn.RNN(u.size(-1), 5, 1, batch_first=True).double()
            state = core.initial_state(B)[k : k + 1]
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(layer, f"{name}_l0").data.copy_(getattr(rnn, f"{name}_l{k}"))
        out, _ = layer(u[:, None], state)
        assert (out[:, 0] - tops[k]).abs().max() < 1e-12
        u = 2.0 * out[:, 0]


def superposition_reference_forward(model, tokens):
    """RNN+Sup(+R) from §4/§8 written out with nn.RNN layers of length 1 and the brute-force
    superposition reading (dropout off)."""
    E = model.embedding.weight
    rnn = model.core.rnn
    B, n = tokens.shape
    h = [torch.tanh(model.core.initial_hidden[k]).expand(B, -1) for k in range(3)]
    reading = torch.zeros(B, model.stacks[0].m, dtype=E.dtype)
    outs = [torch.cat((h[2], reading), -1) if model.reading_to_output else h[2]]
    probs, pushed = [], []
    for t in range(n):
        u = torch.cat((E[tokens[:, t]], reading), -1)
        for k in range(3):
            W, U = getattr(rnn, f"weight_ih_l{k}"), getattr(rnn, f"weight_hh_l{k}")
            h[k] = torch.tanh(u @ W.T + h[k] @ U.T + getattr(rnn, f"bias_ih_l{k}"))
            u = h[k]
        probs.append(torch.softmax(model.stacks[0].actions(h[2]), -1))
        pushed.append(torch.sigmoid(model.stacks[0].pushed(h[2])))
        if t < n - 1 or model.reading_to_output:
            a, v = torch.stack(probs, 1), torch.stack(pushed, 1)
            reading = torch.stack(
                [
                    torch.from_numpy(superposition_bruteforce(a[b].detach(), v[b].detach())[-1])
                    for b in range(B)
                ]
            )
        outs.append(torch.cat((h[2], reading), -1) if model.reading_to_output else h[2])
    return torch.stack(outs, 1) @ E.T


@pytest.mark.parametrize("arch", ["RNN+Sup", "RNN+Sup+R"])
def test_stack_rnn_forward_matches_written_out_model(arch):
    torch.manual_seed(0)
    model = build_model(arch, vocab_size=7, d=6, sup_size=3, dropout=0.0).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.uniform_(-0.8, 0.8)
    tokens = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got = model(tokens)
    expected = superposition_reference_forward(model, tokens)
    assert (got - expected).abs().max() < 1e-10


def autograd_reference_logits(model, tokens):
    """The model's forward with the step API of an untruncated stack and nn.RNN/LSTM cells of
    length 1: the straightforward autograd implementation of §8 (dropout off)."""
    logits0, state = model.start(tokens.size(0))
    out = [logits0]
    for t in range(tokens.size(1)):
        logits, state = model.step(state, tokens[:, t])
        out.append(logits)
    return torch.stack(out, 1)


@pytest.mark.parametrize(
    "arch",
    ["RNN+Sup", "RNN+Sup+R", "LSTM+Sup", "LSTM+Sup+R", "LSTM+Nd+R", "RNN+Nd"],
)
def test_training_gradients_equal_stepwise_decoding_gradients(arch):
    """The batched forward (truncated stack, projected inputs; the fused pass for Sup) has
    the gradients of the incremental decoder (untruncated stack, per-step projections)."""
    torch.manual_seed(0)
    d = 6 if arch.startswith("RNN") else 4
    model = build_model(arch, vocab_size=7, d=d, sup_size=3, nd_states=2, nd_symbols=2, nd_size=2)
    model = model.double().eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.uniform_(-0.8, 0.8)
    tokens = torch.randint(0, 7, (3, 6), generator=torch.Generator().manual_seed(4))
    weights = torch.randn(3, 7, 8, generator=torch.Generator().manual_seed(5), dtype=F64)
    grads = []
    for forward in (model, lambda x: autograd_reference_logits(model, x)):
        model.zero_grad()
        logits = forward(tokens)
        (logits * weights).sum().backward()
        grads.append({k: p.grad.clone() for k, p in model.named_parameters() if p.requires_grad})
        grads[-1]["logits"] = logits.detach()
    for key, value in grads[0].items():
        assert (value - grads[1][key]).abs().max() < 1e-10, key


def test_training_step_updates_every_parameter_with_dropout():
    torch.manual_seed(0)
    model = build_model("LSTM+Sup+R", vocab_size=7, d=6, sup_size=3).train()
    tokens = torch.randint(0, 7, (3, 5))
    logits = model(tokens)
    F.cross_entropy(logits.transpose(1, 2), torch.randint(0, 8, (3, 6))).backward()
    for name, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("arch", ["LSTM+Sup", "LSTM+Nd"])
def test_deferred_weight_gradients_with_retained_graph_and_partial_loss(arch):
    """Weight gradients computed once per backward pass (the fused Sup pass; the deferred
    weights of Cells for Nd): a second pass over a retained graph adds the same again, and
    a loss on early positions only matches the step path."""
    torch.manual_seed(0)
    options = dict(sup_size=3, nd_states=2, nd_symbols=2, nd_size=2)
    model = build_model(arch, vocab_size=7, d=5, **options).double().eval()
    tokens = torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(6))
    params = [p for p in model.parameters() if p.requires_grad]
    logits = model(tokens)
    once = torch.autograd.grad(logits.sum(), params, retain_graph=True)
    twice = torch.autograd.grad(logits.sum(), params, retain_graph=True)
    for a, b in zip(once, twice):
        assert torch.equal(a, b)
    early = torch.autograd.grad(logits[:, :3].sum(), params)
    reference = torch.autograd.grad(autograd_reference_logits(model, tokens)[:, :3].sum(), params)
    for a, b in zip(early, reference):
        assert (a - b).abs().max() < 1e-10


@pytest.mark.parametrize("arch", ["RNN+Sup", "LSTM+Sup+R"])
@pytest.mark.parametrize("rau_compat", [False, True])
def test_fused_sup_pass_equals_stepped_pass_in_training(arch, rau_compat, fused_equals_stepped):
    """The fused Sup pass against the stepped pass, same dropout masks (conftest)."""
    from fruit.models.passes.sup_pass import sup_pass

    torch.manual_seed(0)
    model = build_model(arch, vocab_size=7, d=6, sup_size=3, dropout=0.4, rau_compat=rau_compat)
    fused_equals_stepped(model.double().train(), "sup_pass", sup_pass, masks_at=8)


def test_a_kind_without_a_fused_driver_runs_the_stepped_loop(monkeypatch):
    """A stack kind with ``fused = None`` (a kind of one's own, docs/extending.md): a
    one-stack RNN takes the stepped loop instead, which gives the fused pass's logits and
    gradients (float64, dropout off); the fused driver is not called."""
    import fruit.models.passes.sup_pass as passes
    from fruit.models.stack_kinds import Superposition

    torch.manual_seed(0)
    model = build_model("LSTM+Sup+R", vocab_size=7, d=6, sup_size=3).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.8, 0.8)
    tokens = torch.randint(0, 7, (3, 6), generator=torch.Generator().manual_seed(7))
    params = [p for p in model.parameters() if p.requires_grad]
    calls = []
    real = passes.sup_pass
    monkeypatch.setattr(passes, "sup_pass", lambda *a: calls.append(1) or real(*a))
    fused = model(tokens)
    fused_grads = torch.autograd.grad(fused.sum(), params)
    assert calls == [1]  # the registered Sup kind took its fused driver

    class Stepped(Superposition):
        fused = None

    monkeypatch.setattr(model.stacks[0], "stack_kind", Stepped())
    stepped = model(tokens)
    stepped_grads = torch.autograd.grad(stepped.sum(), params)
    assert calls == [1]  # not again
    assert (fused - stepped).abs().max() < 1e-12
    for a, b in zip(fused_grads, stepped_grads):
        assert (a - b).abs().max() < 1e-10
