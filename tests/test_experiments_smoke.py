"""`fruit run --profile smoke` with the real train notebook: on a LocalCluster (then again:
nothing is retrained), and through a real `dask scheduler` + two `dask worker`s on
127.0.0.1 with the same metrics."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from test_experiments_cluster import dask_processes, fruit_run

from fruit.profiles import load_profile

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "train.ipynb"


def _metrics(results: Path, profile: str = "smoke") -> dict[str, dict]:
    runs = results / "runs" / profile
    found = {}
    for path in sorted(runs.glob("*/*/*/metrics.json")):
        m = json.loads(path.read_text())
        m.pop("train_seconds"), m.pop("evaluation_seconds")
        found[str(path.parent.relative_to(runs))] = m
    return found


@pytest.fixture(scope="module")
def local_smoke(tmp_path_factory):
    """The smoke profile on a 2-worker LocalCluster, tables and figures included."""
    assert NOTEBOOK.is_file(), f"{NOTEBOOK} is missing: every sweep executes it"
    home = tmp_path_factory.mktemp("smoke")
    start = time.monotonic()
    first = fruit_run(
        "--profile", "smoke", "--workers", "2", "--device", "cpu", "--notebook", str(NOTEBOOK),
        cwd=home, timeout=900,
    )  # fmt: skip
    seconds = time.monotonic() - start
    assert first.returncode == 0, first.stdout + first.stderr
    print(f"\nsmoke profile, first run: {seconds:.1f} s")
    return home, first, seconds


def test_smoke_profile_runs_then_finds_everything_complete(local_smoke):
    home, first, _ = local_smoke
    profile = load_profile("smoke")
    n_runs = (
        len(profile.tasks)
        * len(profile.architectures)
        * (profile.search_trials + profile.final_runs)
    )
    assert f"runs: {n_runs} trained, 0 found complete, 0 failed, of {n_runs}" in first.stdout
    metrics = _metrics(home / "results")
    assert len(metrics) == n_runs
    assert all(m["status"] in ("complete", "diverged") for m in metrics.values())
    # the final runs use the winning search setting (lowest best validation cross-entropy)
    for task in profile.tasks:
        for arch in profile.architectures:
            trials = [metrics[f"{task}/{arch}/search-{i}"] for i in range(profile.search_trials)]
            best = min(trials, key=lambda m: m["best_validation_cross_entropy"])
            final = metrics[f"{task}/{arch}/final-0"]
            assert (final["learning_rate"], final["batch_tokens"]) == (
                best["learning_rate"],
                best["batch_tokens"],
            )
    # every run leaves its executed notebook; reports were made and say they are reduced-scale
    assert all((home / "results/runs/smoke" / name / "train.ipynb").is_file() for name in metrics)
    assert list((home / "results/tables/smoke").glob("*.md"))
    assert list((home / "figures/smoke").glob("*.png"))
    assert "reduced-scale profile: smoke" in "".join(
        p.read_text() for p in (home / "results/tables/smoke").glob("*.md")
    )

    stamps = {p: p.stat().st_mtime_ns for p in (home / "results/runs/smoke").rglob("*.*")}
    start = time.monotonic()
    again = fruit_run(
        "--profile", "smoke", "--workers", "2", "--device", "cpu", "--notebook", str(NOTEBOOK),
        "--skip-reports", cwd=home, timeout=600,
    )  # fmt: skip
    seconds = time.monotonic() - start
    print(f"smoke profile, second run: {seconds:.1f} s")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"runs: 0 trained, {n_runs} found complete, 0 failed" in again.stdout
    changed = [p for p, t in stamps.items() if p.stat().st_mtime_ns != t and p.name != "plan.json"]
    assert not changed, f"a complete run was touched: {changed}"


def _half_written(results: Path) -> list[Path]:
    """Temporary files of atomic writes, and records that do not parse."""
    bad = [p for p in results.rglob("*.tmp")]
    for path in results.rglob("*.json"):
        try:
            json.loads(path.read_text())
        except ValueError:
            bad.append(path)
    return bad


# The smoke profile with 4 search trials a pair: 10 runs, more than one call under the
# shortest --time-limit takes on one worker (a run is 8-25 s here, mostly its kernel's start)
LOOP_PROFILE = (
    (REPO / "lib" / "fruit" / "profiles" / "smoke.toml")
    .read_text()
    .replace('name = "smoke"', 'name = "smoke-loop"')
    .replace("trials = 2", "trials = 4")
)


@pytest.mark.timeout(1800)  # several sweeps; minutes on a loaded machine
def test_an_until_loop_at_the_shortest_time_limit_ends_with_the_uninterrupted_records(
    tmp_path: Path,
):
    """`until fruit run ... --time-limit 2m; [ $? -ne 75 ]; do :; done` at the documented
    minimum ends, with exit 0 and the records of an uninterrupted sweep: every call
    under the limit starts and moves on at least one run (exit 75), until none is left.
    The loop's data folder holds the same files without their data.json (a user's own
    copy): the sweep says so, and its records claim no data seed, where the uninterrupted
    sweep's name the seed its data.json records."""
    from fruit.commands.run import EXIT_PAUSED, MIN_TIME_LIMIT

    assert "trials = 4" in LOOP_PROFILE and '"smoke-loop"' in LOOP_PROFILE
    profile = tmp_path / "smoke-loop.toml"
    profile.write_text(LOOP_PROFILE)
    common = ("--profile", str(profile), "--device", "cpu", "--notebook", str(NOTEBOOK))
    whole = tmp_path / "whole" / "results"
    out = fruit_run(*common, "--workers", "2", "--results", str(whole), "--skip-reports",
                    cwd=tmp_path, timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr

    cwd, results = tmp_path / "cwd", tmp_path / "x" / "results"
    own = cwd / "data" / "smoke-loop"
    shutil.copytree(tmp_path / "data" / "smoke-loop", own)  # the sweep's data, copied
    (own / "question-formation" / "data.json").unlink()  # without its record
    limit = f"{MIN_TIME_LIMIT / 60:g}m"  # the documented minimum (README, --help)
    assert limit == "2m"
    calls = []
    while True:  # the documented loop: again while the exit status is 75
        start = time.monotonic()
        out = fruit_run(*common, "--workers", "1", "--results", str(results),
                        "--time-limit", limit, cwd=cwd, timeout=600)  # fmt: skip
        seconds = time.monotonic() - start
        assert not _half_written(results), out.stdout
        calls.append((seconds, out.stdout))
        if out.returncode != EXIT_PAUSED:
            break
        assert "time limit reached" in out.stdout and "tables and figures not made" in out.stdout
        # the limit counts from the command's start; allow the interpreter's start-up
        assert seconds < MIN_TIME_LIMIT + 5, out.stdout
        assert len(calls) < 8, "the loop does not end: " + out.stdout
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(calls) >= 2, "the limit never bit: give the loop's profile more runs"
    assert _metrics(results, "smoke-loop") == _metrics(whole, "smoke-loop")
    assert "data question-formation: found without data.json" in calls[0][1]
    for folder in (results / "runs" / "smoke-loop").glob("*/*/*-*"):
        config = json.loads((folder / "config.json").read_text())
        made = json.loads(
            (
                whole
                / "runs"
                / "smoke-loop"
                / folder.relative_to(results / "runs" / "smoke-loop")
                / "config.json"
            ).read_text()
        )
        assert (config["data_seed"], config["data_source"]) == (None, "unrecorded"), folder
        assert isinstance(made["data_seed"], int) and made["data_source"] == "generated"
    # everything went to the folders named (--results) or defaulted (data/ in the working
    # folder; figures/ beside the results, never the working folder's)
    assert sorted(p.name for p in cwd.iterdir()) == ["data"]
    assert sorted(p.name for p in results.parent.iterdir()) == ["figures", "results"]
    assert list((results.parent / "figures" / "smoke-loop").glob("*.png"))
    assert (results / "tables" / "smoke-loop" / "claims.md").is_file()


@pytest.mark.slow
def test_smoke_through_a_dask_scheduler_gives_the_same_metrics(local_smoke, tmp_path: Path):
    home, _, _ = local_smoke
    with dask_processes(tmp_path) as address:
        remote = fruit_run(
            "--profile", "smoke", "--scheduler", address, "--device", "cpu", "--notebook", str(NOTEBOOK),
            "--results", str(tmp_path / "results"), "--data-dir", str(tmp_path / "data"), "--skip-reports",
            cwd=home, timeout=900,
        )  # fmt: skip
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert f"Dask scheduler {address} (2 workers)" in remote.stdout
    # same seeds, freshly generated data (same data seed): the same numbers
    assert (tmp_path / "data/question-formation/train.tsv").read_text() == (
        home / "data/smoke/question-formation/train.tsv"
    ).read_text()
    assert _metrics(tmp_path / "results") == _metrics(home / "results")


# A longer run than smoke's, so that a worker can be killed in the middle of it. Its own
# name: the sweep gives the notebook every size, so no shipped profile is needed.
LONGER = """
name = "longer"
seed = 5
tasks = ["question-formation"]
architectures = ["Tf"]
[data]
train = 2000
dev = 40
test = 40
gen = 40
[search]
trials = 0
[final]
runs = 1
max_epochs = 3
batch_tokens = 512
learning_rate = 1e-3
[training]
checkpoint_every = 200
"""


@pytest.mark.slow
def test_killed_worker_resumes_the_real_run_from_its_checkpoint(tmp_path: Path):
    import os
    import signal
    import subprocess
    import sys

    import nbformat
    import psutil

    assert NOTEBOOK.is_file(), f"{NOTEBOOK} is missing: every sweep executes it"
    (tmp_path / "longer.toml").write_text(LONGER)
    common = ["--profile", str(tmp_path / "longer.toml"), "--device", "cpu", "--notebook", str(NOTEBOOK),
              "--data-dir", str(tmp_path / "data"), "--skip-reports"]  # fmt: skip
    # the same run, never interrupted
    calm = fruit_run(*common, "--workers", "1", "--results", str(tmp_path / "calm"), timeout=900)
    assert calm.returncode == 0, calm.stdout + calm.stderr

    results = tmp_path / "results"
    victim = results / "runs/longer/question-formation/Tf/final-0"
    with dask_processes(tmp_path) as address:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "fruit", "run", *common, "--results", str(results), "--scheduler", address],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 300
            while not (victim / "checkpoint.pt").is_file():
                assert time.monotonic() < deadline and sweep.poll() is None, (
                    "run never checkpointed"
                )
                time.sleep(0.1)
            worker_pid = int(
                (victim / "runner.log").read_text().split("worker pid ")[1].split(")")[0]
            )
            kernels = psutil.Process(worker_pid).children(recursive=True)
            os.kill(worker_pid, signal.SIGKILL)
            _, alive = psutil.wait_procs(kernels, timeout=15)
            assert not alive, f"kernel processes outlived their worker: {alive}"
            assert not (victim / "metrics.json").exists(), "killed too late: the run had finished"
            out, _ = sweep.communicate(timeout=600)
        finally:
            if sweep.poll() is None:
                sweep.kill()
                sweep.wait()
    assert sweep.returncode == 0, out
    log = (victim / "runner.log").read_text()
    assert "no checkpoint, starting fresh" in log and "resuming from checkpoint.pt" in log
    resumed = nbformat.read(victim / "train.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in resumed.cells for o in c.get("outputs", []))
    assert "(resuming)" in text  # the notebook's own account: it picked up the checkpoint
    # nothing lost or corrupted: the resumed run ends exactly like the uninterrupted one
    m = json.loads((victim / "metrics.json").read_text())
    c = json.loads(
        (tmp_path / "calm/runs/longer/question-formation/Tf/final-0/metrics.json").read_text()
    )
    for timing in ("train_seconds", "evaluation_seconds"):
        m.pop(timing), c.pop(timing)
    assert m == c
    import csv

    rows = list(csv.DictReader(open(victim / "log.csv")))
    seen = [int(r["examples_seen"]) for r in rows]
    assert seen == sorted(set(seen)) and len(rows) >= 3


@pytest.mark.timeout(900)
@pytest.mark.parametrize("how", ["SIGTERM to the command", "Ctrl-C: SIGINT to its process group"])
def test_a_signal_pauses_the_sweep_and_the_next_call_finishes_it(local_smoke, tmp_path, how):
    """SIGTERM to `fruit run` (kill PID; Slurm before a job's time limit), or Ctrl-C in a
    terminal, which sends SIGINT to the whole process group, the LocalCluster's workers
    included: no run starts, running ones pause resumably, the command ends within 30 s
    without a traceback and says it paused in its exit status (EXIT_PAUSED); the next call
    finishes with the metrics of the uninterrupted sweep. (Before the workers ignored
    SIGINT, Ctrl-C killed them with a traceback each and the sweep waited for ever.)"""
    from fruit.commands.run import EXIT_PAUSED

    home, _, _ = local_smoke
    results = tmp_path / "results"
    command = [
        sys.executable, "-m", "fruit", "run", "--profile", "smoke", "--workers", "2",
        "--device", "cpu", "--notebook", str(NOTEBOOK), "--results", str(results),
        "--architecture", "Tf+Sup", "--skip-reports",
    ]  # fmt: skip
    signum = signal.SIGTERM if how.startswith("SIGTERM") else signal.SIGINT

    def send(proc) -> None:
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)

    proc, out, seconds = _signalled(
        command, home, lambda: list(results.glob("runs/smoke/*/*/*/checkpoint.pt")),
        "run checkpointed", send,
    )  # fmt: skip
    assert proc.returncode == EXIT_PAUSED, out
    assert seconds < 30, f"ended {seconds:.0f} s after the signal:\n{out}"
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    name = signal.Signals(signum).name
    assert f"{name}: pausing every run" in out and "paused on request" in out, out
    assert not _half_written(results)
    assert not (results / "runs" / "smoke" / "PAUSE").exists()
    gone, alive = psutil.wait_procs(_group(proc.pid), timeout=15)
    assert not alive, f"processes of the sweep outlived it: {alive}"
    ours = {
        k: v
        for k, v in _metrics(home / "results").items()
        if k.startswith("question-formation/Tf+Sup/")
    }
    assert len(_metrics(results)) < len(ours) == 3

    again = fruit_run(*command[4:], cwd=home, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "paused on request" not in again.stdout
    assert _metrics(results) == ours


@pytest.mark.timeout(900)
def test_a_second_sigterm_stops_at_once_with_143_in_one_line(local_smoke, tmp_path):
    """The first SIGTERM pauses; a second one, before the runs have paused, stops at once:
    the cluster is closed on the way out (no process left, no leaked-semaphore warning),
    one line says so, and the exit status is 143 = 128 + SIGTERM (README's table)."""
    home, _, _ = local_smoke
    results = tmp_path / "results"
    command = [
        sys.executable, "-m", "fruit", "run", "--profile", "smoke", "--workers", "2",
        "--device", "cpu", "--notebook", str(NOTEBOOK), "--results", str(results),
        "--architecture", "Tf+Sup", "--skip-reports",
    ]  # fmt: skip

    def send(proc) -> None:  # the second signal is the one timed
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)

    proc, out, seconds = _signalled(
        command, home, lambda: list(results.glob("runs/smoke/*/*/*/runner.log")),
        "run started", send,
    )  # fmt: skip
    assert proc.returncode == 128 + signal.SIGTERM == 143, out
    assert seconds < 30, f"ended {seconds:.0f} s after the second signal:\n{out}"
    assert "fruit: stopped at once by a second SIGTERM" in out, out
    assert "Traceback" not in out and "leaked semaphore" not in out, out
    gone, alive = psutil.wait_procs(_group(proc.pid), timeout=15)
    assert not alive, f"processes of the sweep outlived it: {alive}"


