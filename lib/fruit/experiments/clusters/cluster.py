"""Where the runs execute: a Dask cluster (docs/architecture.md §7, docs/cluster.md).

* default: a ``distributed.LocalCluster`` sized to the machine -- one worker process per
  run slot (CPU cores / threads per run, or ``runs_per_gpu`` per GPU), one Dask thread
  each;
* ``scheduler="tcp://host:8786"``: attach to an existing Dask cluster;
* ``cluster="slurm" | "pbs" | "sge"``: start one through dask-jobqueue. Its settings come
  from the usual Dask YAML config (``jobqueue.slurm.*`` ...); the arguments here override.

Every worker we start advertises the resource ``run=1`` and runs are submitted needing
it, so a worker trains one run at a time whatever its thread count.

Several runs share a GPU as several worker processes: workers ``i*k .. i*k+k-1`` of a
machine or job see only GPU ``i`` (``CUDA_VISIBLE_DEVICES``, set for each run's kernel by
``fruit.experiments.execution.worker``, which reads ``k`` from ``RUNS_PER_GPU_VARIABLE``). Each run
is its own process with its own CUDA context, so what it computes cannot depend on its
neighbours (docs/cluster.md, "On a GPU"). How many share a GPU is one choice,
``fruit.experiments.planning.gpu_sharing.runs_per_gpu`` (``fruit run --runs-per-gpu``).

The Dask dashboard is on when bokeh is installed (a dependency of fruit), unless
``dashboard=False`` (``fruit run --no-dashboard``); ``Cluster.dashboard_note()`` says
where it is: a link on 127.0.0.1 for a LocalCluster, the scheduler's link with
``scheduler=``, and for a jobqueue cluster the link plus the ssh tunnel that reaches it
from the user's own machine.

Nothing we start listens beyond the interface the user chose: a LocalCluster's servers
and dashboard on 127.0.0.1; a jobqueue cluster's scheduler on the Dask config's
``interface:`` (dask-jobqueue's), its dashboard on 127.0.0.1 (read through the tunnel),
and each job's workers, their nannies and their HTTP servers on that interface's address
on their node (``worker_host_line``). Its jobs' submissions and why they do not start are
``fruit.experiments.clusters.jobs``' (``Cluster.news``, ``never_starts``, ``waiting_note``).
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import signal
import socket
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from fruit.errors import FruitError, unknown_choice
from fruit.experiments.clusters.jobs import (
    JOBQUEUE_DEFAULT_WALLTIME,
    SUBMIT_COMMANDS,
    SUBMIT_TIMEOUT,
    QueueWatch,
    Submissions,
    tracked_job_class,
    walltime_seconds,
)
from fruit.experiments.planning.gpu_sharing import (
    RUNS_PER_GPU_VARIABLE,
    job_runs_per_gpu,
    local_layout,
    sharing_note,
)

RUN_RESOURCE = {"run": 1}
# The module every LocalCluster worker imports at its start (Dask's "preload"): its
# ``dask_setup`` makes the worker ignore SIGINT, so that Ctrl-C reaches `fruit run` only.
WORKER_PRELOAD = "fruit.experiments.execution.worker"
JOBQUEUE_KINDS = ("slurm", "pbs", "sge")


@dataclass
class Cluster:
    """A connected Dask client, how many runs it executes at once, and how to close it."""

    client: Any
    description: str
    threads: int | None  # torch threads per run (None: leave the workers' environment alone)
    resources: dict[str, int] | None  # what each run asks of a worker
    dashboard: str | None = None  # the dashboard's link, e.g. http://127.0.0.1:8787/status
    tunnel: str | None = None  # how to reach it from another machine (ssh -L ...)
    walltime: float | None = None  # seconds a worker's batch job lasts (None: no limit)
    # what a sweep without a worker says to do (fruit.experiments.execution.watch)
    no_worker_hint: str = "its workers are gone; Ctrl-C or SIGTERM pauses the sweep resumably"
    queue: QueueWatch | None = None  # a jobqueue cluster's jobs: submissions, queue states
    _closers: list = field(default_factory=list)

    def news(self) -> list[str]:
        """What to say now about the jobs (a failed submission, one that went through
        again); each line once."""
        return self.queue.submissions.news() if self.queue else []

    def never_starts(self) -> str | None:
        """Called while the cluster has no worker: why none can ever come (one line), or
        None (wait). Asks the batch system again when due, in the background."""
        if not self.queue:
            return None
        self.queue.poll()
        return self.queue.never_starts()

    def waiting_note(self) -> str:
        """What a sweep that has long had no worker says about the cluster."""
        return self.queue.note() if self.queue else self.no_worker_hint

    def dashboard_note(self) -> str | None:
        """The lines `fruit run` prints about the dashboard (None: no dashboard)."""
        if not self.dashboard:
            return None
        if not self.tunnel:
            return f"Dask dashboard: {self.dashboard}"
        port = _port(self.dashboard)
        return (
            f"Dask dashboard: {self.dashboard}\n"
            f"  from your own machine: {self.tunnel}, then open http://localhost:{port}/status"
        )

    def workers(self) -> int:
        """How many workers are connected now."""
        return len(self.client.scheduler_info(n_workers=-1)["workers"])

    def slots(self) -> int:
        info = self.client.scheduler_info(n_workers=-1)["workers"].values()
        if self.resources:
            return sum(int(w.get("resources", {}).get("run", 0)) for w in info) or 1
        return sum(int(w.get("nthreads", 1)) for w in info) or 1

    def close(self) -> None:
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception:  # noqa: BLE001 - closing must not hide the real outcome
                pass
        self._closers.clear()


# Dask's defaults that cost the runs time: each worker's
# statistical profiler samples its threads every 10 ms, and the scheduler and every worker
# read /proc every 0.5 s for the dashboard's system monitor. A sweep's tasks last minutes to
# hours, so we turn the profiler off and sample the system every 10 s. (Measured on the
# 2-core reference machine during `make reproduce`: the sweep process and each worker
# used ~6% of a core each, next to two kernels training. With the 1 s tick below, an idle
# 2-worker cluster uses 2.5% of a core in the scheduler's process and 1.0% in each worker,
# against 8.2% and 4.9% with Dask's defaults: `benchmarks/dask_overhead.py --idle 30`.)
QUIET_DASK = {
    # Dask's nanny would give every worker -- and, by updating os.environ before it spawns
    # them, the process that starts the cluster -- MALLOC_TRIM_THRESHOLD_=65536, which made
    # the training kernels they start twice as slow (fruit.experiments.execution.worker).
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "10s",
    # every scheduler and worker also wakes up every 20 ms to check that its event loop
    # is not blocked (it warns after 3 s): once a second is enough for that
    "distributed.admin.tick.interval": "1s",
    "distributed.scheduler.work-stealing": False,  # one run per worker: nothing to steal
}


DASHBOARD_PORT = 8787  # Dask's usual port; a free one is taken when it is in use
PORT_TAKEN = "Port .* is already in use"  # Dask's warning when it takes another one


def dashboard_available() -> bool:
    """Whether Dask can serve its dashboard here: bokeh installed, in a version it accepts."""
    try:
        import distributed.dashboard.scheduler  # noqa: F401 - imports and checks bokeh
    except ImportError:
        return False
    return True


def local_cluster(
    workers: int | None = None,
    threads: int = 1,
    device: str = "auto",
    dashboard: bool = True,
    gpu_runs: int | None = None,
) -> Cluster:
    """A LocalCluster on 127.0.0.1: by default one worker per `threads` CPU cores, or,
    when the runs go to CUDA, ``gpu_runs`` per GPU (default: ``runs_per_gpu``'s model).
    Its dashboard listens on 127.0.0.1 only."""
    import dask
    from distributed import Client, LocalCluster

    layout, per_gpu = local_layout(workers, threads, device, gpu_runs)
    workers = layout
    dashboard = dashboard and dashboard_available()
    with dask.config.set(QUIET_DASK), warnings.catch_warnings():  # nannies take it now
        warnings.filterwarnings("ignore", message=PORT_TAKEN)  # the link says which
        with interrupts_ignored():  # the workers start ignoring SIGINT (as it is here now)
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=f"127.0.0.1:{DASHBOARD_PORT}" if dashboard else None,
                resources=RUN_RESOURCE,
                silence_logs=logging.ERROR,  # not the warnings of runs cut off at a time limit
                preload=[WORKER_PRELOAD],  # a worker restarted later ignores SIGINT too
                env={RUNS_PER_GPU_VARIABLE: str(per_gpu or 1)},  # which GPU a worker takes
            )
    client = Client(cluster)
    shared = f", {per_gpu} per GPU" if per_gpu else ""
    result = Cluster(
        client,
        f"LocalCluster: {workers} workers x 1 run{shared}, {threads} torch thread(s) per run"
        + sharing_note(per_gpu),
        threads,
        dict(RUN_RESOURCE),
        dashboard=cluster.dashboard_link if dashboard else None,
        no_worker_hint="the LocalCluster's worker processes are gone (killed, out of memory) "
        "and Dask has not restarted them; Ctrl-C pauses the sweep resumably",
    )
    # closers run last-added first: quiet the workers, close the client, then the cluster
    result._closers += [cluster.close, client.close, lambda: quiet_workers(client)]
    return result


@contextlib.contextmanager
def interrupts_ignored():
    """SIGINT ignored here while the LocalCluster starts its worker processes: a process
    inherits an ignored signal, so a worker ignores Ctrl-C (sent by a terminal to the
    whole process group) from its very start, before its preload (``WORKER_PRELOAD``)
    says so for good. Those few seconds, Ctrl-C does nothing; after them, it pauses the
    sweep (fruit.commands.run)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler (the preload still applies)
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _quiet_logs() -> None:
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def quiet_workers(client: Any) -> None:
    """Before a LocalCluster closes: its workers log nothing below CRITICAL from here on.
    A worker whose heartbeat meets the scheduler already closed logs "Failed to
    communicate with scheduler during heartbeat" with a CommClosedError traceback (seen
    at the end of a claims step on the loaded 2-core machine): noise, not a fault, and
    the sweep's own summary has said how it ended."""
    client.run(_quiet_logs)


def attach(scheduler: str, threads: int | None = None, dashboard: bool = True) -> Cluster:
    """A client of an existing scheduler. Runs ask for ``run=1`` only if every worker
    offers that resource (``dask worker --resources run=1``); otherwise a worker runs as
    many runs at once as it has threads, so start those with ``--nthreads 1``. The
    dashboard link is the one the scheduler reports (its own settings decide whether it
    serves one)."""
    from distributed import Client

    if not scheduler:
        raise FruitError("--scheduler needs an address, e.g. tcp://HOST:8786")
    try:
        client = Client(scheduler, timeout="30s")
    except ValueError as e:  # not an address Dask can parse
        raise FruitError(
            f"--scheduler {scheduler!r} is not a Dask address ({e}); e.g. tcp://HOST:8786"
        ) from None
    except OSError as e:
        raise FruitError(f"cannot reach the Dask scheduler at {scheduler!r}: {e}") from e
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    with_resource = bool(workers) and all("run" in w.get("resources", {}) for w in workers)
    result = Cluster(
        client,
        f"Dask scheduler {scheduler} ({len(workers)} workers)",
        threads,
        dict(RUN_RESOURCE) if with_resource else None,
        dashboard=_reported_link(client) if dashboard else None,
        no_worker_hint=f"the scheduler {scheduler} has no worker: start some (dask worker "
        f"{scheduler} --nthreads 1 --resources run=1), or pause with Ctrl-C or SIGTERM",
    )
    result._closers.append(client.close)
    return result


def jobqueue_cluster(
    kind: str,
    jobs: int = 1,
    cores: int | None = None,
    memory: str | None = None,
    walltime: str | None = None,
    gpus: int = 0,
    start: bool = True,
    dashboard: bool = True,
    gpu_runs: int | None = None,
    **extra: Any,
):
    """A dask-jobqueue cluster; each job holds ``runs_per_job(gpus, per_gpu)`` workers,
    each worker one run, ``per_gpu`` = ``gpu_runs`` or the model's choice for the job's
    cores (``job_runs_per_gpu``). Unset options come from the Dask config. Returns the
    jobqueue cluster object (``cluster.job_script()`` shows the job; its
    ``job_cls.submissions`` what the submissions gave). The scheduler runs here (the login
    node), its dashboard on 127.0.0.1:8787 unless ``dashboard`` is False or the Dask
    config's scheduler-options say where.
    """
    import dask
    import dask_jobqueue

    classes = {
        "slurm": dask_jobqueue.SLURMCluster,
        "pbs": dask_jobqueue.PBSCluster,
        "sge": dask_jobqueue.SGECluster,
    }
    if kind not in classes:
        raise unknown_choice("cluster", kind, JOBQUEUE_KINDS)
    per_gpu = gpu_runs or job_runs_per_gpu(kind, gpus, cores)
    processes = runs_per_job(gpus, per_gpu)
    kwargs: dict[str, Any] = dict(extra)
    if cores is not None:
        kwargs["cores"] = cores
    if memory is not None:
        kwargs["memory"] = memory
    if walltime is not None:
        kwargs["walltime"] = walltime
    kwargs["processes"] = processes
    directives = list(kwargs.pop("job_extra_directives", None) or [])
    directives += dask.config.get(f"jobqueue.{kind}.job-extra-directives", []) or []
    if gpus:
        directives.append(
            {"slurm": f"--gres=gpu:{gpus}", "pbs": f"-l ngpus={gpus}", "sge": f"-l gpu={gpus}"}[
                kind
            ]
        )
    kwargs["job_extra_directives"] = directives
    additions = []  # to the job script's prologue
    if gpus:  # the workers' share of the GPUs (fruit.experiments.execution.worker)
        additions.append(f"export {RUNS_PER_GPU_VARIABLE}={per_gpu}")
    worker_args = list(kwargs.pop("worker_extra_args", None) or [])
    worker_args += dask.config.get(f"jobqueue.{kind}.worker-extra-args", []) or []
    worker_args += ["--resources", "run=1"]
    interface = kwargs.get("interface") or dask.config.get(f"jobqueue.{kind}.interface", None)
    if interface and "--dashboard-address" not in worker_args:
        python = kwargs.get("python") or dask.config.get(f"jobqueue.{kind}.python", None)
        additions.append(worker_host_line(python or sys.executable, interface))
        worker_args += ["--dashboard-address", f"${{{WORKER_HOST_VARIABLE}}}:0"]
    kwargs["worker_extra_args"] = worker_args
    if additions:
        prologue = list(kwargs.pop("job_script_prologue", None) or [])
        prologue += dask.config.get(f"jobqueue.{kind}.job-script-prologue", []) or []
        kwargs["job_script_prologue"] = [*prologue, *additions]
    scheduler = kwargs.pop("scheduler_options", None)
    if scheduler is None:
        scheduler = dask.config.get(f"jobqueue.{kind}.scheduler-options", {}) or {}
    if not (dashboard and dashboard_available()):
        scheduler = {**scheduler, "dashboard": False}
    elif "dashboard_address" not in scheduler:  # read through an ssh tunnel: this machine only
        scheduler = {**scheduler, "dashboard_address": f"127.0.0.1:{DASHBOARD_PORT}"}
    kwargs["scheduler_options"] = scheduler
    submissions = Submissions(kind)
    kwargs["job_cls"] = tracked_job_class(classes[kind].job_cls, submissions)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=PORT_TAKEN)  # the link says which
            cluster = classes[kind](**kwargs)
    except ValueError as e:  # e.g. cores/memory neither given nor configured
        said = str(e).splitlines()[0].rstrip(" :,")  # not dask-jobqueue's Python example
        missing = [
            f"--{name}"
            for name in ("cores", "memory")
            if kwargs.get(name) is None and dask.config.get(f"jobqueue.{kind}.{name}", None) is None
        ]
        what = f"give {' and '.join(missing)}" if missing else "check the options"
        raise FruitError(
            f"--cluster {kind}: {said.lower() if missing else said}; {what}, or set "
            f"jobqueue.{kind}.* in the Dask config (docs/cluster.md)"
        ) from None
    if start:  # min = max: a lost job (cancelled, walltime, preempted) is replaced
        cluster.adapt(minimum_jobs=jobs, maximum_jobs=jobs)
    return cluster


