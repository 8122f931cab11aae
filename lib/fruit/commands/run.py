"""``fruit run``: an experiment profile end to end on Dask (data, search, final runs,
tables, figures). See fruit.experiments.execution.sweep and docs/cluster.md."""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import sys
import time
from pathlib import Path

from fruit.device import DEVICE_CHOICES
from fruit.errors import FruitError, check_split_size
from fruit.experiments.clusters.checks import check_options_take_effect, check_run_options
from fruit.experiments.options import RunOptions
from fruit.experiments.planning.gpu_sharing import check_gpu_options

# fruit run's exit status: every planned run finished (and the reports were made) 0; a
# run failed or a pair was skipped 1; bad input 2 (fruit.cli); paused with runs left (a
# time limit, SIGTERM, Ctrl-C, the PAUSE file), or the reports stopped by one, 75,
# EX_TEMPFAIL of sysexits.h: "try again", the same command goes on from there; stopped at
# once by a second signal 128 + its number, as a shell reports a command a signal ended:
# 130 (Ctrl-C), 143 (SIGTERM).
EXIT_PAUSED = 75
EXIT_STOPPED = 130  # 128 + SIGINT


class SecondSignal(KeyboardInterrupt):
    """A second SIGINT or SIGTERM while the first one pauses the sweep: stop at once (the
    cluster is closed on the way out); ``signum`` gives the exit status, 128 + it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# The shortest --time-limit: what a run needs to start under it. Under a limit T, a run
# whose pair has a recorded final evaluation must pause up to T/2 before the end (its
# evaluation's reserve) less the time to close down (at most 5 % of T, 5 s at least;
# fruit.experiments.execution.deadlines.Deadlines), and it is not started in the last
# RUN_START_SECONDS before that (fruit.experiments.execution.worker); the workers and the data check
# take up to about 20 s on a loaded two-core machine. At 2 minutes a run can still start
# 34 s in and train before it pauses; below that, a call could end having started nothing.
MIN_TIME_LIMIT = 120.0


def default_notebook() -> Path:
    """notebooks/train.ipynb of the current folder, else of the checkout fruit lives in."""
    here = Path.cwd() / "notebooks" / "train.ipynb"
    if here.is_file():
        return here
    import fruit

    return Path(fruit.__file__).resolve().parents[2] / "notebooks" / "train.ipynb"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from fruit.experiments.planning.gpu_rates import CARDS
    from fruit.profiles import profile_names

    parser.add_argument(
        "--profile",
        default="quick",
        help=f"a shipped profile ({', '.join(profile_names())}) or the path of your own .toml "
        "(default: quick)",
    )
    parser.add_argument("--results", default="results", help="results folder (default: results)")
    parser.add_argument(
        "--figures",
        help="figures folder (default: figures beside the results folder, so ./figures for "
        "the default results; a --results that is another folder here, e.g. results-try, "
        "gets results-try/figures: another --results, unless it is this folder itself, never "
        "overwrites ./figures)",
    )
    parser.add_argument("--data-dir", help="data folder (default: data/<profile>)")
    parser.add_argument("--notebook", help="the train notebook (default: notebooks/train.ipynb)")
    parser.add_argument("--device", default="auto", help=f"{DEVICE_CHOICES} (default: auto)")
    parser.add_argument(
        "--retries",
        type=int,
        default=2,
        help="retries of a failed run before it is reported (default: 2)",
    )
    parser.add_argument("--skip-reports", action="store_true", help="stop after the runs")
    parser.add_argument(
        "--time-limit",
        metavar="DURATION",
        help="end by itself before this much time (e.g. 2h, 90m, 1h30m, 600s; at least 2m, "
        "what a run needs to start): runs pause resumably, finished ones stay recorded, "
        "reports still running stop, and the same command goes on later (exit 75)",
    )
    parser.add_argument(
        "--task",
        action="append",
        metavar="TASK",
        help="train only this task's pairs of the profile (repeatable; default: all)",
    )
    parser.add_argument(
        "--architecture",
        action="append",
        metavar="ARCH",
        help="train only this architecture's pairs of the profile (repeatable; default: all)",
    )
    parser.add_argument(
        "--published",
        metavar="DIR",
        help="for profiles with published data: read DIR/<task>/{dev,test,gen}.tsv "
        "(default: $FRUIT_DATASETS, else download from the pinned commits)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the planned runs and exit")

    where = parser.add_argument_group("where the runs execute (default: a LocalCluster)")
    where.add_argument(
        "--workers",
        type=int,
        help="LocalCluster workers (default: cores / --threads, or GPUs x runs per GPU)",
    )
    where.add_argument(
        "--threads",
        type=int,
        help="torch threads per run (default: 1; with --cluster: the job's cores / runs per job)",
    )
    where.add_argument("--scheduler", metavar="ADDRESS", help="attach to a running Dask scheduler")
    where.add_argument(
        "--no-dashboard",
        dest="dashboard",
        action="store_false",
        help="no Dask dashboard (default: on when bokeh is installed; its link is printed)",
    )
    where.add_argument(
        "--cluster", choices=("slurm", "pbs", "sge"), help="start workers through dask-jobqueue"
    )
    where.add_argument("--jobs", type=int, help="jobqueue: number of jobs (default: 1)")
    where.add_argument("--cores", type=int, help="jobqueue: cores per job")
    where.add_argument("--memory", help="jobqueue: memory per job, e.g. 16GB")
    where.add_argument(
        "--walltime",
        help="jobqueue: walltime per job, e.g. 24:00:00 (default: the Dask config's "
        "jobqueue.<kind>.walltime, else 30 minutes); runs pause before it",
    )
    where.add_argument(
        "--gpus",
        type=int,
        help="jobqueue: GPUs per job, each shared by --runs-per-gpu runs (default: 0)",
    )
    where.add_argument(
        "--runs-per-gpu",
        type=int,
        metavar="K",
        help="runs sharing each GPU, each its own worker process (default: chosen by a "
        "model: CPU cores per GPU, GPU memory / 2 GiB, at most 64; docs/cluster.md)",
    )
    where.add_argument(
        "--gpu-card",
        metavar="CARD",
        help=f"--dry-run: GPU-hours on this card (recorded: {', '.join(CARDS)}; default: this "
        "machine's GPU, else every recorded card)",
    )
    where.add_argument("--queue", help="jobqueue: queue / partition")
    where.add_argument("--account", help="jobqueue: account / project")


def _per_architecture(values: dict) -> str:
    """A per-architecture setting ({"default": 5, ARCH: 10}) as "5" or "5, ARCH 10"."""
    shown = [str(values["default"])] if "default" in values else []
    shown += [f"{arch} {value}" for arch, value in values.items() if arch != "default"]
    return ", ".join(shown)


def _cluster(options: RunOptions):
    """The cluster the runs execute on: an existing scheduler, batch jobs or a LocalCluster."""
    from fruit.experiments.clusters import cluster as ec

    if options.scheduler:  # not with --cluster (check_options_take_effect)
        return ec.attach(
            options.scheduler, threads=options.threads or 1, dashboard=options.dashboard
        )
    if options.cluster:
        job = {k: getattr(options, k) for k in ("cores", "memory", "walltime")}
        job["gpus"] = options.gpus or 0
        job["gpu_runs"] = options.runs_per_gpu
        if options.queue:
            job["queue"] = options.queue
        if options.account:
            job["account"] = options.account
        return ec.connect_jobqueue(
            options.cluster,
            jobs=options.jobs or 1,
            threads=options.threads,
            dashboard=options.dashboard,
            **job,
        )
    return ec.local_cluster(
        workers=options.workers,
        threads=options.threads or 1,
        device=options.device,
        dashboard=options.dashboard,
        gpu_runs=options.runs_per_gpu,
    )


def check_counts(options: RunOptions) -> None:
    """One-line errors for counts that would leave the sweep waiting for ever."""
    for name, minimum in (("workers", 1), ("threads", 1), ("jobs", 1), ("cores", 1), ("gpus", 0)):
        value = getattr(options, name)
        if value is not None and value < minimum:
            what = "a positive integer" if minimum else "0 or more"
            raise FruitError(f"--{name} must be {what}, not {value}")
    if options.retries < 0:
        raise FruitError(f"--retries must be 0 or more, not {options.retries}")


def selected_pairs(profile, tasks, architectures):
    """The profile's (task, architecture) pairs that --task/--architecture keep (None: all)."""
    pairs = list(profile.pairs)
    for chosen, known, what in (
        (tasks, [t for t, _ in pairs], "task"),
        (architectures, [a for _, a in pairs], "architecture"),
    ):
        for name in chosen or ():
            if name not in known:
                raise FruitError(
                    f"{what} {name!r} is not in profile {profile.name}; its {what}s: "
                    f"{', '.join(dict.fromkeys(known))}"
                )
    if not tasks and not architectures:
        return None
    return tuple(
        (t, a)
        for t, a in pairs
        if (not tasks or t in tasks) and (not architectures or a in architectures)
    )


