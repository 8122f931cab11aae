"""The fused Nd stack-RNN pass (fruit.models.passes.nd_pass) against the same recurrence
written with plain autograd operations and the paper-notation dVPDA
(fruit.stacks.reference), against finite differences (gradcheck), on the C kernels and on
PyTorch operations; and the Nd models' fused training pass against their stepped pass."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from reference_controller import controller_steps

from fruit.models import build_model
from fruit.models.passes.nd_pass import nd_pass
from fruit.stacks import num_actions
from fruit.stacks import reference as ref
from fruit.stacks.implementation import dvpda_buffers, dvpda_kernels

F64, F32 = torch.float64, torch.float32
Q, S, M = 2, 2, 2  # dVPDA states, symbols, pushed-vector size


@pytest.fixture(params=["native", "torch"])
def backend(request, monkeypatch):
    """Which implementation the dVPDA and the pieces run on: C kernels or PyTorch operations."""
    monkeypatch.setenv("FRUIT_NATIVE", "1" if request.param == "native" else "0")
    if request.param == "native" and dvpda_kernels(torch.zeros((), dtype=F64)) is None:
        pytest.skip("the C kernels are not built here (no C compiler)")
    return request.param


def reference_pass(projected, h0, c0, W_head, b_head, bottom_log, weights, biases, updates, masks):
    """docs/paper.md §4/§6/§8 step by step with autograd (tests/reference_controller.py) with
    the paper-notation dVPDA (in float64)."""
    B, A = projected.size(1), num_actions(Q, S)
    run = ref.DVPDA(bottom_log.double(), B, Q, S)

    def stack_step(head):
        head = head.double()
        return run.step(head[:, :A], F.logsigmoid(head[:, A:])).to(projected.dtype)

    tops, readings = controller_steps(
        projected, h0, c0, W_head, b_head, weights, biases, updates, masks,
        run.reading().to(projected.dtype), stack_step,
    )  # fmt: skip
    empty = projected.new_zeros(0, B, Q * S * M)
    return torch.stack(tops), torch.stack(readings) if readings else empty


def random_inputs(lstm, n=5, B=3, d=4, L=3, dropout=False, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=0.7):
        return (scale * torch.randn(*shape, generator=g, dtype=F64)).to(dtype).requires_grad_()

    G, r = (4 * d if lstm else d), Q * S * M
    masks = None
    if dropout:  # the multipliers of dropout p = 0.4: 0 or 1 / 0.6
        masks = ((torch.rand(L - 1, n, B, d, generator=g, dtype=F64) >= 0.4) / 0.6).to(dtype)
    return dict(
        projected=rand(n, B, G),
        h0=rand(L, B, d),
        c0=rand(L, B, d) if lstm else None,
        W_head=rand(d, num_actions(Q, S) + M, scale=3.0),
        b_head=rand(num_actions(Q, S) + M),
        bottom_log=rand(M),
        weights=[rand(r + d, G)] + [rand(2 * d, G) for _ in range(L - 1)],
        biases=[rand(G) for _ in range(L - 1)],
        masks=masks,
    )


def leaves(inputs):
    out = [inputs[k] for k in ("projected", "h0", "W_head", "b_head", "bottom_log")]
    out += [inputs["c0"]] if inputs["c0"] is not None else []
    return out + inputs["weights"] + inputs["biases"]


def fused(updates, **inputs):
    buffers = dvpda_buffers(inputs["bottom_log"].detach().double(), inputs["h0"].size(1),
                            updates, Q, S)  # fmt: skip
    names = ("projected", "h0", "c0", "W_head", "b_head", "bottom_log")
    args = [inputs[k] for k in names] + [Q, S, inputs["weights"], inputs["biases"], updates]
    return nd_pass(buffers, *args, inputs["masks"])


def outputs_and_grads(fn, inputs, updates, seed=9):
    tops, readings = fn(updates=updates, **inputs)
    g = torch.Generator().manual_seed(seed)
    w_tops = torch.randn(tops.shape, generator=g, dtype=F64).to(tops)
    w_readings = torch.randn(readings.shape, generator=g, dtype=F64).to(tops)
    loss = (tops * w_tops).sum() + (readings * w_readings).sum()
    xs = leaves(inputs)
    grads = torch.autograd.grad(loss, xs, allow_unused=True)  # no update: the heads are unused
    grads = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, xs)]
    return [tops.detach(), readings.detach(), *grads]


@pytest.mark.parametrize("lstm", [False, True], ids=["RNN", "LSTM"])
@pytest.mark.parametrize("dropout", [False, True], ids=["eval", "dropout"])
@pytest.mark.parametrize("last_update", [True, False], ids=["updates=n", "updates=n-1"])
def test_nd_pass_equals_autograd_reference(lstm, dropout, last_update, backend):
    inputs = random_inputs(lstm, dropout=dropout)
    n = inputs["projected"].size(0)
    updates = n if last_update else n - 1
    got = outputs_and_grads(fused, inputs, updates)
    want = outputs_and_grads(reference_pass, inputs, updates)
    assert got[1].shape == (updates, 3, Q * S * M)
    for a, b in zip(got, want):
        assert (a - b).abs().max() < 1e-10 * max(1.0, b.abs().max().item())


@pytest.mark.parametrize("lstm", [False, True], ids=["RNN", "LSTM"])
@pytest.mark.parametrize("n, updates", [(1, 0), (1, 1), (6, 5), (6, 6)])
def test_nd_pass_float32_within_float32_rounding(lstm, n, updates, backend):
    """float32 controller (oneDNN products, the float kernels), float64 dVPDA, against the
    float64 reference; n = 1 without any stack update included."""
    inputs = random_inputs(lstm, n=n, seed=n + updates)
    single = random_inputs(lstm, n=n, seed=n + updates, dtype=F32)
    want = outputs_and_grads(reference_pass, inputs, updates)
    got = outputs_and_grads(fused, single, updates)
    for a, b in zip(got, want):
        assert a.dtype == F32 and a.shape == b.shape
        if b.numel():
            assert (a.double() - b).abs().max() < 2e-5 * max(1.0, b.abs().max().item())


@pytest.mark.parametrize("lstm", [False, True], ids=["RNN", "LSTM"])
def test_nd_pass_gradcheck(lstm, backend):
    inputs = random_inputs(lstm, n=3, B=2, d=2, L=2)
    keys = [
        k
        for k in ("projected", "h0", "c0", "W_head", "b_head", "bottom_log")
        if inputs[k] is not None
    ]

    def f(*xs):
        return fused(3, **{**inputs, **dict(zip(keys, xs))})

    assert torch.autograd.gradcheck(f, [inputs[k] for k in keys])


@pytest.mark.parametrize("arch", ["RNN+Nd", "LSTM+Nd+R"])
def test_fused_nd_pass_equals_stepped_pass_in_training(arch, fused_equals_stepped):
    """The fused Nd pass against the stepped pass, same dropout masks (conftest)."""
    torch.manual_seed(0)
    options = dict(nd_states=Q, nd_symbols=S, nd_size=M, dropout=0.4)
    model = build_model(arch, vocab_size=7, d=5, **options).double().train()
    fused_equals_stepped(model, "nd_pass", nd_pass, masks_at=12)


@pytest.mark.gpu
@pytest.mark.parametrize("lstm", [False, True], ids=["RNN", "LSTM"])
def test_nd_pass_cuda_matches_cpu(lstm):
    """On CUDA the pass runs the dVPDA's PyTorch operations (dvpda_scan.Buffers)."""
    inputs = random_inputs(lstm, dropout=True)

    def moved(x):
        return x.detach().cuda().requires_grad_(x.requires_grad)

    on_gpu = {
        k: None if v is None else [moved(x) for x in v] if isinstance(v, list) else moved(v)
        for k, v in inputs.items()
    }
    cpu = outputs_and_grads(fused, inputs, 5)
    gpu = outputs_and_grads(fused, on_gpu, 5)
    for a, b in zip(gpu, cpu):
        assert (a.cpu() - b).abs().max() < 1e-10 * max(1.0, b.abs().max().item())
