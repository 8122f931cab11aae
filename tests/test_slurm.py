"""`fruit run --cluster slurm` through a real Slurm: the smoke sweep in one batch job gives
the records of a LocalCluster sweep; so does a sweep whose only job is cancelled mid-run
(a new job replaces it), one whose jobs' walltime is shorter than the sweep (each run
pauses before its job ends and goes on in the next), one paused by SIGTERM while a run
waits for a worker (it ends within a minute; the same command resumes), the batch
script of docs/cluster.md, paused by its signal and submitted again, and one started
while the controller is down (its jobs are submitted once it is back). An unknown
partition and more memory than the node has end `fruit run` in one line. None leaves a
job or worker behind.

Needs `sbatch` on PATH and a Slurm that answers `sinfo`; on a Debian machine, as root,
`scripts/start-slurm.sh` starts a single-node one on 127.0.0.1 (docs/cluster.md). Skipped
elsewhere. Everything it writes (results, data, figures, Dask config, job logs) is under
pytest's temporary folder; every address is the loopback one.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from test_experiments_cluster import fruit_run

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "train.ipynb"
DOCS = REPO / "docs" / "cluster.md"
ONE_PAIR = ("--architecture", "Tf")  # 3 of the smoke profile's 6 runs: the shorter tests

# the sweeps through a loaded machine take minutes each (pytest-timeout default: 300 s)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _slurm_answers() -> str | None:
    """Why Slurm cannot be used here (None: it can)."""
    if shutil.which("sbatch") is None:
        return "no sbatch on PATH (scripts/start-slurm.sh starts a local Slurm)"
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"sinfo does not answer ({e}); scripts/start-slurm.sh starts a local Slurm"
    said = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["nothing"]
    if done.returncode != 0:
        return f"Slurm does not answer (sinfo: {said[0]}); scripts/start-slurm.sh starts one"
    if not any(s.startswith(("idle", "mix")) for s in done.stdout.split()):
        return f"Slurm has no idle node (sinfo: {said[0]}); scripts/start-slurm.sh starts one"
    return None


def _sweep(home: Path, *where: str, env: dict | None = None) -> subprocess.CompletedProcess:
    home.mkdir(parents=True, exist_ok=True)
    return fruit_run(
        "--profile", "smoke", "--device", "cpu", "--notebook", str(NOTEBOOK), "--skip-reports",
        "--results", str(home / "results"), "--data-dir", str(home / "data"),
        "--figures", str(home / "figures"), "--no-dashboard", *where,
        cwd=home, timeout=1500, env=env,
    )  # fmt: skip


def _runs(home: Path, profile: str = "smoke") -> dict[str, Path]:
    runs = home / "results" / "runs" / profile
    return {
        str(p.parent.relative_to(runs)): p.parent for p in sorted(runs.glob("*/*/*/metrics.json"))
    }


def _job_processes(job_name: str) -> list[psutil.Process]:
    """Processes of our Slurm jobs still alive (found by the job name in their environment)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("SLURM_JOB_NAME") == job_name:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _where(*options: str) -> list[str]:
    """fruit run's options for one job of one core through Slurm."""
    return ["--cluster", "slurm", "--jobs", "1", "--cores", "1", "--memory", "2GB", *options]


def _arguments(home: Path, *where: str) -> list[str]:
    return [
        "--profile", "smoke", "--device", "cpu", "--notebook", str(NOTEBOOK), "--skip-reports",
        "--results", str(home / "results"), "--data-dir", str(home / "data"),
        "--figures", str(home / "figures"), "--no-dashboard", *where,
    ]  # fmt: skip


def _start(home: Path, *where: str, env: dict) -> subprocess.Popen:
    """`fruit run` started in the background, its output in home/out.txt."""
    home.mkdir(parents=True, exist_ok=True)
    out = open(home / "out.txt", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "fruit", "run", *_arguments(home, *where)],
        cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen, home: Path, timeout: float) -> tuple[int, str]:
    """Wait for `fruit run` (killed if it outlives ``timeout``): its status and output."""
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, (home / "out.txt").read_text()


