"""Batch jobs' walltime: what ``--walltime`` (or the Dask config's ``jobqueue.<kind>.walltime``)
means in seconds, and, on a worker, when the job it runs in started (so that a run pauses
before the job ends: ``fruit.experiments.execution.deadlines.Deadlines.of_job``).

A worker learns its job's start from its own process tree: the oldest ancestor that
belongs to the same job (the same ``SLURM_JOB_ID``, ``PBS_JOBID`` or ``JOB_ID``), which is
the job's batch shell. Outside a job that is the worker process itself (a safe answer: a
later start means an earlier pause, never a later one).

And, on the machine that runs ``fruit run --cluster``, what becomes of the jobs'
submissions (``TrackedJob``, ``Submissions``): the submit command's own message in one
line, a refusal for good (no such partition or account, a request no node can satisfy)
told apart from a failure that passes (the controller unreachable), which is tried again
after a growing delay, a failed submission that never blocks the next; and why jobs
submitted give no worker (``QueueWatch``: squeue's state and reason, and the reasons that
never clear). docs/cluster.md, "When jobs are refused or do not start".
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

from fruit.errors import FruitError

# What each kind of batch system names its job in the job's environment.
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "JOB_ID")
# dask-jobqueue's own default walltime, when neither --walltime nor the config gives one
JOBQUEUE_DEFAULT_WALLTIME = "00:30:00"
# The shortest walltime a job can train under: its worker's and a run's start, the reserves
# for the final evaluation and for closing (docs/cluster.md); what `--time-limit` asks too.
MIN_JOB_WALLTIME = 120.0


def walltime_seconds(kind: str, walltime: str | int | None) -> float | None:
    """Seconds of a batch walltime: Slurm's ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``,
    ``D-HH:MM``, ``D-HH:MM:SS``; PBS's and SGE's ``[[HH:]MM:]SS``. None stays None; a
    value of another form, or one under ``MIN_JOB_WALLTIME`` (jobs that could not train
    would be replaced for ever), is bad input (one line)."""
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
    if seconds < MIN_JOB_WALLTIME:
        raise FruitError(
            f"walltime {text!r} is {seconds:g} s, too short for a job to train (its worker's "
            f"and a run's start, the reserves to evaluate and close); give --walltime at "
            f"least {MIN_JOB_WALLTIME / 60:g} minutes, e.g. 24:00:00"
        )
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


# ---------------------------------------------------------------------------
# Submitting the jobs, and why they do not start (docs/cluster.md, "When jobs are refused
# or do not start")

SUBMIT_COMMANDS = {"slurm": "sbatch", "pbs": "qsub", "sge": "qsub"}
# How long a submit command may take before it counts as a failed try (the controller
# unreachable over a network that drops packets: sbatch would otherwise wait on its own
# time-outs while the cluster's other changes wait behind it).
SUBMIT_TIMEOUT = 60.0
# Seconds between the tries after a failed submission: doubled from the first, at most the
# last (a controller down for minutes gets a try a minute).
RETRY_FIRST, RETRY_MOST = 5.0, 60.0

# What the submit command says when it refuses the request itself, so that no later try
# can succeed (sbatch's messages from Slurm's slurm_errno.c, qsub's of PBS and SGE), each
# with what to change. Anything else (the controller unreachable, busy, timing out) is
# taken as passing and tried again.
_SLURM_NODES = (
    "`sinfo -o '%P %c %m %G %l'` lists each partition's CPUs, memory (MB), GPUs, time limit"
)
REFUSALS = [
    (("invalid partition", "no partition specified", "user's group not permitted to use this partition"),
     "--queue (or jobqueue.{kind}.queue) must name a partition you may use: `sinfo -s` lists them"),
    (("invalid account", "invalid qos", "access/permission denied", "unauthorized request"),
     "--account (or jobqueue.{kind}.account) must name an account you may charge"),
    (("requested node configuration is not available", "can not be satisfied",
      "more processors requested than permitted", "invalid generic resource",
      "invalid trackable resource", "node count specification invalid",
      "invalid feature specification"),
     "ask for no more than one node has (--cores, --memory, --gpus); " + _SLURM_NODES),
    (("requested time limit is invalid",),
     "--walltime must be within the partition's limit; " + _SLURM_NODES),
    (("unknown queue", "requests unknown queue", "no suitable queues"),
     "--queue (or jobqueue.{kind}.queue) must name a queue: `qstat -Q` lists them"),
    (("exceeds queue resource limits", "violates queue and/or server resource limits",
      "illegal attribute or resource value", "unknown resource"),
     "ask for no more than the queue allows (--cores, --memory, --gpus, --walltime): "
     "`qstat -Qf` lists its limits"),
]  # fmt: skip


def submission_message(command: str, said: str) -> str:
    """A submit command's output as one line: its lines joined, without the repeated
    ``sbatch: error:`` prefix (``sbatch: invalid partition specified: x; Batch job
    submission failed: Invalid partition name specified``)."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    for prefix in (f"{command}: error:", f"{command}:", "error:"):
        lines = [line[len(prefix) :].strip() if line.startswith(prefix) else line for line in lines]
    return f"{command}: {'; '.join(lines) or 'no message'}"


