"""The machinery of the dVPDA's step API (fruit.stacks.DVPDAStack): a run's shared
buffers and one autograd Function per update.

The states of one run share preallocated buffers (`dvpda_scan.Buffers`, or on the CPU
`dvpda_native.NativeBuffers` for the C kernels; fruit.stacks.implementation chooses):
update t writes entry t and column t of gamma, and never rewrites earlier ones. Each
update is one autograd Function (`Update`) that saves only its own inputs; its
backward is the same hand-written adjoint as the whole-sequence API, run from the last
update down, with the run's shared adjoint buffers (`buffers.adjoint()`). Memory is
therefore O(B T^2 Q^2 S^2) for a differentiated run of T updates, and the readings and
gradients are exactly those of the whole-sequence API.

Autograd orders the backward passes: each update takes a (zero-size) token output
by the previous update, so update t's backward runs after update t+1's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from fruit.stacks.fast.dvpda_scan import Adjoint, Buffers


class Run:
    """Buffers shared by the states of one run, and the adjoint of its current backward pass."""

    def __init__(self, buffers: Buffers, bottom_log: Tensor, limit: int | None):
        """buffers: `dvpda_scan.Buffers` or `dvpda_native.NativeBuffers`."""
        self.buffers = buffers
        self.bottom_log = bottom_log  # in the compute dtype
        self.limit = limit  # promised number of updates (column `limit` is never written)
        self.length = 0  # updates written
        self.adjoint: Adjoint | None = None
        self.last_backward = 0

    def writes_column(self, t: int) -> bool:
        return self.limit is None or t < self.limit

    def reserve(self, t: int) -> None:
        """Room for update t (and its column when written)."""
        need = t + 1 if self.writes_column(t) else t
        if need > self.buffers.n:
            self.buffers = self.buffers.resized(max(need, 2 * self.buffers.n))

    def adjoint_for(self, t: int) -> Adjoint:
        """The adjoint of the backward pass that is processing update t (a pass goes
        from the last update it reaches down to 1; reaching a t not below the previous one
        starts a new pass, whose updates are t, t-1, ..., 1)."""
        if self.adjoint is None or t >= self.last_backward:
            self.adjoint = self.buffers.adjoint(n=t)
        self.last_backward = t
        return self.adjoint

    def fork(self, t: int, index: Tensor | None = None) -> Run:
        run = Run(self.buffers.resized(self.buffers.n, index), self.bottom_log, self.limit)
        run.length = t
        return run


class Start(torch.autograd.Function):
    """bottom_log -> token of the initial state; its backward is the bottom vector's gradient."""

    @staticmethod
    def forward(ctx, bottom_log, run):
        ctx.run = run
        ctx.save_for_backward(bottom_log)
        return bottom_log.new_empty(0)

    @staticmethod
    def backward(ctx, g_token):
        (bottom_log,) = ctx.saved_tensors
        run = ctx.run
        if run.adjoint is None:
            return None, None
        return run.adjoint.bottom(run.buffers, bottom_log), None


class Update(torch.autograd.Function):
    """(logits (B, A), pushed_log (B, m), token of state t-1) -> (reading t, token of state t)."""

    @staticmethod
    def forward(ctx, logits, pushed_log, token, run, t, keep_inputs):
        ctx.set_materialize_grads(False)
        run.reserve(t)
        write = run.writes_column(t)
        reading = run.buffers.step(t, logits, pushed_log, write, keep_inputs)
        run.length = t
        ctx.run, ctx.t, ctx.write = run, t, write
        ctx.save_for_backward(logits, pushed_log)
        return reading, token.new_empty(0)

    @staticmethod
    def backward(ctx, g_reading, g_token):
        logits, pushed_log = ctx.saved_tensors
        run = ctx.run
        adjoint = run.adjoint_for(ctx.t)
        g_logits, g_pushed = adjoint.step(
            run.buffers, ctx.t, ctx.write, g_reading, logits, pushed_log
        )
        return g_logits, g_pushed, None, None, None, None
