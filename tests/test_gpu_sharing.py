"""Runs sharing a GPU (fruit.experiments.planning.gpu_sharing): the workers' layout, the choice of
how many runs a GPU takes and its option, and that a run trained beside another gives
the records it gives alone (on the CPU here; on CUDA in the `gpu` variant)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import fruit.experiments.planning.gpu_sharing as gs
from fruit.experiments.execution import worker
from fruit.experiments.planning.gpu_sharing import (
    MAX_RUNS_PER_GPU,
    RUN_GPU_MEMORY_GIB,
    runs_per_gpu,
)


def test_the_modelled_default_is_the_fewest_of_cores_memory_and_the_cap():
    assert runs_per_gpu(16, 1, 139.8) == 16  # an H200 machine: a core each
    assert runs_per_gpu(16, 2, 139.8) == 8  # two threads a run
    assert runs_per_gpu(64, 1, 10.0) == int(10.0 // RUN_GPU_MEMORY_GIB)  # memory-bound
    assert runs_per_gpu(1000, 1, None) == MAX_RUNS_PER_GPU
    assert runs_per_gpu(0, 4, 1.0) == 1  # never none


@pytest.fixture
def two_gpus(monkeypatch):
    """A machine of 2 GPUs of 80 GiB and 16 cores, as the layout code sees it."""
    monkeypatch.setattr(gs, "gpu_count", lambda: 2)
    monkeypatch.setattr(gs, "gpu_memory_gib", lambda: 80.0)
    monkeypatch.setattr(gs.os, "cpu_count", lambda: 16)


def test_a_local_cluster_puts_the_chosen_number_of_workers_on_each_gpu(two_gpus):
    assert gs.local_layout(None, 1, "auto", None) == (16, 8)  # 8 cores per GPU
    assert gs.local_layout(None, 1, "cuda", 3) == (6, 3)  # --runs-per-gpu 3
    assert gs.local_layout(None, 2, "auto", None) == (8, 4)  # --threads 2
    assert gs.local_layout(5, 1, "auto", None) == (5, 3)  # --workers 5: 3 on GPU 0, 2 on 1
    assert gs.local_layout(None, 1, "cpu", None) == (16, None)  # runs on the CPU: no GPU


def test_workers_i_k_to_i_k_plus_k_minus_1_share_gpu_i(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    monkeypatch.setenv(gs.RUNS_PER_GPU_VARIABLE, "3")
    seen = []
    for slot in range(6):
        monkeypatch.setattr(worker, "_worker_slot", lambda slot=slot: slot)
        env = worker._kernel_environment(1, "auto")
        seen.append(env["CUDA_VISIBLE_DEVICES"])  # exactly one GPU each
    assert seen == ["4", "4", "4", "5", "5", "5"]
    monkeypatch.setattr(worker, "_worker_slot", lambda: 1)
    assert "CUDA_VISIBLE_DEVICES" not in worker._kernel_environment(1, "cpu")


def test_a_job_holds_gpus_times_runs_per_gpu_workers():
    from fruit.experiments.clusters.cluster import jobqueue_cluster

    def script(**options):
        cluster = jobqueue_cluster("slurm", memory="32GB", walltime="01:00:00", start=False,
                                   **options)  # fmt: skip
        try:
            return cluster.job_script().splitlines()
        finally:
            cluster.close()

    lines = script(cores=12, gpus=2, gpu_runs=3)
    worker_line = next(line for line in lines if "distributed.cli.dask_worker" in line)
    assert "--nworkers 6" in worker_line and "--nthreads 2" in worker_line
    assert f"export {gs.RUNS_PER_GPU_VARIABLE}=3" in lines
    # by default the model: the job's cores shared out, one per run
    lines = script(cores=12, gpus=2)
    worker_line = next(line for line in lines if "distributed.cli.dask_worker" in line)
    assert "--nworkers 12" in worker_line and "--nthreads 1" in worker_line
    assert f"export {gs.RUNS_PER_GPU_VARIABLE}=6" in lines


@pytest.mark.parametrize(
    "options, message",
    [
        (["--runs-per-gpu", "0"], "--runs-per-gpu must be an integer from 1 to 64, not 0"),
        (["--runs-per-gpu", "65"], "--runs-per-gpu must be an integer from 1 to 64, not 65"),
        (["--runs-per-gpu", "2", "--scheduler", "tcp://h:1"], "does nothing with --scheduler"),
        (["--runs-per-gpu", "2", "--cluster", "slurm"], "give --gpus N as well"),
        (["--runs-per-gpu", "2", "--workers", "2"], "give --workers or --runs-per-gpu"),
        (["--runs-per-gpu", "2", "--device", "cpu"], "the runs go to the CPU here (--device cpu)"),
        (["--gpu-card", "a100", "--dry-run"], "--gpu-card 'a100': no throughput is recorded"),
        (["--gpu-card", "h100"], "--gpu-card names the card of --dry-run's GPU-hours"),
    ],
)
def test_bad_gpu_options_are_refused_in_one_line(tmp_path, capsys, options, message):
    from fruit.cli import main as cli_main

    args = ["run", "--profile", "smoke", "--results", str(tmp_path), *options]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fruit: error: ") and message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------------------
# A run beside another gives the records it gives alone

ARCHITECTURES = ("Tf+Nd", "LSTM+Nd")


def _train(arch: str, folder: Path, device: str, slot: int) -> subprocess.Popen:
    """``fruit train`` of a small run, in the environment a worker of slot ``slot`` gives
    its kernel when two workers share one GPU (one thread, one visible GPU)."""
    env = dict(os.environ)
    env[gs.RUNS_PER_GPU_VARIABLE] = "2"
    if device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(worker, "_worker_slot", lambda: slot)
        mp.setattr(os, "environ", env)
        env.update(worker._kernel_environment(1, device))
    command = [
        sys.executable, "-m", "fruit", "train", "--task", "question-formation", "--architecture", arch,
        "--profile", "smoke", "--train-size", "120", "--dev-size", "20", "--test-size", "20",
        "--gen-size", "20", "--max-epochs", "2", "--generate-data",
        "--data-dir", str(folder.parent / "data"), "--run-dir", str(folder), "--no-progress",
        "--device", device,
    ]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait(*procs: subprocess.Popen) -> None:
    for p in procs:
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0, out.decode()[-2000:]


def _same_records(same_runs, a: Path, b: Path) -> None:
    """log.csv and metrics.json equal but for timings (benchmarks/same_runs.py), and the
    best parameters bit for bit."""
    assert same_runs.differences(a, b) == []
    best_a = torch.load(a / "best.pt", map_location="cpu", weights_only=False)
    best_b = torch.load(b / "best.pt", map_location="cpu", weights_only=False)
    tensors_a = {k: v for k, v in _tensors(best_a)}
    tensors_b = {k: v for k, v in _tensors(best_b)}
    assert tensors_a.keys() == tensors_b.keys() and tensors_a
    for key, value in tensors_a.items():
        assert torch.equal(value, tensors_b[key]), key


def _tensors(obj, prefix=""):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, f"{prefix}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{prefix}/{i}")


def _alone_then_together(tmp_path: Path, device: str, same_runs) -> float:
    """Each architecture's run alone, then both at once; the records compared. Returns
    how long the two together took against the two alone (a sanity check that they did
    overlap is not asked: the machine may be loaded)."""
    start = time.monotonic()
    for slot, arch in enumerate(ARCHITECTURES):  # the first generates the data
        _wait(_train(arch, tmp_path / f"alone-{arch}", device, slot))
    together = [
        _train(a, tmp_path / f"together-{a}", device, s) for s, a in enumerate(ARCHITECTURES)
    ]
    _wait(*together)
    for arch in ARCHITECTURES:
        _same_records(same_runs, tmp_path / f"alone-{arch}", tmp_path / f"together-{arch}")
    return time.monotonic() - start


def test_two_runs_trained_at_once_give_what_each_gives_alone_on_the_cpu(tmp_path, benchmark_script):
    # Two processes, one CPU thread each: nothing a process computes depends on the
    # other (the data folder and the compiled-kernel cache are shared and read by both).
    # Exact equality is the tolerance: the same code on the same device sums in the same order.
    _alone_then_together(tmp_path, "cpu", benchmark_script("same_runs"))


@pytest.mark.gpu
def test_two_runs_sharing_a_gpu_give_what_each_gives_alone(tmp_path, benchmark_script):
    # Each process has its own CUDA context on the same GPU; a kernel's arithmetic (its
    # launch configuration, cuBLAS's heuristic choice of algorithm, cudnn.benchmark off)
    # depends on the shapes and the device, not on what else runs, so the tolerance is
    # exact equality, as for a run paused and resumed on one GPU (tests/test_training.py).
    _alone_then_together(tmp_path, "cuda", benchmark_script("same_runs"))


# ---------------------------------------------------------------------------
# The dry-run's GPU-hours (fruit.experiments.planning.gpu_rates)

SMALL = """
name = "gpu-hours"
description = "GPU-hours arithmetic"
reduced = true
seed = 1
tasks = ["question-formation"]
architectures = ["Tf", "Tf+Sup+Sup", "RNN+Nd"]
[data]
train = 50_000
dev = 100
test = 200
gen = 300
[search]
trials = 2
max_epochs = 3
batch_tokens = [512, 2048]
learning_rate = [1e-5, 1e-3]
[final]
runs = 1
max_epochs = 4
"""


def test_gpu_hours_are_the_profiles_tokens_over_the_cards_rate(tmp_path):
    from fruit.experiments.planning.cost import (
        EVALUATION_TOKEN_COST,
        pair_costs,
        tokens_per_example,
    )
    from fruit.experiments.planning.gpu_rates import CARDS, describe_gpu, gpu_hours
    from fruit.profiles import load_profile

    (tmp_path / "p.toml").write_text(SMALL)
    profile = load_profile(tmp_path / "p.toml")
    h100 = CARDS["h100"]
    measured = h100.tokens_per_second
    per_string = tokens_per_example("question-formation")
    # 2 search trials of 3 epochs, 1 final run of 4 (its maximum), each evaluated once
    evaluation = 600 * per_string * EVALUATION_TOKEN_COST
    tokens = 2 * (3 * 50_000 * per_string + evaluation) + (4 * 50_000 * per_string + evaluation)
    rates = {  # measured; two Sup layers add twice what one adds; an RNN as the LSTM
        "Tf": measured["Tf"],
        "Tf+Sup+Sup": 1 / (1 / measured["Tf"] + 2 * (1 / measured["Tf+Sup"] - 1 / measured["Tf"])),
        "RNN+Nd": measured["LSTM+Nd"],
    }
    hours = gpu_hours(pair_costs(profile), h100)
    for arch, rate in rates.items():
        runs, got, got_rate, basis = hours[arch]
        assert runs == 3 and got_rate == pytest.approx(rate)
        assert got == pytest.approx(tokens / rate / 3600, rel=1e-9)
        assert (basis == "measured") == (arch == "Tf")
    total = tokens * sum(1 / r for r in rates.values()) / 3600
    lines = describe_gpu(pair_costs(profile), h100, runs_per_gpu=4)
    assert f"total: {total:.1f} GPU-hours one run per GPU" in lines[-2]
    assert f"about {total:.1f} h on 1 GPU, {total / 8:.1f} h on a node of 8 GPUs" in lines[-2]
    # sharing not measured on the card: the two bounds, never a figure of its own
    assert not h100.sharing
    assert f"between {total / 4:.1f} h" in lines[-1] and f"and {total:.1f} h (no gain)" in lines[-1]


def test_an_architecture_without_a_measured_basis_gets_no_gpu_hours(tmp_path):
    import dataclasses

    from fruit.experiments.planning.cost import pair_costs
    from fruit.experiments.planning.gpu_rates import CARDS, describe_gpu
    from fruit.profiles import load_profile

    (tmp_path / "p.toml").write_text(SMALL)
    costs = pair_costs(load_profile(tmp_path / "p.toml"))
    rates = {k: v for k, v in CARDS["h100"].tokens_per_second.items() if k != "LSTM+Nd"}
    card = dataclasses.replace(CARDS["h100"], tokens_per_second=rates)
    text = "\n".join(describe_gpu(costs, card))
    assert "RNN+Nd: 3 runs, not measured on h100: no GPU-hours" in text
    assert "without RNN+Nd (not measured)" in text


def test_the_dry_run_prints_gpu_hours_for_the_named_card(tmp_path, capsys):
    from fruit.cli import main as cli_main

    args = ["run", "--profile", str(tmp_path / "p.toml"), "--results", str(tmp_path / "r")]
    (tmp_path / "p.toml").write_text(SMALL)
    assert cli_main([*args, "--dry-run", "--gpu-card", "h100", "--runs-per-gpu", "8"]) == 0
    out = capsys.readouterr().out
    assert "GPU estimate on the NVIDIA H100 (h100; benchmarks/models.py --device cuda" in out
    assert "Tf: 3 runs," in out and "tokens/s (measured)" in out
    assert "with 8 runs per GPU: not measured on h100" in out


def test_measured_sharing_divides_the_one_run_hours_with_and_without_mps(tmp_path):
    from fruit.experiments.planning.cost import pair_costs
    from fruit.experiments.planning.gpu_rates import CARDS, describe_gpu, gpu_hours

    (tmp_path / "p.toml").write_text(SMALL)
    costs = pair_costs(load_small(tmp_path))
    h200 = CARDS["h200"]
    total = sum(hours for _, hours, _, _ in gpu_hours(costs, h200).values())
    lines = describe_gpu(costs, h200, runs_per_gpu=16)
    plain, mps = total / h200.sharing[16], total / h200.sharing_mps[16]
    assert f"about {plain:.1f} h on 1 GPU, {plain / 8:.1f} h on a node of 8" in lines[-2]
    assert "with MPS running" in lines[-1] and f"about {mps:.1f} h on 1 GPU" in lines[-1]
    # a K measured only with MPS, or not at all: the bounds, no figure of its own
    for k in (4, 24):
        assert f"between {total / k:.1f} h" in describe_gpu(costs, h200, runs_per_gpu=k)[-1]
    summary = describe_gpu(costs, h200)
    assert summary[-2].endswith(f"{h200.sharing[16]:.2f}x at K = 16")
    assert summary[-1].startswith("  with MPS")
    assert f"{h200.sharing_mps[16]:.2f}x at K = 16" in summary[-1]


def load_small(folder):
    from fruit.profiles import load_profile

    return load_profile(folder / "p.toml")


def test_the_layout_line_says_whether_mps_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert not gs.mps_running()
    assert gs.sharing_note(1) == "" and gs.sharing_note(None) == ""
    assert "no MPS" in gs.sharing_note(4)
    os.mkfifo(tmp_path / "control")  # what nvidia-cuda-mps-control -d creates
    assert gs.mps_running()
    assert gs.sharing_note(4).startswith(" (MPS on")


def test_the_gpu_estimate_says_when_runs_would_take_a_step_it_did_not_measure(
    tmp_path, monkeypatch
):
    from fruit.experiments.planning.cost import pair_costs
    from fruit.experiments.planning.gpu_rates import CARDS, describe_gpu

    (tmp_path / "p.toml").write_text(SMALL)
    costs = pair_costs(load_small(tmp_path))
    assert not any("training step" in line for line in describe_gpu(costs, CARDS["h200"]))
    monkeypatch.setenv("FRUIT_STEP", "graphs")
    assert describe_gpu(costs, CARDS["h200"])[-1] == (
        "  (measured with the plain training step; these runs would take the graphs step "
        "(FRUIT_STEP), not measured on h200)"
    )
