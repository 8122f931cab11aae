"""Batch jobs that are refused, fail to be submitted or cannot start (issue 46), against the
batch system of shell scripts in tests/fake_slurm.py: a submission that fails is tried
again after a delay and a new job takes the failed one's place (also in place of a lost
job); a refusal for good ends `fruit run` in one line; a job pending for a reason that
never clears ends the sweep in one line; the waiting line says what the jobs do.
tests/test_slurm.py checks the same against a real Slurm."""

from __future__ import annotations

import re
import time
import types
from pathlib import Path

import pytest
from fake_slurm import NO_PARTITION, TOO_MUCH_MEMORY, UNREACHABLE, cancelled, fake_slurm, tries
from test_experiments_cluster import fruit_run
from test_experiments_support import fake_profile_toml, write_fake_data, write_fake_notebook

from fruit.errors import FruitError
from fruit.experiments.clusters.jobs import refusal_hint, retry_delay, submission_message
from fruit.experiments.execution.watch import WorkerWatch

OPTIONS = dict(cores=1, memory="1GB", walltime="00:10:00", gpus=0)


@pytest.mark.parametrize(
    ("said", "line", "what"),
    [
        (NO_PARTITION, "sbatch: invalid partition specified: nosuch; Batch job submission "
         "failed: Invalid partition name specified", "--queue"),
        (TOO_MUCH_MEMORY, "sbatch: Memory specification can not be satisfied; Batch job "
         "submission failed: Requested node configuration is not available", "--memory"),
        ("sbatch: error: Batch job submission failed: Invalid account or account/partition "
         "combination specified", "sbatch: Batch job submission failed: Invalid account or "
         "account/partition combination specified", "--account"),
        (UNREACHABLE, "sbatch: Batch job submission failed: Unable to contact slurm controller "
         "(connect failure)", None),
        ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
         "sbatch: Batch job submission failed: Socket timed out on send/recv operation", None),
    ],
)  # fmt: skip
def test_a_submit_commands_message_is_one_line_and_says_whether_to_try_again(said, line, what):
    message = submission_message("sbatch", said)
    assert message == line
    hint = refusal_hint("slurm", message)
    if what is None:  # passes: tried again
        assert hint is None
    else:  # for good: what to change
        assert hint is not None and what in hint


def test_the_delay_between_tries_grows_to_a_minute():
    assert [retry_delay(n) for n in range(1, 8)] == [5, 10, 20, 40, 60, 60, 60]


def _wait(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.2)


async def _lose(cluster) -> None:
    """What Dask does when a job's workers are gone (SpecCluster._update_worker_status,
    after distributed.deploy.lost-worker-timeout): the job is closed and dropped."""
    for name, job in list(cluster.workers.items()):
        await job.close()
        del cluster.workers[name]


def test_a_failed_submission_is_replaced_by_a_new_one(tmp_path: Path, monkeypatch):
    """sbatch fails its first try: the job is submitted again 5 s later. The job is then
    lost, and its replacement's first try fails too: a second replacement follows, and
    the job left without a job ID holds nothing up."""
    from fruit.experiments.clusters.cluster import jobqueue_cluster

    bin_ = tmp_path / "bin"
    monkeypatch.setenv("PATH", fake_slurm(bin_, failing=(1, 3))["PATH"])
    cluster = jobqueue_cluster("slurm", jobs=1, dashboard=False, **OPTIONS)
    submissions = cluster.job_cls.submissions
    try:
        start = time.monotonic()
        _wait(lambda: submissions.jobs == ["102"], 60, "the second try submitted job 102")
        first = time.monotonic() - start
        said = submissions.news()
        assert said[0].startswith(f"sbatch failed ({submission_message('sbatch', UNREACHABLE)})")
        assert "a new try in 5 s" in said[0]
        assert said[1:] == ["sbatch answered again: job 102 submitted after 1 failed try"]
        assert 4 < first < 30, first  # after the delay, not at once or for ever

        cluster.sync(_lose, cluster)  # job 102 lost; try 3 fails, try 4 replaces it
        _wait(lambda: submissions.jobs == ["102", "104"], 60, "a new job after the lost one")
        assert tries(bin_) == 4
        assert submissions.live == ["104"] and cancelled(bin_) == ["102"]
        assert [job.job_id for job in cluster.workers.values()] == ["104"]
    finally:
        cluster.close()
    assert cancelled(bin_) == ["102", "104"]


