"""The run-level evidence (fruit.reporting.pooling) on planted runs: the pool (shared
starts, continuations, variants, unconverged and unfinished runs), the modes and the
shares, their intervals, Fisher's tests, the paper's implied range and the verdict
stability, against values worked out by hand or by brute force."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from types import SimpleNamespace

import mpmath
import pytest

from fruit.errors import FruitError
from fruit.reporting import pooling
from fruit.reporting.claims import parse_check
from fruit.reporting.pooling import build_pools, modes, run_label, run_level
from fruit.reporting.stats import (
    clopper_pearson,
    fisher_p,
    fisher_two_sided,
    paper_runs_above,
    rank_sum_p,
    signed_rank_p,
)

QF = "question-formation"
BASE = {
    "model_options": {},
    "target_params": 200000,
    "d": 68,
    "data_source": "published",
    "data_seed": 1,
    "train_size": 100000,
    "dev_size": 1000,
    "test_size": 10000,
    "gen_size": 10000,
    "partial_on_test": True,
    "checkpoint_every": 80000,
    "clip_norm": 10.0,
    "lr_factor": 0.5,
    "lr_patience": 1,
    "early_stop_patience": 3,
    "max_epochs": 1000,
}


def plant(
    root,
    profile,
    arch,
    phase,
    index,
    hier,
    seed,
    *,
    epochs=10.0,
    log=None,
    finished=True,
    **changes,
):
    folder = root / profile / QF / arch / f"{phase}-{index}"
    folder.mkdir(parents=True)
    config = {**BASE, "seed": seed, "parameter_seed": seed + 1, "shuffle_seed": seed + 2, **changes}
    (folder / "config.json").write_text(json.dumps(config))
    lines = log or [f"{k},{seed}.{k}" for k in range(3)]
    (folder / "log.csv").write_text("examples_seen,epoch\n" + "\n".join(lines) + "\n")
    if finished:
        metrics = {
            "profile": profile,
            "task": QF,
            "architecture": arch,
            "phase": phase,
            "index": index,
            "status": "complete",
            "epochs": epochs,
            "full": {"test": 0.99, "hierarchical": hier, "linear": 0.1, "log_ratio": 0.0},
            "partial": {"hierarchical": 0.5, "linear": 0.5, "log_ratio": 0.0},
        }
        (folder / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture
def planted(tmp_path):
    """Profile p: Tf+Nd finals at 0, 0, .3, .4, .5 and converged trials at .6, .7 (a third
    trial cut at its max_epochs); Tf finals at .01-.05. Profile q: a run sharing p's
    final-0 start, a variant, an unfinished run, a copy of p's search-0 log and a run on
    other data (not listed at all)."""
    root = tmp_path / "runs"
    for i, v in enumerate([0.0, 0.0, 0.3, 0.4, 0.5]):
        plant(root, "p", "Tf+Nd", "final", i, v, 100 + 10 * i)
    plant(root, "p", "Tf+Nd", "search", 0, 0.6, 200, log=["a", "b"])
    plant(root, "p", "Tf+Nd", "search", 1, 0.7, 210)
    plant(root, "p", "Tf+Nd", "search", 2, 0.9, 220, epochs=3.0, max_epochs=3)
    for i, v in enumerate([0.01, 0.02, 0.03, 0.04, 0.05]):
        plant(root, "p", "Tf", "final", i, v, 300 + 10 * i)
    plant(root, "q", "Tf+Nd", "final", 0, 0.9, 100)  # p/final-0's seeds
    plant(root, "q", "Tf+Nd", "final", 1, 0.9, 400, early_stop_patience=10)
    plant(root, "q", "Tf+Nd", "final", 2, 0.9, 410, finished=False)
    plant(root, "q", "Tf+Nd", "search", 0, 0.9, 420, log=["a", "b", "c"])  # continues p/search-0
    plant(root, "q", "Tf+Nd", "final", 3, 0.9, 430, data_seed=2)  # other data: not a candidate
    return root


def test_the_pool_keeps_independent_converged_runs_of_the_protocol(planted):
    pools = build_pools(planted, "p", {(QF, "Tf+Nd"), (QF, "Tf")})
    nd = pools[(QF, "Tf+Nd")]
    assert [run_label(r) for r in nd.runs] == [
        *(f"p/final-{i}" for i in range(5)),
        "p/search-0",
        "p/search-1",
    ]
    why = dict(nd.left_out)
    assert set(why) == {
        "p/search-2",
        "q/final-0",
        "q/final-1",
        "q/final-2",
        "q/search-0",
    }  # not q/final-3
    assert why["p/search-2"].startswith("not trained to early stopping")
    assert why["q/final-0"] == "shares its start (seeds) with p/final-0 (one run per start)"
    assert why["q/final-1"] == "variant: early_stop_patience 10 (pool: 3)"
    assert why["q/final-2"] == "unfinished"
    assert "p/search-0" in why["q/search-0"] and "continuation" in why["q/search-0"]
    assert len(pools[(QF, "Tf")].runs) == 5


def test_the_reported_profile_wins_a_shared_start(planted):
    nd = build_pools(planted, "q", {(QF, "Tf+Nd")})[(QF, "Tf+Nd")]
    labels = [run_label(r) for r in nd.runs]
    # q's own protocol: its final-0 is kept and p/final-0, with the same start, left out;
    # q/final-1 (patience 10) differs from q/final-0 (the reference) and is a variant
    assert labels[0] == "q/final-0" and "p/final-0" not in labels
    assert (
        dict(nd.left_out)["p/final-0"]
        == "shares its start (seeds) with q/final-0 (one run per start)"
    )


def test_modes_split_at_the_natural_break_and_need_two_runs_a_side():
    found = modes([0.0, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.3, 0.4, 0.5, 0.6, 0.7])
    assert (found.below, found.above) == (0.05, 0.3)
    assert found.threshold == pytest.approx(0.175)
    assert modes([0.168, 0.30, 0.31, 0.32, 0.33]) is None  # one outlier is not a mode
    assert modes([0.0, 0.01, 0.05, 0.09]) is None  # no gap of 0.1
    # a gap of exactly 0.1 separates, whatever float rounding makes of the difference
    assert modes([0.2, 0.2, 0.3, 0.3]).threshold == pytest.approx(0.25)  # 0.3 - 0.2 < 0.1
    assert modes([0.0, 0.0, 0.1, 0.1]).threshold == pytest.approx(0.05)


def test_hidden_folders_and_unreadable_other_profiles_do_not_stop_the_pools(planted):
    """JupyterLab's .ipynb_checkpoints beside the profiles is no profile; a damaged record
    in another profile is listed as left out, not an error (in the reported one it is)."""
    (planted / ".ipynb_checkpoints").mkdir()
    damaged = planted / "other" / QF / "Tf" / "final-0"
    damaged.mkdir(parents=True)
    (damaged / "metrics.json").write_text('{"status": "weird"}')
    pools = build_pools(planted, "p", {(QF, "Tf+Nd"), (QF, "Tf")})
    assert len(pools[(QF, "Tf")].runs) == 5
    for pool in pools.values():
        (why,) = [w for label, w in pool.left_out if label == "other/*"]
        assert why.startswith("not read: ") and "status 'weird'" in why
    with pytest.raises(FruitError, match="status 'weird'"):
        build_pools(planted, "other", {(QF, "Tf")})


def test_run_level_shares_tests_and_stability_by_hand(planted, monkeypatch):
    pools = build_pools(planted, "p", {(QF, "Tf+Nd"), (QF, "Tf")})
    check = parse_check(f"{QF}/Tf+Nd full.hierarchical > {QF}/Tf full.hierarchical")
    level = run_level(check, pools)
    assert level.runs == (7, 5) and level.test == "cells"
    nd_values = [0.0, 0.0, 0.3, 0.4, 0.5, 0.6, 0.7]
    tf_values = [0.01, 0.02, 0.03, 0.04, 0.05]
    assert level.means == pytest.approx((sum(nd_values) / 7, 0.03))
    assert level.p_claimed == pytest.approx(_brute_rank_sum(nd_values, tf_values))
    assert level.modes.threshold == pytest.approx(0.175)
    nd, tf = level.shares
    assert (nd.above, nd.runs, tf.above, tf.runs) == (5, 7, 0, 5)
    # Fisher, 5 of 7 against 0 of 5: P(X >= 5) = C(5,5) C(7,2) / C(12,7) = 21/792
    assert level.p_shares[0] == pytest.approx(21 / 792)
    # the paper's Tf+Nd (0.318 ± .19): at least 2 of 5 above 0.175 (docs/campaign.md)
    assert nd.paper == (2, 5) and nd.p_paper is None  # 5/7 lies inside 2/5..5/5
    assert tf.paper == (0, 0) and tf.p_paper is None
    # by phase: the trials .6, .7 both above, the finals 3 of 5; two-sided Fisher of one
    # rate: tables of 0, 1, 2 trials above weigh 1, 10, 10 (of C(7,2) = 21), none less
    # likely than the observed, so p = 1; Tf has finals only
    assert nd.phases == (("search", 2, 2), ("final", 3, 5)) and nd.p_phases == pytest.approx(1)
    assert tf.phases == (("final", 0, 5),) and tf.p_phases is None
    assert tf.interval == pytest.approx((0.0, 1 - 0.025 ** (1 / 5)))
    # stability, every draw of 5 of the 7 Tf+Nd runs against the 5 Tf runs (21 draws):
    # without a zero (1 draw) the permutation p is 1/252; with one zero (10 draws) 6/252:
    # reproduced; with both zeros (10 draws) 21/252 = 0.083: undecided
    assert level.stability.exhaustive and level.stability.draws == 21
    assert level.stability.counts == {"reproduced": 11, "undecided": 10}


def test_a_share_below_the_papers_range_is_tested_against_its_nearer_end(monkeypatch):
    monkeypatch.setattr(pooling, "paper_cell", lambda side: (0.318, 0.19))
    side = parse_check(f"{QF}/Tf+Nd full.hierarchical > 0.5").left
    share = pooling._share(side, _runs(final=[0.9] + [0.0] * 11), 0.175)
    assert share.paper == (2, 5) and (share.above, share.runs) == (1, 12)
    # the paper's 2 of 5 against our 1 of 12: [C(3,2) C(14,3) + C(3,3) C(14,2)] / C(17,5)
    assert share.p_paper == pytest.approx(1183 / 6188)


def _runs(search=(), final=()):
    """(run, value) pairs as run_level hands them to _share: only the phase is read."""
    return [(SimpleNamespace(phase="search"), v) for v in search] + [
        (SimpleNamespace(phase="final"), v) for v in final
    ]


def test_a_share_is_split_into_trials_and_finals_with_fishers_two_sided_test():
    side = parse_check(f"{QF}/Tf+Nd full.hierarchical > 0.5").left
    share = pooling._share(side, _runs(search=[0.9, 0.8, 0.7, 0.0], final=[0.0] * 6), 0.175)
    assert (share.above, share.runs) == (3, 10)
    assert share.phases == (("search", 3, 4), ("final", 0, 6))
    # 3 successes among 10, 4 trials: tables with 0-3 trials above weigh 35, 105, 63, 7 of
    # C(10,4) = 210; only the observed is as unlikely: p = 7/210
    assert share.p_phases == pytest.approx(7 / 210)


def _brute_fisher_two_sided(x1, n1, x2, n2):
    """Every way of choosing group 1 from the pooled outcomes, equally likely under one
    rate: the share of choices whose count of successes is no more frequent than the
    observed count's."""
    outcomes = [1] * (x1 + x2) + [0] * (n1 + n2 - x1 - x2)
    counts = [sum(outcomes[i] for i in c) for c in itertools.combinations(range(len(outcomes)), n1)]
    frequency = {k: counts.count(k) for k in set(counts)}
    return sum(frequency[k] <= frequency[x1] for k in counts) / len(counts)


