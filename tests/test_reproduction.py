"""fruit.reporting.reproduction on planted run folders: equal runs reproduce, a shifted
cell and a changed claim verdict are named, and both CPU kinds are said."""

from __future__ import annotations

import json

from test_reporting_fakes import write_run

from fruit.reporting.reproduction import compare, main, two_sided_p
from fruit.reporting.stats import two_sample_p

QF = "question-formation"


def five(root, arch, test_fa, cpu):
    for i, value in enumerate(test_fa):
        full = {"test": value, "hierarchical": 0.01, "linear": 0.3, "log_ratio": -3.0}
        partial = {"test": None, "hierarchical": 0.4, "linear": 0.6, "log_ratio": -0.4}
        run = write_run(root, "quick", QF, arch, i, full, partial)
        config = json.loads((run / "config.json").read_text())
        config["provenance"] = {"cpu": "AMD EPYC", "cpu_capability": cpu}
        (run / "config.json").write_text(json.dumps(config))


def test_two_sided_p_is_twice_the_smaller_tail():
    a, b = [0.1, 0.2, 0.3], [0.5, 0.6, 0.7]
    assert two_sided_p(a, b) == min(1.0, 2 * min(two_sample_p(a, b), two_sample_p(b, a)))
    assert two_sided_p(a, a) == 1.0


def test_the_same_runs_elsewhere_reproduce(tmp_path):
    for root, cpu in ((tmp_path / "committed", "AVX2"), (tmp_path / "fresh", "AVX512")):
        five(root, "Tf", [0.99, 0.98, 0.97, 0.99, 0.985], cpu)
        five(root, "LSTM", [0.0, 0.01, 0.005, 0.0, 0.002], cpu)
    result = compare(tmp_path / "committed", tmp_path / "fresh", "quick")
    assert result.reproduced and result.cells_tested > 0
    assert result.text.startswith("reproduced on this machine")
    assert "committed runs: AMD EPYC (AVX2); these: AMD EPYC (AVX512)" in result.text


