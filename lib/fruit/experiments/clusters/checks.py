"""``fruit run``'s checks before any cluster starts (docs/architecture.md §4): the device,
the worker counts' upper bounds, and folders the sweep must write.

One call, ``check_run_options(options)`` (a ``RunOptions``), before the cluster starts:
a bad value is a one-line FruitError naming it and the valid choices, instead of every
run failing (and being retried) on the workers with the same error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fruit.device import check_device
from fruit.errors import FruitError, StorageError, check_integer
from fruit.experiments.options import RunOptions
from fruit.io import check_folder, check_outside_records, disk_full

# A LocalCluster of more workers than this many per CPU core only thrashes (each worker
# is a process that starts notebook kernels).
WORKERS_PER_CORE = 4
# The notebook the sweep executes after the runs, found beside the train notebook.
REPORT_NOTEBOOK = "report"


def check_run_options(options: RunOptions) -> None:
    """The options of ``fruit run`` that the command line cannot check by itself.

    * ``--device``: spelled right always; present on this machine when the runs execute
      here (a LocalCluster); with ``--scheduler``/``--cluster`` the workers may have GPUs
      this machine lacks, so only the spelling is checked;
    * ``--workers`` (at most ``WORKERS_PER_CORE`` per CPU core) and ``--threads``;
    * ``--notebook``, when given, is a notebook, with report.ipynb beside it unless
      ``--skip-reports`` (or ``--dry-run``);
    * with ``--cluster``, the jobs' walltime (``--walltime``, else the Dask config's):
      a walltime and long enough to train; ``--memory`` an amount of memory;
    * the results folder (and the figures folder, unless ``--skip-reports``) can be
      written; with ``--dry-run``, only that neither is a file; the figures folder is
      not inside the run records.
    """
    local = options.local
    check_device(options.device, syntax_only=not local)
    cores = os.cpu_count() or 1
    if local and options.workers is not None:
        check_integer("--workers", options.workers, 1, WORKERS_PER_CORE * cores)
    if options.threads is not None:
        check_integer("--threads", options.threads, 1, max(cores, 1) * WORKERS_PER_CORE)
    if options.data_dir:
        check_folder(options.data_dir, "--data-dir")
    if options.cluster:
        from fruit.experiments.clusters.cluster import check_job_memory, job_walltime

        job_walltime(options.cluster, options.walltime)  # one line if bad
        check_job_memory(options.memory)
    notebook = options.notebook
    if notebook and not Path(notebook).is_file():
        raise FruitError(f"--notebook {notebook!r}: no such notebook file")
    if notebook:
        check_notebook(notebook, "--notebook")
        report = Path(notebook).with_name(f"{REPORT_NOTEBOOK}.ipynb")  # run after the runs
        runs_reports = not (options.skip_reports or options.dry_run)
        if runs_reports and not report.is_file():
            raise FruitError(
                f"--notebook {notebook!r}: no {report.name} beside it for the reports after "
                f"the runs; put one there (notebooks/{report.name}) or add --skip-reports"
            )
    if not options.skip_reports:  # the reports' figures: a folder outside the records
        check_folder(options.figures, "--figures")
        check_outside_records(options.figures, "--figures", options.results)
    if options.dry_run:  # writes nothing, but reads the run records there
        results = Path(options.results)
        if results.exists() and not results.is_dir():
            raise FruitError(f"--results {options.results!r} is not a folder")
        return
    folders = [Path(options.results)]
    if not options.skip_reports:
        folders.append(Path(options.figures))
    for folder in folders:
        check_writable(folder)


# The options that size dask-jobqueue's batch jobs: without --cluster they do nothing.
JOBQUEUE_OPTIONS = ("jobs", "cores", "memory", "walltime", "gpus", "queue", "account")


def check_options_take_effect(options: RunOptions, profile) -> None:
    """A one-line FruitError for an option that the other options given make do nothing
    (the user meant something that would not happen): the batch-job options without
    ``--cluster``, ``--workers`` with a cluster that is not started here, and
    ``--published`` for a profile that generates its data."""
    if not options.cluster:
        given = [f"--{name}" for name in JOBQUEUE_OPTIONS if getattr(options, name) is not None]
        if given:
            one = len(given) == 1
            raise FruitError(
                f"{' '.join(given)} {'sizes' if one else 'size'} the batch jobs of --cluster "
                f"slurm|pbs|sge and {'does' if one else 'do'} nothing without it; add "
                f"--cluster, or leave {'it' if one else 'them'} out"
            )
    elif options.workers is not None:
        raise FruitError(
            "--workers sizes the LocalCluster on this machine and does nothing with "
            "--cluster; use --jobs and --gpus there"
        )
    if options.scheduler and options.cluster:
        raise FruitError(
            "--scheduler (a running Dask cluster) and --cluster (one started here) "
            "exclude each other; give one of them"
        )
    if options.scheduler and options.workers is not None:
        raise FruitError(
            "--workers sizes the LocalCluster on this machine and does nothing with "
            "--scheduler (that cluster's workers run the runs); leave it out"
        )
    if options.published is not None and profile.data_source != "published":
        raise FruitError(
            f"--published reads published dev/test/gen files, but profile {profile.name} "
            f'generates its data ([data] source = "{profile.data_source}"); leave '
            '--published out, or use a profile with source = "published"'
        )


def check_writable(folder: Path) -> None:
    """``folder`` (or the nearest existing folder above it, where it will be made) can be
    written: a one-line ``StorageError`` naming it for a read-only file system, a folder
    without write permission, or a full disk."""
    existing = Path(folder).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise StorageError(f"cannot write {folder}: {existing} is not a folder")
    reason = None
    if _read_only(existing):
        reason = "Read-only file system"
    elif not os.access(existing, os.W_OK | os.X_OK):
        reason = "Permission denied"
    elif disk_full(existing):
        reason = "No space left on device"
    if reason:
        where = folder if existing == Path(folder).absolute() else f"{folder} (in {existing})"
        raise StorageError(f"cannot write {where}: {reason}")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows)
        return False


def check_notebook(path: str, option: str) -> None:
    """``path`` is a Jupyter notebook that papermill can give parameters to (a cell tagged
    "parameters"): said before any worker starts, not by every run failing."""
    try:
        notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        why = getattr(e, "strerror", None) or type(e).__name__
        raise FruitError(f"{option} {path}: not a Jupyter notebook ({why})") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise FruitError(f"{option} {path}: not a Jupyter notebook (no cells)")
    tagged = any(
        "parameters" in ((c.get("metadata") or {}).get("tags") or [])
        for c in cells
        if isinstance(c, dict)
    )
    if not tagged:
        raise FruitError(
            f"{option} {path}: no cell tagged 'parameters', so papermill cannot give a run "
            "its settings; tag the cell of defaults (as notebooks/train.ipynb does)"
        )