def _wait_for_a_run(home: Path, proc: subprocess.Popen | None, timeout: float = 600) -> Path:
    """The folder of the first run that has started (its runner.log says so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in (home / "results" / "runs" / "smoke").glob("*/*/*/runner.log"):
            if " started on " in log.read_text():
                return log.parent
        assert proc is None or proc.poll() is None, (home / "out.txt").read_text()
        time.sleep(0.5)
    raise AssertionError(f"no run started within {timeout} s")


def _queued(job_name: str, *states: str) -> list[str]:
    """Our jobs in the queue (job IDs), in any of ``states`` (default: any state)."""
    command = ["squeue", "-h", "-n", job_name, "-o", "%i %T"]
    lines = subprocess.run(command, capture_output=True, text=True).stdout.split("\n")
    return [
        line.split()[0]
        for line in lines
        if line.strip() and (not states or line.split()[1] in states)
    ]


@pytest.fixture
def slurm(tmp_path: Path):
    """A job name of our own, the Dask config for it (on 127.0.0.1) and its log folder;
    afterwards, that no job of that name is queued and no process of one is left."""
    why = _slurm_answers()
    if why:
        pytest.skip(why)
    assert NOTEBOOK.is_file(), f"{NOTEBOOK} is missing: every sweep executes it"
    name = f"fruit-test-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "job-logs"
    config = tmp_path / "dask.yaml"  # a file: read alone, and nothing is written beside it
    config.write_text(
        "jobqueue:\n"
        "  slurm:\n"
        f"    name: {name}\n"  # the job's name (#SBATCH -J), to find what is left
        "    interface: lo\n"  # the scheduler listens, and the workers connect, on 127.0.0.1
        f"    log-directory: {logs}\n"
        f"    local-directory: {tmp_path / 'worker-space'}\n"
    )
    env = {**os.environ, "DASK_CONFIG": str(config)}
    yield type("Slurm", (), {"name": name, "logs": logs, "env": env})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        queued, left = _queued(name), _job_processes(name)
        if not queued and not left:
            break
        time.sleep(1)
    subprocess.run(["scancel", "-n", name], capture_output=True)  # whatever a failure left
    assert not queued, f"jobs still in the queue: {queued}"
    assert not left, f"processes of the jobs still running: {[p.pid for p in left]}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The smoke sweep on a LocalCluster of one worker: the records every Slurm sweep
    must give."""
    why = _slurm_answers()
    if why:
        pytest.skip(why)
    home = tmp_path_factory.mktemp("local")
    start = time.monotonic()
    local = _sweep(home, "--workers", "1")
    assert local.returncode == 0, local.stdout + local.stderr
    print(f"\nsmoke sweep on a LocalCluster: {time.monotonic() - start:.0f} s")
    return home


def _assert_same_records(
    home: Path, reference: Path, same_runs, pairs: str = "", profile: str = "smoke"
) -> None:
    """Every run of ``home`` (and of ``reference``, those whose name starts with
    ``pairs``) finished with the same records."""
    a = _runs(home, profile)
    b = {n: path for n, path in _runs(reference, profile).items() if n.startswith(pairs)}
    assert sorted(a) == sorted(b) and len(a) == (3 if pairs else 6)
    assert {name: same_runs.differences(a[name], b[name]) for name in a} == {n: [] for n in a}


