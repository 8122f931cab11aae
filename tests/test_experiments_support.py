"""Helpers for the experiment-runner tests: a fake train notebook and fake data.

The fake notebook honours the run-folder contract (docs/contracts.md §5) without any
training: it "trains" for ``steps`` steps of ``step_seconds`` each, writes a
checkpoint after every step, resumes from it (printing that it did), and writes a
metrics.json whose validation cross-entropy is a known function of (lr, B, seed). It
fails on purpose for the runs listed in ``fail`` (``{name: times}``), and refuses the
runs listed in ``refuse`` with a FruitError (a user error, the same on every attempt). These settings are
in ``DATA_DIR/fake.json`` (``write_fake_data``): a profile's ``[training]`` table holds
only RunConfig fields.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import nbformat

FAKE_SOURCE = r"""
import json, math, os, time
from pathlib import Path
from fruit.io import atomic_write_json

out = Path(run_dir)
fake = json.loads((Path(data_dir) / "fake.json").read_text())
fake_steps, fake_step_seconds, fake_fail = fake["steps"], fake["step_seconds"], fake["fail"]
name = f"{task}/{architecture}/{phase}-{index}"
failures_file = out / "fake_failures"
failed = int(failures_file.read_text()) if failures_file.exists() else 0
if name in fake["refuse"]:
    failures_file.write_text(str(failed + 1))
    from fruit.errors import FruitError
    raise FruitError(f"fake refusal of {name}")
if failed < int(fake_fail.get(name, 0)):
    failures_file.write_text(str(failed + 1))
    raise RuntimeError(f"fake failure {failed + 1} of {name}")

checkpoint = out / "checkpoint.pt"
step = 0
if checkpoint.exists():
    step = json.loads(checkpoint.read_text())["step"]
    print(f"resumed from checkpoint.pt at step {step}")
log = out / "log.csv"
while step < fake_steps:
    time.sleep(fake_step_seconds)
    step += 1
    with open(log, "a") as f:
        f.write(f"{step}\n")
    atomic_write_json(checkpoint, {"step": step})

ce = (math.log10(learning_rate) + 3.5) ** 2 + ((batch_tokens - 400) / 1000) ** 2 + (seed % 997) / 1e6
atomic_write_json(out / "metrics.json", {
    "status": "complete", "reason": None, "task": task, "architecture": architecture,
    "phase": phase, "index": index, "seed": seed, "profile": profile,
    "learning_rate": learning_rate, "batch_tokens": batch_tokens, "d": 8, "num_parameters": 100,
    "best_validation_cross_entropy": ce, "epochs": 1.0, "examples_seen": train_size,
    "train_seconds": fake_steps * fake_step_seconds,
    "full": {"test": 1 - ce / 10, "hierarchical": 0.5, "linear": 0.25, "log_ratio": math.log(2)},
    "partial": {"test": None, "hierarchical": 0.6, "linear": 0.3, "log_ratio": math.log(2)},
    "kernel_malloc": {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
    "steps_run": step, "data_lines": sum(1 for _ in open(Path(data_dir) / task / "train.tsv")),
})
"""

FAKE_PARAMETERS = """
task = "question-formation"
architecture = "Tf"
phase = "search"
index = 0
seed = 0
profile = "smoke"
learning_rate = 1e-3
batch_tokens = 512
max_epochs = 1
train_size = 1
dev_size = 1
test_size = 1
gen_size = 1
data_dir = "data"
output_dir = "results"
run_dir = "."
generate_data = True
threads = None
device = "auto"
"""


def write_fake_notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(FAKE_PARAMETERS)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(FAKE_SOURCE)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = folder / "train.ipynb"
    nbformat.write(nb, path)
    return path


def write_fake_data(
    data_dir: Path,
    tasks,
    lines: int = 5,
    steps: int = 2,
    step_seconds: float = 0.0,
    fail=None,
    refuse=(),
) -> None:
    """Five user-provided files per task (no data.json: taken as they are), and the fake
    notebook's settings (fake.json)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = {"steps": steps, "step_seconds": step_seconds, "fail": fail or {}}
    settings["refuse"] = list(refuse)
    (data_dir / "fake.json").write_text(json.dumps(settings))
    for task in tasks:
        folder = data_dir / task
        folder.mkdir(parents=True, exist_ok=True)
        for split in ("train", "dev", "test", "gen", "gen.linear"):
            (folder / f"{split}.tsv").write_text("a b . quest\tb a ?\n" * lines)


def fake_profile_toml(name="fake", trials=3, runs=2, architectures=("Tf", "Tf+Sup")):
    archs = ", ".join(f'"{a}"' for a in architectures)
    return f"""
name = "{name}"
description = "fake-notebook test profile"
seed = 11
tasks = ["question-formation"]
architectures = [{archs}]
[data]
train = 5
dev = 5
test = 5
gen = 5
[search]
trials = {trials}
max_epochs = 1
batch_tokens = [256, 1024]
learning_rate = [1e-5, 1e-2]
[final]
runs = {runs}
max_epochs = 2
"""


def fake_ce(lr: float, b: int, seed: int) -> float:
    """The fake notebook's validation cross-entropy (an independent copy, for oracles)."""
    return (math.log10(lr) + 3.5) ** 2 + ((b - 400) / 1000) ** 2 + (seed % 997) / 1e6
