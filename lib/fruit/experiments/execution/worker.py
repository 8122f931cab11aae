"""What a Dask worker executes: one training run (or a report) through papermill.

(A task's data is made by ``fruit.training.prepare_data``, submitted as it is.)

These functions run on the workers (any machine sharing the file system), so they take
only plain, picklable arguments and absolute paths, and report failure by raising
``RunFailed`` with a message that names the run and its executed notebook.
"""

from __future__ import annotations

import datetime
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from fruit.experiments.execution.attempts import attempt_history, kept_notebook_name
from fruit.experiments.execution.deadlines import Deadlines
from fruit.experiments.planning.gpu_sharing import RUNS_PER_GPU_VARIABLE, gpu_count, gpu_of_worker
from fruit.io import (
    EXECUTED_NOTEBOOK,
    PAUSED_MARKER,
    RUNNER_LOG,
    WARNINGS_LOG,
    DamagedRecord,
    read_json_record,
    read_metrics,
    remove_leftovers,
)

# The kernel's own chatter (e.g. "running over TCP without encryption" on every start)
# would drown the progress display; the notebooks' outputs are unaffected. CRITICAL, not
# ERROR: jupyter_client interrupts every kernel before shutting it down, and one caught
# in a message handler logs "KeyboardInterrupt caught in kernel." at ERROR (after one in
# five runs of the claims campaign). A cell's error reaches papermill as the cell's
# outcome, not through this log.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]
# The kernel the sweep executes notebooks on, named rather than taken from the notebook's
# metadata (which names "fruit", the kernel JupyterLab opens them on): ipykernel's own
# "python3" is the Python of the environment the sweep runs in, wherever it runs.
KERNEL_NAME = "python3"
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# glibc reads its malloc tunables from MALLOC_* variables when a process starts. Dask's
# nanny gives every worker MALLOC_TRIM_THRESHOLD_=65536 (its "pre-spawn-environ"), and a
# kernel started by a worker inherits it: PyTorch's many short-lived buffers are then
# handed back to the kernel and faulted in again, which made every training run about
# twice as slow as the same run started alone (16.7 s system time instead of 0.44 s in a
# one-epoch run). So a run's kernel gets the malloc settings of the process that
# launched the sweep, not the worker's.
_ALLOCATOR_PREFIX = "MALLOC_"
# A run is not started when its stop_at is this close: starting a kernel, importing torch
# and reading the data take several seconds before the first batch.
RUN_START_SECONDS = 20.0


class RunFailed(Exception):
    """A run's notebook raised, or finished without writing metrics.json. ``final``: the
    notebook refused the run with one of fruit's own errors (bad settings, damaged or
    unwritable files), which another attempt would meet again."""

    def __init__(self, message: str, final: bool = False):
        super().__init__(message)
        self.final = final


class RunOutcome(tuple):
    """What ``execute_run`` returns: ``(metrics, seconds)`` (metrics None: paused or not
    started), ``job_ending``: the run stopped, or did not start, because the batch job of
    its worker is about to reach its walltime (not for the sweep's own reasons), so the
    sweep starts it again on another job; and ``progressed``: a paused run trained further
    in this attempt (a finished one always has)."""

    job_ending: bool = False
    progressed: bool = False

    @classmethod
    def of(
        cls,
        metrics: dict[str, Any] | None,
        seconds: float,
        job_ending: bool = False,
        progressed: bool | None = None,
    ):
        outcome = cls((metrics, seconds))
        outcome.job_ending = job_ending
        outcome.progressed = metrics is not None if progressed is None else progressed
        return outcome


def _paused_progress(folder: Path) -> bool:
    """Whether the attempt that just paused trained any batch (its pause marker holds
    where it resumed from and where it stopped)."""
    try:
        marker = read_json_record(folder / PAUSED_MARKER)
    except DamagedRecord:
        return False
    seen, start = (marker or {}).get("examples_seen"), (marker or {}).get("resumed_from")
    if not isinstance(seen, int) or not isinstance(start, int):
        return True  # a marker of an older fruit: take it to have moved on
    return seen > start


