"""The paper's claims, checked: each claim's comparisons over our final runs, with a verdict.

The claims are data (``reporting/data/claims.toml``): a claim holds comparisons of cell
means such as ``question-formation/Tf full.linear > full.hierarchical``. For each
comparison we compute

* the paper's evidence: the same comparison on the paper's means (``paper_tables.csv``);
* ours: the means over our complete final runs, and a one-sided exact permutation test
  of the claimed direction and of the opposite one:

  - against a number: the sign-flip test of ``x_i - c`` over the runs;
  - two columns of the same runs: the paired sign-flip test of the differences;
  - two cells (different runs): the two-sample permutation test of the difference of
    means, over every split of the pooled runs.

  With 5 runs the smallest attainable p-values are 1/32 (sign flips) and 1/252 (two
  samples), both below the level ``ALPHA = 0.05``.

A comparison is *reproduced* when the claimed direction is significant at ``ALPHA``,
*contradicted* when the opposite direction is, and *undecided* otherwise (also when a
cell has fewer than ``MIN_RUNS`` complete runs). A claim is reproduced when every
comparison is, contradicted when any is, and undecided otherwise. The tests use only the
runs' own numbers: no distribution is assumed.

Does the paper's own evidence pass such a test? Its runs are not public, only their
means and standard deviations over ``PAPER_RUNS`` runs, so ``paper_p`` tests each
comparison on those with a one-sided t-test: one-sample against a number, Welch's between
two cells, and one-sample on the differences between two columns of the same runs, whose
standard deviation is unknown and taken at its largest, the sum of the two columns'. Every
printed number is moved to the least favourable point of its rounding interval (for
Welch's test, whose degrees of freedom depend on the stds, the largest p over a grid of
the two intervals) and the (population) standard deviations are turned into sample ones,
so ``paper_p`` is an upper bound on the t-test's p-value for the paper's runs; a t-test assumes roughly normal run-to-run spread,
which 5 bounded accuracies can only approximate. A claim whose ``paper_p`` exceeds
``ALPHA`` is one that the paper's 5 runs would leave undecided too.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fruit.errors import FruitError
from fruit.reporting.runs import COLUMNS, RunResult

ALPHA = 0.05
MIN_RUNS = 3
PAPER_RUNS = 5  # runs behind each of the paper's means ("the mean of 5 runs")
PAPER_MEAN_HALF_UNIT = 0.0005  # means are printed with 3 decimals
PAPER_STD_HALF_UNIT = 0.005  # standard deviations with 2
WELCH_GRID = 11  # points per std's rounding interval over which paper_p maximises Welch's p
VERDICTS = ("reproduced", "contradicted", "undecided")

_CHECK = re.compile(
    r"^(?P<task>[a-z-]+)/(?P<arch>[A-Za-z+]+) (?P<acc>full|partial)\.(?P<col>[a-z_]+) "
    r"(?P<op>[<>]) (?P<right>.+)$"
)


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a cell's column, or a number."""

    task: str | None = None
    architecture: str | None = None
    accuracy: str | None = None
    column: str | None = None
    number: float | None = None

    def label(self) -> str:
        if self.number is not None:
            return f"{self.number:g}"
        return f"{self.task}/{self.architecture} {self.accuracy}.{self.column}"


@dataclass(frozen=True)
class Check:
    text: str
    left: Side
    op: str  # ">" or "<"
    right: Side

    @property
    def paired(self) -> bool:
        """Both sides are columns of the same runs."""
        r, left = self.right, self.left
        return r.number is None and (r.task, r.architecture) == (left.task, left.architecture)

    def cells(self) -> set[tuple[str, str]]:
        return {(s.task, s.architecture) for s in (self.left, self.right) if s.number is None}


@dataclass(frozen=True)
class Claim:
    id: str
    claim: str
    checks: tuple[Check, ...]

    def cells(self) -> set[tuple[str, str]]:
        return set().union(*(c.cells() for c in self.checks))


@dataclass(frozen=True)
class CheckResult:
    check: Check
    paper: tuple[float, float]  # the paper's means of the two sides
    paper_holds: bool
    ours: tuple[float, float] | None  # our means (None: too few runs)
    runs: tuple[int, int]  # complete runs behind each side (the number side: 0)
    p_claimed: float | None  # one-sided p-value of the claimed direction
    p_opposite: float | None
    verdict: str
    paper_p: float  # an upper bound on a t-test's p-value of the claim on the paper's runs


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    checks: tuple[CheckResult, ...]

    @property
    def verdict(self) -> str:
        verdicts = {c.verdict for c in self.checks}
        if verdicts == {"reproduced"}:
            return "reproduced"
        return "contradicted" if "contradicted" in verdicts else "undecided"


