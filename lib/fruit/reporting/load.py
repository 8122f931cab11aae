"""Run folders -> tables: the final runs of a profile read and aggregated, one ``Table`` a
task (``fruit.reporting.tables``), and the paper's own tables from its transcribed
numbers."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from fruit.errors import FruitError
from fruit.profiles import Profile, is_profile_path, load_profile
from fruit.reporting.runs import ARCHITECTURE_ORDER, PAPER_TASK_ORDER, load_runs
from fruit.reporting.tables import Table, aggregate, paper_table, tasks_with_runs


def profile_settings(profile: str):
    """The shipped or file profile of that name (``fruit.profiles.Profile``), or None if it
    cannot be read (reporting then works from the run folders alone)."""
    try:
        return load_profile(profile)
    except FruitError:
        return None


class ProfileRef(NamedTuple):
    """A notebook's ``profile`` parameter, resolved once."""

    source: str  # what the loaders take: a shipped profile's name, or a profile file's path
    name: str  # the folder of its runs and outputs (``<dir>/<name>/``)
    settings: Profile | None  # None: no shipped profile of that name


def resolve_profile(profile: str, root: str | Path) -> ProfileRef:
    """``profile`` as a notebook's parameters give it: a shipped profile's name, or the path
    of a profile file, relative to the repository ``root`` (a file's runs and outputs are
    under the name it declares). A file that cannot be read raises ``FruitError``; a name
    that is no shipped profile is kept as it is (reporting then works from the run folders
    alone, as ``profile_settings`` does)."""
    if is_profile_path(profile):
        source = str(Path(root) / profile)
        settings = load_profile(source)
        return ProfileRef(source, settings.name, settings)
    return ProfileRef(profile, profile, profile_settings(profile))


def load_tables(
    results_dir: str | Path, profile: str, expected_runs: int | None = None
) -> dict[str, Table]:
    """task -> Table aggregated from the profile's final runs, for every task that has runs.

    Rows: the architectures the profile plans for the task (all fifteen when the profile
    cannot be read), then any others that have runs. ``expected_runs`` (the "of N" in each
    row's run count) defaults to the profile's number of final runs, else to the largest
    number of run folders of any architecture. ``profile``: a profile's name, or the path
    of a profile file (its runs are under its name).
    """
    settings = profile_settings(profile)
    name = settings.name if settings is not None else profile
    runs = load_runs(results_dir, name, phase="final")
    return tables_from_runs(runs, name, expected_runs, settings)


def tables_from_runs(
    runs, profile: str, expected_runs: int | None = None, settings=None
) -> dict[str, Table]:
    """``load_tables`` on runs already read (``fruit.reporting.runs.load_runs``);
    ``settings``: the profile (``fruit.profiles.Profile``) when already loaded."""
    settings = settings or profile_settings(profile)
    expected = expected_runs or (settings.final_runs if settings else None)
    tables = {}
    for task in tasks_with_runs(runs):
        planned = ARCHITECTURE_ORDER
        if settings is not None:
            planned = tuple(a for a in ARCHITECTURE_ORDER if (task, a) in settings.pairs)
        tables[task] = aggregate(runs, task, profile, expected, architectures=planned)
        if settings is not None:
            tables[task].reduced = settings.reduced
            tables[task].description = settings.description
    return tables


def paper_tables() -> dict[str, Table]:
    """task -> the paper's table (transcribed numbers and bold flags)."""
    return {t: paper_table(t) for t in PAPER_TASK_ORDER}
