"""notebooks/data.ipynb runs headless with papermill."""

from __future__ import annotations

import json

import pytest

from fruit.cli import main

papermill = pytest.importorskip("papermill")


def test_data_notebook_runs(repo_root, tmp_path, capsys):
    data = tmp_path / "data"
    argv = ["data", "--task", "passivization", "--out", str(data), "--train-size", "200"]
    assert main(argv + ["--dev-size", "20", "--test-size", "2000", "--gen-size", "30"]) == 0
    capsys.readouterr()
    source = repo_root / "notebooks" / "data.ipynb"
    assert all(not c.get("outputs") for c in json.loads(source.read_text())["cells"])
    out = tmp_path / "data.out.ipynb"
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    papermill.execute_notebook(
        str(source),
        str(out),
        parameters={"task": "passivization", "data_dir": "data"},  # the repository's data/
        kernel_name="python3",
        progress_bar=False,
        cwd=str(notebooks),  # as JupyterLab runs it: in notebooks/ below the root
    )
    text = out.read_text()
    assert "passivization: read from" in text
    assert "hierarchical" in text and "median_length" in text
    cells = json.loads(text)["cells"]
    (stats,) = [c for c in cells if "compare_examples(" in "".join(c["source"])]
    html = "".join(
        "".join(o["data"]["text/html"])
        for o in stats["outputs"]
        if "text/html" in o.get("data", {})
    )
    assert "<th>ok</th>" in html and ">train~test<" in html and ">gen<" in html  # the table
