"""The explore notebook's sentence box and run picker (fruit.explore_widgets), on small
untrained models saved as run folders: in this process, and through a real kernel that
runs notebooks/explore.ipynb, where setting the box's value must redraw the outputs
without re-running the notebook."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from PIL import Image

from fruit import explore
from fruit.explore_widgets import Explorer, Settings, find_runs, plain_text
from fruit.models import build_model
from fruit.tasks import Vocabulary, read_tsv

REPO = Path(__file__).resolve().parents[1]
# sentences of question formation's grammar (its target rules need one)
SHORT, LONG = "the newt does sleep .", "the newt that doesn't giggle does sleep ."
TRAIN = (
    "the newt that doesn't giggle does sleep . quest\tdoes the newt that doesn't giggle sleep ?\n"
    "the newt does sleep . decl\tthe newt does sleep .\n"
)
GEN = "the newt does sleep . quest\tdoes the newt sleep ?\n"
OTHER_TRAIN = "her yak doesn't giggle . quest\tdoesn't her yak giggle ?\n"  # no "the", "newt"
SETTINGS = Settings(k=3, samples=2, max_tokens=6, device="cpu")


def save_run(home: Path, architecture: str, train: str = TRAIN, gen: str = GEN) -> Path:
    """A run folder as fruit writes it (config.json, best.pt) with an untrained model,
    under home/results/runs/<profile>/<task>/<architecture>/final-0, its data under home/."""
    data = home / "data" / architecture.replace("+", "-")
    (data / "question-formation").mkdir(parents=True)
    (data / "question-formation" / "train.tsv").write_text(train)
    (data / "question-formation" / "gen.tsv").write_text(gen)
    vocab = Vocabulary.from_examples(read_tsv(data / "question-formation" / "train.tsv"))
    torch.manual_seed(0)
    model = build_model(architecture, vocab_size=vocab.size, d=8, dropout=0.0)
    run_dir = home / "results" / "runs" / "tiny" / "question-formation" / architecture / "final-0"
    run_dir.mkdir(parents=True)
    config = {
        "task": "question-formation",
        "architecture": architecture,
        "d": 8,
        "model_options": {"dropout": 0.0},
        "data_dir": str(data),
        "vocab_size": vocab.size,
    }
    (run_dir / "config.json").write_text(json.dumps(config))
    torch.save({"model": model.state_dict()}, run_dir / "best.pt")
    return run_dir


def best_table(run_dir: Path, sentence: str) -> str:
    """The oracle for the "best" section: the beam search called directly."""
    import pandas as pd

    run = explore.load_run(run_dir, device="cpu")
    source = run.source(sentence)
    best = explore.best_outputs(run, source, k=SETTINGS.k, max_tokens=SETTINGS.max_tokens)
    frame = pd.DataFrame(best, columns=["output", "p(y | x)", "finished"])
    return repr(frame.assign(output=frame.output.str.join(" ")))


def section_text(view: Explorer, name: str) -> str:
    return plain_text(view.sections[name].outputs)


def heat_map_size(view: Explorer) -> tuple[int, int]:
    png = next(
        o["data"]["image/png"] for o in view.sections["actions"].outputs if "data" in o
    )  # base64, as a frontend receives it
    import base64

    with Image.open(io.BytesIO(base64.b64decode(png))) as im:
        return im.size


@pytest.fixture
def runs(tmp_path):
    return [
        save_run(tmp_path, "Tf+Sup"),
        save_run(tmp_path, "Tf+Sup+Sup"),  # two stacks: a taller heat map
        save_run(tmp_path, "RNN", train=OTHER_TRAIN, gen=OTHER_TRAIN),  # no stack
    ]


def test_sentence_box_redraws_every_section(runs):
    pytest.importorskip("ipywidgets")
    view = Explorer(find_runs(runs[0].parents[3]), runs[0], SHORT, SETTINGS)
    assert [run.name for run in view.runs] == ["final-0"] * 3
    assert section_text(view, "best").startswith(best_table(runs[0], SHORT))
    # where widgets do not render (a papermill record read as text), a section is its text
    bundle = view.sections["best"]._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith(best_table(runs[0], SHORT))
    before = {name: out.outputs for name, out in view.sections.items()}
    width = heat_map_size(view)[0]

    view.sentence_box.value = LONG  # as typing + Enter does in the browser

    assert f"source: {LONG} quest" in section_text(view, "run")
    assert section_text(view, "best").startswith(best_table(runs[0], LONG))
    assert all(view.sections[name].outputs != before[name] for name in before)
    assert heat_map_size(view)[0] > width  # one more position, one more column
    assert f"{LONG} quest" in view.status.value

    # a word outside the vocabulary: the sections stay, the status line says why
    shown = {name: out.outputs for name, out in view.sections.items()}
    view.sentence_box.value = "the walrus does sleep ."
    assert {name: out.outputs for name, out in view.sections.items()} == shown
    assert "walrus" in view.status.value and "#b00020" in view.status.value


def test_run_picker_switches_the_model_and_keeps_a_sentence_it_can_read(runs):
    pytest.importorskip("ipywidgets")
    view = Explorer(runs, runs[0], LONG, SETTINGS)
    height = heat_map_size(view)[1]
    view.run_picker.value = runs[1]
    assert "Tf+Sup+Sup" in section_text(view, "run")
    assert view.sentence_box.value == LONG  # same vocabulary: kept
    assert section_text(view, "best").startswith(best_table(runs[1], LONG))
    assert heat_map_size(view)[1] > height  # two stacks, two heat maps
    # a run whose vocabulary lacks the words: its own first generalization sentence
    view.run_picker.value = runs[2]
    assert view.sentence_box.value == "her yak doesn't giggle ."
    assert "source: her yak doesn't giggle . quest" in section_text(view, "run")


def test_without_ipywidgets_the_sections_are_plain_outputs(runs, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import fails as if not installed
    view = Explorer(runs, runs[0], "", SETTINGS)
    assert view.widgets is None
    view.controls()
    view.section("run")
    view.section("best")
    out = capsys.readouterr().out
    assert "ipywidgets is not installed" in out
    assert f"source: {SHORT} quest" in out  # the first gen sentence
    assert best_table(runs[0], SHORT) in out
    written = view.save(tmp_path / "out")
    assert [p.name for p in written] == ["stack-actions.png", "outputs.csv"]
    assert (tmp_path / "out" / "outputs.csv").read_text().startswith("kind,output,probability")


def widget_outputs(client, cell) -> list:
    """The outputs the Output widget a cell displayed last holds, as the frontend (here
    nbclient's widget state) has them."""
    view = cell.outputs[-1]["data"]["application/vnd.jupyter.widget-view+json"]
    return client.widget_state[view["model_id"]]["outputs"]


def test_notebook_in_a_kernel_redraws_when_the_sentence_box_changes(tmp_path):
    """Run the notebook in a kernel, set the widget's value, see the outputs change."""
    pytest.importorskip("ipywidgets")
    from nbclient import NotebookClient

    home = tmp_path
    runs = [save_run(home, "Tf+Sup")]
    (home / "notebooks").mkdir()
    shutil.copy(REPO / "notebooks" / "explore.ipynb", home / "notebooks")
    nb = nbformat.read(home / "notebooks" / "explore.ipynb", as_version=4)
    # the parameters as papermill gives them: a cell after the tagged one
    index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    given = (
        'run_dir = "results/runs/tiny/question-formation/Tf+Sup/final-0"\n'  # from the root
        f"sentence = {SHORT!r}\nk = 3\nsamples = 2\nmax_tokens = 6\ndevice = 'cpu'"
    )
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(given))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=300,
        resources={"metadata": {"path": str(home / "notebooks")}},
    )
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
        best_cell = next(c for c in nb.cells if 'view.section("best")' in c.get("source", ""))
        before = plain_text(widget_outputs(client, best_cell))
        assert before.startswith(best_table(runs[0], SHORT))

        typed = nbformat.v4.new_code_cell(f"view.sentence_box.value = {LONG!r}")
        nb.cells.append(typed)
        client.execute_cell(typed, len(nb.cells) - 1)

        after = plain_text(widget_outputs(client, best_cell))
        assert after != before
        assert after.startswith(best_table(runs[0], LONG))
        run_cell = next(c for c in nb.cells if 'view.section("run")' in c.get("source", ""))
        assert f"source: {LONG} quest" in plain_text(widget_outputs(client, run_cell))
    # the notebook as saved: each section also reads as text (what it showed when run)
    assert best_table(runs[0], SHORT) in best_cell.outputs[-1]["data"]["text/plain"]
    # and the gen-set means by the subject's relative clause, a row per kind found
    split = next(c for c in nb.cells if "generalization_by_subject(" in c.get("source", ""))
    table, kinds = (out["data"]["text/markdown"] for out in split.outputs[-2:])
    assert table.startswith("| subject | n | FA hierarchical | FA linear | PA hierarchical")
    gen = read_tsv(home / "data" / "Tf-Sup" / "question-formation" / "gen.tsv")
    assert sum(int(row.split("|")[2]) for row in table.splitlines()[2:]) == len(gen)
    # then what its greedy outputs are, on the same sentences
    assert kinds.startswith("| subject | n | hierarchical | linear | fronts main, deletes none")
    assert sum(int(row.split("|")[2]) for row in kinds.splitlines()[2:]) == len(gen)


def test_a_relative_data_dir_counts_from_the_repository_root(runs, monkeypatch):
    """`fruit train --data-dir data/smoke` records a relative data_dir; the notebook runs in
    notebooks/, so the explorer takes it from the root it is given."""
    import dataclasses

    from fruit.errors import FruitError

    home = runs[0].parents[5]
    config = json.loads((runs[0] / "config.json").read_text())
    config["data_dir"] = str(Path(config["data_dir"]).relative_to(home))
    (runs[0] / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(home / "results")  # anywhere but the root
    with pytest.raises(FruitError, match="train.tsv is missing"):
        Explorer([runs[0]], runs[0], SHORT, SETTINGS, interactive=False)
    settings = dataclasses.replace(SETTINGS, root=home)
    view = Explorer([runs[0]], runs[0], "", settings, interactive=False)
    assert view.shown.source == [*SHORT.split(), "quest"]  # its first gen sentence, found
