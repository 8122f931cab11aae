"""One update of the superposition stack (docs/paper.md §5.1) with its adjoint written out.

    V_t[0] = push v_t      + noop V_{t-1}[0] + pop V_{t-1}[1]
    V_t[i] = push V_{t-1}[i-1] + noop V_{t-1}[i] + pop V_{t-1}[i+1]   (i >= 1)

with action probabilities in rau's order (push, pop, no-op). A stack RNN runs it once
per time step, and as plain tensor ops (fruit.stacks.reference.superposition, the
paper's three shifted stacks) it is about a dozen autograd nodes (padding, shifted
slices, products) whose backward allocates and zero-fills stack-sized tensors several
times per step. `update_forward` / `update_backward` write only the rows that can
still be read (a truncation height), `Update` wraps the pair as one autograd Function,
and the fused stack-RNN pass (`sup_cells`, `sup_pass`) calls them directly.
"""

from __future__ import annotations

import torch
from torch import Tensor

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


class Update(torch.autograd.Function):
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


def update(stack: Tensor, action_probs: Tensor, pushed: Tensor, height: int):
    """One update of a stack (B, h, m) -> (B, height, m) and its reading (B, m),
    differentiable."""
    return Update.apply(stack, action_probs, pushed, height)
