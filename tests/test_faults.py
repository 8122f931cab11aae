"""Fault injection: full disks, read-only folders, and a sweep
killed in each of its phases.

* A full disk and a read-only folder are real: a small tmpfs mounted for the test (as
  root; skipped where mounting is not allowed). Each command then ends with one line
  naming the path, never a library's traceback.
* ``fruit run --profile smoke`` is killed (SIGKILL of every process it started) inside
  data preparation, a search run, the selection, a final run and the reports, each call
  going on from where the previous one was killed; the records of the last call must
  equal those of an uninterrupted sweep (every field but timings). The kill points are
  exact: the sweep runs under a small driver that wraps, at run time, the function of
  each phase (data preparation, a run, selection.json, a report notebook) so that it
  kills the whole process group at that moment. Slow-marked: two sweeps and five kills.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
import torch
from test_reporting_fakes import write_run

from fruit import training
from fruit.cli import main as cli_main
from fruit.cli import os_error_line
from fruit.errors import StorageError
from fruit.tasks import get_task
from fruit.tasks.splits import write_task

QF = "question-formation"
REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "train.ipynb"


# ---------------------------------------------------------------- real full and read-only disks


@pytest.fixture
def tmpfs(tmp_path):
    """``make(name, size)`` mounts a tmpfs of ``size`` at tmp_path/name; ``read_only(p)``
    remounts it read-only. Skips where tmpfs cannot be mounted (not root, a container
    without the capability)."""
    mounted = []

    def make(name: str, size: str = "16k") -> Path:
        point = tmp_path / name
        point.mkdir()
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(point)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(point)
        return point

    def read_only(point: Path) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)

    yield make, read_only
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], check=False)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    task = get_task(QF)
    write_task(
        root, task, task.generate(seed=1, sizes={"train": 120, "dev": 20, "test": 20, "gen": 20})
    )
    return root


def train_argv(data_dir: Path, *where: str) -> list[str]:
    return [
        "train", "--task", QF, "--architecture", "Tf", "--d", "8", "--device", "cpu",
        "--data-dir", str(data_dir), "--train-size", "120", "--dev-size", "20",
        "--test-size", "20", "--gen-size", "20", "--checkpoint-every", "60",
        "--max-epochs", "1", "--batch-tokens", "256", "--no-progress", *where,
    ]  # fmt: skip


def one_line(capfd) -> str:
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fruit: error: "), err
    return lines[0]


def test_fruit_train_on_a_full_disk_says_so_in_one_line(tmpfs, data_dir, capfd):
    make, _ = tmpfs
    full = make("full", "12k")  # room for config.json and log.csv, not for checkpoint.pt
    assert cli_main(train_argv(data_dir, "--run-dir", str(full / "run"))) == 2
    line = one_line(capfd)
    assert line.startswith(f"fruit: error: cannot write {full / 'run'}/")
    assert line.endswith(": No space left on device")
    assert not list(full.rglob("*.tmp"))  # no half-written file left behind


def test_a_save_larger_than_the_room_left_is_a_full_disk_too(tmpfs, data_dir, capfd):
    """A checkpoint of a few MB on a disk with less room than that: torch fails with its
    own error ("enforce fail ... unexpected pos"), and removing the half-written file
    frees what it held, so the disk no longer looks full afterwards. Still the one line
    (it was a 39-line traceback). The model's default size makes checkpoint.pt ~2.3 MB."""
    make, _ = tmpfs
    full = make("full", "3m")
    argv = train_argv(data_dir, "--run-dir", str(full / "run"))
    d = argv.index("--d")
    assert cli_main(argv[:d] + argv[d + 2 :]) == 2
    line = one_line(capfd)
    assert (
        line
        == f"fruit: error: cannot write {full / 'run' / 'checkpoint.pt'}: No space left on device"
    )
    assert not list(full.rglob("*.tmp"))


