"""The paper's claims as data (reporting/data/claims.toml) and their verdicts: parsing, the
exact permutation tests against an independent count, verdicts on planted run sets, and the
claims table written by `fruit report`."""

from __future__ import annotations

import itertools
import math

import pytest
from test_reporting_fakes import write_run

from fruit import reporting
from fruit.errors import FruitError
from fruit.profiles import load_profile
from fruit.reporting.claims import (
    ALPHA,
    evaluate_check,
    evaluate_claims,
    load_claims,
    parse_check,
)
from fruit.reporting.runs import load_runs
from fruit.reporting.stats import sign_flip_p, student_t_sf, two_sample_p
from fruit.reporting.tables import paper_table

QF = "question-formation"


def test_every_claim_parses_and_names_cells_the_claims_profile_trains():
    claims = load_claims()
    assert [c.id for c in claims] == [f"C{i}" for i in range(1, 8)]
    pairs = set(load_profile("claims").pairs)
    for claim in claims:
        assert claim.cells() <= pairs, claim.id


def test_the_paper_supports_every_claim_on_its_own_means():
    # the claims were transcribed from the paper's text: its own means must agree
    for claim in evaluate_claims([]):
        for check in claim.checks:
            assert check.paper_holds, check.check.text
            assert check.verdict == "undecided" and check.ours is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("question-formation/Tf full.test >> 0.9", "expected"),
        ("question-formation/Tf full.bogus > 0.9", "not a column"),
        ("nowhere/Tf full.test > 0.9", "unknown task"),
        ("question-formation/Tf full.test > question-formation/Tf+X full.test", "unknown"),
    ],
)
def test_bad_checks_are_named(text, message):
    with pytest.raises(FruitError, match=message):
        parse_check(text)


def _brute_sign_flip(d):
    """P(mean >= observed) over subsets of flipped signs, counted by subset size."""
    observed = sum(d)
    hits = 0
    for k in range(len(d) + 1):
        for flipped in itertools.combinations(range(len(d)), k):
            total = sum(-x if i in flipped else x for i, x in enumerate(d))
            hits += total >= observed - 1e-12
    return hits / 2 ** len(d)


def _brute_two_sample(a, b):
    values = a + b
    observed = sum(a) / len(a) - sum(b) / len(b)
    hits = n = 0
    for mask in range(2 ** len(values)):
        chosen = [i for i in range(len(values)) if mask >> i & 1]
        if len(chosen) != len(a):
            continue
        n += 1
        x = [values[i] for i in chosen]
        y = [values[i] for i in range(len(values)) if i not in chosen]
        hits += sum(x) / len(x) - sum(y) / len(y) >= observed - 1e-12
    return hits / n


@pytest.mark.parametrize(
    "d", [[1, 2, 3, 4, 5], [0.3, -0.1, 0.2, 0.05, 0.4], [1, -1, 1, -1], [0, 0, 0], [2.0]]
)
def test_sign_flip_p_against_a_subset_count(d):
    assert sign_flip_p(d) == pytest.approx(_brute_sign_flip(d))


@pytest.mark.parametrize(
    "a, b",
    [([5, 6, 7, 8, 9], [0, 1, 2, 3, 4]), ([0.2, 0.5, 0.1], [0.3, 0.3, 0.0, 0.6]), ([1, 1], [1, 1])],
)
def test_two_sample_p_against_a_bitmask_count(a, b):
    assert two_sample_p(a, b) == pytest.approx(_brute_two_sample(a, b))
    assert two_sample_p([5, 6, 7, 8, 9], [0, 1, 2, 3, 4]) == pytest.approx(1 / math.comb(10, 5))


def _five_runs(root, task, arch, values_by_column):
    for i in range(5):
        full = {"test": 0.99, "hierarchical": 0.0, "linear": 0.0, "log_ratio": 0.0}
        partial = {"test": None, "hierarchical": 0.5, "linear": 0.5, "log_ratio": 0.0}
        for (acc, col), values in values_by_column.items():
            (full if acc == "full" else partial)[col] = values[i]
        write_run(root, "claims", task, arch, i, full, partial)