@pytest.mark.parametrize(
    "x1,n1,x2,n2", [(5, 10, 0, 10), (3, 4, 0, 6), (2, 2, 3, 5), (1, 5, 4, 8), (0, 3, 0, 4)]
)
def test_fisher_two_sided_is_the_brute_force_enumeration(x1, n1, x2, n2):
    assert fisher_two_sided(x1, n1, x2, n2) == pytest.approx(
        _brute_fisher_two_sided(x1, n1, x2, n2)
    )
    assert fisher_two_sided(5, 10, 0, 10) == pytest.approx(
        2 * math.comb(15, 10) / math.comb(20, 10)
    )


def test_paper_runs_above_matches_the_derivation():
    # 0.318 ± .19 over 5 runs: 3 runs above 0.06 would need a spread of at least
    # 5·2·(0.3175-0.06)²/3 = 0.221 > 5·0.195² = 0.190; 4 runs need 0.083
    assert paper_runs_above(0.318, 0.19, 0.06) == (4, 5)
    assert paper_runs_above(0.005, 0.01, 0.14) == (0, 0)  # mean·5 < 0.14
    assert paper_runs_above(1.0, 0.0, 0.99) == (5, 5)


@pytest.mark.parametrize("x,n", [(0, 15), (5, 15), (3, 7), (7, 7), (1, 5)])
def test_clopper_pearson_against_the_beta_quantiles(x, n):
    lower, upper = clopper_pearson(x, n)
    # the interval's ends are the 2.5% / 97.5% quantiles of Beta(x, n-x+1), Beta(x+1, n-x)
    if x == 0:
        assert lower == 0.0
    else:
        assert float(mpmath.betainc(x, n - x + 1, 0, lower, regularized=True)) == pytest.approx(
            0.025
        )
    if x == n:
        assert upper == 1.0
    else:
        assert float(mpmath.betainc(x + 1, n - x, 0, upper, regularized=True)) == pytest.approx(
            0.975
        )