def refusal_hint(kind: str, message: str) -> str | None:
    """What to change when ``message`` (the submit command's) refuses the request for
    good; None when another try may succeed."""
    text = message.lower()
    for patterns, hint in REFUSALS:
        if any(p in text for p in patterns):
            return hint.format(kind=kind)
    return None


def retry_delay(failures: int) -> float:
    """Seconds before the next try after ``failures`` failed ones in a row."""
    return min(RETRY_FIRST * 2 ** max(failures - 1, 0), RETRY_MOST)


class Submissions:
    """What the submissions of one jobqueue cluster's jobs gave: job IDs, failed tries in
    a row, a refusal for good, and the lines the sweep is to say about them. Written by
    the cluster's event loop (``TrackedJob``), read by the sweep's thread
    (``fruit.experiments.execution.watch``)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.command = SUBMIT_COMMANDS[kind]
        self._changed = threading.Condition()
        self.tries = 0  # submissions that ended, either way
        self.jobs: list[str] = []  # every job ID, in order
        self.live: list[str] = []  # those not yet cancelled by the cluster
        self.failures = 0  # failed tries since the last job submitted
        self.last_failure: str | None = None
        self.refused: str | None = None  # a refusal for good, in one line with what to change
        self._news: list[str] = []

    def submitted(self, job_id: str) -> None:
        with self._changed:
            if self.failures:
                self._news.append(
                    f"{self.command} answered again: job {job_id} submitted after "
                    f"{self.failures} failed tr{'y' if self.failures == 1 else 'ies'}"
                )
            self.tries += 1
            self.jobs.append(job_id)
            self.live.append(job_id)
            self.failures, self.refused = 0, None
            self._changed.notify_all()

    def failed(self, message: str, hint: str | None) -> float:
        """A failed try (``hint``: what to change, for a refusal for good); returns the
        seconds before the next."""
        with self._changed:
            self.tries += 1
            self.failures += 1
            self.last_failure = message
            delay = retry_delay(self.failures)
            if hint:
                self.refused = f"{message}; {hint}"
                self._news.append(
                    f"{self.command} refused a job: {self.refused} (a new try in {delay:.0f} s)"
                )
            else:
                self._news.append(
                    f"{self.command} failed ({message}); a new try in {delay:.0f} s "
                    f"(failed try {self.failures} in a row)"
                )
            self._changed.notify_all()
            return delay

    def closed(self, job_id: str | None) -> None:
        with self._changed:
            if job_id in self.live:
                self.live.remove(job_id)

    def news(self) -> list[str]:
        """The lines not yet said (each once)."""
        with self._changed:
            lines, self._news = self._news, []
            return lines

    def wait_for_tries(self, tries: int, timeout: float) -> bool:
        """Wait until ``tries`` submissions have ended (True) or ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self.tries >= tries, timeout)


