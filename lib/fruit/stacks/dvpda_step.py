"""dVPDA step API (decoding and stack-RNN training): `DVPDAStack`.

The states of one run share preallocated buffers (`scan.new_buffers`: `scan.Buffers`,
or on the CPU `dvpda_native.NativeBuffers` for the C kernels): update t writes
entry t and column t of the table, and never rewrites earlier ones. Each update is
one autograd Function (`_Update`) that saves only its own inputs; its backward is
the same hand-written adjoint as `dvpda_readings`, run from the last update down,
with the run's shared adjoint buffers (`buffers.adjoint()`). Memory is therefore
O(B T^2 Q^2 S^2) for a differentiated run of T updates, and the readings and
gradients are exactly those of `dvpda_readings`.

Autograd orders the backward passes: each update takes a (zero-size) token output
by the previous update, so update t's backward runs after update t+1's.

A state whose buffers have been written further by a later step is branched by
copying (stepping the same state twice, `select`); that copy is not differentiable,
so it is refused while the run is part of an autograd graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from fruit.errors import FruitError
from fruit.stacks.nondeterministic import check_shapes, initial_terms, reading_of
from fruit.stacks.scan import COMPUTE_DTYPE, Adjoint, Buffers, new_buffers

INITIAL_CAPACITY = 16  # updates; grows geometrically when the length is not given


class _Run:
    """Buffers shared by the states of one run, and the adjoint of its current backward pass."""

    def __init__(self, buffers: Buffers, bottom_log: Tensor, limit: int | None):
        """buffers: `scan.Buffers` or `dvpda_native.NativeBuffers` (`scan.new_buffers`)."""
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

    def fork(self, t: int, index: Tensor | None = None) -> _Run:
        run = _Run(self.buffers.resized(self.buffers.n, index), self.bottom_log, self.limit)
        run.length = t
        return run


class _Start(torch.autograd.Function):
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


class _Update(torch.autograd.Function):
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


@dataclass(frozen=True)
class DVPDAStack:
    """Step API: an immutable dVPDA state, one update at a time (differentiable).

    ``initial(..., length=T)`` promises at most T updates, so that the buffers are
    allocated once; without it they grow as needed.
    """

    num_states: int
    num_symbols: int
    run: _Run
    t: int  # updates taken
    token: Tensor  # orders the backward passes of the updates
    top: Tensor  # (B, Q*S*m) reading, in the compute dtype
    dtype: torch.dtype  # of the readings (the inputs' dtype)

    @staticmethod
    def initial(
        bottom_log: Tensor,
        batch_size: int,
        num_states: int,
        num_symbols: int,
        compute_dtype: torch.dtype | None = COMPUTE_DTYPE,
        length: int | None = None,
    ) -> DVPDAStack:
        """bottom_log (m,): log of the bottom vector v_0 (e.g. logsigmoid(theta)).

        compute_dtype: dtype of the recurrences (None: bottom_log's dtype); float64 by
        default, as in `dvpda_readings`, for range and so that both APIs agree.
        """
        Q, S = num_states, num_symbols
        dtype = bottom_log.dtype
        bottom_log = bottom_log.to(compute_dtype or dtype)
        capacity = INITIAL_CAPACITY if length is None else length
        buffers = new_buffers(bottom_log.detach(), batch_size, capacity, Q, S)
        run = _Run(buffers, bottom_log, length)
        top = reading_of(*initial_terms(bottom_log, batch_size, Q * S))  # differentiable
        return DVPDAStack(Q, S, run, 0, _Start.apply(bottom_log, run), top, dtype)

    def step(self, action_logits: Tensor, pushed_log: Tensor) -> DVPDAStack:
        """action_logits (B, A) flat layout of docs/paper.md §6.1; pushed_log (B, m)."""
        Q, S = self.num_states, self.num_symbols
        check_shapes(action_logits, pushed_log, Q, S)
        run = self.run
        if run.limit is not None and self.t >= run.limit:
            raise FruitError(f"DVPDAStack: more than the {run.limit} updates it was given")
        if self.t < run.length:  # a later state of this run exists: branch off a copy
            run = self._copy("step a state twice")
        work = run.bottom_log.dtype
        keep = torch.is_grad_enabled() and (action_logits.requires_grad or pushed_log.requires_grad)
        reading, token = _Update.apply(
            action_logits.to(work), pushed_log.to(work), self.token, run, self.t + 1, keep
        )
        return DVPDAStack(Q, S, run, self.t + 1, token, reading, self.dtype)

    def reading(self) -> Tensor:
        """(B, Q*S*m), layout (state, symbol, component)."""
        return self.top.to(self.dtype)

    def select(self, index: Tensor) -> DVPDAStack:
        run = self._copy("select rows of", index)
        token = self.token.detach()
        top = self.top.index_select(0, index)
        return DVPDAStack(self.num_states, self.num_symbols, run, self.t, token, top, self.dtype)

    def _copy(self, what: str, index: Tensor | None = None) -> _Run:
        if torch.is_grad_enabled() and self.token.requires_grad:
            raise FruitError(
                f"DVPDAStack: cannot {what} a state that is part of an autograd graph; "
                "do it under torch.no_grad() (decoding), or use dvpda_readings"
            )
        return self.run.fork(self.t, index)


def dvpda_readings_stepwise(action_logits, pushed_log, bottom_log, num_states, num_symbols):
    """Whole-sequence readings by stepping `DVPDAStack` (reference for the step API)."""
    check_shapes(action_logits, pushed_log, num_states, num_symbols)
    state = DVPDAStack.initial(bottom_log, action_logits.size(0), num_states, num_symbols)
    readings = []
    for t in range(action_logits.size(1)):
        state = state.step(action_logits[:, t], pushed_log[:, t])
        readings.append(state.reading())
    if not readings:
        X, m = num_states * num_symbols, pushed_log.size(-1)
        return pushed_log.new_zeros(action_logits.size(0), 0, X * m)
    return torch.stack(readings, 1)