def test_smoke_sweep_through_slurm_equals_the_local_one(
    tmp_path: Path, slurm, reference, benchmark_script
):
    start = time.monotonic()
    done = _sweep(tmp_path / "slurm", *_where("--walltime", "00:30:00"), env=slurm.env)
    print(f"\nsmoke sweep through Slurm: {time.monotonic() - start:.0f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "slurm: 1 job(s) x 1 run(s)" in done.stdout
    assert list(slurm.logs.glob("*.err")), f"no job log in {slurm.logs}"  # written there
    _assert_same_records(tmp_path / "slurm", reference, benchmark_script("same_runs"))


def test_a_cancelled_job_is_replaced(tmp_path: Path, slurm, reference, benchmark_script):
    """scancel of the only worker job mid-run: a new job is submitted, the run goes on
    there (its lost attempt named in runner.log), and the records are the uninterrupted
    sweep's."""
    home = tmp_path / "cancelled"
    proc = _start(home, *ONE_PAIR, *_where("--walltime", "00:30:00"), env=slurm.env)
    victim = _wait_for_a_run(home, proc)
    jobs = _queued(slurm.name)
    subprocess.run(["scancel", *jobs], check=True)
    time.sleep(1)
    finished_first = (victim / "metrics.json").exists()
    status, out = _finish(proc, home, timeout=900)
    assert status == 0, out
    assert len(list(slurm.logs.glob("*.err"))) >= 2, f"no new job after {jobs}: {out}"
    log = (victim / "runner.log").read_text()
    if not finished_first:  # cancelled mid-run: a second attempt, numbered, finished it
        assert "attempt 2 started" in log and "attempt 1 " in log, log
        assert re.search(r"attempt 1 (lost|failed)", log), log
        assert (victim / "train.attempt-1.ipynb").is_file()
    _assert_same_records(home, reference, benchmark_script("same_runs"), "question-formation/Tf/")


@pytest.fixture(scope="module")
def long_profile(tmp_path_factory) -> Path:
    """The smoke profile with a final run of 100 epochs (no early stop): about 2.5
    minutes of training here, longer than a job of 2 minutes holds."""
    text = (REPO / "lib" / "fruit" / "profiles" / "smoke.toml").read_text()
    text, named = re.subn(r'(?m)^name = "smoke"$', 'name = "long"', text)
    text, longer = re.subn(
        r"(?m)^(\[final\]\nruns = 1\n)max_epochs = 2$", r"\1max_epochs = 100", text
    )
    assert named == longer == 1, "lib/fruit/profiles/smoke.toml changed: update this test"
    path = tmp_path_factory.mktemp("profile") / "long.toml"
    path.write_text(text + "early_stop_patience = 1000\n")  # in its [training] table
    return path


@pytest.fixture(scope="module")
def long_reference(tmp_path_factory, long_profile) -> Path:
    why = _slurm_answers()
    if why:
        pytest.skip(why)
    home = tmp_path_factory.mktemp("local-long")
    local = _sweep(home, "--profile", str(long_profile), *ONE_PAIR, "--workers", "1")
    assert local.returncode == 0, local.stdout + local.stderr
    return home


def test_a_walltime_that_ends_mid_run(
    tmp_path: Path, slurm, long_profile, long_reference, benchmark_script
):
    """Jobs of 2 minutes for a sweep whose final run trains longer than that: the run
    pauses before its job's walltime and goes on in the next job, which the cluster
    submits in its place, to the records of a run never interrupted."""
    home = tmp_path / "walltime"
    start = time.monotonic()
    where = ("--profile", str(long_profile), *ONE_PAIR, *_where("--walltime", "00:02:00"))
    proc = _start(home, *where, env=slurm.env)
    status, out = _finish(proc, home, timeout=1500)
    jobs = list(slurm.logs.glob("*.err"))
    print(f"\nsweep in jobs of 2 minutes: {time.monotonic() - start:.0f} s, {len(jobs)} jobs")
    assert status == 0, out
    final = home / "results" / "runs" / "long" / "question-formation" / "Tf" / "final-0"
    log = (final / "runner.log").read_text()
    assert re.search(r"attempt 1 paused .* after \d+ s", log), log  # mid-run, at its job's end
    assert "attempt 2 started" in log and "resuming from checkpoint.pt" in log, log
    assert "final-0: paused before its job's walltime; goes on in a new job" in out, out
    _assert_same_records(
        home, long_reference, benchmark_script("same_runs"), "question-formation/Tf/", "long"
    )


def test_sigterm_while_a_run_waits_for_a_worker(tmp_path: Path, slurm, reference, benchmark_script):
    """The only job cancelled and its replacement kept waiting (a job of ours holds the
    node's cores): SIGTERM ends fruit within a minute, paused (75); the same command
    then resumes to the uninterrupted records."""
    home = tmp_path / "waiting"
    where = (*ONE_PAIR, *_where("--walltime", "00:30:00"))
    proc = _start(home, *where, env=slurm.env)
    _wait_for_a_run(home, proc)
    workers = _queued(slurm.name)
    cpus = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True)
    blocker = subprocess.run(
        ["sbatch", "--parsable", "-J", slurm.name, "-c", cpus.stdout.split()[0], "--mem", "100M",
         "-t", "10", "-o", "/dev/null", "--wrap", "sleep 600"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run(["scancel", *workers], check=True)
    deadline = time.monotonic() + 120  # the replacement job, waiting behind the blocker
    while not set(_queued(slurm.name, "PENDING")) - {blocker}:
        assert time.monotonic() < deadline and proc.poll() is None, "no new job submitted"
        time.sleep(1)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    status, out = _finish(proc, home, timeout=120)
    seconds = time.monotonic() - start
    subprocess.run(["scancel", blocker], check=True)
    print(f"\nSIGTERM while waiting for a worker: ended in {seconds:.0f} s")
    assert status == 75 and seconds < 60, out
    again = _sweep(home, *where, env=slurm.env)
    assert again.returncode == 0, again.stdout + again.stderr
    _assert_same_records(home, reference, benchmark_script("same_runs"), "question-formation/Tf/")


def _documented_script() -> str:
    """The batch script of docs/cluster.md ("`fruit run` in a batch job of its own")."""
    blocks = re.findall(r"```bash\n(.*?)```", DOCS.read_text(), re.S)
    scripts = [b for b in blocks if b.startswith("#!") and "exec fruit run" in b]
    assert len(scripts) == 1, "docs/cluster.md should hold one batch script with exec fruit run"
    return scripts[0]


def test_the_documented_batch_script_pauses_on_its_signal_and_resumes(
    tmp_path: Path, slurm, reference, benchmark_script
):
    """docs/cluster.md's batch script as written, but for its sizes, paths and profile:
    SIGTERM to its batch shell (what --signal=B:TERM@N sends before the walltime) pauses
    fruit, the job ends with 75, and the script submitted again finishes the sweep."""
    home = tmp_path / "batch"
    arguments = " ".join([*_arguments(home, *ONE_PAIR), "--workers", "1"])
    script = _documented_script()
    for pattern, replacement in [
        (r"#SBATCH -J \S+", f"#SBATCH -J {slurm.name}"),
        (r"#SBATCH -c \d+", "#SBATCH -c 1"),
        (r"#SBATCH --mem=\S+", "#SBATCH --mem=2G"),
        (r"#SBATCH -t \S+", "#SBATCH -t 20"),
        (r"#SBATCH -o \S+", f"#SBATCH -o {tmp_path}/fruit-sweep-%j.out"),
        (r"\ncd \S+", f"\ncd {REPO}"),
        (r"exec fruit run --profile paper", f"exec fruit run {arguments}"),
    ]:
        script, n = re.subn(pattern, lambda _: replacement, script)  # noqa: B023
        assert n == 1, f"docs/cluster.md's batch script has no line {pattern!r}"
    (tmp_path / "fruit-job.sh").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    job = subprocess.run(
        ["sbatch", "--parsable", str(tmp_path / "fruit-job.sh")],
        capture_output=True, text=True, check=True, env=env,
    ).stdout.strip()  # fmt: skip
    _wait_for_a_run(home, None)
    subprocess.run(["scancel", "--signal=TERM", "--batch", job], check=True)
    deadline = time.monotonic() + 300
    while _queued(slurm.name):
        assert time.monotonic() < deadline, f"job {job} still running 300 s after SIGTERM"
        time.sleep(1)
    shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True)
    out = (tmp_path / f"fruit-sweep-{job}.out").read_text()
    assert "ExitCode=75:0" in shown.stdout, shown.stdout + out
    assert "SIGTERM: pausing every run" in out, out
    again = subprocess.run(
        ["sbatch", "--wait", str(tmp_path / "fruit-job.sh")], capture_output=True, text=True,
        env=env, timeout=900,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    _assert_same_records(home, reference, benchmark_script("same_runs"), "question-formation/Tf/")


@pytest.mark.parametrize("refused", ["partition", "memory"])
def test_a_request_slurm_refuses_ends_fruit_run_in_one_line(tmp_path: Path, slurm, refused):
    """--queue naming no partition, --memory above the node's: sbatch refuses the job,
    and fruit ends at once with its message in one line (it used to print dask's
    traceback and wait for ever)."""
    node_mb = subprocess.run(["sinfo", "-h", "-o", "%m"], capture_output=True, text=True)
    memory = f"{int(node_mb.stdout.split()[0].rstrip('+')) * 10}MB"
    where = {
        "partition": ["--cluster", "slurm", "--jobs", "1", "--cores", "1", "--memory", "2GB",
                      "--queue", "no-such-partition"],
        "memory": ["--cluster", "slurm", "--jobs", "1", "--cores", "1", "--memory", memory],
    }[refused]  # fmt: skip
    start = time.monotonic()
    done = fruit_run(
        *_arguments(tmp_path, *ONE_PAIR, *where), cwd=tmp_path, env=slurm.env, timeout=120
    )
    seconds = time.monotonic() - start
    print(f"\n{refused}: fruit: error in {seconds:.0f} s: {done.stderr.strip()}")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "fruit: error: --cluster slurm: the batch system refuses the jobs: sbatch: "
    ), lines
    assert ("--queue" if refused == "partition" else "--memory") in lines[0], lines
    assert seconds < 60


def test_a_job_that_can_never_start_ends_fruit_run_in_one_line(tmp_path: Path, slurm):
    """--cores above the node's CPUs: Slurm accepts the job, which then waits for ever
    (squeue's reason: PartitionConfig); fruit ends in one line and cancels it."""
    cpus = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True)
    cores = str(int(cpus.stdout.split()[0].rstrip("+")) * 2)
    where = ["--cluster", "slurm", "--jobs", "1", "--cores", cores, "--memory", "2GB"]
    start = time.monotonic()
    done = fruit_run(
        *_arguments(tmp_path, *ONE_PAIR, *where), cwd=tmp_path, env=slurm.env, timeout=300
    )
    seconds = time.monotonic() - start
    print(f"\n--cores {cores}: fruit: error in {seconds:.0f} s: {done.stderr.strip()}")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and re.match(
        r"fruit: error: --cluster slurm: job \d+ can never start: squeue gives the reason "
        r"PartitionConfig ",
        lines[0],
    ), done.stderr
    assert seconds < 120