def _fake_sweep(tmp_path: Path) -> list[str]:
    """A profile, notebook and data for a sweep that never gets a worker; its options."""
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    (tmp_path / "fake.toml").write_text(fake_profile_toml(trials=1, runs=1, architectures=["Tf"]))
    return [
        "--profile", str(tmp_path / "fake.toml"), "--notebook", str(tmp_path / "train.ipynb"),
        "--data-dir", str(tmp_path / "data"), "--results", str(tmp_path / "results"),
        "--device", "cpu", "--skip-reports", "--no-dashboard",
        "--cluster", "slurm", "--jobs", "2", "--cores", "1", "--memory", "1GB",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("refusal", "what"), [(NO_PARTITION, "--queue"), (TOO_MUCH_MEMORY, "--memory")]
)
def test_a_refused_submission_ends_fruit_run_in_one_line(tmp_path: Path, refusal, what):
    env = fake_slurm(tmp_path / "bin", refusal=refusal)
    start = time.monotonic()
    done = fruit_run(*_fake_sweep(tmp_path), cwd=tmp_path, env=env, timeout=120)
    seconds = time.monotonic() - start
    assert done.returncode == 2, done.stdout + done.stderr
    message = submission_message("sbatch", refusal)
    assert done.stderr.splitlines() == [
        f"fruit: error: --cluster slurm: the batch system refuses the jobs: {message}; "
        + refusal_hint("slurm", message)
    ]
    assert what in done.stderr and not done.stdout, done.stdout
    assert tries(tmp_path / "bin") == 2  # the two jobs, once each: nothing waited or retried
    assert not (tmp_path / "results" / "runs").exists()  # ended before the sweep began
    assert seconds < 60


def test_a_job_pending_for_good_ends_the_sweep_in_one_line(tmp_path: Path):
    """squeue says the jobs wait for PartitionConfig (e.g. more cores than the partition
    allows a job): the sweep ends with one line, and the jobs are cancelled."""
    env = fake_slurm(tmp_path / "bin", reason="PartitionConfig")
    start = time.monotonic()
    done = fruit_run(*_fake_sweep(tmp_path), cwd=tmp_path, env=env, timeout=120)
    seconds = time.monotonic() - start
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and re.match(
        r"fruit: error: --cluster slurm: job 10[12] can never start: squeue gives the reason "
        r"PartitionConfig \(",
        lines[0],
    ), done.stderr
    assert "--cores" in lines[0] and "sinfo" in lines[0]
    assert sorted(cancelled(tmp_path / "bin")) == ["101", "102"]
    assert seconds < 60, seconds


def _waiting_line(cluster, seconds: float = 30) -> list[str]:
    """What a sweep's WorkerWatch says about ``cluster`` once it has had no worker for
    0 s (polled until it says it, or ``seconds``)."""
    said: list[str] = []
    sweep = types.SimpleNamespace(cluster=cluster, say=said.append, no_worker_seconds=0)
    watch = WorkerWatch(sweep)
    _wait(lambda: watch.check() or any(s.startswith("no worker") for s in said), seconds, said)
    return said


def test_the_waiting_line_says_that_no_job_was_submitted(tmp_path: Path, monkeypatch):
    from fruit.experiments.clusters.cluster import connect_jobqueue

    monkeypatch.setenv("PATH", fake_slurm(tmp_path / "bin", failing=tuple(range(1, 99)))["PATH"])
    cluster = connect_jobqueue("slurm", jobs=1, dashboard=False, **OPTIONS)
    try:
        said = _waiting_line(cluster)
    finally:
        cluster.close()
    message = submission_message("sbatch", UNREACHABLE)
    assert said[0] == f"sbatch failed ({message}); a new try in 5 s (failed try 1 in a row)"
    assert said[-1].startswith(
        f"no worker for 0 min: none of its 1 slurm job(s) has been submitted: sbatch failed 1 "
        f"time(s) in a row (last: {message}) and tries again every 5 s."
    ), said


def test_the_waiting_line_gives_squeues_reason(tmp_path: Path, monkeypatch):
    from fruit.experiments.clusters.cluster import connect_jobqueue

    monkeypatch.setenv("PATH", fake_slurm(tmp_path / "bin", reason="Resources")["PATH"])
    cluster = connect_jobqueue("slurm", jobs=2, dashboard=False, **OPTIONS)
    try:
        said = _waiting_line(cluster)
    finally:
        cluster.close()
    line = said[-1]
    assert line.startswith("no worker for 0 min: no worker of its 2 slurm job(s) is connected: ")
    assert "job 101 PENDING (Resources)" in line and "job 102 PENDING (Resources)" in line, line
    assert "sbatch failed" not in line  # nothing failed


def test_a_refusal_for_good_while_no_worker_is_left_ends_the_wait(tmp_path: Path, monkeypatch):
    """The sweep's side of a refusal after the start (say, the partition removed while
    the sweep waited for a replacement): the watch raises the one-line error."""
    from fruit.experiments.clusters.cluster import RUN_RESOURCE, Cluster
    from fruit.experiments.clusters.jobs import QueueWatch, Submissions

    submissions = Submissions("slurm")
    submissions.failed(submission_message("sbatch", NO_PARTITION), "--queue must name one")
    cluster = Cluster(None, "fake", 1, dict(RUN_RESOURCE), queue=QueueWatch(submissions, 1, "x"))
    monkeypatch.setattr(cluster, "workers", lambda: 0)  # none connected
    sweep = types.SimpleNamespace(cluster=cluster, say=lambda line: None, no_worker_seconds=300)
    with pytest.raises(FruitError) as e:
        WorkerWatch(sweep).check()
    assert str(e.value) == (
        "--cluster slurm: no job can be submitted: sbatch: invalid partition specified: nosuch; "
        "Batch job submission failed: Invalid partition name specified; --queue must name one"
    )