# fruit's errors (fruit.errors, fruit.io): a run's notebook raising one of these will
# raise it again on the next attempt
USER_ERRORS = ("FruitError", "StorageError", "DamagedRecord")


def _stamp() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def log_line(folder: Path, text: str) -> None:
    """Append one line to the run folder's runner.log (the runner's record of attempts)."""
    with open(folder / RUNNER_LOG, "a", encoding="utf-8") as f:
        f.write(f"{_stamp()} {text}\n")


def dask_setup(worker) -> None:
    """Dask's preload hook: a worker of ``fruit run``'s LocalCluster (which names this
    module as its ``preload``) ignores SIGINT from its start on.

    Ctrl-C in a terminal sends SIGINT to the whole foreground process group, and the
    LocalCluster's workers are in it. ``fruit run`` answers the first one by pausing the
    runs, and stops its workers itself; a worker that died of the signal (with a
    traceback) took its run with it and left the sweep waiting for ever."""
    ignore_interrupts()


def ignore_interrupts() -> None:
    """SIGINT ignored by this process (only the main thread may set a handler)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---------------------------------------------------------------------------
# Runs


def _worker_slot() -> int | None:
    """This worker's number (LocalCluster names workers 0, 1, ...; jobqueue 'Job-3-1')."""
    try:
        from distributed import get_worker

        name = str(get_worker().name)
    except (ImportError, ValueError):
        return None
    match = re.search(r"(\d+)$", name)
    return int(match.group(1)) if match else None


def _kernel_environment(threads: int | None, device: str) -> dict[str, str]:
    """Environment for the notebook kernel: torch threads, and exactly one GPU.

    A worker whose process sees several GPUs (a LocalCluster on a multi-GPU machine, or
    a jobqueue job holding several workers per GPU) keeps one of them: with ``k`` workers
    per GPU (``RUNS_PER_GPU_VARIABLE``, set by fruit run; 1 when unset), workers
    ``i*k .. i*k+k-1`` take GPU ``i`` (``fruit.experiments.planning.gpu_sharing.gpu_of_worker``).
    """
    env = {}
    if threads:
        env.update({v: str(threads) for v in _THREAD_VARIABLES})
    if device in ("auto", "cuda"):
        slot = _worker_slot()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = visible.split(",") if visible else [str(i) for i in range(gpu_count())]
        if slot is not None and len(gpus) > 1:
            per_gpu = os.environ.get(RUNS_PER_GPU_VARIABLE, "1")
            per_gpu = int(per_gpu) if per_gpu.isdigit() else 1
            env["CUDA_VISIBLE_DEVICES"] = gpu_of_worker(slot, gpus, per_gpu)
    return env


