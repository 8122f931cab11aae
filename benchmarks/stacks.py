"""Speed of the differentiable stacks: forward + backward, seconds and GFLOP/s.

    python benchmarks/stacks.py [--threads N] [--repeats R] [--device cpu|cuda]
        [--lengths 16 32 64 128] [--compute-dtype float64|float32]

dVPDA at B=32, Q=S=3, m=5 and the superposition stack at B=32, m=50. GFLOP/s counts
the multiply-adds of the dominant terms only (the O(n^3) pop contraction of the dVPDA:
forward sum_t 2 B S (tX)(tQ)Q / 2 for the triangle, backward twice that; the
superposition stack's 3 multiply-adds per stored element and step, x3 for backward).
Prints the load average next to each row: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from fruit.stacks import dvpda_readings, superposition_readings


def dvpda_flops(B, n, Q=3, S=3):
    X = Q * S
    fwd = sum(2 * B * S * (t * X) * (t * Q) * Q / 2 for t in range(1, n))
    return 3 * fwd


def sup_flops(B, n, m):
    stored = sum(min(t, n - t + 1) for t in range(1, n + 1))
    return 3 * (2 * 3 * B * m * stored)


def best_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128])
    p.add_argument("--compute-dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    compute = getattr(torch, args.compute_dtype)
    B = args.batch_size
    print(
        f"device={device} threads={args.threads} torch={torch.__version__} "
        f"dVPDA compute dtype={args.compute_dtype}; inputs float32"
    )
    print(f"{'stack':<14}{'n':>5}{'seconds':>10}{'GFLOP/s':>10}   load average")
    for n in args.lengths:
        g = torch.Generator().manual_seed(n)
        logits = torch.randn(B, n, 189, generator=g).to(device).requires_grad_()
        pushed = torch.randn(B, n, 5, generator=g).to(device).requires_grad_()
        bottom = torch.randn(5, generator=g).to(device).requires_grad_()

        def run_nd(logits=logits, pushed=pushed, bottom=bottom):
            dvpda_readings(logits, pushed, bottom, 3, 3, compute_dtype=compute).sum().backward()

        run_nd()  # warm-up
        s = best_time(run_nd, args.repeats)
        load = os.getloadavg()[0]
        print(f"{'dVPDA':<14}{n:>5}{s:>10.3f}{dvpda_flops(B, n) / s / 1e9:>10.2f}   {load:.2f}")
    for n in args.lengths:
        g = torch.Generator().manual_seed(n)
        probs = torch.softmax(torch.randn(B, n, 3, generator=g), -1).to(device).requires_grad_()
        pushed = torch.randn(B, n, 50, generator=g).to(device).requires_grad_()

        def run_sup(probs=probs, pushed=pushed):
            superposition_readings(probs, pushed).sum().backward()

        run_sup()
        s = best_time(run_sup, args.repeats)
        load = os.getloadavg()[0]
        print(
            f"{'superposition':<14}{n:>5}{s:>10.3f}{sup_flops(B, n, 50) / s / 1e9:>10.2f}   {load:.2f}"
        )


if __name__ == "__main__":
    main()
