"""RNN+Sup / LSTM+Sup (+R) as one pass (`stack_pass.StackPass`) with the superposition
stack as its driver: per step the heads give [a; u], probs = softmax(a), v = σ(u), and
V_t = update(V_{t-1}, probs, v) with the exact depth truncation; r_t = V_t[0]
(docs/paper.md §5, §8). The stack's pieces are `sup_cells` (C kernels on the CPU).
"""

from __future__ import annotations

from torch import Tensor

from fruit.models.passes.stack_pass import check_updates, stack_pass
from fruit.models.passes.sup_cells import cells_for


class SupDriver:
    """The superposition stack inside the pass: keeps V_0..V_{updates-1} (the inputs of
    each update), the action probabilities (updates, B, 3) and pushed vectors
    (updates, B, m), and in the backward dL/dV of the stack after the current update."""

    def __init__(self, cells, updates: int, like: Tensor, m: int):
        B = like.size(1)
        self.width, self.cells, self.updates = m, cells, updates
        self.probs, self.pushed = like.new_empty(updates, B, 3), like.new_empty(updates, B, m)
        self.p, self.v = self.probs.unbind(0), self.pushed.unbind(0)
        self.stacks = []  # V_0..V_{updates-1}
        self.stack = like.new_zeros(B, 0, m)
        self.dV = None

    def initial(self, reading: Tensor) -> None:
        reading.zero_()  # r_0: the empty stack reads zero

    def forward(self, t: int, head: Tensor, reading: Tensor) -> None:
        self.stacks.append(self.stack)
        height = min(self.stack.size(1) + 1, self.updates - t)  # below: can't reach a reading
        self.stack = self.cells.stack_forward(
            head, self.p[t], self.v[t], self.stack, height, reading
        )

    def backward(self, t: int, g_a: Tensor | None, g_b: Tensor, dhead: Tensor) -> None:
        if t == self.updates - 1:  # the last stack (height 1) is read only
            self.dV = g_b.new_zeros(g_b.size(0), 1, self.width)
        self.dV = self.cells.stack_backward(
            self.stacks[t], self.p[t], self.v[t], self.dV, g_a, g_b, dhead
        )

    def extra_grad(self, g_initial: Tensor) -> None:
        return None  # r_0 = 0 depends on nothing


def sup_pass(
    projected: Tensor,
    h0: Tensor,
    c0: Tensor | None,
    W_head: Tensor,
    b_head: Tensor,
    weights: list[Tensor],
    biases: list[Tensor],
    updates: int,
    masks: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """projected (n, B, G) (layer 1's token part), h0, c0 (L, B, d) (c0 None: RNN cells),
    W_head (d, 3+m), b_head (3+m,), weights W¹..W^L ((K_k + d, G)), biases b²..b^L
    -> top states (n, B, d) and readings r_1..r_updates (updates, B, m); see
    `stack_pass.StackPass`."""
    check_updates(projected.size(0), updates)
    cells = cells_for(projected)
    driver = SupDriver(cells, updates, projected, W_head.size(1) - 3)
    extra = projected.new_empty(0)
    return stack_pass(
        cells, driver, projected, h0, c0, W_head, b_head, extra, weights, biases, updates, masks
    )
