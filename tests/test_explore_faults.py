"""The explore notebook with bad input (issue 34): a damaged or another run's best.pt,
parameters out of range, a run folder that is not one, a sentence far longer than any
task's. Each ends in one line naming the file or parameter, at once; in a kernel the
notebook stops with that line, not a traceback."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import torch
from test_explore_widgets import SHORT, save_run

from fruit import explore
from fruit.errors import FruitError
from fruit.explore_widgets import Explorer, Settings, compute
from fruit.io import DamagedRecord

REPO = Path(__file__).resolve().parents[1]


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and "Traceback" not in text, text
    return text


DAMAGE = {
    "truncated": (lambda p, other: p.write_bytes(p.read_bytes()[:500]), "failed reading zip archive"),
    "not a torch file": (lambda p, other: p.write_bytes(b"hello"), "UnpicklingError"),
    "empty": (lambda p, other: p.write_bytes(b""), "EOFError: Ran out of input"),
    "no parameters": (lambda p, other: torch.save({"model": [1, 2]}, p), "holds no model parameters"),
    "another run's": (
        lambda p, other: shutil.copy(other / "best.pt", p),
        "parameters of another model than config.json's",
    ),
}  # fmt: skip


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_or_foreign_best_pt_is_one_line_naming_it(tmp_path, damage):
    run_dir = save_run(tmp_path, "Tf+Sup")
    other = save_run(tmp_path, "RNN")
    spoil, expected = DAMAGE[damage]
    spoil(run_dir / "best.pt", other)
    with pytest.raises(DamagedRecord) as caught:
        explore.load_run(run_dir, device="cpu")
    line = one_line(caught.value)
    assert line.startswith(f"{run_dir / 'best.pt'} is damaged (") and expected in line, line
    assert line.endswith("train that run again")


def test_a_damaged_best_pt_at_the_end_of_training_is_one_line(tmp_path):
    """fruit.training loads best.pt for the final evaluation: the same one line."""
    from fruit.training.checkpoints import load_best

    run_dir = save_run(tmp_path, "Tf+Sup")
    model = explore.load_run(run_dir, device="cpu").model
    (run_dir / "best.pt").write_bytes(b"\x00" * 10)
    with pytest.raises(DamagedRecord, match="best.pt is damaged .*remove checkpoint.pt, best.pt"):
        load_best(run_dir, model, "cpu")


def test_a_run_folder_that_is_not_one_is_named(tmp_path):
    run_dir = save_run(tmp_path, "Tf+Sup")
    (tmp_path / "a-file").write_text("x")
    cases = {
        tmp_path / "nothing": "run_dir .*nothing does not exist",
        tmp_path / "a-file": "run_dir .*a-file is a file, not a folder",
    }
    for where, message in cases.items():
        with pytest.raises(FruitError, match=message) as caught:
            Explorer([run_dir], where, SHORT, Settings(device="cpu"), interactive=False)
        one_line(caught.value)
    (run_dir / "config.json").write_text('{"task": "question-formation"}')
    with pytest.raises(FruitError, match="config.json lacks architecture, d, data_dir"):
        explore.load_run(run_dir, device="cpu")


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"k": 0}, "k must be an integer from 1 to 50, not 0"),
        ({"k": 10**9}, "k must be an integer from 1 to 50, not 1000000000"),
        ({"k": "abc"}, "k must be an integer from 1 to 50, not 'abc'"),
        ({"k": 2.5}, "k must be an integer from 1 to 50, not 2.5"),
        ({"max_tokens": 0}, "max_tokens must be an integer from 1 to 100, not 0"),
        ({"max_tokens": 10**7}, "max_tokens must be an integer from 1 to 100"),
        ({"samples": -1}, "samples must be an integer from 0 to 50, not -1"),
        ({"device": "cpu:7"}, "device 'cpu:7': the CPU has no numbered devices"),
        ({"data_dir": Path("/nonexistent")}, "data_dir /nonexistent is not a folder"),
        # a file where the outputs would go: said before any work, not by save() at the end
        ({"output_dir": Path(__file__)}, f"output_dir {__file__}: {__file__} is a file"),
        ({"output_dir": Path(__file__) / "out"}, f"{__file__} is a file, not a folder"),
    ],
)
def test_parameters_out_of_range_are_refused_like_the_command_lines(settings, message):
    with pytest.raises(FruitError) as caught:
        Settings(**settings)
    assert message in one_line(caught.value)


def test_the_bounds_hold_in_the_functions_too(tmp_path):
    """Called directly (the notebook's cells may), not only through Settings: k 10**9
    took 194 s and then failed to allocate 61 GB; max_tokens 0 an UnboundLocalError."""
    run = explore.load_run(save_run(tmp_path, "Tf+Sup"), device="cpu")
    source = run.source(SHORT)
    for call, message in [
        (lambda: explore.best_outputs(run, source, k=10**9), "k must be an integer from 1 to 50"),
        (lambda: explore.best_outputs(run, source, max_tokens=0), "max_tokens must be"),
        (lambda: explore.first_words(run, source, k=-1), "k must be an integer from 1 to 50"),
        (lambda: explore.decoded(run, source, samples=10**7), "samples must be an integer"),
    ]:
        with pytest.raises(FruitError, match=message):
            call()
    at_the_bounds = Settings(k=explore.MAX_K, samples=3, max_tokens=explore.MAX_OUTPUT_TOKENS)
    assert len(compute(run, SHORT, at_the_bounds).first) <= explore.MAX_K


def test_a_sentence_far_longer_than_any_task_is_refused_at_once(tmp_path):
    run = explore.load_run(save_run(tmp_path, "Tf+Sup"), device="cpu")
    start = time.monotonic()
    with pytest.raises(FruitError, match="the sentence has 10,000 words; at most 59"):
        compute(run, " ".join(["the"] * 10_000), Settings(device="cpu"))
    assert time.monotonic() - start < 5
    longest = " ".join(["the"] * (explore.MAX_SOURCE_TOKENS - 1))
    assert len(run.source(longest)) == explore.MAX_SOURCE_TOKENS  # the bound itself is fine


@pytest.mark.slow
@pytest.mark.parametrize(
    "given, message",
    [
        ("k = 0", "k must be an integer from 1 to 50, not 0"),
        ("max_tokens = -1", "max_tokens must be an integer from 1 to 100, not -1"),
        ("run_dir = '/nonexistent/run'", "run_dir /nonexistent/run does not exist"),
        ("damaged = True", "best.pt is damaged (UnpicklingError"),
    ],
)
def test_the_notebook_stops_in_one_line(tmp_path, given, message):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    run_dir = save_run(tmp_path, "Tf+Sup")
    parameters = {"run_dir": str(run_dir), "results_dir": str(tmp_path), "sentence": SHORT,
                  "device": "cpu", "interactive": False, "by_subject": False}  # fmt: skip
    name, value = (part.strip() for part in given.split("="))
    if name == "damaged":
        (run_dir / "best.pt").write_bytes(b"hello")
    else:
        parameters[name] = eval(value)
    with pytest.raises(PapermillExecutionError) as e:
        papermill.execute_notebook(
            str(REPO / "notebooks" / "explore.ipynb"), str(tmp_path / "executed.ipynb"),
            parameters=parameters, progress_bar=False, cwd=str(tmp_path), kernel_name="python3",
        )  # fmt: skip
    assert e.value.ename in ("FruitError", "DamagedRecord") and message in e.value.evalue
    shown = str(e.value)
    assert "Traceback" not in shown and len(shown.strip().splitlines()) <= 4, shown
