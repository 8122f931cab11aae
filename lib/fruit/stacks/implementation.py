"""Which implementation runs a stack layer (stack attention, the step API): chosen here.

The dVPDA has two fast implementations of the same computation (fruit.stacks.fast):
the C kernels (`dvpda_native`) for float32 and float64 tensors on the CPU when they
are built, and PyTorch operations (`dvpda_scan`, `dvpda_run`) otherwise: on CUDA,
for other dtypes, without a C compiler, or with FRUIT_NATIVE=0. Both are held to the
paper-notation reference (fruit.stacks.reference), which is for tests and reading and
is never chosen here. The superposition stack's step API updates one step at a time
with PyTorch operations and a written-out adjoint (fruit.stacks.fast.superposition_update);
a whole sequence of updates (stack attention) takes C kernels on the CPU
(`superposition_native`) under the same conditions as the dVPDA's.

The stack RNNs' fused passes (fruit.models.passes) use these too: the Nd pass runs on
the buffers `dvpda_buffers` chooses, and calls the C heads when they are C buffers;
their controller cells and the Sup pass's stack step are chosen, under the same
conditions, by `fruit.models.passes.sup_cells.cells_for`.
"""

from __future__ import annotations

import ctypes

from torch import Tensor

from fruit.kernels import build
from fruit.stacks.fast import dvpda_native, dvpda_scan, superposition_native


def dvpda_kernels(x: Tensor) -> ctypes.CDLL | None:
    """The C kernels for a run whose recurrences are in x's dtype and on x's device, or
    None for PyTorch operations."""
    return build.library_for(dvpda_native.SOURCE, x)


def dvpda_buffers(bottom_log: Tensor, batch_size: int, n: int, Q: int, S: int):
    """The buffers of a step-API run with room for n updates, in bottom_log's dtype and
    device: `dvpda_native.NativeBuffers` or `dvpda_scan.Buffers` (the same interface)."""
    lib = dvpda_kernels(bottom_log)
    if lib is None:
        return dvpda_scan.Buffers(bottom_log, batch_size, n, Q, S)
    return dvpda_native.NativeBuffers(lib, bottom_log, batch_size, n, Q, S)


def dvpda_scan_readings(
    logits: Tensor, pushed_log: Tensor, bottom_log: Tensor, Q: int, S: int
) -> Tensor:
    """Whole-sequence readings (B, n, Q*S*m), differentiable, in the inputs' dtype."""
    lib = dvpda_kernels(logits)
    if lib is None:
        return dvpda_scan.TorchScan.apply(logits, pushed_log, bottom_log, Q, S)
    return dvpda_native.NativeScan.apply(logits, pushed_log, bottom_log, Q, S, lib)


def superposition_sequence(action_probs: Tensor, pushed: Tensor) -> Tensor | None:
    """Whole-sequence superposition readings (B, n, m) on the C kernels, differentiable,
    or None where they do not run (then the caller steps with PyTorch operations)."""
    lib = build.library_for(superposition_native.SOURCE, pushed)
    if lib is None or action_probs.dtype != pushed.dtype or action_probs.device != pushed.device:
        return None
    return superposition_native.Readings.apply(action_probs, pushed, lib)
