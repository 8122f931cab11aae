"""The paper's result tables as data: aggregation of runs, bold marking, the paper's numbers.

A ``Table`` holds one task: a ``Row`` per architecture (seven ``Cell``s each, in ``COLUMNS``
order) and the prior-work rows that the paper prints below a rule. The same ``Table`` is
built either from our run folders (``aggregate``) or from the transcribed paper numbers
(``paper_table``), and rendered by ``fruit.reporting.render``.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources

import numpy as np

from fruit.errors import unknown_choice
from fruit.reporting.runs import (
    ARCHITECTURE_ORDER,
    COLUMNS,
    PAPER_TASK_ORDER,
    TASK_ORDER,
    TASK_TITLES,
    RunResult,
)
from fruit.reporting.stats import compatibility_p

# Which mean is best, per column: the maximum, except the linear-rule accuracy (minimum).
BEST = {"test": max, "hierarchical": max, "linear": min, "log_ratio": max}

PAPER = "paper-reported"  # the ``source`` of tables built from the paper's numbers


@dataclass(frozen=True)
class Cell:
    """Mean and population std over runs; ``mean is None`` renders as "--"."""

    mean: float | None = None
    std: float | None = None
    bold: bool = False


@dataclass(frozen=True)
class Row:
    architecture: str
    cells: tuple[Cell, ...]  # len(COLUMNS)
    runs: int | None = None  # complete runs averaged; None: not shown (the paper's rows)
    expected: int | None = None  # runs the profile asks for
    diverged: int = 0
    unfinished: int = 0

    def runs_label(self) -> str:
        """Run count: "5", "3/5", "4/5 (1 diverged)", "0/5 (2 unfinished)"."""
        if self.runs is None:
            return ""
        short = self.expected is None or self.runs >= self.expected
        text = str(self.runs) if short else f"{self.runs}/{self.expected}"
        notes = [
            f"{n} {what}"
            for n, what in ((self.diverged, "diverged"), (self.unfinished, "unfinished"))
            if n
        ]
        return text + (f" ({', '.join(notes)})" if notes else "")


@dataclass(frozen=True)
class PriorRow:
    """A prior-work row: 2-decimal values (None = "--"), footnote keys, an optional note mark."""

    model: str
    footnotes: tuple[str, ...]
    values: tuple[float | None, ...]  # len(COLUMNS)
    note: str = ""


def scale_note(source: str, reduced: bool | None = None, description: str | None = None) -> str:
    """The note on every table and figure of our runs: "reduced-scale profile: <source>
    (<description>)" for a reduced-scale profile, "profile: <source> (<description>)" for
    another profile that follows the paper's protocol on its pairs (``reduced = false``,
    e.g. paper-search), "" for the paper's numbers and the full ``paper`` profile. The
    description is the profile's own (what it reduces, which data).

    ``reduced`` None means every profile but "paper" is reduced.
    """
    reduced = source != "paper" if reduced is None else reduced
    if source == PAPER or (not reduced and source == "paper"):
        return ""
    kind = "reduced-scale profile" if reduced else "profile"
    return f"{kind}: {source}" + (f" ({description})" if description else "")


@dataclass
class Table:
    task: str
    rows: list[Row]
    prior: list[PriorRow] = field(default_factory=list)
    source: str = PAPER  # PAPER or the name of the profile the runs came from
    formats: tuple[str, ...] | None = None  # siunitx table-format per column; None: from data
    reduced: bool | None = None  # a reduced-scale profile? None: every profile but "paper" is
    description: str | None = None  # the profile's description (scale, data), for the note
    code: tuple[str, ...] = ()  # the commits the averaged runs were trained from
    cpus: tuple[str, ...] = ()  # the CPUs they were trained on (named when several)
    # how many of them resumed under another commit, CPU kind or device than they started
    moved: int = 0

    @property
    def title(self) -> str:
        return TASK_TITLES.get(self.task, self.task)

    @property
    def scale_note(self) -> str:
        """The line every table and figure of a non-paper profile carries ("" otherwise)."""
        return scale_note(self.source, self.reduced, self.description)

    def row(self, architecture: str) -> Row | None:
        return next((r for r in self.rows if r.architecture == architecture), None)


# --- our runs -------------------------------------------------------------------------------


def _cell(values: list[float | None]) -> Cell:
    """Mean and population std (ddof 0) over runs; missing if any run lacks a finite value."""
    if not values or any(v is None for v in values):
        return Cell()
    a = np.asarray(values, dtype=np.float64)
    return Cell(float(a.mean()), float(a.std(ddof=0)))


def mark_best(rows: list[Row], among: tuple[str, ...] = ARCHITECTURE_ORDER) -> list[Row]:
    """Bold the best mean of each column among the architectures ``among``, on unrounded means.

    Maximum for Test, Hier. and Log Ratio; minimum for Linear. Ties are all bold.
    """
    bold = [[False] * len(COLUMNS) for _ in rows]
    for j, (_, column) in enumerate(COLUMNS):
        candidates = [
            (i, r.cells[j].mean)
            for i, r in enumerate(rows)
            if r.architecture in among and r.cells[j].mean is not None
        ]
        if not candidates:
            continue
        best = BEST[column](m for _, m in candidates)
        for i, m in candidates:
            bold[i][j] = m == best
    return [
        replace(r, cells=tuple(replace(c, bold=b) for c, b in zip(r.cells, flags)))
        for r, flags in zip(rows, bold)
    ]


def aggregate(
    runs: list[RunResult],
    task: str,
    source: str,
    expected_runs: int | None = None,
    architectures: tuple[str, ...] = ARCHITECTURE_ORDER,
) -> Table:
    """The table of ``task`` from its final runs.

    Every architecture of ``architectures`` gets a row (all "--" when it has no complete
    run); architectures outside it that have runs follow, unbolded. Only runs with status
    "complete" are averaged; diverged and unfinished runs are counted in the row's notes.
    ``expected_runs`` defaults to the largest number of run folders of any architecture.
    """
    runs = [r for r in runs if r.task == task]
    extra = sorted(  # in the paper's row order, unknown names last
        {r.architecture for r in runs} - set(architectures),
        key=lambda a: (ARCHITECTURE_ORDER.index(a) if a in ARCHITECTURE_ORDER else 99, a),
    )
    by_arch = {a: [r for r in runs if r.architecture == a] for a in (*architectures, *extra)}
    if expected_runs is None:
        expected_runs = max((len(rs) for rs in by_arch.values()), default=0)
    rows = []
    for arch, arch_runs in by_arch.items():
        complete = [r for r in arch_runs if r.status == "complete"]
        cells = tuple(_cell([r.value(acc, col) for r in complete]) for acc, col in COLUMNS)
        rows.append(
            Row(
                arch,
                cells,
                runs=len(complete),
                expected=expected_runs,
                diverged=sum(r.status == "diverged" for r in arch_runs),
                unfinished=sum(r.status == "unfinished" for r in arch_runs),
            )
        )
    complete = [r for r in runs if r.status == "complete"]
    used = sorted({c for r in complete for c in r.codes})
    cpus = sorted({c for r in complete for c in r.cpus})
    return Table(
        task,
        mark_best(rows, among=architectures),
        paper_prior_work(task),
        source,
        code=tuple(used),
        cpus=tuple(cpus),
        moved=sum(r.moved for r in complete),
    )


def tasks_with_runs(runs: list[RunResult]) -> list[str]:
    """Tasks that have run folders, in the paper's order (unknown tasks last, sorted)."""
    present = {r.task for r in runs}
    return [t for t in TASK_ORDER if t in present] + sorted(present - set(TASK_ORDER))


