"""Reading finished runs: run folders -> ``RunResult`` records (docs/contracts.md §5).

A run folder is ``<results>/<profile>/<task>/<architecture>/<phase>-<index>/``. Its
``metrics.json`` is written last, so a folder without one is an unfinished run. Reporting
reads only run records (metrics.json; config.json's provenance here, config.json and
log.csv in ``fruit.reporting.pooling``): no model code, no checkpoints. Folder
names are not trusted: a metrics.json whose profile, task, architecture, phase or index
differs from its folder's is refused, as is a damaged or malformed record, naming the
file -- ``fruit report`` and the notebooks then stop with one line instead of counting a
run under another's name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from fruit.errors import FruitError
from fruit.io import read_json_record
from fruit.names import ARCHITECTURES
from fruit.resumed import cpu_kind, resumed_elsewhere
from fruit.tasks import PAPER_TASKS, TASKS

# Tables in the registry's order (fruit.tasks.TASKS: the paper's seven in the paper's
# order, PAPER_TASKS, then any others), with the captions' task names: the slug in words,
# except that German comes first.
_CAPTION_NAMES = {
    "question-formation-in-german": "German question formation",
    "passivization-in-german": "German passivization",
}
TASK_ORDER = TASKS
# The tasks the paper has tables and numbers for (comparisons with the paper only there).
PAPER_TASK_ORDER = PAPER_TASKS
TASK_TITLES = {t: _CAPTION_NAMES.get(t, t.replace("-", " ")) for t in TASKS}

# Every registered architecture: the paper's fifteen in the order of its table rows, then
# the ones added to fruit.names.ARCHITECTURES.
ARCHITECTURE_ORDER = tuple(ARCHITECTURES)

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
    cpu: str = "unrecorded"  # the CPU it was trained on ("AMD EPYC (AVX2)"; no width: older)
    # the same run under another profile that this one took over (fruit.experiments.planning.reuse;
    # config.json's record, which a run taken over unfinished and finished here keeps too)
    reused_from: str | None = None
    # the commits, CPUs and devices it was resumed under after it started elsewhere
    # (fruit.resumed.resumed_elsewhere of metrics.json's warnings); empty: none
    resumed: dict = field(default_factory=dict, repr=False)

    @property
    def codes(self) -> list[str]:
        """The commits it was trained from: where it started, and any it resumed under."""
        return [self.code, *(c for c in self.resumed.get("commit", []) if c != self.code)]

    @property
    def cpus(self) -> list[str]:
        """The CPUs it was trained on: where it started, and any it resumed on."""
        return [self.cpu, *(c for c in self.resumed.get("cpu", []) if c != self.cpu)]

    @property
    def moved(self) -> bool:
        """Resumed under another commit, on another kind of CPU or on another device."""
        return any(self.resumed.values())

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


def _provenance(run_dir: Path) -> tuple[str, str, str | None]:
    """(the short commit and "+dirty", the CPU and its vector width) that config.json's
    provenance records, "unrecorded" for what it does not say; and its ``reused_from``."""
    config = read_record(run_dir / "config.json")
    reused = config.get("reused_from") if isinstance(config, dict) else None
    prov = config.get("provenance") if isinstance(config, dict) else None
    prov = prov if isinstance(prov, dict) else {}
    git = prov.get("git")
    code = "unrecorded"
    if isinstance(git, dict) and git.get("commit"):
        code = str(git["commit"])[:7] + ("+dirty" if git.get("dirty") else "")
    cpu = cpu_kind(prov) or "unrecorded"
    return code, cpu, str(reused) if reused else None


def read_record(path: Path) -> dict | None:
    """A JSON object a run folder keeps (metrics.json, config.json); None when absent.
    A damaged one (not JSON, not an object) is a one-line FruitError naming it."""
    return read_json_record(path, _ADVICE)


_ADVICE = "restore it, or move its run folder away to report without it"
# The place of a run folder, results/runs/<profile>/<task>/<architecture>/<phase>-<index>,
# names the record it must hold: metrics.json's fields of the same names.
PLACE_FIELDS = ("profile", "task", "architecture", "phase", "index")


def misplaced(metrics: dict, place: dict) -> list[str]:
    """``"architecture 'Tf+Nd' (folder: 'Tf')"`` for every field of ``metrics`` that
    contradicts the run folder's ``place`` (absent fields are not compared)."""
    return [
        f"{key} {metrics[key]!r} (folder: {place[key]!r})"
        for key in PLACE_FIELDS
        if key in metrics and metrics[key] != place[key]
    ]


