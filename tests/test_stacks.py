"""fruit.stacks against brute-force enumeration of runs, §14 values, gradcheck."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from fruit.errors import FruitError
from fruit.stacks import (
    DVPDAStack,
    SuperpositionStack,
    dvpda_readings,
    dvpda_readings_stepwise,
    num_actions,
    superposition_readings,
)
from fruit.stacks.bruteforce import dvpda_bruteforce, superposition_bruteforce

F64 = torch.float64
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def random_sup(B, n, m, seed, dtype=F64, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(3 * torch.randn(B, n, 3, generator=g, dtype=dtype), -1)
    pushed = torch.randn(B, n, m, generator=g, dtype=dtype)
    return probs.to(device), pushed.to(device)


def random_nd(B, n, Q, S, m, seed, scale=1.0, dtype=F64, device="cpu"):
    """Logits N(0, scale^2); with scale large this mixes huge and tiny weights."""
    g = torch.Generator().manual_seed(seed)
    A = num_actions(Q, S)
    logits = scale * torch.randn(B, n, A, generator=g, dtype=dtype)
    pushed_log = torch.randn(B, n, m, generator=g, dtype=dtype)
    bottom_log = torch.randn(m, generator=g, dtype=dtype)
    return logits.to(device), pushed_log.to(device), bottom_log.to(device)


# ---------------------------------------------------------------- superposition


def test_superposition_reference_values():
    # docs/paper.md §14: actions listed as (push, no-op, pop); the API takes (push, pop, no-op).
    listed = [(0.7, 0.2, 0.1), (0.5, 0.3, 0.2), (0.1, 0.6, 0.3), (0.2, 0.1, 0.7), (0.3, 0.3, 0.4)]
    probs = torch.tensor([[(p, o, n) for p, n, o in listed]], dtype=F64)
    pushed = torch.tensor([[(0.1 * t, 1 - 0.1 * t) for t in range(1, 6)]], dtype=F64)
    expected = [(0.07, 0.63), (0.121, 0.589), (0.1131, 0.5179), (0.11448, 0.34532)]
    expected.append((0.195696, 0.313764))
    got = superposition_readings(probs, pushed)[0]
    assert torch.allclose(got, torch.tensor(expected, dtype=F64), atol=1e-12)


@pytest.mark.parametrize("n,m,seed", [(1, 2, 0), (3, 1, 1), (5, 3, 2), (5, 2, 3)])
def test_superposition_matches_bruteforce(n, m, seed):
    probs, pushed = random_sup(3, n, m, seed)
    got = superposition_readings(probs, pushed)
    state = SuperpositionStack.initial(3, m, dtype=F64)
    assert torch.equal(state.reading(), torch.zeros(3, m, dtype=F64))
    for b in range(3):
        expected = superposition_bruteforce(probs[b].numpy(), pushed[b].numpy())
        assert np.abs(got[b].numpy() - expected).max() < 1e-10
    for t in range(n):
        state = state.step(probs[:, t], pushed[:, t])
        assert (state.reading() - got[:, t]).abs().max() < 1e-12


def _papers_eq5(probs, pushed, t):
    """App. B.1's Eq. (5) as printed: over the runs that start with a push at some step,
    end at step t and never pop the empty stack (which holds one zero vector), the
    weighted mean of the top vector. probs (n, 3) as (push, pop, no-op); pushed (n, m)."""
    pushed = np.asarray(pushed, dtype=float)
    num, den = np.zeros(pushed.shape[1]), 0.0
    for start in range(t):
        for run in itertools.product(range(3), repeat=t - start):
            if run[0] != 0:
                continue
            stack, weight, valid = [np.zeros(pushed.shape[1])], 1.0, True
            for step, action in enumerate(run, start):
                weight *= probs[step][action]
                if action == 0:
                    stack.append(pushed[step])
                elif action == 1:
                    if len(stack) == 1:
                        valid = False
                        break
                    stack.pop()
            if valid:
                num, den = num + weight * stack[-1], den + weight
    return num / den


def test_the_papers_eq5_as_printed_is_not_the_recurrence_we_follow():
    # docs/paper.md §5.3 gives these numbers: Eq. (5) reads v_1 at t = 1, the recurrence
    # (Sec. 3.1, the authors' code, our stacks) push * v_1; they differ at t = 2 too.
    probs = [(0.5, 0.3, 0.2), (0.6, 0.1, 0.3)]
    pushed = [(1.0, 2.0), (3.0, 5.0)]
    eq5 = np.array([_papers_eq5(probs, pushed, t) for t in (1, 2)])
    assert np.allclose(eq5, [(1.0, 2.0), (57 / 22, 48 / 11)])  # 2.59, 4.36
    ours = superposition_readings(
        torch.tensor([probs], dtype=F64), torch.tensor([pushed], dtype=F64)
    )
    assert torch.allclose(ours[0], torch.tensor([(0.5, 1.0), (1.95, 3.3)], dtype=F64))
    assert np.allclose(superposition_bruteforce(probs, pushed), ours[0].numpy())


def test_superposition_gradcheck():
    probs, pushed = random_sup(2, 5, 3, 7)
    probs.requires_grad_()
    pushed.requires_grad_()
    assert torch.autograd.gradcheck(superposition_readings, (probs, pushed))


def test_superposition_select_and_batch_independence():
    probs, pushed = random_sup(4, 6, 3, 11)
    full = superposition_readings(probs, pushed)
    # A string's readings do not depend on its batch mates or on later (padded) steps.
    for b in range(4):
        alone = superposition_readings(probs[b : b + 1, :4], pushed[b : b + 1, :4])
        assert torch.allclose(alone[0], full[b, :4], atol=1e-14)
    state = SuperpositionStack.initial(4, 3, dtype=F64)
    for t in range(3):
        state = state.step(probs[:, t], pushed[:, t])
    index = torch.tensor([2, 0, 2])
    state = state.select(index)
    state = state.step(probs[index, 3], pushed[index, 3])
    assert torch.allclose(state.reading(), full[index, 3], atol=1e-14)


# ---------------------------------------------------------------- nondeterministic


def nd_reference_inputs():
    """docs/paper.md §14: Q = S = m = 2, A = 40."""
    Q = S = 2
    A = num_actions(Q, S)
    assert A == 40
    logits = torch.tensor(
        [[[0.1 * ((7 * k + 3 * t) % 11) - 0.5 for k in range(A)] for t in range(1, 5)]], dtype=F64
    )
    pushed_log = torch.log(
        torch.tensor([[[0.2 + 0.15 * t, 0.3 + 0.15 * t] for t in range(1, 5)]], dtype=F64)
    )
    bottom_log = torch.nn.functional.logsigmoid(torch.tensor([0.3, -0.4], dtype=F64))
    return logits, pushed_log, bottom_log


ND_REFERENCE = [
    [0.574443, 0.401312, 0, 0, 0, 0, 0, 0],
    [0.129571, 0.109583, 0.130474, 0.129539, 0.087460, 0.086832, 0.117241, 0.099155],
    [0.138623, 0.140383, 0.110800, 0.116065, 0.141786, 0.142394, 0.100580, 0.109663],
    [0.155391, 0.164957, 0.130602, 0.141678, 0.144102, 0.150681, 0.134090, 0.146199],
    [0.162704, 0.173743, 0.156468, 0.171804, 0.171262, 0.181797, 0.156006, 0.170181],
]


@pytest.mark.parametrize("impl", [dvpda_readings, dvpda_readings_stepwise])
def test_dvpda_reference_values(impl):
    logits, pushed_log, bottom_log = nd_reference_inputs()
    expected = torch.tensor(ND_REFERENCE, dtype=F64)
    initial = DVPDAStack.initial(bottom_log, 1, 2, 2).reading()
    assert torch.allclose(initial[0], expected[0], atol=5e-7)
    got = impl(logits, pushed_log, bottom_log, 2, 2)
    assert torch.allclose(got[0], expected[1:], atol=5e-7)
    brute = dvpda_bruteforce(logits[0], pushed_log[0], bottom_log, 2, 2)
    assert np.abs(got[0].numpy() - brute).max() < 1e-10


ND_CASES = [  # Q, S, m, n, logit scale
    (1, 1, 2, 5, 1.0),
    (2, 1, 3, 5, 1.0),
    (1, 2, 2, 5, 2.0),
    (2, 2, 2, 5, 1.0),
    (2, 2, 1, 5, 20.0),  # weights from e^-60 to e^60
    (3, 2, 2, 4, 1.0),
    (3, 3, 2, 4, 3.0),
]


@pytest.mark.parametrize("Q,S,m,n,scale", ND_CASES)
def test_dvpda_matches_bruteforce(Q, S, m, n, scale):
    logits, pushed_log, bottom_log = random_nd(
        2, n, Q, S, m, seed=Q * 100 + S * 10 + m, scale=scale
    )
    # Very large and very small pushed vectors and bottom vector too.
    pushed_log = pushed_log * (1 + scale / 4)
    fast = dvpda_readings(logits, pushed_log, bottom_log, Q, S)
    step = dvpda_readings_stepwise(logits, pushed_log, bottom_log, Q, S)
    for b in range(2):
        expected = dvpda_bruteforce(logits[b], pushed_log[b], bottom_log, Q, S)
        rel = np.abs(expected).max()
        assert np.abs(fast[b].numpy() - expected).max() < 1e-10 * max(1.0, rel)
    assert (fast - step).abs().max() < 1e-12 * max(1.0, fast.abs().max().item())


def test_dvpda_embeds_superposition_exactly():
    """The paper's remark, made exact: Q = 1 and S = 2 symbols (bottom, x).

    A superposition stack popped when empty stays empty. The dVPDA cannot pop its
    bottom, so at the bottom we merge pop and no-op into the replace bottom -> bottom;
    above it, push x / replace x -> x / pop carry push / no-op / pop. With a zero bottom
    vector and locally normalised weights the readings (summed over the two symbol
    blocks) equal the superposition stack's.
    """
    B, n, m = 3, 6, 2
    probs, pushed = random_sup(B, n, m, 5)
    pushed = pushed.exp()  # dVPDA vectors are positive
    push, pop, noop = probs.unbind(-1)
    zero = torch.zeros_like(push)
    # rows (q=0, x=bottom), (q=0, x=x); columns push(bot, x), replace(bot, x), pop
    row_bottom = torch.stack([zero, push, noop + pop, zero, zero], -1)
    row_x = torch.stack([zero, push, zero, noop, pop], -1)
    logits = torch.cat([row_bottom, row_x], -1).log()
    bottom_log = torch.full((m,), -math.inf, dtype=F64)
    nd = dvpda_readings(logits, pushed.log(), bottom_log, 1, 2).view(B, n, 2, m).sum(2)
    sup = superposition_readings(probs, pushed)
    assert (nd - sup).abs().max() < 1e-12
    # With one symbol the bottom pop is simply lost: equal only when no pop is possible
    # at the bottom, e.g. when the first action is a sure push and pops never exceed it.
    # That case is covered by the brute force above (Q = S = 1).


@pytest.mark.parametrize("impl", [dvpda_readings, dvpda_readings_stepwise])
def test_dvpda_gradcheck(impl):
    logits, pushed_log, bottom_log = random_nd(2, 4, 2, 2, 2, seed=3)
    for x in (logits, pushed_log, bottom_log):
        x.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, v, b: impl(a, v, b, 2, 2), (logits, pushed_log, bottom_log)
    )


def test_dvpda_gradients_agree_between_apis():
    logits, pushed_log, bottom_log = random_nd(3, 9, 3, 3, 5, seed=4, scale=2.0)
    weights = torch.randn(3, 9, 45, dtype=F64)
    grads = []
    for impl in (dvpda_readings, dvpda_readings_stepwise):
        inputs = [x.clone().requires_grad_() for x in (logits, pushed_log, bottom_log)]
        (impl(*inputs, 3, 3) * weights).sum().backward()
        grads.append([x.grad for x in inputs])
    for a, b in zip(*grads):
        assert (a - b).abs().max() < 1e-10 * max(1.0, a.abs().max().item())


def test_dvpda_step_select_and_batch_independence():
    logits, pushed_log, bottom_log = random_nd(4, 7, 3, 3, 5, seed=8)
    full = dvpda_readings(logits, pushed_log, bottom_log, 3, 3)
    for b in range(4):
        alone = dvpda_readings(logits[b : b + 1, :5], pushed_log[b : b + 1, :5], bottom_log, 3, 3)
        assert (alone[0] - full[b, :5]).abs().max() < 1e-12
    state = DVPDAStack.initial(bottom_log, 4, 3, 3)
    for t in range(4):
        state = state.step(logits[:, t], pushed_log[:, t])
        assert (state.reading() - full[:, t]).abs().max() < 1e-12
    index = torch.tensor([3, 1, 3])
    state = state.select(index).step(logits[index, 4], pushed_log[index, 4])
    assert (state.reading() - full[index, 4]).abs().max() < 1e-12


def test_dvpda_rejects_wrong_action_count():
    logits, pushed_log, bottom_log = random_nd(1, 2, 3, 3, 5, seed=0)
    with pytest.raises(FruitError, match="189"):
        dvpda_readings(logits[..., :-1], pushed_log, bottom_log, 3, 3)


@pytest.mark.parametrize(
    "device,n",
    [
        ("cpu", 48),
        pytest.param("cpu", 256, marks=pytest.mark.slow),
        pytest.param("cuda", 256, marks=pytest.mark.gpu),
    ],
)
def test_robust_float32_long_extreme(device, n):
    """float32, n = 256, logits uniform in [-50, 50]: finite readings and gradients."""
    g = torch.Generator().manual_seed(0)
    B = 2
    logits = (torch.rand(B, n, 189, generator=g) * 100 - 50).to(device).requires_grad_()
    pushed_log = (torch.rand(B, n, 5, generator=g) * 100 - 50).to(device).requires_grad_()
    bottom_log = (torch.rand(5, generator=g) * 100 - 50).to(device).requires_grad_()
    readings = dvpda_readings(logits, pushed_log, bottom_log, 3, 3)
    assert torch.isfinite(readings).all()
    readings.sum().backward()
    for x in (logits, pushed_log, bottom_log):
        assert torch.isfinite(x.grad).all()
    probs = torch.softmax(logits[..., :3].detach(), -1).requires_grad_()
    pushed = pushed_log.detach().clone().requires_grad_()
    sup = superposition_readings(probs, pushed)
    assert torch.isfinite(sup).all()
    sup.sum().backward()
    assert torch.isfinite(probs.grad).all() and torch.isfinite(pushed.grad).all()


def test_float32_close_to_float64():
    """Moderate logits, n = 48: float32 recurrences track float64 ones."""
    logits, pushed_log, bottom_log = random_nd(2, 48, 3, 3, 5, seed=9, scale=3.0)
    exact = dvpda_readings(logits, pushed_log, bottom_log, 3, 3)
    args = (logits.float(), pushed_log.float(), bottom_log.float(), 3, 3)
    single = dvpda_readings(*args, compute_dtype=None)  # float32 recurrences
    assert (single.double() - exact).abs().max() < 1e-4 * max(1.0, exact.abs().max().item())


@pytest.mark.gpu
def test_cuda_matches_cpu():
    logits, pushed_log, bottom_log = random_nd(3, 12, 3, 3, 5, seed=12, scale=2.0)
    cpu = dvpda_readings(logits, pushed_log, bottom_log, 3, 3)
    gpu = dvpda_readings(logits.cuda(), pushed_log.cuda(), bottom_log.cuda(), 3, 3)
    assert (gpu.cpu() - cpu).abs().max() < 1e-10
    probs, pushed = random_sup(3, 12, 4, 1)
    assert torch.allclose(
        superposition_readings(probs.cuda(), pushed.cuda()).cpu(),
        superposition_readings(probs, pushed),
        atol=1e-12,
    )
