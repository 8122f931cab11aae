"""The dVPDA's C kernels (fruit.stacks.fast.dvpda_native, dvpda.c) against its PyTorch
operations (fruit.stacks.fast.dvpda_scan, dvpda_run with FRUIT_NATIVE=0): readings and
gradients of both APIs in float64 and float32, edge cases, the step API's growing
buffers, branches and partial backward passes; where the implementation is chosen
(fruit.stacks.implementation); and the fallback when the kernels cannot be built.
(Both against the paper-notation reference: tests/test_stacks_reference.py.)"""

from __future__ import annotations

import warnings

import pytest
import torch

import fruit.stacks.nondeterministic as nondeterministic
from fruit.kernels import build
from fruit.stacks import (
    DVPDAStack,
    dvpda_readings,
    dvpda_readings_stepwise,
    num_actions,
)
from fruit.stacks.fast import dvpda_native
from fruit.stacks.fast.dvpda_native import NativeBuffers
from fruit.stacks.fast.dvpda_scan import Buffers
from fruit.stacks.implementation import dvpda_kernels

F64, F32 = torch.float64, torch.float32


def needs_native(dtype=F64):
    if dvpda_kernels(torch.zeros((), dtype=dtype)) is None:
        pytest.skip("the dVPDA C kernels are not built here (no C compiler, or FRUIT_NATIVE=0)")


@pytest.fixture
def fresh_build(monkeypatch, tmp_path):
    """An empty cache folder, and no library remembered from earlier tests."""
    monkeypatch.setenv("FRUIT_CACHE_DIR", str(tmp_path))
    build.library.cache_clear()
    yield tmp_path
    build.library.cache_clear()


