"""The paper-notation references (fruit.stacks.reference) against brute-force enumeration of
runs, and every fast path of the stacks against the references: the whole-sequence and step
APIs on the PyTorch implementation and on the C kernels, readings and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fruit.stacks import (
    DVPDAStack,
    SuperpositionStack,
    dvpda_readings,
    dvpda_readings_stepwise,
    num_actions,
    superposition_readings,
)
from fruit.stacks import reference as ref
from fruit.stacks.bruteforce import dvpda_bruteforce, superposition_bruteforce
from fruit.stacks.implementation import dvpda_kernels

F64, F32 = torch.float64, torch.float32


def random_nd(B, n, Q, S, m, seed, kind="normal", dtype=F64):
    """kind: "normal" (logits N(0, 1)), "wide" (N(0, 3^2)) or "extreme" (logits, pushed logs
    and bottom uniform in [-50, 50])."""
    g = torch.Generator().manual_seed(seed)
    shapes = (B, n, num_actions(Q, S)), (B, n, m), (m,)
    if kind == "extreme":
        return [torch.rand(*s, generator=g, dtype=dtype) * 100 - 50 for s in shapes]
    scale = 3.0 if kind == "wide" else 1.0
    return [scale * torch.randn(*s, generator=g, dtype=dtype) for s in shapes]


def random_sup(B, n, m, seed, extreme=False):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, n, 3, generator=g, dtype=F64) * (50 if extreme else 3)
    return torch.softmax(logits, -1), torch.randn(B, n, m, generator=g, dtype=F64)


# ---------------------------------------------------------------- references vs brute force


@pytest.mark.parametrize("n,m,extreme", [(1, 2, False), (3, 1, False), (5, 3, False), (5, 2, True)])
def test_reference_superposition_matches_bruteforce(n, m, extreme):
    probs, pushed = random_sup(2, n, m, seed=n + m, extreme=extreme)
    got = ref.superposition_readings(probs, pushed)
    for b in range(2):
        expected = superposition_bruteforce(probs[b].numpy(), pushed[b].numpy())
        assert np.abs(got[b].numpy() - expected).max() < 1e-10


@pytest.mark.parametrize("kind", ["normal", "wide", "extreme"])
@pytest.mark.parametrize("Q,S,m,n", [(1, 1, 2, 5), (2, 1, 3, 5), (1, 2, 2, 5), (2, 2, 2, 5),
                                     (3, 2, 2, 4), (3, 3, 2, 4)])  # fmt: skip
def test_reference_dvpda_matches_bruteforce(Q, S, m, n, kind):
    logits, pushed_log, bottom_log = random_nd(2, n, Q, S, m, seed=Q * 10 + S + m, kind=kind)
    got = ref.dvpda_readings(logits, pushed_log, bottom_log, Q, S)
    for b in range(2):
        expected = dvpda_bruteforce(logits[b], pushed_log[b], bottom_log, Q, S)
        # relative to each reading's size (with extreme inputs readings reach e^50)
        size = np.maximum(np.abs(expected).max(-1, keepdims=True), 1.0)
        assert (np.abs(got[b].numpy() - expected) / size).max() < 1e-10


def test_reference_dvpda_initial_reading_and_gradcheck():
    logits, pushed_log, bottom_log = random_nd(2, 3, 2, 2, 2, seed=1)
    run = ref.DVPDA(bottom_log, 2, 2, 2)
    expected = torch.zeros(2, 8, dtype=F64)
    expected[:, :2] = bottom_log.exp()  # v_0 in the block (q0, ⊥)
    assert torch.allclose(run.reading(), expected, atol=1e-15)
    for x in (logits, pushed_log, bottom_log):
        x.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, v, b: ref.dvpda_readings(a, v, b, 2, 2), (logits, pushed_log, bottom_log)
    )


# ---------------------------------------------------------------- fast paths vs references


def stepped(logits, pushed_log, bottom_log, Q, S, length=None, compute_dtype=F64):
    state = DVPDAStack.initial(
        bottom_log, logits.size(0), Q, S, compute_dtype=compute_dtype, length=length
    )
    out = []
    for t in range(logits.size(1)):
        state = state.step(logits[:, t], pushed_log[:, t])
        out.append(state.reading())
    return torch.stack(out, 1)


FAST_DVPDA = {
    "whole": dvpda_readings,
    "stepwise": dvpda_readings_stepwise,
    "step-length": lambda *a, **kw: stepped(*a, length=a[0].size(1), **kw),
}


def readings_and_grads(impl, inputs, Q, S, **kw):
    """Readings (each divided by its largest entry, a constant) and the gradients of a
    fixed random linear function of them."""
    xs = [x.clone().requires_grad_() for x in inputs]
    readings = impl(*xs, Q, S, **kw)
    size = readings.detach().abs().amax(-1, keepdim=True).clamp_min(1e-300)
    g = torch.Generator().manual_seed(99)
    weights = torch.randn(readings.shape, generator=g, dtype=F64).to(readings.dtype)
    (readings / size * weights).sum().backward()
    return [readings.detach() / size] + [x.grad for x in xs]


def assert_close(got, want, rel):
    for a, b in zip(got, want):
        assert a.shape == b.shape
        scale = max(1.0, b.abs().max().item())
        assert (a.double() - b.double()).abs().max().item() <= rel * scale


@pytest.mark.parametrize("native", [False, True], ids=["torch", "native"])
@pytest.mark.parametrize("api", sorted(FAST_DVPDA))
@pytest.mark.parametrize("B,n,Q,S,m,kind", [
    (2, 6, 2, 2, 3, "normal"),
    (2, 9, 3, 3, 5, "wide"),
    (2, 7, 3, 3, 5, "extreme"),
    (2, 5, 4, 2, 2, "normal"),  # Q = 4: the C kernels' generic path
    (3, 2, 3, 3, 5, "normal"),
])  # fmt: skip
def test_fast_dvpda_matches_the_reference(api, native, B, n, Q, S, m, kind, monkeypatch):
    """float64: readings and gradients within 1e-10 of the autograd reference."""
    monkeypatch.setenv("FRUIT_NATIVE", "1" if native else "0")
    if native and dvpda_kernels(torch.zeros((), dtype=F64)) is None:
        pytest.skip("the dVPDA C kernels are not built here (no C compiler)")
    inputs = random_nd(B, n, Q, S, m, seed=n * 7 + Q, kind=kind)
    want = readings_and_grads(ref.dvpda_readings, inputs, Q, S)
    got = readings_and_grads(FAST_DVPDA[api], inputs, Q, S)
    assert_close(got, want, 1e-10)


@pytest.mark.parametrize("native", [False, True], ids=["torch", "native"])
def test_float32_dvpda_within_float32_rounding_of_the_reference(native, monkeypatch):
    """Recurrences in float32 (compute_dtype=None), moderate logits: within float32 rounding
    of the float64 reference."""
    monkeypatch.setenv("FRUIT_NATIVE", "1" if native else "0")
    if native and dvpda_kernels(torch.zeros((), dtype=F32)) is None:
        pytest.skip("the dVPDA C kernels are not built here (no C compiler)")
    inputs = random_nd(2, 8, 3, 3, 5, seed=3, kind="wide")
    want = readings_and_grads(ref.dvpda_readings, inputs, 3, 3)
    single = [x.float() for x in inputs]
    for api in (dvpda_readings, FAST_DVPDA["step-length"]):
        got = readings_and_grads(api, single, 3, 3, compute_dtype=None)
        assert all(x.dtype == F32 for x in got)
        assert_close(got, want, 2e-5)


def sup_stepped(probs, pushed, length=None):
    state = SuperpositionStack.initial(probs.size(0), pushed.size(2), dtype=F64, length=length)
    out = []
    for t in range(probs.size(1)):
        state = state.step(probs[:, t], pushed[:, t])
        out.append(state.reading())
    return torch.stack(out, 1)


@pytest.mark.parametrize("n", [1, 4, 9])
@pytest.mark.parametrize("extreme", [False, True])
def test_fast_superposition_matches_the_reference(n, extreme):
    probs, pushed = random_sup(3, n, 4, seed=n, extreme=extreme)
    weights = torch.randn(3, n, 4, generator=torch.Generator().manual_seed(5), dtype=F64)
    results = []
    for impl in (
        ref.superposition_readings,
        superposition_readings,
        sup_stepped,
        lambda a, v: sup_stepped(a, v, length=n),
    ):
        a, v = probs.clone().requires_grad_(), pushed.clone().requires_grad_()
        readings = impl(a, v)
        (readings * weights).sum().backward()
        results.append((readings.detach(), a.grad, v.grad))
    for other in results[1:]:
        assert_close(other, results[0], 1e-12)
