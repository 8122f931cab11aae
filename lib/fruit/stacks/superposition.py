"""Superposition stack (models.md §5): a stack whose elements are blends of vectors.

The state after t updates is V_t[0], V_t[1], ... (index 0 is the top, every element
not stored is the zero vector). With action probabilities in rau's order
(push, pop, no-op) and a pushed vector v_t:

    V_t[0] = push v_t      + noop V_{t-1}[0] + pop V_{t-1}[1]
    V_t[i] = push V_{t-1}[i-1] + noop V_{t-1}[i] + pop V_{t-1}[i+1]   (i >= 1)

and the reading is r_t = V_t[0].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

PUSH, POP, NOOP = 0, 1, 2


def _update(stack: Tensor, action_probs: Tensor, pushed: Tensor, height: int) -> Tensor:
    """One update of a stack (B, h, m) -> (B, height, m); elements below are dropped."""
    push = action_probs[:, PUSH, None, None]  # (B, 1, 1)
    pop = action_probs[:, POP, None, None]
    noop = action_probs[:, NOOP, None, None]
    h = stack.size(1)
    # Pad with the implicit zero elements so that every shifted view has `height` rows.
    padded = torch.nn.functional.pad(stack, (0, 0, 0, max(0, height + 1 - h)))
    below = torch.cat([pushed[:, None, :], padded[:, : height - 1]], dim=1)  # V[i-1]
    return push * below + noop * padded[:, :height] + pop * padded[:, 1 : height + 1]


def superposition_readings(action_probs: Tensor, pushed: Tensor) -> Tensor:
    """Readings after each of n updates.

    action_probs (B, n, 3) in the order (push, pop, no-op); pushed (B, n, m)
    -> readings (B, n, m), reading t being the top element after update t.

    Uses the exact depth truncation of models.md §5.2: after update t (1-based) only
    the top min(t, n - t + 1) elements can still reach a later reading.
    """
    batch_size, n, _ = action_probs.shape
    stack = pushed.new_zeros(batch_size, 0, pushed.size(2))
    readings = []
    for t in range(1, n + 1):
        height = min(t, n - t + 1)
        stack = _update(stack, action_probs[:, t - 1], pushed[:, t - 1], height)
        readings.append(stack[:, 0])
    if not readings:
        return pushed.new_zeros(batch_size, 0, pushed.size(2))
    return torch.stack(readings, dim=1)


@dataclass(frozen=True)
class SuperpositionStack:
    """Step API: an immutable stack state, one update at a time (differentiable)."""

    elements: Tensor  # (B, h, m), top first; h grows by one per update

    @staticmethod
    def initial(batch_size: int, m: int, dtype=None, device=None) -> SuperpositionStack:
        return SuperpositionStack(torch.zeros(batch_size, 0, m, dtype=dtype, device=device))

    def step(self, action_probs: Tensor, pushed: Tensor) -> SuperpositionStack:
        """action_probs (B, 3) in the order (push, pop, no-op); pushed (B, m)."""
        height = self.elements.size(1) + 1
        return SuperpositionStack(_update(self.elements, action_probs, pushed, height))

    def reading(self) -> Tensor:
        """(B, m): the top element; zeros for the initial stack."""
        if self.elements.size(1) == 0:
            return self.elements.new_zeros(self.elements.size(0), self.elements.size(2))
        return self.elements[:, 0]

    def select(self, index: Tensor) -> SuperpositionStack:
        return SuperpositionStack(self.elements.index_select(0, index))
