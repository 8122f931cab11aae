"""A real learning check: the plain transformer (Tf) on question formation.

Trains on 100k generated training examples (fruit.tasks, seed 0), validates on the
published dev set and evaluates on the published test and gen files, with the
paper's procedure (fruit.training), then prints the metrics next to the paper's Tf
row for question formation (mean of 5 runs). Expected: test FA >= 0.9.

    .venv/bin/python benchmarks/learning_check.py [--max-epochs 20] [--device auto]

Long on a CPU (hours on 2 shared cores); the run folder resumes if interrupted.
Neither the generated data nor the published files go into the repository: both
live under --work (default /tmp/fruit-learning-check).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from fruit import training
from fruit.tasks import get_task, write_tsv

# The paper's Tf row on question formation (mean of 5 runs; ± population std).
PAPER_TF = {
    "full": {"test": 0.999, "hierarchical": 0.005, "linear": 0.112},
    "partial": {"hierarchical": "0.645 ±.25", "linear": "0.355 ±.25"},
}


def prepare_data(work: Path, published: Path, train_size: int) -> Path:
    """work/data/question-formation: generated train.tsv, published dev/test/gen, gen.linear."""
    folder = work / "data" / "question-formation"
    folder.mkdir(parents=True, exist_ok=True)
    task = get_task("question-formation")
    if not (folder / "train.tsv").is_file():
        splits = task.generate(seed=0, sizes={"train": train_size, "dev": 0, "test": 0, "gen": 0})
        write_tsv(folder / "train.tsv", splits["train"])
    for split in ("dev", "test", "gen"):
        target = folder / f"{split}.tsv"
        if not target.exists():
            os.symlink((published / "question-formation" / f"{split}.tsv").resolve(), target)
    return folder.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/fruit-learning-check")
    default_published = os.environ.get(
        "FRUIT_DATASETS", str(Path(__file__).resolve().parents[2] / "shared" / "datasets")
    )
    parser.add_argument("--datasets", default=default_published, help="published files")
    parser.add_argument("--train-size", type=int, default=100_000)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--batch-tokens", type=int, default=1024)
    parser.add_argument("--max-epochs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    work = Path(args.work)
    data_dir = prepare_data(work, Path(args.datasets), args.train_size)
    config = training.RunConfig(
        task="question-formation",
        architecture="Tf",
        phase="final",
        seed=args.seed,
        profile="paper",
        learning_rate=args.learning_rate,
        batch_tokens=args.batch_tokens,
        train_size=args.train_size,
        max_epochs=args.max_epochs,
        data_dir=str(data_dir),
        device=args.device,
    )
    run_dir = work / "run"
    start = time.perf_counter()
    metrics = training.train_run(config, run_dir, progress=True)
    wall = time.perf_counter() - start
    print(json.dumps(metrics, indent=2, sort_keys=True))
    print(
        f"\nrun folder: {run_dir}; wall time this invocation {wall:.0f} s; load {os.getloadavg()}"
    )
    print(f"epochs {metrics['epochs']:.2f}, train seconds {metrics['train_seconds']:.0f}")
    print(f"{'':14}{'this run':>12}{'paper Tf':>14}")
    for kind in ("full", "partial"):
        for name in ("test", "hierarchical", "linear", "log_ratio"):
            ours = metrics[kind][name]
            ours = "-" if ours is None else f"{ours:.3f}"
            print(f"{kind + ' ' + name:<22}{ours:>12}{PAPER_TF[kind].get(name, '-')!s:>14}")
    ok = metrics["status"] == "complete" and metrics["full"]["test"] >= 0.9
    print("test FA >= 0.9:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
