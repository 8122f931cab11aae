"""A sweep whose workers go missing (issue 35): the walltime in seconds, a job's walltime as
a run's stop time, attempts numbered in runner.log with a lost one named, a sweep without
a worker saying so and ending at its time limit or on SIGTERM, the dry-run sized by the
cluster options (its GPU time too, with the runs per GPU of the jobs), and dask-jobqueue's
missing-cores error in fruit's words. Everything here is quick and needs no Slurm
(tests/test_slurm.py does it through a real one)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_experiments_support import fake_profile_toml, write_fake_data, write_fake_notebook

from fruit.errors import FruitError
from fruit.experiments.clusters.jobs import job_started, walltime_seconds
from fruit.experiments.execution.attempts import attempt_history
from fruit.experiments.execution.deadlines import Deadlines
from fruit.experiments.execution.worker import execute_run, log_line
from fruit.io import RUNNER_LOG

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("kind", "text", "seconds"),
    [
        ("slurm", "24:00:00", 86400),
        ("slurm", "30", 1800),  # Slurm: a bare number is minutes
        ("slurm", "05:30", 330),
        ("slurm", "1-12", 129600),
        ("slurm", "2-00:30:00", 174600),
        ("pbs", "150", 150),  # PBS: seconds
        ("sge", "01:00:00", 3600),
    ],
)
def test_walltime_in_seconds(kind, text, seconds):
    assert walltime_seconds(kind, text) == seconds


@pytest.mark.parametrize("text", ["1h", "24:00:00:00", "", "00:00:00", "-5", "1", "01:59"])
def test_a_walltime_that_is_not_one_is_refused_in_one_line(text):
    """Not a walltime, or under 2 minutes (1: Slurm minutes; 01:59: minutes:seconds): a
    job could not train, and the sweep would replace such jobs for ever."""
    with pytest.raises(FruitError) as e:
        walltime_seconds("slurm", text)
    assert "\n" not in str(e.value) and "--walltime" in str(e.value)


def test_a_jobs_walltime_stops_its_runs_as_a_time_limit_would():
    start = 1_000_000.0
    job = Deadlines.of_job(start, 3600.0)
    assert job.stop_at_for(None) == Deadlines.starting_at(start, 3600.0).stop_at_for(None)
    assert start + 3000 < job.stop_at_for(None) < start + 3600  # before its end, not long
    assert job.stop_at_for(100.0) == start + 3600 - 30 - (1.5 * 100 + 60)
    assert Deadlines.of_job(start, None).stop_at_for(None) is None
    assert job_started() <= time.time()  # outside a job: this process's start


def _parameters(folder: Path) -> dict:
    return {"run_dir": str(folder), "device": "cpu"}


def test_an_attempt_whose_worker_vanished_is_named_lost_and_numbers_go_on(tmp_path: Path):
    """runner.log of a run whose attempt 1 started and never ended (its job was
    cancelled): the next attempt names it lost, keeps its notebook as
    train.attempt-1.ipynb, and is numbered 2 whatever the sweep calls it."""
    folder = tmp_path / "run"
    folder.mkdir()
    log_line(folder, "attempt 1 started on node7 (worker pid 4242): no checkpoint, starting fresh")
    (folder / "train.ipynb").write_text("{}")  # its notebook, a cell still running
    assert attempt_history(folder) == (1, "node7 (worker pid 4242)")
    (folder / "metrics.json").write_text('{"status": "finished"}')  # finished meanwhile
    metrics, seconds = execute_run("r", "unused.ipynb", _parameters(folder), attempt=1)
    assert metrics == {"status": "finished"} and seconds == 0.0
    log = (folder / RUNNER_LOG).read_text()
    assert "attempt 1 lost: its worker node7 (worker pid 4242) ended during the run" in log
    assert "train.attempt-1.ipynb" in log and (folder / "train.attempt-1.ipynb").is_file()
    assert not (folder / "train.ipynb").exists()
    assert attempt_history(folder) == (1, None)  # lost once, named once


def test_an_attempt_that_ended_is_not_lost(tmp_path: Path):
    folder = tmp_path / "run"
    folder.mkdir()
    for line in ["attempt 1 started on a (worker pid 1): x", "attempt 1 failed: E: e",
                 "attempt 2 started on b (worker pid 2): y", "attempt 2 paused (time limit) after 3 s",
                 "attempt 3 started on c (worker pid 3): z", "attempt 3 finished in 3 s: status ok"]:  # fmt: skip
        log_line(folder, line)
    assert attempt_history(folder) == (3, None)


def test_a_run_is_not_started_when_its_job_ends_too_soon(tmp_path: Path):
    """A worker whose job (here: this process, started before the test) has a walltime
    already spent refuses the run and says why: the sweep starts it in another job."""
    folder = tmp_path / "run"
    outcome = execute_run("r", "unused.ipynb", _parameters(folder), 1, walltime=30.0)
    assert outcome == (None, 0.0) and outcome.job_ending
    assert "batch job ends too soon (walltime)" in (folder / RUNNER_LOG).read_text()


def _empty_scheduler():
    """A Dask scheduler on 127.0.0.1 without a worker."""
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0", processes=True
    )


def test_a_sweep_without_a_worker_says_so_and_ends_at_its_time_limit(tmp_path: Path):
    from distributed import Client

    from fruit.experiments.clusters.cluster import RUN_RESOURCE, Cluster
    from fruit.experiments.execution.sweep import Sweep
    from fruit.profiles import load_profile

    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    (tmp_path / "fake.toml").write_text(fake_profile_toml(trials=2, runs=1))
    with _empty_scheduler() as scheduler, Client(scheduler) as client:
        cluster = Cluster(client, "no workers", 1, dict(RUN_RESOURCE), no_worker_hint="HINT")
        stream = io.StringIO()
        sweep = Sweep(
            load_profile(tmp_path / "fake.toml"), cluster, results_dir=tmp_path / "results",
            data_dir=tmp_path / "data", notebook=tmp_path / "train.ipynb", device="cpu",
            reports=False, stream=stream, poll_seconds=0.1, time_limit=12.0,
            no_worker_seconds=1.0,
        )  # fmt: skip
        start = time.monotonic()
        result = sweep.run()
        seconds = time.monotonic() - start
    out = stream.getvalue()
    assert "no worker for 0 min: HINT" in out and out.count("no worker for") == 1, out
    assert "stopped before the data was ready" in out, out
    assert not result.complete and result.ok and result.left == result.total, out
    assert seconds < 12.0, out  # ends at its deadline, not when a worker comes


def test_sigterm_while_waiting_for_a_worker_ends_fruit_paused(tmp_path: Path):
    """`fruit run` attached to a scheduler without a worker waits; the first SIGTERM ends
    it within seconds, paused (75), not at the second."""
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    (tmp_path / "fake.toml").write_text(fake_profile_toml(trials=2, runs=1))
    with _empty_scheduler() as scheduler:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fruit", "run", "--profile", str(tmp_path / "fake.toml"),
             "--notebook", str(tmp_path / "train.ipynb"), "--data-dir", str(tmp_path / "data"),
             "--results", str(tmp_path / "results"), "--device", "cpu", "--skip-reports",
             "--no-dashboard", "--scheduler", scheduler.scheduler_address],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        )  # fmt: skip
        try:
            plan = tmp_path / "results" / "runs" / "fake" / "plan.json"
            deadline = time.monotonic() + 120
            while not plan.exists():  # the sweep has started, and waits for a worker
                assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read()
                time.sleep(0.2)
            time.sleep(2)
            start = time.monotonic()
            os.kill(proc.pid, signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            seconds = time.monotonic() - start
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 75 and seconds < 30, out
    assert "SIGTERM: pausing every run" in out, out


def test_the_dry_run_counts_the_runs_of_the_cluster_options(tmp_path: Path):
    def dry(*options: str, line: str = "total:") -> str:
        done = subprocess.run(
            [sys.executable, "-m", "fruit", "run", "--profile", "smoke", "--dry-run",
             "--results", str(tmp_path / "results"), *options],
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return next((x for x in done.stdout.splitlines() if x.startswith(line)), "")

    assert "on 3 runs at once (slurm: 3 job(s) x 1 run(s), 4 torch thread(s) each)" in dry(
        "--cluster", "slurm", "--jobs", "3", "--cores", "4"
    )
    assert "on 12 runs at once (slurm: 2 job(s) x 6 run(s) (3 per GPU)" in dry(
        "--cluster", "slurm", "--jobs", "2", "--gpus", "2", "--runs-per-gpu", "3"
    )
    assert "on 1 runs at once (this machine: 1 worker(s)" in dry("--workers", "1")
    # the jobs' walltime, and whether it was given (the default ends jobs after 30 minutes)
    walltime = "walltime per job:"
    assert "0.50 h (not given" in dry("--cluster", "slurm", line=walltime)
    assert "2.50 h (--walltime)" in dry(
        "--cluster", "slurm", "--walltime", "2:30:00", line=walltime
    )
    assert dry("--workers", "1", line=walltime) == ""


def test_missing_cores_are_said_in_fruits_words():
    """dask-jobqueue's error shows a Python line (cluster = SLURMCluster(cores=...));
    fruit run's user gets the options to give."""
    import dask
    import dask_jobqueue  # noqa: F401 - its defaults first (below)

    from fruit.experiments.clusters.cluster import jobqueue_cluster

    # dask.config.set puts back what it changed on exit, and a key that was absent on
    # entry it deletes whole: without dask-jobqueue's defaults loaded before it, the
    # whole "jobqueue" section (loaded inside, on import) left with it, and a later test
    # in the same process that builds a jobqueue cluster failed with KeyError 'jobqueue'
    with (
        dask.config.set({"jobqueue.slurm.cores": None, "jobqueue.slurm.memory": None}),
        pytest.raises(FruitError) as e,
    ):
        jobqueue_cluster("slurm", start=False, dashboard=False)
    message = str(e.value)
    assert "\n" not in message and "SLURMCluster" not in message, message
    assert "give --cores and --memory" in message, message


