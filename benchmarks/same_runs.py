"""Do two checkouts of this repository train the same runs? A small run of each
architecture asked for, trained by each checkout's own `fruit train` from the same
generated data and seeds, compared field by field: every line of log.csv and every value
of metrics.json except timings and provenance.

    .venv/bin/python benchmarks/same_runs.py OTHER_CHECKOUT [--arch Tf --arch LSTM]
        [--train-size 400] [--max-epochs 2]

Use it before a long campaign moves to a newer commit: a run paused by one commit and
resumed by another records a warning in its metrics.json ("resumed by commit ...: the
code changed in between"), and this says whether the change can matter. Each checkout
needs its own virtual environment (`make venv`); the runs take seconds on one thread.
Exits 1 when any architecture differs.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# metrics.json fields that legitimately differ between two runs of the same numbers
NOT_COMPARED = {
    "train_seconds",
    "evaluation_seconds",
    "seconds",
    "versions",
    "code",
    "provenance",
    "warnings",
}


def train(checkout: Path, arch: str, folder: Path, args) -> Path:
    """One small question-formation run of ``arch`` by ``checkout``'s fruit, in ``folder``."""
    fruit = checkout / ".venv" / "bin" / "fruit"
    if not fruit.exists():
        raise SystemExit(f"{fruit} not found: run `make venv` in {checkout}")
    run_dir = folder / f"run-{arch}"
    command = [
        str(fruit), "train", "--task", "question-formation", "--architecture", arch,
        "--profile", "smoke", "--train-size", str(args.train_size),
        "--max-epochs", str(args.max_epochs), "--generate-data",
        "--data-dir", str(folder / "data"), "--run-dir", str(run_dir), "--no-progress",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise SystemExit(f"{checkout}: fruit train {arch} failed: {' '.join(tail)}")
    return run_dir


def log_without_timings(run_dir: Path) -> list[dict]:
    with open(run_dir / "log.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def differences(a: Path, b: Path) -> list[str]:
    """What differs between two run folders, besides timings and provenance."""
    found = []
    if log_without_timings(a) != log_without_timings(b):
        found.append("log.csv")
    ma = json.loads((a / "metrics.json").read_text())
    mb = json.loads((b / "metrics.json").read_text())
    for key in sorted(set(ma) | set(mb)):
        if key not in NOT_COMPARED and ma.get(key) != mb.get(key):
            found.append(f"metrics.json {key}")
    return found


def commit(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "?"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the other checkout (with its own .venv)")
    parser.add_argument("--arch", action="append", help="default: Tf, Tf+Sup, Tf+Nd, LSTM")
    parser.add_argument("--train-size", type=int, default=400)
    parser.add_argument("--max-epochs", type=int, default=2)
    args = parser.parse_args(argv)
    if not (args.other / "lib" / "fruit").is_dir():
        parser.error(f"{args.other} is not a checkout of this repository (no lib/fruit)")
    checkouts = {"this": REPO, "other": args.other.resolve()}
    print(f"# this {commit(REPO)} ({REPO}) against other {commit(args.other)} ({args.other})")
    all_same = True
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.arch or ["Tf", "Tf+Sup", "Tf+Nd", "LSTM"]:
            runs = {}
            for name, checkout in checkouts.items():
                folder = Path(tmp) / name
                folder.mkdir(exist_ok=True)
                runs[name] = train(checkout, arch, folder, args)
            found = differences(runs["this"], runs["other"])
            all_same &= not found
            test_fa = json.loads((runs["this"] / "metrics.json").read_text())["full"]["test"]
            verdict = "same" if not found else "DIFFERENT: " + ", ".join(found)
            print(f"{arch:<12} {verdict}  (test FA {test_fa:.3g})", flush=True)
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
