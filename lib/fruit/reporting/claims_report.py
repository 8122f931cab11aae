"""The claims checked (``fruit.reporting.claims``) as text: ``claims.md``, ``claims.tex``
and ``claims.csv``, and the status line that opens them (and docs/results.md).

The status line names, claim by claim and the central claim first, the verdict and the
cells where our runs differ from the paper's, in words; the table then gives every
comparison with the paper's evidence, ours, the tests and each cell's compatibility.
"""

from __future__ import annotations

from fruit.reporting.claims import (
    ALPHA,
    CHECK_VERDICTS,
    MIN_RUNS,
    VERDICTS,
    CheckResult,
    ClaimResult,
    Compatibility,
    Side,
    load_claims,
)
from fruit.reporting.runs import TASK_TITLES
from fruit.reporting.stats import PAPER_RUNS
from fruit.tasks import PAPER_TASKS

COLUMN_WORDS = {
    "test": "test-set",
    "hierarchical": "hierarchical",
    "linear": "linear",
    "log_ratio": "log-ratio",
}


def cell_words(side: Side) -> str:
    """'question formation Tf+Nd hierarchical full accuracy' for a cell side."""
    task = TASK_TITLES.get(side.task, side.task)
    what = "log ratio" if side.column == "log_ratio" else "accuracy"
    column = "" if side.column == "log_ratio" else f"{COLUMN_WORDS[side.column]} "
    return f"{task} {side.architecture} {column}{side.accuracy} {what}"


def _std(value: float) -> str:
    """A std as the paper prints it: .19, 2.25."""
    text = f"{value:.2f}"
    return text[1:] if text.startswith("0.") else text


def cell_sentence(cell: Compatibility) -> str:
    mean, _, runs = cell.ours
    paper_mean, paper_std = cell.paper
    return (
        f"{cell_words(cell.side)} (ours {mean:.3f} over {runs} runs, paper {paper_mean:.3f} "
        f"± {_std(paper_std)}; p = {cell.p:.3f})"
    )


def distinct_checks(results: list[ClaimResult]) -> dict[str, CheckResult]:
    """Comparison text -> its result, each comparison once (a claim may repeat another's)."""
    found: dict[str, CheckResult] = {}
    for r in results:
        for c in r.checks:
            found.setdefault(c.check.text, c)
    return found


def distinct_cells(results: list[ClaimResult]) -> list[Compatibility]:
    """Every cell the comparisons use, once."""
    found: dict[Side, Compatibility] = {}
    for c in distinct_checks(results).values():
        for cell in c.compatibility:
            found.setdefault(cell.side, cell)
    return list(found.values())


def status_lines(
    results: list[ClaimResult],
    alpha: float = ALPHA,
    others: tuple[Compatibility, ...] = (),
    pooled: dict[str, str] | None = None,
) -> list[str]:
    """Markdown bullets, the central claim first: each claim's verdict and the cells of
    its comparisons where our runs differ from the paper's, in words; then ``others``
    (cells of the same pairs that no comparison uses, which differ too), and the count of
    differing cells against what chance alone gives. ``pooled``: claim id -> what the
    pooled runs say of it (``pooling_report.claim_sentence``), added to its bullet."""
    lines = []
    for r in results:
        head = f"- **{r.claim.id}**{' (the central claim)' if r.claim.central else ''}: "
        head += f"**{r.verdict}**"
        if r.left_out:
            other = "the other compares" if r.left_out == 1 else "the others compare"
            head += (
                f" on {len(r.checks)} of its {len(r.checks) + r.left_out} comparisons ({other} "
                "pairs this profile does not train)"
            )
        differing = r.differing()
        if differing:
            cells = "; ".join(cell_sentence(c) for c in differing)
            lines.append(f"{head}; our runs differ from the paper's in {cells}.")
        elif all(cell.p is not None for c in r.checks for cell in c.compatibility):
            lines.append(
                f"{head}; our runs are compatible with the paper's in every cell it compares."
            )
        else:
            lines.append(f"{head}; some of its cells have too few runs to compare.")
        if pooled and pooled.get(r.claim.id):
            lines[-1] += f" Run-level: {pooled[r.claim.id]}."
    differing_others = [c for c in others if c.differs]
    if differing_others:
        cells = "; ".join(cell_sentence(c) for c in differing_others)
        lines.append(f"- In the same pairs, columns that no comparison uses differ too: {cells}.")
    cells = [c for c in (*distinct_cells(results), *others) if c.p is not None]
    differ = sum(c.differs for c in cells)
    lines.append(
        f"- Cells of these pairs compared with the paper's runs: {len(cells)}, of which "
        f"{differ} differ; testing each at level {alpha:g}, about {alpha * len(cells):.1f} "
        "would differ by chance alone if all our runs behaved like the paper's."
    )
    return lines


