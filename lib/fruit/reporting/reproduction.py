"""Do fresh runs of a profile reproduce the committed ones? One verdict for a reader
(``make reproduce``; whether our runs reproduce the paper's claims is ``claims``, which
``reproduction.ipynb`` shows).

On a CPU of the kind that made the committed runs (the same vector instructions), the
answer is byte-identical tables. Across CPU kinds, float32 kernels round differently,
runs drift apart from the first checkpoint on, and the question becomes statistical:

* every cell (task, architecture, accuracy column) with at least ``MIN_RUNS`` complete
  final runs on both sides is tested with a two-sided exact permutation test of the
  difference of the two means (all splits of the pooled runs; no distribution assumed;
  twice the smaller one-sided p), at level ``LEVEL`` per cell; and
* every claim of ``reporting/data/claims.toml`` must get the same verdict from both.

``compare(committed, fresh, profile)`` gives a ``Reproduction``; its ``text`` is one
verdict line ("reproduced on this machine", or which cells and claims differ) with both
CPU kinds, then one line per difference. ``python -m fruit.reporting.reproduction
COMMITTED FRESH PROFILE`` prints it (``make reproduce`` does, after the byte comparison).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from fruit.reporting.runs import COLUMNS, RunResult, load_runs
from fruit.reporting.stats import two_sample_p

LEVEL = 0.05
MIN_RUNS = 2


def two_sided_p(a: list[float], b: list[float]) -> float:
    """Exact two-sided permutation p-value of mean(a) != mean(b)."""
    return min(1.0, 2 * min(two_sample_p(a, b), two_sample_p(b, a)))


def cpu_kinds(runs: list[RunResult]) -> list[str]:
    """The CPUs the runs were made on, as config.json's provenance names them
    ("AMD EPYC (AVX2)"; "unrecorded" where it does not say)."""
    return sorted({run.cpu for run in runs})


@dataclass
class Reproduction:
    profile: str
    committed_kinds: list[str]
    fresh_kinds: list[str]
    cells_tested: int = 0
    differing: list[str] = field(default_factory=list)  # one line per differing cell
    claims_changed: list[str] = field(default_factory=list)
    cells_skipped: int = 0  # cells with fewer than MIN_RUNS complete runs on a side
    fresh_finished: tuple[int, int] = (0, 0)  # (complete, all) final runs of the fresh side
    committed_finished: int = 0  # complete final runs of the committed side

    @property
    def reproduced(self) -> bool:
        return bool(self.cells_tested) and not self.differing and not self.claims_changed

    @property
    def where(self) -> str:
        """'this machine', or, for fresh runs from several CPU kinds, 'these machines'."""
        return "this machine" if len(self.fresh_kinds) <= 1 else "these machines"

    def _notes(self) -> list[str]:
        notes = []
        done, total = self.fresh_finished
        if done < total or done < self.committed_finished:
            notes.append(
                f"the fresh runs are incomplete: {done} of {total} final runs finished "
                f"({self.committed_finished} committed); run the same command again to go on"
            )
        if self.cells_skipped:
            notes.append(
                f"{self.cells_skipped} cells not compared: fewer than {MIN_RUNS} complete "
                "runs on a side"
            )
        if len(self.fresh_kinds) > 1:
            notes.append(f"the fresh runs come from {len(self.fresh_kinds)} CPU kinds")
        return notes

    @property
    def text(self) -> str:
        kinds = (
            f"committed runs: {', '.join(self.committed_kinds)}; "
            f"these: {', '.join(self.fresh_kinds)}"
        )
        notes = [f"  ({note})" for note in self._notes()]
        if not self.cells_tested:
            head = (
                "nothing to compare: no cell has "
                f"{MIN_RUNS} complete final runs on both sides, so no verdict ({kinds})"
            )
            return "\n".join([head, *notes])
        if self.reproduced:
            head = (
                f"reproduced on {self.where}: none of the {self.cells_tested} cells differs "
                f"(two-sided exact permutation test of the means, level {LEVEL:g} per cell) "
                f"and every claim has its committed verdict ({kinds})"
            )
            return "\n".join([head, *notes])
        parts = []
        if self.differing:
            parts.append(f"{len(self.differing)} of {self.cells_tested} cells differ")
        if self.claims_changed:
            parts.append(f"{len(self.claims_changed)} claim verdicts changed")
        expected = LEVEL * self.cells_tested
        head = (
            f"NOT reproduced on {self.where}: {' and '.join(parts)} (two-sided exact "
            f"permutation test of the means, level {LEVEL:g} per cell: about {expected:.1f} "
            f"cells would differ by chance alone; {kinds})"
        )
        lines = [f"  {line}" for line in self.differing + self.claims_changed]
        return "\n".join([head, *lines, *notes])


def _values(runs: list[RunResult]) -> dict[tuple, list[float]]:
    cells: dict[tuple, list[float]] = {}
    for run in runs:
        if run.phase != "final" or run.status != "complete":
            continue
        for accuracy, column in COLUMNS:
            value = run.value(accuracy, column)
            if value is not None and math.isfinite(value):
                cells.setdefault((run.task, run.architecture, accuracy, column), []).append(value)
    return cells


def compare(committed_dir: str | Path, fresh_dir: str | Path, profile: str) -> Reproduction:
    """The committed final runs of ``profile`` against fresh ones (see the module)."""
    from fruit.reporting.claims import evaluate_claims

    committed = load_runs(committed_dir, profile)
    fresh = load_runs(fresh_dir, profile)
    result = Reproduction(profile, cpu_kinds(committed), cpu_kinds(fresh))
    result.fresh_finished = (sum(r.status == "complete" for r in fresh), len(fresh))
    result.committed_finished = sum(r.status == "complete" for r in committed)
    ours, theirs = _values(fresh), _values(committed)
    for cell in sorted(set(ours) | set(theirs)):
        a, b = ours.get(cell, []), theirs.get(cell, [])
        if min(len(a), len(b)) < MIN_RUNS:
            result.cells_skipped += 1
            continue
        result.cells_tested += 1
        p = two_sided_p(a, b)
        if p < LEVEL:
            task, arch, accuracy, column = cell
            result.differing.append(
                f"{task}/{arch} {accuracy}.{column}: {sum(a) / len(a):.3f} here, "
                f"{sum(b) / len(b):.3f} committed (p = {p:.3f})"
            )
    before = {r.claim.id: r.verdict for r in evaluate_claims(committed)}
    after = {r.claim.id: r.verdict for r in evaluate_claims(fresh)}
    for claim, verdict in before.items():
        if after.get(claim) != verdict:
            result.claims_changed.append(f"{claim}: {after.get(claim)} here, {verdict} committed")
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print("usage: python -m fruit.reporting.reproduction COMMITTED_RUNS FRESH_RUNS PROFILE")
        return 2
    from fruit.errors import FruitError

    try:
        print(compare(*argv).text)
    except FruitError as e:
        print(f"fruit: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