def test_fisher_by_hand():
    assert fisher_p(5, 15, 0, 15) == pytest.approx(math.comb(25, 10) / math.comb(30, 15))
    assert fisher_p(4, 5, 5, 20) == pytest.approx(
        sum(math.comb(9, i) * math.comb(16, 5 - i) for i in (4, 5)) / math.comb(25, 5)
    )


def _brute_rank_sum(a, b):
    pooled = a + b
    ranks = [sum(v < x for v in pooled) + (sum(v == x for v in pooled) + 1) / 2 for x in pooled]
    observed = sum(ranks[: len(a)])
    splits = list(itertools.combinations(range(len(pooled)), len(a)))
    return sum(sum(ranks[i] for i in s) >= observed - 1e-9 for s in splits) / len(splits)


def _brute_signed_rank(d):
    d = [x for x in d if x != 0]
    mags = [abs(x) for x in d]
    ranks = [sum(v < m for v in mags) + (sum(v == m for v in mags) + 1) / 2 for m in mags]
    observed = sum(r for r, x in zip(ranks, d) if x > 0)
    flips = list(itertools.product((0, 1), repeat=len(d)))
    return sum(sum(r for r, f in zip(ranks, s) if f) >= observed - 1e-9 for s in flips) / len(flips)


@pytest.mark.parametrize(
    "a,b",
    [
        ([0.0, 0.0, 0.3, 0.4, 0.5, 0.6, 0.7], [0.01, 0.02, 0.03, 0.04, 0.05]),
        ([0.0, 0.0, 0.0, 0.2], [0.0, 0.1, 0.1, 0.0, 0.3]),
        ([1.0, 2.0], [1.0, 2.0, 3.0]),
    ],
)
def test_rank_sum_is_the_brute_force_permutation_distribution(a, b):
    assert rank_sum_p(a, b) == pytest.approx(_brute_rank_sum(a, b))
    assert rank_sum_p(b, a) == pytest.approx(_brute_rank_sum(b, a))