@pytest.mark.timeout(900)
def test_ctrl_c_during_the_reports_stops_them_and_exits_75(local_smoke, tmp_path):
    """Every run recorded, the report notebook running: Ctrl-C stops the reports within
    seconds (not when they end), says how to make them, and exits 75 (the same command
    goes on: here, with the reports); nothing is half-written, no process is left."""
    from fruit.commands.run import EXIT_PAUSED

    home, _, _ = local_smoke
    notebooks = _planted_report(tmp_path / "nb", "import time; time.sleep(600)", at=1)
    tables = tmp_path / "results" / "tables"
    results = tmp_path / "results"
    shutil.copytree(home / "results" / "runs", results / "runs")
    command = [
        sys.executable, "-m", "fruit", "run", "--profile", "smoke", "--workers", "1",
        "--device", "cpu", "--notebook", str(notebooks / "train.ipynb"),
        "--results", str(results),
    ]  # fmt: skip
    # papermill writes the executed copy as it starts the kernel
    executed = results / "notebooks" / "smoke" / "report.ipynb"

    def send(proc) -> None:
        time.sleep(3)  # into the planted cell
        os.killpg(proc.pid, signal.SIGINT)

    proc, out, seconds = _signalled(command, home, executed.exists, "report started", send)
    assert proc.returncode == EXIT_PAUSED, out
    assert seconds < 30, f"ended {seconds:.0f} s after Ctrl-C:\n{out}"
    assert "SIGINT: stopping the reports" in out and "pausing every run" not in out, out
    assert "reports stopped: every run is recorded" in out and "fruit report" in out, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert not list(tables.rglob("*.tmp")) and not _half_written(results)
    gone, alive = psutil.wait_procs(_group(proc.pid), timeout=15)
    assert not alive, f"processes of the sweep outlived it: {alive}"


