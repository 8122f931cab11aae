"""Step APIs of the stacks: the superposition update's hand-written backward, the exact depth
truncation with a known length, and the memory of a differentiated dVPDA run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fruit.stacks.fast.dvpda_math as nd
import fruit.stacks.nondeterministic as nondeterministic
from fruit.errors import FruitError
from fruit.stacks import (
    DVPDAStack,
    SuperpositionStack,
    dvpda_readings,
    num_actions,
    superposition_readings,
)
from fruit.stacks.bruteforce import superposition_bruteforce

F64 = torch.float64


def random_sup(B, n, m, seed):
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(3 * torch.randn(B, n, 3, generator=g, dtype=F64), -1)
    pushed = torch.randn(B, n, m, generator=g, dtype=F64)
    return probs, pushed


def plain_superposition(probs, pushed):
    """§5.1 with plain tensor ops and no truncation (autograd differentiates it)."""
    B, n, m = pushed.shape
    stack = pushed.new_zeros(B, 0, m)
    readings = []
    for t in range(n):
        padded = torch.cat((pushed[:, t, None], stack, pushed.new_zeros(B, 2, m)), 1)
        push, pop, noop = (probs[:, t, k, None, None] for k in range(3))
        h = stack.size(1) + 1
        stack = push * padded[:, :h] + noop * padded[:, 1 : h + 1] + pop * padded[:, 2 : h + 2]
        readings.append(stack[:, 0])
    return torch.stack(readings, 1)


def stepped(probs, pushed, length=None):
    B, n, m = pushed.shape
    state = SuperpositionStack.initial(B, m, dtype=F64, length=length)
    out = []
    for t in range(n):
        state = state.step(probs[:, t], pushed[:, t])
        out.append(state.reading())
    return torch.stack(out, 1)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_superposition_truncated_steps_equal_full(n):
    probs, pushed = random_sup(3, n, 4, seed=n)
    full = plain_superposition(probs, pushed)
    for b in range(3):
        brute = superposition_bruteforce(probs[b].numpy(), pushed[b].numpy()) if n <= 5 else None
        if brute is not None:
            assert np.abs(full[b].numpy() - brute).max() < 1e-12
    for readings in (
        stepped(probs, pushed),
        stepped(probs, pushed, length=n),
        superposition_readings(probs, pushed),
    ):
        assert (readings - full).abs().max() < 1e-14


def test_superposition_truncation_keeps_only_reachable_elements():
    probs, pushed = random_sup(2, 7, 3, seed=0)
    state = SuperpositionStack.initial(2, 3, dtype=F64, length=7)
    heights = []
    for t in range(7):
        state = state.step(probs[:, t], pushed[:, t])
        heights.append(state.elements.size(1))
    assert heights == [min(t, 7 - t + 1) for t in range(1, 8)]
    with pytest.raises(FruitError, match="length"):
        state.step(probs[:, 0], pushed[:, 0])


@pytest.mark.parametrize("length", [None, 6])
def test_superposition_step_gradients_equal_plain_autograd(length):
    probs, pushed = random_sup(3, 6, 4, seed=9)
    weights = torch.randn(3, 6, 4, generator=torch.Generator().manual_seed(1), dtype=F64)
    grads = []
    for f in (plain_superposition, lambda a, v: stepped(a, v, length)):
        a, v = probs.clone().requires_grad_(), pushed.clone().requires_grad_()
        (f(a, v) * weights).sum().backward()
        grads.append((a.grad, v.grad))
    for x, y in zip(*grads):
        assert (x - y).abs().max() < 1e-13


def test_superposition_step_gradcheck():
    probs, pushed = random_sup(2, 4, 3, seed=2)
    probs.requires_grad_()
    pushed.requires_grad_()
    assert torch.autograd.gradcheck(stepped, (probs, pushed))
    assert torch.autograd.gradcheck(lambda a, v: stepped(a, v, length=4), (probs, pushed))


def test_superposition_step_select_and_branch():
    probs, pushed = random_sup(4, 5, 3, seed=3)
    full = plain_superposition(probs, pushed)
    state = SuperpositionStack.initial(4, 3, dtype=F64)
    for t in range(2):
        state = state.step(probs[:, t], pushed[:, t])
    index = torch.tensor([3, 3, 0])
    picked = state.select(index)
    assert (picked.reading() - full[index, 1]).abs().max() < 1e-14
    # Stepping the same state twice (immutability) gives independent branches.
    a = state.step(probs[:, 2], pushed[:, 2])
    b = state.step(probs[:, 2].flip(-1), pushed[:, 2])
    assert (a.reading() - full[:, 2]).abs().max() < 1e-14
    assert (state.step(probs[:, 2], pushed[:, 2]).reading() - a.reading()).abs().max() == 0
    assert (b.reading() - a.reading()).abs().max() > 1e-3


# ---------------------------------------------------------------- dVPDA step API


def random_nd(B, n, Q, S, m, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    logits = scale * torch.randn(B, n, num_actions(Q, S), generator=g, dtype=F64)
    pushed_log = torch.randn(B, n, m, generator=g, dtype=F64)
    bottom_log = torch.randn(m, generator=g, dtype=F64)
    return logits, pushed_log, bottom_log


def plain_dvpda(logits, pushed_log, bottom_log, Q, S):
    """The step math with gamma rebuilt by torch.cat every update: plain autograd
    differentiates it (O(T^3) memory; the gradient reference of the scaled recurrences)."""
    B, n, _ = logits.shape
    X = Q * S
    alpha, psi, eta, chi = (x[:, None] for x in nd.initial_terms(bottom_log, B, X))
    gamma = bottom_log.new_zeros(B, S, 1, X, 1, Q)
    phi = bottom_log.new_zeros(B, 1)
    readings = []
    for t in range(1, n + 1):
        inputs = nd.StepInputs.make(logits[:, t - 1], pushed_log[:, t - 1], Q, S)
        gamma_last, gamma_prime = nd.pop_helper(gamma, inputs.pop, Q, S)
        gamma_t = nd.new_gamma_column(gamma, gamma_last, gamma_prime, inputs, Q, S)
        c = nd._positive(gamma_t.detach().amax((1, 2, 3, 4)))
        a_t, psi_t, e_t, chi_t, _ = nd.forward_weights(
            alpha, psi, eta, chi, phi, gamma_prime, inputs, Q, S
        )
        readings.append(nd.reading_of(a_t, psi_t, e_t, chi_t))
        phi_t = phi[:, t - 1] + inputs.shift + torch.log(c)
        gamma = torch.cat([gamma, (gamma_t / c[:, None, None, None, None])[:, :, :, :, None]], 4)
        gamma = torch.cat([gamma, gamma.new_zeros(B, S, 1, X, t + 1, Q)], dim=2)
        phi, alpha = torch.cat([phi, phi_t[:, None]], 1), torch.cat([alpha, a_t[:, None]], 1)
        psi, eta = torch.cat([psi, psi_t[:, None]], 1), torch.cat([eta, e_t[:, None]], 1)
        chi = torch.cat([chi, chi_t[:, None]], 1)
    return torch.stack(readings, 1)


def step_readings(logits, pushed_log, bottom_log, Q, S, length=None):
    state = DVPDAStack.initial(bottom_log, logits.size(0), Q, S, length=length)
    out = []
    for t in range(logits.size(1)):
        state = state.step(logits[:, t], pushed_log[:, t])
        out.append(state.reading())
    return torch.stack(out, 1)


@pytest.mark.parametrize("length", [None, 20])
def test_dvpda_step_gradients_equal_plain_autograd(length, monkeypatch):
    """Hand-written adjoint of the step API vs autograd of the same forward math; n = 20 also
    exercises growing the buffers (initial capacity 4)."""
    monkeypatch.setattr(nondeterministic, "INITIAL_CAPACITY", 4)
    Q, S = 2, 3
    logits, pushed_log, bottom_log = random_nd(2, 20, Q, S, 3, seed=1, scale=2.0)
    weights = torch.randn(2, 20, Q * S * 3, generator=torch.Generator().manual_seed(2), dtype=F64)
    results = []
    for f in (plain_dvpda, lambda *a: step_readings(*a, length=length), dvpda_readings):
        inputs = [x.clone().requires_grad_() for x in (logits, pushed_log, bottom_log)]
        readings = f(*inputs, Q, S)
        (readings * weights).sum().backward()
        results.append([readings.detach()] + [x.grad for x in inputs])
    for reference, other in ((results[0], results[1]), (results[2], results[1])):
        for a, b in zip(reference, other):
            assert (a - b).abs().max() < 1e-10 * max(1.0, a.abs().max().item())


def test_dvpda_step_partial_and_repeated_backward():
    """A loss on early readings only, and a second backward pass over the same graph."""
    logits, pushed_log, bottom_log = random_nd(2, 6, 2, 2, 2, seed=3)
    inputs = [x.clone().requires_grad_() for x in (logits, pushed_log, bottom_log)]
    readings = step_readings(*inputs, 2, 2)
    plain_inputs = [x.clone().requires_grad_() for x in (logits, pushed_log, bottom_log)]
    plain = plain_dvpda(*plain_inputs, 2, 2)
    for loss, plain_loss in (
        (readings[:, :3].sum(), plain[:, :3].sum()),
        (readings.sum(), plain.sum()),
    ):
        got = torch.autograd.grad(loss, inputs, retain_graph=True)
        again = torch.autograd.grad(loss, inputs, retain_graph=True)
        expected = torch.autograd.grad(plain_loss, plain_inputs, retain_graph=True)
        for a, b, c in zip(got, again, expected):
            assert (a - c).abs().max() < 1e-10 and torch.equal(a, b)


def saved_and_buffer_bytes(n):
    """Bytes autograd saves for a differentiated run of n updates, plus the run's buffers."""
    logits, pushed_log, bottom_log = random_nd(2, n, 3, 3, 5, seed=0)
    logits.requires_grad_()
    saved = []

    def pack(x):
        saved.append(x.numel() * x.element_size())
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        state = DVPDAStack.initial(bottom_log, 2, 3, 3, length=n)
        for t in range(n):
            state = state.step(logits[:, t], pushed_log[:, t])
    buffers = state.run.buffers
    own = sum(getattr(buffers, k).numel() * 8 for k in ("gamma", "alpha", "eta", "psi", "chi"))
    return sum(saved) + own


