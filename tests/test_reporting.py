"""Aggregating run folders into the paper's tables; graceful degradation; files and figures."""

from __future__ import annotations

import csv
import json
import math
import statistics

import pytest
from PIL import Image
from test_reporting_fakes import write_fake_results, write_run

from fruit import reporting
from fruit.errors import FruitError
from fruit.names import PAPER_ARCHITECTURES
from fruit.reporting.render import format_std, latex_table, markdown_table
from fruit.reporting.runs import COLUMNS, load_runs
from fruit.reporting.tables import bar_chart_data

QF = "question-formation"


def metrics(test, hier, lin, phier, plin):
    full = {"test": test, "hierarchical": hier, "linear": lin, "log_ratio": math.log(hier / lin)}
    partial = {
        "test": None,
        "hierarchical": phier,
        "linear": plin,
        "log_ratio": math.log(phier / plin),
    }
    return full, partial


def test_mean_and_population_std_over_runs(tmp_path):
    values = [
        (0.99, 0.30, 0.10, 0.7, 0.3),
        (0.97, 0.10, 0.20, 0.6, 0.4),
        (0.98, 0.20, 0.05, 0.9, 0.1),
    ]
    for i, v in enumerate(values):
        write_run(tmp_path, "smoke", QF, "Tf+Nd", i, *metrics(*v))
    table = reporting.load_tables(tmp_path, "smoke")[QF]
    row = table.row("Tf+Nd")
    assert row.runs == 3 and row.runs_label() == "3"
    columns = list(zip(*values))
    expected = [
        columns[0],
        columns[1],
        columns[2],
        [math.log(h / l) for h, l in zip(columns[1], columns[2])],
        columns[3],
        columns[4],
        [math.log(h / l) for h, l in zip(columns[3], columns[4])],
    ]
    for cell, vals in zip(row.cells, expected):
        assert math.isclose(cell.mean, statistics.fmean(vals))
        assert math.isclose(cell.std, statistics.pstdev(vals), abs_tol=1e-12)  # population, ddof 0


def test_cell_format_like_the_paper():
    assert format_std(0.004) == ".00"
    assert format_std(0.247) == ".25"
    assert format_std(2.437) == "2.44"
    assert format_std(10.094) == "10.09"


def test_bold_on_unrounded_means_max_min_per_column(tmp_path):
    # Both test means print as 0.999; only the larger unrounded one is bold.
    write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.9991, 0.2, 0.30, 0.5, 0.5))
    write_run(tmp_path, "smoke", QF, "Tf+Sup", 0, *metrics(0.9993, 0.1, 0.05, 0.6, 0.2))
    table = reporting.load_tables(tmp_path, "smoke")[QF]
    tf, sup = table.row("Tf"), table.row("Tf+Sup")
    j = {c: i for i, c in enumerate(COLUMNS)}
    assert not tf.cells[j["full", "test"]].bold and sup.cells[j["full", "test"]].bold
    assert tf.cells[j["full", "hierarchical"]].bold  # max
    assert sup.cells[j["full", "linear"]].bold and not tf.cells[j["full", "linear"]].bold  # min
    assert sup.cells[j["full", "log_ratio"]].bold  # log(2) > log(2/3)
    tex = latex_table(table)
    assert r"Tf & \meanAndVar{0.999}{.00}" in tex
    assert r"Tf+Sup & \meanAndVarBold{0.999}{.00}" in tex


def test_missing_runs_show_as_dashes_with_counts(tmp_path):
    write_run(tmp_path, "paper", QF, "Tf", 0, *metrics(0.99, 0.2, 0.3, 0.5, 0.5))
    write_run(tmp_path, "paper", QF, "Tf", 1, *metrics(0.97, 0.2, 0.3, 0.5, 0.5))
    # Tf+Sup: one complete run, one diverged, one unfinished (no metrics.json).
    write_run(tmp_path, "paper", QF, "Tf+Sup", 0, *metrics(0.50, 0.1, 0.2, 0.4, 0.6))
    write_run(tmp_path, "paper", QF, "Tf+Sup", 1, status="diverged")
    (tmp_path / "paper" / QF / "Tf+Sup" / "final-2").mkdir()
    # LSTM: only diverged.
    write_run(tmp_path, "paper", QF, "LSTM", 0, status="diverged")
    # A search run is not a final run and is ignored.
    write_run(tmp_path, "paper", QF, "RNN", 0, *metrics(0.99, 0.9, 0.01, 0.9, 0.1), phase="search")

    # the paper profile plans the paper's fifteen architectures: each gets a row (and an
    # architecture registered besides them does not)
    table = reporting.load_tables(tmp_path, "paper", expected_runs=2)[QF]
    assert [r.architecture for r in table.rows] == list(PAPER_ARCHITECTURES)
    assert table.row("Tf").runs_label() == "2"
    sup = table.row("Tf+Sup")
    assert sup.runs_label() == "1/2 (1 diverged, 1 unfinished)"
    assert math.isclose(sup.cells[0].mean, 0.50)  # averaged over the complete run only
    assert table.row("LSTM").runs_label() == "0/2 (1 diverged)"
    assert table.row("RNN").runs_label() == "0/2"
    assert all(c.mean is None and not c.bold for c in table.row("RNN").cells)

    tex, md = latex_table(table), markdown_table(table)
    empty = " & ".join([r"\text{--} &"] * 7)
    assert rf"RNN & {empty} & 0/2 \\" in tex
    assert rf"LSTM & {empty} & 0/2 (1 diverged) \\" in tex
    assert "| RNN | " + " | ".join(["--"] * 7) + " | 0/2 |" in md
    assert "| Tf+Sup | 0.500 ±.00 |" in md and "1/2 (1 diverged, 1 unfinished)" in md


