"""The superposition stack over whole sequences through the C kernels of
``superposition.c``: the same computation as running `superposition_update.update` once
per update (fruit.stacks.superposition, the path on CUDA and without a compiler), in two
calls instead of one autograd Function per update. (The same file's one-update kernels,
``sup_step_forward`` / ``sup_step_backward``, serve the stack RNNs' fused pass,
fruit.models.passes.sup_cells.)

`Readings.apply(probs, pushed, lib)`: probs (B, n, 3) in the order (push, pop, no-op),
pushed (B, n, m) -> readings (B, n, m), differentiable in probs and pushed. The
forward keeps the stacks V_1 .. V_{n-1} (only the rows that can still reach a reading:
about n²/4 rows of m per example) for the backward.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from fruit.kernels.build import CSource

_i, _p = ctypes.c_ssize_t, ctypes.c_void_p
SOURCE = CSource(
    "superposition.c",
    (
        ("sup_stored_rows", (_i,), _i),
        ("sup_forward", (_i, _i, _i, _p, _p, _p, _p), None),
        ("sup_backward", (_i, _i, _i, _p, _p, _p, _p, _p, _p, _p), None),
        ("sup_step_forward", (_i, _i, _i, _i, _p, _p, _p, _p, _p, _i), None),
        (
            "sup_step_backward",
            (_i, _i, _i, _i, _p, _p, _p, _p, _p, _i, _p, _p, _p, _i, _p, _i),
            None,
        ),
    ),
    "the superposition stack (stack attention and the stack RNNs)",
    Path(__file__).parent,
)


class Readings(torch.autograd.Function):
    @staticmethod
    def forward(ctx, probs: Tensor, pushed: Tensor, lib) -> Tensor:
        B, n, m = pushed.shape
        probs, pushed = probs.contiguous(), pushed.contiguous()
        stacks = pushed.new_empty(B, lib.sup_stored_rows(n), m)  # V_1 .. V_{n-1}
        readings = pushed.new_empty(B, n, m)
        if B and n and m:
            lib.sup_forward(
                B, n, m, probs.data_ptr(), pushed.data_ptr(), stacks.data_ptr(),
                readings.data_ptr(),
            )  # fmt: skip
        else:
            readings.zero_()
        ctx.save_for_backward(probs, pushed, stacks)
        ctx.lib = lib
        return readings

    @staticmethod
    @once_differentiable
    def backward(ctx, g_readings: Tensor):
        probs, pushed, stacks = ctx.saved_tensors
        B, n, m = pushed.shape
        g_readings = g_readings.contiguous()
        g_probs, g_pushed = torch.zeros_like(probs), torch.zeros_like(pushed)
        if B and n and m:
            work = pushed.new_empty(2, (n + 1) // 2 + 1, m)  # dL/dV_t and dL/dV_{t-1}
            ctx.lib.sup_backward(
                B, n, m, probs.data_ptr(), pushed.data_ptr(), stacks.data_ptr(),
                g_readings.data_ptr(), g_probs.data_ptr(), g_pushed.data_ptr(), work.data_ptr(),
            )  # fmt: skip
        return g_probs, g_pushed, None
