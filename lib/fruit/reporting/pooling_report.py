"""The run-level evidence (``fruit.reporting.pooling``) as text: the section of ``claims.md``
that lists each pair's pooled runs and what was left out, the comparisons over them, and
the verdict-stability cells and sentences of the claims table and status line."""

from __future__ import annotations

from fruit.reporting.claims import ClaimResult
from fruit.reporting.pooling import (
    FINALS,
    MODE_GAP,
    RANK_TESTS,
    STABILITY_DRAWS,
    Pool,
    RunLevel,
    Stability,
    run_label,
)
from fruit.reporting.runs import TASK_TITLES
from fruit.reporting.stats import PAPER_RUNS

# the 95% half-width of a share drawn STABILITY_DRAWS times, at its widest (a share of 1/2)
MONTE_CARLO_POINTS = 100 * 1.96 * (0.25 / STABILITY_DRAWS) ** 0.5
SHORT = {"reproduced": "R", "undecided": "U", "contradicted": "C", "consistent": "OK"}
PHASE_NAMES = {"search": "trials", "final": "finals"}


def _p(value: float | None) -> str:
    return "--" if value is None else f"{value:.3f}"


def stability_cell(st: Stability | None) -> str:
    """'R 5.4% · U 92.7% · C 1.9%' (verdicts that no draw gave left out; one that some
    draws gave, too few to show as 0.1%, as '<0.1%')."""
    if st is None:
        return f"-- (fewer than {FINALS} pooled runs)"
    parts = [
        f"{SHORT[v]} {'<0.1' if st.share(v) < 0.0005 else f'{100 * st.share(v):.1f}'}%"
        for v in ("reproduced", "consistent", "undecided", "contradicted")
        if st.counts.get(v)
    ]
    return " · ".join(parts)


def _draws(st: Stability) -> str:
    if st.exhaustive:
        return f"all {st.draws:,} possible draw{'s' if st.draws != 1 else ''}"
    return f"{st.draws:,} draws with a fixed seed"


def _phase_split(share) -> str:
    """'trials 5/10, finals 1/12': a share's runs above the threshold by phase."""
    return ", ".join(f"{PHASE_NAMES[ph]} {k}/{n}" for ph, k, n in share.phases)


def claim_sentence(
    result: ClaimResult, levels: dict[str, RunLevel], claim_level: Stability | None = None
) -> str:
    """What the pooled runs say of a claim's comparisons, for its status bullet, and, for
    a claim of several comparisons, how stable its own verdict is (``claim_level``)."""
    parts = []
    for c in result.checks:
        level = levels.get(c.check.text)
        if level is None:
            continue
        if not any(level.runs):
            parts.append(
                f"`{c.check.text}`: no pooled runs (every run left out: see the run-level "
                "evidence below for why)"
            )
            continue
        runs = level.runs[0] if level.test != "cells" else f"{level.runs[0]} and {level.runs[1]}"
        text = f"`{c.check.text}` over all {runs} pooled runs: {level.verdict}"
        if level.shares and level.test == "cells":
            a, b = level.shares
            # "<=" (no difference claimed): only the opposite direction can decide it
            p, side = (
                (1, "against the claim") if c.check.negated else (0, "in the claim's direction")
            )
            text += (
                f" (runs above {level.modes.threshold:.3f}: {a.above}/{a.runs} vs "
                f"{b.above}/{b.runs}, Fisher p {_p(level.p_shares[p])} {side}"
            )
            text += "".join(
                f"; {s.side.architecture}'s {_phase_split(s)}"
                for s in level.shares
                if s.p_phases is not None
            )
            text += ")"
        if level.stability is not None:
            text += (
                f"; the finals' test on {FINALS} runs drawn from them: "
                f"{stability_cell(level.stability)}"
            )
        parts.append(text)
    if claim_level is not None and len(result.checks) > 1:
        parts.append(
            f"the claim's own verdict on {FINALS} runs per cell drawn from them (all its "
            f"comparisons on the same draw): {stability_cell(claim_level)}"
        )
    return "; ".join(parts)


def _group_left_out(pool: Pool) -> list[str]:
    """'claims/search-0, claims/search-1: not trained to early stopping (...)', one line
    per reason, in the order met."""
    by_reason: dict[str, list[str]] = {}
    for label, why in pool.left_out:
        by_reason.setdefault(why, []).append(label)
    return [f"  - {', '.join(labels)}: {why}" for why, labels in by_reason.items()]


def _pooled(pool: Pool) -> str:
    by_profile: dict[str, list[str]] = {}
    for run in pool.runs:
        profile, name = run_label(run).split("/", 1)
        by_profile.setdefault(profile, []).append(name)
    return "; ".join(f"{p}: {', '.join(names)}" for p, names in by_profile.items())


