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
from fruit.errors import FruitError, unknown_choice
from fruit.io import atomic_write_json
from fruit.names import ARCHITECTURES, TARGET_PARAMS
from fruit.profiles import (
    DATA_SOURCES,
    PHASES,
    derive_seed,
    is_profile_path,
    load_profile,
    run_folder,
)
from fruit.training.data import SPLIT_FIELDS

# RunConfig fields that, when None, come from the profile (fruit.profiles)
PROFILE_FIELDS = (
    *SPLIT_FIELDS.values(),
    "checkpoint_every",
    "max_epochs",
    "data_dir",
    "data_seed",
    "data_source",
)


@dataclass
class RunConfig:
    """Every setting of one run. ``None`` means "from the profile" or "derived"."""

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

    @classmethod
    def from_parameters(cls, parameters) -> RunConfig:
        """A config from a mapping (papermill parameters, a profile's ``[training]``):
        every key that names a field is used, converted to the field's type (None stays
        None); other keys are ignored."""
        casts = {"int": int, "float": float, "bool": bool, "str": str, "dict": dict}
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in parameters:
                value = parameters[f.name]
                cast = casts[str(f.type).split(" | ")[0]]
                values[f.name] = value if value is None else cast(value)
        return cls(**values)


def resolve_config(config: RunConfig) -> RunConfig:
    """Check names and fill every ``None`` from the profile or the seed.

    Sizes, ``checkpoint_every``, ``max_epochs`` (of this phase and architecture),
    ``data_dir`` and ``data_seed`` come from ``fruit.profiles.load_profile(config.profile)``
    exactly as ``fruit run`` sets them; explicit fields win. A profile given as a path is
    replaced by its name.
    """
    from fruit.tasks import get_task

    get_task(config.task)  # FruitError listing the tasks
    if config.architecture not in ARCHITECTURES:
        raise unknown_choice("architecture", config.architecture, ARCHITECTURES)
    if config.phase not in PHASES:
        raise unknown_choice("phase", config.phase, PHASES)
    c = dataclasses.replace(config, model_options=dict(config.model_options))
    missing = [name for name in PROFILE_FIELDS if getattr(c, name) is None]
    if missing or is_profile_path(c.profile):
        # the profile file is read only when it has something to give (or names a file):
        # a run whose every size is explicit (e.g. from fruit run) may carry any name
        profile = load_profile(c.profile)  # FruitError listing the shipped profiles
        settings = profile.run_settings(c.phase, c.architecture)
        settings["data_dir"] = str(Path("data") / profile.name)
        settings["data_seed"] = profile.task_data_seed(c.task)
        settings["data_source"] = profile.data_source
        for name in missing:
            setattr(c, name, settings[name])
        c.profile = profile.name  # a path becomes the name that its results go under
    if c.parameter_seed is None:
        c.parameter_seed = derive_seed(c.seed, "parameters")
    if c.shuffle_seed is None:
        c.shuffle_seed = derive_seed(c.seed, "shuffle")
    c.data_dir = str(c.data_dir)
    if c.data_source not in DATA_SOURCES:
        raise unknown_choice("data_source", c.data_source, DATA_SOURCES)
    for name in ("batch_tokens", "checkpoint_every", "max_epochs", "train_size"):
        if int(getattr(c, name)) < 1:
            raise FruitError(f"{name} must be a positive integer, got {getattr(c, name)!r}")
    if not c.learning_rate > 0:
        raise FruitError(f"learning_rate must be positive, got {c.learning_rate!r}")
    return c


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


def write_or_check_config(run_dir: Path, record: dict) -> None:
    """Write ``config.json``, or, when the folder has one, refuse a run whose settings
    differ from it (where it runs -- device, versions, provenance -- may differ)."""
    path = run_dir / "config.json"
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        ignore = {"device", "versions", "provenance"}  # where, not what
        changed = sorted(
            k for k in record if k not in ignore and old.get(k) != _json_roundtrip(record[k])
        )
        if changed:
            raise FruitError(
                f"{run_dir} holds a run with different settings ({', '.join(changed)}); "
                "use another output folder or delete it"
            )
        return
    atomic_write_json(path, record)


def _json_roundtrip(value):
    return json.loads(json.dumps(value))
