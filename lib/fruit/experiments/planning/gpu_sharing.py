"""How many runs share one GPU: a single choice, ``runs_per_gpu``, that ``fruit run``
makes by itself unless ``--runs-per-gpu`` says otherwise (docs/cluster.md, "On a GPU").

At the paper's sizes one run does not fill a GPU: a training step is a long chain of
small kernels, launched one after another by the run's own CPU thread, so the GPU waits
on the CPU most of the time (docs/cluster.md: one Tf run gave 101k tokens/s on an H200).
Several runs on one GPU fill those gaps. Each run stays its own process (a Dask worker
and the notebook kernel it starts) with its own CUDA context: none reads another's
memory or changes the order of another's sums, so a run trained beside others computes
exactly what it computes alone on the same device (tests/test_gpu_sharing.py). The
processes' kernels take turns on the GPU unless NVIDIA's Multi-Process Service runs, in
which case they run side by side: on the H200, 16 runs gave 4-7x one run's throughput
without it and 11-14x with it (``mps_running`` makes ``fruit run`` say which).

The default is a *model*, not a measurement:

    runs per GPU = min(CPU cores per GPU // threads per run,
                       GPU memory // RUN_GPU_MEMORY_GIB,
                       MAX_RUNS_PER_GPU)

because each run needs a CPU core to launch its kernels and room on the GPU for its CUDA
context, weights, optimiser state and activations. ``RUN_GPU_MEMORY_GIB`` is an
allowance, not a measured peak. ``benchmarks/gpu.py`` measures, on a CUDA machine, each
architecture's peak GPU memory and the aggregate throughput of K runs sharing the GPU;
its figures go to docs/cluster.md and to ``fruit.experiments.planning.gpu_rates``, and they are
where this model is to be checked against (and replaced by) measured figures.
"""

from __future__ import annotations

import os

from fruit.errors import FruitError
from fruit.experiments.options import RunOptions

# The environment variable that tells a worker how many workers share each GPU, so that
# worker i takes GPU i // k (fruit.experiments.execution.worker): set by fruit run on the workers it
# starts (LocalCluster's nanny environment, the jobqueue job script).
RUNS_PER_GPU_VARIABLE = "FRUIT_RUNS_PER_GPU"
# GPU memory allowed per run (GiB). A model: a CUDA context takes several hundred MiB,
# and a paper-size model (about 200k parameters, batches of at most 2048 tokens) a little
# more; the dVPDA of the Nd stacks keeps O(n^3) float64 values per string (n = 40 tokens
# is 64k values). Measured on an H200 (benchmarks/gpu.py): a run's peak allocation is
# 104-261 MiB, to which its CUDA context adds several hundred; so 2 GiB is generous.
RUN_GPU_MEMORY_GIB = 2.0
# The most runs one GPU takes, by default and through --runs-per-gpu: beyond this the
# processes only contend for the GPU's scheduler (and each holds a CUDA context).
MAX_RUNS_PER_GPU = 64


def runs_per_gpu(cores_per_gpu: int, threads: int = 1, gpu_memory_gib: float | None = None) -> int:
    """The modelled number of runs to put on one GPU (module docstring): a CPU core per
    run's ``threads``, room for ``RUN_GPU_MEMORY_GIB`` each when the GPU's memory is
    known, at most ``MAX_RUNS_PER_GPU``, at least one."""
    by_cores = max(1, cores_per_gpu) // max(1, threads)
    by_memory = MAX_RUNS_PER_GPU if gpu_memory_gib is None else gpu_memory_gib // RUN_GPU_MEMORY_GIB
    return int(max(1, min(by_cores, by_memory, MAX_RUNS_PER_GPU)))


def mps_running() -> bool:
    """Whether NVIDIA's Multi-Process Service answers here: its control pipe in
    $CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps), which nvidia-cuda-mps-control -d
    creates and processes started afterwards connect through."""
    folder = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps"
    return os.path.exists(os.path.join(folder, "control"))


def sharing_note(per_gpu: int | None) -> str:
    """What the layout line adds about runs sharing a GPU: nothing for one run per GPU;
    else whether MPS is on, and what it would change when it is not."""
    if not per_gpu or per_gpu <= 1:
        return ""
    if mps_running():
        return " (MPS on: their kernels run side by side)"
    return (
        " (no MPS: their kernels take turns on the GPU; with nvidia-cuda-mps-control -d "
        "before fruit run they gave 2-3 times as much on an H200, docs/cluster.md)"
    )