def test_a_shifted_cell_and_a_changed_claim_are_named(tmp_path, capsys):
    five(tmp_path / "committed", "Tf", [0.99, 0.98, 0.97, 0.99, 0.985], "AVX2")
    five(tmp_path / "committed", "LSTM", [0.0, 0.01, 0.005, 0.0, 0.002], "AVX2")
    five(tmp_path / "fresh", "Tf", [0.5, 0.45, 0.6, 0.55, 0.52], "AVX512")  # C1 contradicted now
    five(tmp_path / "fresh", "LSTM", [0.0, 0.01, 0.005, 0.0, 0.002], "AVX512")
    result = compare(tmp_path / "committed", tmp_path / "fresh", "quick")
    assert not result.reproduced
    assert any(
        line.startswith(f"{QF}/Tf full.test: 0.524 here, 0.983 committed")
        for line in result.differing
    )
    assert result.claims_changed == ["C1: contradicted here, reproduced committed"]
    assert main([str(tmp_path / "committed"), str(tmp_path / "fresh"), "quick"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NOT reproduced on this machine: 1 of ") and "C1:" in out


def test_no_cell_to_compare_is_no_verdict_and_incomplete_runs_are_named(tmp_path):
    five(tmp_path / "committed", "Tf", [0.99, 0.98, 0.97, 0.99, 0.985], "AVX2")
    # one fresh run finished, two unfinished (folders without metrics.json)
    five(tmp_path / "fresh", "Tf", [0.99], "AVX512")
    for i in (1, 2):
        (tmp_path / "fresh" / "quick" / QF / "Tf" / f"final-{i}").mkdir()
    result = compare(tmp_path / "committed", tmp_path / "fresh", "quick")
    assert not result.reproduced and result.cells_tested == 0
    assert result.text.startswith("nothing to compare: no cell has 2 complete final runs")
    assert "the fresh runs are incomplete: 1 of 3 final runs finished (5 committed)" in result.text


def test_fresh_runs_from_two_cpu_kinds_are_not_called_this_machine(tmp_path):
    five(tmp_path / "committed", "Tf", [0.99, 0.98, 0.97, 0.99, 0.985], "AVX2")
    five(tmp_path / "fresh", "Tf", [0.99, 0.98, 0.97, 0.99, 0.985], "AVX512")
    config = tmp_path / "fresh" / "quick" / QF / "Tf" / "final-0" / "config.json"
    record = json.loads(config.read_text())
    record["provenance"]["cpu_capability"] = "AVX2"
    config.write_text(json.dumps(record))
    result = compare(tmp_path / "committed", tmp_path / "fresh", "quick")
    assert result.text.startswith("reproduced on these machines:")
    assert "the fresh runs come from 2 CPU kinds" in result.text


def test_make_reproduce_on_the_committed_runs_says_byte_identical(tmp_path):
    """`make reproduce REPRO=<dir>` with <dir>/results/runs/quick a copy of the committed
    run records: `fruit run` finds every run complete and only reports, and the verdict
    (scripts/reproduce-verdict.sh, what the Makefile runs) is "byte for byte"."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import pytest

    repo = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None or not (repo / ".git").exists():
        pytest.skip("not a git checkout: the committed records cannot be listed")
    listed = subprocess.run(
        ["git", "ls-files", "results/runs/quick"], cwd=repo, capture_output=True, text=True
    ).stdout.split()
    if not any(name.endswith("metrics.json") for name in listed):
        pytest.skip("no committed runs of the quick profile")
    repro = tmp_path / "repro"
    for name in listed:
        (repro / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / name, repro / name)
    env = {**os.environ, "PYTHONPATH": str(repo / "lib")}
    run = subprocess.run(
        [sys.executable, "-m", "fruit", "run", "--profile", "quick", "--workers", "1",
         "--no-dashboard", "--results", str(repro / "results"),
         "--figures", str(repro / "figures"), "--data-dir", str(tmp_path / "data")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "runs: 0 trained" in run.stdout
    verdict = subprocess.run(
        ["bash", "scripts/reproduce-verdict.sh", "quick", str(repro), sys.executable],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert verdict.stdout.startswith("reproduced: ") and "byte for byte" in verdict.stdout, (
        verdict.stdout
    )


def _run_verdict(repro, profile: str = "quick", cwd=None):
    """scripts/reproduce-verdict.sh on a profile's tables under REPRO, called from CWD
    (default: the repository), with no statistical fallback (its python is `false`)."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "reproduce-verdict.sh"
    return subprocess.run(
        ["bash", str(script), profile, str(repro), "false"],
        cwd=cwd or script.parents[1], capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _verdict(repro, profile: str = "quick") -> str:
    """What the verdict script prints for a profile's tables under REPRO."""
    return _run_verdict(repro, profile).stdout


def test_a_profile_without_committed_tables_gets_a_line_saying_so(tmp_path):
    """`make reproduce PROFILE=paper`: nothing committed to compare with, said in one line."""
    (tmp_path / "repro").mkdir()
    said = _verdict(tmp_path / "repro", profile="paper")
    assert said.startswith("no committed tables of profile paper"), said


def test_a_reproduction_without_fresh_tables_is_no_verdict(tmp_path):
    """A reproduction that left no tables (or no folder) is an error, never "reproduced"."""
    missing = _run_verdict(tmp_path / "nothing", cwd=tmp_path)
    assert missing.returncode == 2 and "is not a folder" in missing.stderr, missing
    (tmp_path / "repro").mkdir()
    empty = _run_verdict("repro", cwd=tmp_path)  # relative to the caller, not the repository
    assert empty.returncode == 2 and "no fresh tables of profile quick" in empty.stderr, empty
    assert "reproduced" not in empty.stdout


def test_the_verdict_blanks_only_the_commits_in_the_captions(tmp_path):
    """scripts/reproduce-verdict.sh on copies of the committed quick tables: another list
    of commits in a caption is "equal in every number"; a number changed in that same
    caption line is not (it goes on to the statistical comparison)."""
    import re
    import shutil
    from pathlib import Path

    import pytest

    repo = Path(__file__).resolve().parents[1]
    committed = repo / "results" / "tables" / "quick"
    captioned = sorted(p for p in committed.glob("*.md") if "; code " in p.read_text())
    if not captioned:
        pytest.skip("no committed quick tables with a code caption")
    fresh = tmp_path / "repro" / "results" / "tables" / "quick"
    shutil.copytree(committed, fresh)

    def verdict() -> str:
        return _verdict(tmp_path / "repro")

    assert "byte for byte" in verdict()
    target = fresh / captioned[0].name
    text = target.read_text()
    text = re.sub(r"; code [0-9a-f]{7}", "; code 1234567, abcdef0+dirty", text, count=1)
    target.write_text(text)
    assert "in every number" in verdict()
    line = next(x for x in text.splitlines() if "; code 1234567" in x)
    changed = re.sub(r"\d+(?=\D*; code 1234567)", lambda m: str(int(m.group()) + 1), line, count=1)
    assert changed != line
    target.write_text(text.replace(line, changed))
    said = verdict()
    assert said.startswith("not byte-identical"), said
    # it names the file that differs, and only that one
    assert f": {target.name} differs beyond the commits named" in said, said
    # a table on one side only is named too
    (fresh / "extra.md").write_text("| a |\n")
    said = verdict()
    assert f": extra.md, {target.name} differ beyond" in said or (
        f": {target.name}, extra.md differ beyond" in said
    ), said


def test_the_verdict_blanks_the_backfill_marks_but_not_the_numbers_of_those_rows(tmp_path):
    """The committed quick by-subject.md marks its backfilled rows (†) and says how; a fresh
    run records the breakdown itself, so its table has neither. The verdict reads that as
    provenance ("in every number"), while a changed number in a marked row is still caught."""
    import re
    import shutil
    from pathlib import Path

    import pytest

    repo = Path(__file__).resolve().parents[1]
    committed = repo / "results" / "tables" / "quick"
    table = committed / "by-subject.md"
    if not table.is_file() or " † |" not in table.read_text():
        pytest.skip("the committed quick by-subject.md has no backfilled rows")
    fresh = tmp_path / "repro" / "results" / "tables" / "quick"
    shutil.copytree(committed, fresh)

    def verdict() -> str:
        return _verdict(tmp_path / "repro")

    text = table.read_text()
    unmarked = re.sub(r" Rows marked † were computed after the run [^:]*: [^.]*\.", "", text)
    unmarked = unmarked.replace(" † |", " |")
    assert unmarked != text and "†" not in unmarked
    (fresh / "by-subject.md").write_text(unmarked)
    assert "in every number" in verdict()

    marked_row = next(x for x in unmarked.splitlines() if x.startswith("| final-"))
    changed = re.sub(
        r"\| (\d\.\d{3}) \|", lambda m: f"| {float(m[1]) + 0.001:.3f} |", marked_row, count=1
    )
    assert changed != marked_row
    (fresh / "by-subject.md").write_text(unmarked.replace(marked_row, changed))
    said = verdict()
    assert said.startswith("not byte-identical") and ": by-subject.md differs" in said, said