def _finished_pid() -> int:
    """The id of a process that has ended (a writer killed earlier)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(done.stdout)


def test_what_killed_writes_left_is_removed_by_the_next_owner(tmp_path, data_dir):
    """A kill between a temporary file's creation and its rename leaves a (0-byte)
    ``.NAME.~PID@HOST~XXXX.tmp``, a killed data preparation a ``.TASK.~...~.partial``
    folder; the next call that owns the folder removes them, but never a write still in
    progress (its writer runs) nor an untagged one younger than a day."""
    from fruit.io import LEFTOVER_SECONDS
    from fruit.training.data import prepare_data

    host, dead = socket.gethostname(), _finished_pid()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stale = run_dir / f".checkpoint.pt.~{dead}@{host}~k1ll3d00.tmp"
    writing = run_dir / f".best.pt.~{os.getpid()}@{host}~4l1v3000.tmp"  # this process: alive
    old, young = run_dir / ".log.csv.0ld00000.tmp", run_dir / ".config.json.y0ung000.tmp"
    for path in (stale, writing, old, young):
        path.write_bytes(b"")
    os.utime(old, (time.time() - LEFTOVER_SECONDS - 60,) * 2)
    assert cli_main(train_argv(data_dir, "--run-dir", str(run_dir))) == 0
    assert not stale.exists() and not old.exists()
    assert writing.exists() and young.exists()
    assert (run_dir / "metrics.json").is_file()

    root = tmp_path / "data"
    partial = root / f".{QF}.~{dead}@{host}~k1ll3d00.partial"
    (partial / QF).mkdir(parents=True)
    (partial / QF / "train.tsv").write_text("the half of a file")
    sizes = {"train": 200, "dev": 10, "test": 10, "gen": 10}
    assert prepare_data(root, QF, 1, sizes, "generated") == "generated"
    assert sorted(p.name for p in root.iterdir()) == [QF]


def test_fruit_data_on_a_full_disk_says_so_in_one_line(tmpfs, capfd):
    make, _ = tmpfs
    full = make("full", "12k")
    argv = ["data", "--task", QF, "--out", str(full), "--train-size", "2000"]
    assert cli_main([*argv, "--dev-size", "10", "--test-size", "10", "--gen-size", "10"]) == 2
    line = one_line(capfd)
    assert f"cannot write {full / QF}/" in line and line.endswith("No space left on device")
    assert not list(full.rglob("*.tmp"))


def test_read_only_folders(tmpfs, data_dir, tmp_path, capfd):
    make, read_only = tmpfs
    disk = make("disk", "4m")
    finished = disk / "finished"
    assert cli_main(train_argv(data_dir, "--run-dir", str(finished))) == 0
    metrics = json.loads(capfd.readouterr().out)
    unfinished = disk / "unfinished"
    shutil.copytree(finished, unfinished)
    (unfinished / "metrics.json").unlink()
    read_only(disk)
    # a finished run is only read: its metrics, as on a writable disk
    assert cli_main(train_argv(data_dir, "--run-dir", str(finished))) == 0
    assert json.loads(capfd.readouterr().out) == metrics
    # an unfinished one must write: one line naming the file
    assert cli_main(train_argv(data_dir, "--run-dir", str(unfinished))) == 2
    assert one_line(capfd).endswith(f"{unfinished}/log.csv: Read-only file system")
    # fruit report into a read-only folder
    results = tmp_path / "results"
    full = {"test": 0.9, "hierarchical": 0.5, "linear": 0.25, "log_ratio": 0.69}
    write_run(results, "quick", QF, "Tf", 0, full, dict(full, test=None))
    argv = ["report", "--results", str(results), "--profile", "quick", "--out", str(disk / "t")]
    assert cli_main([*argv, "--no-figures", "--no-paper"]) == 2
    assert one_line(capfd).endswith(": Read-only file system")
    # fruit run refuses up front (fruit.experiments.clusters.checks)
    from fruit.experiments.clusters.checks import check_writable

    with pytest.raises(StorageError, match=f"cannot write {disk / 'results'} .*Read-only file"):
        check_writable(disk / "results")


def test_an_os_error_without_a_path_is_still_one_line():
    import errno

    assert os_error_line(OSError(errno.ENOSPC, "No space left on device")) == (
        "a file could not be written: No space left on device"
    )
    error = OSError(errno.EXDEV, "Invalid cross-device link", "/a", None, "/b")
    assert os_error_line(error) == "/a -> /b: Invalid cross-device link"


def test_run_options_are_checked_once_before_the_sweep(tmp_path):
    from fruit.errors import FruitError
    from fruit.experiments.clusters.checks import check_run_options
    from fruit.experiments.options import RunOptions

    def options(**kw):
        base = dict(device="cpu", results=str(tmp_path / "r"), figures=str(tmp_path / "f"))
        return RunOptions(**{**base, **kw})

    check_run_options(options())
    with pytest.raises(FruitError, match="unknown device 'gpu'; valid choices: auto, cpu, cuda"):
        check_run_options(options(device="gpu"))
    if not torch.cuda.is_available():
        with pytest.raises(FruitError, match="CUDA is not available on this machine"):
            check_run_options(options(device="cuda"))
        # runs on a scheduler's workers: only the spelling is checked here
        check_run_options(options(device="cuda", scheduler="tcp://x:1"))
    with pytest.raises(FruitError, match="--workers must be an integer from 1 to"):
        check_run_options(options(workers=10**5))
    (tmp_path / "file").write_text("x")
    with pytest.raises(FruitError, match="is not a folder"):
        check_run_options(options(results=str(tmp_path / "file" / "results")))


# ---------------------------------------------------------------- a sweep killed in each phase

DRIVER = r'''
import os, signal, sys, threading, time
from pathlib import Path

PHASE = sys.argv[1]


def die():
    """Everything this sweep started, at once (its kernels are killed by the test)."""
    os.killpg(os.getpgid(0), signal.SIGKILL)


def die_when(ready):
    def watch():
        while not ready():
            time.sleep(0.02)
        die()

    threading.Thread(target=watch, daemon=True).start()


import fruit.experiments.execution.reports as reports_module
import fruit.experiments.execution.schedule as schedule_module
import fruit.experiments.execution.sweep as sweep_module

if PHASE == "data":  # on a worker: two files of the staging folder written, then killed
    # (the sweep submits _prepare_data_on_worker: replaced here, it travels to the worker
    # by value, as execute_then_die below; patching prepare_data in this process did not)

    def prepare_then_die(*args, **kwargs):
        import fruit.tasks.splits as splits
        from fruit.training import data as real

        write, written = splits.write_tsv, []

        def write_then_die(path, examples):
            write(path, examples)
            written.append(path)
            if len(written) == 2:
                die()

        splits.write_tsv = write_then_die
        return real.prepare_data(*args, **kwargs)

    sweep_module._prepare_data_on_worker = prepare_then_die

if PHASE in ("search", "final"):  # on a worker: killed once the run wrote a checkpoint

    def execute_then_die(name, notebook, parameters, *rest):
        from fruit.experiments.execution.worker import execute_run

        if parameters["phase"] == PHASE:
            folder = Path(parameters["run_dir"])
            die_when(lambda: (folder / "checkpoint.pt").exists())
        return execute_run(name, notebook, parameters, *rest)

    sweep_module.execute_run = execute_then_die

if PHASE == "selection":  # in the sweep: selection.json written, no final run submitted

    write_record = schedule_module._write_if_changed

    def write_then_die(path, record):
        write_record(path, record)
        if path.name == "selection.json":
            die()

    schedule_module._write_if_changed = write_then_die

if PHASE == "reports":  # on a worker: killed once the report notebook wrote a table

    def report_then_die(source, executed, parameters, *rest):
        from fruit.experiments.execution.worker import execute_report

        if Path(source).stem == "report":
            tables = Path(parameters["tables_dir"]) / parameters["profile"]
            die_when(lambda: tables.is_dir() and any(tables.iterdir()))
        return execute_report(source, executed, parameters, *rest)

    reports_module.execute_report = report_then_die

from fruit.cli import main

sys.exit(main(["run", *sys.argv[2:]]))
'''


def sweep_argv(home: Path) -> list[str]:
    from fruit.commands import run as run_command

    argv = [
        "--profile", "smoke", "--architecture", "Tf", "--workers", "2", "--device", "cpu",
        "--notebook", str(NOTEBOOK), "--results", str(home / "results"),
        "--data-dir", str(home / "data"), "--figures", str(home / "figures"),
    ]  # fmt: skip
    if "no-dashboard" in inspect.getsource(run_command):
        argv.append("--no-dashboard")
    return argv


def sweep(home: Path, phase: str | None, token: str, timeout: float = 900):
    """``fruit run`` (under the driver, killed in ``phase``, when given); then every
    process the call started is gone (kernels run in sessions of their own)."""
    env = {**os.environ, "FRUIT_FAULT_TOKEN": token, "OMP_NUM_THREADS": "1"}
    if phase is None:
        command = [sys.executable, "-m", "fruit", "run", *sweep_argv(home)]
    else:
        command = [sys.executable, "-c", DRIVER, phase, *sweep_argv(home)]
    try:
        done = subprocess.run(
            command, cwd=home, env=env, capture_output=True, text=True, timeout=timeout,
            start_new_session=True,
        )  # fmt: skip
    finally:
        kill_leftovers(token)
    return done


def kill_leftovers(token: str) -> None:
    """SIGKILL every process whose environment carries ``token`` (orphaned kernels)."""
    victims = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get("FRUIT_FAULT_TOKEN") == token:
                process.send_signal(signal.SIGKILL)
                victims.append(process)
    psutil.wait_procs(victims, timeout=30)


def records(home: Path) -> dict[str, object]:
    """What a sweep leaves that must not depend on interruptions: every record but its
    timings (train_seconds, evaluation_seconds, log.csv's seconds), provenance and the absolute data path."""
    runs = home / "results" / "runs" / "smoke"
    found: dict[str, object] = {}
    for path in sorted(runs.rglob("*")):
        name = str(path.relative_to(runs))
        if path.name == "metrics.json":
            found[name] = {
                k: v
                for k, v in json.loads(path.read_text()).items()
                if k not in ("train_seconds", "evaluation_seconds")
            }
        elif path.name == "config.json":
            drop = {"provenance", "data_dir"}
            found[name] = {k: v for k, v in json.loads(path.read_text()).items() if k not in drop}
        elif path.name in ("selection.json", "plan.json"):
            found[name] = json.loads(path.read_text())
        elif path.name == "log.csv":
            found[name] = [row.rsplit(",", 1)[0] for row in path.read_text().splitlines()]
    for path in sorted((home / "data").glob(f"{QF}/*")):
        found[f"data/{path.name}"] = path.read_bytes()
    for path in sorted((home / "results" / "tables" / "smoke").glob("*.*")):
        if path.suffix in (".md", ".csv", ".tex"):
            found[f"tables/{path.name}"] = path.read_text()
    return found


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_sweep_killed_in_each_phase_ends_with_the_uninterrupted_records(tmp_path):
    assert NOTEBOOK.is_file(), f"{NOTEBOOK} is missing: every sweep executes it"
    token = uuid.uuid4().hex
    calm, killed = tmp_path / "calm", tmp_path / "killed"
    calm.mkdir()
    killed.mkdir()
    whole = sweep(calm, None, token)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    expected = records(calm)
    assert any(k.endswith("final-0/metrics.json") for k in expected)
    assert any(k.startswith("tables/") for k in expected)

    runs = killed / "results" / "runs" / "smoke" / QF / "Tf"
    evidence = {
        # killed inside the staging folder: no task folder yet, a partial one left
        "data": lambda: (
            not (killed / "data" / QF).exists() and any((killed / "data").glob(f".{QF}.*.partial"))
        ),
        # a search run stopped after a checkpoint, before its metrics
        "search": lambda: any(
            (p / "checkpoint.pt").exists() and not (p / "metrics.json").exists()
            for p in runs.glob("search-*")
        ),
        "selection": lambda: (
            (runs / "selection.json").exists() and not (runs / "final-0" / "metrics.json").exists()
        ),
        "final": lambda: (
            (runs / "final-0" / "checkpoint.pt").exists()
            and not (runs / "final-0" / "metrics.json").exists()
        ),
        "reports": lambda: (runs / "final-0" / "metrics.json").exists(),
    }
    for phase, seen in evidence.items():
        out = sweep(killed, phase, token)
        assert out.returncode == -signal.SIGKILL, f"{phase}: not killed\n{out.stdout}{out.stderr}"
        assert seen(), f"killed, but not in the {phase} phase:\n{out.stdout}"
    last = sweep(killed, None, token)
    assert last.returncode == 0, last.stdout + last.stderr
    # the leftovers of the kills (a .partial data folder, 0-byte .tmp files) are gone
    # from the folders the sweep owns (the data, the runs)
    owned = [killed / "data", killed / "results" / "runs"]
    left = [p for f in owned for p in f.rglob(".*") if p.name.endswith((".tmp", ".partial"))]
    assert not left, left
    got = records(killed)
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert got[key] == expected[key], key
    assert not any("warnings" in v for v in got.values() if isinstance(v, dict))

    # the finished sweep on a read-only results folder: one line naming the folder
    if os.geteuid() == 0:
        point = tmp_path / "ro"
        point.mkdir()
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(point)], capture_output=True
        )
        if mounted.returncode == 0:
            try:
                shutil.copytree(killed / "results", point / "results")
                shutil.copytree(killed / "data", point / "data")
                subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)
                again = sweep(point, None, token, timeout=300)
                assert again.returncode != 0
                assert "Traceback" not in again.stdout + again.stderr, again.stderr
                line = again.stderr.strip().splitlines()[-1]
                assert line.startswith("fruit: error: cannot write ") and line.endswith(
                    "Read-only file system"
                ), again.stderr
            finally:
                subprocess.run(["umount", "-l", str(point)], check=False)