@pytest.mark.timeout(900)
def test_the_time_limit_stops_the_reports_too(local_smoke, tmp_path):
    """Every run recorded, a report notebook slower than the limit: the reports stop at the
    time limit's end, as at a signal (how to make them), not when they end; as the reports
    were all this call had to do, the same command would end the same way: exit 2, not
    75 (a loop of `until fruit run ...` would never end)."""
    from fruit.commands.run import MIN_TIME_LIMIT

    home, _, _ = local_smoke
    notebooks = _planted_report(tmp_path / "nb", "import time; time.sleep(600)", at=1)
    results = tmp_path / "results"
    shutil.copytree(home / "results" / "runs", results / "runs")
    command = [
        sys.executable, "-m", "fruit", "run", "--profile", "smoke", "--workers", "1",
        "--device", "cpu", "--notebook", str(notebooks / "train.ipynb"),
        "--results", str(results), "--time-limit", f"{MIN_TIME_LIMIT:g}",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, cwd=home, capture_output=True, text=True, timeout=400)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert time.monotonic() - started < MIN_TIME_LIMIT + 60, out  # not the sleep's 600 s
    assert "reports stopped: every run is recorded" in out, out
    hint = f"--results {results} --out {results / 'tables'} --figures {tmp_path / 'figures'}"
    assert hint in out, out  # fruit report writes where the sweep would have
    assert "the reports did not finish under --time-limit 120" in out, out
    assert "Traceback" not in out, out
    assert not _half_written(results)


