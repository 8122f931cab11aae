"""The statistical tests of the reports, on plain lists of numbers (no torch, no pandas).

* ``sign_flip_p`` and ``two_sample_p``: one-sided exact permutation tests over our runs
  (``fruit.reporting.claims`` decides each comparison of the paper's claims with them).
* ``student_t_sf`` and ``welch_p``: Student's t tail and Welch's one-sided test from
  summary statistics, for the paper's runs, of which only means and stds are printed.
* ``compatibility_p``: are our runs of one cell compatible with the paper's? A
  two-sided Welch test of our runs' mean against the paper's printed mean and std.
"""

from __future__ import annotations

import itertools
import math

PAPER_RUNS = 5  # runs behind each of the paper's means ("the mean of 5 runs")
PAPER_MEAN_HALF_UNIT = 0.0005  # means are printed with 3 decimals
PAPER_STD_HALF_UNIT = 0.005  # standard deviations with 2
# below this two-sided p, a cell of ours "differs" from the paper's runs
COMPATIBILITY_LEVEL = 0.05
WELCH_GRID = 11  # points per std's rounding interval over which the p-values are maximised


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
    pooled, na, nb = a + b, len(a), len(b)
    observed = sum(a) / na - sum(b) / nb
    whole = sum(pooled)  # a split is its first group's sum: the rest is whole - it
    count = total = 0
    for first in itertools.combinations(pooled, na):
        s = sum(first)
        total += 1
        count += s / na - (whole - s) / nb >= observed - 1e-12
    return count / total


def student_t_sf(t: float, df: float) -> float:
    """P(T >= t) for Student's t distribution with ``df`` degrees of freedom, from the
    regularised incomplete beta function: P(|T| >= |t|) = I_{df/(df+t^2)}(df/2, 1/2)."""
    import mpmath  # a dependency of sympy

    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * float(mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))
    return tail if t >= 0 else 1.0 - tail


def welch_p(difference: float, s_l: float, s_r: float, n: int) -> float:
    """One-sided p of Welch's t-test for a difference of means of two groups of ``n``
    runs with sample stds ``s_l`` and ``s_r`` (Welch-Satterthwaite degrees of freedom)."""
    v_l, v_r = s_l**2 / n, s_r**2 / n
    df = (v_l + v_r) ** 2 / (v_l**2 / (n - 1) + v_r**2 / (n - 1))
    return student_t_sf(difference / math.sqrt(v_l + v_r), df)


def sample_std(population_std: float, n: int) -> float:
    """A population std over ``n`` values (what the tables print) as the sample std."""
    return population_std * math.sqrt(n / (n - 1))


def printed_std_interval(std: float, n: int = PAPER_RUNS) -> list[float]:
    """``WELCH_GRID`` sample stds spanning what a population std printed as ``std`` (2
    decimals) can be: [std - half a unit (at least 0), std + half a unit]."""
    low, high = max(std - PAPER_STD_HALF_UNIT, 0.0), std + PAPER_STD_HALF_UNIT
    grid = [k / (WELCH_GRID - 1) for k in range(WELCH_GRID)]
    return [sample_std(low + g * (high - low), n) for g in grid]


def compatibility_p(
    mean: float,
    std: float,
    n: int,
    paper_mean: float,
    paper_std: float,
    paper_n: int = PAPER_RUNS,
) -> float | None:
    """Two-sided p-value that our ``n`` runs (mean, population std) and the paper's
    ``paper_n`` runs (its printed mean and population std) have the same expected value:
    Welch's t-test from the two summaries (None with fewer than 2 runs of ours).

    Why this test: the paper prints only a mean and a std over its 5 runs, so a test can
    use nothing but the two summaries; Welch's test compares two means with unequal,
    estimated spreads, which is the situation (our runs and the paper's need not vary
    alike). It assumes roughly normal run-to-run variation, which 5 bounded accuracies
    only approximate. The paper's numbers are rounded, so the p-value is the largest over
    what the printed numbers can stand for (its mean moved up to half a unit towards
    ours, its std anywhere in its rounding interval): a cell is called different only
    when every reading of the print makes it so.
    """
    if n < 2 or mean is None or paper_mean is None or paper_std is None:
        return None
    difference = max(abs(mean - paper_mean) - PAPER_MEAN_HALF_UNIT, 0.0)
    ours = sample_std(std or 0.0, n)
    best = 0.0
    for theirs in printed_std_interval(paper_std, paper_n):
        v_ours, v_theirs = ours**2 / n, theirs**2 / paper_n
        if v_ours + v_theirs == 0:
            continue
        df = (v_ours + v_theirs) ** 2 / (v_ours**2 / (n - 1) + v_theirs**2 / (paper_n - 1))
        t = difference / math.sqrt(v_ours + v_theirs)
        best = max(best, min(1.0, 2 * student_t_sf(t, df)))
    return best


# ------------------------------------------------------------------ run-level evidence
# Over all of a pair's independent runs (fruit.reporting.pooling) there are too many
# splits or sign assignments to enumerate, so the comparisons use rank tests whose exact
# distribution is counted by dynamic programming; ties get mid-ranks (scores are twice the
# mid-rank, integers), so the distribution is the exact permutation distribution of the
# rank statistic given the ties.