def counts_sentence(results: list[ClaimResult]) -> str:
    claims = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    checks = distinct_checks(results)
    verdicts = {v: sum(c.verdict == v for c in checks.values()) for v in CHECK_VERDICTS}
    repeated = [
        text for text in checks if sum(c.check.text == text for r in results for c in r.checks) > 1
    ]
    text = (
        "Claims: "
        + ", ".join(f"{n} {v}" for v, n in claims.items())
        + f". Distinct comparisons: {len(checks)} ("
        + ", ".join(f"{n} {v}" for v, n in verdicts.items() if n or v != "consistent")
        + ")"
    )
    missing = [c.id for c in load_claims() if c.id not in {r.claim.id for r in results}]
    if missing or any(r.left_out for r in results):
        text += (
            "; checked on this profile's pairs: "
            + ", ".join(r.claim.id + (" (in part)" if r.left_out else "") for r in results)
            + (f"; not {', '.join(missing)} (pairs it does not train)" if missing else "")
        )
    if repeated:
        owners = [
            ", ".join(r.claim.id for r in results if any(c.check.text == t for c in r.checks))
            for t in repeated
        ]
        text += "; counted once although two claims share it: " + "; ".join(
            f"`{t}` ({o})" for t, o in zip(repeated, owners)
        )
    return text + "."


def other_cells(results: list[ClaimResult], tables: dict) -> tuple[Compatibility, ...]:
    """The cells of the compared (task, architecture) pairs that no comparison uses, with
    their compatibility (from ``fruit.reporting.tables.comparison`` records), log ratios
    and the in-distribution partial accuracy left out (derived, or not the paper's)."""
    from fruit.reporting.tables import comparison, paper_table

    used = {cell.side for cell in distinct_cells(results)}
    pairs = set().union(*(r.claim.cells() for r in results)) if results else set()
    found = []
    for task, table in tables.items():
        if task not in PAPER_TASKS:
            continue  # no paper numbers to compare with
        runs = {row.architecture: row.runs for row in table.rows}
        for rec in comparison(table, paper_table(task)):
            side = Side(task, rec["architecture"], rec["accuracy"], rec["column"])
            if (
                (task, side.architecture) not in pairs
                or side in used
                or side.column == "log_ratio"
                or rec["compatibility_p"] is None
            ):
                continue
            ours = (rec["ours_mean"], rec["ours_std"] or 0.0, runs[side.architecture])
            paper = (rec["paper_mean"], rec["paper_std"])
            found.append(Compatibility(side, ours, paper, rec["compatibility_p"]))
    return tuple(found)


def _part(result: ClaimResult) -> str:
    """' (2 of 6 comparisons)' for a claim checked in part, else ''."""
    if not result.left_out:
        return ""
    return f" ({len(result.checks)} of {len(result.checks) + result.left_out} comparisons)"


def _pair(values: tuple[float, float] | None, op: str) -> str:
    if values is None:
        return "--"
    return f"{values[0]:.3f} {op} {values[1]:.3f}"


def _p(value: float | None) -> str:
    return "--" if value is None else f"{value:.3f}"


