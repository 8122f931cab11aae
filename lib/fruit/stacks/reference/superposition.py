"""The superposition stack (docs/paper.md §5) as the paper writes it: three shifted
copies of the stack mixed by the action probabilities, differentiated by autograd.

V_t is a column of m-vectors, top first; elements that are not stored are zero
vectors (the paper's infinite column of zeros). Actions in the order (push, pop, no-op):

    V_t = push · [v_t; V_{t-1}] + noop · V_{t-1} + pop · V_{t-1}[1:]

and the reading r_t = V_t[0]. No truncation: V_t keeps all t elements.
"""

from __future__ import annotations

import torch
from torch import Tensor


def superposition_update(stack: Tensor, action_probs: Tensor, pushed: Tensor) -> Tensor:
    """V_{t-1} (B, h, m), action probabilities (B, 3) as (push, pop, no-op), v_t (B, m)
    -> V_t (B, h+1, m)."""
    B, h, m = stack.shape
    push, pop, noop = (p[:, None, None] for p in action_probs.unbind(-1))  # (B, 1, 1) each
    zeros = stack.new_zeros(B, 2, m)
    pushed_stack = torch.cat((pushed[:, None], stack), 1)  # [v_t; V_{t-1}]      (B, h+1, m)
    kept = torch.cat((stack, zeros[:, :1]), 1)  # V_{t-1}                        (B, h+1, m)
    popped = torch.cat((stack[:, 1:], zeros), 1)[:, : h + 1]  # V_{t-1}[1:]      (B, h+1, m)
    return push * pushed_stack + noop * kept + pop * popped


def superposition_readings(action_probs: Tensor, pushed: Tensor) -> Tensor:
    """action_probs (B, n, 3) as (push, pop, no-op), pushed (B, n, m) -> readings
    (B, n, m), reading t the top of V_t."""
    B, n, m = pushed.shape
    stack = pushed.new_zeros(B, 0, m)  # V_0: the empty stack
    readings = []
    for t in range(n):
        stack = superposition_update(stack, action_probs[:, t], pushed[:, t])
        readings.append(stack[:, 0])
    return torch.stack(readings, 1) if readings else pushed.new_zeros(B, 0, m)
