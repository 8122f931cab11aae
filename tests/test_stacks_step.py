"""Step APIs of the stacks: the superposition update's hand-written backward, the exact depth
truncation with a known length, and the memory of a differentiated dVPDA run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fruit.errors import FruitError
from fruit.stacks import SuperpositionStack, superposition_readings
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
