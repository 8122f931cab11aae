"""Tables -> files: each task's table (LaTeX, CSV, Markdown), the comparison with the
paper, the claims report and the search and by-subject reports of a profile, written
atomically into one folder (``fruit.reporting.render`` makes the text)."""

from __future__ import annotations

from pathlib import Path

from fruit.io import atomic_write_text
from fruit.reporting.load import paper_tables
from fruit.reporting.render import (
    csv_records,
    csv_table,
    latex_table,
    markdown_comparison,
    markdown_table,
)
from fruit.reporting.runs import PAPER_TASK_ORDER
from fruit.reporting.tables import Table, comparison, paper_table


def write_tables(tables: dict[str, Table], out_dir: str | Path) -> list[Path]:
    """``<task>.tex`` (booktabs/siunitx), ``<task>.csv``, ``<task>.md``, and ``tables.md`` with
    all (none of them without tables: a profile with no finished final runs yet)."""
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
    if not tables:
        return []
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


def write_claims(
    runs,
    tables: dict[str, Table],
    profile: str,
    out_dir: str | Path,
    pairs: set[tuple[str, str]] | None = None,
    results_dir: str | Path | None = None,
    figures_dir: str | Path | None = None,
) -> list[Path]:
    """``claims.md`` / ``.csv`` / ``.tex``: the claims of ``reporting/data/claims.toml``
    checked on the profile's final runs (``fruit.reporting.claims``), each with the
    comparisons of ``pairs`` (the profile's pairs; None: the pairs with runs); nothing
    for a profile that trains none of the pairs a comparison needs. With ``results_dir``
    (the folder of every profile's run folders), claims.md gets the run-level evidence
    too: each compared pair's runs pooled across profiles (``fruit.reporting.pooling``),
    and with ``figures_dir`` as well, ``pooled-runs.png/.pdf`` there: those runs of the
    cells with two modes, by phase (``charts.write_pooled_runs``)."""
    from fruit.reporting.claims import evaluate_claims
    from fruit.reporting.claims_report import (
        claims_records,
        latex_claims,
        markdown_claims,
        other_cells,
    )
    from fruit.reporting.pooling import build_pools, claim_stability, run_level

    if pairs is None:
        pairs = {(r.task, r.architecture) for r in runs}
    results = evaluate_claims(runs, pairs=pairs)
    if not results:
        return []
    note = _note(tables, profile)
    out_dir = Path(out_dir)
    pools = levels = claim_levels = None
    if results_dir is not None:
        compared = sorted(set().union(*(c.check.cells() for r in results for c in r.checks)))
        pools = build_pools(results_dir, profile, set(compared))
        pools = {pair: pools[pair] for pair in compared}
        levels = {c.check.text: run_level(c.check, pools) for r in results for c in r.checks}
        claim_levels = {r.claim.id: claim_stability(r, pools) for r in results if len(r.checks) > 1}
    files = {
        "claims.md": markdown_claims(
            results,
            note,
            others=other_cells(results, tables),
            pools=pools,
            levels=levels,
            claim_levels=claim_levels,
        ),
        "claims.csv": csv_records(claims_records(results)),
        "claims.tex": latex_claims(results, note),
    }
    for name, text in files.items():
        atomic_write_text(out_dir / name, text)
    written = [out_dir / name for name in files]
    if figures_dir is not None and pools is not None:
        from fruit.reporting.charts import write_pooled_runs

        written += write_pooled_runs(pools, levels, figures_dir, note)
    return written


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


def write_paper_tables(out_dir: str | Path) -> list[Path]:
    return write_tables(paper_tables(), out_dir)