# The job script sets it to the address of the Dask config's `interface:` on the node the
# job runs on; each worker's HTTP server (its dashboard and /health) listens there only,
# not on every address as dask-worker's default ":0" would have it.
WORKER_HOST_VARIABLE = "FRUIT_WORKER_HOST"


def worker_host_line(python: str, interface: str) -> str:
    """The job script's line that sets ``WORKER_HOST_VARIABLE`` to the IPv4 address of
    ``interface`` on the job's node, found as dask-worker's ``--interface`` finds it."""
    find = "import sys; from distributed.utils import get_ip_interface; "
    find += "print(get_ip_interface(sys.argv[1]))"
    command = " ".join(shlex.quote(word) for word in (python, "-c", find, interface))
    return f"{WORKER_HOST_VARIABLE}=$({command})"


def job_walltime(kind: str, walltime: str | None) -> float:
    """Seconds of the jobs' walltime: ``--walltime``, else the Dask config's, else
    dask-jobqueue's default (30 minutes)."""
    import dask

    if walltime is None:
        walltime = dask.config.get(f"jobqueue.{kind}.walltime", None) or JOBQUEUE_DEFAULT_WALLTIME
    return walltime_seconds(kind, walltime)


def check_job_memory(memory: str | None) -> None:
    """``--memory`` as dask-jobqueue reads it (``16GB``, ``4 GiB``): a one-line FruitError
    otherwise, before any job is submitted."""
    from dask.utils import parse_bytes

    if memory is None:
        return
    try:
        size = parse_bytes(memory)
    except (ValueError, TypeError):
        size = None
    if not size or size <= 0:
        raise FruitError(f"--memory {memory!r} is not an amount of memory; give e.g. 16GB or 4GiB")