def _tf_linear_in_full(root, first_word: str):
    """Five question-formation Tf runs, FA linear above FA hierarchical in each, and the
    first word following ``first_word``'s rule in each."""
    mostly, rarely = [0.9, 0.8, 0.95, 0.7, 0.9], [0.1, 0.2, 0.05, 0.3, 0.1]
    other = "linear" if first_word == "hierarchical" else "hierarchical"
    values = {
        ("full", "linear"): [0.2, 0.3, 0.25, 0.1, 0.4],
        ("full", "hierarchical"): [0.0, 0.01, 0.0, 0.02, 0.0],
        ("partial", first_word): mostly,
        ("partial", other): rarely,
    }
    _five_runs(root, QF, "Tf", values)


def test_verdicts_follow_planted_runs(tmp_path):
    # C2 for Tf: linear FA above hierarchical in every run -> reproduced; PA the other way
    # round in every run -> contradicted; C4's two-cell check with overlapping runs -> undecided
    _tf_linear_in_full(tmp_path, first_word="linear")
    _five_runs(tmp_path, QF, "Tf+Nd", {("full", "hierarchical"): [0.0, 0.03, 0.0, 0.01, 0.0]})
    runs = load_runs(tmp_path, "claims")
    c2, c4 = (next(c for c in load_claims() if c.id == i) for i in ("C2", "C4"))
    first, second = (evaluate_check(c, runs) for c in c2.checks)
    assert first.verdict == "reproduced" and first.p_claimed == pytest.approx(1 / 32)
    assert second.verdict == "contradicted" and second.p_opposite == pytest.approx(1 / 32)
    two_cells = evaluate_check(c4.checks[1], runs)
    assert two_cells.runs == (5, 5) and two_cells.verdict == "undecided"
    assert two_cells.p_claimed > ALPHA and two_cells.p_opposite > ALPHA
    verdicts = {r.claim.id: r.verdict for r in evaluate_claims(runs)}
    assert verdicts["C2"] == "contradicted" and verdicts["C1"] == "undecided"


@pytest.mark.parametrize("way", ["claimed", "opposite"])
def test_a_two_cell_check_goes_the_way_of_the_runs(tmp_path, way):
    """C4's Tf+Nd-above-Tf check on runs that separate completely: every one of the
    C(10, 5) = 252 splits is as extreme as the observed one only once, so the exact
    permutation test gives 1/252 in the direction the runs go and 1 in the other."""
    low, high = [0.0, 0.01, 0.02, 0.03, 0.04], [0.3, 0.4, 0.5, 0.6, 0.7]
    nd, tf = (high, low) if way == "claimed" else (low, high)
    _five_runs(tmp_path, QF, "Tf+Nd", {("full", "hierarchical"): nd})
    _five_runs(tmp_path, QF, "Tf", {("full", "hierarchical"): tf})
    c4 = next(c for c in load_claims() if c.id == "C4")
    assert c4.checks[1].text == f"{QF}/Tf+Nd full.hierarchical > {QF}/Tf full.hierarchical"
    check = evaluate_check(c4.checks[1], load_runs(tmp_path, "claims"))
    extreme, other = (check.p_claimed, check.p_opposite)[:: 1 if way == "claimed" else -1]
    assert extreme == pytest.approx(1 / 252) and other == pytest.approx(1.0)
    assert check.verdict == ("reproduced" if way == "claimed" else "contradicted")


def test_a_profile_training_some_pairs_checks_only_their_comparisons(tmp_path):
    """A profile of question formation Tf alone: C2 whole and C1's Tf comparison are
    checked; C1 is not reproduced by half its comparisons, and no claim of other pairs is
    reported as undecided for want of runs it never plans."""
    from fruit.reporting.claims_report import counts_sentence, markdown_claims, status_lines

    _tf_linear_in_full(tmp_path, first_word="hierarchical")
    results = evaluate_claims(load_runs(tmp_path, "claims"), pairs={(QF, "Tf")})
    assert [r.claim.id for r in results] == ["C1", "C2"]
    c1, c2 = results
    assert [c.check.text for c in c1.checks] == ["question-formation/Tf full.test > 0.9"]
    assert c1.checks[0].verdict == "reproduced" and c1.left_out == 1
    assert c1.verdict == "undecided"  # the LSTM's comparison is not checked
    assert c2.verdict == "reproduced" and c2.left_out == 0
    counts = counts_sentence(results)
    assert "Distinct comparisons: 3" in counts
    assert "checked on this profile's pairs: C1 (in part), C2; not C3, C4, C5, C6, C7" in counts
    assert "on 1 of its 2 comparisons" in status_lines(results)[0]
    assert "| **undecided** (1 of 2 comparisons) |" in markdown_claims(results, "note")
    # without pairs, every claim is checked as before
    assert len(evaluate_claims(load_runs(tmp_path, "claims"))) == 7


