"""fruit.allocator: glibc's malloc keeps a training step's large buffers in the heap.

Oracle: the kernel's own count of minor page faults (getrusage) over a loop that
allocates and frees the same 40 MiB buffer, in fresh processes with and without the
settings: with glibc's defaults every round trip faults the buffer's pages in again.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="mallopt settings are glibc's"
)

PROBE = """
import json, resource, sys, torch
from fruit.allocator import tune_for_training
tuned = tune_for_training() if sys.argv[1] == "tune" else None
for _ in range(10):  # round trips before counting (glibc settles in the first few)
    torch.empty(10 << 20).fill_(1.0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    torch.empty(10 << 20).fill_(1.0)  # 40 MiB, allocated, touched, freed
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(json.dumps({"tuned": tuned, "faults": after - before}))
"""


def probe(mode: str, **env) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    environment.update(env)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], env=environment, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_settings_keep_large_buffers_in_the_heap():
    plain, tuned = probe("plain"), probe("tune")
    assert tuned["tuned"] is True
    pages = (40 << 20) // 4096
    assert plain["faults"] > 10 * pages  # defaults (above 32 MiB: always mmap): refaulted
    assert tuned["faults"] < pages  # tuned: the buffer's pages stay mapped


def test_the_users_malloc_variables_win():
    assert probe("tune", MALLOC_ARENA_MAX="2")["tuned"] is False
