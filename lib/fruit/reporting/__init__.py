"""Run folders -> the paper's tables and bar charts, side by side with the paper's numbers.

The functions the notebooks (``tables.ipynb``, ``figures.ipynb``) and ``fruit report`` call::

    tables = load_tables("results/runs", "quick")       # task -> Table (final runs only)
    write_tables(tables, "results/tables/quick")          # <task>.tex / .csv / .md, tables.md
    write_comparisons(tables, "results/tables/quick")     # <task>.comparison.csv / .md
    write_figures(tables, "figures/quick")                # bar-<task>.png/.pdf, bar-charts.png/.pdf
    write_paper_tables("results/tables/paper-reported")   # the paper's numbers, same renderer
    write_paper_figures("figures/paper-reported")

``report(...)`` does all of it and returns ``(tables, written)``. Reporting reads only ``metrics.json`` files and the
transcribed paper numbers (``fruit/reporting/data``).
"""

from __future__ import annotations

from pathlib import Path

from fruit.errors import FruitError
from fruit.io import atomic_write_text, remove_leftovers
from fruit.reporting.figures import (
    bar_chart_figure,
    figure_pixels,
    ours_vs_paper_figure,
    save_figure,
)
from fruit.reporting.render import (
    caption,
    csv_records,
    csv_table,
    latex_table,
    markdown_comparison,
    markdown_table,
)
from fruit.reporting.runs import (
    ARCHITECTURE_ORDER,
    COLUMNS,
    PAPER_TASK_ORDER,
    TASK_ORDER,
    TASK_TITLES,
    load_runs,
)
from fruit.reporting.tables import (
    PAPER,
    Cell,
    Row,
    Table,
    aggregate,
    bar_chart_data,
    comparison,
    paper_bar_charts,
    paper_table,
    scale_note,
    tasks_with_runs,
)

__all__ = [
    "ARCHITECTURE_ORDER",
    "COLUMNS",
    "PAPER",
    "TASK_ORDER",
    "Cell",
    "Row",
    "Table",
    "bar_chart_data",
    "figure_pixels",
    "load_tables",
    "paper_tables",
    "report",
    "scale_note",
    "write_comparisons",
    "write_figures",
    "write_paper_figures",
    "write_paper_tables",
    "write_tables",
]


def profile_settings(profile: str):
    """The shipped or file profile of that name (``fruit.profiles.Profile``), or None if it
    cannot be read (reporting then works from the run folders alone)."""
    try:
        from fruit.profiles import load_profile

        return load_profile(profile)
    except (ImportError, FruitError):
        return None


def load_tables(
    results_dir: str | Path, profile: str, expected_runs: int | None = None
) -> dict[str, Table]:
    """task -> Table aggregated from the profile's final runs, for every task that has runs.

    Rows: the architectures the profile plans for the task (all fifteen when the profile
    cannot be read), then any others that have runs. ``expected_runs`` (the "of N" in each
    row's run count) defaults to the profile's number of final runs, else to the largest
    number of run folders of any architecture.
    """
    return tables_from_runs(load_runs(results_dir, profile, phase="final"), profile, expected_runs)


def tables_from_runs(
    runs, profile: str, expected_runs: int | None = None, settings=None
) -> dict[str, Table]:
    """``load_tables`` on runs already read (``fruit.reporting.runs.load_runs``);
    ``settings``: the profile (``fruit.profiles.Profile``) when already loaded."""
    settings = settings or profile_settings(profile)
    expected = expected_runs or (settings.final_runs if settings else None)
    tables = {}
    for task in tasks_with_runs(runs):
        planned = ARCHITECTURE_ORDER
        if settings is not None:
            planned = tuple(a for a in ARCHITECTURE_ORDER if (task, a) in settings.pairs)
        tables[task] = aggregate(runs, task, profile, expected, architectures=planned)
        if settings is not None:
            tables[task].reduced = settings.reduced
            tables[task].description = settings.description
    return tables


def paper_tables() -> dict[str, Table]:
    """task -> the paper's table (transcribed numbers and bold flags)."""
    return {t: paper_table(t) for t in PAPER_TASK_ORDER}


def write_tables(tables: dict[str, Table], out_dir: str | Path) -> list[Path]:
    """``<task>.tex`` (booktabs/siunitx), ``<task>.csv``, ``<task>.md``, and ``tables.md`` with all."""
    out_dir = Path(out_dir)
    written = []
    for task, table in tables.items():
        for ext, text in (
            ("tex", latex_table(table)),
            ("csv", csv_table(table)),
            ("md", markdown_table(table)),
        ):
            atomic_write_text(out_dir / f"{task}.{ext}", text)
            written.append(out_dir / f"{task}.{ext}")
    atomic_write_text(out_dir / "tables.md", "\n".join(markdown_table(t) for t in tables.values()))
    return [*written, out_dir / "tables.md"]


