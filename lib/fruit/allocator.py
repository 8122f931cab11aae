"""glibc's malloc, set for training: large buffers kept in the heap instead of being
handed back to the kernel after every step.

A training step allocates and frees the same large buffers (activations, gradients,
PyTorch's LSTM workspaces) again and again. With glibc's defaults, buffers above the
mmap threshold (128 KiB, raised adaptively up to 32 MiB) and the free top of the heap
above the trim threshold go back to the kernel when freed and are faulted in again at
the next step. 150 one-thread LSTM training steps on question formation (paper size)
took 75,000-491,000 minor page faults and 0.28-1.66 s of system time in four runs with
the defaults, 5,500-5,600 faults and 0.02-0.03 s with the settings below (wall time
5-15% lower); 100 Tf steps 17,000-28,000 faults against 900-2,800. The memory stays with
the process, which costs at most the largest step's working set plus TOP_PAD.

`tune_for_training` applies them with mallopt at run time (so it holds for `fruit
train`, for a notebook's kernel and for a benchmark alike). It does nothing where the
C library is not glibc, and nothing when the user set any MALLOC_* variable: their
settings win.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

# mallopt's parameter numbers (glibc malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MIB = 1 << 20
SETTINGS = {  # parameter -> bytes
    M_MMAP_THRESHOLD: 256 * MIB,  # allocations below this come from the heap
    M_TRIM_THRESHOLD: 256 * MIB,  # the heap's free top is returned above this
    M_TOP_PAD: 64 * MIB,  # extra room taken whenever the heap grows
}


@functools.cache
def tune_for_training() -> bool:
    """Apply SETTINGS once per process; True when they were applied."""
    if any(key.startswith("MALLOC_") for key in os.environ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl without mallopt, ...)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in SETTINGS.items())
