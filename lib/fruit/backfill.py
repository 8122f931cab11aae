"""Add to a finished run's metrics.json what later code records at a run's end.

Since fc6fda2 a run on a McCoy task records its generalization means by the subject's
relative clause (``by_subject``) when it finishes. Runs finished by earlier code lack it;
their best.pt holds what is needed. ``add_by_subject`` computes the rows from best.pt,
exactly as the run's end would have (the run's own generalization examples, read as the
run read them, and ``fruit.breakdown.by_subject``: the same per-sentence probabilities as
the means), and writes them into metrics.json with a
note of where they came from (``by_subject_added``: the commit that computed them). The
run's own numbers are not touched; the function refuses a run whose best.pt no longer
gives the means its metrics.json records.

    python -m fruit.backfill RUN_DIR [RUN_DIR ...] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import math
import sys
from functools import cache
from pathlib import Path

from fruit.errors import FruitError
from fruit.io import atomic_write_json, read_metrics
from fruit.provenance import git_state

# How far the rows, weighted by their sizes, may lie from the recorded means: the
# recomputation on another commit or CPU may round float sums differently.
MEANS_TOLERANCE = 1e-6


@cache
def _code_commit() -> str | None:
    """The checkout's commit when this process first asks: the code it imported then,
    whatever commits are made while a long backfill runs."""
    return git_state()["commit"]


def add_by_subject(run_dir: str | Path, data_dir: str | Path | None = None) -> list[dict]:
    """Write ``by_subject`` (and ``by_subject_added``) into ``run_dir``'s metrics.json
    and return the rows; a run that already records them is left as it is."""
    from fruit.breakdown import by_subject
    from fruit.explore import load_run
    from fruit.training.data import SPLIT_FIELDS, read_task_data

    commit = _code_commit()  # before the minutes of work in which a commit may be made
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "is a file, not a run folder" if run_dir.exists() else "does not exist"
        raise FruitError(f"{run_dir} {what}: give run folders (results/runs/<profile>/...)")
    metrics = read_metrics(run_dir)
    if metrics is None:
        raise FruitError(f"{run_dir} has no metrics.json: only a finished run can be added to")
    if metrics.get("by_subject"):
        return metrics["by_subject"]
    if metrics.get("status") != "complete":
        raise FruitError(f"{run_dir} diverged: it has no generalization means to break down")
    try:
        run = load_run(run_dir, device="cpu", data_dir=data_dir)
    except FruitError as e:  # the explore API's advice names its argument; here, the option
        raise FruitError(str(e).replace("pass data_dir=", "give --data-dir DIR")) from None
    folder = Path(data_dir or run.config["data_dir"]) / run.config["task"]
    sizes = {split: run.config.get(field) for split, field in SPLIT_FIELDS.items()}
    data = read_task_data(folder, run.task, sizes)
    rows = by_subject(run.model, run.task, run.vocab, gen=data.gen, gen_linear=data.gen_linear)
    n = sum(r["n"] for r in rows)
    for kind, column in (("full", "FA"), ("partial", "PA")):
        for rule in ("hierarchical", "linear"):
            if f"{column} {rule}" not in rows[0]:
                continue
            pooled = sum(r["n"] * r[f"{column} {rule}"] for r in rows) / n
            recorded = metrics[kind][rule]
            if not math.isclose(pooled, recorded, rel_tol=MEANS_TOLERANCE, abs_tol=1e-12):
                raise FruitError(
                    f"{run_dir}: best.pt gives {kind} {rule} {pooled:.6g} but metrics.json "
                    f"records {recorded:.6g}; it is not this run's best.pt (or another data "
                    "folder): nothing written"
                )
    metrics["by_subject"] = rows
    metrics["by_subject_added"] = {"from": "best.pt", "commit": commit}
    atomic_write_json(run_dir / "metrics.json", metrics)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fruit.backfill",
        description="Add by_subject to finished runs' metrics.json, from their best.pt.",
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument("--data-dir", type=Path, help="the runs' data folder, if moved")
    args = parser.parse_args(argv)
    try:
        for run_dir in args.run_dirs:
            rows = add_by_subject(run_dir, args.data_dir)
            print(f"{run_dir}: {len(rows)} kinds of subject, {sum(r['n'] for r in rows)} sentences")
    except FruitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
