"""Which Jupyter kernel runs what: the notebooks open on the project's kernel in
JupyterLab ("fruit", which `make venv` and `make lab` register), while the sweep names
ipykernel's own "python3" (the Python of the environment it runs in) explicitly, so it
does not depend on the registration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_open_on_the_projects_kernel(notebook):
    spec = json.loads(notebook.read_text())["metadata"]["kernelspec"]
    assert spec["name"] == "fruit" and spec["display_name"] == "Python (fruit)"


def test_the_sweep_names_its_kernel(monkeypatch, tmp_path):
    import papermill

    from fruit.experiments.execution import worker

    seen = {}
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: seen.update(k))
    worker.execute_report(str(NOTEBOOKS[0]), str(tmp_path / "out.ipynb"), {})
    assert seen["kernel_name"] == worker.KERNEL_NAME == "python3"


def test_make_venv_registers_the_projects_kernel():
    makefile = (REPO / "Makefile").read_text()
    venv_recipe = makefile.split("$(BIN)/fruit: pyproject.toml", 1)[1].split("\n\n", 1)[0]
    assert '--name fruit --display-name "Python (fruit)"' in venv_recipe
