"""Dropout whose mask is a function of (seed, element index): counter-based, so the
backward pass replays the forward's mask from one integer instead of storing it, and
the draw costs a few integer operations per element instead of PyTorch's
``bernoulli_`` (which does not vectorise on every CPU and was a third of a transformer
training step).

The law is dropout's: each element is kept independently with probability
1 - round(p 2^32) / 2^32 (= 1 - p to within 2^-33) and a kept element is scaled by
1 / (1 - p). The bits: draw j = splitmix64(seed + (j + 1) · golden) (64 bits); element
j < h = ⌈N/2⌉ takes the low 32 bits of draw j, element h + j the high 32 bits; kept
iff those bits, as an unsigned integer, are ≥ round(p 2^32). Each call takes a fresh
seed from PyTorch's default generator, so `torch.manual_seed` fixes every mask and a
checkpoint's generator state resumes the stream.

``dropout.c`` computes it on the CPU (float32, float64); `keep_bits` below is the same
computation as PyTorch integer operations (any device; the tests hold the two equal bit
for bit), used when the C kernel is not built and as the readable version.

On CUDA, dropout is PyTorch's own (``torch.nn.functional.dropout``): one kernel where
the counter written in PyTorch operations is about twenty small ones, and a CUDA step is
a chain of launches. Its law is the same; its masks come from the CUDA generator, so a
CUDA run is reproducible on CUDA (same seed, card kind and PyTorch version; the
checkpoint keeps the CUDA generator's state), not mask for mask against the CPU -- as
with the fused attention of ``fruit.models.transformer``. ``FRUIT_COUNTER_DROPOUT=1``
keeps the counter-based masks on CUDA, ``=0`` takes PyTorch's on the CPU too.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch
from torch import Tensor

from fruit.kernels import build

_i, _p = ctypes.c_int64, ctypes.c_void_p
SOURCE = build.CSource(
    "dropout.c",
    (("dropout_apply", (_p, _p, _i, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_double), None),),
    "dropout (the transformers)",
    Path(__file__).parent,
)

GOLDEN = 0x9E3779B97F4A7C15
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
LOW32 = 0xFFFFFFFF


def _signed(u: int) -> int:
    """A uint64 as the int64 with the same bits (PyTorch has int64 arithmetic, which wraps)."""
    return u - 2**64 if u >= 2**63 else u


def _shift_right(z: Tensor, k: int) -> Tensor:
    """Logical (unsigned) right shift of int64 bits: >> is arithmetic, so clear the sign fill."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _mix(z: Tensor) -> Tensor:
    """splitmix64's finaliser on int64 tensors (wrapping multiplication)."""
    z = (z ^ _shift_right(z, 30)) * _signed(MIX1)
    z = (z ^ _shift_right(z, 27)) * _signed(MIX2)
    return z ^ _shift_right(z, 31)


def keep_bits(n: int, seed: int, device=None) -> Tensor:
    """The 32 random bits of each of n elements, (n,) int64 in [0, 2^32)."""
    h = (n + 1) // 2
    j = torch.arange(1, h + 1, dtype=torch.int64, device=device)  # (h,) draw j-1 uses j
    z = _mix(_signed(seed) + j * _signed(GOLDEN))  # (h,) the draws
    low, high = z & LOW32, _shift_right(z, 32)
    return torch.cat((low, high[: n // 2]))  # (n,)


def threshold(p: float) -> int:
    """Elements whose bits are below this are dropped: round(p 2^32), at most 2^32 - 1."""
    return min(round(p * 2**32), 2**32 - 1)


def apply_mask(x: Tensor, seed: int, p: float) -> Tensor:
    """x with the mask of ``seed`` applied: kept elements times 1/(1-p), the rest 0."""
    x = x.contiguous()
    scale = 1.0 / (1.0 - p)
    lib = build.library_for(SOURCE, x)
    if lib is not None:
        y = torch.empty_like(x)
        lib.dropout_apply(x.data_ptr(), y.data_ptr(), x.numel(), seed, threshold(p), scale)
        return y
    keep = keep_bits(x.numel(), seed, x.device).view(x.shape) >= threshold(p)
    return x * (keep.to(x.dtype) * scale)  # x·scale or x·0, as in C; no host-to-device copy


def fresh_seed() -> int:
    """A uint64 seed from PyTorch's default (CPU) generator."""
    return int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64)) % 2**64


class CounterDropout(torch.autograd.Function):
    """y = mask(seed) ⊙ x / (1-p); the backward applies the same mask to the gradient."""

    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        seed = fresh_seed()
        ctx.seed, ctx.p = seed, p
        return apply_mask(x, seed, p)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return apply_mask(grad, ctx.seed, ctx.p), None


def counter_based(device: torch.device) -> bool:
    """Whether dropout on ``device`` is the counter-based one: everywhere but CUDA unless
    FRUIT_COUNTER_DROPOUT=1 (CUDA too) or =0 (nowhere: PyTorch's own dropout)."""
    choice = build.switch("FRUIT_COUNTER_DROPOUT", "")
    return choice == "1" or (choice == "" and device.type != "cuda")


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout of x (any shape) with probability p when training: counter-based, or
    PyTorch's own on CUDA (see the module's docstring)."""
    if not training or p == 0.0:
        return x
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not counter_based(x.device):
        return torch.nn.functional.dropout(x, p, training=True)
    return CounterDropout.apply(x, p)


class Dropout(torch.nn.Module):
    """`dropout` as a module, in place of torch.nn.Dropout."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