def _scores(values: list[float]) -> list[int]:
    """Twice the mid-rank of each value among ``values`` (ties share their mean rank)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    scores = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):  # ranks i+1 .. j+1: mid-rank (i + j + 2) / 2
            scores[order[k]] = i + j + 2
        i = j + 1
    return scores


def _rounded(values: list[float]) -> list[float]:
    return [round(float(v), 12) for v in values]  # equal up to float noise: a tie


def rank_sum_p(a: list[float], b: list[float]) -> float:
    """One-sided exact p-value of the Wilcoxon-Mann-Whitney rank-sum test that the values of
    ``a`` tend to be larger than those of ``b``: the share of the C(n, len(a)) splits of
    the pooled values whose rank sum for the first group is at least ``a``'s."""
    pooled = _rounded(a + b)
    scores = _scores(pooled)
    k, total_score = len(a), sum(scores)
    observed = sum(scores[: len(a)])
    # ways[j][s]: subsets of j values with score sum s
    ways = [[0] * (total_score + 1) for _ in range(k + 1)]
    ways[0][0] = 1
    for w in scores:
        for j in range(k, 0, -1):
            row, prev = ways[j], ways[j - 1]
            for s in range(total_score, w - 1, -1):
                if prev[s - w]:
                    row[s] += prev[s - w]
    count = sum(ways[k][observed:])
    return count / math.comb(len(pooled), k)


def signed_rank_p(differences: list[float]) -> float:
    """One-sided exact p-value of Wilcoxon's signed-rank test that ``differences`` tend to
    be positive: zero differences are dropped, the others ranked by size (mid-ranks), and
    the sum of the positive ones' scores compared with all 2^m sign assignments. 1.0 when
    every difference is zero."""
    nonzero = [d for d in _rounded(differences) if d != 0.0]
    if not nonzero:
        return 1.0
    scores = _scores([abs(d) for d in nonzero])
    observed = sum(s for s, d in zip(scores, nonzero) if d > 0)
    ways = [0] * (sum(scores) + 1)
    ways[0] = 1
    for w in scores:
        for s in range(len(ways) - 1, w - 1, -1):
            ways[s] += ways[s - w]
    return sum(ways[observed:]) / 2 ** len(nonzero)


def _binomial_cdf(x: int, n: int, p: float) -> float:
    """P(X <= x) for X ~ Binomial(n, p)."""
    return math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(x + 1))


def clopper_pearson(x: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) confidence interval of a binomial share ``x / n``: the
    shares p for which neither one-sided binomial test rejects at (1 - level) / 2, found
    by bisection (60 halvings: far below the printed digits)."""
    tail = (1 - level) / 2

    def solve(f) -> float:  # f increasing on [0, 1], root of f(p) = 0
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return (lo + hi) / 2

    lower = 0.0 if x == 0 else solve(lambda p: (1 - _binomial_cdf(x - 1, n, p)) - tail)
    upper = 1.0 if x == n else solve(lambda p: tail - _binomial_cdf(x, n, p))
    return lower, upper


def fisher_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """One-sided p-value of Fisher's exact test that group 1's share (``x1`` of ``n1``)
    exceeds group 2's (``x2`` of ``n2``): P(X >= x1) for the hypergeometric count of
    successes in group 1, the margins fixed."""
    successes, total = x1 + x2, n1 + n2
    low, high = max(0, successes - n2), min(successes, n1)
    denominator = math.comb(total, n1)
    count = sum(
        math.comb(successes, i) * math.comb(total - successes, n1 - i)
        for i in range(max(x1, low), high + 1)
    )
    return count / denominator


def fisher_two_sided(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test that two groups (``x1`` of ``n1``, ``x2``
    of ``n2``) share one rate: the probability, the margins fixed, of every table no more
    likely than the observed one (the usual definition; ties within a relative 1e-7)."""
    successes, total = x1 + x2, n1 + n2
    low, high = max(0, successes - n2), min(successes, n1)
    weights = {
        i: math.comb(successes, i) * math.comb(total - successes, n1 - i)
        for i in range(low, high + 1)
    }
    observed = weights[x1]
    kept = sum(w for w in weights.values() if w <= observed * (1 + 1e-7))
    return min(1.0, kept / math.comb(total, n1))


def paper_runs_above(
    mean: float, std: float, threshold: float, n: int = PAPER_RUNS
) -> tuple[int, int]:
    """(fewest, most) of the paper's ``n`` runs that can lie above ``threshold`` given only
    its printed mean and (population) std, each read anywhere in its rounding interval
    and the runs' values in [0, 1]: a bound, derived in docs/campaign.md ("What the
    paper's mean and std imply").

    With k runs above the threshold and n - k at or below it, the mean fixed, the spread
    is smallest when each group is at one value: b (the runs at or below) and
    a = (n·mean - (n - k)·b) / k, so that sum (x - mean)^2 = n (n - k) (b - mean)^2 / k,
    with b in [0, threshold] and a in [threshold, 1]. k is possible when that smallest
    spread is at most n·std^2 for some reading of the print (the largest std; the mean on
    a grid of its interval, ends included)."""
    s_max = std + PAPER_STD_HALF_UNIT
    means = [
        mean - PAPER_MEAN_HALF_UNIT + 2 * PAPER_MEAN_HALF_UNIT * g / (WELCH_GRID - 1)
        for g in range(WELCH_GRID)
    ]

    def possible(k: int, m: float) -> bool:
        if k == 0:
            return m <= threshold
        if k == n:
            return threshold <= m <= 1
        low = max(0.0, (n * m - k) / (n - k))  # a <= 1
        high = min(threshold, (n * m - k * threshold) / (n - k))  # a >= threshold
        if low > high:
            return False
        b = min(max(m, low), high)  # the b nearest the mean
        return n * (n - k) * (b - m) ** 2 / k <= n * s_max**2 + 1e-12

    ks = [k for k in range(n + 1) if any(possible(k, m) for m in means)]
    return min(ks), max(ks)
