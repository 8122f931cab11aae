"""The pointwise pieces of one time step of the fused stack-RNN passes (the controller
cells of `sup_pass` and `nd_pass`; the heads and stack update of `sup_pass`), in
two interchangeable implementations: `TorchCells` (PyTorch operations, the path on
CUDA, and what the C kernels are tested against) and `NativeCells` (the same
computation in C, one call per piece, on the CPU: the cells and heads in sup_cells.c, the
stack update in fruit/stacks/fast/superposition.c). `cells_for(x)` picks one for
tensors like x.

Between two matrix products a step needs one of these pieces, so with `NativeCells`
a step of a 3-layer stack LSTM is 8 products and 8 C calls, forward and backward,
where PyTorch operations take about eighty calls of a few µs each.

Shapes: B batch, d hidden size, m stack-vector size, h / H stack heights before /
after an update. "rows" means a (B, ·) view whose rows may lie in a wider buffer (unit
column stride); every other tensor is contiguous.

    lstm_forward(z, a, c_prev, c, tc, h, mask, up)
        z (B, 4d) gate pre-activations (the Torch version overwrites it) -> a = σ(i),
        σ(f), tanh(g), σ(o); c = f c_prev + i g; tc = tanh c; h = o tc (rows); and
        up = h * mask (rows; mask None: h; up None: nothing, the top layer)
    lstm_locals(A, C, TC) -> per step, what lstm_backward needs of the forward
    lstm_backward(dh_a, dh_b, mask, local, dc, dz)
        dL/dh = dh_a + dh_b * mask (rows; mask None: dh_a + dh_b); dc (B, d) is dL/dc
        on entry and dL/dc_prev on return; writes dz (B, 4d)
    rnn_forward(z, h, mask, up)      h = tanh z (rows), up as above
    rnn_locals(H) -> per step, what rnn_backward needs
    rnn_backward(dh_a, dh_b, mask, local, dz)    dz = dL/dh (1 - h²)
    stack_forward(head, probs, pushed, old, height, reading) -> new
        head (B, 3+m) -> probs (B, 3) = softmax of the action logits, pushed (B, m) =
        σ of the rest; new (B, height, m) = the update of old (B, h, m); reading (rows)
        = new[:, 0]
    stack_backward(old, probs, pushed, g, g_a, g_b, dhead) -> g_old
        g (B, H, m) = dL/dnew, to whose top dL/dreading = g_a (rows, or None) + g_b is
        added in place; writes dhead (B, 3+m) = dL/dhead; returns dL/dold (B, h, m)
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch
from torch import Tensor

from fruit.kernels import build
from fruit.stacks.fast import superposition_native
from fruit.stacks.fast.superposition_update import update_backward, update_forward

_i, _p = ctypes.c_ssize_t, ctypes.c_void_p
SOURCE = build.CSource(  # i = ptrdiff_t (sizes, row strides), p = pointer
    "sup_cells.c",
    (
        ("lstm_forward", (_i, _i, _p, _p, _p, _p, _p, _p, _i, _p, _p, _i), None),
        ("lstm_backward", (_i, _i, _p, _i, _p, _i, _p, _p, _p, _p, _p, _p), None),
        ("rnn_forward", (_i, _i, _p, _p, _i, _p, _p, _i), None),
        ("rnn_backward", (_i, _i, _p, _i, _p, _i, _p, _p, _i, _p), None),
        ("head_forward", (_i, _i, _p, _i, _p, _p), None),
        ("head_backward", (_i, _i, _p, _p, _p, _i), None),
    ),
    "the stack-RNN passes (RNN+Sup, LSTM+Sup, RNN+Nd, LSTM+Nd)",
    Path(__file__).parent,
)


class TorchCells:
    """The pieces as PyTorch operations (any device, any float dtype)."""

    @staticmethod
    def lstm_forward(z, a, c_prev, c, tc, h, mask, up):
        d = c.size(1)
        z[:, 2 * d : 3 * d].mul_(2)  # tanh(g) = 2σ(2g) - 1: one sigmoid for all four gates
        i, f, g, o = torch.sigmoid(z, out=a).split(d, 1)
        g.mul_(2).sub_(1)
        torch.mul(f, c_prev, out=c).addcmul_(i, g)
        torch.mul(o, _tanh(c, out=tc), out=h)
        _drop(h, mask, up)

    @staticmethod
    def lstm_locals(A, C, TC):
        return list(zip(*_lstm_local_derivatives(A, C, TC)))

    @staticmethod
    def lstm_backward(dh_a, dh_b, mask, local, dc, dz):
        B, d = dc.shape
        dh = _sum(dh_a, dh_b, mask)
        dc_dz, dh_dzo, dh_dc, f = local
        dc.addcmul_(dh, dh_dc)  # dL/dc of this step
        torch.mul(dc_dz, dc[:, None], out=dz.view(B, 4, d)[:, :3])  # i, f, g
        torch.mul(dh, dh_dzo, out=dz[:, 3 * d :])  # o
        dc.mul_(f)  # to the previous step's cell

    @staticmethod
    def rnn_forward(z, h, mask, up):
        _tanh(z, out=h)
        _drop(h, mask, up)

    @staticmethod
    def rnn_locals(H):
        return H.square().neg_().add_(1).unbind(0)  # tanh' = 1 - h² (B, d) per step

    @staticmethod
    def rnn_backward(dh_a, dh_b, mask, local, dz):
        torch.mul(_sum(dh_a, dh_b, mask), local, out=dz)

    @staticmethod
    def stack_forward(head, probs, pushed, old, height, reading):
        probs.copy_(torch.softmax(head[:, :3], 1))
        torch.sigmoid(head[:, 3:], out=pushed)
        new = update_forward(old, probs, pushed, height)
        reading.copy_(new[:, 0])
        return new

    @staticmethod
    def stack_backward(old, probs, pushed, g, g_a, g_b, dhead):
        g[:, 0] += g_b if g_a is None else g_a + g_b
        g_old, g_probs, g_pushed = update_backward(old, probs, pushed, g)
        g_probs -= (g_probs * probs).sum(1, keepdim=True)  # softmax'
        torch.mul(g_probs, probs, out=dhead[:, :3])
        torch.mul(g_pushed, torch.addcmul(pushed, pushed, pushed, value=-1), out=dhead[:, 3:])
        return g_old


class NativeCells:
    """The pieces as calls into sup_cells.c (``lib``) and superposition.c (``stack``), for
    contiguous-row CPU tensors of the precision the libraries were compiled for."""

    def __init__(self, lib, stack):
        self.lib, self.stack = lib, stack

    def lstm_forward(self, z, a, c_prev, c, tc, h, mask, up):
        B, d = c.shape
        self.lib.lstm_forward(
            B, d, z.data_ptr(), a.data_ptr(), c_prev.data_ptr(), c.data_ptr(), tc.data_ptr(),
            h.data_ptr(), h.stride(0), _ptr(mask), _ptr(up), _row(up),
        )  # fmt: skip

    @staticmethod
    def lstm_locals(A, C, TC):
        return list(zip(A.unbind(0), C.unbind(0), TC.unbind(0)))  # a, c_prev, tanh c

    def lstm_backward(self, dh_a, dh_b, mask, local, dc, dz):
        B, d = dc.shape
        a, c_prev, tc = local
        self.lib.lstm_backward(
            B, d, dh_a.data_ptr(), dh_a.stride(0), dh_b.data_ptr(), dh_b.stride(0), _ptr(mask),
            a.data_ptr(), c_prev.data_ptr(), tc.data_ptr(), dc.data_ptr(), dz.data_ptr(),
        )  # fmt: skip

    def rnn_forward(self, z, h, mask, up):
        B, d = z.shape
        self.lib.rnn_forward(
            B, d, z.data_ptr(), h.data_ptr(), h.stride(0), _ptr(mask), _ptr(up), _row(up)
        )

    @staticmethod
    def rnn_locals(H):
        return H.unbind(0)  # h itself

    def rnn_backward(self, dh_a, dh_b, mask, local, dz):
        B, d = dz.shape
        self.lib.rnn_backward(
            B, d, dh_a.data_ptr(), dh_a.stride(0), dh_b.data_ptr(), dh_b.stride(0), _ptr(mask),
            local.data_ptr(), local.stride(0), dz.data_ptr(),
        )  # fmt: skip

    def stack_forward(self, head, probs, pushed, old, height, reading):
        B, h, m = old.shape
        self.lib.head_forward(
            B, m, head.data_ptr(), head.stride(0), probs.data_ptr(), pushed.data_ptr()
        )
        new = old.new_empty(B, height, m)
        self.stack.sup_step_forward(
            B, m, h, height, old.data_ptr(), probs.data_ptr(), pushed.data_ptr(),
            new.data_ptr(), reading.data_ptr(), reading.stride(0),
        )  # fmt: skip
        return new

    def stack_backward(self, old, probs, pushed, g, g_a, g_b, dhead):
        B, h, m = old.shape
        g_old = torch.empty_like(old)
        ld = dhead.stride(0)  # dL/dprobs and dL/dpushed go into dhead, then the heads' adjoint
        self.stack.sup_step_backward(
            B, m, h, g.size(1), old.data_ptr(), probs.data_ptr(), pushed.data_ptr(),
            g.data_ptr(), _ptr(g_a), _row(g_a), g_b.data_ptr(), g_old.data_ptr(),
            dhead.data_ptr(), ld, dhead[:, 3:].data_ptr(), ld,
        )  # fmt: skip
        self.lib.head_backward(B, m, probs.data_ptr(), pushed.data_ptr(), dhead.data_ptr(), ld)
        return g_old


def cells_for(x: Tensor):
    """`NativeCells` for CPU tensors of x's dtype when the C kernels (sup_cells.c and
    superposition.c, both needed, also by the Nd pass) are built (see
    `build.library_for`), else `TorchCells`."""
    lib = build.library_for(SOURCE, x)
    stack = build.library_for(superposition_native.SOURCE, x)
    return TorchCells if lib is None or stack is None else _native_cells(lib, stack)


@functools.cache
def _native_cells(lib, stack) -> NativeCells:
    return NativeCells(lib, stack)


def _ptr(x: Tensor | None) -> int | None:
    return None if x is None else x.data_ptr()


def _row(x: Tensor | None) -> int:
    return 0 if x is None else x.stride(0)


def _tanh(x: Tensor, out: Tensor) -> Tensor:
    """tanh(x) = 2σ(2x) - 1 into ``out`` (may be x): PyTorch's CPU tanh costs about
    four times its sigmoid, and on these small tensors it was the largest pointwise
    cost of a step."""
    return torch.mul(x, 2, out=out).sigmoid_().mul_(2).sub_(1)


def _drop(h: Tensor, mask: Tensor | None, up: Tensor | None) -> None:
    if up is not None:  # the layer above reads Drop(h)
        up.copy_(h) if mask is None else torch.mul(h, mask, out=up)


def _sum(a: Tensor, b: Tensor, mask: Tensor | None) -> Tensor:
    return a + b if mask is None else a.addcmul(b, mask)


def _lstm_local_derivatives(A: Tensor, C: Tensor, TC: Tensor):
    """One LSTM layer's local derivatives at all steps, from its activated gates A
    (n, B, 4d) = i, f, g, o, cells C (n+1, B, d) and TC = tanh(C[1:]), each as a list
    over steps (z: pre-activations; c' the previous cell):

        dc_dz  (B, 3, d)  ∂c/∂z_i, ∂c/∂z_f, ∂c/∂z_g = g σ'(i), c' σ'(f), i tanh'(g)
        dh_dzo (B, d)     ∂h/∂z_o = tanh(c) σ'(o)
        dh_dc  (B, d)     ∂h/∂c = o tanh'(c)
        f      (B, d)     ∂c/∂c'

    with σ' = s - s² and tanh' = 1 - y² of the activations (addcmul: fewer passes).
    """
    n, B, G = A.shape
    d = G // 4
    i, f, g, o = A.split(d, -1)
    S = torch.addcmul(A, A, A, value=-1)  # σ' of every gate (g's slot is not used)
    s_i, s_f, _, s_o = S.split(d, -1)
    dc_dz = A.new_empty(n, B, 3, d)
    torch.mul(g, s_i, out=dc_dz[:, :, 0])
    torch.mul(C[:-1], s_f, out=dc_dz[:, :, 1])
    torch.addcmul(i, i * g, g, value=-1, out=dc_dz[:, :, 2])  # i (1 - g²)
    dh_dc = torch.addcmul(o, o * TC, TC, value=-1)  # o (1 - tanh² c)
    return dc_dz.unbind(0), (TC * s_o).unbind(0), dh_dc.unbind(0), f.unbind(0)
