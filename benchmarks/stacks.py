"""Speed of the differentiable stacks: forward + backward, seconds and GFLOP/s.

    python benchmarks/stacks.py [--threads N] [--repeats R] [--device cpu|cuda]
        [--lengths 16 32 64 128] [--compute-dtype float64|float32]
        [--implementation auto|native|torch|both] [--step-api]

dVPDA at B=32, Q=S=3, m=5 and the superposition stack at B=32, m=50. GFLOP/s counts
the multiply-adds of the dominant terms only (the O(n^3) pop contraction of the dVPDA:
forward sum_t 2 B S (tX)(tQ)Q / 2 for the triangle, backward twice that; the
superposition stack's 3 multiply-adds per stored element and step, x3 for backward).

The dVPDA runs on the C kernels on the CPU (fruit.stacks.fast.dvpda_native) unless
FRUIT_NATIVE=0; --implementation torch times its PyTorch operations
(fruit.stacks.fast.dvpda_scan) instead, and both times the two alternately in this
process (their ratio is then fair on a shared machine). --step-api adds rows for the
step API (DVPDAStack, one update at a time, as the stack RNNs use it). Seconds are the
best wall-clock time of the repeats; "cpu s" is the process's CPU time for the same run.
Prints the load average next to each row: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from fruit.stacks import DVPDAStack, dvpda_readings, superposition_readings
from fruit.stacks.implementation import dvpda_kernels


def dvpda_flops(B, n, Q=3, S=3):
    X = Q * S
    fwd = sum(2 * B * S * (t * X) * (t * Q) * Q / 2 for t in range(1, n))
    return 3 * fwd


def sup_flops(B, n, m):
    stored = sum(min(t, n - t + 1) for t in range(1, n + 1))
    return 3 * (2 * 3 * B * m * stored)


def timed(fn):
    """(wall seconds, CPU seconds) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, time.process_time() - cpu


def best_time(fn, repeats):
    return min(timed(fn)[0] for _ in range(repeats))


def implementations(choice: str) -> list[str]:
    """The dVPDA implementations to time: "native" (C kernels) and/or "torch"."""
    if choice == "auto":
        on = dvpda_kernels(torch.zeros((), dtype=torch.float64)) is not None
        return ["native" if on else "torch"]
    return ["torch", "native"] if choice == "both" else [choice]


def with_implementation(name: str, fn):
    """fn run with the dVPDA implementation `name` chosen (FRUIT_NATIVE)."""

    def run():
        saved = os.environ.get("FRUIT_NATIVE")
        os.environ["FRUIT_NATIVE"] = "1" if name == "native" else "0"
        try:
            fn()
        finally:
            if saved is None:
                del os.environ["FRUIT_NATIVE"]
            else:
                os.environ["FRUIT_NATIVE"] = saved

    return run


def stepped(logits, pushed, bottom, compute):
    """Readings through the step API (length known, as in the stack RNNs)."""
    B, n, _ = logits.shape
    state = DVPDAStack.initial(bottom, B, 3, 3, compute_dtype=compute, length=n)
    out = []
    for t in range(n):
        state = state.step(logits[:, t], pushed[:, t])
        out.append(state.reading())
    return torch.stack(out, 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128])
    p.add_argument("--compute-dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--implementation", default="auto", choices=["auto", "native", "torch", "both"])
    p.add_argument("--step-api", action="store_true", help="also time DVPDAStack")
    args = p.parse_args()
    from fruit.allocator import tune_for_training

    tuned = (
        tune_for_training()
    )  # malloc as in a training run (large buffers reused, not re-faulted)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    compute = getattr(torch, args.compute_dtype)
    B = args.batch_size
    impls = implementations(args.implementation) if device.type == "cpu" else ["torch"]
    print(
        f"device={device} threads={args.threads} torch={torch.__version__} "
        f"dVPDA compute dtype={args.compute_dtype}; inputs float32; malloc "
        f"{'tuned as in training' if tuned else 'as the environment sets it'}"
    )
    print(
        f"{'stack':<14}{'impl':>7}{'n':>5}{'seconds':>10}{'cpu s':>9}{'GFLOP/s':>10}   load average"
    )
    measured = {}  # n -> seconds of the whole-sequence API as training selects it
    apis = [("dVPDA", dvpda_readings)] + ([("dVPDA step", stepped)] if args.step_api else [])
    for n in args.lengths:
        g = torch.Generator().manual_seed(n)
        logits = torch.randn(B, n, 189, generator=g).to(device).requires_grad_()
        pushed = torch.randn(B, n, 5, generator=g).to(device).requires_grad_()
        bottom = torch.randn(5, generator=g).to(device).requires_grad_()
        for label, api in apis:

            def run_nd(api=api, logits=logits, pushed=pushed, bottom=bottom):
                if api is stepped:
                    readings = stepped(logits, pushed, bottom, compute)
                else:
                    readings = api(logits, pushed, bottom, 3, 3, compute_dtype=compute)
                readings.sum().backward()

            runs = {name: with_implementation(name, run_nd) for name in impls}
            for run in runs.values():
                run()  # warm-up (and the C kernels' build)
            best = {name: (float("inf"), float("inf")) for name in impls}
            for _ in range(args.repeats):  # alternately, so that both see the same load
                for name, run in runs.items():
                    wall, cpu = timed(run)
                    best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
            load = os.getloadavg()[0]
            for name, (s, cpu) in best.items():
                print(
                    f"{label:<14}{name:>7}{n:>5}{s:>10.3f}{cpu:>9.3f}"
                    f"{dvpda_flops(B, n) / s / 1e9:>10.2f}   {load:.2f}"
                )
            if api is dvpda_readings:
                measured[n] = best["native" if "native" in best else "torch"][0]
            if len(best) == 2:
                ratio = best["torch"][0] / best["native"][0]
                cpu_ratio = best["torch"][1] / best["native"][1]
                print(
                    f"{label:<14}{'ratio':>7}{n:>5}{ratio:>9.1f}x{cpu_ratio:>8.1f}x   torch / native"
                )
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
            f"{'superposition':<14}{'':>7}{n:>5}{s:>10.3f}{'':>9}"
            f"{sup_flops(B, n, 50) / s / 1e9:>10.2f}   {load:.2f}"
        )
    if B == 32 and args.compute_dtype == "float64":
        for n, want in TARGETS.items():
            if n in measured:
                verdict = "met" if measured[n] <= want else "NOT met"
                print(
                    f"# target dVPDA B=32 fwd+bwd n={n} <= {want} s: {measured[n]:.3f} s {verdict}"
                )


# The project's speed targets for the dVPDA (B = 32, float64, forward + backward), seconds.
TARGETS = {32: 0.05, 64: 0.3, 128: 2.0}


if __name__ == "__main__":
    main()
