"""fruit.reporting.searches on planted run folders: the selected trial is the one with the
lowest validation cross-entropy once every trial finished, taken-over trials say so, and
the by-subject rows of each final run are printed as recorded."""

from __future__ import annotations

import json

from test_reporting_fakes import write_run

from fruit.reporting.runs import load_runs
from fruit.reporting.searches import markdown_by_subject, markdown_search

QF = "question-formation"
FULL = {"test": 0.9, "hierarchical": 0.1, "linear": 0.3, "log_ratio": -1.0}
PARTIAL = {"test": None, "hierarchical": 0.4, "linear": 0.6, "log_ratio": -0.4}


def _edit(run, record="metrics.json", **fields):
    path = run / record
    content = json.loads(path.read_text()) if path.exists() else {}
    content.update(fields)
    path.write_text(json.dumps(content))


def test_the_selected_trial_is_marked_only_once_the_search_finished(tmp_path):
    for i, ce in enumerate((1.2, 0.9, 1.0)):
        run = write_run(tmp_path, "p", QF, "Tf+Nd", i, FULL, PARTIAL, phase="search")
        _edit(run, best_validation_cross_entropy=ce, learning_rate=1e-4 * (i + 1))
    # taken over finished (fruit.experiments.planning.reuse writes both records), and unfinished
    # then finished here (metrics.json written by this profile's run, without the field)
    for record in ("config.json", "metrics.json"):
        _edit(run, record, reused_from="other/question-formation/Tf+Nd/search-2")
    _edit(
        run.parent / "search-0",
        "config.json",
        reused_from="other/question-formation/Tf+Nd/search-0",
    )
    text = markdown_search(load_runs(tmp_path, "p", phase=None), "profile p")
    assert "3 of 3 trials finished; selected trial 1 (learning rate 2.00e-04, B 1024)" in text
    assert "| **1** |" in text and "**0.9000**" in text and "| **0** |" not in text
    assert "complete; taken over from other/question-formation/Tf+Nd/search-2 |" in text
    assert (
        "taken over from other/question-formation/Tf+Nd/search-0 unfinished, finished here |"
        in text
    )
    assert text.count("taken over") == 3  # the two trials and the caption
    # a fourth trial, unfinished: no selection yet
    (tmp_path / "p" / QF / "Tf+Nd" / "search-3").mkdir()
    (tmp_path / "p" / QF / "Tf+Nd" / "search-3" / "config.json").write_text("{}")
    text = markdown_search(load_runs(tmp_path, "p", phase=None), "profile p")
    assert "3 of 4 trials finished." in text and "selected" not in text.split("\n\n")[1]
    assert "| 3 | | | | | | | | | | unfinished |" in text
    # a profile of 5 trials, one of which has no folder yet: no selection either
    (tmp_path / "p" / QF / "Tf+Nd" / "search-3" / "config.json").unlink()
    (tmp_path / "p" / QF / "Tf+Nd" / "search-3").rmdir()
    text = markdown_search(load_runs(tmp_path, "p", phase=None), "profile p", trials=5)
    assert "3 of 5 trials finished." in text and "selected" not in text.split("\n\n")[1]


def test_by_subject_rows_are_printed_per_final_run(tmp_path):
    rows = [
        {"subject": "ORC", "n": 3, "FA hierarchical": 0.25, "FA linear": 0.5},
        {"subject": "SRC-trans", "n": 1, "FA hierarchical": 0.125, "FA linear": 0.875},
    ]
    _edit(write_run(tmp_path, "p", QF, "Tf", 0, FULL, PARTIAL), by_subject=rows)
    write_run(tmp_path, "p", QF, "Tf", 1, FULL, PARTIAL)  # recorded before by_subject
    write_run(tmp_path, "p", QF, "LSTM", 0, FULL, PARTIAL)
    text = markdown_by_subject(load_runs(tmp_path, "p"), "profile p")
    assert "| Run | ORC (n 3): FA hierarchical | ORC (n 3): FA linear |" in text
    assert "| final-0 | 0.250 | 0.500 | 0.125 | 0.875 |" in text
    assert "| final-1 | not recorded |" in text
    lstm = text.split("*question formation, LSTM.*")[1]
    assert "Not recorded: the runs were made before metrics.json carried it" in lstm
    # the paper's row order: Tf before LSTM
    assert text.index("question formation, Tf.") < text.index("question formation, LSTM.")


def test_search_trials_with_a_breakdown_follow_the_finals_and_added_rows_are_marked(tmp_path):
    rows = [{"subject": "ORC", "n": 2, "FA hierarchical": 0.5, "FA linear": 0.25}]
    _edit(write_run(tmp_path, "p", QF, "Tf+Nd", 0, FULL, PARTIAL), by_subject=rows)
    for i, ce in enumerate((1.2, 0.9)):
        run = write_run(tmp_path, "p", QF, "Tf+Nd", i, FULL, PARTIAL, phase="search")
        trial_rows = [dict(rows[0], **{"FA hierarchical": 0.125 * (i + 1)})]
        added = {"from": "best.pt", "commit": "abcdef0123456789"}
        _edit(run, best_validation_cross_entropy=ce, by_subject=trial_rows, by_subject_added=added)
    text = markdown_by_subject(load_runs(tmp_path, "p", phase=None), "profile p")
    finals, trials = text.split("*question formation, Tf+Nd: search trials.*")
    assert "| final-0 | 0.500 | 0.250 |" in finals
    assert "| search-0 † | 0.125 | 0.250 |" in trials
    assert "| **search-1** † | 0.250 | 0.250 |" in trials  # the lowest validation CE
    assert (
        "by commit abcdef0 (`python -m fruit.backfill`; metrics.json's by_subject_added says from which)"
        in text
    )
    # trials without a breakdown add nothing
    plain = tmp_path / "q"
    write_run(plain, "p", QF, "Tf", 0, FULL, PARTIAL)
    write_run(plain, "p", QF, "Tf", 0, FULL, PARTIAL, phase="search")
    assert ": search trials.*" not in markdown_by_subject(load_runs(plain, "p", phase=None), "p")
