"""The whole report of a profile (``report``): tables, comparisons, claims, searches and
figures, and the paper's own, as `fruit report` and a sweep's report notebook make it;
what it left out and a one-line summary per task."""

from __future__ import annotations

from pathlib import Path

from fruit.io import remove_leftovers
from fruit.reporting.charts import write_figures, write_ours_vs_paper, write_paper_figures
from fruit.reporting.load import profile_settings, tables_from_runs
from fruit.reporting.render import caption
from fruit.reporting.runs import PAPER_TASK_ORDER, TASK_TITLES, load_runs
from fruit.reporting.tables import PAPER, Table
from fruit.reporting.write import (
    write_claims,
    write_comparisons,
    write_paper_tables,
    write_searches,
    write_tables,
)


def report(
    results_dir: str | Path,
    profile: str,
    tables_dir: str | Path = "results/tables",
    figures_dir: str | Path = "figures",
    expected_runs: int | None = None,
    paper: bool = True,
    figures: bool = True,
) -> tuple[dict[str, Table], dict[str, list[Path]]]:
    """Everything of ``profile`` (in ``<dir>/<profile>/``): tables, comparisons with the
    paper, the claims report (with the run-level evidence), the search and by-subject
    tables, and, with ``figures``, the bar charts, ours-vs-paper and pooled-runs figures;
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
            Path(figures_dir) / profile if figures else None,
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
