"""The paper's claims, checked: each claim's comparisons over our final runs, with a verdict,
and each cell they compare tested for compatibility with the paper's runs.

The claims are data (``reporting/data/claims.toml``): a claim holds comparisons of cell
means such as ``question-formation/Tf full.linear > full.hierarchical``. For each
comparison we compute

* the paper's evidence: the same comparison on the paper's means (``paper_tables.csv``);
* ours: the means over our complete final runs, and a one-sided exact permutation test
  of the claimed direction and of the opposite one (``fruit.reporting.stats``):

  - against a number: the sign-flip test of ``x_i - c`` over the runs;
  - two columns of the same runs: the paired sign-flip test of the differences;
  - two cells (different runs): the two-sample permutation test of the difference of
    means, over every split of the pooled runs.

  With 5 runs the smallest attainable p-values are 1/32 (sign flips) and 1/252 (two
  samples), both below the level ``ALPHA = 0.05``.

A comparison is *reproduced* when the claimed direction is significant at ``ALPHA``,
*contradicted* when the opposite direction is, and *undecided* otherwise (also when a
cell has fewer than ``MIN_RUNS`` complete runs). A comparison that states no difference
(``<=`` / ``>=``: "not better", as the paper says of Tf+Sup on question formation) can
be contradicted but not shown by such a test: it is *consistent* when not contradicted.
A claim is reproduced when every comparison that states a difference is reproduced and
none is contradicted, contradicted when any is, and undecided otherwise. The tests use
only the runs' own numbers: no distribution is assumed.

That verdict asks whether our runs show what the paper claims. A second question is
whether our runs could be the paper's: for every cell a comparison uses, ``compatibility``
is the two-sided p-value of Welch's test of our runs' mean against the paper's printed
mean and std (``fruit.reporting.stats.compatibility_p``); below ``ALPHA`` the cell
*differs* from the paper's runs.

Does the paper's own evidence pass the claim's test? Its runs are not public, only their
means and standard deviations over ``PAPER_RUNS`` runs, so ``paper_p`` tests each
comparison on those with a one-sided t-test: one-sample against a number, Welch's between
two cells, and one-sample on the differences between two columns of the same runs, whose
standard deviation is unknown and taken at its largest, the sum of the two columns'. Every
printed number is moved to the least favourable point of its rounding interval (for
Welch's test, whose degrees of freedom depend on the stds, the largest p over a grid of
the two intervals) and the (population) standard deviations are turned into sample ones,
so ``paper_p`` is an upper bound on the t-test's p-value for the paper's runs; a t-test
assumes roughly normal run-to-run spread, which 5 bounded accuracies can only
approximate. ``paper_p`` at or below ``ALPHA`` shows that the paper's 5 runs
decide the claim; above it, the printed summaries cannot show that they do (as an upper
bound, it does not show that they do not).

Rendering (Markdown, LaTeX, CSV, the status line) is ``fruit.reporting.claims_report``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fruit.errors import FruitError
from fruit.reporting.runs import COLUMNS, RunResult
from fruit.reporting.stats import (
    COMPATIBILITY_LEVEL,
    PAPER_MEAN_HALF_UNIT,
    PAPER_RUNS,
    PAPER_STD_HALF_UNIT,
    compatibility_p,
    printed_std_interval,
    sample_std,
    sign_flip_p,
    student_t_sf,
    two_sample_p,
    welch_p,
)

ALPHA = 0.05
MIN_RUNS = 3
VERDICTS = ("reproduced", "contradicted", "undecided")
# a comparison's verdicts: a claim's, and "consistent" for a statement of no difference
CHECK_VERDICTS = (*VERDICTS, "consistent")
STRICT = {">": ">", "<": "<", ">=": ">", "<=": "<"}  # the direction a check's test is about

_CHECK = re.compile(
    r"^(?P<task>[a-z-]+)/(?P<arch>[A-Za-z+]+) (?P<acc>full|partial)\.(?P<col>[a-z_]+) "
    r"(?P<op><=|>=|[<>]) (?P<right>.+)$"
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
    op: str  # ">", "<", or ">=" / "<=" (no difference the other way: "not better")
    right: Side

    @property
    def paired(self) -> bool:
        """Both sides are columns of the same runs."""
        r, left = self.right, self.left
        return r.number is None and (r.task, r.architecture) == (left.task, left.architecture)

    @property
    def negated(self) -> bool:
        """States no difference in one direction ("<=": left not above right)."""
        return self.op in ("<=", ">=")

    @property
    def sign(self) -> int:
        """+1 when the claimed direction is left above right, else -1."""
        return 1 if STRICT[self.op] == ">" else -1

    def cell_sides(self) -> tuple[Side, ...]:
        return tuple(s for s in (self.left, self.right) if s.number is None)

    def cells(self) -> set[tuple[str, str]]:
        return {(s.task, s.architecture) for s in self.cell_sides()}


@dataclass(frozen=True)
class Claim:
    id: str
    claim: str
    checks: tuple[Check, ...]
    central: bool = False  # the paper's central claim: reported first

    def cells(self) -> set[tuple[str, str]]:
        return set().union(*(c.cells() for c in self.checks))


@dataclass(frozen=True)
class Compatibility:
    """One cell of a comparison: our runs against the paper's printed mean and std."""

    side: Side
    ours: tuple[float, float, int] | None  # mean, population std, runs (None: no runs)
    paper: tuple[float, float]  # mean, population std as printed
    p: float | None  # two-sided Welch p (None: fewer than 2 runs of ours)

    @property
    def differs(self) -> bool:
        return self.p is not None and self.p < COMPATIBILITY_LEVEL


