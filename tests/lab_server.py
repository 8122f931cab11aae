"""A JupyterLab server for the slow tests (test_lab.py, test_browser.py): started as a
child process on a free loopback port, its URL (with the token) read from its log, its
runtime, settings and workspace folders kept in the test's temporary folder."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def needs_jupyterlab() -> None:
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed: run `make lab` once")
    pytest.importorskip("ipywidgets", reason="ipywidgets is not installed: run `make lab` once")


def lab_environment(tmp: Path, settings: dict[str, dict] | None = None) -> dict[str, str]:
    """Environment variables that keep the server's state in ``tmp``; ``settings`` are
    JupyterLab user settings, e.g. {"@jupyterlab/notebook-extension/tracker": {...}}."""
    settings_dir = tmp / "lab-settings"
    for plugin, values in (settings or {}).items():
        package, name = plugin.rsplit("/", 1)
        path = settings_dir / package / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    return {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings_dir),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
    }


@contextlib.contextmanager
def running(
    command: list[str],
    port: int,
    env: dict[str, str],
    cwd: Path,
    token: str | None = None,
    timeout: float = 300,
):
    """Start ``command``, wait for the URL of a server on ``port``; yields (base URL,
    token, log path). ``token``: the one the command gives the server (its log shows
    "token=..." then). The whole process group is stopped at the end."""
    log_path = Path(env["JUPYTER_RUNTIME_DIR"]).parent / "lab.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    pattern = re.compile(rf"http://127\.0\.0\.1:{port}/\S*\?token=(\w+|\.\.\.)")
    try:
        deadline = time.monotonic() + timeout
        while not (found := pattern.search(log_path.read_text())):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"JupyterLab did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", token or found.group(1), log_path
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # the server stops its kernels
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def api(base: str, token: str, path: str, method: str = "GET", body: dict | None = None):
    request = urllib.request.Request(
        f"{base}/api/{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read()
    return json.loads(text) if text else None
