"""Runs a profile takes over from another profile's records instead of training them again.

Two profiles with the same seed, data and settings plan some of the very same runs: the
paper-search profile's first 4 trials of question formation Tf are the claims profile's
4 trials, which qf-search-converged trained to early stopping. A profile lists such
profiles under ``reuse``; a planned run whose folder is empty takes over the run folder of
the same (task, architecture, phase, index) under one of them when that folder's
``config.json`` records every setting this run would record (``settings_record`` of its
resolved config), the profile's name and the data folder's path aside. Seeds, learning
rate, batch budget, sizes, data seed and source, every training setting: all equal, so
the same code trains the same run.

Taking over copies the records (``config.json``, ``log.csv``, ``metrics.json``,
``warnings.log``) and, of a paused run, its resume files; ``config.json`` and
``metrics.json`` get this profile's name and ``"reused_from"``, the source folder
(``<profile>/<task>/<architecture>/<phase>-<index>``), so every table that counts the run
can say where it came from. A paused run then goes on under this profile (its data
folder may differ: the resumed run checks its checkpoint's data digest,
``fruit.training.resume``). The source's own folder is left as it was.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from fruit.errors import FruitError
from fruit.experiments.planning.plan import RunSpec, final_specs, search_specs, select_best
from fruit.experiments.planning.run_state import check_records_agree
from fruit.io import (
    RESUME_FILES,
    DamagedRecord,
    atomic_write_json,
    read_json_record,
    read_metrics,
)
from fruit.profiles import Profile, run_folder
from fruit.training.config import (
    RunConfig,
    differences,
    read_config,
    resolve_config,
    settings_record,
)

RECORDS = ("log.csv", "warnings.log")  # copied as they are (config/metrics: rewritten)
# config.json settings that may differ between the same run under two profiles
NOT_COMPARED = frozenset({"profile", "data_dir"})


@dataclass(frozen=True)
class Reusable:
    """A planned run and the folder of the same run under another profile."""

    spec: RunSpec
    source: Path
    source_name: str  # "<profile>/<task>/<architecture>/<phase>-<index>"
    finished: bool


def run_settings(spec: RunSpec, profile: Profile, data_dir: str | Path) -> dict:
    """The settings ``config.json`` records for ``spec`` (before its model is built)."""
    params = spec.parameters(
        profile, data_dir=data_dir, run_dir="", results_dir="", device="cpu", threads=None
    )
    return settings_record(resolve_config(RunConfig.from_parameters(params)))


def same_run(source: Path, settings: dict) -> bool:
    """Whether ``source`` holds a run with exactly ``settings`` (profile and data folder
    aside; ``d`` only where the settings fix it). An absent config.json: no. A damaged
    one is a one-line FruitError naming it: the run there may be hours of training that
    a silent "no" would train again."""
    try:
        old = read_config(source)
    except DamagedRecord as e:
        raise FruitError(
            f"{e}: whether it holds a run to take over cannot be told; restore it to have "
            f"the run taken over, or move {source} away to train the run anew"
        ) from None
    if old is None:
        return False
    keys = [k for k in settings if not (k == "d" and settings[k] is None)]
    return not differences(old, settings, keys, ignored=NOT_COMPARED)


def same_run_elsewhere(
    spec: RunSpec, profile: Profile, results_dir: str | Path, data_dir: str | Path
) -> Reusable | None:
    """The same run as ``spec`` under one of ``profile.reuse`` (the first one listed
    wins), while ``spec``'s own folder is empty; else None."""
    target = spec.folder(results_dir)
    if not profile.reuse or (target.exists() and any(target.iterdir())):
        return None
    settings = None
    for other in profile.reuse:
        source = run_folder(
            results_dir, other, spec.task, spec.architecture, spec.phase, spec.index
        )
        if not (source / "config.json").is_file():
            continue
        settings = settings or run_settings(spec, profile, data_dir)
        if same_run(source, settings):
            name = f"{other}/{spec.task}/{spec.architecture}/{spec.phase}-{spec.index}"
            metrics = read_metrics(source)
            if metrics is not None:  # a source whose records contradict: named, not copied
                check_records_agree(source, metrics)
            return Reusable(spec, source, name, metrics is not None)
    return None


def reusable_runs(
    profile: Profile, results_dir: str | Path, data_dir: str | Path, pairs=None
) -> list[Reusable]:
    """The search trials of ``pairs`` (default: all) that ``same_run_elsewhere`` finds,
    and the final runs of pairs whose search is finished here (final runs of two profiles
    are the same run only where both selected the same setting)."""
    found = []
    for task, architecture in pairs or profile.pairs:
        specs = search_specs(profile, task, architecture)
        searched = [read_metrics(s.folder(results_dir)) for s in specs]
        if profile.search_trials == 0:
            setting = (profile.final_learning_rate, profile.final_batch_tokens)
        elif None not in searched and (best := select_best(searched)) is not None:
            setting = (best["learning_rate"], best["batch_tokens"])
        else:
            setting = None
        if setting is not None:
            specs += final_specs(profile, task, architecture, *setting)
        found += [r for s in specs if (r := same_run_elsewhere(s, profile, results_dir, data_dir))]
    return found


def take_over(run: Reusable, profile: Profile, results_dir: str | Path) -> Path:
    """Copy ``run.source``'s records (and resume files) into the planned run's folder,
    with this profile's name and ``reused_from``; returns the folder. The folder is
    written in full or not at all (a copy beside it, renamed into place)."""
    target = run.spec.folder(results_dir)
    partial = target.with_name(target.name + ".reusing")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in (*RECORDS, *RESUME_FILES):
        if (run.source / name).is_file():
            shutil.copy2(run.source / name, partial / name)
    for name in ("config.json", "metrics.json"):
        try:
            record = read_json_record(run.source / name)
        except DamagedRecord as e:
            shutil.rmtree(partial, ignore_errors=True)
            raise FruitError(f"{e}: cannot take over {run.source_name}") from None
        if record is None:
            continue
        record.update(profile=profile.name, reused_from=run.source_name)
        atomic_write_json(partial / name, record)
    if target.exists():  # an empty folder (reusable_runs takes only those)
        target.rmdir()
    partial.rename(target)
    return target