@dataclass(frozen=True)
class CheckResult:
    check: Check
    paper: tuple[float, float]  # the paper's means of the two sides
    paper_holds: bool
    ours: tuple[float, float] | None  # our means (None: too few runs)
    runs: tuple[int, int]  # complete runs behind each side (the number side: 0)
    p_claimed: float | None  # one-sided p-value of the claimed (strict) direction
    p_opposite: float | None
    verdict: str  # one of CHECK_VERDICTS
    paper_p: float | None  # an upper bound on a t-test's p of the claim on the paper's runs
    compatibility: tuple[Compatibility, ...] = ()  # one per cell side


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    checks: tuple[CheckResult, ...]
    left_out: int = 0  # comparisons not checked: they compare pairs the profile does not train

    @property
    def verdict(self) -> str:
        return claim_verdict([c.verdict for c in self.checks], self.left_out)

    def differing(self) -> list[Compatibility]:
        """The cells of its comparisons where our runs differ from the paper's (each once)."""
        seen, cells = set(), []
        for c in self.checks:
            for cell in c.compatibility:
                if cell.differs and cell.side not in seen:
                    seen.add(cell.side)
                    cells.append(cell)
        return cells


def claim_verdict(verdicts, left_out: int = 0) -> str:
    """A claim's verdict from its comparisons' (``left_out``: comparisons not checked):
    contradicted by any; reproduced only by all of the claim's."""
    verdicts = set(verdicts)
    if "contradicted" in verdicts:
        return "contradicted"
    stated = verdicts - {"consistent"}
    return "reproduced" if stated == {"reproduced"} and not left_out else "undecided"


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
        Claim(
            c["id"],
            c["claim"],
            tuple(parse_check(t) for t in c["checks"]),
            bool(c.get("central", False)),
        )
        for c in tomllib.loads(text)["claims"]
    )


# ----------------------------------------------------------------------------- tests


def _values(runs: list[RunResult], side: Side) -> list[tuple[int, float]]:
    """(run index, value) of the complete final runs of the side's cell."""
    return [
        (r.index, v)
        for r in runs
        if (r.task, r.architecture, r.phase, r.status)
        == (side.task, side.architecture, "final", "complete")
        and (v := r.value(side.accuracy, side.column)) is not None
    ]


def paper_cell(side: Side) -> tuple[float, float]:
    """The paper's (mean, population std) of a side; a number is exact (std 0)."""
    if side.number is not None:
        return side.number, 0.0
    from fruit.reporting.tables import paper_table

    row = next(r for r in paper_table(side.task).rows if r.architecture == side.architecture)
    cell = row.cells[COLUMNS.index((side.accuracy, side.column))]
    return cell.mean, cell.std