def runs_per_job(gpus: int, per_gpu: int = 1) -> int:
    """Workers (runs at once) per job: ``per_gpu`` per GPU, else one."""
    return max(1, gpus * max(1, per_gpu))


@dataclass(frozen=True)
class JobLayout:
    """What one batch job holds: ``runs`` workers of one run each, ``per_gpu`` of them per
    GPU (1 without GPUs), each run with ``threads`` torch threads."""

    per_gpu: int
    runs: int
    threads: int

    def describe(self, kind: str, jobs: int, gpus: int) -> str:
        shared = f" ({self.per_gpu} per GPU)" if gpus else ""
        return (
            f"{kind}: {jobs} job(s) x {self.runs} run(s){shared}, "
            f"{self.threads} torch thread(s) each"
        )


def job_layout(
    kind: str, gpus: int, cores: int | None, runs_per_gpu: int | None, threads: int | None
) -> JobLayout:
    """The layout of a job of ``cores`` cores (else the Dask config's, else 1) and
    ``gpus`` GPUs: ``runs_per_gpu`` (else the model's choice for the cores,
    ``job_runs_per_gpu``) runs per GPU, and ``threads`` (else the cores shared between the
    runs). What ``fruit run`` starts and what its ``--dry-run`` counts."""
    import dask

    cores = cores or dask.config.get(f"jobqueue.{kind}.cores", None) or 1
    per_gpu = runs_per_gpu or job_runs_per_gpu(kind, gpus, cores)
    runs = runs_per_job(gpus, per_gpu)
    return JobLayout(per_gpu, runs, threads or max(1, int(cores) // runs))


def connect_jobqueue(
    kind: str, jobs: int, threads: int | None = None, dashboard: bool = True, **options: Any
) -> Cluster:
    """Start ``jobs`` jobs; each run gets ``threads`` torch threads (default: the job's
    cores, from the options or the Dask config, shared between its runs). Returns once
    the first submissions have ended (at most ``SUBMIT_TIMEOUT`` + 30 s); where the batch
    system refuses the jobs for good, raises a one-line FruitError instead."""
    import shutil

    import dask
    from distributed import Client

    submit = SUBMIT_COMMANDS.get(kind)
    if submit and shutil.which(submit) is None:
        raise FruitError(
            f"--cluster {kind} needs the {submit} command, which is not on PATH here; run "
            f"fruit on a login node of the cluster (see docs/cluster.md)"
        )
    gpus = options.get("gpus") or 0
    walltime = job_walltime(kind, options.get("walltime"))
    logs = dask.config.get(f"jobqueue.{kind}.log-directory", None) or "the folder fruit runs in"
    layout = job_layout(kind, gpus, options.get("cores"), options.pop("gpu_runs", None), threads)
    cluster = jobqueue_cluster(
        kind, jobs=jobs, dashboard=dashboard, gpu_runs=layout.per_gpu, **options
    )
    submissions = cluster.job_cls.submissions
    # the first jobs' submissions, before anything waits for their workers: a refusal for
    # good (no such partition, more memory than a node has) ends the command here
    submissions.wait_for_tries(jobs, timeout=SUBMIT_TIMEOUT + 30)
    if submissions.refused and not submissions.live:
        cluster.close()
        raise FruitError(
            f"--cluster {kind}: the batch system refuses the jobs: {submissions.refused}"
        )
    client = Client(cluster)
    result = Cluster(
        client,
        layout.describe(kind, jobs, gpus),
        layout.threads,
        dict(RUN_RESOURCE),
        dashboard=_listening_link(cluster) if dashboard and dashboard_available() else None,
        walltime=walltime,
        queue=QueueWatch(submissions, jobs, logs),
    )
    if result.dashboard:
        port = _port(result.dashboard)
        result.tunnel = f"ssh -L {port}:localhost:{port} {socket.gethostname()}"
    # closers run last-added first: quiet the workers, close the client, then the cluster
    result._closers += [cluster.close, client.close, lambda: quiet_workers(client)]
    return result


def _listening_link(cluster) -> str | None:
    """A jobqueue cluster's dashboard link, naming the address the dashboard listens on
    (Dask's names the scheduler's, which is the interface's, not the dashboard's
    127.0.0.1)."""
    link = cluster.dashboard_link or None
    host = getattr(getattr(cluster.scheduler, "http_server", None), "address", None)
    if link and host and ":" not in host and host != "0.0.0.0":
        return f"http://{host}:{_port(link)}/status"
    return link


def _reported_link(client) -> str | None:
    """The dashboard link an existing scheduler reports, or None."""
    try:
        return client.dashboard_link or None
    except (KeyError, AttributeError, OSError):
        return None


def _port(link: str) -> str:
    """The port of a link such as http://10.1.2.3:8787/status."""
    return link.split("://")[-1].split("/")[0].rsplit(":", 1)[-1]
