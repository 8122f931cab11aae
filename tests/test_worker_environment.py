"""What a worker hands the notebook kernels it starts (fruit.experiments.execution.worker).

A kernel runs in its notebook's folder, so a relative PYTHONPATH (``PYTHONPATH=lib``,
a checkout used without installing it, as on a lent GPU machine) must reach it made
absolute: before, every run of such a sweep failed with "No module named 'fruit'".
"""

from __future__ import annotations

import os

import nbformat
import pytest

from fruit.experiments.execution import worker


def test_relative_import_path_entries_reach_the_kernel_absolute(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "only_here.py").write_text("ANSWER = 42\n")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import only_here\nassert only_here.ANSWER == 42")]
    nbformat.write(notebook, notebooks / "report.ipynb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["mods", str(tmp_path / "elsewhere")]))
    executed = worker.execute_report(
        str(notebooks / "report.ipynb"), str(tmp_path / "out" / "report.ipynb"), {}
    )
    assert os.path.exists(executed)
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [
        str(tmp_path / "mods"),
        str(tmp_path / "elsewhere"),
    ]


def test_without_the_fix_the_kernel_would_not_find_the_module(tmp_path, monkeypatch):
    # the oracle for the test above: a kernel in the notebook's folder with the relative
    # entry as it was given does not import the module (so the first test can fail)
    monkeypatch.setattr(worker, "_absolute_import_path", lambda: {})
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "only_here.py").write_text("ANSWER = 42\n")
    (tmp_path / "notebooks").mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import only_here")]
    nbformat.write(notebook, tmp_path / "notebooks" / "report.ipynb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "mods")
    with pytest.raises(worker.RunFailed, match="only_here"):
        worker.execute_report(
            str(tmp_path / "notebooks" / "report.ipynb"), str(tmp_path / "out.ipynb"), {}
        )