def _runs(result: CheckResult) -> str:
    left, right = result.runs
    if result.check.right.number is not None or result.check.paired:
        return str(left)
    return f"{left}, {right}"


def _op(values: tuple[float, float]) -> str:
    a, b = values
    return ">" if a > b else "<" if a < b else "="


def _compatibility(result: CheckResult) -> str:
    """'differs (0.021)' / 'compatible (0.43)' per cell side, left first."""
    parts = []
    for cell in result.compatibility:
        if cell.p is None:
            parts.append("--")
        else:
            parts.append(f"{'**differs**' if cell.differs else 'compatible'} ({cell.p:.3f})")
    return "; ".join(parts) or "--"


def claims_records(results: list[ClaimResult]) -> list[dict]:
    """One record per comparison (the claim's verdict repeated), for CSV."""

    def compat(c: CheckResult, k: int) -> float | None:
        return c.compatibility[k].p if len(c.compatibility) > k else None

    return [
        {
            "claim": r.claim.id,
            "claim_verdict": r.verdict,
            "claim_comparisons_left_out": r.left_out,
            "comparison": c.check.text,
            "paper_left": c.paper[0],
            "paper_right": c.paper[1],
            "paper_holds": c.paper_holds,
            "paper_p": c.paper_p,
            "ours_left": None if c.ours is None else c.ours[0],
            "ours_right": None if c.ours is None else c.ours[1],
            "runs": _runs(c),
            "p_claimed": c.p_claimed,
            "p_opposite": c.p_opposite,
            "verdict": c.verdict,
            "compatibility_p_left": compat(c, 0),
            "compatibility_p_right": compat(c, 1),
        }
        for r in results
        for c in r.checks
    ]


GUIDE = "How to read it."  # opens the paragraph after the status lines of claims.md


def summary_of(claims_md: str) -> str:
    """The head of a claims.md (``markdown_claims``): the counts and each claim's status
    line, without the reading guide, the table and the run-level section."""
    return claims_md.split(f"\n\n{GUIDE}")[0]


