"""`fruit run --cluster slurm` through a real Slurm: the smoke sweep in one batch job gives
the records of a LocalCluster sweep, and leaves no job or worker behind.

Needs `sbatch` on PATH and a Slurm that answers `sinfo`; on a Debian machine, as root,
`scripts/start-slurm.sh` starts a single-node one on 127.0.0.1 (docs/cluster.md). Skipped
elsewhere. Everything it writes (results, data, figures, Dask config, job logs) is under
pytest's temporary folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest
from test_experiments_cluster import fruit_run

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "train.ipynb"

pytestmark = pytest.mark.slow


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


def _runs(home: Path) -> dict[str, Path]:
    runs = home / "results" / "runs" / "smoke"
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


def test_smoke_sweep_through_slurm_equals_the_local_one(tmp_path: Path, benchmark_script):
    why = _slurm_answers()
    if why:
        pytest.skip(why)
    if not NOTEBOOK.is_file():
        pytest.skip("notebooks/train.ipynb is not there yet")
    same_runs = benchmark_script("same_runs")
    job_name = f"fruit-test-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "job-logs"
    config = tmp_path / "dask.yaml"  # a file: read alone, and nothing is written beside it
    config.write_text(
        "jobqueue:\n"
        "  slurm:\n"
        f"    name: {job_name}\n"  # the job's name (#SBATCH -J), to find what is left
        "    interface: lo\n"  # the scheduler listens, and the workers connect, on 127.0.0.1
        f"    log-directory: {logs}\n"
        f"    local-directory: {tmp_path / 'worker-space'}\n"
    )
    env = {**os.environ, "DASK_CONFIG": str(config)}

    start = time.monotonic()
    slurm = _sweep(
        tmp_path / "slurm", "--cluster", "slurm", "--jobs", "1", "--cores", "1",
        "--memory", "2GB", "--walltime", "00:30:00", env=env,
    )  # fmt: skip
    slurm_seconds = time.monotonic() - start
    assert slurm.returncode == 0, slurm.stdout + slurm.stderr
    assert "slurm cluster: 1 job(s) x 1 run(s)" in slurm.stdout
    assert list(logs.glob("*.err")), f"no job log in {logs}"  # the jobs wrote their logs there

    start = time.monotonic()
    local = _sweep(tmp_path / "local", "--workers", "1")
    local_seconds = time.monotonic() - start
    assert local.returncode == 0, local.stdout + local.stderr
    print(f"\nsmoke sweep: slurm {slurm_seconds:.0f} s, LocalCluster {local_seconds:.0f} s")

    a, b = _runs(tmp_path / "slurm"), _runs(tmp_path / "local")
    assert sorted(a) == sorted(b) and len(a) == 6
    assert {name: same_runs.differences(a[name], b[name]) for name in a} == {n: [] for n in a}

    # nothing left behind: no job in the queue, no process of one
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        queued = subprocess.run(
            ["squeue", "-h", "-n", job_name, "-o", "%i %T"], capture_output=True, text=True
        ).stdout.strip()
        left = _job_processes(job_name)
        if not queued and not left:
            break
        time.sleep(1)
    assert not queued, f"jobs still in the queue: {queued}"
    assert not left, f"processes of the jobs still running: {[p.pid for p in left]}"
