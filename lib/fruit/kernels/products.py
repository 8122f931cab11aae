"""Matrix products of the hand-written recurrent passes (fruit.models.passes.stack_pass),
on oneDNN where that is the faster library.

PyTorch's CPU matmul calls MKL; nn.LSTM calls oneDNN. On a CPU with AVX-512, where MKL
does not take its AVX-512 kernels (an AMD EPYC, Zen 5), oneDNN runs the same float32
products about twice as fast: one thread, y = x Wᵀ + b,

    (85 × 170) (170 × 340)     MKL 105 µs   oneDNN 61 µs     a stack LSTM's step product
    (2040 × 170) (170 × 340)   MKL 2.30 ms  oneDNN 1.04 ms   a weight gradient

On a CPU without AVX-512 (an AMD EPYC virtual machine with AVX2) it is the other way
round, through PyTorch's oneDNN op (CPU time, one thread, B = 66):

    (66 × 203) (203 × 158)     MKL 74 µs    oneDNN 135 µs    an RNN+Nd step product
    (66 × 82) (82 × 194)       MKL 43 µs    oneDNN 103 µs    an LSTM+Nd's heads
    (2310 × 127) (127 × 328)   MKL 3.2 ms   oneDNN 4.3 ms    a weight gradient

so oneDNN is taken only where PyTorch runs its AVX-512 kernels
(torch.backends.cpu.get_cpu_capability()); FRUIT_ONEDNN=1 takes it anywhere it runs,
FRUIT_ONEDNN=0 nowhere. Both libraries compute float32 products in float32 (oneDNN,
like torch's own matmul, drops to bf16 or tf32 only when the user opts in with
torch.backends.mkldnn.matmul.fp32_precision). oneDNN's kernel is used only for
non-empty float32 tensors on the CPU, when PyTorch was built with it and a probe at
import agrees with torch; otherwise (CUDA, float64) the functions call torch.

    linear(x, weight, bias, out)        x weightᵀ + bias     x (B, K), weight (N, K)
    linear_add(x, weight, other, out)   other + x weightᵀ    other (B, N)
    project(x, weight, bias)            the same as an autograd node, x (..., K)
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from fruit.kernels.build import switch


def _prefer_onednn() -> bool:
    """FRUIT_ONEDNN=1 / 0, else whether PyTorch runs AVX-512 kernels here."""
    choice = switch("FRUIT_ONEDNN", "")
    if choice in ("0", "1"):
        return choice == "1"
    return torch.backends.cpu.get_cpu_capability().startswith("AVX512")


def _onednn_op():
    """PyTorch's oneDNN linear (the one its compiler emits for CPU linears), or None
    when not preferred here, absent from this build, or not giving torch's result on a
    probe."""
    if not _prefer_onednn() or not torch.backends.mkldnn.is_available():
        return None
    op = getattr(torch.ops.mkldnn, "_linear_pointwise", None)
    try:
        x = torch.arange(35.0).reshape(5, 7).sin()  # no random numbers: seeds stay put
        w, b = torch.arange(21.0).reshape(7, 3).cos().t(), torch.arange(3.0)  # w: a strided view
        y, other = op(x, w, b, "none", [], ""), op.binary(x, b.expand(5, 3), w, None, "add")
        want = torch.nn.functional.linear(x, w, b)
        ok = (y - want).abs().max() < 1e-4 and (other - want).abs().max() < 1e-4
    except (AttributeError, RuntimeError, TypeError):
        ok = False
    return op if ok else None


_ONEDNN = _onednn_op()


def uses_onednn(x: Tensor, weight: Tensor | None = None) -> bool:
    """Whether the product of x (and weight) takes oneDNN's kernel (not for empty
    operands, which oneDNN refuses)."""
    return (
        _ONEDNN is not None
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and x.numel() > 0
        and (weight is None or weight.numel() > 0)
    )


def _plain(weight: Tensor) -> Tensor:
    """weight itself when it is contiguous or a transposed contiguous matrix, else a
    contiguous copy: oneDNN falls back to a reference kernel, ~1000 times slower, for
    other layouts (e.g. a column slice of a larger matrix)."""
    if weight.is_contiguous() or weight.t().is_contiguous():
        return weight
    return weight.contiguous()


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, out: Tensor | None = None):
    """x (B, K), weight (N, K), bias (N,) or None -> x weightᵀ + bias (B, N), into out
    when given (oneDNN writes a new tensor, copied there)."""
    if uses_onednn(x, weight):
        bias = None if bias is None else bias.contiguous()  # oneDNN ignores a bias's stride
        y = _ONEDNN(x, _plain(weight), bias, "none", [], "")
        return y if out is None else out.copy_(y)
    if bias is None:
        return torch.mm(x, weight.t(), out=out)
    return torch.addmm(bias, x, weight.t(), out=out)


def linear_add(x: Tensor, weight: Tensor, other: Tensor, out: Tensor | None = None):
    """x (B, K), weight (N, K), other (B, N) -> other + x weightᵀ (B, N), into out
    when given."""
    if uses_onednn(x, weight):
        y = _ONEDNN.binary(x, other, _plain(weight), None, "add")
        return y if out is None else out.copy_(y)
    return torch.addmm(other, x, weight.t(), out=out)


class Linear(torch.autograd.Function):
    """x (..., K) weightᵀ + bias as an autograd node whose backward products also go
    through `linear` (first-order): dx = g weight, dweight = gᵀ x, dbias = Σ g."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        y = linear(x.reshape(-1, x.size(-1)), weight, bias)  # (rows, N)
        return y.view(*x.shape[:-1], weight.size(0))

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        g = g.reshape(-1, weight.size(0))  # (rows, N)
        rows = x.reshape(-1, x.size(-1))  # (rows, K)
        need_x, need_w, need_b = ctx.needs_input_grad
        g_x = linear(g, weight.t()).view(x.shape) if need_x else None
        g_w = linear(g.t(), rows.t()) if need_w else None  # (N, K)
        g_b = g.sum(0) if need_b and ctx.has_bias else None
        return g_x, g_w, g_b


def project(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Differentiable x (..., K) weightᵀ + bias -> (..., N): `Linear` where oneDNN is
    taken, else torch.nn.functional.linear."""
    if uses_onednn(x, weight):
        return Linear.apply(x, weight, bias)
    return torch.nn.functional.linear(x, weight, bias)