def _signalled(command: list[str], cwd: Path, ready, what: str, send):
    """Start ``command`` (a ``fruit run``) in a process group of its own, as a terminal's
    foreground job; once ``ready()`` holds (within 300 s, else "no <what>"), ``send(proc)``
    signals it. Returns the process, its output and the seconds from the end of
    ``send`` to the command's end (at most 120); the group is killed if it outlives that."""
    proc = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, f"no {what}"
            time.sleep(0.1)
        send(proc)
        sent = time.monotonic()
        out = proc.communicate(timeout=120)[0].decode()
        seconds = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc, out, seconds


def _planted_report(folder: Path, source: str, at: int | None = None) -> Path:
    """``folder`` with the train notebook and a report notebook that runs ``source`` in a
    cell of its own (inserted at ``at``; None: last); returns ``folder``."""
    folder.mkdir()
    shutil.copy(NOTEBOOK, folder / "train.ipynb")
    report = json.loads((NOTEBOOK.parent / "report.ipynb").read_text())
    cell = {"cell_type": "code", "id": "planted", "metadata": {}, "execution_count": None,
            "outputs": [], "source": [source]}  # fmt: skip
    report["cells"].insert(len(report["cells"]) if at is None else at, cell)
    (folder / "report.ipynb").write_text(json.dumps(report))
    return folder


def _group(pgid: int) -> list[psutil.Process]:
    """The processes still in process group ``pgid``."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(process.pid) == pgid:
                found.append(process)
    return found


def test_a_failing_report_stage_exits_1_in_one_line(local_smoke, tmp_path: Path):
    """Every run finished, then the report fails: exit status 1 (2 is for bad input) with
    one `fruit: error:` line naming the failure, and no half-written file left."""
    home, _, _ = local_smoke
    notebooks = _planted_report(tmp_path / "nb", "raise ValueError('planted report failure')")
    out = fruit_run(
        "--profile", "smoke", "--workers", "1", "--device", "cpu",
        "--notebook", str(notebooks / "train.ipynb"), cwd=home, timeout=600,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("fruit: error:")]
    assert len(errors) == 1 and "planted report failure" in errors[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not _half_written(home / "results") and not list((home / "figures").rglob("*.tmp"))