def test_dvpda_step_memory_is_quadratic():
    small, large = saved_and_buffer_bytes(32), saved_and_buffer_bytes(64)
    assert large / small < 4.5  # O(T^2); a table saved per update gives over 6 here


def test_dvpda_step_branch_select_and_limits():
    logits, pushed_log, bottom_log = random_nd(3, 5, 2, 2, 2, seed=4)
    full = dvpda_readings(logits, pushed_log, bottom_log, 2, 2)
    state = DVPDAStack.initial(bottom_log, 3, 2, 2)
    for t in range(3):
        state = state.step(logits[:, t], pushed_log[:, t])
    a = state.step(logits[:, 3], pushed_log[:, 3])
    b = state.step(logits[:, 3].flip(-1), pushed_log[:, 3])  # a branch: a copy of the buffers
    assert (a.step(logits[:, 4], pushed_log[:, 4]).reading() - full[:, 4]).abs().max() < 1e-12
    assert (b.reading() - a.reading()).abs().max() > 1e-3
    assert (a.reading() - full[:, 3]).abs().max() < 1e-12
    index = torch.tensor([2, 2, 0])
    picked = state.select(index).step(logits[index, 3], pushed_log[index, 3])
    assert (picked.reading() - full[index, 3]).abs().max() < 1e-12
    limited = DVPDAStack.initial(bottom_log, 3, 2, 2, length=1).step(logits[:, 0], pushed_log[:, 0])
    with pytest.raises(FruitError, match="updates"):
        limited.step(logits[:, 1], pushed_log[:, 1])
    differentiable = DVPDAStack.initial(bottom_log.clone().requires_grad_(), 3, 2, 2)
    differentiable = differentiable.step(logits[:, 0], pushed_log[:, 0])
    with pytest.raises(FruitError, match="autograd"):
        differentiable.select(index)
    with torch.no_grad():
        differentiable.select(index)
