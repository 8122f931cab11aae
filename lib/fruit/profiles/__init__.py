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

import dataclasses
import hashlib
import math
from importlib import resources
from pathlib import Path
from typing import Any

from fruit.errors import (
    MAX_D,
    MAX_SEED,
    MAX_TARGET_PARAMS,
    FruitError,
    check_integer,
    check_number,
    unknown_choice,
)
from fruit.model_options import resolve_options

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None  # type: ignore[assignment]

PHASES = ("search", "final")
SPLITS = ("train", "dev", "test", "gen")
# docs/paper.md §11/§12.1: the paper validates every 80,000 training examples. A profile
# without [training] checkpoint_every gets this.
PAPER_CHECKPOINT_EVERY = 80_000

# Keys a profile may hold, per table; anything else is a typo worth an error.
_TOP_KEYS = {
    "name",
    "description",
    "reduced",
    "seed",
    "tasks",
    "architectures",
    "task_architectures",  # a table: task -> the architectures it trains (default: all)
    "reuse",  # other profiles whose identical runs this one takes over (experiments.reuse)
}
# Where a profile's dev/test/gen come from: made by our generators, or the published files
# (``fruit.tasks.official``) with a generated train split that avoids their sentences.
DATA_SOURCES = ("generated", "published")
_TABLE_KEYS = {
    "data": {"seed", "source", *SPLITS},
    "search": {"trials", "max_epochs", "batch_tokens", "learning_rate"},
    "final": {"runs", "max_epochs", "batch_tokens", "learning_rate"},
    "training": {  # fruit.training.RunConfig fields that are not set per run
        "checkpoint_every",
        "target_params",
        "d",
        "model_options",
        "sampling_seed",
        "clip_norm",
        "lr_patience",
        "lr_factor",
        "early_stop_patience",
        "num_samples",
        "eval_batch_tokens",
        "sample_prompt_tokens",
        "partial_on_test",
    },
}


@dataclasses.dataclass(frozen=True)
class Profile:
    """One experiment profile, validated. See ``fruit/profiles/paper.toml``."""

    name: str
    description: str
    reduced: bool
    seed: int
    tasks: tuple[str, ...]
    architectures: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]  # the (task, architecture) pairs it trains, in order
    data_source: str  # one of DATA_SOURCES
    data_seed: int
    sizes: dict[str, int]  # split -> number of examples
    search_trials: int
    search_max_epochs: dict[str, int]  # architecture (or "default") -> max epochs
    batch_tokens_range: tuple[int, int]
    learning_rate_range: tuple[float, float]
    final_runs: int
    final_max_epochs: dict[str, int]
    # Fixed setting for the final runs when search_trials == 0.
    final_batch_tokens: int | None
    final_learning_rate: float | None
    training: dict[str, Any]
    source: str  # the file it came from
    # profiles whose records of the very same runs are taken over (fruit.experiments.reuse)
    reuse: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def max_epochs(self, phase: str, architecture: str) -> int:
        """The phase's epoch limit for ``architecture`` (its own entry, else "default")."""
        if phase not in PHASES:
            raise unknown_choice("phase", phase, PHASES)
        table = self.search_max_epochs if phase == "search" else self.final_max_epochs
        epochs = table.get(architecture, table.get("default"))
        if epochs is None:  # a table without "default" covers only the profile's own
            raise FruitError(
                f"profile {self.name} ({self.source}) gives no {phase} max_epochs for "
                f"{architecture} (only {', '.join(sorted(table))}); give max_epochs explicitly"
            )
        return epochs

    @property
    def checkpoint_every(self) -> int:
        """Training examples between checkpoints: ``[training] checkpoint_every``."""
        return self.training.get("checkpoint_every", PAPER_CHECKPOINT_EVERY)

    def task_data_seed(self, task: str) -> int:
        """The seed ``fruit run`` and ``fruit train`` generate ``task``'s data with."""
        return derive_seed(self.data_seed, task)

    def run_settings(self, phase: str, architecture: str) -> dict[str, int]:
        """The sizes of one run as ``fruit.training.RunConfig`` field names."""
        settings = {f"{split}_size": n for split, n in self.sizes.items()}
        settings["checkpoint_every"] = self.checkpoint_every
        settings["max_epochs"] = self.max_epochs(phase, architecture)
        return settings