@pytest.mark.parametrize(
    "d", [[0.3, -0.1, 0.2, 0.0, 0.2, -0.4], [0.1] * 5, [0.0, 0.0], [-1.0, 2.0, 3.0]]
)
def test_signed_rank_is_the_brute_force_sign_flip_distribution(d):
    expected = _brute_signed_rank(d) if any(d) else 1.0
    assert signed_rank_p(d) == pytest.approx(expected)


def test_the_pooled_runs_figure_draws_every_run_by_phase(planted, tmp_path):
    from matplotlib.colors import to_rgba

    from fruit.reporting.charts import pooled_runs_panels, write_pooled_runs
    from fruit.reporting.figures import pooled_runs_figure

    pools = build_pools(planted, "p", {(QF, "Tf+Nd"), (QF, "Tf")})
    check = parse_check(f"{QF}/Tf+Nd full.hierarchical > {QF}/Tf full.hierarchical")
    levels = {check.text: run_level(check, pools)}
    (panel,) = pooled_runs_panels(pools, levels)
    assert (panel["task"], panel["accuracy"], panel["column"]) == (QF, "full", "hierarchical")
    assert panel["threshold"] == pytest.approx(0.175)
    nd, tf = panel["cells"]
    assert nd["architecture"] == "Tf+Nd" and sorted(nd["runs"]) == sorted(
        [(v, "final") for v in (0.0, 0.0, 0.3, 0.4, 0.5)] + [(0.6, "search"), (0.7, "search")]
    )
    assert tf["runs"] == [(v, "final") for v in (0.01, 0.02, 0.03, 0.04, 0.05)]
    assert nd["paper"] == pytest.approx((0.318, 0.19))  # the paper's Table: 0.318 ± .19

    ax = pooled_runs_figure([panel], "title").axes[0]
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    open_dots = [d for d in dots if to_rgba(d.get_markerfacecolor()) == to_rgba("white")]
    assert len(dots) == 12 and len(open_dots) == 2  # the two trials
    assert {t.get_text() for t in ax.texts} == {"trials 2/2\nfinals 3/5", "finals 0/5"}

    written = write_pooled_runs(pools, levels, tmp_path, "profile p")
    assert sorted(p.name for p in written) == ["pooled-runs.pdf", "pooled-runs.png"]
    # a report whose comparisons have no two modes leaves no stale figure behind
    flat = {check.text: dataclasses.replace(levels[check.text], shares=())}
    assert write_pooled_runs(pools, flat, tmp_path, "profile p") == []
    assert not list(tmp_path.glob("pooled-runs.*"))


