"""Run-level evidence for the paper's claims: every independent run of a pair, pooled
across profiles, the claims' comparisons over them, and how stable the report's own
finals-only verdict is when its 5 runs per cell are drawn from them.

Why. The report decides each comparison from a profile's 5 final runs per cell, as the
paper does. Some outcomes are bimodal across seeds (question formation Tf+Nd writes the
hierarchical question for a quarter or more of the generalization set in some runs and
almost never in the others), so 5 runs are a noisy instrument: their verdict can flip with
the draw. The pool below is every run that could have been one of those 5.

The pool of a (task, architecture) pair, built from the run folders of every profile
under the results folder (config.json, log.csv and metrics.json; no hand-made list):

* runs of either phase (search trials and final runs) that finished (``complete``) and
  were trained to early stopping: fewer epochs than their ``max_epochs`` (a search trial
  cut at 3 epochs is not a converged run);
* on the same data as the reported profile's runs of the pair (``DATA``: source, seed and
  split sizes; runs on other data are not candidates and are not listed, so a profile of
  its own data, such as ``quick``, reports from its own runs whatever else lies beside
  them), and with the same model and training protocol (``PROTOCOL``: model options and
  size, checkpointing and the early-stopping schedule); a run that differs there is a
  *variant* and is left out;
* runs that share a start (``START``: the same seed, parameter seed and shuffle seed: the
  same initial parameters, dropout stream and batch order) count once, and so does a run
  whose log.csv is a prefix of another's (a continuation or a copy of it). Which one is
  kept: the reported profile's runs first, final runs before search trials, then the
  other profiles by name.

Over the pool, each comparison is tested with an exact rank test (``RANK_TESTS``), and
where the values of a comparison's cells fall into two modes (``modes``: two groups of at
least 2 runs, split where the spread within them is smallest, at least ``MODE_GAP``
apart), the share of runs
above the gap is given per cell with its Clopper-Pearson interval, beside the share the
paper's printed mean and std allow (``stats.paper_runs_above``) and Fisher's exact test of
ours against the nearest end of that range; between two cells, Fisher's test of the
claimed direction. Each cell's share is also split by phase (``PHASES``): search trials,
each at its own drawn setting, against final runs, at the one selected setting, with
Fisher's two-sided test of one rate for both; a pool's rate mixes the two, and the
paper's five runs are finals.

Verdict stability: the report's own test (``claims.decide``) on ``FINALS`` runs per cell
drawn without replacement from the pool, every draw when there are at most
``STABILITY_DRAWS`` of them, else ``STABILITY_DRAWS`` draws with a fixed seed (the report
stays byte for byte the same); the share of draws that give each verdict. A claim of
several comparisons gets the same for its own verdict (``claim_stability``): each draw
takes 5 runs per cell once, tests every comparison on them and combines their verdicts as
the claim's is combined (``claims.claim_verdict``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fruit.errors import FruitError
from fruit.reporting.claims import (
    ALPHA,
    MIN_RUNS,
    Check,
    ClaimResult,
    Side,
    claim_verdict,
    decide,
    paper_cell,
    verdict_of,
)
from fruit.reporting.runs import RunResult, available_profiles, load_runs, read_record, runs_dir
from fruit.reporting.stats import (
    PAPER_RUNS,
    clopper_pearson,
    fisher_p,
    fisher_two_sided,
    paper_runs_above,
    rank_sum_p,
    signed_rank_p,
)

FINALS = PAPER_RUNS  # runs per cell of the protocol whose stability is measured
# accuracy points: a gap at least this wide between sorted values separates two modes
MODE_GAP = 0.1
STABILITY_DRAWS = 10_000
STABILITY_SEED = 20240723
# the data a run trained and was scored on: runs on other data are not candidates at all
# (not listed either, so that a profile's report does not depend on unrelated profiles)
DATA = ("data_source", "data_seed", "train_size", "dev_size", "test_size", "gen_size")
PROTOCOL = (
    "model_options",
    "target_params",
    "d",
    "partial_on_test",
    "checkpoint_every",
    "clip_norm",
    "lr_factor",
    "lr_patience",
    "early_stop_patience",
)
START = ("seed", "parameter_seed", "shuffle_seed")
PHASES = ("search", "final")  # the order in which a share's phases are given
RANK_TESTS = {
    "number": "signed-rank test of the runs' differences from the number",
    "paired": "signed-rank test of the two columns' differences, run by run",
    "cells": "rank-sum (Wilcoxon-Mann-Whitney) test between the two cells' runs",
}


def run_label(run: RunResult) -> str:
    """``paper-search/final-0``: the profile and the run folder's name."""
    return f"{run.path.parts[-4]}/{run.phase}-{run.index}"