def test_training_data_of_the_fault_tests_is_valid(data_dir):
    # the fixture data is what the runs above read: it passes every input check
    config = training.RunConfig(task=QF, architecture="Tf", d=8, data_dir=str(data_dir),
                                train_size=120, dev_size=20, test_size=20, gen_size=20,
                                checkpoint_every=60, max_epochs=1, device="cpu")  # fmt: skip
    assert len(training.load_data(training.resolve_config(config)).train) == 120


@pytest.mark.slow
def test_a_sweep_run_with_a_damaged_checkpoint_starts_again_in_the_same_attempt(data_dir, tmp_path):
    """What a worker executes for a run (the train notebook through papermill): a damaged
    checkpoint is one attempt that restarts the run, not three failing attempts."""
    from fruit.experiments.execution.worker import execute_run
    from fruit.io import RUNNER_LOG

    run_dir = tmp_path / "run"
    parameters = dict(
        task=QF, architecture="Tf", phase="final", index=0, seed=3, profile="smoke",
        learning_rate=1e-3, batch_tokens=256, train_size=120, dev_size=20, test_size=20,
        gen_size=20, checkpoint_every=60, max_epochs=1, d=8, data_dir=str(data_dir),
        data_seed=1, data_source="generated", generate_data=False, run_dir=str(run_dir),
        output_dir=str(tmp_path), device="cpu", threads=1,
    )  # fmt: skip
    first, _ = execute_run("qf/Tf/final-0", str(NOTEBOOK), parameters, attempt=1, threads=1)
    (run_dir / "metrics.json").unlink()
    checkpoint = run_dir / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])  # truncated
    again, _ = execute_run("qf/Tf/final-0", str(NOTEBOOK), parameters, attempt=2, threads=1)
    assert "checkpoint.pt could not be restored" in again["warnings"][0]
    timing = ("train_seconds", "evaluation_seconds", "warnings")
    assert {k: v for k, v in again.items() if k not in timing} == {
        k: v for k, v in first.items() if k not in timing
    }
    log = (run_dir / RUNNER_LOG).read_text()
    assert "attempt 2: warning: " in log and "attempt 2 finished" in log
