"""The runner on a LocalCluster with a fake train notebook (tests/test_experiments_support.py):
search, selection, final runs, skipping finished runs, retries and reported failures."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest
from test_experiments_support import (
    fake_ce,
    fake_profile_toml,
    write_fake_data,
    write_fake_notebook,
)

from fruit.experiments.clusters.cluster import local_cluster
from fruit.experiments.execution.sweep import Sweep
from fruit.profiles import load_profile


@pytest.fixture(scope="module")
def cluster():
    c = local_cluster(workers=2, threads=1, device="cpu")
    yield c
    c.close()


def _sweep(tmp_path, cluster, profile, **kwargs):
    stream = io.StringIO()
    sweep = Sweep(
        profile,
        cluster,
        results_dir=tmp_path / "results",
        data_dir=tmp_path / "data",
        notebook=tmp_path / "train.ipynb",
        device="cpu",
        reports=False,
        stream=stream,
        poll_seconds=0.2,
        **kwargs,
    )
    return sweep.run(), stream.getvalue()


def _profile(tmp_path, **kwargs):
    path = tmp_path / "fake.toml"
    path.write_text(fake_profile_toml(**kwargs))
    return load_profile(path)


def test_search_then_finals_then_nothing_left(tmp_path: Path, cluster):
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    profile = _profile(tmp_path, trials=3, runs=1)

    result, out = _sweep(tmp_path, cluster, profile)
    assert result.ok, out
    assert result.total == 2 * (3 + 1) and result.trained == 8 and result.found_complete == 0
    assert "done 8 / running 0 / failed 0 / left 0 of 8" in out

    runs = tmp_path / "results" / "runs" / "fake" / "question-formation"
    for arch in ("Tf", "Tf+Sup"):
        search = [
            json.loads((runs / arch / f"search-{i}" / "metrics.json").read_text()) for i in range(3)
        ]
        # oracle: recompute each trial's score from its own settings, pick the lowest
        for m in search:
            assert math.isclose(
                m["best_validation_cross_entropy"],
                fake_ce(m["learning_rate"], m["batch_tokens"], m["seed"]),
            )
        winner = min(
            search, key=lambda m: fake_ce(m["learning_rate"], m["batch_tokens"], m["seed"])
        )
        finals = [
            json.loads((runs / arch / f"final-{i}" / "metrics.json").read_text()) for i in range(1)
        ]
        for m in finals:
            assert m["learning_rate"] == winner["learning_rate"]
            assert m["batch_tokens"] == winner["batch_tokens"]
            assert m["phase"] == "final" and m["steps_run"] == 2
        assert len({m["seed"] for m in search + finals}) == 4
        selection = json.loads((runs / arch / "selection.json").read_text())
        assert selection["winner"] == winner["index"]
        assert (runs / arch / "final-0" / "train.ipynb").is_file()  # the executed notebook
    plan = json.loads((tmp_path / "results" / "runs" / "fake" / "plan.json").read_text())
    assert len(plan["search"]) == 6

    again, out = _sweep(tmp_path, cluster, profile)
    assert again.ok and again.trained == 0 and again.found_complete == 8, out


def test_a_sweep_stopped_early_ends_with_what_is_left_not_with_nothing(tmp_path: Path, cluster):
    """The last progress line of a sweep that stopped early counts the runs left and
    estimates their time from what it knows (here nothing recorded: the cost model's
    prediction, under a second for these tiny runs), never "0:00:00"."""
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    profile = _profile(tmp_path, trials=3, runs=1)
    from fruit.commands.run import exit_status

    result, out = _sweep(tmp_path, cluster, profile, time_limit=1.0)  # over at once
    assert result.trained == 0 and result.left == 8 and "time limit reached" in out, out
    last = [line for line in out.splitlines() if line.startswith("[fake]")][-1]
    assert "left 8 of 8" in last and last.endswith("remaining ~0:00:01"), out
    # nothing started or moved on: the same command would end the same way, so `fruit
    # run` ends with 2 and a reason, not with 75 ("go on"): an `until` loop ends
    assert result.stalled and exit_status(result) == 2, out
    assert "no run started, moved on or finished in this call" in out
    assert "the same command goes on" not in out

    result, out = _sweep(tmp_path, cluster, profile)
    assert result.complete, out
    last = [line for line in out.splitlines() if line.startswith("[fake]")][-1]
    assert "left 0 of 8" in last and last.endswith("remaining ~0:00:00"), out


def test_never_more_runs_on_dask_than_worker_slots(tmp_path: Path, cluster, monkeypatch):
    """Dask places a run on a worker when it is submitted and never moves it, so a run
    submitted while both workers were busy could wait behind an hours-long run while the
    other worker idled (it did, in the claims campaign). Runs go to Dask only into free
    slots: at every submission at most one other run is unfinished (2 workers)."""
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"], step_seconds=0.1)
    profile = _profile(tmp_path, trials=3, runs=1, architectures=("Tf",))
    futures, outstanding = [], []
    submit = Sweep.submit

    def counting_submit(self, spec, attempt):
        outstanding.append(1 + sum(not f.done() for f in futures))
        futures.append(submit(self, spec, attempt))
        return futures[-1]

    monkeypatch.setattr(Sweep, "submit", counting_submit)
    result, out = _sweep(tmp_path, cluster, profile)
    assert result.ok and result.trained == 3 + 1, out
    retries = out.count("retrying ")  # after a kernel that died at start-up, seen under load
    assert len(futures) == 4 + retries and len({f.key for f in futures}) == len(futures)
    assert max(outstanding) == 2, outstanding  # 3 before the fix
    assert "done 4 / running 0 / failed 0 / left 0 of 4" in out


def test_the_longest_waiting_run_goes_first(tmp_path: Path, cluster, monkeypatch):
    """With one slot, the order of submission is the order of the runs' expected time
    left: by relative cost while nothing is recorded (Tf+Nd before Tf, though Tf's runs
    are queued first), then by the recorded seconds per epoch; under a time limit, the
    runs expected to finish before it first, then the shortest of those that cannot."""
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    profile = _profile(tmp_path, trials=1, runs=1, architectures=("Tf", "Tf+Nd"))
    order = []
    submit = Sweep.submit

    def recording_submit(self, spec, attempt):  # (a retry, after a flaky kernel start,
        order.append(spec.name)  # submits a run again: the tests read first submissions)
        return submit(self, spec, attempt)

    monkeypatch.setattr(Sweep, "submit", recording_submit)
    monkeypatch.setattr(cluster, "slots", lambda: 1)
    result, out = _sweep(tmp_path, cluster, profile)
    assert result.complete, out
    qf = "question-formation"
    assert order[0] == f"{qf}/Tf+Nd/search-0", order  # Tf/search-0 went first before the fix

    runs = tmp_path / "results" / "runs" / "fake" / qf

    def record_seconds(arch, seconds):  # what its search trial took (1 epoch)
        path = runs / arch / "search-0" / "metrics.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "train_seconds": seconds}))

    def finals_again(**limit) -> list[str]:  # the order the two final runs go to Dask in
        for arch in ("Tf", "Tf+Nd"):
            shutil.rmtree(runs / arch / "final-0")
        order.clear()
        result, out = _sweep(tmp_path, cluster, profile, **limit)
        assert result.complete and result.trained == 2, out
        assert len(order) == 2 + out.count("retrying "), order  # no run submitted twice
        return list(dict.fromkeys(order))

    tf, nd = f"{qf}/Tf/final-0", f"{qf}/Tf+Nd/final-0"
    record_seconds("Tf", 1000.0)
    record_seconds("Tf+Nd", 1.0)
    assert finals_again() == [tf, nd]  # the longest first
    # under a time limit, the runs that can finish before it go first: Tf's final would
    # need 2 epochs x 1000 s, far beyond a 10-minute limit, Tf+Nd's 2 s
    assert finals_again(time_limit=600.0) == [nd, tf]
    # neither fits (Tf+Nd now 500 s per epoch): the one closest to its end goes first
    record_seconds("Tf+Nd", 500.0)
    assert finals_again(time_limit=600.0) == [nd, tf]


def test_under_a_time_limit_a_paused_run_goes_before_a_fresh_one(monkeypatch):
    """A paused run (epochs trained, resume files on this machine only) goes before a
    fresh run when both are expected to finish before the time limit, though the fresh
    one is longer; without a limit the longest still goes first. (In the claims
    campaign two paused runs waited behind fresh ones for a whole step.)"""
    import time as clock

    from fruit.experiments.execution.dispatch import Dispatcher
    from fruit.experiments.planning.plan import RunSpec

    def spec(index):
        return RunSpec("p", "question-formation", "Tf", "final", index, index, 1e-3, 512, 30)

    paused, fresh = spec(1), spec(3)
    trained = {paused.name: 14.0, fresh.name: 0.0}
    per_epoch = 60.0

    class Estimate:  # Progress.run_seconds: seconds per epoch times the epochs left
        def run_seconds(self, s, epochs):
            return per_epoch * max(20.0 - epochs, 1.0)

    queue = Dispatcher(sweep=None, progress=Estimate(), epochs=lambda s: trained[s.name])

    def first(stop_at):
        ranked = sorted([fresh, paused], key=lambda s: queue.rank(s, stop_at))
        return ranked[-1].name  # submit_waiting sorts in reverse

    hours = clock.time() + 3 * 3600.0
    assert first(None) == fresh.name  # longest first: 20 epochs against 6
    assert first(hours) == paused.name  # was fresh.name before the fix
    per_epoch = 1000.0  # the paused run needs 6000 s, the fresh one 20 000 s
    assert first(clock.time() + 6500.0) == paused.name  # only the paused one fits
    assert first(clock.time() + 3000.0) == paused.name  # neither fits: closest to its end


def test_failed_runs_are_retried_then_reported(tmp_path: Path, cluster):
    write_fake_notebook(tmp_path)
    fail = {"question-formation/Tf/search-1": 1, "question-formation/Tf+Sup/search-0": 99}
    write_fake_data(tmp_path / "data", ["question-formation"], fail=fail)
    profile = _profile(tmp_path, trials=2, runs=1)

    result, out = _sweep(tmp_path, cluster, profile, retries=1)
    assert not result.ok, out
    # Tf: search-1 failed once, its retry succeeded; finals ran.
    runs = tmp_path / "results" / "runs" / "fake" / "question-formation"
    assert (runs / "Tf" / "search-1" / "metrics.json").is_file(), out
    assert (runs / "Tf" / "final-0" / "metrics.json").is_file(), out
    assert "retrying question-formation/Tf/search-1 (attempt 2)" in out
    assert (runs / "Tf" / "search-1" / "train.attempt-1.ipynb").is_file()  # failed attempt kept
    # Tf+Sup: search-0 failed twice (1 retry) -> reported by name with its notebook;
    # its sibling trial still ran; no final runs for that pair.
    assert len(result.failures) == 1, out
    [failure] = result.failures
    assert failure.name == "question-formation/Tf+Sup/search-0", out
    assert "fake failure" in failure.message, out
    assert failure.notebook == runs / "Tf+Sup" / "search-0" / "train.ipynb"
    assert failure.notebook.is_file(), out
    assert (runs / "Tf+Sup" / "search-1" / "metrics.json").is_file(), out
    assert not (runs / "Tf+Sup" / "final-0").exists(), out
    assert result.skipped_pairs == ["question-formation/Tf+Sup"]
    assert result.total == 2 * 2 + 1  # the skipped final run is not counted as left
    assert "done 4 / running 0 / failed 1 / left 0 of 5" in out
    assert "FAILED question-formation/Tf+Sup/search-0" in out and str(failure.notebook) in out


def test_a_run_refused_with_a_user_error_is_not_retried(tmp_path: Path, cluster):
    """A FruitError in a run's notebook (bad settings, damaged or unwritable files) is the
    same on every attempt: reported at once, not retried."""
    write_fake_notebook(tmp_path)
    refused = "question-formation/Tf/search-0"
    write_fake_data(tmp_path / "data", ["question-formation"], refuse=[refused])
    profile = _profile(tmp_path, trials=2, runs=1, architectures=("Tf",))

    result, out = _sweep(tmp_path, cluster, profile, retries=2)
    [failure] = result.failures
    assert failure.name == refused and "fake refusal" in failure.message, out
    assert f"retrying {refused}" not in out
    assert f"FAILED {refused} after 1 attempt(s)" in out
    folder = tmp_path / "results" / "runs" / "fake" / refused
    assert (folder / "fake_failures").read_text() == "1"  # the notebook ran once


def test_kernels_get_the_launchers_malloc_settings_not_the_workers(tmp_path: Path, cluster):
    """Dask's nanny gives its workers MALLOC_TRIM_THRESHOLD_=65536 and writes it into the
    os.environ of the process that starts the cluster; kernels started by such workers ran
    twice as slow. Our LocalCluster drops it, and the kernels get the malloc settings the
    launching process had before any cluster started (``allocator``)."""
    import os

    import dask
    from distributed import Client, LocalCluster

    workers = cluster.client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert set(workers.values()) == {None}, workers  # fruit's LocalCluster: not set
    profiling = cluster.client.run(lambda: dask.config.get("distributed.worker.profile.enabled"))
    assert set(profiling.values()) == {False}  # and its workers run without Dask's profiler
    ticks = cluster.client.run(lambda: dask.config.get("distributed.admin.tick.interval"))
    assert set(ticks.values()) == {"1s"}  # nor its 20 ms event-loop check
    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    profile = _profile(tmp_path, trials=1, runs=1, architectures=("Tf",))
    runs = tmp_path / "results" / "runs" / "fake" / "question-formation" / "Tf"

    result, out = _sweep(tmp_path, cluster, profile)
    assert result.ok and result.trained == 2, out
    for folder in ("search-0", "final-0"):
        metrics = json.loads((runs / folder / "metrics.json").read_text())
        assert "MALLOC_TRIM_THRESHOLD_" not in metrics["kernel_malloc"]

    # a plain Dask LocalCluster (Dask's defaults) puts the threshold everywhere
    launcher = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    launcher["MALLOC_ARENA_MAX"] = "2"  # a setting of the user's own, to be kept
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as plain:
        with Client(plain) as client:
            assert set(client.run(lambda: os.environ["MALLOC_TRIM_THRESHOLD_"]).values()) == {
                "65536"
            }
            plain_cluster = type(cluster)(client, "plain LocalCluster", 1, None)
            for folder in runs.iterdir():
                if folder.is_dir():
                    (folder / "metrics.json").unlink()
                    (folder / "checkpoint.pt").unlink()
            result, out = _sweep(tmp_path, plain_cluster, profile, allocator=launcher)
            assert result.ok and result.trained == 2, out
    for folder in ("search-0", "final-0"):
        metrics = json.loads((runs / folder / "metrics.json").read_text())
        assert metrics["kernel_malloc"] == launcher


def test_a_finished_run_whose_config_json_was_edited_is_named_not_counted(tmp_path: Path, cluster):
    """config.json and metrics.json of a finished run are written from the same settings;
    where they disagree one was edited by hand, and the sweep names the folder instead of
    counting the run as complete (issue 34)."""
    import re

    from fruit.errors import FruitError
    from fruit.experiments.planning.run_state import SHARED_SETTINGS

    write_fake_notebook(tmp_path)
    write_fake_data(tmp_path / "data", ["question-formation"])
    profile = _profile(tmp_path, trials=1, runs=1)
    result, out = _sweep(tmp_path, cluster, profile)
    assert result.complete, out
    folder = tmp_path / "results" / "runs" / "fake" / "question-formation" / "Tf" / "final-0"
    metrics = json.loads((folder / "metrics.json").read_text())
    agreeing = {k: metrics[k] for k in SHARED_SETTINGS if k in metrics}
    (folder / "config.json").write_text(json.dumps(agreeing))
    again, out = _sweep(tmp_path, cluster, profile)  # the same records: counted
    assert again.complete and again.found_complete == 4, out

    (folder / "config.json").write_text(json.dumps({**agreeing, "learning_rate": 0.5}))
    message = (
        f"{folder} holds a finished run whose records disagree (learning_rate: 0.5 in "
        f"config.json, {metrics['learning_rate']!r} in metrics.json): one was edited by hand"
    )
    with pytest.raises(FruitError, match=re.escape(message)):
        _sweep(tmp_path, cluster, profile)


def test_the_workers_ignore_ctrl_c_from_their_start_and_after_a_restart(cluster):
    """Ctrl-C in a terminal reaches the LocalCluster's workers too (one process group);
    they must ignore it (fruit run pauses and stops them itself): from their start, as
    inherited while the cluster spawns them, and once restarted by their nanny (a worker
    that died), through the Dask preload (issue 34)."""
    import signal

    def handler():
        return int(signal.getsignal(signal.SIGINT))

    assert set(cluster.client.run(handler).values()) == {int(signal.SIG_IGN)}
    # here: not left ignored (whatever handler an earlier test of the session installed)
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    cluster.client.restart()  # new worker processes, spawned while this one handles SIGINT
    handlers = cluster.client.run(handler)
    assert len(handlers) == 2 and set(handlers.values()) == {int(signal.SIG_IGN)}


def test_progress_counts_runs_that_moved_on_before_their_jobs_end_or_the_limit(
    tmp_path, monkeypatch
):
    """A call is 'stalled' (exit 2) only when nothing moved on: a run that trained and
    then stopped for its job's walltime, or one the time limit cut short after it saved a
    checkpoint in this call (e.g. during its final evaluation), counts as progress."""
    import os
    from types import SimpleNamespace

    from fruit.experiments.execution import schedule as schedule_module
    from fruit.experiments.execution.outcome import SweepResult
    from fruit.experiments.execution.progress import Progress
    from fruit.experiments.execution.schedule import Schedule
    from fruit.experiments.execution.worker import RunOutcome

    monkeypatch.setattr(schedule_module, "retire_worker_of", lambda client, future: None)

    profile = load_profile("smoke")
    said = []
    sweep = SimpleNamespace(
        profile=profile, pairs=list(profile.pairs), results_dir=tmp_path, client=None,
        pausing=lambda: False, say=said.append,
    )  # fmt: skip
    result = SweepResult(total=6, time_limited=True, left=6)
    schedule = Schedule(sweep, result, Progress(6, 1, None, "smoke"))
    spec = schedule.search[profile.pairs[0]][0]
    future = SimpleNamespace(result=lambda: RunOutcome.of(None, 0.0, job_ending=True))
    schedule._on_result(spec, 1, future)  # not started: its job ends too soon
    assert not result.progressed and result.stalled
    moved = RunOutcome.of(None, 42.0, job_ending=True, progressed=True)
    schedule._on_result(spec, 1, SimpleNamespace(result=lambda: moved))
    assert result.progressed and not result.stalled
    assert said[-1].endswith("paused before its job's walltime; goes on in a new job")

    result.progressed = False
    folder = spec.folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / "checkpoint.pt").write_bytes(b"")
    os.utime(folder / "checkpoint.pt", (schedule.started - 60, schedule.started - 60))
    schedule._given_up([spec])  # its checkpoint is older than this call: no progress
    assert not result.progressed
    os.utime(folder / "checkpoint.pt", (schedule.started + 1, schedule.started + 1))
    schedule._given_up([spec])
    assert result.progressed
