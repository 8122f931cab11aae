"""A profile's TOML tables checked key by key and completed with the defaults
(``parse_profile``); every mistake is one line naming the file and the key."""

from __future__ import annotations

import math
from typing import Any

from fruit.errors import (
    MAX_D,
    MAX_SEED,
    MAX_TARGET_PARAMS,
    FruitError,
    check_integer,
    check_name,
    check_number,
    unknown_choice,
)
from fruit.model_options import resolve_options
from fruit.profiles.profile import DATA_SOURCES, SPLITS, Profile, derive_seed

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
    try:
        check_name("profile", name)
    except FruitError as e:
        raise fail(str(e)) from None
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
