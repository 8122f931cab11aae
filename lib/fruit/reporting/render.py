"""Rendering a ``Table`` as LaTeX (booktabs + siunitx, the paper's own layout), Markdown, CSV.

Cell format (docs/paper.md §13.3): the mean with 3 decimals, then the population std with 2
decimals and the leading "0" dropped -- ``\\meanAndVar{0.999}{.00}`` in LaTeX, the paper's
macro, and ``0.999 ±.00`` in Markdown. Missing cells print as "--".
"""

from __future__ import annotations

import csv
import io

from fruit.reporting.runs import COLUMNS
from fruit.reporting.stats import COMPATIBILITY_LEVEL
from fruit.reporting.tables import PAPER, PriorRow, Row, Table, paper_footnotes

HEADERS = {"test": "Test", "hierarchical": "Hier.", "linear": "Linear", "log_ratio": "Log Ratio"}
ARROWS = {"test": "↑", "hierarchical": "↑", "linear": "↓", "log_ratio": "↑"}
LATEX_ARROWS = {"↑": r"$\uparrow$", "↓": r"$\downarrow$"}

LATEX_MACROS = r"""% Requires \usepackage{booktabs,siunitx}. Macros as in the paper:
\providecommand{\varPart}[1]{\ensuremath{_{\pm#1}}}
\providecommand{\meanAndVar}[2]{#1 & \varPart{#2}}
\providecommand{\meanAndVarBold}[2]{\bfseries #1 & \varPart{#2}}
"""


def format_mean(mean: float) -> str:
    return f"{mean:.3f}"


def format_std(std: float) -> str:
    """2 decimals, leading "0" dropped: 0.004 -> ".00", 2.437 -> "2.44", 10.09 -> "10.09"."""
    text = f"{std:.2f}"
    return text[1:] if text.startswith("0.") else text


def format_prior(value: float) -> str:
    return f"{value:.2f}"


def caption(table: Table) -> str:
    """The plain-text caption: task, and the scale note of a reduced-scale profile."""
    text = f"Results on {table.title}"
    if table.source != PAPER:
        code = f"; code {', '.join(table.code)}" if table.code else ""
        # runs from CPUs of different kinds round differently: say so, as for commits
        cpus = f"; CPUs {', '.join(table.cpus)}" if len(table.cpus) > 1 else ""
        # a run resumed under another commit or on another CPU kind or device: named too
        moved = (
            f"; {table.moved} run(s) resumed under another commit, CPU or device"
            if table.moved
            else ""
        )
        text += f" (ours; {table.scale_note or f'profile {table.source}'}{code}{cpus}{moved})"
    else:
        text += " (numbers reported in the paper)"
    return text + "."


def _used_footnotes(table: Table) -> list[str]:
    used = {k for p in table.prior for k in p.footnotes} | {p.note for p in table.prior if p.note}
    return [k for k in paper_footnotes() if k in used]


# --- LaTeX -----------------------------------------------------------------------------------

_LATEX_SPECIALS = {
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in text)


def _table_format(means: list[float | None]) -> str:
    """siunitx ``table-format`` of one column: sign if any printed mean is negative, digits."""
    printed = [format_mean(m) for m in means if m is not None]
    sign = "-" if any(p.startswith("-") for p in printed) else ""
    digits = max((len(p.lstrip("-").split(".")[0]) for p in printed), default=1)
    return f"{sign}{digits}.3"


def table_formats(table: Table) -> list[str]:
    """siunitx ``table-format`` per column, from the printed means."""
    return [_table_format([r.cells[j].mean for r in table.rows]) for j in range(len(COLUMNS))]


def latex_colspec(table: Table, with_runs: bool) -> str:
    # The paper's tables carry the paper's own formats (one of them is wider than its numbers).
    formats = table.formats or table_formats(table)
    spec = "@{}l" + "".join(f"S[table-format={f}]@{{}}l" for f in formats)
    return spec + ("r@{}" if with_runs else "@{}")


def _latex_cell(cell) -> str:
    if cell.mean is None:
        return r"\text{--} &"
    macro = r"\meanAndVarBold" if cell.bold else r"\meanAndVar"
    return f"{macro}{{{format_mean(cell.mean)}}}{{{format_std(cell.std)}}}"