@dataclass(frozen=True)
class Pool:
    task: str
    architecture: str
    runs: tuple[RunResult, ...]  # pooled, in the order of preference
    left_out: tuple[tuple[str, str], ...]  # (run label, why)


def _log_lines(run: RunResult) -> list[str]:
    path = run.path / "log.csv"
    return path.read_text("utf-8").splitlines()[1:] if path.is_file() else []


def _continues(a: list[str], b: list[str]) -> bool:
    """One log is a prefix of the other (both non-empty)."""
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    return bool(shorter) and longer[: len(shorter)] == shorter


def _why_not_converged(run: RunResult, config: dict) -> str | None:
    if run.metrics is None:
        return "unfinished"
    if run.status != "complete":
        return f"not complete ({run.status})"
    epochs, most = run.metrics.get("epochs"), config.get("max_epochs")
    if epochs is None or most is None or float(epochs) >= float(most):
        return f"not trained to early stopping (stopped at its max_epochs, {most})"
    return None


def _variant(config: dict, reference: dict) -> str | None:
    differs = [
        f"{key} {config.get(key)!r} (pool: {reference.get(key)!r})"
        for key in PROTOCOL
        if config.get(key) != reference.get(key)
    ]
    return "variant: " + ", ".join(differs) if differs else None


def _preference(profile: str):
    def key(item: tuple[str, RunResult]):
        name, run = item
        return (name != profile, name, run.phase != "final", run.phase, run.index)

    return key


def build_pools(
    results_dir: str | Path, profile: str, pairs: set[tuple[str, str]]
) -> dict[tuple[str, str], Pool]:
    """The pool of each (task, architecture) in ``pairs`` from every profile's run folders
    under ``results_dir``; the reported ``profile``'s runs define the protocol (a pair
    it has no runs of gets an empty pool)."""
    root = runs_dir(results_dir, profile)
    found: dict[tuple[str, str], list[tuple[str, RunResult]]] = {p: [] for p in pairs}
    unread: list[tuple[str, str]] = []  # other profiles whose records cannot be read
    for name in available_profiles(root):
        try:
            runs = load_runs(root, name, phase=None)
        except FruitError as error:
            if name == profile:
                raise
            unread.append((f"{name}/*", f"not read: {error}"))
            continue
        for run in runs:
            if (run.task, run.architecture) in found and run.phase in ("final", "search"):
                found[(run.task, run.architecture)].append((name, run))
    return {
        pair: _pool(pair, sorted(c, key=_preference(profile)), profile, unread)
        for pair, c in found.items()
    }


def _pool(
    pair: tuple[str, str],
    candidates: list[tuple[str, RunResult]],
    profile: str,
    unread: Sequence[tuple[str, str]] = (),
) -> Pool:
    """``unread``: (label, why) of other profiles that could not be read, listed as left
    out (a damaged record elsewhere does not stop this profile's report)."""
    configs = {run.path: read_record(run.path / "config.json") or {} for _, run in candidates}
    own = [run for name, run in candidates if name == profile]
    if not own:
        return Pool(*pair, (), tuple(unread))
    reference = configs[own[0].path]
    candidates = [
        (name, run)
        for name, run in candidates
        if all(configs[run.path].get(k) == reference.get(k) for k in DATA)
    ]
    kept: list[RunResult] = []
    starts: dict[tuple, RunResult] = {}
    logs: dict[Path, list[str]] = {}
    left_out = list(unread)
    for _, run in candidates:
        config = configs[run.path]
        why = _why_not_converged(run, config) or _variant(config, reference)
        start = tuple(config.get(k) for k in START)
        if why is None and start in starts:
            why = f"shares its start (seeds) with {run_label(starts[start])} (one run per start)"
        if why is None:
            lines = logs.setdefault(run.path, _log_lines(run))
            earlier = next((k for k in kept if _continues(lines, logs[k.path])), None)
            if earlier is not None:
                why = f"its log.csv and {run_label(earlier)}'s begin alike (a continuation or copy)"
        if why is None:
            kept.append(run)
            starts[start] = run
        else:
            left_out.append((run_label(run), why))
    return Pool(*pair, tuple(kept), tuple(left_out))