def parse_check(text: str) -> Check:
    """``"<task>/<arch> <acc>.<col> <op> <right>"`` -> Check (FruitError naming the text)."""
    from fruit.names import ARCHITECTURES
    from fruit.tasks import TASKS

    match = _CHECK.match(text.strip())
    if match is None:
        raise FruitError(
            f"claim check {text!r}: expected '<task>/<architecture> <acc>.<col> <op> ...'"
        )
    left = Side(match["task"], match["arch"], match["acc"], match["col"])
    right_text = match["right"].strip()
    try:
        right = Side(number=float(right_text))
    except ValueError:
        parts = right_text.split(" ")
        cell, column = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
        task, arch = cell.split("/", 1) if cell else (left.task, left.architecture)
        acc, _, col = column.partition(".")
        right = Side(task, arch, acc, col)
    for side in (left, right):
        if side.number is not None:
            continue
        if side.task not in TASKS or side.architecture not in ARCHITECTURES:
            raise FruitError(f"claim check {text!r}: unknown task or architecture")
        if (side.accuracy, side.column) not in COLUMNS:
            raise FruitError(f"claim check {text!r}: {side.accuracy}.{side.column} is not a column")
    return Check(text, left, match["op"], right)


@cache
def load_claims() -> tuple[Claim, ...]:
    """The claims of ``reporting/data/claims.toml``, parsed."""
    from fruit.profiles import tomllib

    text = resources.files("fruit.reporting").joinpath("data", "claims.toml").read_text("utf-8")
    return tuple(
        Claim(c["id"], c["claim"], tuple(parse_check(t) for t in c["checks"]))
        for c in tomllib.loads(text)["claims"]
    )


# ----------------------------------------------------------------------------- tests


def sign_flip_p(differences: list[float]) -> float:
    """One-sided exact p-value that the mean of ``differences`` is > 0: the share of the
    2^n sign assignments whose mean is at least the observed one."""
    observed = sum(differences)
    count = total = 0
    for signs in itertools.product((1, -1), repeat=len(differences)):
        total += 1
        count += sum(s * d for s, d in zip(signs, differences)) >= observed - 1e-12
    return count / total


def two_sample_p(a: list[float], b: list[float]) -> float:
    """One-sided exact p-value that mean(a) > mean(b): the share of the splits of the
    pooled values into groups of len(a) and len(b) whose difference of means is at least
    the observed one."""
    pooled = a + b
    observed = sum(a) / len(a) - sum(b) / len(b)
    count = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(a)):
        first = [pooled[i] for i in chosen]
        rest = [pooled[i] for i in range(len(pooled)) if i not in set(chosen)]
        total += 1
        count += sum(first) / len(first) - sum(rest) / len(rest) >= observed - 1e-12
    return count / total


def _values(runs: list[RunResult], side: Side) -> list[tuple[int, float]]:
    """(run index, value) of the complete final runs of the side's cell."""
    return [
        (r.index, v)
        for r in runs
        if (r.task, r.architecture, r.phase, r.status)
        == (side.task, side.architecture, "final", "complete")
        and (v := r.value(side.accuracy, side.column)) is not None
    ]


def _paper_cell(side: Side) -> tuple[float, float]:
    """The paper's (mean, population std) of a side; a number is exact (std 0)."""
    if side.number is not None:
        return side.number, 0.0
    from fruit.reporting.tables import paper_table

    row = next(r for r in paper_table(side.task).rows if r.architecture == side.architecture)
    cell = row.cells[COLUMNS.index((side.accuracy, side.column))]
    return cell.mean, cell.std


def student_t_sf(t: float, df: float) -> float:
    """P(T >= t) for Student's t distribution with ``df`` degrees of freedom, from the
    regularised incomplete beta function: P(|T| >= |t|) = I_{df/(df+t^2)}(df/2, 1/2)."""
    import mpmath  # a dependency of sympy

    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * float(mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))
    return tail if t >= 0 else 1.0 - tail