def test_rows_are_the_architectures_the_profile_plans_then_others_with_runs(tmp_path):
    # smoke plans Tf and Tf+Sup only: no empty rows for the thirteen it never trains
    write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.99, 0.2, 0.3, 0.5, 0.5))
    write_run(tmp_path, "smoke", QF, "LSTM", 0, *metrics(0.5, 0.2, 0.3, 0.5, 0.5))
    table = reporting.load_tables(tmp_path, "smoke")[QF]
    assert [r.architecture for r in table.rows] == ["Tf", "Tf+Sup", "LSTM"]
    assert table.row("Tf+Sup").runs_label() == "0/1"


def test_default_expected_runs_is_the_largest_row(tmp_path):
    # "fake" is no shipped profile, so the run folders alone decide.
    for i in range(3):
        write_run(tmp_path, "fake", QF, "Tf", i, *metrics(0.99, 0.2, 0.3, 0.5, 0.5))
    write_run(tmp_path, "fake", QF, "Tf+Nd", 0, *metrics(0.99, 0.2, 0.3, 0.5, 0.5))
    table = reporting.load_tables(tmp_path, "fake")[QF]
    assert table.row("Tf").runs_label() == "3"
    assert table.row("Tf+Nd").runs_label() == "1/3"


def test_expected_runs_and_scale_come_from_the_profile(tmp_path):
    from fruit.profiles import load_profile

    paper = load_profile("paper")
    write_run(tmp_path / "runs", "paper", QF, "Tf", 0, *metrics(0.99, 0.2, 0.3, 0.5, 0.5))
    # results_dir may also be the folder above runs/ (what `fruit run` passes)
    table = reporting.load_tables(tmp_path, "paper")[QF]
    assert table.row("Tf").runs_label() == f"1/{paper.final_runs}"
    assert table.scale_note == ("reduced-scale profile: paper" if paper.reduced else "")


def test_a_cell_missing_in_some_run_is_dashes_not_a_partial_average(tmp_path):
    full, partial = metrics(0.99, 0.2, 0.3, 0.5, 0.5)
    write_run(tmp_path, "smoke", QF, "Tf", 0, full, partial)
    write_run(tmp_path, "smoke", QF, "Tf", 1, {**full, "log_ratio": None}, partial)
    row = reporting.load_tables(tmp_path, "smoke")[QF].row("Tf")
    assert row.cells[COLUMNS.index(("full", "log_ratio"))].mean is None
    assert math.isclose(row.cells[0].mean, 0.99)


def test_extra_architectures_are_listed_but_never_bold(tmp_path):
    write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.9, 0.2, 0.3, 0.5, 0.5))
    write_run(tmp_path, "smoke", QF, "GRU+Nd", 0, *metrics(1.0, 0.9, 0.01, 0.9, 0.1))
    table = reporting.load_tables(tmp_path, "smoke")[QF]
    assert table.rows[-1].architecture == "GRU+Nd"
    assert not any(c.bold for c in table.rows[-1].cells)
    assert table.row("Tf").cells[0].bold


def test_unknown_profile_lists_the_profiles(tmp_path):
    write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.9, 0.2, 0.3, 0.5, 0.5))
    with pytest.raises(FruitError, match="no runs of profile 'quick' under .*: smoke$"):
        load_runs(tmp_path, "quick")
    with pytest.raises(FruitError, match="nothing is not a folder"):
        load_runs(tmp_path / "nothing", "quick")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FruitError, match="no profile folders"):
        load_runs(tmp_path / "empty", "quick")