# ------------------------------------------------------------------------ comparisons


@dataclass(frozen=True)
class Modes:
    threshold: float  # the middle of the gap
    below: float  # the largest value below the gap
    above: float  # the smallest value above it


def modes(values: list[float], gap: float = MODE_GAP) -> Modes | None:
    """Two modes when the values split into two groups of at least 2 runs each, apart by
    at least ``gap``: the split is the one with the smallest sum of squared deviations
    from the two groups' means (the 2-class natural break; the first on ties), the
    threshold the middle of the gap between them. None otherwise."""
    ordered = sorted(values)

    def within(group: list[float]) -> float:
        mean = math.fsum(group) / len(group)
        return math.fsum((v - mean) ** 2 for v in group)

    splits = range(2, len(ordered) - 1)  # at least 2 values on each side
    if not splits:
        return None
    cut = min(splits, key=lambda i: within(ordered[:i]) + within(ordered[i:]))
    low, high = ordered[cut - 1], ordered[cut]
    if high - low < gap - 1e-9:  # at least the gap (1e-9: 0.3 - 0.2 is 0.0999... in floats)
        return None
    return Modes((low + high) / 2, low, high)


@dataclass(frozen=True)
class Share:
    """One cell's runs above a comparison's mode threshold."""

    side: Side
    above: int
    runs: int
    interval: tuple[float, float]  # Clopper-Pearson 95%
    paper: tuple[int, int]  # (fewest, most) of the paper's 5 runs above the threshold
    p_paper: float | None  # Fisher: ours against the nearer end of the paper's range
    phases: tuple[tuple[str, int, int], ...] = ()  # (phase, above, runs), PHASES order
    p_phases: float | None = None  # Fisher two-sided, trials against finals (both present)

    @property
    def share(self) -> float:
        return self.above / self.runs


@dataclass(frozen=True)
class Stability:
    counts: dict[str, int]  # verdict -> draws
    draws: int
    exhaustive: bool  # every draw (else STABILITY_DRAWS with a fixed seed)

    def share(self, verdict: str) -> float:
        return self.counts.get(verdict, 0) / self.draws


@dataclass(frozen=True)
class RunLevel:
    check: Check
    means: tuple[float, float] | None
    runs: tuple[int, int]
    test: str  # a key of RANK_TESTS
    p_claimed: float | None
    p_opposite: float | None
    verdict: str
    modes: Modes | None
    shares: tuple[Share, ...]
    p_shares: tuple[float, float] | None  # Fisher between two cells: claimed, opposite
    stability: Stability | None  # None: a cell has fewer than FINALS pooled runs


def _cell_values(pool: Pool, side: Side) -> list[tuple[RunResult, float]]:
    return [(r, v) for r in pool.runs if (v := r.value(side.accuracy, side.column)) is not None]


def _share(side: Side, runs: list[tuple[RunResult, float]], threshold: float) -> Share:
    values = [v for _, v in runs]
    above, n = sum(v > threshold for v in values), len(values)
    phases = tuple(
        (phase, sum(v > threshold for r, v in runs if r.phase == phase), count)
        for phase in PHASES
        if (count := sum(r.phase == phase for r, _ in runs))
    )
    p_phases = fisher_two_sided(*phases[0][1:], *phases[1][1:]) if len(phases) == 2 else None
    mean, std = paper_cell(side)
    fewest, most = paper_runs_above(mean, std, threshold)
    p = None
    if n and above * PAPER_RUNS < fewest * n:  # ours below what the paper allows
        p = fisher_p(fewest, PAPER_RUNS, above, n)
    elif n and above * PAPER_RUNS > most * n:
        p = fisher_p(above, n, most, PAPER_RUNS)
    return Share(side, above, n, clopper_pearson(above, n), (fewest, most), p, phases, p_phases)