def write_comparisons(tables: dict[str, Table], out_dir: str | Path) -> list[Path]:
    """Per task: ours, the paper's, and the difference per cell (``<task>.comparison.*``)."""
    out_dir = Path(out_dir)
    written = []
    for task, ours in tables.items():
        if task not in PAPER_TASK_ORDER:
            continue  # a task the paper does not have
        records = comparison(ours, paper_table(task))
        atomic_write_text(out_dir / f"{task}.comparison.csv", csv_records(records))
        atomic_write_text(out_dir / f"{task}.comparison.md", markdown_comparison(ours, records))
        written += [out_dir / f"{task}.comparison.csv", out_dir / f"{task}.comparison.md"]
    return written


def figure_title(source: str, reduced: bool | None = None) -> str:
    """A title that fits the figure: whose numbers and the profile (the profile's
    description and the code go into the file's metadata: ``figure_description``)."""
    if source == PAPER:
        return "Reported in the paper (mean of 5 runs, ±1 std; models with test FA ≥ 0.900)"
    note = scale_note(source, reduced) or f"profile {source}"
    return f"Ours; {note} (mean over runs, ±1 std; models with test FA ≥ 0.900)"


def figure_description(tables: dict[str, Table]) -> str:
    """The provenance a figure's metadata carries: the scale note with the profile's
    description, and the commits the runs were trained from."""
    first = next(iter(tables.values()))
    text = first.scale_note or f"profile {first.source}"
    code = sorted({c for t in tables.values() for c in t.code})
    return text + (f"; code {', '.join(code)}" if code else "")


def write_bar_charts(
    bars_by_task: dict[str, list[dict]],
    out_dir: str | Path,
    title: str,
    description: str | None = None,
) -> list[Path]:
    """``bar-<task>.png/.pdf`` per task and ``bar-charts.png/.pdf`` with every task."""
    out_dir = Path(out_dir)
    written = []
    for task, bars in bars_by_task.items():
        figure = bar_chart_figure({task: bars}, title)
        written += save_figure(figure, out_dir / f"bar-{task}", description)
    if bars_by_task:
        figure = bar_chart_figure(bars_by_task, title)
        written += save_figure(figure, out_dir / "bar-charts", description)
    return written


def write_claims(
    runs,
    tables: dict[str, Table],
    profile: str,
    out_dir: str | Path,
    pairs: set[tuple[str, str]] | None = None,
    results_dir: str | Path | None = None,
) -> list[Path]:
    """``claims.md`` / ``.csv`` / ``.tex``: the claims of ``reporting/data/claims.toml``
    checked on the profile's final runs (``fruit.reporting.claims``), each with the
    comparisons of ``pairs`` (the profile's pairs; None: the pairs with runs); nothing
    for a profile that trains none of the pairs a comparison needs. With ``results_dir``
    (the folder of every profile's run folders), claims.md gets the run-level evidence
    too: each compared pair's runs pooled across profiles (``fruit.reporting.pooling``)."""
    from fruit.reporting.claims import evaluate_claims
    from fruit.reporting.claims_report import (
        claims_records,
        latex_claims,
        markdown_claims,
        other_cells,
    )
    from fruit.reporting.pooling import build_pools, run_level

    if pairs is None:
        pairs = {(r.task, r.architecture) for r in runs}
    results = evaluate_claims(runs, pairs=pairs)
    if not results:
        return []
    note = _note(tables, profile)
    out_dir = Path(out_dir)
    pools = levels = None
    if results_dir is not None:
        compared = sorted(set().union(*(c.check.cells() for r in results for c in r.checks)))
        pools = build_pools(results_dir, profile, set(compared))
        pools = {pair: pools[pair] for pair in compared}
        levels = {c.check.text: run_level(c.check, pools) for r in results for c in r.checks}
    files = {
        "claims.md": markdown_claims(
            results, note, others=other_cells(results, tables), pools=pools, levels=levels
        ),
        "claims.csv": csv_records(claims_records(results)),
        "claims.tex": latex_claims(results, note),
    }
    for name, text in files.items():
        atomic_write_text(out_dir / name, text)
    return [out_dir / name for name in files]


def _note(tables: dict[str, Table], profile: str) -> str:
    first = next(iter(tables.values()), None)
    return (first.scale_note if first else "") or f"profile {profile}"


def write_searches(
    searched, finals, tables: dict[str, Table], profile: str, out_dir: str | Path, trials=None
) -> list[Path]:
    """``search.md`` (the search trials, the selected one marked) where the profile has
    search runs, and ``by-subject.md`` (the final runs by kind of subject) where it has
    final runs (``fruit.reporting.searches``)."""
    from fruit.reporting.searches import markdown_by_subject, markdown_search

    note, out_dir = _note(tables, profile), Path(out_dir)
    files = {}
    if searched:
        files["search.md"] = markdown_search(searched, note, trials)
    if any(r.metrics is not None for r in finals):
        files["by-subject.md"] = markdown_by_subject([*finals, *searched], note)
    for name, text in files.items():
        atomic_write_text(out_dir / name, text)
    return [out_dir / name for name in files]


