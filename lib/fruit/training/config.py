"""The settings of one run (``RunConfig``), how they are completed from a profile, and the
run folder's ``config.json`` (docs/contracts.md §5).

Seeds: ``seed`` names the run; ``parameter_seed`` (initialisation and dropout, through
``torch.manual_seed``) and ``shuffle_seed`` (batching) are derived from it unless given;
``sampling_seed`` (evaluation samples) is 123 by default. All are written to config.json.
Sizes, ``checkpoint_every``, ``max_epochs`` and the data settings left at ``None`` come
from the profile (``fruit.profiles``), exactly as ``fruit run`` sets them.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from fruit import evaluation
from fruit.device import check_device
from fruit.errors import (
    MAX_D,
    MAX_SEED,
    MAX_TARGET_PARAMS,
    FruitError,
    check_integer,
    check_number,
    first_few,
    unknown_choice,
)
from fruit.io import DamagedRecord, atomic_write_json, read_json_record
from fruit.model_options import resolve_options
from fruit.names import ARCHITECTURES, TARGET_PARAMS
from fruit.profiles import (
    DATA_SOURCES,
    PHASES,
    derive_seed,
    is_profile_path,
    load_profile,
    run_folder,
)
from fruit.training.data import SPLIT_FIELDS, UNRECORDED, check_split_size, data_origin

# RunConfig fields that, when None, come from the profile (fruit.profiles)
PROFILE_FIELDS = (
    *SPLIT_FIELDS.values(),
    "checkpoint_every",
    "max_epochs",
    "data_dir",
    "data_seed",
    "data_source",
)


@dataclass(frozen=True)
class RunConfig:
    """Every setting of one run, as given (``None``: "from the profile" or "derived") or,
    once ``resolve_config`` has made it, resolved: every ``None`` filled, every name and
    range checked, ``resolved`` True. A value: it is never changed, only replaced
    (``dataclasses.replace``). A run trains only a resolved one (``fruit.training.Run``),
    and that is what its config.json records."""

    task: str
    architecture: str
    phase: str = "final"
    index: int = 0
    seed: int = 0
    profile: str = "smoke"  # a shipped profile's name or the path of a .toml (fruit.profiles)
    learning_rate: float = 3e-4
    batch_tokens: int = 1024
    # sizes (None: the profile's); a split's first N lines are used
    train_size: int | None = None
    dev_size: int | None = None
    test_size: int | None = None
    gen_size: int | None = None
    checkpoint_every: int | None = None
    max_epochs: int | None = None
    # model
    target_params: int = TARGET_PARAMS
    d: int | None = None
    model_options: dict = field(default_factory=dict)
    # data and device (None: data/<profile>, derive_seed(profile.data_seed, task))
    data_dir: str | None = None
    generate_data: bool = False
    data_seed: int | None = None
    data_source: str | None = None  # "generated" or "published" dev/test/gen (fruit.profiles)
    device: str = "auto"
    # seeds (None: derived from ``seed``)
    parameter_seed: int | None = None
    shuffle_seed: int | None = None
    sampling_seed: int = evaluation.SAMPLING_SEED
    # optimisation (docs/paper.md §11)
    clip_norm: float = 10.0
    lr_patience: int = 1  # PyTorch's patience; rau's --learning-rate-patience 2
    lr_factor: float = 0.5
    early_stop_patience: int = 3
    # evaluation (docs/paper.md §13)
    num_samples: int = evaluation.NUM_SAMPLES
    eval_batch_tokens: int = evaluation.EVAL_BATCH_TOKENS
    sample_prompt_tokens: int = evaluation.SAMPLE_PROMPT_TOKENS
    partial_on_test: bool = True
    # set by resolve_config only; not a setting (config.json does not record it)
    resolved: bool = field(default=False, compare=False, repr=False)

    @classmethod
    def from_parameters(cls, parameters) -> RunConfig:
        """A config from a mapping (papermill parameters, a profile's ``[training]``):
        every key that names a field is used, converted to the field's type (None stays
        None; a value that is not of that type, e.g. ``index="abc"``, is a FruitError
        naming the parameter); other keys are ignored."""
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in parameters and f.name != "resolved":
                kind = str(f.type).split(" | ")[0]
                values[f.name] = _cast(f.name, kind, parameters[f.name])
        return cls(**values)


_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def _cast(name: str, kind: str, value):
    """``value`` as a field of type ``kind`` ("int", "float", "bool", "str", "dict")."""
    if value is None:
        return None
    text = value.strip().lower() if isinstance(value, str) else None
    if kind == "int":
        try:
            value = int(text) if text is not None else value
        except ValueError:
            pass
        return check_integer(name, value)
    if kind == "float":
        try:
            value = float(text) if text is not None else value
        except ValueError:
            pass
        if isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
            raise FruitError(f"{name} must be a number, not {value!r}")
        return float(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if text in _TRUE or text in _FALSE or value in (0, 1):
            return text in _TRUE if text is not None else bool(value)
        raise FruitError(f"{name} must be true or false, not {value!r}")
    if kind == "dict":
        if not isinstance(value, dict):
            raise FruitError(f"{name} must be a table of options, not {value!r}")
        return dict(value)
    return str(value)


def check_ranges(c: RunConfig) -> None:
    """Every numeric setting of a completed config within its valid range (one-line
    FruitError naming the setting, the range and the value), before anything is read,
    built or written."""
    for name in ("seed", "parameter_seed", "shuffle_seed", "sampling_seed", "data_seed"):
        check_integer(name, getattr(c, name), 0, MAX_SEED)
    check_integer("index", c.index, 0)
    for split, name in SPLIT_FIELDS.items():
        check_split_size(split, getattr(c, name))
    for name in ("batch_tokens", "checkpoint_every", "max_epochs"):
        check_integer(name, getattr(c, name), 1)
    for name in ("eval_batch_tokens", "sample_prompt_tokens", "early_stop_patience"):
        check_integer(name, getattr(c, name), 1)
    check_integer("lr_patience", c.lr_patience, 0)
    check_integer("num_samples", c.num_samples, 0)
    check_integer("target_params", c.target_params, 1, MAX_TARGET_PARAMS)
    if c.d is not None:
        check_integer("d", c.d, 1, MAX_D)
    check_number("learning_rate", c.learning_rate, above=0)
    check_number("clip_norm", c.clip_norm, above=0)
    check_number("lr_factor", c.lr_factor, above=0, below=1)  # PyTorch's plateau rule
    resolve_options(c.model_options)  # names and values checked; config.json keeps the overrides


def resolve_config(config: RunConfig) -> RunConfig:
    """The resolved config: names checked and every ``None`` filled from the profile or
    the seed; a resolved one is returned as it is, so resolving happens once, at the edge
    (``fruit train``, the train notebook's parameters, ``fruit run``'s plan).

    Sizes, ``checkpoint_every``, ``max_epochs`` (of this phase and architecture),
    ``data_dir`` and ``data_seed`` come from ``fruit.profiles.load_profile(config.profile)``
    exactly as ``fruit run`` sets them; explicit fields win. A profile given as a path is
    replaced by its name.
    """
    from fruit.tasks import get_task

    if config.resolved:
        return config
    get_task(config.task)  # FruitError listing the tasks
    if config.architecture not in ARCHITECTURES:
        raise unknown_choice("architecture", config.architecture, ARCHITECTURES)
    if config.phase not in PHASES:
        raise unknown_choice("phase", config.phase, PHASES)
    filled = {"model_options": dict(config.model_options)}
    missing = [name for name in PROFILE_FIELDS if getattr(config, name) is None]
    if missing or is_profile_path(config.profile):
        # the profile file is read only when it has something to give (or names a file):
        # a run whose every size is explicit (e.g. from fruit run) may carry any name
        profile = load_profile(config.profile)  # FruitError listing the shipped profiles
        settings = profile.run_settings(config.phase, config.architecture)
        settings["data_dir"] = str(Path("data") / profile.name)
        settings["data_seed"] = profile.task_data_seed(config.task)
        settings["data_source"] = profile.data_source
        filled.update({name: settings[name] for name in missing})
        filled["profile"] = profile.name  # a path becomes the name its results go under
    if config.parameter_seed is None:
        filled["parameter_seed"] = derive_seed(config.seed, "parameters")
    if config.shuffle_seed is None:
        filled["shuffle_seed"] = derive_seed(config.seed, "shuffle")
    c = dataclasses.replace(config, **filled)
    if c.data_source not in DATA_SOURCES:
        raise unknown_choice("data_source", c.data_source, DATA_SOURCES)
    check_ranges(c)
    device = check_device(c.device)  # before any data is read or generated
    return dataclasses.replace(c, data_dir=str(c.data_dir), device=device, resolved=True)


def run_dir_for(output_dir, config: RunConfig) -> Path:
    """``OUT/runs/<profile>/<task>/<architecture>/<phase>-<index>`` (docs/contracts.md §5)."""
    c = config
    return run_folder(output_dir, c.profile, c.task, c.architecture, c.phase, c.index)


def evaluation_settings(config: RunConfig) -> dict:
    """The keyword arguments of ``fruit.evaluation.evaluate`` that a run's config sets."""
    return {
        "num_samples": config.num_samples,
        "sampling_seed": config.sampling_seed,
        "batch_tokens": config.eval_batch_tokens,
        "prompt_tokens": config.sample_prompt_tokens,
        "partial_on_test": config.partial_on_test,
    }