# --- the paper's numbers ---------------------------------------------------------------------


def _read_data(name: str) -> list[dict[str, str]]:
    text = resources.files("fruit.reporting").joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


@cache
def paper_footnotes() -> dict[str, dict[str, str]]:
    """Footnote key -> {"latex", "text", "description"}."""
    return {r["key"]: r for r in _read_data("paper_footnotes.csv")}


def paper_prior_work(task: str) -> list[PriorRow]:
    return [
        PriorRow(
            r["model"],
            tuple(r["footnotes"].split()),
            tuple(_number(r[f"{acc}_{col}"]) for acc, col in COLUMNS),
            r["note"],
        )
        for r in _read_data("paper_prior_work.csv")
        if r["task"] == task
    ]


def paper_table(task: str) -> Table:
    """The paper's table of ``task``: transcribed means, stds and bold flags, prior work."""
    if task not in PAPER_TASK_ORDER:
        raise unknown_choice("task of the paper", task, PAPER_TASK_ORDER)
    cells: dict[str, dict[tuple[str, str], Cell]] = {}
    for r in _read_data("paper_tables.csv"):
        if r["task"] == task:
            cell = Cell(float(r["mean"]), float(r["std"]), r["bold"] == "1")
            cells.setdefault(r["architecture"], {})[r["accuracy"], r["column"]] = cell
    rows = [Row(arch, tuple(by_col[c] for c in COLUMNS)) for arch, by_col in cells.items()]
    formats = next(r for r in _read_data("paper_table_formats.csv") if r["task"] == task)
    return Table(
        task, rows, paper_prior_work(task), PAPER, tuple(formats[f"{a}_{c}"] for a, c in COLUMNS)
    )