def paper_p(check: Check, n: int = PAPER_RUNS) -> float:
    """An upper bound on the one-sided t-test p-value of ``check`` on the paper's runs,
    from their printed means and standard deviations (see the module docstring)."""
    sides = (check.left, check.right)
    (mean_l, std_l), (mean_r, std_r) = (_paper_cell(s) for s in sides)
    sign = 1 if check.op == ">" else -1
    slack = sum(PAPER_MEAN_HALF_UNIT for s in sides if s.number is None)
    difference = sign * (mean_l - mean_r) - slack  # the claimed direction, at its smallest

    def sample_std(side: Side, std: float) -> float:
        if side.number is not None:
            return 0.0
        return (std + PAPER_STD_HALF_UNIT) * math.sqrt(n / (n - 1))

    s_l, s_r = sample_std(check.left, std_l), sample_std(check.right, std_r)
    if check.right.number is not None:
        return student_t_sf(difference / (s_l / math.sqrt(n)), n - 1.0)
    if check.paired:  # sd(a - b) <= sd(a) + sd(b)
        return student_t_sf(difference / ((s_l + s_r) / math.sqrt(n)), n - 1.0)
    # Welch's test: its degrees of freedom depend on the two stds too, so a larger std
    # need not give a larger p; take the largest p over a grid of each std's rounding
    # interval (printed std -+ half a unit, as a sample std)
    scale = math.sqrt(n / (n - 1))
    grid = [k / (WELCH_GRID - 1) for k in range(WELCH_GRID)]

    def interval(std: float) -> list[float]:
        low, high = max(std - PAPER_STD_HALF_UNIT, 0.0), std + PAPER_STD_HALF_UNIT
        return [(low + g * (high - low)) * scale for g in grid]

    return max(
        _welch_p(difference, a, b, n)
        for a in interval(std_l)
        for b in interval(std_r)
        if a > 0 or b > 0
    )


def _welch_p(difference: float, s_l: float, s_r: float, n: int) -> float:
    """One-sided p of Welch's t-test for a difference of means of two groups of ``n``
    runs with sample stds ``s_l`` and ``s_r`` (Welch-Satterthwaite degrees of freedom)."""
    v_l, v_r = s_l**2 / n, s_r**2 / n
    df = (v_l + v_r) ** 2 / (v_l**2 / (n - 1) + v_r**2 / (n - 1))
    return student_t_sf(difference / math.sqrt(v_l + v_r), df)


def _holds(left: float, op: str, right: float) -> bool:
    return left > right if op == ">" else left < right


def evaluate_check(check: Check, runs: list[RunResult], alpha: float = ALPHA) -> CheckResult:
    paper = (_paper_cell(check.left)[0], _paper_cell(check.right)[0])
    left = _values(runs, check.left)
    sign = 1 if check.op == ">" else -1  # test "left - right > 0" times sign
    if check.right.number is not None:
        right: list[tuple[int, float]] = []
        diffs = [sign * (v - check.right.number) for _, v in left]
        enough = len(left) >= MIN_RUNS
        tests = (lambda: sign_flip_p(diffs), lambda: sign_flip_p([-d for d in diffs]))
        means = (_mean(left), check.right.number) if enough else None
    elif check.paired:
        right = _values(runs, check.right)
        by_index = dict(right)
        pairs = [(v, by_index[i]) for i, v in left if i in by_index]
        diffs = [sign * (a - b) for a, b in pairs]
        enough = len(pairs) >= MIN_RUNS
        tests = (lambda: sign_flip_p(diffs), lambda: sign_flip_p([-d for d in diffs]))
        means = (_mean(left), _mean(right)) if enough else None
    else:
        right = _values(runs, check.right)
        a, b = [v for _, v in left], [v for _, v in right]
        if sign < 0:
            a, b = b, a
        enough = min(len(a), len(b)) >= MIN_RUNS
        tests = (lambda: two_sample_p(a, b), lambda: two_sample_p(b, a))
        means = (_mean(left), _mean(right)) if enough else None
    p_claimed = p_opposite = None
    verdict = "undecided"
    if enough:
        p_claimed, p_opposite = tests[0](), tests[1]()
        if p_claimed <= alpha:
            verdict = "reproduced"
        elif p_opposite <= alpha:
            verdict = "contradicted"
    return CheckResult(
        check,
        paper,
        _holds(paper[0], check.op, paper[1]),
        means,
        (len(left), len(right)),
        p_claimed,
        p_opposite,
        verdict,
        paper_p(check),
    )


def _mean(values: list[tuple[int, float]]) -> float:
    return math.fsum(v for _, v in values) / len(values) if values else math.nan