def write_ours_vs_paper(tables: dict[str, Table], out_dir: str | Path) -> list[Path]:
    """``ours-vs-paper.png/.pdf``: every cell of ours against the paper's (accuracies),
    the cells that differ from the paper's runs ringed and labelled with their claims."""
    from fruit.reporting.claims import load_claims

    records = [
        r
        for task, t in tables.items()
        if task in PAPER_TASK_ORDER
        for r in comparison(t, paper_table(task))
    ]
    if not records:
        return []
    claims_of: dict[tuple, list[str]] = {}
    for claim in load_claims():
        for check in claim.checks:
            for s in check.cell_sides():
                ids = claims_of.setdefault((s.task, s.architecture, s.accuracy, s.column), [])
                if claim.id not in ids:
                    ids.append(claim.id)
    first = next(iter(tables.values()))
    title = "Ours against the paper; " + (
        scale_note(first.source, first.reduced) or f"profile {first.source}"
    )
    figure = ours_vs_paper_figure(records, title, claims_of)
    return save_figure(figure, Path(out_dir) / "ours-vs-paper", figure_description(tables))


def write_figures(tables: dict[str, Table], out_dir: str | Path) -> list[Path]:
    """The bar charts of our tables (every task with runs)."""
    if not tables:
        return []
    first = next(iter(tables.values()))
    title = figure_title(first.source, first.reduced)
    bars = {t: bar_chart_data(tab) for t, tab in tables.items()}
    return write_bar_charts(bars, out_dir, title, figure_description(tables))


def write_paper_tables(out_dir: str | Path) -> list[Path]:
    return write_tables(paper_tables(), out_dir)


def write_paper_figures(out_dir: str | Path) -> list[Path]:
    """The paper's bar-chart figure (its four tasks), from the transcribed bar heights."""
    by_task: dict[str, list[dict]] = {}
    for bar in paper_bar_charts():
        by_task.setdefault(bar["task"], []).append(bar)
    return write_bar_charts(by_task, out_dir, figure_title(PAPER))


def report(
    results_dir: str | Path,
    profile: str,
    tables_dir: str | Path = "results/tables",
    figures_dir: str | Path = "figures",
    expected_runs: int | None = None,
    paper: bool = True,
    figures: bool = True,
) -> tuple[dict[str, Table], dict[str, list[Path]]]:
    """Everything: tables, comparisons and figures of ``profile`` (in ``<dir>/<profile>/``) and,
    with ``paper``, the paper's own tables and figures (in ``<dir>/paper-reported/``).

    ``profile`` is a shipped profile's name or the path of a profile file (its runs are
    under its name). Returns ``(tables, written)``: task -> our table, and kind -> the
    files written."""
    settings = profile_settings(profile)
    profile = settings.name if settings is not None else profile
    runs = load_runs(results_dir, profile, phase="final")
    for folder in (tables_dir, figures_dir):  # what a killed report left half-written
        for sub in (profile, PAPER):
            remove_leftovers(Path(folder) / sub)
    tables = tables_from_runs(runs, profile, expected_runs, settings)
    written = {
        "tables": write_tables(tables, Path(tables_dir) / profile),
        "comparisons": write_comparisons(tables, Path(tables_dir) / profile),
        "claims": write_claims(
            runs,
            tables,
            profile,
            Path(tables_dir) / profile,
            set(settings.pairs) if settings is not None else None,
            results_dir,
        ),
    }
    searched = load_runs(results_dir, profile, phase="search")
    written["searches"] = write_searches(
        searched,
        runs,
        tables,
        profile,
        Path(tables_dir) / profile,
        settings.search_trials if settings is not None else None,
    )
    if figures:
        written["figures"] = write_figures(tables, Path(figures_dir) / profile)
        written["figures"] += write_ours_vs_paper(tables, Path(figures_dir) / profile)
    if paper:
        written["paper_tables"] = write_paper_tables(Path(tables_dir) / PAPER)
        if figures:
            written["paper_figures"] = write_paper_figures(Path(figures_dir) / PAPER)
    return tables, written


def left_out(profile: str, tables: dict[str, Table], written: dict[str, list[Path]]) -> list[str]:
    """One line for each kind of output ``report`` did not write, and why."""
    settings = profile_settings(profile)
    name = settings.name if settings is not None else profile
    lines = []
    if not tables:
        lines.append(f"no tables: profile {name} has no finished final runs yet")
    others = [t for t in tables if t not in PAPER_TASK_ORDER]
    if others:
        lines.append(
            f"no comparison with the paper for {', '.join(others)}: the paper has no numbers for it"
        )
    if tables and not written.get("claims"):
        lines.append(f"no claims report: profile {name} trains none of the pairs a claim compares")
    if not any(p.name == "search.md" for p in written.get("searches", [])):
        lines.append(f"no search.md: profile {name} has no finished search trials")
    return lines


def summary(tables: dict[str, Table]) -> str:
    """One line per task: how many architectures have runs, and the scale note."""
    lines = []
    for task, t in tables.items():
        with_runs = sum(1 for r in t.rows if r.runs)
        lines.append(
            f"{TASK_TITLES.get(task, task)}: {with_runs}/{len(t.rows)} architectures with complete runs. {caption(t)}"
        )
    return "\n".join(lines)
