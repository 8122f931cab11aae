"""Nondeterministic stack (dVPDA, docs/paper.md §6): the public API.

    dvpda_readings(action_logits (B,n,A), pushed_log (B,n,m), bottom_log (m,),
                   num_states, num_symbols) -> (B,n,Q*S*m)        whole sequences
    DVPDAStack.initial(...).step(action_logits (B,A), pushed_log (B,m)).reading()

Reading t is after update t, laid out (state, symbol, component). The computation
runs on the fast implementations of fruit.stacks.fast (C kernels on the CPU, PyTorch
operations elsewhere: `implementation` chooses), which the tests hold to the
paper-notation reference, fruit.stacks.reference.dvpda (gamma, alpha, the reading).

By default the recurrences run in float64 whatever the input dtype: a float32 range
(e^±87) is too small for the relative magnitudes inside one column of gamma when
logits reach ±50 over hundreds of steps; float64 (e^±708) is not. Readings are cast
back to the input dtype.

A step-API state whose buffers have been written further by a later step is branched
by copying (stepping the same state twice, `select`); that copy is not
differentiable, so it is refused while the run is part of an autograd graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from fruit.errors import FruitError
from fruit.stacks import implementation
from fruit.stacks.fast.dvpda_math import initial_terms, reading_of
from fruit.stacks.fast.dvpda_run import Run, Start, Update

COMPUTE_DTYPE = torch.float64
INITIAL_CAPACITY = 16  # updates; grows geometrically when the length is not given


def num_actions(num_states: int, num_symbols: int) -> int:
    """A = Q S (2 Q S + Q) (docs/paper.md §6.1); 189 for Q = S = 3."""
    X = num_states * num_symbols
    return X * (2 * X + num_states)


def check_shapes(action_logits: Tensor, pushed_log: Tensor, num_states: int, num_symbols: int):
    if num_states < 1 or num_symbols < 1:
        raise FruitError(
            f"dVPDA needs num_states >= 1 and num_symbols >= 1, got {num_states}, {num_symbols}"
        )
    A = num_actions(num_states, num_symbols)
    if action_logits.size(-1) != A:
        raise FruitError(
            f"dVPDA action logits have {action_logits.size(-1)} entries; expected "
            f"Q*S*(2*Q*S+Q) = {A} for Q={num_states}, S={num_symbols}"
        )
    if action_logits.shape[:-1] != pushed_log.shape[:-1]:
        raise FruitError(
            f"action logits {tuple(action_logits.shape)} and pushed vectors "
            f"{tuple(pushed_log.shape)} disagree in batch/time dimensions"
        )


def dvpda_readings(
    action_logits: Tensor,
    pushed_log: Tensor,
    bottom_log: Tensor,
    num_states: int,
    num_symbols: int,
    compute_dtype: torch.dtype | None = COMPUTE_DTYPE,
) -> Tensor:
    """action_logits (B, n, A) flat layout of docs/paper.md §6.1 (weights exp(logit),
    unnormalised); pushed_log (B, n, m); bottom_log (m,) -> readings (B, n, Q*S*m),
    reading t after update t, layout (state, symbol, component).

    compute_dtype: dtype of the recurrences (None: the input dtype).
    """
    check_shapes(action_logits, pushed_log, num_states, num_symbols)
    dtype = action_logits.dtype
    work = compute_dtype or dtype
    inputs = action_logits.to(work), pushed_log.to(work), bottom_log.to(work)
    readings = implementation.dvpda_scan_readings(*inputs, num_states, num_symbols)
    return readings.to(dtype)


@dataclass(frozen=True)
class DVPDAStack:
    """Step API: an immutable dVPDA state, one update at a time (differentiable).

    ``initial(..., length=T)`` promises at most T updates, so that the buffers are
    allocated once; without it they grow as needed.
    """

    num_states: int
    num_symbols: int
    run: Run
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
        buffers = implementation.dvpda_buffers(bottom_log.detach(), batch_size, capacity, Q, S)
        run = Run(buffers, bottom_log, length)
        top = reading_of(*initial_terms(bottom_log, batch_size, Q * S))  # differentiable
        return DVPDAStack(Q, S, run, 0, Start.apply(bottom_log, run), top, dtype)

    def step(self, action_logits: Tensor, pushed_log: Tensor) -> DVPDAStack:
        """action_logits (B, A) flat layout of docs/paper.md §6.1; pushed_log (B, m)."""
        Q, S = self.num_states, self.num_symbols
        check_shapes(action_logits, pushed_log, Q, S)
        run = self.run
        if run.limit is not None and self.t >= run.limit:
            raise FruitError(
                f"DVPDAStack: more than the {run.limit} updates it was given; pass a larger "
                "length to DVPDAStack.initial(), or none"
            )
        if self.t < run.length:  # a later state of this run exists: branch off a copy
            run = self._copy("step a state twice")
        work = run.bottom_log.dtype
        keep = torch.is_grad_enabled() and (action_logits.requires_grad or pushed_log.requires_grad)
        reading, token = Update.apply(
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

    def _copy(self, what: str, index: Tensor | None = None) -> Run:
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