def evaluate_claims(runs: list[RunResult], alpha: float = ALPHA) -> list[ClaimResult]:
    """Every claim of ``load_claims()`` against ``runs`` (final runs are used)."""
    return [
        ClaimResult(claim, tuple(evaluate_check(c, runs, alpha) for c in claim.checks))
        for claim in load_claims()
    ]


# ----------------------------------------------------------------------------- rendering


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


def claims_records(results: list[ClaimResult]) -> list[dict]:
    """One record per comparison (the claim's verdict repeated), for CSV."""
    return [
        {
            "claim": r.claim.id,
            "claim_verdict": r.verdict,
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
        }
        for r in results
        for c in r.checks
    ]


def markdown_claims(results: list[ClaimResult], note: str, alpha: float = ALPHA) -> str:
    """The claims table: claim, the paper's evidence, ours, the test, the verdict."""
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    lines = [
        f"**The paper's claims, checked ({note}).** "
        + ", ".join(f"{n} {v}" for v, n in counts.items())
        + f". Each comparison is tested over our final runs with a one-sided exact "
        f"permutation test at level {alpha:g} (sign flips against a number or between two "
        "columns of the same runs; all splits of the pooled runs between two cells): "
        "reproduced when the claimed direction is significant, contradicted when the "
        "opposite is, undecided otherwise or with fewer than "
        f"{MIN_RUNS} complete runs. Paper: the same comparison on the paper's means. "
        "Paper p: the claimed direction tested on the paper's printed means and standard "
        f"deviations over its {PAPER_RUNS} runs with a one-sided t-test (Welch's between two "
        "cells; between two columns of the same runs with the largest spread of the "
        "differences that the columns allow), every number taken at the least favourable "
        "end of its rounding: an upper bound; above the level, the paper's own runs do not "
        "decide the comparison either.",
        "",
        "| Claim | Verdict | Comparison | Paper | Paper p | Ours | Runs | p claimed | p opposite | |",
        "|:---|:---|:---|---:|---:|---:|---:|---:|---:|:---|",
    ]
    for r in results:
        for k, c in enumerate(r.checks):
            head = (f"**{r.claim.id}** {r.claim.claim}", f"**{r.verdict}**") if k == 0 else ("", "")
            paper = _pair(c.paper, c.check.op) + ("" if c.paper_holds else " (fails)")
            lines.append(
                "| "
                + " | ".join(
                    [
                        *head,
                        f"`{c.check.text}`",
                        paper,
                        _p(c.paper_p),
                        _pair(c.ours, c.check.op if c.ours is None else _op(c.ours)),
                        _runs(c),
                        _p(c.p_claimed),
                        _p(c.p_opposite),
                        c.verdict,
                    ]
                )
                + " |"
            )
    return "\n".join(lines) + "\n"


def _op(values: tuple[float, float]) -> str:
    a, b = values
    return ">" if a > b else "<" if a < b else "="


def latex_claims(results: list[ClaimResult], note: str) -> str:
    """The claims table as a booktabs tabular (one row per comparison)."""

    def tex(text: str) -> str:
        return text.replace("_", r"\_").replace("&", r"\&").replace("%", r"\%")

    lines = [
        f"% The paper's claims, checked ({tex(note)}); one-sided exact permutation tests, level {ALPHA:g}",
        "% paper p: a one-sided t-test on the paper's printed means and stds (an upper bound)",
        r"\begin{tabular}{llllrrr}",
        r"\toprule",
        r"Claim & Verdict & Comparison & Paper & Paper $p$ & Ours & $p$ \\",
        r"\midrule",
    ]
    for r in results:
        for k, c in enumerate(r.checks):
            head = (r.claim.id, r.verdict) if k == 0 else ("", "")
            lines.append(
                " & ".join(
                    [
                        *head,
                        r"\texttt{" + tex(c.check.text) + "}",
                        _pair(c.paper, c.check.op).replace("<", "$<$").replace(">", "$>$"),
                        _p(c.paper_p),
                        _pair(c.ours, c.check.op if c.ours is None else _op(c.ours))
                        .replace("<", "$<$")
                        .replace(">", "$>$"),
                        _p(c.p_claimed),
                    ]
                )
                + r" \\"
            )
        lines.append(r"\midrule" if r is not results[-1] else r"\bottomrule")
    lines.append(r"\end{tabular}")
    return "\n".join(lines) + "\n"
