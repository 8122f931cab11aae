"""Where each planned run of a profile stands, read from its folder: finished (with how
long it trained and whether it completed) or not (with the epochs it has trained so far).

``fruit run --dry-run``'s estimate (``fruit.experiments.planning.cost``) and the sweep's
progress line (``fruit.experiments.execution.progress.Progress``) plan from this.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

from fruit.errors import FruitError
from fruit.io import PAUSED_MARKER, RESUME_FILES, DamagedRecord, read_json_record, read_metrics
from fruit.profiles import Profile, run_folder


@dataclasses.dataclass(frozen=True)
class RunState:
    """What the results folder says about one planned run."""

    task: str
    architecture: str
    phase: str  # "search" | "final"
    epochs: float  # trained (unfinished: so far; 0 if it never started)
    finished: bool  # metrics.json is there
    complete: bool = False  # finished by early stopping or its maximum (not diverged)
    train_seconds: float = 0.0  # finished: its training time, every attempt together
    evaluation_seconds: float = 0.0  # finished: its final evaluation's (0: not recorded)


def _number(record: dict, key: str, path: Path) -> float:
    value = record.get(key, 0.0)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DamagedRecord(
            path, f"{key} is {value!r}, not a number", "remove it to rerun that run"
        )
    return float(value)


# What config.json (written first) and metrics.json (written last) of a finished run both
# record: the run's identity and settings. fruit writes them from the same settings, so
# they disagree only where one was edited by hand.
SHARED_SETTINGS = (
    "profile", "task", "architecture", "phase", "index", "seed",
    "batch_tokens", "learning_rate", "d", "num_parameters",
)  # fmt: skip


def check_records_agree(folder: Path, metrics: dict) -> None:
    """A one-line FruitError naming ``folder`` when its config.json and metrics.json say
    different things of the finished run (which of the two is right cannot be told)."""
    config = read_json_record(
        folder / "config.json", "restore it, or move the run folder away to train the run again"
    )
    if config is None:
        return
    differ = [
        key
        for key in SHARED_SETTINGS
        if key in config and key in metrics and not _same(config[key], metrics[key])
    ]
    if differ:
        shown = "; ".join(
            f"{k}: {config[k]!r} in config.json, {metrics[k]!r} in metrics.json" for k in differ
        )
        raise FruitError(
            f"{folder} holds a finished run whose records disagree ({shown}): one was edited "
            "by hand; restore it, or move the folder away to train the run again"
        )


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
        return numbers and math.isclose(a, b, rel_tol=1e-12)
    return a == b


def epochs_so_far(folder: Path, train_size: int) -> float:
    """Epochs an unfinished run has trained: exact where it paused (``paused.json``),
    else its last checkpoint (the last line of ``log.csv``), else 0."""
    try:
        paused = read_json_record(folder / PAUSED_MARKER)
    except DamagedRecord:
        paused = None
    if paused and isinstance(paused.get("examples_seen"), int) and train_size > 0:
        return paused["examples_seen"] / train_size
    try:
        with open(folder / "log.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        return float(rows[-1]["epoch"]) if rows else 0.0
    except (OSError, KeyError, ValueError, TypeError):
        return 0.0


def describe_paused(folder: Path, train_size: int) -> str:
    """One line on a paused run: its name, the epochs it has trained, and its resume files
    with their size (what another machine needs to go on from there)."""
    files = [folder / name for name in RESUME_FILES if (folder / name).is_file()]
    megabytes = sum(f.stat().st_size for f in files) / 1e6
    name = "/".join(folder.parts[-3:])
    return (
        f"paused: {name} at {epochs_so_far(folder, train_size):.1f} epochs; "
        f"resume files {', '.join(f.name for f in files) or 'none'} ({megabytes:.1f} MB)"
    )


def run_states(
    profile: Profile,
    results_dir: str | Path,
    pairs: list[tuple[str, str]] | None = None,
) -> list[RunState]:
    """The state of every planned run of ``pairs`` (default: all the profile's) under
    ``results_dir``; a damaged ``metrics.json`` is a one-line ``DamagedRecord``."""
    states = []
    for task, arch in pairs or profile.pairs:
        for phase, count in (("search", profile.search_trials), ("final", profile.final_runs)):
            for index in range(count):
                folder = run_folder(results_dir, profile.name, task, arch, phase, index)
                metrics = read_metrics(folder)
                if metrics is None:
                    epochs = epochs_so_far(folder, profile.sizes["train"])
                    states.append(RunState(task, arch, phase, epochs, finished=False))
                    continue
                path = folder / "metrics.json"
                states.append(
                    RunState(
                        task,
                        arch,
                        phase,
                        _number(metrics, "epochs", path),
                        finished=True,
                        complete=metrics.get("status") == "complete",
                        train_seconds=_number(metrics, "train_seconds", path),
                        evaluation_seconds=_number(metrics, "evaluation_seconds", path),
                    )
                )
    return states