class TrackedJob:
    """Mixed into a dask-jobqueue ``Job`` class (``tracked_job_class``): its submission
    reports to the cluster's ``Submissions`` instead of raising. A failed submission
    leaves the job ``failed`` (dask-jobqueue would leave it "created" without a job ID,
    counted as the cluster's job for ever, so that neither it nor a lost job was ever
    replaced, and would log the submit command's output in a traceback); after the
    retry delay the job is dropped from the cluster, whose adaptive scaling (minimum =
    maximum = --jobs) then submits a new one in its place within a second."""

    submissions: Submissions  # one per cluster: set on the class tracked_job_class makes

    def __await__(self):
        """As ``ProcessInterface.__await__``, without its check that the start ended
        running: a failed submission is a state here, not an error."""
        from distributed.core import Status

        async def started():
            async with self.lock:
                if self.status == Status.created:
                    await self.start()
            return self

        return started().__await__()

    async def start(self) -> None:
        import asyncio

        from distributed.core import Status

        try:
            await super().start()
        except _Refused as e:
            message, hint = e.args
        except ValueError as e:  # dask-jobqueue found no job ID in the output
            said = str(e).split("output is:", 1)[-1]
            message = f"{submission_message(self.submissions.command, said)} (no job ID in it)"
            hint = f"jobqueue.{self.submissions.kind}.submit-command must print a job ID"
        else:
            self.submissions.submitted(self.job_id)
            return
        self.status = Status.failed
        delay = self.submissions.failed(message, hint)
        asyncio.get_running_loop().call_later(delay, self._forget)

    async def _submit_job(self, script_filename: str) -> str:
        """The submit command on the script (dask-jobqueue's, with a time limit); its
        output, or ``_Refused`` with its message in one line and, for a refusal for
        good, what to change."""
        import asyncio
        import shlex

        command = [*shlex.split(self.submit_command), script_filename]
        name = self.submissions.command
        try:
            proc = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
        except OSError as e:
            raise _Refused(f"{name} could not be started: {e}", None) from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), SUBMIT_TIMEOUT)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise _Refused(f"{name} did not answer within {SUBMIT_TIMEOUT:.0f} s", None) from None
        out, err = out.decode(errors="replace"), err.decode(errors="replace")
        if proc.returncode != 0:
            message = submission_message(name, err or out)
            raise _Refused(message, refusal_hint(self.submissions.kind, message))
        return out

    def _forget(self) -> None:
        """Drop this failed job from its cluster: a new job takes its place."""
        from distributed.core import Status

        cluster = self._cluster() if getattr(self, "_cluster", None) else None
        if cluster is None or cluster.status != Status.running:
            return
        for name, job in list(cluster.workers.items()):
            if job is self:
                del cluster.workers[name]

    async def close(self) -> None:
        await super().close()
        self.submissions.closed(self.job_id)


class _Refused(Exception):
    """A submission that failed: (its message in one line, what to change or None)."""


def tracked_job_class(job_class: type, submissions: Submissions) -> type:
    """``job_class`` (dask-jobqueue's, e.g. SLURMJob) reporting to ``submissions``."""
    return type(job_class.__name__, (TrackedJob, job_class), {"submissions": submissions})


# Slurm's reasons for a pending job that no wait clears (squeue's %r; Slurm's "Job Reason
# Codes"): the request exceeds what its partition, account or QOS allows a job.
NEVER_CLEARS = ("PartitionConfig", "PartitionTimeLimit", "BadConstraints", "InvalidAccount",
                "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed")  # fmt: skip
NEVER_CLEARS_PATTERN = re.compile(r"(QOS|Assoc)Max\w*Per(Job|Node)\w*")


def never_clears(reason: str) -> bool:
    return reason in NEVER_CLEARS or bool(NEVER_CLEARS_PATTERN.fullmatch(reason))


