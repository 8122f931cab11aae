"""One training run started alone (`fruit train`) and the same run under `fruit run`'s Dask
LocalCluster: wall time, user and system CPU time of the whole process tree, and the
run's own training time (metrics.json's train_seconds).

    .venv/bin/python benchmarks/dask_overhead.py [--architecture Tf] [--train-size 20000]
        [--epochs 1] [--repeats 2]

Both start from the same generated data and seeds, so they train the same numbers
(checked). The two are interleaved `--repeats` times; the load average is printed, since
the machine may be shared. Runs on one torch thread, one Dask worker.

    .venv/bin/python benchmarks/dask_overhead.py --idle 30 [--repeats 2]

measures instead what `fruit run`'s cluster itself costs while its runs train: the CPU
seconds that the process holding the scheduler and each of its 2 workers use in 30 s
with nothing submitted, for fruit's cluster settings (`fruit.experiments.clusters.cluster.QUIET_DASK`)
and for Dask's defaults, interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FRUIT = [sys.executable, "-m", "fruit"]

PROFILE = """
name = "overhead"
description = "benchmarks/dask_overhead.py: one run"
seed = 3
tasks = ["question-formation"]
architectures = ["{architecture}"]
[data]
train = {train}
dev = 500
test = 500
gen = 500
[search]
trials = 0
[final]
runs = 1
max_epochs = {epochs}
batch_tokens = 1024
learning_rate = 1e-3
[training]
checkpoint_every = 10_000
"""


def children_times() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime, r.ru_stime


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    user0, sys0 = children_times()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stdout}\n{done.stderr}")
    user1, sys1 = children_times()
    return {"wall": wall, "user": user1 - user0, "system": sys1 - sys0}


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of one process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cluster(seconds: float, quiet: bool) -> tuple[float, list[float]]:
    """CPU seconds used in `seconds` by this process (the scheduler's) and by each worker of
    an idle 2-worker LocalCluster, with fruit's settings or with Dask's defaults."""
    from unittest import mock

    from fruit.experiments.clusters import cluster

    with mock.patch.dict(cluster.QUIET_DASK, clear=not quiet):
        made = cluster.local_cluster(workers=2, dashboard=True)
    try:
        pids = list(made.client.run(os.getpid).values())
        time.sleep(3)  # start-up done
        before = [process_cpu(os.getpid())] + [process_cpu(p) for p in pids]
        time.sleep(seconds)
        after = [process_cpu(os.getpid())] + [process_cpu(p) for p in pids]
    finally:
        made.close()
    used = [b - a for a, b in zip(before, after)]
    return used[0], used[1:]


def idle_main(seconds: float, repeats: int) -> int:
    print(f"# idle 2-worker LocalCluster: CPU seconds used in {seconds:g} s (% of one core)")
    for _ in range(repeats):
        for quiet in (True, False):
            main_s, workers = idle_cluster(seconds, quiet)
            cells = [f"{x:.2f} ({100 * x / seconds:.1f}%)" for x in (main_s, *workers)]
            how = "fruit" if quiet else "Dask defaults"
            print(f"{how:<14} scheduler process {cells[0]}, workers {', '.join(cells[1:])}  "
                  f"load {load()}", flush=True)  # fmt: skip
    return 0


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--architecture", default="Tf")
    parser.add_argument("--train-size", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--idle", type=float, metavar="SECONDS",
                        help="measure the idle cluster's own CPU use instead")  # fmt: skip
    args = parser.parse_args()
    if args.idle is not None:
        return idle_main(args.idle, args.repeats)

    work = Path(tempfile.mkdtemp(prefix="fruit-overhead-"))
    profile = work / "overhead.toml"
    profile.write_text(
        PROFILE.format(architecture=args.architecture, train=args.train_size, epochs=args.epochs)
    )
    print(f"# {args.architecture}, {args.train_size} examples x {args.epochs} epoch(s), 1 thread")
    print(f"{'how':<8} {'wall s':>8} {'user s':>8} {'system s':>9} {'train s':>8}  load")
    from fruit.profiles import derive_seed

    # the seed fruit run gives final-0 of this profile, so both train the same numbers
    seed = derive_seed(3, "question-formation", args.architecture, "final", 0)
    one_thread = {v: "1" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    results: dict[str, list[dict]] = {"alone": [], "dask": []}
    for k in range(args.repeats):
        for how in ("alone", "dask"):
            results_dir = work / f"{how}-{k}"
            common = [
                "--profile",
                str(profile),
                "--device",
                "cpu",
                "--data-dir",
                str(work / "data"),
            ]
            if how == "alone":
                command = [
                    *FRUIT, "train", "--task", "question-formation", "--architecture",
                    args.architecture, *common, "--learning-rate", "1e-3", "--batch-tokens",
                    "1024", "--generate-data", "--output-dir", str(results_dir),
                    "--no-progress", "--seed", str(seed),
                ]  # fmt: skip
            else:
                command = [
                    *FRUIT, "run", *common, "--results", str(results_dir), "--workers", "1",
                    "--threads", "1", "--skip-reports", "--notebook",
                    str(REPO / "notebooks" / "train.ipynb"),
                ]  # fmt: skip
            env = {**os.environ, **(one_thread if how == "alone" else {})}
            row = timed(command, work, env)
            metrics_path = next(results_dir.rglob("metrics.json"))
            metrics = json.loads(metrics_path.read_text())
            row["train"] = metrics["train_seconds"]
            row["ce"] = metrics["best_validation_cross_entropy"]
            results[how].append(row)
            print(
                f"{how:<8} {row['wall']:8.1f} {row['user']:8.1f} {row['system']:9.2f} "
                f"{row['train']:8.1f}  {load()}",
                flush=True,
            )
    ces = {r["ce"] for rows in results.values() for r in rows}
    print(f"# validation cross-entropy of every run: {sorted(ces)} (one value: same numbers)")
    for how, rows in results.items():
        best = min(rows, key=lambda r: r["train"])
        print(
            f"# {how}: best training time {best['train']:.1f} s, system/user "
            f"{best['system'] / best['user']:.3f}"
        )
    ratio = min(r["train"] for r in results["dask"]) / min(r["train"] for r in results["alone"])
    print(f"# training time under Dask / alone: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
