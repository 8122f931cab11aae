"""The runner against real Dask processes: a `dask scheduler` and two `dask worker`s on
127.0.0.1 (same results as a LocalCluster), a worker killed mid-run (the sweep completes
and the run resumes from its checkpoint), and the Slurm job script of --cluster slurm."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from test_experiments_support import fake_profile_toml, write_fake_data, write_fake_notebook

from fruit.experiments.clusters.cluster import jobqueue_cluster

BIN = Path(sys.executable).parent


@contextlib.contextmanager
def dask_processes(tmp_path: Path, workers: int = 2):
    """`dask scheduler` + `dask worker`s on the loopback interface, free ports only."""
    scheduler_file = tmp_path / "scheduler.json"
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    procs = []

    def start(name, args):
        log = open(logs / f"{name}.log", "w")
        procs.append(
            (
                subprocess.Popen([str(BIN / "dask"), *args], stdout=log, stderr=subprocess.STDOUT),
                log,
            )
        )

    try:
        start(
            "scheduler",
            [
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ],
        )
        deadline = time.monotonic() + 60
        while not scheduler_file.is_file():
            assert time.monotonic() < deadline, "dask scheduler did not start"
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        for i in range(workers):
            start(
                f"worker-{i}",
                [
                    "worker",
                    address,
                    "--host",
                    "127.0.0.1",
                    "--nthreads",
                    "1",
                    "--nworkers",
                    "1",
                    "--no-dashboard",
                    "--name",
                    f"w{i}",
                    "--resources",
                    "run=1",
                ],
            )
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(workers, timeout=60)
        yield address
    finally:
        for proc, _log in reversed(procs):
            proc.terminate()
        for proc, log in reversed(procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def fruit_run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fruit", "run", *args], capture_output=True, text=True, **kwargs
    )


def _all_metrics(results: Path, profile: str) -> dict[str, dict]:
    runs = results / "runs" / profile
    found = {}
    for path in sorted(runs.glob("*/*/*/metrics.json")):
        m = json.loads(path.read_text())
        m.pop("train_seconds"), m.pop("evaluation_seconds", None)  # the fake notebook's lack it
        found[str(path.parent.relative_to(runs))] = m
    return found


@pytest.mark.slow
def test_scheduler_and_two_workers_give_the_local_results(tmp_path: Path):
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    (tmp_path / "fake.toml").write_text(fake_profile_toml(trials=2, runs=1))
    common = [
        "--profile",
        str(tmp_path / "fake.toml"),
        "--notebook",
        str(tmp_path / "train.ipynb"),
        "--data-dir",
        str(tmp_path / "data"),
        "--device",
        "cpu",
        "--skip-reports",
    ]

    local = fruit_run(*common, "--results", str(tmp_path / "local"), "--workers", "2", timeout=600)
    assert local.returncode == 0, local.stdout + local.stderr
    with dask_processes(tmp_path) as address:
        remote = fruit_run(
            *common, "--results", str(tmp_path / "remote"), "--scheduler", address, timeout=600
        )
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert f"Dask scheduler {address} (2 workers)" in remote.stdout
    expected = _all_metrics(tmp_path / "local", "fake")
    assert len(expected) == 2 * (2 + 1)
    assert _all_metrics(tmp_path / "remote", "fake") == expected


@pytest.mark.slow
def test_killed_worker_run_resumes_from_its_checkpoint(tmp_path: Path):
    write_fake_notebook(tmp_path)
    # one search trial per architecture, long enough to be killed in the middle
    write_fake_data(tmp_path / "data", ["question-formation"], steps=6, step_seconds=1.0)
    (tmp_path / "fake.toml").write_text(fake_profile_toml(trials=1, runs=1))
    results = tmp_path / "results"
    args = [
        "--profile",
        str(tmp_path / "fake.toml"),
        "--notebook",
        str(tmp_path / "train.ipynb"),
        "--data-dir",
        str(tmp_path / "data"),
        "--device",
        "cpu",
        "--skip-reports",
        "--results",
        str(results),
    ]
    with dask_processes(tmp_path) as address:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "fruit", "run", *args, "--scheduler", address],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            victim = results / "runs" / "fake" / "question-formation" / "Tf" / "search-0"
            deadline = time.monotonic() + 120
            # wait until the run has trained a step and checkpointed
            while not (victim / "checkpoint.pt").is_file():
                assert time.monotonic() < deadline and sweep.poll() is None, (
                    "run never checkpointed"
                )
                time.sleep(0.2)
            log = (victim / "runner.log").read_text()
            worker_pid = int(log.split("worker pid ")[1].split(")")[0])
            kernels = psutil.Process(worker_pid).children(recursive=True)
            assert kernels, "the notebook kernel should be a child of the worker"
            os.kill(worker_pid, signal.SIGKILL)
            # the orphaned kernel notices its parent died and exits: nothing keeps writing
            gone, alive = psutil.wait_procs(kernels, timeout=15)
            assert not alive, f"kernel processes outlived their worker: {alive}"
            out, _ = sweep.communicate(timeout=300)
        finally:
            if sweep.poll() is None:
                sweep.kill()
                sweep.wait()
    assert sweep.returncode == 0, out
    metrics = _all_metrics(results, "fake")
    assert len(metrics) == 2 * (1 + 1)  # every run's result, parsable
    log = (victim / "runner.log").read_text()
    assert "attempt 1 started" in log and "no checkpoint, starting fresh" in log
    assert "resuming from checkpoint.pt" in log  # the next attempt found the checkpoint
    # the resumed attempt's executed notebook says where it picked up; the killed one is kept
    resumed = nbformat.read(victim / "train.ipynb", as_version=4)
    outputs = "".join(o.get("text", "") for c in resumed.cells for o in c.get("outputs", []))
    assert "resumed from checkpoint.pt at step" in outputs
    step = int(outputs.split("at step ")[1].split()[0])
    assert 1 <= step < 6
    assert list(victim.glob("train.attempt-*.ipynb"))
    m = json.loads((victim / "metrics.json").read_text())
    assert m["steps_run"] == 6
    # the log has each step once per attempt that ran it: no step lost
    steps = [int(x) for x in (victim / "log.csv").read_text().split()]
    assert sorted(set(steps)) == list(range(1, 7))


def test_slurm_job_script_carries_the_request():
    cluster = jobqueue_cluster(
        "slurm",
        cores=8,
        memory="32GB",
        walltime="04:00:00",
        gpus=2,
        queue="gpu",
        start=False,
        gpu_runs=1,  # --runs-per-gpu 1 (the default shares each GPU: tests/test_gpu_sharing.py)
    )
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    lines = script.splitlines()
    assert "#SBATCH --cpus-per-task=8" in lines
    assert any(line.startswith("#SBATCH --mem=") and line.endswith("G") for line in lines)
    assert "#SBATCH -t 04:00:00" in lines
    assert "#SBATCH --gres=gpu:2" in lines
    assert "#SBATCH -p gpu" in lines
    worker = next(line for line in lines if "distributed.cli.dask_worker" in line)
    # one worker per GPU (--runs-per-gpu 1), each taking one run at a time, with the cores
    # split between them
    assert "--nworkers 2" in worker and "--nthreads 4" in worker
    assert "--resources run=1" in worker


def test_unknown_cluster_kind_is_explained():
    from fruit.errors import FruitError

    with pytest.raises(FruitError, match="unknown cluster 'lsf'; valid choices: pbs, sge, slurm"):
        jobqueue_cluster("lsf", start=False)


def test_cluster_without_its_batch_system_is_a_clear_error(tmp_path: Path):
    run = fruit_run("--profile", "smoke", "--cluster", "slurm", cwd=tmp_path, timeout=120,
                    env={**os.environ, "PATH": str(tmp_path)})  # fmt: skip
    assert run.returncode == 2
    assert "fruit: error: --cluster slurm needs the sbatch command" in run.stderr


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--workers", "0", "--workers must be a positive integer, not 0"),
        ("--jobs", "0", "--jobs must be a positive integer, not 0"),
        ("--threads", "-1", "--threads must be a positive integer, not -1"),
        ("--gpus", "-2", "--gpus must be 0 or more, not -2"),
    ],
)
def test_counts_that_would_hang_are_refused(tmp_path: Path, capsys, option, value, message):
    from fruit.cli import main as cli_main

    # refused before any cluster starts (--workers 0 used to wait for ever)
    assert cli_main(["run", "--profile", "smoke", option, value, "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"fruit: error: {message}\n"
    assert not any(tmp_path.iterdir())


def _needs_dashboard():
    from fruit.experiments.clusters.cluster import dashboard_available

    if not dashboard_available():
        pytest.skip("bokeh is not installed (pip install bokeh): Dask serves no dashboard")


def test_local_cluster_serves_the_dashboard_it_links_to():
    import urllib.request

    from fruit.experiments.clusters.cluster import local_cluster

    _needs_dashboard()
    cluster = local_cluster(workers=1, device="cpu")
    try:
        link = cluster.dashboard
        assert link.startswith("http://127.0.0.1:") and link.endswith("/status")
        assert cluster.dashboard_note() == f"Dask dashboard: {link}"
        with urllib.request.urlopen(link, timeout=30) as page:
            assert page.status == 200 and b"bokeh" in page.read().lower()
    finally:
        cluster.close()
    quiet = local_cluster(workers=1, device="cpu", dashboard=False)
    try:
        assert quiet.dashboard is None and quiet.dashboard_note() is None
    finally:
        quiet.close()


def _distributed_log_level() -> int:
    import logging

    return logging.getLogger("distributed").getEffectiveLevel()


def test_a_local_clusters_workers_are_quieted_before_it_closes():
    """A worker's heartbeat that meets the scheduler already closed logs an ERROR with a
    CommClosedError traceback under the sweep's last line; the cluster quiets its workers
    (nothing below CRITICAL) as the first step of closing."""
    import logging

    from fruit.experiments.clusters.cluster import local_cluster

    cluster = local_cluster(workers=1, device="cpu", dashboard=False)
    try:
        levels = cluster.client.run(_distributed_log_level)
        assert all(level < logging.CRITICAL for level in levels.values()), levels
        cluster._closers[-1]()  # the first closer to run
        levels = cluster.client.run(_distributed_log_level)
        assert list(levels.values()) == [logging.CRITICAL], levels
    finally:
        cluster.close()


@pytest.mark.slow
def test_fruit_run_prints_the_dashboard_link_unless_told_not_to(tmp_path: Path):
    _needs_dashboard()
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    (tmp_path / "fake.toml").write_text(fake_profile_toml(trials=1, runs=1, architectures=["Tf"]))
    common = [
        "--profile", str(tmp_path / "fake.toml"), "--notebook", str(tmp_path / "train.ipynb"),
        "--data-dir", str(tmp_path / "data"), "--results", str(tmp_path / "results"),
        "--device", "cpu", "--workers", "1", "--skip-reports",
    ]  # fmt: skip
    quiet = fruit_run(*common, "--no-dashboard", timeout=300)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "dashboard" not in (quiet.stdout + quiet.stderr).lower()
    shown = fruit_run(*common, timeout=300)  # the runs are complete: only the cluster starts
    assert shown.returncode == 0, shown.stdout + shown.stderr
    first = shown.stdout.splitlines()[0]
    assert first.startswith("Dask dashboard: http://127.0.0.1:") and first.endswith("/status")
    assert "already in use" not in shown.stderr  # a taken 8787 is not worth a warning


# Dask leaves the socket of a taken port 8787 unclosed when it moves to another port
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_jobqueue_dashboard_comes_with_an_ssh_tunnel(tmp_path: Path, monkeypatch):
    """On a login node the dashboard is reached through a tunnel: the note says which."""
    import socket
    import warnings

    from fruit.experiments.clusters.cluster import connect_jobqueue

    _needs_dashboard()
    # a batch system that accepts jobs and never runs them
    (tmp_path / "sbatch").write_text("#!/bin/sh\necho 'Submitted batch job 42'\n")
    (tmp_path / "scancel").write_text("#!/bin/sh\nexit 0\n")
    for name in ("sbatch", "scancel"):
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    options = dict(cores=1, memory="1GB", walltime="00:10:00", gpus=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. Dask's "Port 8787 is already in use"
        cluster = connect_jobqueue("slurm", jobs=1, **options)
    try:
        link = cluster.dashboard
        port = link.rsplit(":", 1)[1].split("/")[0]
        note = cluster.dashboard_note()
        assert note.splitlines()[0] == f"Dask dashboard: {link}"
        assert f"ssh -L {port}:localhost:{port} {socket.gethostname()}" in note
        assert f"http://localhost:{port}/status" in note
    finally:
        cluster.close()
    quiet = connect_jobqueue("slurm", jobs=1, dashboard=False, **options)
    try:
        assert quiet.dashboard_note() is None
    finally:
        quiet.close()


def test_the_data_step_returns_its_fruit_error_for_the_sweep_to_print(tmp_path: Path):
    # what keeps a Dask worker from logging a bad input with a traceback (raised on the
    # worker, Dask logs it as a failed task first): the error comes back as a value
    from fruit.errors import FruitError
    from fruit.experiments.execution.sweep import _prepare_data_on_worker

    (tmp_path / "published").mkdir()
    sizes = {"train": 100, "dev": 10, "test": 10, "gen": 10}
    outcome = _prepare_data_on_worker(
        str(tmp_path / "data"),
        "question-formation",
        1,
        sizes,
        "published",
        str(tmp_path / "published"),
    )
    assert isinstance(outcome, FruitError) and "dev.tsv: file not found" in str(outcome)


@pytest.mark.slow  # a cluster start (~20 s); the test above checks the mechanism
def test_missing_published_files_are_one_line_not_a_worker_traceback(tmp_path: Path):
    # The data are made on a worker; a FruitError there (here: a published folder without
    # the task's files) reaches the user as fruit's one line, and the worker does not log
    # it first as a failed task with its traceback.
    (tmp_path / "published").mkdir()
    done = fruit_run(
        "--profile", "claims", "--task", "question-formation", "--architecture", "Tf",
        "--published", str(tmp_path / "published"), "--data-dir", str(tmp_path / "data"),
        "--results", str(tmp_path / "results"), "--workers", "1", "--no-dashboard",
        timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"fruit: error: {tmp_path / 'published' / 'question-formation' / 'dev.tsv'}: file not "
        "found (expected question-formation/dev.tsv)"
    ]
    assert not any((tmp_path / "data").rglob("*.tsv"))