def _latex_row(row: Row, with_runs: bool) -> str:
    cells = " & ".join(_latex_cell(c) for c in row.cells)
    runs = f" & {latex_escape(row.runs_label())}" if with_runs else ""
    return f"{latex_escape(row.architecture)} & {cells}{runs} \\\\"


def _latex_prior_row(prior: PriorRow, with_runs: bool) -> str:
    notes = paper_footnotes()
    name = latex_escape(prior.model) + "".join(notes[k]["latex"] for k in prior.footnotes)
    values = []
    for j, v in enumerate(prior.values):
        text = r"\text{--}" if v is None else format_prior(v)
        # The paper marks its not-comparable prior results in the PA Hier. column.
        if v is not None and prior.note and COLUMNS[j] == ("partial", "hierarchical"):
            text += notes[prior.note]["latex"]
        values.append(text)
    runs = " &" if with_runs else ""
    return f"{name} & {' && '.join(values)} &{runs} \\\\"


def latex_tabular(table: Table) -> str:
    """The ``tabular`` environment, in the layout of the paper's appendix tables."""
    with_runs = any(r.runs is not None for r in table.rows)
    extra = " & Runs" if with_runs else ""
    heads = " & ".join(
        rf"\multicolumn{{2}}{{c}}{{{HEADERS[col]} {LATEX_ARROWS[ARROWS[col]]}}}"
        for _, col in COLUMNS
    )
    lines = [
        rf"\begin{{tabular}}{{{latex_colspec(table, with_runs)}}}",
        r"\toprule",
        r"& \multicolumn{8}{c}{Full Accuracy} & \multicolumn{6}{c}{Partial Accuracy}"
        + (" &" if with_runs else "")
        + r" \\",
        r"\cmidrule(lr){2-9} \cmidrule(lr){10-15}",
        rf"Architecture & {heads}{extra} \\",
        r"\midrule",
        *(_latex_row(r, with_runs) for r in table.rows),
    ]
    if table.prior:
        lines += [r"\midrule", *(_latex_prior_row(p, with_runs) for p in table.prior)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def latex_table(table: Table) -> str:
    """A complete ``table*`` float: the macros, the tabular, the caption with footnotes."""
    notes = paper_footnotes()
    texts = [
        (notes[k]["latex"] + " " if k != "*" else "*") + latex_escape(notes[k]["description"])
        for k in _used_footnotes(table)
    ]
    cap = " ".join([latex_escape(caption(table)), *texts])
    return (
        LATEX_MACROS
        + "\\begin{table*}\n    \\centering\n    \\small\n"
        + latex_tabular(table)
        + f"    \\caption{{\\label{{tab:{table.task}}}\n        {cap}\n    }}\n\\end{{table*}}\n"
    )


# --- Markdown --------------------------------------------------------------------------------


def _md_cell(cell) -> str:
    if cell.mean is None:
        return "--"
    mean = format_mean(cell.mean)
    return f"{f'**{mean}**' if cell.bold else mean} ±{format_std(cell.std)}"


def markdown_table(table: Table) -> str:
    with_runs = any(r.runs is not None for r in table.rows)
    heads = [f"{acc.title()[0]}A {HEADERS[col]} {ARROWS[col]}" for acc, col in COLUMNS]
    head = ["Architecture", *heads, *(["Runs"] if with_runs else [])]
    lines = [
        f"**{caption(table)}** FA = full accuracy, PA = partial accuracy; "
        "mean ± population std over runs; best mean per column in bold.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join([":---"] + ["---:"] * (len(head) - 1)) + "|",
    ]
    for r in table.rows:
        cells = [r.architecture, *(_md_cell(c) for c in r.cells)]
        lines.append("| " + " | ".join(cells + ([r.runs_label()] if with_runs else [])) + " |")
    if table.prior:
        notes = paper_footnotes()
        lines += ["", "Prior work:", "", "| " + " | ".join(["Model", *heads]) + " |"]
        lines.append("|" + "|".join([":---"] + ["---:"] * len(COLUMNS)) + "|")
        for p in table.prior:
            marks = "".join(notes[k]["text"] for k in p.footnotes)
            name = p.model + (f"<sup>{marks}</sup>" if marks else "")
            values = ["--" if v is None else format_prior(v) for v in p.values]
            if p.note:
                values[COLUMNS.index(("partial", "hierarchical"))] += p.note
            lines.append("| " + " | ".join([name, *values]) + " |")
        lines += [""] + [
            f"<sup>{notes[k]['text']}</sup> {notes[k]['description']}  "
            for k in _used_footnotes(table)
        ]
    return "\n".join(lines) + "\n"


# --- CSV -------------------------------------------------------------------------------------


def csv_table(table: Table) -> str:
    """One line per row, unrounded means and stds; prior-work rows with kind "prior-work"."""
    value_cols = [f"{acc}_{col}_{what}" for acc, col in COLUMNS for what in ("mean", "std", "bold")]
    fields = [
        "task",
        "source",
        "kind",
        "architecture",
        "runs",
        "expected_runs",
        "diverged",
        "unfinished",
        *value_cols,
        "note",
    ]
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    base = {"task": table.task, "source": table.source, "note": table.scale_note}
    for r in table.rows:
        rec = {
            **base,
            "kind": "ours" if table.source != "paper-reported" else "paper",
            "architecture": r.architecture,
        }
        rec.update(
            runs=r.runs, expected_runs=r.expected, diverged=r.diverged, unfinished=r.unfinished
        )
        for (acc, col), c in zip(COLUMNS, r.cells):
            rec.update(
                {
                    f"{acc}_{col}_mean": c.mean,
                    f"{acc}_{col}_std": c.std,
                    f"{acc}_{col}_bold": int(c.bold),
                }
            )
        w.writerow(rec)
    for p in table.prior:
        rec = {
            **base,
            "kind": "prior-work",
            "architecture": p.model,
            "note": " ".join([*p.footnotes, p.note]).strip(),
        }
        for (acc, col), v in zip(COLUMNS, p.values):
            rec[f"{acc}_{col}_mean"] = v
        w.writerow(rec)
    return out.getvalue()


# --- comparison ------------------------------------------------------------------------------


def csv_records(records: list[dict]) -> str:
    out = io.StringIO()
    if records:
        w = csv.DictWriter(out, fieldnames=list(records[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(records)
    return out.getvalue()


def markdown_comparison(ours: Table, records: list[dict]) -> str:
    """Wide Markdown: per cell "ours / paper (ours - paper)"; "--" where either is missing."""
    heads = [f"{acc.title()[0]}A {HEADERS[col]}" for acc, col in COLUMNS]
    lines = [
        f"**{caption(ours)}** Compared with the paper: each cell is ours / paper (ours - "
        "paper; p: a two-sided Welch test of our runs against the paper's printed mean and "
        "std over its 5 runs, at the reading of the rounded print most favourable to "
        f"compatibility). **Differs**: p below {COMPATIBILITY_LEVEL:g}, our runs are not "
        "compatible with the paper's.",
        "",
        "| " + " | ".join(["Architecture", "Runs", *heads]) + " |",
        "|" + "|".join([":---", "---:"] + ["---:"] * len(COLUMNS)) + "|",
    ]
    for row in ours.rows:
        recs = [r for r in records if r["architecture"] == row.architecture]
        cells = []
        for rec in recs:
            o = "--" if rec["ours_mean"] is None else format_mean(rec["ours_mean"])
            p = "--" if rec["paper_mean"] is None else format_mean(rec["paper_mean"])
            d = "" if rec["difference"] is None else f" ({rec['difference']:+.3f}"
            q = rec.get("compatibility_p")
            if d:
                d += ")" if q is None else f", p {q:.3f})"
                d += " **differs**" if q is not None and q < COMPATIBILITY_LEVEL else ""
            cells.append(f"{o} / {p}{d}")
        lines.append("| " + " | ".join([row.architecture, row.runs_label(), *cells]) + " |")
    return "\n".join(lines) + "\n"
