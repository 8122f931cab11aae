"""Superposition stack (docs/paper.md §5): a stack whose elements are blends of vectors.

The state after t updates is V_t[0], V_t[1], ... (index 0 is the top, every element
not stored is the zero vector). With action probabilities in rau's order
(push, pop, no-op) and a pushed vector v_t:

    V_t[0] = push v_t      + noop V_{t-1}[0] + pop V_{t-1}[1]
    V_t[i] = push V_{t-1}[i-1] + noop V_{t-1}[i] + pop V_{t-1}[i+1]   (i >= 1)

and the reading is r_t = V_t[0]. Each update runs as one autograd Function with a
written-out adjoint (fruit.stacks.fast.superposition_update); on the CPU a whole
sequence runs in two C calls instead (fruit.stacks.implementation chooses). The tests
hold both to the paper-notation reference, fruit.stacks.reference.superposition.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from fruit.errors import FruitError
from fruit.stacks.fast.superposition_update import update
from fruit.stacks.implementation import superposition_sequence


def superposition_readings(action_probs: Tensor, pushed: Tensor) -> Tensor:
    """Readings after each of n updates.

    action_probs (B, n, 3) in the order (push, pop, no-op); pushed (B, n, m)
    -> readings (B, n, m), reading t being the top element after update t.

    Uses the exact depth truncation of docs/paper.md §5.2: after update t (1-based) only
    the top min(t, n - t + 1) elements can still reach a later reading.
    """
    if pushed.dim() != 3 or action_probs.shape != (*pushed.shape[:2], 3):
        raise FruitError(
            f"superposition_readings: action_probs must be (B, n, 3) = "
            f"{(*pushed.shape[:2], 3)} for pushed {tuple(pushed.shape)} (B, n, m), "
            f"got {tuple(action_probs.shape)}"
        )
    fast = superposition_sequence(action_probs, pushed)
    if fast is not None:
        return fast
    batch_size, n, _ = action_probs.shape
    stack = pushed.new_zeros(batch_size, 0, pushed.size(2))
    readings = []
    for t, (probs, vector) in enumerate(zip(action_probs.unbind(1), pushed.unbind(1)), 1):
        stack, reading = update(stack, probs, vector, min(t, n - t + 1))
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
                raise FruitError(
                    "SuperpositionStack: more updates than the length it was given; pass a "
                    "larger length to SuperpositionStack.initial(), or none"
                )
            height = min(height, left)  # elements below cannot reach the top
            left -= 1
        elements, top = update(self.elements, action_probs, pushed, height)
        return SuperpositionStack(elements, top, left)

    def reading(self) -> Tensor:
        """(B, m): the top element; zeros for the initial stack."""
        if self.top is None:
            return self.elements.new_zeros(self.elements.size(0), self.elements.size(2))
        return self.top

    def select(self, index: Tensor) -> SuperpositionStack:
        top = None if self.top is None else self.top.index_select(0, index)
        return SuperpositionStack(self.elements.index_select(0, index), top, self.updates_left)
