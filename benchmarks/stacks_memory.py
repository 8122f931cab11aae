"""Peak resident memory of dVPDA forward + backward, each size in a fresh process.

    python benchmarks/stacks_memory.py [--lengths 32 64 128] [--batch-size 32]
        [--implementation auto|native|torch|both]

For each n a child process imports torch, builds the inputs, records its resident
memory (the baseline), runs forward + backward once, and reports the peak (VmHWM)
minus the baseline. Prints a table and the growth ratio peak(2n)/peak(n).
--implementation picks the C kernels (native) or the PyTorch reference (torch) through
FRUIT_NATIVE in the child; both measures the two.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, torch
from fruit.stacks import dvpda_readings
torch.set_num_threads(1)

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
B, n, stack = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
g = torch.Generator().manual_seed(0)
logits = torch.randn(B, n, 189, generator=g).requires_grad_()
pushed = torch.randn(B, n, 5, generator=g).requires_grad_()
bottom = torch.randn(5, generator=g).requires_grad_()
# touch the allocator and the autograd engine once on a tiny problem
dvpda_readings(logits[:1, :2], pushed[:1, :2], bottom, 3, 3).sum().backward()
logits.grad = pushed.grad = bottom.grad = None
baseline = status("VmRSS")
dvpda_readings(logits, pushed, bottom, 3, 3).sum().backward()
peak = status("VmHWM")
print(json.dumps({"baseline": baseline, "peak": peak}))
"""


def measure(B, n, implementation="auto"):
    env = dict(os.environ)
    if implementation != "auto":
        env["FRUIT_NATIVE"] = "1" if implementation == "native" else "0"
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(B), str(n), "nd"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--implementation", default="auto", choices=["auto", "native", "torch", "both"])
    args = p.parse_args()
    impls = ["torch", "native"] if args.implementation == "both" else [args.implementation]
    print(f"dVPDA B={args.batch_size} Q=S=3 m=5, float32 inputs (float64 recurrences)")
    print(f"{'impl':>7}{'n':>5}{'baseline MB':>13}{'peak MB':>10}{'above MB':>10}")
    above = {}
    for n in args.lengths:
        for impl in impls:
            r = measure(args.batch_size, n, impl)
            above[impl, n] = (r["peak"] - r["baseline"]) / 2**20
            print(
                f"{impl:>7}{n:>5}{r['baseline'] / 2**20:>13.1f}{r['peak'] / 2**20:>10.1f}"
                f"{above[impl, n]:>10.1f}"
            )
    for impl in impls:
        for n in args.lengths:
            if (impl, 2 * n) in above and above[impl, n] > 0:
                ratio = above[impl, 2 * n] / above[impl, n]
                print(f"{impl}: peak({2 * n}) / peak({n}) above baseline = {ratio:.2f}")
    if len(impls) == 2:
        for n in args.lengths:
            if above["native", n] > 0:
                ratio = above["torch", n] / above["native", n]
                print(f"n={n}: torch / native peak above baseline = {ratio:.2f}")


if __name__ == "__main__":
    main()
