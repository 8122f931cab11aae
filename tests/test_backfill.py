"""fruit.backfill: by_subject added to a finished run's metrics.json from its best.pt.

Oracle: the rows the run itself recorded at its end (fruit.training.records), which the
backfill must give again from best.pt once they are taken out of metrics.json.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest

from fruit import backfill, training
from fruit.errors import FruitError


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    from fruit.tasks import get_task
    from fruit.tasks.splits import write_task

    root = tmp_path_factory.mktemp("backfill")
    task = get_task("question-formation")
    write_task(
        root / "data",
        task,
        task.generate(seed=1, sizes={"train": 120, "dev": 20, "test": 20, "gen": 30}),
    )
    config = training.RunConfig(
        task="question-formation", architecture="Tf+Nd", profile="smoke", seed=7, d=8,
        learning_rate=1e-3, batch_tokens=256, train_size=120, dev_size=20, test_size=20,
        gen_size=24, checkpoint_every=60, max_epochs=1, data_dir=str(root / "data"), device="cpu",
    )  # fmt: skip
    run_dir = root / "run"
    training.train_run(config, run_dir)
    return run_dir


def strip(run_dir, to):
    shutil.copytree(run_dir, to)
    metrics = json.loads((to / "metrics.json").read_text())
    rows = metrics.pop("by_subject")
    (to / "metrics.json").write_text(json.dumps(metrics))
    return metrics, rows


def test_the_rows_a_run_recorded_come_back_from_its_best_checkpoint(finished_run, tmp_path):
    before, recorded = strip(finished_run, tmp_path / "old")
    assert sum(r["n"] for r in recorded) == 24  # the run's gen_size, not all of gen.tsv
    rows = backfill.add_by_subject(tmp_path / "old")
    after = json.loads((tmp_path / "old" / "metrics.json").read_text())
    assert [r["subject"] for r in rows] == [r["subject"] for r in recorded]
    for mine, theirs in zip(rows, recorded):
        assert mine["n"] == theirs["n"]
        for column in theirs:
            if column not in ("subject", "n"):
                assert math.isclose(mine[column], theirs[column], rel_tol=1e-6), column
    assert after["by_subject"] == rows
    assert set(after["by_subject_added"]) == {"from", "commit"}
    assert {k: v for k, v in after.items() if not k.startswith("by_subject")} == before
    # a second call leaves the record as it is
    assert backfill.add_by_subject(tmp_path / "old") == rows


def test_another_runs_checkpoint_is_refused_and_nothing_written(finished_run, tmp_path):
    before, _ = strip(finished_run, tmp_path / "old")
    metrics = dict(
        before, full=dict(before["full"], hierarchical=before["full"]["hierarchical"] * 0.5 + 0.1)
    )
    (tmp_path / "old" / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(FruitError, match="not this run's best.pt"):
        backfill.add_by_subject(tmp_path / "old")
    assert "by_subject" not in json.loads((tmp_path / "old" / "metrics.json").read_text())


def test_the_command_line_says_what_it_did_and_refuses_an_unfinished_run(
    finished_run, tmp_path, capsys
):
    strip(finished_run, tmp_path / "old")
    assert backfill.main([str(tmp_path / "old")]) == 0
    assert "kinds of subject, 24 sentences" in capsys.readouterr().out
    diverged, _ = strip(finished_run, tmp_path / "diverged")
    (tmp_path / "diverged" / "metrics.json").write_text(
        json.dumps(dict(diverged, status="diverged"))
    )
    assert backfill.main([str(tmp_path / "diverged")]) == 2
    assert "diverged: it has no generalization means" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert backfill.main([str(tmp_path / "empty")]) == 2
    assert "no metrics.json" in capsys.readouterr().err


def test_a_file_or_a_moved_data_folder_is_one_line_naming_the_option(
    finished_run, tmp_path, capsys
):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a run")
    assert backfill.main([str(a_file)]) == 2
    assert "is a file, not a run folder" in capsys.readouterr().err
    _, _ = strip(finished_run, tmp_path / "moved")
    assert backfill.main([str(tmp_path / "moved"), "--data-dir", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "give --data-dir DIR" in err and "data_dir=" not in err and len(err.splitlines()) == 1