def test_a_notebooks_profile_parameter_resolves_to_source_name_and_settings(tmp_path):
    """Names stay names (settings None when no profile ships under it); a file's path is read
    from the root given, and its runs are under the name the file declares."""
    shipped = reporting.resolve_profile("smoke", tmp_path)
    assert shipped[:2] == ("smoke", "smoke") and shipped.settings.name == "smoke"
    assert reporting.resolve_profile("mine", tmp_path) == ("mine", "mine", None)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "file.toml").write_text(
        f'name = "declared"\ndescription = "one pair"\ntasks = ["{QF}"]\narchitectures = ["Tf"]\n'
        "[data]\ntrain = 10\ndev = 10\ntest = 10\ngen = 10\n[search]\ntrials = 0\n"
        "[final]\nruns = 2\nmax_epochs = 1\nbatch_tokens = 512\nlearning_rate = 0.001\n"
    )
    source, name, settings = reporting.resolve_profile("p/file.toml", tmp_path)
    assert (source, name) == (str(tmp_path / "p" / "file.toml"), "declared")
    assert settings.pairs == ((QF, "Tf"),)
    with pytest.raises(FruitError, match="profile file .*gone.toml.* does not exist"):
        reporting.resolve_profile("p/gone.toml", tmp_path)


def test_bad_metrics_json_names_the_file(tmp_path):
    run = write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.9, 0.2, 0.3, 0.5, 0.5))
    (run / "metrics.json").write_text("{not json")
    with pytest.raises(FruitError, match="metrics.json"):
        load_runs(tmp_path, "smoke")


def test_reduced_scale_profiles_say_so(tmp_path):
    write_fake_results(tmp_path, "quick", [QF], ["Tf", "RNN"], runs=1)
    write_fake_results(tmp_path, "paper", [QF], ["Tf", "RNN"], runs=1)
    quick = reporting.load_tables(tmp_path, "quick")[QF]
    paper = reporting.load_tables(tmp_path, "paper")[QF]
    for render in (latex_table, markdown_table):
        assert "reduced-scale profile: quick" in render(quick)
        assert "reduced-scale" not in render(paper)
    assert "reduced-scale profile: quick" in reporting.figure_title("quick")
    assert "reduced-scale" not in reporting.figure_title("paper")
    assert "reduced-scale profile: paper" in reporting.figure_title("paper", reduced=True)
    assert "reduced-scale" not in reporting.figure_title("quick", reduced=False)
    # a profile that follows the paper's protocol on its pairs is named, not "reduced"
    assert "Ours; profile: paper-search (" in reporting.figure_title("paper-search", reduced=False)
    assert reporting.scale_note(reporting.PAPER, reduced=True) == ""


def test_bar_chart_keeps_rows_with_printed_test_fa_at_least_0_9(tmp_path):
    write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.8996, 0.2, 0.3, 0.5, 0.5))  # prints 0.900
    write_run(tmp_path, "smoke", QF, "RNN", 0, *metrics(0.8994, 0.2, 0.3, 0.5, 0.5))  # prints 0.899
    bars = bar_chart_data(reporting.load_tables(tmp_path, "smoke")[QF])
    assert {b["architecture"] for b in bars} == {"Tf"}
    assert len(bars) == 4  # full/partial x hierarchical/linear