def parse_duration(text: str) -> float:
    """Seconds in '2h', '90m', '1h30m', '45s' or a plain number of seconds."""
    value = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        parts = re.fullmatch(
            r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", value
        )
        if not value or parts is None:
            raise FruitError(
                f"--time-limit {text!r} is not a duration; write e.g. 2h, 90m, 1h30m, 600s or 600"
            )
        h, m, sec = (float(x) if x else 0.0 for x in parts.groups())
        seconds = 3600 * h + 60 * m + sec
    if not seconds > 0:
        raise FruitError(f"--time-limit must be positive, not {text!r}")
    if seconds < MIN_TIME_LIMIT:
        raise FruitError(
            f"--time-limit {text!r} is too short for a run to start under it (the workers, "
            f"a run's kernel and the reserves for its evaluation and for closing down); give "
            f"at least {MIN_TIME_LIMIT / 60:g}m, e.g. 30m"
        )
    return seconds


def main(args: argparse.Namespace) -> int:
    from fruit.profiles import load_profile

    started = time.time()  # a time limit counts from here, cluster start-up included
    options = RunOptions.from_args(args)  # typed, the figures folder resolved
    from fruit.experiments.execution.worker import allocator_environment

    allocator = allocator_environment()  # before a Dask nanny adds its own to os.environ
    check_counts(options)
    time_limit = None if options.time_limit is None else parse_duration(options.time_limit)
    if options.published is not None and not Path(options.published).is_dir():
        raise FruitError(f"--published {options.published!r} is not a folder")
    profile = load_profile(options.profile)
    for split, size in profile.sizes.items():  # what each run will read (dev: every checkpoint)
        check_split_size(split, size)
    only = selected_pairs(profile, options.task, options.architecture)
    check_options_take_effect(options, profile)
    check_run_options(options)  # the device once, worker counts, writable folders, --notebook
    check_gpu_options(options)
    if options.dry_run:
        from fruit.experiments.clusters.capacity import dry_run_capacity
        from fruit.experiments.planning.cost import describe
        from fruit.experiments.planning.gpu_rates import dry_run_cards
        from fruit.experiments.planning.plan import search_specs

        pairs = list(only or profile.pairs)
        print(f"profile {profile.name} ({profile.source}): {profile.description}")
        sizes = ", ".join(f"{split} {size:,}" for split, size in profile.sizes.items())
        print(
            f"data: {profile.data_source} dev/test/gen, sizes {sizes}, data seed {profile.data_seed}"
        )
        for task, arch in pairs:
            for s in search_specs(profile, task, arch):
                print(f"  {s.name}: seed {s.seed}, B {s.batch_tokens}, lr {s.learning_rate:.3g}")
        print(
            f"{len(pairs) * profile.search_trials} search runs + {len(pairs) * profile.final_runs} "
            f"final runs (max epochs: search {_per_architecture(profile.search_max_epochs)}, "
            f"final {_per_architecture(profile.final_max_epochs)})"
        )
        capacity = dry_run_capacity(options)  # as --cluster/--jobs/--cores/--gpus would start
        if capacity.walltime is not None:
            given = (
                "--walltime"
                if options.walltime
                else "not given: the Dask config's, else 30 minutes"
            )
            print(
                f"walltime per job: {capacity.walltime / 3600:.2f} h ({given}); runs pause before "
                "it and go on in a fresh job (docs/cluster.md)"
            )
        print(
            describe(
                profile,
                workers=capacity.runs,
                pairs=pairs,
                results_dir=options.results,
                gpu_cards=dry_run_cards(options.gpu_card),
                runs_per_gpu=options.runs_per_gpu,
                where=capacity.where,
                gpus=capacity.gpus,
            )
        )
        return 0

    cluster = _cluster(options)
    note = cluster.dashboard_note()
    if note:
        print(note, flush=True)
    try:
        return _sweep(options, profile, cluster, time_limit, started, only, allocator)
    except KeyboardInterrupt as e:  # a second signal (the first pauses): cluster closed
        signum = getattr(e, "signum", EXIT_STOPPED - 128)
        print(
            f"fruit: stopped at once by a second {signal.Signals(signum).name}; the same "
            "command goes on, each unfinished run from its last checkpoint",
            file=sys.stderr,
        )
        return 128 + signum