# config.json keys that say where or how a run executes, not what it computes: they may
# differ between the attempts at one run
NOT_SETTINGS = frozenset({"device", "versions", "provenance", "generate_data"})
# metrics.json keys that name a finished run's settings (for folders without config.json)
METRICS_SETTINGS = (
    "task",
    "architecture",
    "phase",
    "index",
    "seed",
    "profile",
    "learning_rate",
    "batch_tokens",
)


def read_config(run_dir: Path) -> dict | None:
    """A run folder's ``config.json``; None when absent, ``DamagedRecord`` when damaged."""
    return read_json_record(Path(run_dir) / "config.json")


def settings_record(config: RunConfig) -> dict:
    """The settings config.json records for a resolved config (before the model is built)."""
    record = dataclasses.asdict(config)
    del record["resolved"]
    record["trial"] = config.index  # docs/contracts.md §5 calls the index "trial" here
    return record


def differences(old: dict, record: dict, keys=None, ignored=frozenset()) -> list[str]:
    """``"name: OLD there, NEW here"`` for every setting of ``record`` (or only ``keys``)
    that ``old`` records otherwise (``NOT_SETTINGS`` and ``ignored`` are never compared)."""
    changed = []
    for key in sorted(record if keys is None else keys):
        if key in NOT_SETTINGS or key in ignored:
            continue
        new = _json_roundtrip(record[key])
        if key not in old or old[key] != new:
            there = _short(old[key]) if key in old else "absent"
            changed.append(f"{key}: {there} there, {_short(new)} here")
    return changed


