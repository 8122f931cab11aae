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
    pooled = a + b
    observed = sum(a) / len(a) - sum(b) / len(b)
    count = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(a)):
        first = [pooled[i] for i in chosen]
        rest = [pooled[i] for i in range(len(pooled)) if i not in set(chosen)]
        total += 1
        count += sum(first) / len(first) - sum(rest) / len(rest) >= observed - 1e-12
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
