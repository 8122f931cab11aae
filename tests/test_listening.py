"""A local sweep's services listen on the loopback interface only: the scheduler, its
dashboard, each worker and nanny (nothing on 0.0.0.0 for another machine to reach)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import time

    import psutil

    from fruit.experiments.cluster import local_cluster

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