def refuse_other_settings(run_dir: Path, changed: list[str], finished: bool) -> FruitError:
    what = "a finished run" if finished else "a run"
    return FruitError(
        f"{run_dir} holds {what} with other settings ({'; '.join(first_few(changed))}); "
        "use another run folder (--run-dir or --output-dir) or delete that one"
    )


def write_or_check_config(run_dir: Path, record: dict, ignored=frozenset()) -> None:
    """Write ``config.json``, or, when the folder has one, refuse a run whose settings
    differ from it (where it runs -- device, versions, provenance -- may differ, and
    the settings named in ``ignored``). A damaged config.json raises ``DamagedRecord``
    (the caller decides: an unfinished run starts again, ``fruit.training.resume``)."""
    old = read_config(run_dir)
    if old is None:
        atomic_write_json(Path(run_dir) / "config.json", record)
        return
    changed = differences(old, record, ignored=ignored)
    if changed:
        raise refuse_other_settings(run_dir, changed, finished=False)


def check_finished_settings(config: RunConfig, run_dir: Path, metrics: dict) -> None:
    """A finished folder holds *this* run: a resolved ``config`` whose settings differ
    from the folder's config.json (or, without one, from its metrics.json) is refused,
    naming each difference, as for an unfinished folder. ``d`` is compared only when
    given (None: chosen from ``target_params``, which is compared)."""
    run_dir = Path(run_dir)
    record = settings_record(config)
    origin = data_origin(config.data_dir, config.task)  # what config.json records of it
    if origin["data_source"] == UNRECORDED:  # no data.json (now): its origin cannot be told
        record = {k: v for k, v in record.items() if k not in origin}
    else:
        record.update(origin)
    try:
        old = read_config(run_dir)
    except DamagedRecord as e:
        raise FruitError(
            f"{e}: it records the finished run's settings; restore it, or delete "
            f"{run_dir} to train that run again"
        ) from None
    if old is not None:
        keys = [k for k in record if not (k == "d" and config.d is None)]
        changed = differences(old, record, keys)
    else:
        changed = differences(metrics, record, [k for k in METRICS_SETTINGS if k in metrics])
    if changed:
        raise refuse_other_settings(run_dir, changed, finished=True)


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_roundtrip(value):
    return json.loads(json.dumps(value))
