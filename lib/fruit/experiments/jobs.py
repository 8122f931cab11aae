"""Batch jobs' walltime: what ``--walltime`` (or the Dask config's ``jobqueue.<kind>.walltime``)
means in seconds, and, on a worker, when the job it runs in started (so that a run pauses
before the job ends: ``fruit.experiments.deadlines.Deadlines.of_job``).

A worker learns its job's start from its own process tree: the oldest ancestor that
belongs to the same job (the same ``SLURM_JOB_ID``, ``PBS_JOBID`` or ``JOB_ID``), which is
the job's batch shell. Outside a job that is the worker process itself (a safe answer: a
later start means an earlier pause, never a later one).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from fruit.errors import FruitError

# What each kind of batch system names its job in the job's environment.
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "JOB_ID")
# dask-jobqueue's own default walltime, when neither --walltime nor the config gives one
JOBQUEUE_DEFAULT_WALLTIME = "00:30:00"


def walltime_seconds(kind: str, walltime: str | int | None) -> float | None:
    """Seconds of a batch walltime: Slurm's ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``,
    ``D-HH:MM``, ``D-HH:MM:SS``; PBS's and SGE's ``[[HH:]MM:]SS``. None stays None; a
    value of another form is bad input (one line)."""
    if walltime is None:
        return None
    text = str(walltime).strip()
    match = re.fullmatch(r"(?:(\d+)-)?(\d+(?::\d+){0,2})", text)
    if not match:
        raise FruitError(
            f"--walltime {text!r} is not a walltime; write e.g. 24:00:00 (hours:minutes:"
            "seconds), as the batch system takes it"
        )
    days = int(match.group(1) or 0)
    parts = [int(p) for p in match.group(2).split(":")]
    if match.group(1):  # D-HH[:MM[:SS]]
        parts += [0] * (3 - len(parts))
        h, m, s = parts
    elif kind == "slurm" and len(parts) == 1:  # Slurm: a bare number is minutes
        h, m, s = 0, parts[0], 0
    else:
        h, m, s = [0] * (3 - len(parts)) + parts
    seconds = float(86400 * days + 3600 * h + 60 * m + s)
    if seconds <= 0:
        raise FruitError(f"--walltime {text!r} must be longer than nothing; e.g. 24:00:00")
    return seconds


def job_started(pid: int | None = None) -> float:
    """When the batch job this process runs in started (``time.time()`` seconds): the
    start of its oldest ancestor in the same job; outside a job, this process's start."""
    import psutil

    proc = psutil.Process(pid)
    started = proc.create_time()
    variable = next((v for v in JOB_ID_VARIABLES if os.environ.get(v)), None)
    if variable is None:
        return started
    job = os.environ[variable]
    try:
        for parent in proc.parents():
            if parent.environ().get(variable) != job:
                break
            started = min(started, parent.create_time())
    except (psutil.Error, OSError):  # another user's process, or one that just ended
        pass
    return started


def _close(dask_worker) -> None:
    """On a worker (``Client.run``): close it and its nanny, right after this returns."""
    dask_worker.loop.add_callback(
        dask_worker.close, reason="its batch job is about to reach its walltime"
    )


def retire_worker_of(client: Any, future: Any, wait: float = 10.0) -> None:
    """Close the worker that ran ``future`` (a run that stopped, or would not start,
    because the worker's job nears its walltime): its job ends early, and the cluster
    submits a fresh job in its place, instead of the sweep sending runs to a worker that
    cannot take them. The future is released first, so that Dask does not recompute it
    when its result goes with the worker; returns once the scheduler has let the worker
    go (at most ``wait`` seconds), so that no run is sent to it meanwhile."""
    try:
        holders = list(client.who_has([future]).get(future.key, ()))
    except Exception:  # noqa: BLE001 - the job ends at its walltime anyway
        holders = []
    future.release()
    if not holders:
        return
    try:
        client.run(_close, workers=holders)
    except Exception:  # noqa: BLE001 - its answer may be cut off by the close itself
        pass
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if not set(holders) & set(client.scheduler_info(n_workers=-1)["workers"]):
                return
        except Exception:  # noqa: BLE001 - asked again
            pass
        time.sleep(0.2)
