"""The fused Sup stack-RNN pass (fruit.models.passes.sup_pass) against the same recurrence
written with plain autograd operations, and against finite differences (gradcheck); each
with the pass's pointwise pieces as PyTorch operations and as C kernels
(fruit.models.passes.sup_cells)."""

from __future__ import annotations

import pytest
import torch
from reference_controller import controller_steps

from fruit.models import build_model
from fruit.models.passes.sup_cells import TorchCells, cells_for
from fruit.models.passes.sup_pass import sup_pass
from fruit.stacks.reference import superposition_update

F64 = torch.float64


@pytest.fixture(params=["torch-cells", "native-cells"])
def cells(request, monkeypatch):
    """Which pieces the pass runs on: PyTorch operations, or the C kernels (skipped
    where they could not be built; tests/test_models_native.py checks that they are
    built wherever a C compiler is)."""
    import fruit.models.passes.sup_pass as module

    if request.param == "torch-cells":
        monkeypatch.setattr(module, "cells_for", lambda x: TorchCells)
    elif cells_for(torch.zeros((), dtype=F64)) is TorchCells:
        pytest.skip("the C kernels are not built here (no C compiler, or FRUIT_NATIVE=0)")
    return request.param


def reference_pass(projected, h0, c0, W_head, b_head, weights, biases, updates, masks):
    """docs/paper.md §4/§8 step by step with autograd (tests/reference_controller.py) with
    the paper-notation superposition stack (fruit.stacks.reference, untruncated)."""
    B, m = projected.size(1), W_head.size(1) - 3
    stack = [projected.new_zeros(B, 0, m)]  # V_0

    def stack_step(head):
        probs, pushed = torch.softmax(head[:, :3], 1), torch.sigmoid(head[:, 3:])
        stack[0] = superposition_update(stack[0], probs, pushed)
        return stack[0][:, 0]

    tops, readings = controller_steps(
        projected, h0, c0, W_head, b_head, weights, biases, updates, masks,
        projected.new_zeros(B, m), stack_step,
    )  # fmt: skip
    empty = projected.new_zeros(0, B, m)
    return torch.stack(tops), torch.stack(readings) if readings else empty


def random_inputs(lstm, n=5, B=3, d=4, m=3, L=3, dropout=False, seed=0):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=0.7):
        return (scale * torch.randn(*shape, generator=g, dtype=F64)).requires_grad_()

    G = 4 * d if lstm else d
    masks = None
    if dropout:  # the multipliers of dropout p = 0.4: 0 or 1 / 0.6
        masks = (torch.rand(L - 1, n, B, d, generator=g, dtype=F64) >= 0.4) / 0.6
    return dict(
        projected=rand(n, B, G),
        h0=rand(L, B, d),
        c0=rand(L, B, d) if lstm else None,
        W_head=rand(d, 3 + m, scale=1.5),
        b_head=rand(3 + m),
        weights=[rand(m + d, G)] + [rand(2 * d, G) for _ in range(L - 1)],
        biases=[rand(G) for _ in range(L - 1)],
        masks=masks,
    )


def leaves(inputs):
    out = [inputs[k] for k in ("projected", "h0", "W_head", "b_head")]
    out += [inputs["c0"]] if inputs["c0"] is not None else []
    return out + inputs["weights"] + inputs["biases"]


@pytest.mark.parametrize("lstm", [False, True], ids=["RNN", "LSTM"])
@pytest.mark.parametrize("dropout", [False, True], ids=["eval", "dropout"])
@pytest.mark.parametrize("last_update", [True, False], ids=["updates=n", "updates=n-1"])
def test_sup_pass_equals_autograd_reference(lstm, dropout, last_update, cells):
    inputs = random_inputs(lstm, dropout=dropout)
    n = inputs["projected"].size(0)
    updates = n if last_update else n - 1
    g = torch.Generator().manual_seed(9)
    results = []
    for fn in (sup_pass, reference_pass):
        tops, readings = fn(**inputs, updates=updates)
        w_tops = torch.randn(tops.shape, generator=g, dtype=F64)
        w_readings = torch.randn(readings.shape, generator=g, dtype=F64)
        loss = (tops * w_tops).sum() + (readings * w_readings).sum()
        grads = torch.autograd.grad(loss, leaves(inputs))
        results.append((tops.detach(), readings.detach(), grads))
        g.manual_seed(9)  # the same output weights for both
    (tops, readings, grads), (tops_ref, readings_ref, grads_ref) = results
    assert readings.shape == (updates, 3, 3)
    assert (tops - tops_ref).abs().max() < 1e-12
    assert (readings - readings_ref).abs().max() < 1e-12
    for got, want in zip(grads, grads_ref):
        assert (got - want).abs().max() < 1e-10


def cast(inputs, dtype):
    """The same inputs as new leaves of another dtype."""

    def leaf(x):
        return x.detach().to(dtype).requires_grad_(x.requires_grad)

    return {
        k: None if v is None else [leaf(x) for x in v] if isinstance(v, list) else leaf(v)
        for k, v in inputs.items()
    }