CONTROLLER_PID = Path("/run/fruit-slurm/slurmctld.pid")  # scripts/start-slurm.sh's


def _controller(action: str) -> None:
    """Stop slurmctld (its pid file's process), or start it again (scripts/start-slurm.sh,
    which starts what is not running)."""
    if action == "stop":
        os.kill(int(CONTROLLER_PID.read_text()), signal.SIGTERM)
        deadline = time.monotonic() + 30
        while subprocess.run(["sinfo"], capture_output=True, timeout=60).returncode == 0:
            assert time.monotonic() < deadline, "slurmctld still answers 30 s after SIGTERM"
            time.sleep(1)
    else:
        subprocess.run(
            ["bash", str(REPO / "scripts" / "start-slurm.sh")], check=True, capture_output=True
        )


def test_a_sweep_started_while_the_controller_is_down(
    tmp_path: Path, slurm, reference, benchmark_script
):
    """slurmctld stopped before `fruit run`, started again 2 minutes later: fruit says
    that sbatch fails and tries again, submits its job once the controller answers, and
    the sweep ends with the records of the LocalCluster's."""
    if os.geteuid() != 0 or not CONTROLLER_PID.is_file():
        pytest.skip("stopping slurmctld needs root and a Slurm started by scripts/start-slurm.sh")
    home = tmp_path / "outage"
    _controller("stop")
    try:
        proc = _start(home, *ONE_PAIR, *_where("--walltime", "00:30:00"), env=slurm.env)
        time.sleep(120)
        assert proc.poll() is None, (home / "out.txt").read_text()
    finally:
        _controller("start")
    back = time.monotonic()
    status, out = _finish(proc, home, timeout=900)
    print(f"\ncontroller back: the sweep ended {time.monotonic() - back:.0f} s later")
    print("\n".join(line for line in out.splitlines() if line.startswith("sbatch ")))
    assert status == 0, out
    assert "sbatch failed (sbatch: " in out and "a new try in" in out, out
    assert "sbatch answered again: job " in out, out
    assert "Traceback" not in out, out
    _assert_same_records(home, reference, benchmark_script("same_runs"), "question-formation/Tf/")