def test_report_writes_every_file_and_png_sizes(tmp_path):
    results = tmp_path / "runs"
    tasks = [QF, "passivization"]
    write_fake_results(results, "smoke", tasks, ["Tf", "Tf+Nd", "RNN"], runs=2)
    tables, written = reporting.report(results, "smoke", tmp_path / "tables", tmp_path / "figures")
    assert list(tables) == tasks and tables[QF].row("Tf").runs == 2
    ours = tmp_path / "tables" / "smoke"
    for task in tasks:
        for name in (
            f"{task}.tex",
            f"{task}.csv",
            f"{task}.md",
            f"{task}.comparison.csv",
            f"{task}.comparison.md",
        ):
            assert (ours / name).stat().st_size > 0, name
    with open(ours / f"{QF}.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "ours"]
    # smoke plans Tf and Tf+Sup; Tf+Nd and RNN have runs, so they follow in the paper's order
    assert [r["architecture"] for r in rows] == ["Tf", "Tf+Sup", "Tf+Nd", "RNN"]
    assert rows[0]["runs"] == "2"
    with open(ours / f"{QF}.comparison.csv") as f:
        comp = [r for r in csv.DictReader(f) if r["architecture"] == "Tf" and r["column"] == "test"]
    assert math.isclose(float(comp[0]["difference"]), float(comp[0]["ours_mean"]) - 0.999)
    assert comp[0]["note"] == (
        "reduced-scale profile: smoke (pipeline check only: tiny data and runs, numbers mean nothing)"
    )
    paper_std = max(float(comp[0]["paper_std"]), 0.005)
    assert math.isclose(
        float(comp[0]["difference_in_paper_std"]), float(comp[0]["difference"]) / paper_std
    )
    assert len(list((tmp_path / "tables" / "paper-reported").glob("*.tex"))) == 7

    figs = tmp_path / "figures"
    for stem, n in [
        (f"smoke/bar-{QF}", 1),
        ("smoke/bar-charts", 2),
        ("paper-reported/bar-charts", 4),
    ]:
        with Image.open(figs / f"{stem}.png") as im:
            assert im.size == reporting.figure_pixels(n), stem
            assert im.convert("L").getextrema()[0] < 128  # something dark was drawn
        assert (figs / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
    assert all(p.exists() for paths in written.values() for p in paths)


def test_fruit_report_command(tmp_path, capsys):
    from fruit.cli import main

    write_fake_results(tmp_path / "runs", "smoke", [QF], ["Tf", "RNN"], runs=1)
    common = ["--results", str(tmp_path / "runs"), "--out", str(tmp_path / "t")]
    assert main(["report", *common, "--profile", "smoke", "--no-figures", "--no-paper"]) == 0
    assert (tmp_path / "t" / "smoke" / f"{QF}.tex").is_file()
    assert not (tmp_path / "t" / "paper-reported").exists()
    assert "question formation: 2/3 architectures" in capsys.readouterr().out  # Tf, Tf+Sup, RNN
    assert main(["report", *common, "--profile", "quick"]) == 2
    assert "profiles with runs there: smoke" in capsys.readouterr().err


def test_tables_name_the_code_their_runs_came_from(tmp_path):
    import json

    a = write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.99, 0.2, 0.3, 0.5, 0.5))
    b = write_run(tmp_path, "smoke", QF, "Tf", 1, *metrics(0.97, 0.2, 0.3, 0.5, 0.5))
    write_run(tmp_path, "smoke", QF, "Tf+Sup", 0, *metrics(0.97, 0.2, 0.3, 0.5, 0.5))
    git = {"commit": "0123456789abcdef", "dirty": False}
    (a / "config.json").write_text(json.dumps({"provenance": {"git": git}}))
    (b / "config.json").write_text(json.dumps({"provenance": {"git": dict(git, dirty=True)}}))
    table = reporting.load_tables(tmp_path, "smoke")[QF]
    assert table.code == ("0123456", "0123456+dirty", "unrecorded")
    assert "code 0123456, 0123456+dirty, unrecorded" in markdown_table(table)
    assert "code 0123456, 0123456+dirty, unrecorded" in latex_table(table)


def test_a_run_folder_name_with_a_leading_zero_or_odd_digits_is_not_a_second_run(tmp_path):
    import shutil

    run = write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.9, 0.2, 0.3, 0.5, 0.5))
    for odd in ("final-00", "final-²"):  # str.isdigit() accepts "²"; int() does not
        shutil.copytree(run, run.parent / odd)
    assert [(r.phase, r.index) for r in load_runs(tmp_path, "smoke")] == [("final", 0)]


def test_report_says_when_there_are_no_final_runs_yet(tmp_path, capsys):
    from fruit.cli import main as cli_main

    write_run(
        tmp_path / "runs", "smoke", QF, "Tf", 0, *metrics(0.9, 0.2, 0.3, 0.5, 0.5), phase="search"
    )
    argv = ["report", "--results", str(tmp_path / "runs"), "--profile", "smoke", "--no-paper",
            "--no-figures", "--out", str(tmp_path / "tables")]  # fmt: skip
    assert cli_main(argv) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "no final runs of profile smoke yet: the tables are empty"
    )


def test_ours_vs_paper_rings_and_labels_the_cells_that_differ_from_the_papers_runs():
    """A point whose compatibility p is below the level carries its architecture, column
    and claims; the others do not (however far from the identity line)."""
    from fruit.reporting.figures import ours_vs_paper_figure

    def cell(arch, column, ours, paper, p):
        return {
            "task": "question-formation",
            "architecture": arch,
            "accuracy": "full",
            "column": column,
            "ours_mean": ours,
            "ours_std": 0.01,
            "paper_mean": paper,
            "paper_std": 0.3,
            "compatibility_p": p,
        }

    records = [
        cell("Tf+Nd", "hierarchical", 0.02, 0.32, 0.039),
        cell("Tf", "hierarchical", 0.1, 0.6, 0.2),  # far, but compatible
        cell("LSTM", "linear", 0.9, 0.5, 0.01),
        cell("Tf+Sup", "linear", 0.9, 0.5, None),  # too few runs to test
    ]
    claims_of = {("question-formation", "Tf+Nd", "full", "hierarchical"): ["C4"]}
    fig = ours_vs_paper_figure(records, "title", claims_of)
    labels = sorted(t.get_text() for t in fig.axes[0].texts)
    assert labels == ["LSTM FA linear", "Tf+Nd FA hier. (C4)"]