def test_report_writes_the_claims_table(tmp_path):
    paper = {r.architecture: r for r in paper_table(QF).rows}
    for arch in ("Tf", "Tf+Nd"):
        cells = dict(zip(reporting.COLUMNS, paper[arch].cells))
        _five_runs(
            tmp_path / "runs",
            QF,
            arch,
            {
                k: [c.mean] * 5
                for k, c in cells.items()
                if c.mean is not None and k != ("partial", "test")
            },
        )
    reporting.report(
        tmp_path / "runs",
        "claims",
        tables_dir=tmp_path / "tables",
        figures_dir=tmp_path / "fig",
        paper=False,
    )
    text = (tmp_path / "tables" / "claims" / "claims.md").read_text()
    # C4's own row, Tf+Nd vs Tf at the paper's means (another claim's row must not do)
    (c4_row,) = [line for line in text.splitlines() if line.startswith("| **C4** ")]
    assert c4_row.split(" | ")[1] == "**reproduced**", c4_row
    assert "reduced-scale profile: claims" in text
    table = (tmp_path / "tables" / "claims" / "question-formation.md").read_text()
    assert (
        "| Tf+Sup |" in table and "| LSTM |" in table and "RNN+Nd" not in table
    )  # planned rows only
    assert (tmp_path / "fig" / "claims" / "ours-vs-paper.png").is_file()