def test_the_worker_of_a_run_stopped_by_its_walltime_is_let_go():
    """retire_worker_of: the worker that ran the future leaves the scheduler at once
    (its job then ends, and a fresh job replaces it), and the future is not recomputed."""
    from distributed import Client, LocalCluster

    from fruit.experiments.clusters.jobs import retire_worker_of

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0"
        ) as cluster,
        Client(cluster) as client,
    ):
        future = client.submit(sum, [1, 2], pure=False)
        assert future.result() == 3
        start = time.monotonic()
        retire_worker_of(client, future)
        assert not client.scheduler_info(n_workers=-1)["workers"]
        assert time.monotonic() - start < 10


def _big_profile(tmp_path: Path) -> Path:
    """Two architectures on a million training strings: GPU-hours that show in one decimal."""
    text = fake_profile_toml(trials=20, runs=5, architectures=["Tf", "Tf+Nd"])
    text = text.replace("train = 5\n", "train = 1_000_000\n").replace(
        "max_epochs = 1\n", "max_epochs = 10\n"
    )
    (tmp_path / "big.toml").write_text(text)
    return tmp_path / "big.toml"


def test_the_dry_runs_gpu_line_follows_the_runs_per_gpu_of_the_cluster(tmp_path: Path):
    """--cluster ... --gpus G: the time on the jobs' GPUs with the runs per GPU they hold
    (measured sharing on the H200, the bounds on the H100, which has none measured),
    not the one-run-per-GPU time."""
    from fruit.experiments.planning.cost import describe, pair_costs
    from fruit.experiments.planning.gpu_rates import CARDS, gpu_hours
    from fruit.profiles import load_profile

    profile = load_profile(_big_profile(tmp_path))
    where = "slurm: 8 job(s) x 16 run(s) (16 per GPU), 1 torch thread(s) each"
    head = f"  on the 8 GPU(s) of {where}: "
    costs = pair_costs(profile)
    h200, h100 = (
        sum(h for _, h, _, _ in gpu_hours(costs, CARDS[c]).values()) for c in ("h200", "h100")
    )
    assert h200 / 8 > 1.0  # one run per GPU would be a visibly different figure
    lines = describe(profile, workers=128, gpu_cards=["h200"], where=where, gpus=8).splitlines()
    assert lines[-1] == (
        f"{head}about {h200 / 4.35 / 8:.1f} h (16 runs per GPU, measured 4.35x; with MPS "
        f"running {h200 / 11.38 / 8:.1f} h, measured 11.38x)"
    )
    lines = describe(profile, workers=128, gpu_cards=["h100"], where=where, gpus=8).splitlines()
    assert lines[-1] == (
        f"{head}between {h100 / 16 / 8:.1f} h (each of its 16 runs per GPU as fast as alone, a "
        f"bound) and {h100 / 8:.1f} h (no gain); sharing at K = 16 is not measured on h100"
    )
    # one run per GPU (--runs-per-gpu 1): the one-run time
    lines = describe(profile, workers=16, gpu_cards=["h200"], where="w", gpus=16).splitlines()
    assert lines[-1] == f"  on the 16 GPU(s) of w: about {h200 / 16:.1f} h"
    # and the command passes the cluster's layout on (the command, on this profile)
    done = subprocess.run(
        [sys.executable, "-m", "fruit", "run", "--profile", str(tmp_path / "big.toml"),
         "--dry-run", "--cluster", "slurm", "--jobs", "8", "--cores", "16", "--memory", "64GB",
         "--gpus", "1", "--gpu-card", "h200", "--results", str(tmp_path / "results")],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"{head}about {h200 / 4.35 / 8:.1f} h (16 runs")


def test_a_too_short_walltime_from_the_dask_config_is_refused_before_any_job(tmp_path):
    """No --walltime: the Dask config's is the jobs' walltime, held to the same minimum by
    fruit run's checks before a cluster starts."""
    import dask

    from fruit.experiments.clusters.checks import check_run_options
    from fruit.experiments.options import RunOptions

    args = RunOptions(device="cpu", results=str(tmp_path / "results"),
                      figures=str(tmp_path / "figures"), cluster="slurm")  # fmt: skip
    with dask.config.set({"jobqueue.slurm.walltime": "1"}):  # Slurm: one minute
        with pytest.raises(FruitError, match="walltime '1' is 60 s, too short for a job"):
            check_run_options(args)
    with dask.config.set({"jobqueue.slurm.walltime": "04:00:00"}):
        check_run_options(args)