def queue_states(kind: str, job_ids: list[str], timeout: float = 20.0) -> dict | None:
    """``{job ID: (state, reason)}`` of the jobs still in Slurm's queue (squeue), or None
    where that is not known (another batch system, squeue failing)."""
    import subprocess

    if kind != "slurm" or not job_ids:
        return None if kind != "slurm" else {}
    command = ["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i %T %r"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        # every job has left the queue (squeue: "Invalid job id specified")
        return {} if "invalid job id" in done.stderr.lower() else None
    states = {}
    for line in done.stdout.splitlines():
        fields = line.split(None, 2)
        if len(fields) >= 2:
            states[fields[0]] = (fields[1], fields[2].strip() if len(fields) > 2 else "")
    return states


class QueueWatch:
    """A jobqueue cluster's jobs as a sweep without a worker sees them
    (``fruit.experiments.clusters.cluster.Cluster``, ``fruit.experiments.execution.watch``): what their
    submissions said, and, on Slurm, each job's state and squeue's reason, asked in the
    background at most every ``every`` seconds (a controller that does not answer does
    not hold up the sweep)."""

    def __init__(self, submissions: Submissions, jobs: int, logs: str, every: float = 15.0):
        self.submissions = submissions
        self.jobs = jobs
        self.logs = logs
        self.every = every
        self.states: dict | None = None  # the last answer of queue_states
        self._asked: float | None = None  # time.monotonic() of the last question
        self._thread = None

    def poll(self) -> None:
        """Ask the queue again when due (in a thread; its answer lands in ``states``)."""
        now = time.monotonic()
        busy = self._thread is not None and self._thread.is_alive()
        if busy or (self._asked is not None and now - self._asked < self.every):
            return
        self._asked = now
        live = list(self.submissions.live)

        def ask() -> None:
            self.states = queue_states(self.submissions.kind, live)

        self._thread = threading.Thread(target=ask, name="fruit-queue-watch", daemon=True)
        self._thread.start()

    def never_starts(self) -> str | None:
        """Why no job of the cluster can ever give a worker (one line), else None: a
        refusal for good with no job left in the queue, or a job whose pending reason
        never clears."""
        s, kind = self.submissions, self.submissions.kind
        if s.refused and not s.live:
            return f"--cluster {kind}: no job can be submitted: {s.refused}"
        for job_id, (state, reason) in (self.states or {}).items():
            if job_id in s.live and state == "PENDING" and never_clears(reason):
                return (
                    f"--cluster {kind}: job {job_id} can never start: squeue gives the reason "
                    f"{reason} (the request exceeds what its partition, account or QOS allows "
                    f"a job); ask for less (--cores, --memory, --gpus, --walltime) or another "
                    f"--queue; {_SLURM_NODES}"
                )
        return None

    def note(self) -> str:
        """Why the cluster has no worker, in words: whether its jobs were submitted at
        all, and each job's state and reason where squeue says them."""
        s = self.submissions
        jobs = f"{self.jobs} {s.kind} job(s)"
        tried = ""
        if s.failures:
            tried = (
                f"{s.command} failed {s.failures} time(s) in a row (last: {s.last_failure}) "
                f"and tries again every {retry_delay(s.failures):.0f} s"
            )
        if not s.jobs:
            what = f"none of its {jobs} has been submitted" + (f": {tried}" if tried else " yet")
            return f"{what}. Wait, or pause with Ctrl-C or SIGTERM and run the same command later"
        said = []
        for job_id in s.live:
            if self.states is None:
                said.append(f"job {job_id}")
            elif job_id not in self.states:
                said.append(f"job {job_id} has left the queue")
            else:
                state, reason = self.states[job_id]
                why = f" ({reason})" if reason and reason != "None" else ""
                said.append(f"job {job_id} {state}{why}")
        where = "squeue" if self.states is not None else {"slurm": "squeue"}.get(s.kind, "qstat")
        parts = [
            f"no worker of its {jobs} is connected: "
            + (", ".join(said) or "no job in the queue")
            + f" ({where} says more)"
        ]
        if tried:
            parts.append(tried)
        parts.append(
            "a pending job waits for a node; a running one whose workers do not connect "
            f"cannot reach the scheduler (interface:) or failed: see its log in {self.logs}. "
            "Wait, or pause with Ctrl-C or SIGTERM and run the same command later"
        )
        return "; ".join(parts)