def _t_tail_by_simpson(t, df, upper=400.0, steps=400_000):
    """P(T >= t) by integrating Student's t density from t to ``upper`` (Simpson's rule)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    h = (upper - t) / steps
    f = [c * (1 + (t + i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
    return h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))


@pytest.mark.parametrize(
    "t, df, tail",  # one-sided critical values from a printed t table
    [(2.132, 4, 0.05), (2.776, 4, 0.025), (3.747, 4, 0.01), (1.860, 8, 0.05), (1.812, 10, 0.05)],
)
def test_student_t_tail_against_a_printed_table(t, df, tail):
    assert student_t_sf(t, df) == pytest.approx(tail, abs=2e-4)
    assert student_t_sf(-t, df) == pytest.approx(1 - tail, abs=2e-4)


@pytest.mark.parametrize("t, df", [(0.7, 5.5), (2.3, 3.2), (1.1, 12.7)])
def test_student_t_tail_against_the_integrated_density(t, df):
    assert student_t_sf(t, df) == pytest.approx(_t_tail_by_simpson(t, df), abs=1e-6)


def _paper_p_with_cells(monkeypatch, text, cells):
    """paper_p of ``text`` with the paper's (mean, population std) replaced by ``cells``,
    keyed by (task, architecture, accuracy, column)."""
    from fruit.reporting import claims

    def fake(side):
        if side.number is not None:
            return side.number, 0.0
        return cells[side.task, side.architecture, side.accuracy, side.column]

    monkeypatch.setattr(claims, "paper_cell", fake)
    return claims.paper_p(parse_check(text))


def test_paper_p_is_the_t_test_at_the_least_favourable_rounding(monkeypatch):
    # population std 0.195 printed as .19 at its upper end, as a sample std of 5 runs:
    # 0.2 * sqrt(5/4), so the standard error of a mean is 0.1 and t = difference / 0.1
    sd = 0.195
    against_number = _paper_p_with_cells(
        monkeypatch,
        f"{QF}/Tf full.test > 0.5",
        {(QF, "Tf", "full", "test"): (0.5 + 0.2132 + 0.0005, sd)},
    )
    assert against_number == pytest.approx(0.05, abs=2e-4)  # t = 2.132, df 4
    # two columns of the same runs: the differences' std at most 0.2236 + 0.2236
    paired = _paper_p_with_cells(
        monkeypatch,
        f"{QF}/Tf partial.hierarchical > partial.linear",
        {
            (QF, "Tf", "partial", "hierarchical"): (0.6 + 0.4264 + 0.001, sd),
            (QF, "Tf", "partial", "linear"): (0.6, sd),
        },
    )
    assert paired == pytest.approx(0.05, abs=2e-4)  # t = 0.4264 / 0.2 = 2.132, df 4
    # two cells with equal spread: Welch's test is the pooled one, df 8, se 0.1 * sqrt(2)
    welch = _paper_p_with_cells(
        monkeypatch,
        f"{QF}/Tf+Nd full.hierarchical > {QF}/Tf full.hierarchical",
        {
            (QF, "Tf+Nd", "full", "hierarchical"): (0.3 + 1.860 * 0.1 * math.sqrt(2) + 0.001, sd),
            (QF, "Tf", "full", "hierarchical"): (0.3, sd),
        },
    )
    assert welch == pytest.approx(0.05, abs=2e-4)
    # the opposite claim on the same numbers: the other tail, less the rounding slack
    opposite = _paper_p_with_cells(
        monkeypatch,
        f"{QF}/Tf full.test < 0.5",
        {(QF, "Tf", "full", "test"): (0.5 + 0.2132 + 0.0005, sd)},
    )
    assert opposite > 0.95


def test_paper_p_bounds_welch_over_every_number_that_prints_the_same(monkeypatch):
    # Welch's degrees of freedom depend on the stds, so the largest p need not sit at the
    # interval's end: no pair of stds (and means) that print as the paper's may give more
    import random

    from fruit.reporting.stats import welch_p as _welch_p

    cells = {(QF, "Tf+Nd", "full", "hierarchical"): (0.30, 0.02)}
    cells[QF, "Tf", "full", "hierarchical"] = (0.22, 0.11)
    bound = _paper_p_with_cells(
        monkeypatch, f"{QF}/Tf+Nd full.hierarchical > {QF}/Tf full.hierarchical", cells
    )
    rng = random.Random(0)
    for _ in range(300):
        mean_l = 0.30 + rng.uniform(-0.0005, 0.0005)
        mean_r = 0.22 + rng.uniform(-0.0005, 0.0005)
        s_l = rng.uniform(0.015, 0.025) * math.sqrt(5 / 4)
        s_r = rng.uniform(0.105, 0.115) * math.sqrt(5 / 4)
        assert _welch_p(mean_l - mean_r, s_l, s_r, 5) <= bound + 1e-3


# ------------------------------------------------------------------ compatibility


def _welch_two_sided_by_simpson(mean, std, n, paper_mean, paper_std, m=5):
    """Welch's two-sided p from the textbook formulas, the tail by integration."""
    s1, s2 = std * math.sqrt(n / (n - 1)), paper_std * math.sqrt(m / (m - 1))
    v1, v2 = s1**2 / n, s2**2 / m
    df = (v1 + v2) ** 2 / (v1**2 / (n - 1) + v2**2 / (m - 1))
    return 2 * _t_tail_by_simpson(abs(mean - paper_mean) / math.sqrt(v1 + v2), df, steps=40_000)


@pytest.mark.parametrize(
    "ours, paper",
    [
        ((0.023, 0.02, 5), (0.318, 0.19)),
        ((0.308, 0.04, 5), (0.112, 0.06)),
        ((0.5, 0.2, 3), (0.45, 0.1)),
    ],
)
def test_compatibility_p_is_the_largest_welch_p_the_rounded_print_allows(ours, paper):
    """Oracle: Welch's test by hand; every reading of the printed mean (+-0.0005) and std
    (+-0.005) gives at most compatibility_p, and one reading gives it."""
    import random

    from fruit.reporting.stats import compatibility_p

    p = compatibility_p(*ours, *paper)
    rng = random.Random(0)
    readings = [
        _welch_two_sided_by_simpson(
            *ours, paper[0] + rng.uniform(-5e-4, 5e-4), paper[1] + rng.uniform(-5e-3, 5e-3)
        )
        for _ in range(40)
    ]
    assert max(readings) <= p + 1e-4
    towards = paper[0] + math.copysign(5e-4, ours[0] - paper[0])
    grid = [paper[1] - 5e-3 + k * 1e-3 for k in range(11)]
    assert max(_welch_two_sided_by_simpson(*ours, towards, s) for s in grid) == pytest.approx(
        p, abs=1e-4
    )