def paper_bar_charts() -> list[dict]:
    """The bar-chart figure's bars: task, accuracy, architecture, rule, mean, std."""
    return [
        {**r, "mean": float(r["mean"]), "std": float(r["std"])}
        for r in _read_data("paper_bar_charts.csv")
    ]


# --- bar-chart selection and comparison ------------------------------------------------------


def bar_chart_rows(table: Table, threshold: float = 0.9) -> list[Row]:
    """Rows whose mean test full accuracy, as printed (3 decimals), is at least ``threshold``."""
    test = COLUMNS.index(("full", "test"))
    return [
        r
        for r in table.rows
        if r.cells[test].mean is not None and round(r.cells[test].mean, 3) >= threshold
    ]


def bar_chart_data(table: Table, threshold: float = 0.9) -> list[dict]:
    """Bars (task, accuracy, architecture, rule, mean, std) of the architectures that pass."""
    bars = []
    for accuracy in ("full", "partial"):
        for rule in ("hierarchical", "linear"):
            j = COLUMNS.index((accuracy, rule))
            for r in bar_chart_rows(table, threshold):
                c = r.cells[j]
                mean = math.nan if c.mean is None else c.mean
                std = math.nan if c.std is None else c.std
                bars.append(
                    {
                        "task": table.task,
                        "accuracy": accuracy,
                        "architecture": r.architecture,
                        "rule": rule,
                        "mean": mean,
                        "std": std,
                    }
                )
    return bars


# The paper prints stds with two decimals, so ".00" means below 0.005: differences are
# measured in units of max(paper std, 0.005).
PRINTED_STD_FLOOR = 0.005


def comparison(ours: Table, paper: Table) -> list[dict]:
    """One record per (architecture, column): our mean/std, the paper's, ours minus paper,
    that difference in units of the paper's std (at least ``PRINTED_STD_FLOOR``), and the
    two-sided p-value that our runs are compatible with the paper's
    (``fruit.reporting.stats.compatibility_p``; None with fewer than 2 runs)."""
    records = []
    for row in ours.rows:
        theirs = paper.row(row.architecture)
        for j, (accuracy, column) in enumerate(COLUMNS):
            o = row.cells[j]
            p = theirs.cells[j] if theirs is not None else Cell()
            diff = o.mean - p.mean if o.mean is not None and p.mean is not None else None
            in_std = None if diff is None else diff / max(p.std or 0.0, PRINTED_STD_FLOOR)
            compatible = None
            if diff is not None and p.std is not None and row.runs:
                compatible = compatibility_p(o.mean, o.std or 0.0, row.runs, p.mean, p.std)
            records.append(
                {
                    "task": ours.task,
                    "architecture": row.architecture,
                    "accuracy": accuracy,
                    "column": column,
                    "runs": row.runs_label(),
                    "ours_mean": o.mean,
                    "ours_std": o.std,
                    "paper_mean": p.mean,
                    "paper_std": p.std,
                    "difference": diff,
                    "difference_in_paper_std": in_std,
                    "compatibility_p": compatible,
                    "source": ours.source,
                    "note": ours.scale_note,
                }
            )
    return records
