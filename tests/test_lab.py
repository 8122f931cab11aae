"""`make lab`: JupyterLab on 127.0.0.1 with the project's kernel ("Python (fruit)"), opening
on notebooks/. Slow: it runs the Makefile target (installing the lab extra if its stamp
is stale) and starts a real server and kernel."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest
from lab_server import api, free_port, lab_environment, needs_jupyterlab, running

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_make_lab_serves_the_notebooks_with_the_fruit_kernel(tmp_path):
    needs_jupyterlab()
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = Path(sys.prefix)
    if venv == Path(sys.base_prefix):
        pytest.skip("the tests do not run in a virtual environment: `make lab` needs one")
    port = free_port()
    # -o: the environment exists; do not rebuild it from scratch when pyproject.toml is newer
    command = ["make", "-s", "-o", f"{venv}/bin/fruit", "lab", f"VENV={venv}", f"LAB_PORT={port}"]
    env = lab_environment(tmp_path)
    with running(command, port, env, cwd=REPO) as (base, token, log):
        assert base.startswith("http://127.0.0.1:")  # loopback only
        specs = api(base, token, "kernelspecs")["kernelspecs"]
        fruit = specs["fruit"]["spec"]
        assert fruit["display_name"] == "Python (fruit)"
        assert Path(fruit["argv"][0]).parent == venv / "bin"  # this environment's Python
        names = {item["name"] for item in api(base, token, "contents/notebooks")["content"]}
        assert {"explore.ipynb", "train.ipynb", "tables.ipynb", "figures.ipynb"} <= names
        assert "/lab/tree/notebooks" in log.read_text()  # the URL opens on notebooks/

        # the kernel starts and imports fruit from this checkout
        kernel = api(base, token, "kernels", "POST", {"name": "fruit"})
        try:
            from jupyter_client import BlockingKernelClient

            client = BlockingKernelClient()
            client.load_connection_file(
                Path(env["JUPYTER_RUNTIME_DIR"]) / f"kernel-{kernel['id']}.json"
            )
            client.start_channels()
            client.wait_for_ready(timeout=120)
            printed = []
            client.execute_interactive(
                "import sys, fruit; print(sys.prefix); print(fruit.__file__)",
                output_hook=lambda m: printed.append(m["content"].get("text", "")),
                timeout=120,
            )
            client.stop_channels()
            prefix, module = "".join(printed).split()
            assert Path(prefix) == venv
            assert Path(module).is_relative_to(REPO / "lib")
        finally:
            api(base, token, f"kernels/{kernel['id']}", "DELETE")
            time.sleep(1)
