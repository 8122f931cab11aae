"""The superposition stack's whole-sequence C kernels (fruit.stacks.fast.superposition_native,
superposition.c) against the step-by-step PyTorch updates they replace (FRUIT_NATIVE=0):
readings and gradients in float64 and float32, short and empty sequences, an empty
batch, strided inputs, gradcheck, and a Tf+Sup model on both paths. (Both paths meet
brute-force enumeration and gradcheck in tests/test_stacks.py.)"""

from __future__ import annotations

import pytest
import torch

from fruit.errors import FruitError
from fruit.kernels import build
from fruit.models import build_model
from fruit.stacks import superposition_readings
from fruit.stacks.fast import superposition_native

F64, F32 = torch.float64, torch.float32


def needs_native(dtype):
    if build.library_for(superposition_native.SOURCE, torch.zeros((), dtype=dtype)) is None:
        pytest.skip("the superposition C kernels are not built here (no compiler, FRUIT_NATIVE=0)")


def inputs(B, n, m, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(B, n, 3, generator=g, dtype=dtype)).requires_grad_()
    pushed = torch.randn(B, n, m, generator=g, dtype=dtype).requires_grad_()
    weights = torch.randn(B, n, m, generator=g, dtype=dtype)
    return logits, pushed, weights


def readings_and_gradients(logits, pushed, weights):
    readings = superposition_readings(logits.softmax(-1), pushed)
    if not readings.requires_grad:  # the stepped path's empty sequence: a constant
        return readings, [torch.zeros_like(logits), torch.zeros_like(pushed)]
    grads = torch.autograd.grad((readings * weights).sum(), (logits, pushed), allow_unused=True)
    return readings, [
        torch.zeros_like(x) if g is None else g for x, g in zip((logits, pushed), grads)
    ]


def both_paths(monkeypatch, *args):
    native = readings_and_gradients(*args)
    monkeypatch.setenv("FRUIT_NATIVE", "0")
    stepped = readings_and_gradients(*args)
    monkeypatch.delenv("FRUIT_NATIVE")
    return native, stepped


@pytest.mark.parametrize("n", [1, 2, 3, 4, 9, 31, 64])
@pytest.mark.parametrize("dtype, tol", [(F64, 1e-13), (F32, 2e-6)])
def test_native_matches_the_stepped_updates(n, dtype, tol, monkeypatch):
    needs_native(dtype)
    (r1, g1), (r2, g2) = both_paths(monkeypatch, *inputs(5, n, 7, dtype, seed=n))
    scale = r2.abs().max().item() + 1
    assert (r1 - r2).abs().max().item() <= tol * scale
    for a, b in zip(g1, g2):
        assert (a - b).abs().max().item() <= tol * (b.abs().max().item() + 1)


@pytest.mark.parametrize("B, n, m", [(0, 5, 4), (3, 0, 4), (3, 5, 0)])
def test_empty_shapes(B, n, m, monkeypatch):
    needs_native(F64)
    (r1, g1), (r2, g2) = both_paths(monkeypatch, *inputs(B, n, m, F64))
    assert r1.shape == r2.shape == (B, n, m)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))


def test_strided_inputs(monkeypatch):
    needs_native(F64)
    logits, pushed, weights = inputs(4, 9, 6, F64)
    wide = torch.randn(4, 9, 10, dtype=F64)
    wide[..., 2:8] = pushed.detach()
    strided = wide[..., 2:8].requires_grad_()  # a view with row stride 10
    (r1, g1), (r2, g2) = both_paths(monkeypatch, logits, strided, weights)
    assert torch.allclose(r1, r2, rtol=0, atol=1e-13)
    assert all(torch.allclose(a, b, rtol=0, atol=1e-13) for a, b in zip(g1, g2))
    assert strided.stride(-2) == 10


@pytest.mark.parametrize(
    "probs_shape", [(1, 6, 3), (3, 7, 3), (3, 5, 3), (3, 6, 2)], ids=lambda s: str(s)
)
def test_mismatched_shapes_are_refused(probs_shape):
    # checked before any kernel runs: the C code would read the wrong rows or past the end
    with pytest.raises(FruitError, match=r"action_probs must be \(B, n, 3\) = \(3, 6, 3\)"):
        superposition_readings(torch.rand(probs_shape, dtype=F64), torch.randn(3, 6, 4, dtype=F64))


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_gradcheck(n):
    needs_native(F64)
    probs = torch.rand(2, n, 3, dtype=F64).softmax(-1).requires_grad_()
    pushed = torch.randn(2, n, 3, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(superposition_readings, (probs, pushed))


def test_a_tf_sup_model_is_the_same_on_both_paths(monkeypatch):
    needs_native(F32)
    torch.manual_seed(0)
    model = build_model("Tf+Sup+Sup", vocab_size=12, d=16, dropout=0.0)
    tokens = torch.randint(0, 12, (3, 11))

    def run():
        model.zero_grad()
        out = model(tokens)
        out.square().mean().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    out1, g1 = run()
    monkeypatch.setenv("FRUIT_NATIVE", "0")
    out2, g2 = run()
    assert (out1 - out2).abs().max() <= 1e-5
    assert len(g1) == len(g2) and all((a - b).abs().max() <= 1e-5 for a, b in zip(g1, g2))
