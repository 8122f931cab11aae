"""Tables -> figure files: the bar charts of ours and of the paper (``write_figures``,
``write_paper_figures``), and ours against the paper cell by cell (``write_ours_vs_paper``), with the provenance in each file's metadata (``fruit.reporting.figures``
draws them)."""

from __future__ import annotations

from pathlib import Path

from fruit.reporting.figures import (
    bar_chart_figure,
    ours_vs_paper_figure,
    pooled_runs_figure,
    save_figure,
)
from fruit.reporting.runs import PAPER_TASK_ORDER
from fruit.reporting.tables import (
    PAPER,
    Table,
    bar_chart_data,
    comparison,
    paper_bar_charts,
    paper_table,
    scale_note,
)


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


def write_paper_figures(out_dir: str | Path) -> list[Path]:
    """The paper's bar-chart figure (its four tasks), from the transcribed bar heights."""
    by_task: dict[str, list[dict]] = {}
    for bar in paper_bar_charts():
        by_task.setdefault(bar["task"], []).append(bar)
    return write_bar_charts(by_task, out_dir, figure_title(PAPER))


POOLED_RUNS = "pooled-runs"  # the figure's file stem


def pooled_runs_panels(pools: dict, levels: dict) -> list[dict]:
    """The panels of ``pooled_runs_figure`` from the run-level evidence
    (``fruit.reporting.pooling``): one per (task, accuracy column) that a comparison with
    two modes uses, its cells' pooled runs, and the modes' threshold (a comparison between
    cells, where both cells set it, before one within a cell)."""
    from fruit.reporting.claims import paper_cell

    panels: dict[tuple, dict] = {}
    for level in levels.values():
        if not level.shares:
            continue
        joint = level.test == "cells"
        for share in level.shares:
            side = share.side
            key = (side.task, side.accuracy, side.column)
            panel = panels.setdefault(
                key,
                {
                    "task": side.task,
                    "accuracy": side.accuracy,
                    "column": side.column,
                    "threshold": level.modes.threshold,
                    "joint": joint,
                    "cells": [],
                },
            )
            if joint and not panel["joint"]:
                panel.update(threshold=level.modes.threshold, joint=True)
            if any(c["architecture"] == side.architecture for c in panel["cells"]):
                continue
            runs = [
                (v, run.phase)
                for run in pools[(side.task, side.architecture)].runs
                if (v := run.value(side.accuracy, side.column)) is not None
            ]
            panel["cells"].append(
                {"architecture": side.architecture, "runs": runs, "paper": paper_cell(side)}
            )
    return list(panels.values())


def write_pooled_runs(pools: dict, levels: dict, out_dir: str | Path, note: str) -> list[Path]:
    """``pooled-runs.png/.pdf``: every pooled run of the cells whose runs fall into two
    modes, by phase (``pooled_runs_figure``); nothing, and no stale file, where none do."""
    out_dir = Path(out_dir)
    panels = pooled_runs_panels(pools, levels)
    if not panels:
        for ext in ("png", "pdf"):
            (out_dir / f"{POOLED_RUNS}.{ext}").unlink(missing_ok=True)
        return []
    title = f"Every pooled run of the cells with two modes ({note}; claims.md, run-level evidence)"
    return save_figure(pooled_runs_figure(panels, title), out_dir / POOLED_RUNS, note)
