"""``fruit run``: an experiment profile end to end on Dask (data, search, final runs,
tables, figures). See fruit.experiments_sweep and docs/cluster.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fruit.errors import FruitError


def default_notebook() -> Path:
    """notebooks/train.ipynb of the current folder, else of the checkout fruit lives in."""
    here = Path.cwd() / "notebooks" / "train.ipynb"
    if here.is_file():
        return here
    import fruit

    return Path(fruit.__file__).resolve().parents[2] / "notebooks" / "train.ipynb"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile",
        default="quick",
        help="a shipped profile (smoke, quick, paper) or the path of your own .toml (default: quick)",
    )
    parser.add_argument("--results", default="results", help="results folder (default: results)")
    parser.add_argument("--data-dir", help="data folder (default: data/<profile>)")
    parser.add_argument("--notebook", help="the train notebook (default: notebooks/train.ipynb)")
    parser.add_argument(
        "--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)"
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=2,
        help="retries of a failed run before it is reported (default: 2)",
    )
    parser.add_argument("--skip-reports", action="store_true", help="stop after the runs")
    parser.add_argument("--dry-run", action="store_true", help="print the planned runs and exit")

    where = parser.add_argument_group("where the runs execute (default: a LocalCluster)")
    where.add_argument(
        "--workers", type=int, help="LocalCluster workers (default: cores / --threads, or GPUs)"
    )
    where.add_argument(
        "--threads",
        type=int,
        help="torch threads per run (default: 1; with --cluster: the job's cores / runs per job)",
    )
    where.add_argument("--scheduler", metavar="ADDRESS", help="attach to a running Dask scheduler")
    where.add_argument(
        "--cluster", choices=("slurm", "pbs", "sge"), help="start workers through dask-jobqueue"
    )
    where.add_argument("--jobs", type=int, default=1, help="jobqueue: number of jobs (default: 1)")
    where.add_argument("--cores", type=int, help="jobqueue: cores per job")
    where.add_argument("--memory", help="jobqueue: memory per job, e.g. 16GB")
    where.add_argument("--walltime", help="jobqueue: walltime per job, e.g. 24:00:00")
    where.add_argument("--gpus", type=int, default=0, help="jobqueue: GPUs per job, one run each")
    where.add_argument("--queue", help="jobqueue: queue / partition")
    where.add_argument("--account", help="jobqueue: account / project")


def _cluster(args):
    from fruit import experiments_cluster as ec

    if args.scheduler and args.cluster:
        raise FruitError("give either --scheduler or --cluster, not both")
    if args.scheduler:
        return ec.attach(args.scheduler, threads=args.threads or 1)
    if args.cluster:
        options = {k: getattr(args, k) for k in ("cores", "memory", "walltime", "gpus")}
        if args.queue:
            options["queue"] = args.queue
        if args.account:
            options["account"] = args.account
        return ec.connect_jobqueue(args.cluster, jobs=args.jobs, threads=args.threads, **options)
    return ec.local_cluster(workers=args.workers, threads=args.threads or 1, device=args.device)


def check_counts(args: argparse.Namespace) -> None:
    """One-line errors for counts that would leave the sweep waiting for ever."""
    for name, minimum in (("workers", 1), ("threads", 1), ("jobs", 1), ("cores", 1), ("gpus", 0)):
        value = getattr(args, name)
        if value is not None and value < minimum:
            what = "a positive integer" if minimum else "0 or more"
            raise FruitError(f"--{name} must be {what}, not {value}")
    if args.retries < 0:
        raise FruitError(f"--retries must be 0 or more, not {args.retries}")


def main(args: argparse.Namespace) -> int:
    from fruit.experiments import groups
    from fruit.profiles import load_profile

    check_counts(args)
    profile = load_profile(args.profile)
    if args.dry_run:
        from fruit.experiments import search_specs

        n_groups = len(groups(profile))
        print(f"profile {profile.name} ({profile.source}): {profile.description}")
        print(f"data sizes {profile.sizes}, data seed {profile.data_seed}")
        for task, arch in groups(profile):
            for s in search_specs(profile, task, arch):
                print(f"  {s.name}: seed {s.seed}, B {s.batch_tokens}, lr {s.learning_rate:.3g}")
        print(
            f"{n_groups * profile.search_trials} search runs + {n_groups * profile.final_runs} "
            f"final runs (max epochs: search {profile.search_max_epochs}, final {profile.final_max_epochs})"
        )
        return 0

    from fruit.experiments_sweep import Sweep

    cluster = _cluster(args)
    try:
        sweep = Sweep(
            profile,
            cluster,
            results_dir=args.results,
            data_dir=args.data_dir,
            notebook=args.notebook or default_notebook(),
            device=args.device,
            retries=args.retries,
            reports=not args.skip_reports,
            stream=sys.stdout,
        )
        result = sweep.run()
    finally:
        cluster.close()
    return 0 if result.ok else 1