def derive_seed(*parts: Any) -> int:
    """A 32-bit seed from any parts, e.g. (profile seed, task, architecture, phase, index)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")


def run_folder(results_dir, profile: str, task: str, architecture: str, phase: str, index: int):
    """``RESULTS/runs/<profile>/<task>/<architecture>/<phase>-<index>`` (docs/contracts.md §5)."""
    return Path(results_dir) / "runs" / profile / task / architecture / f"{phase}-{index}"


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


def parse_profile(raw: dict[str, Any], *, default_name: str, source: str) -> Profile:
    """Validate a profile's TOML tables and fill in the defaults."""

    def fail(message: str) -> FruitError:
        return FruitError(f"profile {source}: {message}")

    for key in raw:
        if key not in _TOP_KEYS and key not in _TABLE_KEYS:
            raise fail(str(unknown_choice("key", key, _TOP_KEYS | set(_TABLE_KEYS))))
    for table, allowed in _TABLE_KEYS.items():
        value = raw.get(table, {})
        if not isinstance(value, dict):
            raise fail(f"[{table}] must be a table")
        for key in value:
            if key not in allowed:
                raise fail(str(unknown_choice(f"key in [{table}]", key, allowed)))

    name = str(raw.get("name", default_name))
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise fail(f"bad profile name {name!r}: it names a results folder")
    tasks = _names(raw, "tasks", fail, _known_tasks())
    architectures = _names(raw, "architectures", fail, _known_architectures())
    seed = _integer(raw.get("seed", 0), "seed", fail)

    pairs = _pairs(raw.get("task_architectures", {}), tasks, architectures, fail)

    data = raw.get("data", {})
    data_source = data.get("source", "generated")
    if data_source not in DATA_SOURCES:
        raise fail(str(unknown_choice("data.source", data_source, DATA_SOURCES)))
    sizes = {}
    for split in SPLITS:
        if split not in data:
            raise fail(f"[data] needs {split} = <number of examples>")
        sizes[split] = _integer(data[split], f"data.{split}", fail, minimum=1)
    data_seed = _integer(data.get("seed", derive_seed(seed, "data")), "data.seed", fail, minimum=0)

    search = raw.get("search", {})
    trials = _integer(search.get("trials", 0), "search.trials", fail, minimum=0)
    b_range = search.get("batch_tokens", (512, 2048))
    lr_range = search.get("learning_rate", (1e-5, 1e-3))
    b_range = tuple(b_range) if isinstance(b_range, (list, tuple)) else ()
    lr_range = tuple(lr_range) if isinstance(lr_range, (list, tuple)) else ()
    if (
        len(b_range) != 2
        or not all(isinstance(b, int) for b in b_range)
        or not 0 < b_range[0] <= b_range[1]
    ):
        raise fail("search.batch_tokens must be [low, high], integers with 0 < low <= high")
    if len(lr_range) != 2 or not all(_finite(x) for x in lr_range):
        raise fail("search.learning_rate must be [low, high], finite numbers")
    if not 0 < float(lr_range[0]) <= float(lr_range[1]):
        raise fail("search.learning_rate must be [low, high] with 0 < low <= high")

    if "final" not in raw:  # its defaults (5 runs of up to 1000 epochs) are no small thing
        raise fail(
            "[final] is missing: give runs = <final runs per pair> and max_epochs = <at most "
            "that many epochs each> (the paper: runs = 5, max_epochs = 1000)"
        )
    final = raw["final"]
    fixed_b, fixed_lr = final.get("batch_tokens"), final.get("learning_rate")
    if trials == 0 and (fixed_b is None or fixed_lr is None):
        raise fail("with search.trials = 0, [final] needs batch_tokens and learning_rate")
    if trials > 0 and (fixed_b is not None or fixed_lr is not None):
        raise fail("[final] batch_tokens/learning_rate are only for search.trials = 0")
    if fixed_lr is not None and not (_finite(fixed_lr) and float(fixed_lr) > 0):
        raise fail(f"final.learning_rate must be a finite number above 0, not {fixed_lr!r}")

    training = dict(raw.get("training", {}))
    _check_training(training, fail)
    reuse = raw.get("reuse", [])
    if not isinstance(reuse, list) or not all(isinstance(r, str) and r for r in reuse):
        raise fail('reuse must be a list of profile names, e.g. reuse = ["claims"]')
    if name in reuse:
        raise fail(f"reuse names the profile itself ({name!r})")

    return Profile(
        name=name,
        description=str(raw.get("description", "")),
        reduced=_boolean(raw.get("reduced", True), "reduced", fail),
        seed=seed,
        tasks=tasks,
        architectures=architectures,
        pairs=pairs,
        data_source=data_source,
        data_seed=data_seed,
        sizes=sizes,
        search_trials=trials,
        search_max_epochs=_epochs(search.get("max_epochs", 5), "search", architectures, fail),
        batch_tokens_range=(int(b_range[0]), int(b_range[1])),
        learning_rate_range=(float(lr_range[0]), float(lr_range[1])),
        final_runs=_integer(final.get("runs", 5), "final.runs", fail, minimum=1),
        final_max_epochs=_epochs(final.get("max_epochs", 1000), "final", architectures, fail),
        final_batch_tokens=None
        if fixed_b is None
        else _integer(fixed_b, "final.batch_tokens", fail, 1),
        final_learning_rate=None if fixed_lr is None else float(fixed_lr),
        training=training,
        source=source,
        reuse=tuple(reuse),
    )