def _absolute_import_path() -> dict[str, str]:
    """PYTHONPATH with its relative entries made absolute against this worker's folder.
    The kernel runs in the notebook's folder, where ``PYTHONPATH=lib`` (a checkout run
    without installing it) would find no ``fruit``: every run failed with
    ModuleNotFoundError."""
    value = os.environ.get("PYTHONPATH")
    if not value:
        return {}
    return {"PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in value.split(os.pathsep))}


def allocator_environment() -> dict[str, str]:
    """This process's glibc malloc settings (its MALLOC_* variables): what the launching
    process passes to the workers for the kernels they start."""
    return {k: v for k, v in os.environ.items() if k.startswith(_ALLOCATOR_PREFIX)}


def _use_allocator_environment(allocator: dict[str, str] | None) -> None:
    """Make this worker's MALLOC_* variables exactly ``allocator`` (None: leave them), so
    the kernel it starts next allocates like a process started by the user."""
    if allocator is None:
        return
    for key in [k for k in os.environ if k.startswith(_ALLOCATOR_PREFIX)]:
        if key not in allocator:
            del os.environ[key]
    os.environ.update(allocator)


def execute_run(
    name: str,
    notebook: str,
    parameters: dict[str, Any],
    attempt: int,
    threads: int | None = None,
    allocator: dict[str, str] | None = None,
    stop_at: float | None = None,
    pause_file: str | None = None,
    walltime: float | None = None,
    evaluation: float | None = None,
) -> RunOutcome:
    """Execute the train notebook for one run into its folder; return its metrics.json
    and the seconds this attempt took (0 when the run was already finished).

    ``stop_at`` (a ``time.time()`` value, from ``fruit run --time-limit``): the run
    pauses before it (``fruit.training.Run.train``), or is not started when that time has
    passed; a paused run returns ``(None, seconds)`` and resumes on the next call.
    ``pause_file``: the same once that file exists (the sweep creates it when asked to
    stop), checked before the start and before every training batch. ``walltime``
    (seconds; the batch jobs' walltime of a jobqueue cluster): the run also pauses before
    the job this worker runs in ends (``Deadlines.of_job``, with ``evaluation``, the
    seconds its pair's final evaluation took, as for ``stop_at``); the sweep then starts
    it again on another job.

    The notebook resumes from ``checkpoint.pt`` when an earlier attempt left one (that is
    the training code's job; a damaged checkpoint makes the run start again from scratch
    within the same attempt, not fail and be retried, and its warning is noted here);
    this function records every attempt in ``runner.log`` and
    keeps the executed notebook of an earlier attempt as ``train.attempt-<k>.ipynb``.
    Attempts are numbered from ``runner.log`` (``fruit.experiments.execution.attempts``): across
    Dask's own retries and later calls; ``attempt`` (the sweep's count of this run's
    tries) is not what is logged. One that started and never ended is logged as lost.
    The kernel is started with ``JPY_PARENT_PID`` (by jupyter_client), so it exits by
    itself if this worker process dies: a killed worker leaves no orphan still writing.
    ``allocator`` is the launching process's ``allocator_environment()``: the kernel
    gets those malloc settings instead of the worker's (see ``_ALLOCATOR_PREFIX``).
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    folder = Path(parameters["run_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    earlier, lost_on = attempt_history(folder)
    executed = folder / EXECUTED_NOTEBOOK
    if lost_on is not None:  # its worker vanished mid-run: no line of its own says so
        kept = kept_notebook_name(folder, earlier)
        if executed.exists():
            executed.rename(kept)
        log_line(
            folder,
            f"attempt {earlier} lost: its worker {lost_on} ended during the run (a cancelled, "
            f"preempted or timed-out batch job, or a killed worker); notebook kept as "
            f"{kept.name}",
        )
    attempt = earlier + 1  # this attempt's number, if it starts
    done = read_metrics(folder)
    if done is not None:  # finished meanwhile, e.g. by an attempt Dask thought was lost
        log_line(folder, "metrics.json already present, nothing to do")
        return RunOutcome.of(done, 0.0)

    job_stop = None
    if walltime is not None:  # the job this worker runs in ends at its walltime
        from fruit.experiments.clusters.jobs import job_started

        job_stop = Deadlines.of_job(job_started(), walltime).stop_at_for(evaluation)
    if job_stop is not None and time.time() >= job_stop - RUN_START_SECONDS:
        log_line(folder, "not started here: this worker's batch job ends too soon (walltime)")
        return RunOutcome.of(None, 0.0, job_ending=True)
    if stop_at is not None and time.time() >= stop_at - RUN_START_SECONDS:
        log_line(folder, "not started: too close to the sweep's time limit")
        return RunOutcome.of(None, 0.0)
    if pause_file is not None and os.path.exists(pause_file):
        log_line(folder, "not started: the sweep was asked to pause")
        return RunOutcome.of(None, 0.0)
    by_job = job_stop is not None and (stop_at is None or job_stop < stop_at)
    if by_job:
        stop_at = job_stop

    for path in remove_leftovers(folder):  # half-written saves of a killed attempt
        log_line(folder, f"attempt {attempt}: removed {path.name}, left by an interrupted write")
    if executed.exists():  # keep the record of the interrupted or failed attempt
        executed.rename(kept_notebook_name(folder, earlier))
    resuming = (folder / "checkpoint.pt").is_file()
    warned = len(_warnings(folder))
    log_line(
        folder,
        f"attempt {attempt} started on {socket.gethostname()} (worker pid {os.getpid()}): "
        + ("resuming from checkpoint.pt" if resuming else "no checkpoint, starting fresh"),
    )

    # The kernel inherits os.environ when it starts. The values depend only on this
    # worker, so setting them for good (no restore) is safe with several threads.
    os.environ.update(_kernel_environment(threads, parameters.get("device", "auto")))
    os.environ.update(_absolute_import_path())
    _use_allocator_environment(allocator)
    start = time.monotonic()
    try:
        papermill.execute_notebook(
            notebook,
            str(executed),
            parameters={**parameters, "stop_at": stop_at, "pause_file": pause_file},
            progress_bar=False,
            kernel_name=KERNEL_NAME,
            extra_arguments=KERNEL_ARGUMENTS,
            cwd=str(folder),
        )
    except PapermillExecutionError as e:
        log_line(folder, f"attempt {attempt} failed: {e.ename}: {e.evalue}")
        raise RunFailed(
            f"{name}: {e.ename}: {e.evalue} (executed notebook: {executed})",
            final=e.ename in USER_ERRORS,
        ) from None
    except Exception as e:  # kernel died, notebook unreadable, ...
        log_line(folder, f"attempt {attempt} failed: {type(e).__name__}: {e}")
        raise RunFailed(
            f"{name}: {type(e).__name__}: {e} (executed notebook: {executed})"
        ) from None

    for line in _warnings(folder)[warned:]:  # e.g. a damaged checkpoint: the run restarted
        log_line(folder, f"attempt {attempt}: warning: {line}")
    metrics = read_metrics(folder)
    seconds = time.monotonic() - start
    if metrics is None and (folder / PAUSED_MARKER).is_file():
        log_line(
            folder,
            f"attempt {attempt} paused (time limit, walltime or pause request) after "
            f"{seconds:.0f} s",
        )
        asked = pause_file is not None and os.path.exists(pause_file)
        moved = _paused_progress(folder)
        return RunOutcome.of(None, seconds, job_ending=by_job and not asked, progressed=moved)
    if metrics is None:
        log_line(folder, f"attempt {attempt} failed: notebook finished without metrics.json")
        raise RunFailed(f"{name}: the notebook finished without writing metrics.json ({executed})")
    log_line(
        folder, f"attempt {attempt} finished in {seconds:.0f} s: status {metrics.get('status')}"
    )
    return RunOutcome.of(metrics, seconds)


def _warnings(folder: Path) -> list[str]:
    """The lines of the run folder's warnings.log (fruit.training writes it)."""
    try:
        return (folder / WARNINGS_LOG).read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return []


def execute_report(
    source: str,
    executed: str,
    parameters: dict[str, Any],
    allocator: dict[str, str] | None = None,
) -> str:
    """Execute a reporting notebook (tables, figures); returns the executed copy's path."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    os.environ.update(_absolute_import_path())
    _use_allocator_environment(allocator)
    Path(executed).parent.mkdir(parents=True, exist_ok=True)
    name = Path(source).stem
    try:
        papermill.execute_notebook(
            source,
            executed,
            parameters=parameters,
            progress_bar=False,
            kernel_name=KERNEL_NAME,
            extra_arguments=KERNEL_ARGUMENTS,
            cwd=str(Path(source).parent),
        )
    except PapermillExecutionError as e:
        raise RunFailed(
            f"the {name} notebook failed: {e.ename}: {e.evalue} (see {executed})"
        ) from None
    except Exception as e:  # kernel died, notebook unreadable, ...: one line, as for runs
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise RunFailed(
            f"the {name} notebook failed: {type(e).__name__}: {first} (see {executed})"
        ) from None
    return executed
