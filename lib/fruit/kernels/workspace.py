"""Reused memory for the large buffers of the dVPDA's C kernels (gamma's table, its
adjoint GU, HR).

A fresh allocation of megabytes is mapped by the system and faulted in page by page
when first written. Measured here (a virtual machine): allocating and filling 16 MB
takes 16 ms, of which about 14 ms are page faults, against 1.6 ms to fill memory that
is already mapped; and a training step of a stack RNN with a dVPDA allocates its
table and adjoint (tens of MB) once per batch. `take` therefore hands out memory that
earlier runs gave back, and a buffer goes back to the pool when the object that took
it (a run's buffers, an adjoint) is garbage-collected. The memory is uninitialised,
as torch.empty's: the kernels write every entry before they read it.
"""

from __future__ import annotations

import threading
import weakref

import torch
from torch import Tensor

KEEP_BYTES = 128 * 2**20  # at most this much free memory is kept for reuse


class Pool:
    """Free CPU buffers (1-D tensors), reused by size."""

    def __init__(self, keep_bytes: int = KEEP_BYTES):
        self.keep_bytes = keep_bytes
        self.free: list[Tensor] = []
        self.lock = threading.Lock()

    def take(self, owner: object, numel: int, dtype: torch.dtype) -> Tensor:
        """A 1-D tensor of numel entries (uninitialised), given back to the pool when
        owner is garbage-collected. Reuses the smallest free buffer that is large
        enough and not more than twice the size."""
        with self.lock:
            fits = [
                i
                for i, x in enumerate(self.free)
                if x.dtype == dtype and numel <= x.numel() <= 2 * numel + 4096
            ]
            best = min(fits, key=lambda i: self.free[i].numel()) if fits else None
            buffer = None if best is None else self.free.pop(best)
        if buffer is None:
            buffer = torch.empty(numel, dtype=dtype)
        weakref.finalize(owner, self._give_back, buffer)
        return buffer[:numel]

    def _give_back(self, buffer: Tensor) -> None:
        with self.lock:
            self.free.append(buffer)
            while sum(x.numel() * x.element_size() for x in self.free) > self.keep_bytes:
                self.free.pop(0)  # the oldest


POOL = Pool()


def take(owner: object, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """An uninitialised CPU tensor of `shape` from the pool, owned by owner."""
    numel = 1
    for size in shape:
        numel *= size
    return POOL.take(owner, numel, dtype).view(shape)