def _sweep(options, profile, cluster, time_limit, started, only, allocator) -> int:
    """The sweep on ``cluster`` (closed at the end, whatever happens); its exit status."""
    from fruit.experiments.execution.sweep import Sweep

    try:
        sweep = Sweep(
            profile,
            cluster,
            results_dir=options.results,
            data_dir=options.data_dir,
            notebook=options.notebook or default_notebook(),
            device=options.device,
            retries=options.retries,
            reports=not options.skip_reports,
            published_dir=options.published,
            figures_dir=options.figures,
            time_limit=_time_left(time_limit, started),
            only=only,
            allocator=allocator,
            stream=sys.stdout,
        )
        with _pause_on_sigterm(sweep):
            result = sweep.run()
    finally:
        cluster.close()
    if result.stalled and result.reports_out_of_time:
        print(
            f"fruit: error: every run is recorded, but the reports did not finish under "
            f"--time-limit {options.time_limit}: the same command would end the same way; give a "
            f"longer --time-limit, or make them with fruit report (as the line above says)",
            file=sys.stderr,
        )
    elif result.stalled:
        ready = None if sweep.ready_at is None else sweep.ready_at - started
        print(stalled_message(options.time_limit, ready), file=sys.stderr)
    return exit_status(result)


def _time_left(time_limit: float | None, started: float) -> float | None:
    """What is left of ``time_limit`` after the start-up; where a loaded machine took all
    of it, a moment, so that the sweep ends at once as a time limit ends it (no run
    starts, exit status ``EXIT_PAUSED``) instead of refusing a negative limit."""
    if time_limit is None:
        return None
    return max(time_limit - (time.time() - started), 1e-3)