def test_compatibility_has_its_level_and_finds_a_shifted_cell():
    """Simulation: our 5 runs and the paper's 5 from one normal distribution (the paper's
    summary printed rounded) differ in at most ~5% of draws; shifted by 2.5 stds, mostly."""
    import random
    import statistics

    from fruit.reporting.stats import compatibility_p

    rng = random.Random(1)

    def differs(shift: float) -> bool:
        ours = [rng.gauss(0.5 + shift, 0.1) for _ in range(5)]
        theirs = [rng.gauss(0.5, 0.1) for _ in range(5)]
        printed = (round(statistics.fmean(theirs), 3), round(statistics.pstdev(theirs), 2))
        p = compatibility_p(statistics.fmean(ours), statistics.pstdev(ours), 5, *printed)
        return p < ALPHA

    assert sum(differs(0.0) for _ in range(1000)) / 1000 <= 0.065
    assert sum(differs(0.25) for _ in range(300)) / 300 >= 0.6


def test_not_better_is_contradicted_only_by_a_significant_improvement(tmp_path):
    check = parse_check(f"{QF}/Tf+Sup partial.hierarchical <= {QF}/Tf partial.hierarchical")
    assert check.negated
    _five_runs(tmp_path, QF, "Tf", {("partial", "hierarchical"): [0.3, 0.35, 0.32, 0.31, 0.33]})
    _five_runs(tmp_path, QF, "Tf+Sup", {("partial", "hierarchical"): [0.3, 0.4, 0.2, 0.35, 0.3]})
    result = evaluate_check(check, load_runs(tmp_path, "claims"))
    assert result.verdict == "consistent" and result.paper_p is None and result.paper_holds
    _five_runs(tmp_path, QF, "Tf+Sup", {("partial", "hierarchical"): [0.8, 0.9, 0.85, 0.7, 0.9]})
    result = evaluate_check(check, load_runs(tmp_path, "claims"))
    assert result.verdict == "contradicted" and result.p_opposite == pytest.approx(1 / 252)


def test_status_line_puts_the_central_claim_first_and_names_differing_cells(tmp_path):
    from fruit.reporting.claims_report import counts_sentence, status_lines

    paper = {r.architecture: r for r in paper_table(QF).rows}
    # Tf at the paper's means in every column (with spread), Tf+Nd far below in FA hier.
    for arch in ("Tf", "Tf+Nd"):
        cells = dict(zip(reporting.COLUMNS, paper[arch].cells))
        values = {
            k: [c.mean + d for d in (-0.001, 0.001, 0.0, 0.0, 0.0)]
            for k, c in cells.items()
            if c.mean is not None and k != ("partial", "test")
        }
        if arch == "Tf+Nd":
            values[("full", "hierarchical")] = [0.0, 0.01, 0.0, 0.02, 0.01]
        _five_runs(tmp_path, QF, arch, values)
    results = evaluate_claims(load_runs(tmp_path, "claims"))
    assert results[0].claim.id == "C4" and results[0].claim.central
    lines = status_lines(results)
    assert lines[0].startswith("- **C4** (the central claim): **undecided**; our runs differ")
    assert "question formation Tf+Nd hierarchical full accuracy (ours 0.008 over 5 runs" in lines[0]
    assert "question formation Tf " not in lines[0]  # Tf's cells are the paper's
    c2 = next(line for line in lines if line.startswith("- **C2**"))
    assert "compatible with the paper's in every cell" in c2
    # the tense/German claims have no runs here
    assert "too few runs" in next(line for line in lines if line.startswith("- **C5**"))
    assert "Distinct comparisons: 18" in counts_sentence(evaluate_claims([]))