@pytest.mark.parametrize("lstm", [False, True], ids=["RNN", "LSTM"])
@pytest.mark.parametrize("n, updates", [(1, 0), (1, 1), (6, 5), (6, 6)])
def test_sup_pass_float32_matches_float64(lstm, n, updates, cells):
    """float32 (oneDNN products, the float kernels) against float64: outputs and gradients
    within float32 rounding, including n = 1 without any stack update."""
    inputs = random_inputs(lstm, n=n, dropout=True, seed=5)
    results = []
    for dtype in (F64, torch.float32):
        x = cast(inputs, dtype)
        tops, readings = sup_pass(**x, updates=updates)
        loss = tops.sum() + readings.square().sum()
        grads = torch.autograd.grad(loss, leaves(x), allow_unused=True)
        results.append([tops, readings, *grads])
    for want, got in zip(*results):
        if want is None:  # the heads, when no update uses them
            assert got is None or not got.any()
            continue
        assert got.dtype == torch.float32 and got.shape == want.shape
        if want.numel():
            assert (got.double() - want).abs().max() < 1e-5 * max(1.0, want.abs().max().item())


def test_sup_pass_broadcasts_masks(cells):
    """Masks that broadcast to (L-1, n, B, d) give what their expanded copy gives."""
    inputs = random_inputs(True, dropout=True, seed=6)
    L, n, B, d = inputs["masks"].shape[0] + 1, *inputs["masks"].shape[1:]
    narrow = inputs["masks"][:, :, :1]  # (L-1, n, 1, d): one mask for the whole batch
    results = []
    for masks in (narrow, narrow.expand(L - 1, n, B, d).clone()):
        tops, readings = sup_pass(**{**inputs, "masks": masks}, updates=n)
        grads = torch.autograd.grad(tops.sum() + readings.sum(), leaves(inputs))
        results.append([tops, readings, *grads])
    for a, b in zip(*results):
        assert torch.equal(a, b)


@pytest.mark.parametrize("lstm", [False, True], ids=["RNN", "LSTM"])
def test_sup_pass_gradcheck(lstm, cells):
    inputs = random_inputs(lstm, n=4, B=2, d=2, m=2, dropout=True, seed=1)
    names = ["projected", "h0", "W_head", "b_head"]

    def f(*args):
        kwargs = dict(inputs)
        kwargs.update(zip(names, args))
        return sup_pass(**kwargs, updates=4)

    assert torch.autograd.gradcheck(f, [inputs[k] for k in names])

    def g(*weights):
        return sup_pass(**{**inputs, "weights": list(weights)}, updates=3)

    assert torch.autograd.gradcheck(g, inputs["weights"])


def test_sup_pass_single_step_without_update(cells):
    """n = 1 without +R: no stack update at all; the pass still gives h^L_1 and its gradients."""
    inputs = random_inputs(True, n=1)
    results = []
    for fn in (sup_pass, reference_pass):
        tops, readings = fn(**inputs, updates=0)
        assert readings.shape == (0, 3, 3)
        grads = torch.autograd.grad(tops.sum(), leaves(inputs), allow_unused=True)
        results.append((tops.detach(), grads))
    (tops, grads), (tops_ref, grads_ref) = results
    assert (tops - tops_ref).abs().max() < 1e-12
    for got, want in zip(grads, grads_ref):
        want = torch.zeros_like(got) if want is None else want  # the heads are unused
        assert (got - want).abs().max() < 1e-12


def test_sup_pass_rejects_a_wrong_number_of_updates():
    inputs = random_inputs(False, n=4)
    for updates in (2, 5):
        with pytest.raises(ValueError, match="n - 1 or n updates"):
            sup_pass(**inputs, updates=updates)


def test_stack_rnn_dropout_masks_keep_rate(monkeypatch):
    """The inter-layer masks drawn by the model: zero with probability p, else 1 / (1 - p)."""
    import fruit.models.passes.sup_pass as passes

    model = build_model("LSTM+Sup", vocab_size=7, d=16, sup_size=3, dropout=0.3).train()
    seen = []

    def spy(*args):
        seen.append(args[8])  # masks
        return sup_pass(*args)

    monkeypatch.setattr(passes, "sup_pass", spy)
    torch.manual_seed(0)
    model(torch.randint(0, 7, (64, 40)))
    (masks,) = seen
    assert masks.shape == (2, 40, 64, 16)
    kept = masks != 0
    assert torch.allclose(masks[kept], torch.tensor(1 / 0.7))
    assert abs(1 - kept.double().mean().item() - 0.3) < 0.01
    model.eval()
    seen.clear()
    model(torch.randint(0, 7, (2, 5)))
    assert seen == [None]


@pytest.mark.gpu
@pytest.mark.parametrize("lstm", [False, True], ids=["RNN", "LSTM"])
def test_sup_pass_cuda_matches_cpu(lstm):
    """The fused pass on CUDA: the same outputs and gradients as on the CPU (float64)."""
    results = []
    for device in ("cpu", "cuda"):
        inputs = random_inputs(lstm, dropout=True, seed=3)
        moved = {
            k: (
                [x.detach().to(device).requires_grad_() for x in v]
                if isinstance(v, list)
                else None
                if v is None
                else v.detach().to(device).requires_grad_(v.requires_grad)
            )
            for k, v in inputs.items()
        }
        tops, readings = sup_pass(**moved, updates=5)
        grads = torch.autograd.grad(tops.sum() + readings.square().sum(), leaves(moved))
        results.append([x.cpu() for x in (tops, readings, *grads)])
    for a, b in zip(*results):
        assert (a - b).abs().max() < 1e-10