def test_every_figure_title_fits_and_the_provenance_goes_to_the_metadata(tmp_path):
    """The titles of the written figures lie inside the figure (no text runs off), and
    the profile's full description with the code commits is in each file's metadata."""
    from fruit.profiles import load_profile
    from fruit.reporting import charts, figures

    write_fake_results(tmp_path / "runs", "quick", [QF], ["Tf", "LSTM"], runs=2)
    titles = []
    real = figures.save_figure

    def checked(fig, stem, description=None):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        width = fig.bbox.width
        for text in fig.texts:  # the suptitle
            box = text.get_window_extent(renderer)
            assert box.x0 >= 0 and box.x1 <= width + 1, (stem, text.get_text())
            titles.append(text.get_text())
        return real(fig, stem, description)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(charts, "save_figure", checked)
        reporting.report(
            tmp_path / "runs", "quick", tables_dir=tmp_path / "t", figures_dir=tmp_path / "f"
        )
    assert any("Ours" in t for t in titles), titles
    assert all("reduced-scale profile: quick" in t for t in titles if "Ours" in t)
    description = load_profile("quick").description
    png = Image.open(tmp_path / "f" / "quick" / "bar-charts.png")
    assert description in png.text["Description"]
    assert description not in " ".join(titles)


def test_a_complete_run_without_its_tables_is_named(tmp_path):
    run = write_run(tmp_path, "smoke", QF, "Tf", 0, *metrics(0.9, 0.2, 0.3, 0.5, 0.5))
    record = json.loads((run / "metrics.json").read_text())
    del record["full"]
    (run / "metrics.json").write_text(json.dumps(record))
    with pytest.raises(FruitError, match="a complete run without its 'full' table"):
        load_runs(tmp_path, "smoke")


def test_captions_name_the_cpus_when_runs_come_from_several(tmp_path):
    """Runs from CPUs of different vector widths round differently: a table says so."""
    for i, capability in enumerate(("AVX2", "AVX512", "AVX512")):
        run = write_run(tmp_path, "quick", QF, "Tf", i, *metrics(0.9, 0.2, 0.3, 0.5, 0.5))
        config = json.loads((run / "config.json").read_text())
        config["provenance"] = {"cpu": "AMD EPYC", "cpu_capability": capability}
        (run / "config.json").write_text(json.dumps(config))
    table = reporting.load_tables(tmp_path, "quick")[QF]
    assert table.cpus == ("AMD EPYC (AVX2)", "AMD EPYC (AVX512)")
    assert "; CPUs AMD EPYC (AVX2), AMD EPYC (AVX512))" in markdown_table(table)
    (tmp_path / "quick" / QF / "Tf" / "final-0").rename(tmp_path / "elsewhere")
    table = reporting.load_tables(tmp_path, "quick")[QF]
    assert "CPUs" not in markdown_table(table)  # one kind: nothing to say


def test_a_report_clears_what_a_killed_report_left_half_written(tmp_path):
    """A report killed while writing leaves a temporary sibling (.<name>~PID@HOST~...tmp);
    the next report of the same profile removes it, as the sweep does for its records."""
    import socket

    results = tmp_path / "results"
    write_run(results / "runs", "smoke", QF, "Tf", 0, *metrics(0.99, 0.2, 0.3, 0.5, 0.5))
    dead = f".bar-charts.png~999999999@{socket.gethostname()}~x.tmp"
    for folder in (tmp_path / "figures" / "paper-reported", tmp_path / "tables" / "smoke"):
        folder.mkdir(parents=True)
        (folder / dead).write_bytes(b"")
    reporting.report(results, "smoke", tmp_path / "tables", tmp_path / "figures")
    assert not list(tmp_path.rglob("*.tmp"))


def test_no_tables_no_tables_file(tmp_path):
    """A profile without finished final runs gets no tables.md (an empty file read as a
    table of nothing)."""
    from fruit.reporting import write_tables

    assert write_tables({}, tmp_path / "none") == []
    assert not (tmp_path / "none" / "tables.md").exists()