def _share_text(level: RunLevel) -> tuple[str, str, str, str]:
    """(runs above with 95% CI, the same by phase, the paper's implied runs above, ours
    against the paper)."""
    if not level.shares:
        return "--", "--", "--", "--"
    ours, phases, paper, tests = [], [], [], []
    for s in level.shares:
        name = s.side.architecture
        lo, hi = s.interval
        ours.append(f"{name} {s.above}/{s.runs} = {s.share:.2f} ({lo:.2f}-{hi:.2f})")
        phases.append(
            f"{name} {_phase_split(s)}" + ("" if s.p_phases is None else f" (p {_p(s.p_phases)})")
        )
        fewest, most = s.paper
        span = f"{fewest}" if fewest == most else f"{fewest}-{most}"
        paper.append(f"{name} {span} of {PAPER_RUNS}")
        tests.append(f"{name} {_p(s.p_paper)}" if s.p_paper is not None else f"{name} within")
    return "; ".join(ours), "; ".join(phases), "; ".join(paper), "; ".join(tests)


def markdown_run_level(pools: dict, levels: dict[str, RunLevel]) -> list[str]:
    """The 'Run-level evidence' section: the pools, then the comparisons over them."""
    lines = [
        "## Run-level evidence: every independent converged run of each pair",
        "",
        "The verdicts above rest on the profile's final runs, 5 per cell as in the paper. "
        "Some outcomes are bimodal across seeds, so here each pair pools every run committed "
        "under any profile that could have been one of them (fruit.reporting.pooling): search "
        "trials and final runs trained to early stopping on the same data (source, seed and "
        "split sizes; runs on other data are not listed), with the same model and training "
        "protocol (model options and size, the early-stopping schedule); "
        "runs that share a start (the same seed, parameter seed and shuffle seed) and runs "
        "whose log.csv begins as another's count once (the reported profile's runs kept "
        "first, final runs before trials, then other profiles by name); the rest is listed "
        "below with the reason.",
        "",
        "How to read it. *Over the pool*: the comparison over all pooled runs, with an exact "
        f"rank test ({'; '.join(RANK_TESTS.values())}; ties at mid-ranks). *Two modes at*: "
        "where the comparison's values split into two groups of at least 2 runs, at least "
        f"{MODE_GAP:g} apart (the split with the smallest spread within the groups), the "
        "middle of the gap; then the runs above it per cell with a 95% Clopper-Pearson "
        "interval, and split into search trials (each at its own drawn setting) and final "
        "runs (at a profile's selected setting; the paper's runs are finals) with Fisher's "
        "exact two-sided test of one rate for both phases; "
        f"how many of the paper's {PAPER_RUNS} runs can lie above it given its "
        "printed mean and std (fewest-most, every reading of the rounding; "
        "docs/campaign.md derives it), Fisher's exact one-sided test of our share against the "
        "nearer end of that range (*within*: ours inside it), and between two cells Fisher's "
        "test of the claimed direction (then the opposite). *Stability*: the report's own "
        f"test on {FINALS} runs per cell drawn without replacement from the pool, the share of "
        f"draws giving each verdict (R reproduced, U undecided, C contradicted, OK "
        f"consistent; every draw when there are at most {STABILITY_DRAWS:,}, else "
        f"{STABILITY_DRAWS:,} with a fixed seed, where a share is within "
        f"±{MONTE_CARLO_POINTS:.1f} points of the share over every draw at 95%). The status "
        "line gives the same for the verdict of each claim of several comparisons, all of "
        "them tested on one draw and combined as the claim's verdict is (contradicted by "
        "any, reproduced only by all).",
        "",
    ]
    for (task, arch), pool in pools.items():
        title = f"{TASK_TITLES.get(task, task)} {arch}"
        if not pool.runs and not pool.left_out:
            lines += [f"- **{title}**: no runs of this profile to define the pool.", ""]
            continue
        lines.append(f"- **{title}**: {len(pool.runs)} runs pooled ({_pooled(pool) or 'none'}).")
        if pool.left_out:
            lines.append(f"  Left out ({len(pool.left_out)}):")
            lines += _group_left_out(pool)
        lines.append("")
    lines += [
        "| Comparison | Over the pool | Runs | Test | p claimed | p opposite | Verdict over "
        "the pool | Two modes at | Runs above (95% CI) | Above, by phase (p) | Paper's runs above | "
        "Ours vs the "
        "paper's (p) | Between cells (p claimed; opposite) | Stability of the 5-run verdict |",
        "|:---|---:|---:|:---|---:|---:|:---|---:|:---|:---|:---|:---|:---|:---|",
    ]
    for text, level in levels.items():
        means = "--" if level.means is None else f"{level.means[0]:.3f} vs {level.means[1]:.3f}"
        runs = str(level.runs[0]) if level.test != "cells" else f"{level.runs[0]}, {level.runs[1]}"
        ours, by_phase, paper, against = _share_text(level)
        between = (
            "--" if level.p_shares is None else f"{_p(level.p_shares[0])}; {_p(level.p_shares[1])}"
        )
        st = level.stability
        stability = stability_cell(st) + ("" if st is None else f" ({_draws(st)})")
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{text}`",
                    means,
                    runs,
                    level.test,
                    _p(level.p_claimed),
                    _p(level.p_opposite),
                    level.verdict,
                    "--" if level.modes is None else f"{level.modes.threshold:.3f}",
                    ours,
                    by_phase,
                    paper,
                    against,
                    between,
                    stability,
                ]
            )
            + " |"
        )
    return lines
