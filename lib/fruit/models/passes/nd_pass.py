"""RNN+Nd / LSTM+Nd (+R) as one pass (`stack_pass.StackPass`) with the dVPDA as its
driver (docs/paper.md §6, §8): per step the heads give [logits; u], the action weights
exp(logits) and the pushed vector v = σ(u) (entering as log σ(u)), and the dVPDA's
update t gives r_t; r_0 is v_0 = exp(bottom_log) in the block (q0, ⊥).

The dVPDA runs in its compute dtype (float64 by default) on the buffers of the step API
(fruit.stacks.fast: `dvpda_native.NativeBuffers`, C kernels, or `dvpda_scan.Buffers`,
PyTorch operations; the caller chooses), one update of every example per call, and its
backward is the same adjoint, one update per call from the last down: the numbers of
`fruit.stacks.DVPDAStack` stepped under autograd (to float32 rounding where the
controller is float32), without the autograd graph of the controller around it. On the C
kernels a time step is one call each way straight from the heads' outputs
(`dvpda_native.HeadSteps`: the update's inputs, log σ(u) and σ(-u) computed in C).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from fruit.models.passes.stack_pass import check_updates, stack_pass
from fruit.models.passes.sup_cells import cells_for
from fruit.stacks import num_actions
from fruit.stacks.fast.dvpda_native import HeadSteps, NativeBuffers


class NdDriver:
    """The dVPDA inside the pass. buffers: a run's buffers with room for `updates`
    updates (column t is written for t < updates, as DVPDAStack with length=updates)."""

    def __init__(
        self, buffers, updates: int, bottom_log: Tensor, num_states: int, num_symbols: int
    ):
        self.buffers, self.updates = buffers, updates
        self.bottom_log = bottom_log.detach().to(buffers.alpha.dtype)  # (m,), compute dtype
        self.extra_dtype = bottom_log.dtype  # of bottom_log's gradient
        m = bottom_log.size(0)
        self.A = num_actions(num_states, num_symbols)
        self.m, self.width = m, num_states * num_symbols * m
        self.inputs = []  # per update: logits (B, A), pushed_log (B, m) in the compute dtype
        self.pushed_u = []  # per update: u (B, m), the pushed vector's pre-activation
        self.heads = []  # per update: the heads' outputs (B, A + m), on the C kernels
        self.native = None  # HeadSteps on the C kernels (made at the first update)
        self.adjoint = None

    def initial(self, reading: Tensor) -> None:
        reading.zero_()
        reading[:, : self.m] = self.bottom_log.exp()  # r_0: v_0 in the block (q0, ⊥)

    def forward(self, t: int, head: Tensor, reading: Tensor) -> None:
        write = t + 1 < self.updates  # column t+1 is read by a later update
        if isinstance(self.buffers, NativeBuffers):  # one C call from the heads
            if self.native is None:
                self.native = HeadSteps(self.buffers, self.updates, head.dtype)
            self.heads.append(head)
            self.native.forward(t, head, reading, write)
            return
        work = self.bottom_log.dtype
        u = head[:, self.A :]  # (B, m)
        logits, pushed_log = head[:, : self.A].to(work), F.logsigmoid(u).to(work)
        self.inputs.append((logits, pushed_log))
        self.pushed_u.append(u)
        reading.copy_(self.buffers.step(t + 1, logits, pushed_log, write, True))

    def backward(self, t: int, g_a: Tensor | None, g_b: Tensor, dhead: Tensor) -> None:
        if t == self.updates - 1:  # a backward pass starts at the last update
            self.adjoint = self.buffers.adjoint(n=self.updates)
        if self.native is not None:
            write = t + 1 < self.updates
            self.native.backward(self.adjoint, t, write, self.heads[t], g_a, g_b, dhead)
            return
        g = g_b if g_a is None else g_a + g_b  # dL/dr_{t+1} (B, Q*S*m)
        logits, pushed_log = self.inputs[t]
        g_logits, g_pushed_log = self.adjoint.step(
            self.buffers, t + 1, t + 1 < self.updates, g.to(logits.dtype), logits, pushed_log
        )
        dhead[:, : self.A] = g_logits
        # d log σ(u) / du = σ(-u)
        torch.mul(g_pushed_log, torch.sigmoid(-self.pushed_u[t]), out=dhead[:, self.A :])

    def extra_grad(self, g_initial: Tensor) -> Tensor:
        """dL/dbottom_log: through r_0 = exp(bottom_log) in block (q0, ⊥), and through
        eta[0] in the dVPDA."""
        v0 = self.bottom_log.exp()
        g = (g_initial[:, : self.m].to(v0.dtype) * v0).sum(0)
        if self.adjoint is not None:
            g = g + self.adjoint.bottom(self.buffers, self.bottom_log)
        return g.to(self.extra_dtype)


def nd_pass(
    buffers,
    projected: Tensor,
    h0: Tensor,
    c0: Tensor | None,
    W_head: Tensor,
    b_head: Tensor,
    bottom_log: Tensor,
    num_states: int,
    num_symbols: int,
    weights: list[Tensor],
    biases: list[Tensor],
    updates: int,
    masks: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """projected (n, B, G) (layer 1's token part), h0, c0 (L, B, d) (c0 None: RNN cells),
    W_head (d, A+m) (the action logits' and the pushed vector's heads), b_head (A+m,),
    bottom_log (m,) = log v_0, weights W¹..W^L ((K_k + d, G), K_1 = Q*S*m), biases
    b²..b^L -> top states (n, B, d) and readings r_1..r_updates (updates, B, Q*S*m) in
    projected's dtype. buffers: a dVPDA run's buffers for `updates` updates in the
    compute dtype (fruit.stacks.implementation.dvpda_buffers); see `stack_pass.StackPass`."""
    check_updates(projected.size(0), updates)
    cells = cells_for(projected)
    driver = NdDriver(buffers, updates, bottom_log, num_states, num_symbols)
    return stack_pass(
        cells, driver, projected, h0, c0, W_head, b_head, bottom_log, weights, biases, updates,
        masks,
    )  # fmt: skip
