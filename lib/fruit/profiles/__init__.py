"""Experiment profiles: the one source of every profile's sizes (docs/architecture.md §6).

A *profile* is a TOML file: which tasks and architectures, how much data, how many
random-search trials over which ranges, how many final runs of at most how many epochs,
and other training settings (``[training]``: the ``fruit.training.RunConfig`` fields that
are not set per run, e.g. ``checkpoint_every``, ``target_params``). The shipped
ones are the ``*.toml`` files next to this module (``smoke``, ``quick``, ``claims``,
``paper`` and the claims campaign's experiments: ``profile_names()``); a user passes the
path of their own file instead of a name.

Both ``fruit run`` (fruit.experiments) and ``fruit train`` (fruit.training) read their
sizes from here, so a profile name means the same everywhere::

    profile = load_profile("quick")            # or load_profile("path/to/mine.toml")
    profile.run_settings("final", "Tf+Nd")     # train/dev/test/gen sizes, checkpoint_every,
                                               # max_epochs of one run

This module may import fruit.tasks and fruit.names (name checks), never model code,
training or experiments (the import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fruit.errors import FruitError, unknown_choice
from fruit.profiles.parse import _TABLE_KEYS, parse_profile
from fruit.profiles.profile import (
    DATA_SOURCES,
    PAPER_CHECKPOINT_EVERY,
    PHASES,
    SPLITS,
    Profile,
    derive_seed,
    run_folder,
)

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None  # type: ignore[assignment]

__all__ = [
    "DATA_SOURCES",
    "PAPER_CHECKPOINT_EVERY",
    "PHASES",
    "SPLITS",
    "_TABLE_KEYS",
    "Profile",
    "derive_seed",
    "is_profile_path",
    "load_profile",
    "parse_profile",
    "profile_names",
    "run_folder",
]


def profile_names() -> list[str]:
    """Names of the profiles shipped with the package."""
    folder = resources.files(__name__)
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def is_profile_path(name_or_path: str | Path) -> bool:
    """Whether ``name_or_path`` names a user's file rather than a shipped profile."""
    return str(name_or_path).endswith(".toml") or Path(name_or_path).is_file()


def load_profile(name_or_path: str | Path) -> Profile:
    """A shipped profile by name (``smoke``, ``quick``, ``paper``) or a user's TOML file."""
    if is_profile_path(name_or_path):
        path = Path(name_or_path)
        if path.is_dir():
            raise FruitError(f"profile file {str(path)!r} is a folder, not a .toml file")
        if not path.is_file():
            raise FruitError(f"profile file {str(path)!r} does not exist")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise FruitError(f"profile file {str(path)!r} is not UTF-8 text ({e.reason} "
                             f"at byte {e.start})") from None  # fmt: skip
        except OSError as e:
            raise FruitError(f"profile file {str(path)!r}: cannot read ({e.strerror})") from None
        source, default_name = str(path), path.stem
    else:
        name = str(name_or_path)
        resource = resources.files(__name__) / f"{name}.toml"
        if not name or "/" in name or not resource.is_file():
            raise unknown_choice("profile", name, profile_names() + ["PATH.toml"])
        text, source, default_name = (
            resource.read_text("utf-8"),
            f"fruit/profiles/{name}.toml",
            name,
        )
    if tomllib is None:  # pragma: no cover
        raise FruitError("reading profiles needs Python >= 3.11 or the 'tomli' package")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FruitError(f"profile {source}: not valid TOML: {e}") from e
    return parse_profile(raw, default_name=default_name, source=source)
