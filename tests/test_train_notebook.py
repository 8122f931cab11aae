"""notebooks/train.ipynb runs headless with papermill and leaves a complete run folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("papermill")


def test_smoke_notebook_leaves_a_complete_run_folder(tmp_path, repo_root):
    notebook = repo_root / "notebooks" / "train.ipynb"
    papermill = Path(sys.executable).with_name("papermill")
    command = [
        str(papermill), str(notebook), str(tmp_path / "out.ipynb"),
        "-p", "task", "question-formation",
        "-p", "architecture", "Tf+Nd",
        "-p", "profile", "smoke",
        "-p", "threads", "1",
        "-p", "num_samples", "2",  # a [training] setting, as fruit run passes it
        # as JupyterLab runs it: in a folder notebooks/, whose parent is the repository
        # root where data/ is generated and results/ written
        "--cwd", str(tmp_path / "notebooks"),
    ]  # fmt: skip
    (tmp_path / "notebooks").mkdir()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    run_dir = tmp_path / "results" / "runs" / "smoke" / "question-formation" / "Tf+Nd" / "final-0"
    for name in ("config.json", "log.csv", "checkpoint.pt", "best.pt", "metrics.json"):
        assert (run_dir / name).is_file(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "complete"
    assert metrics["architecture"] == "Tf+Nd" and metrics["profile"] == "smoke"
    assert metrics["num_parameters"] == 191_085  # docs/paper.md §10.4: Tf+Nd on question formation
    assert json.loads((run_dir / "config.json").read_text())["num_samples"] == 2
    # the data folder and seed fruit run uses for the smoke profile
    data = json.loads(
        (tmp_path / "data" / "smoke" / "question-formation" / "data.json").read_text()
    )
    from fruit.profiles import derive_seed, load_profile

    assert data["seed"] == derive_seed(load_profile("smoke").data_seed, "question-formation")
    for kind in ("full", "partial"):
        for name in ("test", "hierarchical", "linear"):
            assert 0.0 <= metrics[kind][name] <= 1.0
    assert len((run_dir / "log.csv").read_text().splitlines()) >= 2  # header + a checkpoint

    executed = (tmp_path / "out.ipynb").read_text()
    assert "hierarchical target" in executed and "linear target" in executed
    assert "image/png" in executed  # the learning curve


def test_every_run_setting_is_a_notebook_parameter_with_its_default(repo_root):
    """fruit run passes the profile's [training] table to the notebook; a setting missing
    from the parameters cell would still reach RunConfig, but papermill would print
    "Passed unknown parameter" for it, and a reader of the notebook would not see it."""
    import ast
    import dataclasses

    from fruit.training import RunConfig

    notebook = json.loads((repo_root / "notebooks" / "train.ipynb").read_text())
    (cell,) = [c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", [])]
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse("".join(cell["source"])).body
        if isinstance(node, ast.Assign)
    }
    # the notebook run by hand makes its data; fruit run prepares it beforehand
    by_hand = {"generate_data": True}
    for f in dataclasses.fields(RunConfig):
        if f.name == "resolved":  # set by resolve_config, not a setting
            continue
        assert f.name in values, f"{f.name} is not in train.ipynb's parameters cell"
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            continue  # task, architecture: the notebook shows an example
        assert values[f.name] == by_hand.get(f.name, default), f.name