def run_level(check: Check, pools: dict[tuple[str, str], Pool], alpha: float = ALPHA) -> RunLevel:
    """``check`` over the pooled runs of its cells (``pools``)."""
    pool_l = pools[(check.left.task, check.left.architecture)]
    left = _cell_values(pool_l, check.left)
    sign = check.sign
    if check.right.number is not None:
        kind, right = "number", []
        diffs = [sign * (v - check.right.number) for _, v in left]
        enough = len(left) >= MIN_RUNS
        tests = (lambda: signed_rank_p(diffs), lambda: signed_rank_p([-d for d in diffs]))
    elif check.paired:
        kind = "paired"
        right = _cell_values(pool_l, check.right)
        by_run = {r.path: v for r, v in right}
        diffs = [sign * (v - by_run[r.path]) for r, v in left if r.path in by_run]
        enough = len(diffs) >= MIN_RUNS
        tests = (lambda: signed_rank_p(diffs), lambda: signed_rank_p([-d for d in diffs]))
    else:
        kind = "cells"
        right = _cell_values(pools[(check.right.task, check.right.architecture)], check.right)
        a, b = [v for _, v in left], [v for _, v in right]
        if sign < 0:
            a, b = b, a
        enough = min(len(a), len(b)) >= MIN_RUNS
        tests = (lambda: rank_sum_p(a, b), lambda: rank_sum_p(b, a))
    p_claimed = p_opposite = None
    verdict = "undecided"
    means = None
    if enough:
        p_claimed, p_opposite = tests[0](), tests[1]()
        verdict = verdict_of(check, p_claimed, p_opposite, alpha)
        right_mean = (
            check.right.number if kind == "number" else math.fsum(v for _, v in right) / len(right)
        )
        means = (math.fsum(v for _, v in left) / len(left), right_mean)

    # modes: over both cells where they compare the same column, else the left side's
    cells = {check.left: left}
    if kind != "number":
        cells[check.right] = right
    joint = kind == "cells"
    found = modes([v for c in cells.values() for _, v in c] if joint else [v for _, v in left])
    shares: tuple[Share, ...] = ()
    p_shares = None
    if found is not None and enough:
        sides = list(cells) if joint else [check.left]
        shares = tuple(_share(s, cells[s], found.threshold) for s in sides)
        if joint:
            first, second = shares if sign > 0 else shares[::-1]
            p_shares = (
                fisher_p(first.above, first.runs, second.above, second.runs),
                fisher_p(second.above, second.runs, first.above, first.runs),
            )
    return RunLevel(
        check,
        means,
        (len(left), len(right)),
        kind,
        p_claimed,
        p_opposite,
        verdict,
        found,
        shares,
        p_shares,
        stability(check, pools, alpha),
    )


def stability(
    check: Check,
    pools: dict[tuple[str, str], Pool],
    alpha: float = ALPHA,
    draws: int = STABILITY_DRAWS,
    size: int = FINALS,
) -> Stability | None:
    """How often the report's test (``claims.decide``) on ``size`` runs per cell, drawn
    without replacement from the pools, gives each verdict. None when a cell's pool has
    fewer than ``size`` runs."""
    return _drawn_verdicts([check], lambda v: v[0], check.text, pools, alpha, draws, size)


def claim_stability(
    result: ClaimResult,
    pools: dict[tuple[str, str], Pool],
    alpha: float = ALPHA,
    draws: int = STABILITY_DRAWS,
    size: int = FINALS,
) -> Stability | None:
    """How often the claim's verdict comes out each way when ``size`` runs per cell are
    drawn from the pools, once per draw for all its checked comparisons."""
    checks = [c.check for c in result.checks]
    combine = lambda verdicts: claim_verdict(verdicts, result.left_out)  # noqa: E731
    return _drawn_verdicts(checks, combine, result.claim.id, pools, alpha, draws, size)


def _drawn_verdicts(checks, combine, label, pools, alpha, draws, size) -> Stability | None:
    cells = sorted(set().union(*(c.cells() for c in checks)))
    groups = [pools[c].runs for c in cells]
    if any(len(g) < size for g in groups):
        return None
    total = math.prod(math.comb(len(g), size) for g in groups)
    if total <= draws:
        chosen = itertools.product(*(itertools.combinations(g, size) for g in groups))
        exhaustive = True
    else:
        rng = random.Random(f"{STABILITY_SEED}/{label}")
        chosen = (tuple(tuple(rng.sample(g, size)) for g in groups) for _ in range(draws))
        exhaustive = False
    counts: dict[str, int] = {}
    n = 0
    for draw in chosen:
        runs = [
            dataclasses.replace(r, phase="final", index=i)
            for group in draw
            for i, r in enumerate(group)
        ]
        verdict = combine([decide(c, runs, alpha).verdict for c in checks])
        counts[verdict] = counts.get(verdict, 0) + 1
        n += 1
    return Stability(counts, n, exhaustive)
