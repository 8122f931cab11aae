"""The dVPDA on the CPU through the C kernels of ``dvpda.c``: the same computation as
`dvpda_scan` (PyTorch operations), with the same quantities under the same names.

fruit.stacks.implementation decides which of the two a run takes (the C kernels for
float32 and float64 tensors on the CPU when they are built by fruit.kernels.build,
switched off with FRUIT_NATIVE=0). What differs from `dvpda_scan` is where the time
goes, not what is computed:

* gamma, the table of scaled inner weights, holds only the triangle i < k (about half
  of `dvpda_scan.Buffers`' square table), cut into blocks of rows; for each block its
  tiles over the columns lie one after the other (dvpda.c's header), so that the O(n^3)
  pop contraction and its two adjoints stream through memory as small matrix
  products with the accumulators in registers;
* the whole-sequence API (`NativeScan`) runs one example at a time, forward and
  backward, so that an example's table stays in the cache, and keeps only one
  example's adjoint buffers;
* the step API (`NativeBuffers.step`, `NativeAdjoint.step`) runs one update of every
  example per call, with the run's adjoint buffers (GU, HR) as in `dvpda_scan.Adjoint`;
  this order is forced by the stack RNNs (the controller needs every reading of
  update t before update t+1), so each update walks every example's table.

The recurrences stay in float64 by default: the table's rows span far more than
float32's range with large logits (measured at n = 256, logits in [-50, 50]: the
smallest row of a column is 1e-178 of the largest, and a float32 table changes
readings by 5%), and the float64 kernels meet the speed targets. The float32 kernels
run when the recurrences are asked for in float32 (compute_dtype).

The inputs of each update, weights = exp(logits - shift) and vector =
exp(pushed_log - vector_shift), are computed here with PyTorch (`exp_shifted`), so the
C code never sees an infinity; the gradients of the logits and pushed logs come back
from the C code already multiplied by them.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from fruit.kernels import workspace
from fruit.kernels.build import CSource
from fruit.stacks.fast.dvpda_math import (
    RUN_VECTORS,
    bottom_gradient,
    bottom_log_gradient,
    copy_run_vectors,
    exp_shifted,
    start_run_vectors,
)

_idx, _ptr = ctypes.c_ssize_t, ctypes.c_void_p


class _Buffers(ctypes.Structure):  # dvpda.c's nd_buffers (its `table` is gamma)
    _fields_ = [(name, _idx) for name in ("B", "Q", "S", "m", "n")] + [
        (name, _ptr)
        for name in (
            "gamma", "alpha", "eta", "psi", "chi", "phi", "col_scale", "n_alpha", "n_eta",
        )
    ]  # fmt: skip


class _Adjoint(ctypes.Structure):  # nd_adjoint
    _fields_ = [("top", _idx)] + [(name, _ptr) for name in ("g_alpha", "g_eta", "GU", "HR")]


class _Inputs(ctypes.Structure):  # nd_inputs
    _fields_ = [("T", _idx)] + [
        (name, _ptr) for name in ("weights", "vector", "shift", "vector_shift")
    ]


def _signatures():
    i, p, c = _idx, _ptr, ctypes.c_int
    B, A, X = ctypes.POINTER(_Buffers), ctypes.POINTER(_Adjoint), ctypes.POINTER(_Inputs)
    return (
        ("nd_table_size", (i, i, i), i),
        ("nd_hr_size", (i, i, i), i),
        ("nd_forward_step", (B, i, c, X, p), c),
        ("nd_backward_step", (B, A, i, c, X, p, p, p), c),
        ("nd_forward_sequence", (B, i, X, p), c),
        ("nd_backward_sequence", (B, i, X, p, p, p, p), c),
        ("nd_copy_columns", (i, i, i, p, i, p, i, i), c),
        *(
            (f"nd_head_forward_step_{suffix}", (B, i, c, p, i, X, p, i), c)
            for suffix in ("f32", "f64")
        ),
        *(
            (f"nd_head_backward_step_{suffix}", (B, A, i, c, X, p, i, p, i, p, i, p, i), c)
            for suffix in ("f32", "f64")
        ),
    )


SOURCE = CSource(
    "dvpda.c", _signatures(), "the nondeterministic stack (dVPDA)", Path(__file__).parent
)


def _p(x: Tensor | None) -> int | None:
    return None if x is None else x.data_ptr()


def _check(rc: int) -> None:
    if rc != 0:
        raise MemoryError(
            "dVPDA C kernels: could not allocate their workspace; use a smaller batch_tokens, "
            "or FRUIT_NATIVE=0 for the PyTorch implementation"
        )


def _inputs(logits: Tensor, pushed_log: Tensor):
    """(weights, vector, shift, vector_shift) contiguous, and the ctypes view of them.
    logits (B, [T,] A), pushed_log (B, [T,] m)."""
    weights, shift = exp_shifted(logits.detach())
    vector, vector_shift = exp_shifted(pushed_log.detach())
    held = [x.contiguous() for x in (weights, vector, shift, vector_shift)]
    T = logits.size(1) if logits.dim() == 3 else 1
    return held, _Inputs(T, *(_p(x) for x in held))


class NativeBuffers:
    """`dvpda_scan.Buffers` for the C kernels: the forward weights alpha (B, n+1, X) and eta
    (B, n+1, X, m), psi, chi, phi, col_scale, n_alpha, n_eta (B, n+1) as there, and gamma,
    the table of scaled inner weights (B, size) in dvpda.c's column layout, columns 1..n-1. Entry t is written by update t and never
    rewritten."""

    def __init__(self, lib, bottom_log: Tensor, batch_size: int, n: int, Q: int, S: int):
        B, X, m = batch_size, Q * S, bottom_log.size(0)
        self.lib, self.Q, self.S, self.m, self.n = lib, Q, S, m, n
        self.gamma = workspace.take(self, (B, lib.nd_table_size(Q, S, n)), bottom_log.dtype)
        start_run_vectors(self, bottom_log, B, n, X)
        self.prepared = {}  # t -> the inputs of update t, kept for its backward pass

    def struct(self) -> _Buffers:
        """The ctypes view of the buffers (made once: the tensors are never replaced)."""
        if getattr(self, "_struct", None) is None:
            names = ("gamma", *RUN_VECTORS)
            views = (_p(getattr(self, k)) for k in names)
            self._struct = _Buffers(self.alpha.size(0), self.Q, self.S, self.m, self.n, *views)
        return self._struct

    def resized(self, n: int, index: Tensor | None = None) -> NativeBuffers:
        """A copy with room for n updates (entries up to min(n, self.n) kept), rows index."""
        out = NativeBuffers.__new__(NativeBuffers)
        out.lib, out.Q, out.S, out.m, out.n = self.lib, self.Q, self.S, self.m, n
        out.prepared = dict(self.prepared) if index is None else {}
        keep = min(n, self.n)
        pick = (lambda x: x) if index is None else (lambda x: x.index_select(0, index))
        gamma = pick(self.gamma).contiguous()
        size = self.lib.nd_table_size(self.Q, self.S, n)
        out.gamma = workspace.take(out, (gamma.size(0), size), gamma.dtype)
        _check(  # columns 1 .. keep-1 (their places depend on the capacity)
            self.lib.nd_copy_columns(
                gamma.size(0), self.Q, self.S, _p(gamma), self.n, _p(out.gamma), n, keep
            )
        )
        copy_run_vectors(self, out, n, pick)
        return out

    def step(
        self, t: int, logits: Tensor, pushed_log: Tensor, write_column: bool, keep_inputs=False
    ) -> Tensor:
        """Update t (1 <= t <= n) from logits (B, A) and pushed_log (B, m): writes entry t
        (and column t of the table if write_column, which needs t < n) -> reading (B, X*m).
        keep_inputs: keep the prepared inputs for the backward pass of this update."""
        held, inputs = _inputs(logits, pushed_log)
        if keep_inputs:
            self.prepared[t] = held, inputs
        B, X = logits.size(0), self.Q * self.S
        reading = logits.new_empty(B, X * self.m)
        _check(
            self.lib.nd_forward_step(
                ctypes.byref(self.struct()), t, int(write_column), ctypes.byref(inputs), _p(reading)
            )
        )
        return reading

    def adjoint(self, n: int | None = None) -> NativeAdjoint:
        return NativeAdjoint(self, n)


class NativeAdjoint:
    """`dvpda_scan.Adjoint` for the C kernels: g_alpha (`alpha`), g_eta (`eta`), and the
    deferred adjoint of gamma: GU (the adjoints of its columns, laid out like gamma)
    and HR (gamma' of each update), filled from the last update down to the first."""

    def __init__(self, buffers: NativeBuffers, n: int | None = None):
        """n: the first (highest) update of this backward pass (default: the capacity).
        GU and HR need no zeros: a pass writes each of their entries before reading it."""
        lib, Q, S = buffers.lib, buffers.Q, buffers.S
        self.alpha = torch.zeros_like(buffers.alpha)
        self.eta = torch.zeros_like(buffers.eta)
        B, dtype = buffers.gamma.size(0), buffers.gamma.dtype
        self.GU = workspace.take(self, buffers.gamma.shape, dtype)
        self.HR = workspace.take(self, (B, lib.nd_hr_size(Q, S, buffers.n)), dtype)
        self.top = buffers.n if n is None else n
        views = (_p(x) for x in (self.alpha, self.eta, self.GU, self.HR))
        self._struct = _Adjoint(self.top, *views)

    def step(
        self,
        buffers: NativeBuffers,
        t: int,
        column_written: bool,
        g_reading: Tensor | None,
        logits: Tensor,
        pushed_log: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """Adjoint of update t, given g_reading (B, X*m) and everything from updates > t
        -> gradients of its logits (B, A) and pushed_log (B, m)."""
        held, inputs = buffers.prepared.get(t) or _inputs(logits, pushed_log)
        if g_reading is not None:
            g_reading = g_reading.to(logits.dtype).contiguous()
        g_logits = torch.empty_like(logits, memory_format=torch.contiguous_format)
        g_pushed = torch.empty_like(pushed_log, memory_format=torch.contiguous_format)
        _check(
            buffers.lib.nd_backward_step(
                ctypes.byref(buffers.struct()), ctypes.byref(self._struct), t,
                int(column_written and t < self.top),
                ctypes.byref(inputs), _p(g_reading), _p(g_logits), _p(g_pushed),
            )
        )  # fmt: skip
        return g_logits, g_pushed

    def bottom(self, buffers: NativeBuffers, bottom_log: Tensor) -> Tensor:
        return bottom_gradient(self.eta, buffers.chi, bottom_log)


class NativeScan(torch.autograd.Function):
    """`dvpda_scan.TorchScan` on the C kernels: forward and backward one example at a time."""

    @staticmethod
    def forward(ctx, logits, pushed_log, bottom_log, Q, S, lib):
        B, n, _ = logits.shape
        m = pushed_log.size(-1)
        buffers = NativeBuffers(lib, bottom_log.detach(), B, n, Q, S)
        held, inputs = _inputs(logits, pushed_log)
        readings = logits.new_empty(B, n, Q * S * m)
        b = buffers.struct()
        _check(lib.nd_forward_sequence(ctypes.byref(b), n, ctypes.byref(inputs), _p(readings)))
        ctx.save_for_backward(logits, pushed_log, bottom_log)
        ctx.buffers, ctx.lib, ctx.prepared = buffers, lib, (held, inputs)  # for the backward
        return readings

    @staticmethod
    @once_differentiable
    def backward(ctx, g_readings):
        logits, pushed_log, bottom_log = ctx.saved_tensors
        buffers, lib = ctx.buffers, ctx.lib
        B, n, _ = logits.shape
        held, inputs = ctx.prepared
        g_readings = g_readings.to(logits.dtype).contiguous()
        g_logits = torch.empty_like(logits, memory_format=torch.contiguous_format)
        g_pushed = torch.empty_like(pushed_log, memory_format=torch.contiguous_format)
        g_eta0 = logits.new_empty(B, pushed_log.size(-1))
        b = buffers.struct()
        _check(
            lib.nd_backward_sequence(
                ctypes.byref(b), n, ctypes.byref(inputs), _p(g_readings), _p(g_logits),
                _p(g_pushed), _p(g_eta0),
            )
        )  # fmt: skip
        g_bottom = bottom_log_gradient(g_eta0, buffers.chi, bottom_log)
        return g_logits, g_pushed, g_bottom, None, None, None


class HeadSteps:
    """The updates of a fused Nd pass (`nd_pass`) on the C kernels, straight from the
    heads' outputs: head (B, A + m) = [action logits; u] with pushed_log = log sigma(u), in
    float32 or float64 (dvpda.c's nd_head_* functions). Keeps the prepared inputs of every
    update, weights (updates, B, A), vector (updates, B, m) and their shifts, for the
    backward."""

    SUFFIX = {torch.float32: "f32", torch.float64: "f64"}

    def __init__(self, buffers: NativeBuffers, updates: int, dtype: torch.dtype):
        lib, B, m = buffers.lib, buffers.alpha.size(0), buffers.m
        A = buffers.alpha.size(2) * (2 * buffers.alpha.size(2) + buffers.Q)
        work = buffers.alpha.dtype
        self.buffers = buffers
        self.prepared = [
            torch.empty(updates, B, A, dtype=work),  # weights
            torch.empty(updates, B, m, dtype=work),  # vector
            torch.empty(updates, B, dtype=work),  # shift
            torch.empty(updates, B, dtype=work),  # vector_shift
        ]
        self.inputs = [_Inputs(1, *(_p(x[t]) for x in self.prepared)) for t in range(updates)]
        self.forward_step = getattr(lib, f"nd_head_forward_step_{self.SUFFIX[dtype]}")
        self.backward_step = getattr(lib, f"nd_head_backward_step_{self.SUFFIX[dtype]}")

    def forward(self, t: int, head: Tensor, reading: Tensor, write_column: bool) -> None:
        """Update t+1 (t counts from 0) from head (B, A + m): writes reading (B, X m)."""
        _check(
            self.forward_step(
                ctypes.byref(self.buffers.struct()), t + 1, int(write_column), _p(head),
                head.stride(0), ctypes.byref(self.inputs[t]), _p(reading), reading.stride(0),
            )
        )  # fmt: skip

    def backward(self, adjoint: NativeAdjoint, t: int, column_written: bool, head: Tensor,
                 g_a: Tensor | None, g_b: Tensor, dhead: Tensor) -> None:  # fmt: skip
        """The adjoint of update t+1 given dL/dreading = g_a (or None) + g_b (B, X m):
        writes dhead (B, A + m) = dL/d[logits; u]."""
        _check(
            self.backward_step(
                ctypes.byref(self.buffers.struct()), ctypes.byref(adjoint._struct), t + 1,
                int(column_written and t + 1 < adjoint.top), ctypes.byref(self.inputs[t]),
                _p(head), head.stride(0), _p(g_a), 0 if g_a is None else g_a.stride(0),
                _p(g_b), g_b.stride(0), _p(dhead), dhead.stride(0),
            )
        )  # fmt: skip