# [training] settings and their ranges, as fruit.training.config.check_ranges checks them
# in each run: here once, so that `fruit run` (and --dry-run) refuses a bad profile before
# any run starts; model_options as fruit.models checks them when it builds a model.
_TRAINING_INTEGERS = {
    "checkpoint_every": (1, None), "target_params": (1, MAX_TARGET_PARAMS), "d": (1, MAX_D),
    "sampling_seed": (0, MAX_SEED), "lr_patience": (0, None), "early_stop_patience": (1, None),
    "num_samples": (0, None), "eval_batch_tokens": (1, None), "sample_prompt_tokens": (1, None),
}  # fmt: skip


def _check_training(training: dict, fail) -> None:
    for key, (low, high) in _TRAINING_INTEGERS.items():
        if key in training:
            try:
                check_integer(f"training.{key}", training[key], low, high)
            except FruitError as e:
                raise fail(str(e)) from None
    try:
        if "clip_norm" in training:
            check_number("training.clip_norm", training["clip_norm"], above=0)
        if "lr_factor" in training:
            check_number("training.lr_factor", training["lr_factor"], above=0, below=1)
    except FruitError as e:
        raise fail(str(e)) from None
    if "partial_on_test" in training:
        _boolean(training["partial_on_test"], "training.partial_on_test", fail)
    if not isinstance(training.get("model_options", {}), dict):
        raise fail("training.model_options must be a table, e.g. { sup_size = 50 }")
    try:
        resolve_options(training.get("model_options", {}))
    except FruitError as e:
        raise fail(f"training.model_options: {str(e).removeprefix('model option ')}") from None


def _boolean(value, what, fail) -> bool:
    if not isinstance(value, bool):
        raise fail(f"{what} must be true or false, not {value!r}")
    return value


def _integer(value, what, fail, minimum=None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"{what} must be an integer, not {value!r}")
    if minimum is not None and value < minimum:
        raise fail(f"{what} must be at least {minimum}, not {value}")
    return value


def _epochs(value, table, architectures, fail) -> dict[str, int]:
    """``max_epochs = 5`` or, per architecture, ``max_epochs = { default = 5, "Tf+Nd" = 2 }``."""
    what = f"{table}.max_epochs"
    if not isinstance(value, dict):
        return {"default": _integer(value, what, fail, minimum=1)}
    known = _known_architectures()
    for key in value:
        if key != "default" and key not in known:
            raise fail(str(unknown_choice(f"key in {what}", key, ["default", *known])))
    if "default" not in value and not set(architectures) <= set(value):
        raise fail(f"{what} needs a 'default' or an entry for every architecture")
    return {k: _integer(v, f"{what}.{k}", fail, minimum=1) for k, v in value.items()}


def _pairs(table, tasks, architectures, fail) -> tuple[tuple[str, str], ...]:
    """(task, architecture) pairs: every architecture for every task, except where
    ``[task_architectures]`` gives a task its own list (a subset of ``architectures``)."""
    if not isinstance(table, dict):
        raise fail("[task_architectures] must be a table: task = [architectures]")
    for task, chosen in table.items():
        if task not in tasks:
            raise fail(str(unknown_choice("task in [task_architectures]", task, tasks)))
        if (
            not isinstance(chosen, list)
            or not chosen
            or not all(isinstance(a, str) for a in chosen)
        ):
            raise fail(f"task_architectures.{task} must be a non-empty list of architectures")
        for a in chosen:
            if a not in architectures:
                raise fail(
                    str(
                        unknown_choice(
                            f"architecture in task_architectures.{task}", a, architectures
                        )
                    )
                )
    pairs = [(t, a) for t in tasks for a in architectures if a in table.get(t, architectures)]
    unused = [a for a in architectures if all(a != b for _, b in pairs)]
    if unused:
        raise fail(f"architecture(s) {', '.join(unused)} listed but trained on no task")
    return tuple(pairs)


def _names(raw, key, fail, known) -> tuple[str, ...]:
    values = raw.get(key)
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise fail(f"{key} must be a non-empty list of names")
    if len(set(values)) != len(values):
        raise fail(f"{key} lists a name twice")
    for v in values:
        if v not in known:
            raise fail(str(unknown_choice(key[:-1], v, known)))
    return tuple(values)


def _known_tasks() -> set[str]:
    from fruit.tasks import TASKS

    return set(TASKS)


def _known_architectures() -> set[str]:
    from fruit.names import ARCHITECTURES

    return set(ARCHITECTURES)


def _finite(x) -> bool:
    """A number (not a bool or a string) that is neither nan nor infinite."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