def check_runs_per_gpu(value: int | None) -> None:
    """A one-line FruitError for a --runs-per-gpu that is not 1 .. MAX_RUNS_PER_GPU."""
    if value is None:
        return
    if not 1 <= value <= MAX_RUNS_PER_GPU:
        raise FruitError(
            f"--runs-per-gpu must be an integer from 1 to {MAX_RUNS_PER_GPU}, not {value}; "
            "leave it out to let fruit choose (docs/cluster.md)"
        )


def gpu_of_worker(slot: int, gpus: list[str], per_gpu: int) -> str:
    """The GPU worker ``slot`` takes: workers ``i*k .. i*k+k-1`` share GPU ``i`` (``k`` =
    ``per_gpu``), wrapping round when there are more workers than GPUs x k."""
    return gpus[(slot // max(1, per_gpu)) % len(gpus)]


def local_layout(
    workers: int | None, threads: int, device: str, gpu_runs: int | None
) -> tuple[int, int | None]:
    """(workers, runs per GPU) of a LocalCluster: ``workers`` when given (runs then share
    the GPUs round the workers, ``workers // GPUs`` per GPU at least); else, when the runs
    go to CUDA, ``gpu_runs`` (default ``runs_per_gpu``'s model) per GPU; else one worker per
    ``threads`` CPU cores. Runs per GPU is None when no GPU is used."""
    gpus = gpu_count() if device != "cpu" else 0
    cores = os.cpu_count() or 1
    if gpus == 0:
        return workers or max(1, cores // max(1, threads)), None
    if workers is not None:
        return workers, max(1, -(-workers // gpus))
    per_gpu = gpu_runs or runs_per_gpu(cores // gpus, threads, gpu_memory_gib())
    return gpus * per_gpu, per_gpu


def gpu_memory_gib() -> float | None:
    """The memory of this machine's first GPU in GiB (None without CUDA)."""
    try:
        import torch

        return torch.cuda.get_device_properties(0).total_memory / 2**30
    except Exception:  # noqa: BLE001 - no torch/CUDA: nothing to share out
        return None


def job_runs_per_gpu(kind: str, gpus: int, cores: int | None = None) -> int:
    """Runs per GPU of a job by the model (``fruit.experiments.planning.gpu_sharing``): the job's
    cores (given, else from the Dask config, else 1) shared out one per run. The GPUs'
    memory is not known here (the login node may have none), so only the cores count."""
    import dask

    if not gpus:
        return 1
    cores = cores or dask.config.get(f"jobqueue.{kind}.cores", None) or 1
    return runs_per_gpu(int(cores) // gpus)


def gpu_count() -> int:
    """GPUs this process sees (0 without torch or CUDA)."""
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no torch/CUDA means no GPUs to share out
        return 0


def check_gpu_options(options: RunOptions) -> None:
    """One-line errors for --runs-per-gpu out of range or doing nothing, and for a
    --gpu-card without a record (or without --dry-run, the only place it is read)."""
    from fruit.experiments.planning.gpu_rates import check_card

    if options.gpu_card is not None:
        check_card(options.gpu_card)
        if not options.dry_run:
            raise FruitError("--gpu-card names the card of --dry-run's GPU-hours; add --dry-run")
    k = options.runs_per_gpu
    check_runs_per_gpu(k)
    if k is None or options.dry_run:  # the dry-run's GPU-hours read it
        return
    if options.scheduler:
        raise FruitError(
            "--runs-per-gpu places the workers fruit starts and does nothing with --scheduler; "
            "start that cluster's workers with dask worker --nworkers K per GPU instead"
        )
    if options.cluster and not options.gpus:
        raise FruitError("--runs-per-gpu shares the GPUs of each job: give --gpus N as well")
    if options.cluster:
        return
    if options.workers is not None:
        raise FruitError("give --workers or --runs-per-gpu, not both (workers = GPUs x runs)")
    if options.device == "cpu" or gpu_count() == 0:
        raise FruitError(
            "--runs-per-gpu shares GPUs, but the runs go to the CPU here "
            f"({'--device cpu' if options.device == 'cpu' else 'no CUDA GPU'}); leave it out"
        )
