"""The report notebooks execute headless with papermill and write their files."""

from __future__ import annotations

import json
import os

import papermill
import pytest
from PIL import Image
from test_reporting_fakes import write_fake_results

from fruit import reporting

TASKS = ["question-formation", "tense-reinflection-with-do"]


@pytest.fixture(scope="module")
def fake_results(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    write_fake_results(results / "runs", "smoke", TASKS, ["Tf", "Tf+Sup", "RNN"], runs=2)
    return results


def execute(repo_root, name, out, **parameters):
    executed = out / f"{name}.executed.ipynb"
    papermill.execute_notebook(
        str(repo_root / "notebooks" / f"{name}.ipynb"),
        str(executed),
        parameters=parameters,
        progress_bar=False,
        kernel_name="python3",
        cwd=str(repo_root / "notebooks"),
    )
    return json.loads(executed.read_text())


def test_committed_notebooks_have_no_outputs(repo_root):
    notebooks = sorted((repo_root / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 7, (
        notebooks
    )  # data, train, report, tables, figures, reproduction, explore
    for path in notebooks:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, path.name


def test_tables_notebook(repo_root, fake_results, tmp_path):
    out = tmp_path / "tables"
    nb = execute(
        repo_root,
        "tables",
        tmp_path,
        results_dir=str(fake_results),
        profile="smoke",
        output_dir=str(out),
    )
    for task in TASKS:
        for ext in ("tex", "csv", "md", "comparison.csv", "comparison.md"):
            assert (out / "smoke" / f"{task}.{ext}").stat().st_size > 0
    assert len(list((out / "paper-reported").glob("*.tex"))) == 7
    text = json.dumps(nb)
    assert "reduced-scale profile: smoke" in text  # the tables shown say so
    comparison = (out / "smoke" / "question-formation.comparison.md").read_text()
    assert "| Tf | 2 | 0." in comparison and " / 0.999 (" in comparison  # ours / paper (diff)


def test_figures_notebook(repo_root, fake_results, tmp_path):
    out = tmp_path / "figures"
    executed = execute(
        repo_root,
        "figures",
        tmp_path,
        results_dir=str(fake_results),
        profile="smoke",
        output_dir=str(out),
    )
    shown = [
        sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        for cell in executed["cells"]
    ]
    assert sum(shown) == 2  # ours, then the paper's
    stale, older = tmp_path / "empty" / "runs", tmp_path / "older"  # no runs, an old chart
    (stale / "smoke").mkdir(parents=True)
    (older / "smoke").mkdir(parents=True)
    (older / "smoke" / "bar-charts.png").write_bytes((out / "smoke/bar-charts.png").read_bytes())
    executed = execute(
        repo_root, "figures", tmp_path, results_dir=str(stale), profile="smoke",
        output_dir=str(older), paper=False,
    )  # fmt: skip
    assert not any(  # nothing drawn, and the older chart not shown as if it were
        o.get("data", {}).get("image/png") for c in executed["cells"] for o in c.get("outputs", [])
    )
    for stem, n_tasks in [
        ("smoke/bar-charts", 2),
        ("smoke/bar-question-formation", 1),
        ("paper-reported/bar-charts", 4),
    ]:
        png = out / f"{stem}.png"
        with Image.open(png) as im:
            assert im.size == reporting.figure_pixels(n_tasks), stem
            lo, hi = im.convert("L").getextrema()
            assert lo < 100 and hi > 200, stem  # not blank
        assert (out / f"{stem}.pdf").read_bytes().startswith(b"%PDF")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """A real, tiny trained run (smoke profile sizes, d=16) with a stack."""
    from fruit.training import RunConfig, train_run

    root = tmp_path_factory.mktemp("smoke")
    config = RunConfig(
        task="question-formation",
        architecture="Tf+Sup",
        profile="smoke",
        d=16,
        data_dir=str(root / "data"),
        generate_data=True,
        device="cpu",
    )
    run_dir = root / "runs" / "smoke" / "question-formation" / "Tf+Sup" / "final-0"
    train_run(config, run_dir)
    return run_dir


def test_explore_notebook(repo_root, smoke_run, tmp_path):
    out = tmp_path / "explore"
    nb = execute(
        repo_root,
        "explore",
        tmp_path,
        run_dir=str(smoke_run),
        sentence="my walrus who does sleep doesn't giggle .",
        max_tokens=12,
        samples=2,
        output_dir=str(out),
    )
    text = json.dumps(nb)
    assert "doesn't my walrus who does sleep giggle ?" in text  # the hierarchical target
    assert "does my walrus who sleep doesn't giggle ?" in text  # the linear target
    with Image.open(out / "stack-actions.png") as im:
        assert im.size[0] > 300 and im.size[1] > 100
        lo, hi = im.convert("L").getextrema()
        assert lo < 100 and hi > 200
    rows = (out / "outputs.csv").read_text().splitlines()
    assert rows[0] == "kind,output,probability" and any(r.startswith("greedy,") for r in rows)
    assert sum(r.startswith("sample ") for r in rows) == 2


def _files(folder):
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_the_report_notebook_writes_what_fruit_report_writes(repo_root, fake_results, tmp_path):
    """One report path: the sweep's report stage (report.ipynb) and `fruit report` call
    fruit.reporting.report and write the same files, byte for byte."""
    nb_out, cli_out = tmp_path / "nb", tmp_path / "cli"
    nb = execute(
        repo_root,
        "report",
        tmp_path,
        results_dir=str(fake_results),
        profile="smoke",
        tables_dir=str(nb_out / "tables"),
        figures_dir=str(nb_out / "figures"),
    )
    reporting.report(fake_results, "smoke", cli_out / "tables", cli_out / "figures")
    made = _files(nb_out / "tables")
    assert made and made == _files(cli_out / "tables")
    assert sorted(_files(nb_out / "figures")) == sorted(_files(cli_out / "figures"))
    assert "no comparison with the paper" not in json.dumps(nb)  # both tasks are the paper's


PROFILE_FILE = """name = "one-pair"
description = "one pair only"
tasks = ["question-formation"]
architectures = ["Tf"]
[data]
train = 10
dev = 10
test = 10
gen = 10
[search]
trials = 0
[final]
runs = 2
max_epochs = 1
batch_tokens = 512
learning_rate = 0.001
"""


def test_a_profile_given_by_path_reports_only_its_pairs(repo_root, tmp_path):
    """`fruit run --profile path/to/p.toml` hands the report notebook the file, not its
    name: the tables list the profile's pairs only, as `fruit report` with the path."""
    profile = tmp_path / "p" / "one-pair.toml"
    profile.parent.mkdir()
    profile.write_text(PROFILE_FILE)
    results = tmp_path / "results"
    write_fake_results(results / "runs", "one-pair", ["question-formation"], ["Tf"], runs=2)
    nb_out, cli_out = tmp_path / "nb", tmp_path / "cli"
    execute(
        repo_root,
        "report",
        tmp_path,
        results_dir=str(results),
        profile=str(profile),
        tables_dir=str(nb_out),
        figures_dir=str(tmp_path / "nbfig"),
        paper=False,
    )
    reporting.report(results, str(profile), cli_out, tmp_path / "clifig", paper=False)
    made = _files(nb_out)
    assert made == _files(cli_out)
    ours = made["one-pair/question-formation.md"].decode().split("Prior work:")[0]
    rows = [line.split("|")[1].strip() for line in ours.splitlines() if line.startswith("| ")]
    assert rows == ["Architecture", "Tf"]  # not every registered architecture as "0/2"
    assert "profile: one-pair (one pair only)" in ours  # the caption keeps the description
    # tables.ipynb and figures.ipynb take the path too (relative to the repository root
    # here), writing under the profile's name what fruit report writes
    for name, out in (("tables", tmp_path / "tb"), ("figures", tmp_path / "fg")):
        execute(
            repo_root, name, tmp_path, results_dir=str(results),
            profile=os.path.relpath(profile, repo_root), output_dir=str(out), paper=False,
        )  # fmt: skip
    assert _files(tmp_path / "tb") == {
        n: b for n, b in made.items() if n.startswith("one-pair/question-formation.")
        or n == "one-pair/tables.md"
    }  # fmt: skip
    assert sorted(_files(tmp_path / "fg")) == sorted(
        n for n in _files(tmp_path / "clifig") if "/bar-" in n
    )


def test_the_reproduction_notebook_writes_the_claims_and_comparisons_fruit_report_does(
    repo_root, fake_results, tmp_path
):
    """reproduction.ipynb, by name and by a profile file's path, writes the claims report
    and the comparisons with the paper byte for byte as `fruit report` does, and shows them."""
    cli_out = tmp_path / "cli"
    reporting.report(fake_results, "smoke", cli_out / "tables", cli_out / "figures", paper=False)
    wanted = {
        name: data
        for name, data in _files(cli_out / "tables").items()
        if "/claims." in name or ".comparison." in name
    }
    assert any("/claims." in n for n in wanted) and any(".comparison." in n for n in wanted)
    shipped = repo_root / "lib/fruit/profiles/smoke.toml"
    for given in ("smoke", str(shipped)):
        nb_out = tmp_path / ("by-name" if given == "smoke" else "by-path")
        executed = execute(
            repo_root,
            "reproduction",
            tmp_path,
            results_dir=str(fake_results),
            profile=given,
            tables_dir=str(nb_out / "tables"),
            figures_dir=str(nb_out / "figures"),
        )
        assert _files(nb_out / "tables") == wanted, given
        text = json.dumps(executed)
        assert "The paper's claims, checked" in text and "question formation" in text.lower()
        assert (nb_out / "figures/smoke/ours-vs-paper.png").is_file()
