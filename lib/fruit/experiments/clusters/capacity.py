"""How many runs a ``fruit run`` would execute at once, for ``--dry-run``'s wall-clock
estimate, from the same options and the same rules as the cluster it would start
(``fruit.experiments.clusters.cluster``): a LocalCluster's workers (``--workers``, ``--threads``,
``--runs-per-gpu``), or ``--jobs`` batch jobs of ``runs_per_job(--gpus, K)`` runs each
(``--cluster``, with ``--cores`` and the Dask config). Nothing is started."""

from __future__ import annotations

import dataclasses

from fruit.experiments.options import RunOptions


@dataclasses.dataclass(frozen=True)
class Capacity:
    runs: int  # runs at once
    where: str  # in words, e.g. "slurm: 2 job(s) x 4 run(s), 2 torch thread(s) each"
    gpus: int = 0  # GPUs in all (jobqueue jobs with --gpus), 0: not known or none
    walltime: float | None = None  # seconds of each batch job


def dry_run_capacity(options: RunOptions) -> Capacity:
    """The runs at once of the cluster ``options`` would start."""
    from fruit.experiments.clusters.cluster import job_layout, job_walltime
    from fruit.experiments.planning.gpu_sharing import local_layout

    if options.cluster:
        kind, jobs, gpus = options.cluster, options.jobs or 1, options.gpus or 0
        layout = job_layout(kind, gpus, options.cores, options.runs_per_gpu, options.threads)
        return Capacity(
            jobs * layout.runs,
            layout.describe(kind, jobs, gpus),
            jobs * gpus,
            job_walltime(kind, options.walltime),
        )
    if options.scheduler:  # its workers are not asked: nothing is contacted by a dry-run
        return Capacity(2, "2 workers (an existing scheduler's workers are not counted)")
    threads = options.threads or 1
    workers, per_gpu = local_layout(options.workers, threads, options.device, options.runs_per_gpu)
    shared = f", {per_gpu} per GPU" if per_gpu else ""
    return Capacity(workers, f"this machine: {workers} worker(s){shared}, {threads} thread(s) each")