def check_metrics(metrics: dict, path: Path) -> None:
    """The fields a table reads have the types of docs/contracts.md §5."""
    if metrics.get("status") not in ("complete", "diverged"):
        raise FruitError(
            f"{path}: status {metrics.get('status')!r} is not 'complete' or 'diverged'; {_ADVICE}"
        )
    for accuracy in ("full", "partial"):
        table = metrics.get(accuracy)
        if table is None and metrics.get("status") == "complete":
            raise FruitError(
                f"{path}: a complete run without its {accuracy!r} table (docs/contracts.md "
                f"§5); {_ADVICE}"
            )
        if table is None:
            continue
        if not isinstance(table, dict) or not all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
            for v in table.values()
        ):
            raise FruitError(f"{path}: {accuracy!r} is not a table of numbers; {_ADVICE}")
        outside = [
            k for k, v in table.items() if k != "log_ratio" and v is not None and not 0 <= v <= 1
        ]
        if outside:
            raise FruitError(
                f"{path}: {accuracy}.{outside[0]} = {table[outside[0]]!r} is not an accuracy "
                f"(outside [0, 1]); {_ADVICE}"
            )


def _parse_run_dir(run_dir: Path) -> tuple[str, int] | None:
    """``search-3`` -> ("search", 3); None for a folder not named <phase>-<index> (ASCII
    digits, no leading zero: ``final-00`` would be a second ``final-0``)."""
    phase, sep, index = run_dir.name.rpartition("-")
    if not sep or not phase or not re.fullmatch(r"0|[1-9][0-9]*", index):
        return None
    return phase, int(index)


def check_expected_runs(value, name: str = "expected_runs") -> int | None:
    """The final runs a table row should have: None (the profile's) or at least 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        default = "leave it out" if name.startswith("--") else "None"  # option or parameter
        raise FruitError(
            f"{name} must be an integer >= 1 ({default} for the profile's), not {value!r}"
        )
    return value


def available_profiles(results_dir: str | Path) -> list[str]:
    results_dir = Path(results_dir)
    return (
        sorted(p.name for p in results_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
        if results_dir.is_dir()
        else []
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
    if not profile or "/" in profile or "\\" in profile or profile.startswith("."):
        raise FruitError(f"bad profile name {profile!r}: it names one folder of run folders")
    results_dir = runs_dir(results_dir, profile)
    root = results_dir / profile
    if not root.is_dir():
        if not results_dir.is_dir():
            raise FruitError(
                f"{results_dir} is not a folder: give the folder that holds <profile>/ run "
                "folders (results/runs) or the one above it"
            )
        found = available_profiles(results_dir)
        if not found:
            raise FruitError(f"no run folders under {results_dir}: no profile folders found")
        raise FruitError(
            f"no runs of profile {profile!r} under {results_dir} (train them with `fruit run "
            f"--profile {profile}`); profiles with runs there: {', '.join(found)}"
        )
    runs, wrong = [], []
    for run_dir in sorted(root.glob("*/*/*")):
        parsed = _parse_run_dir(run_dir) if run_dir.is_dir() else None
        if parsed is None or (phase is not None and parsed[0] != phase):
            continue
        task, architecture = run_dir.parent.parent.name, run_dir.parent.name
        metrics_path = run_dir / "metrics.json"
        metrics = read_record(metrics_path)
        if metrics is not None:
            check_metrics(metrics, metrics_path)
            place = dict(zip(PLACE_FIELDS, (profile, task, architecture, *parsed)))
            mismatches = misplaced(metrics, place)
            if mismatches:
                wrong.append(f"{metrics_path} holds {', '.join(mismatches)}")
        code, cpu, reused_from = _provenance(run_dir)
        resumed = resumed_elsewhere((metrics or {}).get("warnings"))
        runs.append(
            RunResult(
                run_dir, task, architecture, parsed[0], parsed[1], metrics, code, cpu,
                reused_from, resumed,
            )
        )  # fmt: skip
    if wrong:
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise FruitError(
            f"a run record is not where it belongs: {wrong[0]}{more}; a table would count it "
            "as the folder's run: move it to its own folder, or away"
        )
    return runs