def exit_status(result) -> int:
    """0 finished, 1 a run failed or a pair was skipped, ``EXIT_PAUSED`` runs left, 2 (bad
    input: the time limit) when runs are left and nothing moved on under the limit, so
    that the same command would end the same way again."""
    if not result.ok:
        return 1
    if result.stalled:
        return 2
    return 0 if result.complete and not result.reports_stopped else EXIT_PAUSED


def stalled_message(time_limit: str, startup: float | None) -> str:
    """The one line of a call that started, advanced and finished nothing under its
    time limit (``SweepResult.stalled``); ``startup``: seconds until the data was ready
    (None: it never was)."""
    from fruit.experiments.execution.worker import RUN_START_SECONDS

    took = (
        "the limit ended before the data was ready"
        if startup is None
        else (f"the workers and the data were ready after {startup:.0f} s")
    )
    return (
        f"fruit: error: no run could start, move on or finish under --time-limit {time_limit} "
        f"({took}; a run starts only up to {RUN_START_SECONDS:g} s before it must pause, "
        f"which is its evaluation's reserve and the closing down before the limit): the same "
        f"command would end the same way; give a longer --time-limit"
    )


@contextlib.contextmanager
def _pause_on_sigterm(sweep):
    """SIGTERM (``kill PID``; Slurm sends it before a job's time limit) or SIGINT (Ctrl-C)
    pauses the sweep as a time limit does: no run starts, running ones pause resumably
    before their next batch, finished ones stay recorded. A second signal ends the
    command at once (runs then resume from their last checkpoint)."""
    signals = (signal.SIGTERM, signal.SIGINT)

    def pause(signum, frame):
        for s in signals:
            signal.signal(s, stop)
        name = signal.Signals(signum).name
        if sweep.stage == "reports":  # every run is recorded: the reports stop
            print(f"{name}: stopping the reports (a second {name} stops at once)", flush=True)
            sweep.stop_reports()
            return
        print(f"{name}: pausing every run (a second {name} stops at once)", flush=True)
        sweep.request_pause()

    def stop(signum, frame):
        for s, handler in zip(signals, previous):  # a third one: as without fruit
            signal.signal(s, handler)
        raise SecondSignal(signum)

    previous = [signal.signal(s, pause) for s in signals]
    try:
        yield
    finally:
        for s, handler in zip(signals, previous):
            signal.signal(s, handler)