def paper_p(check: Check, n: int = PAPER_RUNS) -> float | None:
    """An upper bound on the one-sided t-test p-value of ``check`` on the paper's runs,
    from their printed means and standard deviations (see the module docstring); None
    for a statement of no difference, which a one-sided test cannot show."""
    if check.negated:
        return None
    sides = (check.left, check.right)
    (mean_l, std_l), (mean_r, std_r) = (paper_cell(s) for s in sides)
    slack = sum(PAPER_MEAN_HALF_UNIT for s in sides if s.number is None)
    difference = check.sign * (mean_l - mean_r) - slack  # the claimed direction, at its smallest

    def largest_std(side: Side, std: float) -> float:
        return 0.0 if side.number is not None else sample_std(std + PAPER_STD_HALF_UNIT, n)

    s_l, s_r = largest_std(check.left, std_l), largest_std(check.right, std_r)
    if check.right.number is not None:
        return student_t_sf(difference / (s_l / math.sqrt(n)), n - 1.0)
    if check.paired:  # sd(a - b) <= sd(a) + sd(b)
        return student_t_sf(difference / ((s_l + s_r) / math.sqrt(n)), n - 1.0)
    # Welch's test: its degrees of freedom depend on the two stds too, so a larger std
    # need not give a larger p; take the largest p over a grid of each std's rounding
    # interval (printed std -+ half a unit, as a sample std)
    return max(
        welch_p(difference, a, b, n)
        for a in printed_std_interval(std_l, n)
        for b in printed_std_interval(std_r, n)
        if a > 0 or b > 0
    )


def compatibility(side: Side, runs: list[RunResult]) -> Compatibility:
    """Our complete final runs of ``side``'s cell against the paper's (two-sided Welch)."""
    values = [v for _, v in _values(runs, side)]
    paper = paper_cell(side)
    if not values:
        return Compatibility(side, None, paper, None)
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    return Compatibility(
        side, (mean, std, len(values)), paper, compatibility_p(mean, std, len(values), *paper)
    )


def _holds(left: float, op: str, right: float) -> bool:
    return {">": left > right, "<": left < right, ">=": left >= right, "<=": left <= right}[op]


@dataclass(frozen=True)
class Decision:
    """The test of one comparison over a set of runs: what ``evaluate_check`` reports of
    ours, and what the verdict-stability resample (``fruit.reporting.pooling``) counts."""

    ours: tuple[float, float] | None  # our means (None: too few runs)
    runs: tuple[int, int]  # complete runs behind each side (the number side: 0)
    p_claimed: float | None
    p_opposite: float | None
    verdict: str


def decide(check: Check, runs: list[RunResult], alpha: float = ALPHA) -> Decision:
    """The report's test of ``check`` on the complete final runs among ``runs``."""
    left = _values(runs, check.left)
    sign = check.sign  # test "left - right > 0" times sign
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
        verdict = verdict_of(check, p_claimed, p_opposite, alpha)
    return Decision(means, (len(left), len(right)), p_claimed, p_opposite, verdict)


def verdict_of(check: Check, p_claimed: float, p_opposite: float, alpha: float = ALPHA) -> str:
    """Reproduced when the claimed direction is significant, contradicted when the opposite
    is; a statement of no difference ("<=") is only ever contradicted or consistent."""
    if check.negated:  # "<=": only left significantly above right goes against it
        return "contradicted" if p_opposite <= alpha else "consistent"
    if p_claimed <= alpha:
        return "reproduced"
    if p_opposite <= alpha:
        return "contradicted"
    return "undecided"


def evaluate_check(check: Check, runs: list[RunResult], alpha: float = ALPHA) -> CheckResult:
    paper = (paper_cell(check.left)[0], paper_cell(check.right)[0])
    d = decide(check, runs, alpha)
    return CheckResult(
        check,
        paper,
        _holds(paper[0], check.op, paper[1]),
        d.ours,
        d.runs,
        d.p_claimed,
        d.p_opposite,
        d.verdict,
        paper_p(check),
        tuple(compatibility(side, runs) for side in check.cell_sides()),
    )


def _mean(values: list[tuple[int, float]]) -> float:
    return math.fsum(v for _, v in values) / len(values) if values else math.nan


def evaluate_claims(
    runs: list[RunResult], alpha: float = ALPHA, pairs: set[tuple[str, str]] | None = None
) -> list[ClaimResult]:
    """Every claim of ``load_claims()`` against ``runs`` (final runs are used), the
    central claim first. With ``pairs`` (the (task, architecture) pairs a profile
    trains) only the comparisons of those pairs are checked, and a claim with none of
    them is left out: a profile that trains part of the claims' pairs is not reported
    as undecided on the others."""
    results = []
    for claim in sorted(load_claims(), key=lambda c: not c.central):
        checks = [c for c in claim.checks if pairs is None or c.cells() <= pairs]
        if checks:
            evaluated = tuple(evaluate_check(c, runs, alpha) for c in checks)
            results.append(ClaimResult(claim, evaluated, len(claim.checks) - len(checks)))
    return results