def random_nd(B, n, Q, S, m, seed, scale=1.0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    logits = scale * torch.randn(B, n, num_actions(Q, S), generator=g, dtype=dtype)
    pushed_log = torch.randn(B, n, m, generator=g, dtype=dtype) * (1 + scale / 4)
    bottom_log = torch.randn(m, generator=g, dtype=dtype)
    return logits, pushed_log, bottom_log


def readings_and_grads(impl, inputs, Q, S, monkeypatch, native_on, loss_steps=None, **kw):
    """Readings of impl and the gradients of a random linear function of them (of the
    first loss_steps readings only, when given)."""
    monkeypatch.setenv("FRUIT_NATIVE", "1" if native_on else "0")
    xs = [x.clone().requires_grad_() for x in inputs]
    readings = impl(*xs, Q, S, **kw)
    g = torch.Generator().manual_seed(99)
    weights = torch.randn(readings.shape, generator=g, dtype=F64).to(readings.dtype)
    used = readings if loss_steps is None else readings[:, :loss_steps]
    (used * weights[:, : used.size(1)]).sum().backward()
    return [readings.detach()] + [x.grad for x in xs]


def assert_close(got, want, rel):
    for a, b in zip(got, want):
        assert a.shape == b.shape
        if b.numel() == 0:
            continue
        scale = max(1.0, b.abs().max().item())
        assert (a.double() - b.double()).abs().max().item() <= rel * scale


def stepped(logits, pushed_log, bottom_log, Q, S, length=None):
    state = DVPDAStack.initial(bottom_log, logits.size(0), Q, S, length=length)
    out = []
    for t in range(logits.size(1)):
        state = state.step(logits[:, t], pushed_log[:, t])
        out.append(state.reading())
    return torch.stack(out, 1)


# ---------------------------------------------------------------- where it is chosen


def test_kernels_are_chosen_on_the_cpu_for_float_dtypes(monkeypatch):
    needs_native()
    for dtype in (F32, F64):
        assert dvpda_kernels(torch.zeros((), dtype=dtype)) is not None
    assert dvpda_kernels(torch.zeros((), dtype=torch.bfloat16)) is None
    bottom = torch.zeros(3, dtype=F64)
    assert isinstance(DVPDAStack.initial(bottom, 2, 2, 2).run.buffers, NativeBuffers)
    monkeypatch.setenv("FRUIT_NATIVE", "0")
    assert dvpda_kernels(torch.zeros((), dtype=F64)) is None
    assert isinstance(DVPDAStack.initial(bottom, 2, 2, 2).run.buffers, Buffers)
    if torch.cuda.is_available():
        monkeypatch.setenv("FRUIT_NATIVE", "1")
        assert dvpda_kernels(torch.zeros((), device="cuda")) is None


# ---------------------------------------------------------------- against the reference

CASES = [  # B, n, Q, S, m, logit scale
    (2, 5, 1, 1, 2, 1.0),
    (2, 6, 2, 1, 3, 2.0),
    (3, 7, 2, 3, 3, 1.0),
    (2, 9, 4, 2, 2, 2.0),  # Q = 4: the kernels' generic path
    (3, 12, 3, 3, 5, 3.0),
    (2, 40, 3, 3, 5, 2.0),  # many row blocks per column
    (2, 24, 3, 3, 5, 20.0),  # weights from e^-60 to e^60
]


@pytest.mark.parametrize("B,n,Q,S,m,scale", CASES)
@pytest.mark.parametrize("impl", [dvpda_readings, dvpda_readings_stepwise])
def test_float64_matches_the_reference(impl, B, n, Q, S, m, scale, monkeypatch):
    needs_native()
    inputs = random_nd(B, n, Q, S, m, seed=n * 10 + Q, scale=scale)
    fast = readings_and_grads(impl, inputs, Q, S, monkeypatch, True)
    reference = readings_and_grads(impl, inputs, Q, S, monkeypatch, False)
    assert_close(fast, reference, 1e-11)


def test_extreme_logits_match_the_reference(monkeypatch):
    """Logits, pushed logs and bottom in [-50, 50], n = 64: relative to each reading's size."""
    needs_native()
    g = torch.Generator().manual_seed(0)
    n = 64
    inputs = [(torch.rand(*shape, generator=g, dtype=F64) * 100 - 50) for shape in
              ((2, n, 189), (2, n, 5), (5,))]  # fmt: skip
    results = []
    for on in (True, False):
        monkeypatch.setenv("FRUIT_NATIVE", "1" if on else "0")
        xs = [x.clone().requires_grad_() for x in inputs]
        readings = dvpda_readings(*xs, 3, 3)
        size = readings.detach().abs().amax(-1, keepdim=True).clamp_min(1e-300)
        (readings / size).sum().backward()
        results.append((readings.detach() / size, *(x.grad for x in xs)))
    assert_close(results[0], results[1], 1e-9)


@pytest.mark.parametrize("length", [None, 20])
def test_step_api_matches_the_reference(length, monkeypatch):
    """Known length, and growing buffers (capacity 4, then 8, 16, 32)."""
    needs_native()
    monkeypatch.setattr(nondeterministic, "INITIAL_CAPACITY", 4)
    inputs = random_nd(3, 20, 3, 3, 5, seed=5, scale=2.0)
    step = lambda *a: stepped(*a, length=length)  # noqa: E731
    fast = readings_and_grads(step, inputs, 3, 3, monkeypatch, True)
    reference = readings_and_grads(step, inputs, 3, 3, monkeypatch, False)
    whole = readings_and_grads(dvpda_readings, inputs, 3, 3, monkeypatch, True)
    assert_close(fast, reference, 1e-11)
    assert_close(whole, fast, 1e-11)


@pytest.mark.parametrize("length", [None, 9])
def test_partial_and_repeated_backward(length, monkeypatch):
    """A loss on the first readings only (the backward pass starts below the last update),
    then on all of them, twice over the same graph."""
    needs_native()
    inputs = random_nd(2, 9, 3, 3, 4, seed=6, scale=2.0)
    for steps in (4, 1, None):
        got = readings_and_grads(stepped, inputs, 3, 3, monkeypatch, True, steps, length=length)
        want = readings_and_grads(stepped, inputs, 3, 3, monkeypatch, False, steps, length=length)
        assert_close(got, want, 1e-11)
    monkeypatch.setenv("FRUIT_NATIVE", "1")
    xs = [x.clone().requires_grad_() for x in inputs]
    readings = stepped(*xs, 3, 3, length=length)
    monkeypatch.setenv("FRUIT_NATIVE", "0")
    ys = [x.clone().requires_grad_() for x in inputs]
    plain = stepped(*ys, 3, 3, length=length)
    for steps in (5, None, 2):
        loss, plain_loss = readings[:, :steps].sum(), plain[:, :steps].sum()
        first = torch.autograd.grad(loss, xs, retain_graph=True)
        again = torch.autograd.grad(loss, xs, retain_graph=True)
        want = torch.autograd.grad(plain_loss, ys, retain_graph=True)
        for a, b in zip(first, again):
            assert torch.equal(a, b)
        assert_close(first, want, 1e-11)


def test_select_and_branch_match_the_whole_sequence(monkeypatch):
    needs_native()
    logits, pushed_log, bottom_log = random_nd(4, 7, 3, 3, 5, seed=8)
    full = dvpda_readings(logits, pushed_log, bottom_log, 3, 3)
    with torch.no_grad():
        state = DVPDAStack.initial(bottom_log, 4, 3, 3)
        for t in range(4):
            state = state.step(logits[:, t], pushed_log[:, t])
        index = torch.tensor([3, 1, 3])
        picked = state.select(index).step(logits[index, 4], pushed_log[index, 4])
        a = state.step(logits[:, 4], pushed_log[:, 4])
        b = state.step(logits[:, 4].flip(-1), pushed_log[:, 4])  # a branch: copied buffers
        a = a.step(logits[:, 5], pushed_log[:, 5])
    assert isinstance(state.run.buffers, NativeBuffers)
    assert (picked.reading() - full[index, 4]).abs().max() < 1e-12
    assert (a.reading() - full[:, 5]).abs().max() < 1e-12
    assert (b.reading() - full[:, 4]).abs().max() > 1e-3


# ---------------------------------------------------------------- float32


def test_float32_recurrences_within_float32_rounding(monkeypatch):
    """compute_dtype=None with float32 inputs: float32 kernels against the float64
    reference, readings and gradients (moderate logits: float32's range suffices)."""
    needs_native(F32)
    inputs = random_nd(2, 32, 3, 3, 5, seed=9, scale=3.0)
    exact = readings_and_grads(dvpda_readings, inputs, 3, 3, monkeypatch, False)
    single = [x.float() for x in inputs]
    fast = readings_and_grads(dvpda_readings, single, 3, 3, monkeypatch, True, compute_dtype=None)
    assert all(x.dtype == F32 for x in fast)
    assert_close(fast, exact, 1e-4)
    step = readings_and_grads(dvpda_readings_stepwise, inputs, 3, 3, monkeypatch, True)
    assert_close(step, exact, 1e-11)  # the step API computes in float64 by default


def test_float32_inputs_with_float64_recurrences(monkeypatch):
    """The default: float32 in and out, float64 inside; the two implementations agree to
    float32 rounding."""
    needs_native()
    inputs = [x.float() for x in random_nd(3, 16, 3, 3, 5, seed=10, scale=2.0)]
    fast = readings_and_grads(dvpda_readings, inputs, 3, 3, monkeypatch, True)
    reference = readings_and_grads(dvpda_readings, inputs, 3, 3, monkeypatch, False)
    assert all(x.dtype == F32 for x in fast)
    assert_close(fast, reference, 1e-6)


# ---------------------------------------------------------------- edge cases


@pytest.mark.parametrize("impl", [dvpda_readings, dvpda_readings_stepwise])
@pytest.mark.parametrize("n", [0, 1, 2])
def test_short_sequences(impl, n, monkeypatch):
    needs_native()
    inputs = random_nd(3, n, 3, 3, 5, seed=11)
    if n == 0 and impl is dvpda_readings_stepwise:  # no update: a constant (B, 0, 45)
        assert impl(*inputs, 3, 3).shape == (3, 0, 45)
        return
    fast = readings_and_grads(impl, inputs, 3, 3, monkeypatch, True)
    reference = readings_and_grads(impl, inputs, 3, 3, monkeypatch, False)
    assert fast[0].shape == (3, n, 45)
    assert_close(fast, reference, 1e-12)


def test_empty_batch_and_minus_infinity(monkeypatch):
    """B = 0; and logits of -inf (weight 0) with a bottom vector of zeros. (An update
    whose logits are all -inf leaves no run with positive weight: both implementations
    then give NaN gradients.)"""
    needs_native()
    inputs = random_nd(0, 4, 2, 2, 3, seed=12)
    assert dvpda_readings(*inputs, 2, 2).shape == (0, 4, 12)
    logits, pushed_log, bottom_log = random_nd(2, 6, 2, 2, 3, seed=13)
    logits[:, :, ::3] = -torch.inf
    bottom_log = torch.full_like(bottom_log, -torch.inf)
    inputs = logits, pushed_log, bottom_log
    fast = readings_and_grads(dvpda_readings, inputs, 2, 2, monkeypatch, True)
    reference = readings_and_grads(dvpda_readings, inputs, 2, 2, monkeypatch, False)
    assert all(torch.isfinite(x).all() for x in fast)
    assert_close(fast, reference, 1e-12)


def test_gradcheck_several_row_blocks():
    """X = 4 states x symbols, n = 8: columns of several row blocks."""
    needs_native()
    logits, pushed_log, bottom_log = random_nd(1, 8, 2, 2, 2, seed=14)
    for x in (logits, pushed_log, bottom_log):
        x.requires_grad_()
    for impl in (dvpda_readings, dvpda_readings_stepwise):
        assert torch.autograd.gradcheck(
            lambda a, v, b, impl=impl: impl(a, v, b, 2, 2), (logits, pushed_log, bottom_log)
        )


def test_native_buffers_use_less_memory_than_the_reference():
    needs_native()
    bottom = torch.zeros(5, dtype=F64)
    for n in (16, 64):
        fast = NativeBuffers(dvpda_kernels(bottom), bottom, 2, n, 3, 3).gamma.numel()
        reference = Buffers(bottom, 2, n, 3, 3).gamma.numel()
        assert fast < 0.65 * reference  # a triangle (plus row padding), not a square


# ---------------------------------------------------------------- building


def test_kernels_are_built_into_the_cache(fresh_build):
    needs_native()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for real in ("float", "double"):
            assert build.library(dvpda_native.SOURCE, real) is not None
    assert sorted(p.name[:12] for p in fresh_build.iterdir()) == ["dvpda-double", "dvpda-float-"]


def test_no_compiler_falls_back_to_pytorch(fresh_build, monkeypatch):
    inputs = random_nd(2, 6, 3, 3, 5, seed=15, scale=2.0)
    reference = readings_and_grads(dvpda_readings, inputs, 3, 3, monkeypatch, False)
    monkeypatch.setenv("CC", "no-such-compiler-here")
    monkeypatch.setenv("FRUIT_NATIVE", "1")
    with pytest.warns(RuntimeWarning, match="nondeterministic stack.*no C compiler"):
        assert dvpda_kernels(torch.zeros((), dtype=F64)) is None
    got = readings_and_grads(dvpda_readings, inputs, 3, 3, monkeypatch, True)
    assert_close(got, reference, 0)
    assert isinstance(DVPDAStack.initial(inputs[2], 2, 3, 3).run.buffers, Buffers)
    build.library.cache_clear()
    monkeypatch.setenv("FRUIT_NATIVE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # switched off: no warning
        assert dvpda_kernels(torch.zeros((), dtype=F64)) is None
    assert list(fresh_build.iterdir()) == []


def test_a_failed_build_warns_and_falls_back(fresh_build, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a "compiler" that always fails
    monkeypatch.setenv("FRUIT_NATIVE", "1")
    with pytest.warns(RuntimeWarning, match="runs on PyTorch operations"):
        assert build.library(dvpda_native.SOURCE, "double") is None
    assert list(fresh_build.iterdir()) == []


def test_a_compiler_without_march_native_builds_correct_kernels(fresh_build, monkeypatch):
    """Without -march=native the vectors are narrower (SSE2: a different row block), and
    the results are the same."""
    if build.compiler() is None:
        pytest.skip("no C compiler ($CC or cc) on this machine")
    (fresh_build / "bin").mkdir()
    wrapper = fresh_build / "bin" / "cc-without-march-native"
    wrapper.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = -march=native ] && exit 1; done\n'
        f'exec {build.compiler()[0]} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv("FRUIT_NATIVE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build.library(dvpda_native.SOURCE, "double") is not None
    inputs = random_nd(2, 14, 3, 3, 5, seed=16, scale=2.0)
    for impl in (dvpda_readings, dvpda_readings_stepwise):
        fast = readings_and_grads(impl, inputs, 3, 3, monkeypatch, True)
        reference = readings_and_grads(impl, inputs, 3, 3, monkeypatch, False)
        assert_close(fast, reference, 1e-11)
