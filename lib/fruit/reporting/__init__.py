"""Run folders -> the paper's tables and bar charts, side by side with the paper's numbers.

What the notebooks (``tables.ipynb``, ``figures.ipynb``, ``report.ipynb``,
``reproduction.ipynb``) and ``fruit report`` call, one module a job::

    tables = load_tables("results/runs", "quick")       # load: task -> Table (final runs)
    write_tables(tables, "results/tables/quick")          # write: <task>.tex / .csv / .md
    write_comparisons(tables, "results/tables/quick")     # write: <task>.comparison.*
    write_figures(tables, "figures/quick")                # charts: bar-<task>.png/.pdf, ...
    write_paper_tables("results/tables/paper-reported")   # the paper's numbers, same renderer
    write_paper_figures("figures/paper-reported")
    tables, written = report("results", "quick")          # pipeline: all of it, claims too
    source, name, settings = resolve_profile(profile, root)  # load: a notebook's parameter

Beneath them: ``runs`` (run folders), ``tables`` (aggregation), ``render`` (text),
``figures`` (matplotlib), ``claims``/``claims_report``, ``pooling``/``pooling_report``,
``searches``, ``stats``, ``reproduction`` (fresh runs of a profile against the committed
ones: ``make reproduce``'s verdict; the paper's claims are ``claims``). Reporting reads only run records and the
transcribed paper numbers (``fruit/reporting/data``).
"""

from __future__ import annotations

from fruit.reporting.charts import (
    figure_description,
    figure_title,
    write_bar_charts,
    write_figures,
    write_ours_vs_paper,
    write_paper_figures,
)
from fruit.reporting.figures import figure_pixels
from fruit.reporting.load import (
    load_tables,
    paper_tables,
    profile_settings,
    resolve_profile,
    tables_from_runs,
)
from fruit.reporting.pipeline import left_out, report, summary
from fruit.reporting.runs import ARCHITECTURE_ORDER, COLUMNS, PAPER_TASK_ORDER, TASK_ORDER
from fruit.reporting.tables import PAPER, Cell, Row, Table, bar_chart_data, scale_note
from fruit.reporting.write import (
    write_claims,
    write_comparisons,
    write_paper_tables,
    write_searches,
    write_tables,
)

__all__ = [
    "ARCHITECTURE_ORDER",
    "COLUMNS",
    "PAPER",
    "PAPER_TASK_ORDER",
    "TASK_ORDER",
    "Cell",
    "Row",
    "Table",
    "bar_chart_data",
    "figure_description",
    "figure_pixels",
    "figure_title",
    "left_out",
    "load_tables",
    "paper_tables",
    "profile_settings",
    "report",
    "resolve_profile",
    "scale_note",
    "summary",
    "tables_from_runs",
    "write_bar_charts",
    "write_claims",
    "write_comparisons",
    "write_figures",
    "write_ours_vs_paper",
    "write_paper_figures",
    "write_paper_tables",
    "write_searches",
    "write_tables",
]
