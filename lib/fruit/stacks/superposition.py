"""Superposition stack (docs/paper.md §5): a stack whose elements are blends of vectors.

The state after t updates is V_t[0], V_t[1], ... (index 0 is the top, every element
not stored is the zero vector). With action probabilities in rau's order
(push, pop, no-op) and a pushed vector v_t:

    V_t[0] = push v_t      + noop V_{t-1}[0] + pop V_{t-1}[1]
    V_t[i] = push V_{t-1}[i-1] + noop V_{t-1}[i] + pop V_{t-1}[i+1]   (i >= 1)

and the reading is r_t = V_t[0].

One update is `update_forward`, with its adjoint `update_backward` written by hand:
a stack RNN runs it once per time step, and as plain tensor ops it would be about a
dozen autograd nodes (padding, shifted slices, products) whose backward allocates
and zero-fills stack-sized tensors several times per step. `_Update` wraps the pair
as one autograd Function; the fused stack-RNN pass (fruit.models.sup_pass) calls
them directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from fruit.errors import FruitError

PUSH, POP, NOOP = 0, 1, 2


def update_forward(stack: Tensor, action_probs: Tensor, pushed: Tensor, height: int) -> Tensor:
    """(V_{t-1} (B, h, m), actions (B, 3), v_t (B, m), height H) -> V_t (B, H, m).

    Elements of V_{t-1} below h are zero; elements of V_t below H are dropped (the
    caller's truncation). With P the column [v_t; V_{t-1}; 0; ...]:
    V_t[i] = push P[i] + noop P[i+1] + pop P[i+2] for i < H.
    """
    B, h, m = stack.shape
    push, pop, noop = (action_probs[:, k, None, None] for k in (PUSH, POP, NOOP))
    new = stack.new_empty(B, height, m)
    k_noop, k_pop, k_push = _overlaps(h, height)
    torch.mul(stack[:, :k_noop], noop, out=new[:, :k_noop])
    new[:, k_noop:].zero_()
    new[:, :k_pop].addcmul_(stack[:, 1 : k_pop + 1], pop)
    new[:, 1:k_push].addcmul_(stack[:, : k_push - 1], push)
    new[:, 0].addcmul_(pushed, push[:, :, 0])
    return new


def update_backward(
    stack: Tensor, action_probs: Tensor, pushed: Tensor, g: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The adjoint of `update_forward`: g = dL/dV_t (B, H, m), its reading included
    -> dL/dV_{t-1} (B, h, m), dL/dactions (B, 3), dL/dv_t (B, m)."""
    B, h, m = stack.shape
    push, pop, noop = (action_probs[:, k, None, None] for k in (PUSH, POP, NOOP))
    k_noop, k_pop, k_push = _overlaps(h, g.size(1))
    g_stack = torch.empty_like(stack)
    torch.mul(g[:, :k_noop], noop, out=g_stack[:, :k_noop])
    g_stack[:, k_noop:].zero_()
    g_stack[:, 1 : k_pop + 1].addcmul_(g[:, :k_pop], pop)
    g_stack[:, : k_push - 1].addcmul_(g[:, 1:k_push], push)
    g_probs = torch.empty_like(action_probs)
    g_probs[:, NOOP] = (g[:, :k_noop] * stack[:, :k_noop]).sum((1, 2))
    g_probs[:, POP] = (g[:, :k_pop] * stack[:, 1 : k_pop + 1]).sum((1, 2))
    g_probs[:, PUSH] = (g[:, 1:k_push] * stack[:, : k_push - 1]).sum((1, 2)) + (
        g[:, 0] * pushed
    ).sum(1)
    g_pushed = push[:, :, 0] * g[:, 0]
    return g_stack, g_probs, g_pushed


class _Update(torch.autograd.Function):
    """(V_{t-1}, actions, v_t, height) -> (V_t, V_t[0]) by `update_forward`, differentiable."""

    @staticmethod
    def forward(ctx, stack, action_probs, pushed, height):
        new = update_forward(stack, action_probs, pushed, height)
        ctx.save_for_backward(stack, action_probs, pushed)
        return new, new[:, 0].clone()

    @staticmethod
    def backward(ctx, g_new, g_reading):
        stack, action_probs, pushed = ctx.saved_tensors
        g = g_new.clone()  # (B, H, m): the adjoint of V_t, reading included
        g[:, 0] += g_reading
        return (*update_backward(stack, action_probs, pushed, g), None)


def _overlaps(h: int, height: int) -> tuple[int, int, int]:
    """Rows i < k of V_t that get a no-op / pop / push term from V_{t-1} (height h)."""
    return min(height, h), max(0, min(height, h - 1)), min(height, h + 1)


def _update(stack: Tensor, action_probs: Tensor, pushed: Tensor, height: int):
    """One update of a stack (B, h, m) -> (B, height, m) and its reading (B, m)."""
    return _Update.apply(stack, action_probs, pushed, height)


def superposition_readings(action_probs: Tensor, pushed: Tensor) -> Tensor:
    """Readings after each of n updates.

    action_probs (B, n, 3) in the order (push, pop, no-op); pushed (B, n, m)
    -> readings (B, n, m), reading t being the top element after update t.

    Uses the exact depth truncation of docs/paper.md §5.2: after update t (1-based) only
    the top min(t, n - t + 1) elements can still reach a later reading.
    """
    batch_size, n, _ = action_probs.shape
    stack = pushed.new_zeros(batch_size, 0, pushed.size(2))
    readings = []
    for t, (probs, vector) in enumerate(zip(action_probs.unbind(1), pushed.unbind(1)), 1):
        stack, reading = _update(stack, probs, vector, min(t, n - t + 1))
        readings.append(reading)
    if not readings:
        return pushed.new_zeros(batch_size, 0, pushed.size(2))
    return torch.stack(readings, dim=1)


@dataclass(frozen=True)
class SuperpositionStack:
    """Step API: an immutable stack state, one update at a time (differentiable).

    ``initial(..., length=T)`` promises that at most T updates follow and that only
    their readings are used; the state then keeps only the elements that can still
    reach the top by update T (exact, docs/paper.md §5.2), which halves the work of a
    training pass. Without a length every element is kept.
    """

    elements: Tensor  # (B, h, m), top first
    top: Tensor | None = None  # (B, m) reading, None for the initial stack
    updates_left: int | None = None  # None: unknown (no truncation)

    @staticmethod
    def initial(
        batch_size: int, m: int, dtype=None, device=None, length: int | None = None
    ) -> SuperpositionStack:
        elements = torch.zeros(batch_size, 0, m, dtype=dtype, device=device)
        return SuperpositionStack(elements, None, length)

    def step(self, action_probs: Tensor, pushed: Tensor) -> SuperpositionStack:
        """action_probs (B, 3) in the order (push, pop, no-op); pushed (B, m)."""
        height = self.elements.size(1) + 1
        left = self.updates_left
        if left is not None:
            if left < 1:
                raise FruitError("SuperpositionStack: more updates than the length it was given")
            height = min(height, left)  # elements below cannot reach the top
            left -= 1
        elements, top = _update(self.elements, action_probs, pushed, height)
        return SuperpositionStack(elements, top, left)

    def reading(self) -> Tensor:
        """(B, m): the top element; zeros for the initial stack."""
        if self.top is None:
            return self.elements.new_zeros(self.elements.size(0), self.elements.size(2))
        return self.top

    def select(self, index: Tensor) -> SuperpositionStack:
        top = None if self.top is None else self.top.index_select(0, index)
        return SuperpositionStack(self.elements.index_select(0, index), top, self.updates_left)