def markdown_claims(
    results: list[ClaimResult],
    note: str,
    alpha: float = ALPHA,
    others: tuple[Compatibility, ...] = (),
    pools: dict | None = None,
    levels: dict | None = None,
    claim_levels: dict | None = None,
) -> str:
    """The status line, how to read it, then the claims table: claim, the paper's
    evidence, ours, the tests, the verdict and each cell's compatibility. ``others``:
    the other cells of the compared pairs (``other_cells``). With ``pools`` and
    ``levels`` (``fruit.reporting.pooling``: each pair's pooled runs, each comparison
    over them), the verdict's stability column and the run-level section too;
    ``claim_levels`` (claim id -> ``pooling.claim_stability``) adds the stability of each
    claim's own verdict to its status bullet."""
    from fruit.reporting import pooling_report

    pooled = (
        {
            r.claim.id: pooling_report.claim_sentence(
                r, levels, (claim_levels or {}).get(r.claim.id)
            )
            for r in results
        }
        if levels
        else None
    )
    lines = [
        f"**The paper's claims, checked ({note}).** {counts_sentence(results)}",
        "",
        *status_lines(results, alpha, others, pooled),
        "",
        f"{GUIDE} *Verdict*: each comparison is tested over our final runs with a "
        f"one-sided exact permutation test at level {alpha:g} (sign flips against a number "
        "or between two columns of the same runs; all splits of the pooled runs between two "
        "cells): reproduced when the claimed direction is significant, contradicted when the "
        f"opposite is, undecided otherwise or with fewer than {MIN_RUNS} complete runs; a "
        'comparison that states no difference (`<=`, the paper\'s "not better") is '
        "contradicted when the other direction is significant, else consistent: a test can "
        "refute it but not show it. *Compatible*: is each cell of ours compatible with the "
        f"paper's runs? A two-sided Welch t-test of our runs' mean against the paper's "
        f"printed mean and std over its {PAPER_RUNS} runs (only those summaries are public; "
        "Welch's test allows the two spreads to differ), at the reading of the rounded print "
        "that is most favourable to compatibility; **differs** below the level. *Paper*: the "
        "same comparison on the paper's means. *Paper p*: the claimed direction tested on "
        "the paper's printed means and standard deviations with a one-sided t-test (Welch's "
        "between two cells; between two columns of the same runs with the largest spread of "
        "the differences that the columns allow), every number taken at the least "
        "favourable end of its rounding: an upper bound on the p-value a t-test on the "
        "paper's runs gives. At or below the level the paper's own runs decide the "
        "comparison; above it the printed numbers cannot show that they do (the runs "
        "themselves might).",
        "",
        "| Claim | Claim's verdict | Comparison | Paper | Paper p | Ours | Runs | p claimed "
        "| p opposite | Comparison's verdict | Compatible with the paper's runs (p) |"
        + (" Stability: this test on 5 runs drawn from the pool |" if levels else ""),
        "|:---|:---|:---|---:|---:|---:|---:|---:|---:|:---|:---|" + (":---|" if levels else ""),
    ]
    seen: set[str] = set()
    for r in results:
        for k, c in enumerate(r.checks):
            head = (f"**{r.claim.id}** {r.claim.claim}", f"**{r.verdict}**{_part(r)}")
            head = head if k == 0 else ("", "")
            paper = _pair(c.paper, c.check.op) + ("" if c.paper_holds else " (fails)")
            again = " (counted once: also above)" if c.check.text in seen else ""
            seen.add(c.check.text)
            lines.append(
                "| "
                + " | ".join(
                    [
                        *head,
                        f"`{c.check.text}`{again}",
                        paper,
                        _p(c.paper_p),
                        _pair(c.ours, c.check.op if c.ours is None else _op(c.ours)),
                        _runs(c),
                        _p(c.p_claimed),
                        _p(c.p_opposite),
                        c.verdict,
                        _compatibility(c),
                        *(
                            [pooling_report.stability_cell(levels[c.check.text].stability)]
                            if levels
                            else []
                        ),
                    ]
                )
                + " |"
            )
    if levels:
        lines += ["", *pooling_report.markdown_run_level(pools, levels)]
    return "\n".join(lines) + "\n"


def latex_claims(results: list[ClaimResult], note: str) -> str:
    """The claims table as a booktabs tabular (one row per comparison)."""

    def tex(text: str) -> str:
        return text.replace("_", r"\_").replace("&", r"\&").replace("%", r"\%")

    def ops(text: str) -> str:
        return text.replace("<=", r"$\leq$").replace("<", "$<$").replace(">", "$>$")

    lines = [
        f"% The paper's claims, checked ({tex(note)}); one-sided exact permutation tests, level {ALPHA:g}",
        "% paper p: a one-sided t-test on the paper's printed means and stds (an upper bound)",
        "% compat. p: two-sided Welch test of our runs against the paper's printed mean and std",
        r"\begin{tabular}{llllrrrl}",
        r"\toprule",
        r"Claim & Verdict & Comparison & Paper & Paper $p$ & Ours & $p$ & Compat.\ $p$ \\",
        r"\midrule",
    ]
    for r in results:
        for k, c in enumerate(r.checks):
            head = (r.claim.id, r.verdict + _part(r)) if k == 0 else ("", "")
            compat = ", ".join(_p(cell.p) for cell in c.compatibility) or "--"
            lines.append(
                " & ".join(
                    [
                        *head,
                        r"\texttt{" + tex(c.check.text).replace("<=", r"$\leq$") + "}",
                        ops(_pair(c.paper, c.check.op)),
                        _p(c.paper_p),
                        ops(_pair(c.ours, c.check.op if c.ours is None else _op(c.ours))),
                        _p(c.p_claimed),
                        compat,
                    ]
                )
                + r" \\"
            )
        lines.append(r"\midrule" if r is not results[-1] else r"\bottomrule")
    lines.append(r"\end{tabular}")
    return "\n".join(lines) + "\n"