def test_a_claims_own_stability_tests_all_its_comparisons_on_one_draw(planted):
    """C4's shape on the planted runs: Tf+Nd hier. > linear (0.1 in every run) and Tf+Nd >
    Tf. Over the 21 draws of 5 of the 7 Tf+Nd runs (the Tf cell has exactly 5): the paired
    comparison is reproduced only without a zero run (differences -0.1 there: one flip
    of it ties the observed sum, p = 2/32 > 0.05), so in 1 draw; the between-cells one
    in 11 (the test above). The claim needs both on the same draw: 1 reproduced, 20
    undecided; tested on independent draws it would be 11/21 of 1/21. With a comparison
    left out the claim cannot be reproduced."""
    from fruit.reporting.claims import Claim, ClaimResult, evaluate_check

    pools = build_pools(planted, "p", {(QF, "Tf+Nd"), (QF, "Tf")})
    paired = parse_check(f"{QF}/Tf+Nd full.hierarchical > full.linear")
    cells = parse_check(f"{QF}/Tf+Nd full.hierarchical > {QF}/Tf full.hierarchical")
    assert pooling.stability(paired, pools).counts == {"reproduced": 1, "undecided": 20}
    claim = Claim("CX", "planted", (paired, cells))
    result = ClaimResult(claim, tuple(evaluate_check(c, []) for c in (paired, cells)))
    joint = pooling.claim_stability(result, pools)
    assert joint.exhaustive and joint.draws == 21
    assert joint.counts == {"reproduced": 1, "undecided": 20}
    # the draw with no zero run is the one where both comparisons are reproduced
    only_cells = ClaimResult(claim, result.checks[1:], left_out=1)
    assert pooling.claim_stability(only_cells, pools).counts == {"undecided": 21}
    # a contradicted comparison contradicts the claim in every draw where it is
    opposite = parse_check(f"{QF}/Tf full.hierarchical > {QF}/Tf+Nd full.hierarchical")
    both = ClaimResult(claim, tuple(evaluate_check(c, []) for c in (cells, opposite)))
    single = pooling.stability(cells, pools).counts
    assert pooling.claim_stability(both, pools).counts == {
        "contradicted": single["reproduced"],
        "undecided": single["undecided"],
    }


def test_the_claim_verdict_combines_its_comparisons():
    from fruit.reporting.claims import claim_verdict

    assert claim_verdict(["reproduced", "reproduced"]) == "reproduced"
    assert claim_verdict(["reproduced", "consistent"]) == "reproduced"
    assert claim_verdict(["reproduced", "reproduced"], left_out=1) == "undecided"
    assert claim_verdict(["reproduced", "undecided"]) == "undecided"
    assert claim_verdict(["reproduced", "contradicted"]) == "contradicted"
    assert claim_verdict(["consistent"]) == "undecided"


def test_the_stability_cell_shows_a_rare_verdict_as_below_a_tenth():
    from fruit.reporting.pooling import Stability
    from fruit.reporting.pooling_report import stability_cell

    st = Stability({"reproduced": 1, "undecided": 2749, "contradicted": 253}, 3003, True)
    assert stability_cell(st) == "R <0.1% · U 91.5% · C 8.4%"
    assert stability_cell(Stability({"undecided": 5}, 5, True)) == "U 100.0%"
