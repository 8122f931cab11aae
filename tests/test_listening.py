"""A local sweep's services listen on the loopback interface only: the scheduler, its
dashboard, each worker and nanny (nothing on 0.0.0.0 for another machine to reach); and
so do a jobqueue cluster's, with docs/cluster.md's one-machine config (`interface: lo`),
its jobs run here by the fake sbatch of tests/fake_slurm.py: the scheduler, its
dashboard, and each job's worker, nanny and worker HTTP server."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from fake_slurm import fake_slurm

SCRIPT = textwrap.dedent(
    """
    import time

    import psutil

    from fruit.experiments.clusters.cluster import local_cluster

    if __name__ == "__main__":
        cluster = local_cluster(workers=2, threads=1, device="cpu", dashboard=True)
        try:
            time.sleep(2)
            me = psutil.Process()
            for process in [me, *me.children(recursive=True)]:
                try:
                    for conn in process.net_connections(kind="inet"):
                        if conn.status == psutil.CONN_LISTEN:
                            print("LISTEN", conn.laddr.ip, conn.laddr.port)
                except psutil.Error:
                    pass
        finally:
            cluster.client.close()
    """
)


@pytest.mark.timeout(300)
def test_a_local_clusters_services_listen_on_loopback_only(tmp_path):
    script = tmp_path / "listen.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path
    )
    listening = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("LISTEN")]
    assert len(listening) >= 4, done.stdout + done.stderr  # scheduler, dashboard, 2 workers
    assert all(ip in ("127.0.0.1", "::1") for ip, _ in listening), listening


JOBQUEUE_SCRIPT = textwrap.dedent(
    """
    import psutil

    from fruit.experiments.clusters.cluster import connect_jobqueue

    if __name__ == "__main__":
        cluster = connect_jobqueue(
            "slurm", jobs=1, cores=1, memory="1GB", walltime="00:10:00", gpus=0, dashboard=True
        )
        try:
            print("DASHBOARD", cluster.dashboard)
            cluster.client.wait_for_workers(1, timeout=180)
            me = psutil.Process()
            processes = [("here", p) for p in [me, *me.children(recursive=True)]]
            for job in cluster.queue.submissions.live:  # the fake sbatch's: its process ID
                batch = psutil.Process(int(job))
                processes += [("job", p) for p in [batch, *batch.children(recursive=True)]]
            for where, process in processes:
                try:
                    for conn in process.net_connections(kind="inet"):
                        if conn.status == psutil.CONN_LISTEN:
                            print("LISTEN", conn.laddr.ip, conn.laddr.port, where)
                except psutil.Error:
                    pass
        finally:
            cluster.close()
    """
)


@pytest.mark.timeout(300)
def test_a_jobqueue_clusters_services_listen_on_the_chosen_interface_only(tmp_path):
    from fruit.experiments.clusters.cluster import dashboard_available

    if not dashboard_available():
        pytest.skip("bokeh is not installed (pip install bokeh): Dask serves no dashboard")
    env = fake_slurm(tmp_path / "bin", run_jobs=True)
    config = tmp_path / "dask.yaml"
    config.write_text(
        "jobqueue:\n  slurm:\n    interface: lo\n"
        f"    local-directory: {tmp_path / 'worker-space'}\n"
    )
    script = tmp_path / "listen.py"
    script.write_text(JOBQUEUE_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path,
        env={**env, "DASK_CONFIG": str(config)},
    )  # fmt: skip
    out = done.stdout + done.stderr
    listening = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("LISTEN")]
    where = [w for _, _, w in listening]
    # the scheduler and its dashboard here; the job's nanny, worker and worker HTTP server
    assert where.count("here") >= 2 and where.count("job") >= 3, out
    assert all(ip == "127.0.0.1" for ip, _, _ in listening), listening
    assert "DASHBOARD http://127.0.0.1:" in done.stdout, out
