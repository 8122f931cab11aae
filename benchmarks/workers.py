"""How a small machine should spread a campaign's runs over its cores: training
throughput of one architecture when one run has the machine to itself (1 thread, then
all threads), and when several one-thread runs train at once, as `fruit run --workers N`
runs them.

    .venv/bin/python benchmarks/workers.py [--arch LSTM --arch Tf] [--seconds 20] [--repeats 1]

Each measurement is `benchmarks/models.py --arch A --only --seconds S` in its own process
(real question-formation batches, forward + backward + Adam step). Concurrent
processes start together but each imports and loads at its own pace, so their timed
seconds overlap for most but not all of their length: ask for enough --seconds (20 or
more) that the start-up is small beside them.

For every layout it prints each run's tokens per second and the machine's total, and
that total against one one-thread run: a total near N for N runs at once means the
cores are independent; near 1, that they share one core's execution
units (e.g. SMT siblings of a virtual machine) or its memory bandwidth. The load
average is printed before each layout: measure on a quiet machine.

The claims campaign's records show runs 1.6-2.4x slower than the one-thread throughputs
of ``fruit.experiments.planning.cost`` while two ran at once; this tells how much of that is the
layout itself.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def throughput(arch: str, seconds: float, threads: int, copies: int, data_dir=None):
    """Tokens per second of ``arch`` in each of ``copies`` processes started together."""
    command = [
        sys.executable, str(REPO / "benchmarks" / "models.py"), "--arch", arch, "--only",
        "--seconds", str(seconds), "--threads", str(threads),
    ]  # fmt: skip
    if data_dir is not None:
        command += ["--data-dir", str(data_dir)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
        for _ in range(copies)
    ]
    outputs = [process.communicate()[0] for process in processes]  # wait for them all
    speeds = []
    for process, out in zip(processes, outputs):
        if process.returncode != 0:
            raise SystemExit(f"benchmarks/models.py failed (exit {process.returncode})")
        if "skipped" in out:
            print(out.strip())
            return []
        rows = [line.split() for line in out.splitlines() if line.split()[:1] == [arch]]
        speeds.append(float(rows[0][5]))  # the tokens/s column
    return speeds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", action="append", help="architecture (default: LSTM)")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds per run")
    parser.add_argument("--repeats", type=int, default=1, help="measure every layout N times")
    parser.add_argument("--data-dir", help="as benchmarks/models.py's (default: its default)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.repeats < 1:
        parser.error("--seconds must be above 0 and --repeats at least 1")
    cores = os.cpu_count() or 1
    layouts = [(1, 1), (cores, 1), (1, cores)] if cores > 1 else [(1, 1)]
    names = {(1, 1): "1 run, 1 thread"}
    names[cores, 1] = f"1 run, {cores} threads"
    names[1, cores] = f"{cores} runs at once, 1 thread each"
    print(f"# {cores} cores; {args.seconds:g} s per measurement, {args.repeats} repeat(s)")
    print(
        f"{'architecture':<12} {'layout':<30} {'tokens/s per run':>30} {'total':>8} {'x 1 run':>8}"
    )
    for arch in args.arch or ["LSTM"]:
        for _ in range(args.repeats):
            alone = None
            for threads, copies in layouts:
                load = os.getloadavg()[0]
                speeds = throughput(arch, args.seconds, threads, copies, args.data_dir)
                if not speeds:  # no data: models.py said why
                    return 0
                total = sum(speeds)
                alone = alone or total
                each = ", ".join(f"{s:.0f}" for s in speeds)
                print(
                    f"{arch:<12} {names[threads, copies]:<30} {each:>30} {total:>8.0f} "
                    f"{total / alone:>8.2f}   (load {load:.2f} before)",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
