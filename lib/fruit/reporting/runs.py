"""Reading finished runs: run folders -> ``RunResult`` records (docs/contracts.md §5).

A run folder is ``<results>/<profile>/<task>/<architecture>/<phase>-<index>/``. Its
``metrics.json`` is written last, so a folder without one is an unfinished run. Reporting
reads nothing else: no model code, no checkpoints.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from fruit.errors import FruitError, unknown_choice
from fruit.names import ARCHITECTURES
from fruit.tasks import TASKS

# The paper's seven result tables, in the paper's order (fruit.tasks.TASKS), with the
# captions' task names: the slug in words, except that German comes first.
_CAPTION_NAMES = {
    "question-formation-in-german": "German question formation",
    "passivization-in-german": "German passivization",
}
TASK_ORDER = TASKS
TASK_TITLES = {t: _CAPTION_NAMES.get(t, t.replace("-", " ")) for t in TASKS}

# The 15 architectures, in the order of the paper's table rows (fruit.names.ARCHITECTURES).
ARCHITECTURE_ORDER = ARCHITECTURES

# Table columns: (accuracy, column) in the paper's order. Partial accuracy has no test column.
COLUMNS = (
    ("full", "test"),
    ("full", "hierarchical"),
    ("full", "linear"),
    ("full", "log_ratio"),
    ("partial", "hierarchical"),
    ("partial", "linear"),
    ("partial", "log_ratio"),
)


@dataclass(frozen=True)
class RunResult:
    """One run folder. ``metrics`` is None for an unfinished run (no metrics.json yet)."""

    path: Path
    task: str
    architecture: str
    phase: str
    index: int
    metrics: dict | None = field(default=None, repr=False)
    code: str = "unrecorded"  # the commit it was trained from ("abc1234", "abc1234+dirty")

    @property
    def status(self) -> str:
        """ "complete", "diverged" or "unfinished"."""
        return "unfinished" if self.metrics is None else str(self.metrics.get("status"))

    def value(self, accuracy: str, column: str) -> float | None:
        """A table value of this run, or None when absent, null or not finite."""
        if self.metrics is None:
            return None
        v = (self.metrics.get(accuracy) or {}).get(column)
        if v is None:
            return None
        v = float(v)
        return v if math.isfinite(v) else None


def _code(run_dir: Path) -> str:
    """The short commit (and "+dirty") that config.json's provenance records."""
    try:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        git = config["provenance"]["git"]
    except (OSError, ValueError, KeyError, TypeError):
        return "unrecorded"
    if not git.get("commit"):
        return "unrecorded"
    return git["commit"][:7] + ("+dirty" if git.get("dirty") else "")


def _parse_run_dir(run_dir: Path) -> tuple[str, int] | None:
    phase, sep, index = run_dir.name.rpartition("-")
    if not sep or not phase or not index.isdigit():
        return None
    return phase, int(index)


def available_profiles(results_dir: str | Path) -> list[str]:
    results_dir = Path(results_dir)
    return (
        sorted(p.name for p in results_dir.iterdir() if p.is_dir()) if results_dir.is_dir() else []
    )


def runs_dir(results_dir: str | Path, profile: str) -> Path:
    """``results_dir`` itself, or ``results_dir/runs`` when the profile's folder is there."""
    results_dir = Path(results_dir)
    if not (results_dir / profile).is_dir() and (results_dir / "runs").is_dir():
        return results_dir / "runs"
    return results_dir


def load_runs(
    results_dir: str | Path, profile: str, phase: str | None = "final"
) -> list[RunResult]:
    """Every run folder of ``profile`` under ``results_dir`` (``phase=None``: all phases).

    ``results_dir`` is the folder that holds one folder per profile (``results/runs``), or
    the folder above it (``results``). Raises FruitError, listing the profiles that exist,
    when ``profile`` has no folder.
    """
    results_dir = runs_dir(results_dir, profile)
    root = results_dir / profile
    if not root.is_dir():
        found = available_profiles(results_dir)
        if not found:
            raise FruitError(f"no run folders under {results_dir}: no profile folders found")
        raise unknown_choice(f"profile (no folder {root})", profile, found)
    runs = []
    for run_dir in sorted(root.glob("*/*/*")):
        parsed = _parse_run_dir(run_dir) if run_dir.is_dir() else None
        if parsed is None or (phase is not None and parsed[0] != phase):
            continue
        metrics_path = run_dir / "metrics.json"
        metrics = None
        if metrics_path.is_file():
            try:
                metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise FruitError(f"{metrics_path}: not valid JSON ({e})") from e
        task, architecture = run_dir.parent.parent.name, run_dir.parent.name
        runs.append(
            RunResult(run_dir, task, architecture, parsed[0], parsed[1], metrics, _code(run_dir))
        )
    return runs
