"""Experiment profiles and the runs they expand into (models.md §12, design.md "Profiles").

A *profile* is a TOML file: which tasks and architectures, how much data, how many
random-search trials over which ranges, how many final runs, and any extra training
settings for ``notebooks/train.ipynb``. The shipped ones live in ``fruit/profiles/``;
a user passes the path of their own file instead of a name.

A profile expands into *run specifications*: (task, architecture, phase, index) with
every seed derived deterministically from the profile seed, so the same profile always
means the same runs. Search runs draw the batch-token budget B and the learning rate
from their own recorded seed; the final runs copy the winning trial's B and learning
rate, choosing the trial with the lowest best validation cross-entropy.

This module is plain Python (no Dask): planning, run-folder status and selection.
Executing the runs is ``fruit.experiments_sweep``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from importlib import resources
from pathlib import Path
from typing import Any

from fruit.errors import FruitError, unknown_choice

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None  # type: ignore[assignment]

PHASES = ("search", "final")
SPLITS = ("train", "dev", "test", "gen")

# Keys a profile may hold, per table; anything else is a typo worth an error.
_TOP_KEYS = {"name", "description", "reduced", "seed", "tasks", "architectures"}
_TABLE_KEYS = {
    "data": {"seed", *SPLITS},
    "search": {"trials", "max_epochs", "batch_tokens", "learning_rate"},
    "final": {"runs", "max_epochs", "batch_tokens", "learning_rate"},
    "training": None,  # free-form: passed to the train notebook unchanged
}


# ---------------------------------------------------------------------------
# Profiles


@dataclasses.dataclass(frozen=True)
class Profile:
    """One experiment profile, validated. See ``fruit/profiles/paper.toml``."""

    name: str
    description: str
    reduced: bool
    seed: int
    tasks: tuple[str, ...]
    architectures: tuple[str, ...]
    data_seed: int
    sizes: dict[str, int]
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

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def max_epochs(self, phase: str, architecture: str) -> int:
        table = self.search_max_epochs if phase == "search" else self.final_max_epochs
        return table.get(architecture, table.get("default"))


def profile_names() -> list[str]:
    """Names of the profiles shipped with the package."""
    folder = resources.files("fruit") / "profiles"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_profile(name_or_path: str | Path) -> Profile:
    """A shipped profile by name (``smoke``, ``quick``, ``paper``) or a user's TOML file."""
    text_path = Path(name_or_path)
    if str(name_or_path).endswith(".toml") or text_path.is_file():
        if not text_path.is_file():
            raise FruitError(f"profile file {str(text_path)!r} does not exist")
        text, source = text_path.read_text(encoding="utf-8"), str(text_path)
    else:
        resource = resources.files("fruit") / "profiles" / f"{name_or_path}.toml"
        if not resource.is_file():
            raise unknown_choice("profile", str(name_or_path), profile_names() + ["PATH.toml"])
        text, source = resource.read_text(encoding="utf-8"), f"fruit/profiles/{name_or_path}.toml"
    if tomllib is None:  # pragma: no cover
        raise FruitError("reading profiles needs Python >= 3.11 or the 'tomli' package")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FruitError(f"profile {source}: not valid TOML: {e}") from e
    default_name = text_path.stem if source == str(text_path) else str(name_or_path)
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
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise fail(str(unknown_choice(f"key in [{table}]", key, allowed)))

    name = str(raw.get("name", default_name))
    if not name or "/" in name or name.startswith("."):
        raise fail(f"bad profile name {name!r}: it names a results folder")
    tasks = _names(raw, "tasks", fail, _known_tasks())
    architectures = _names(raw, "architectures", fail, _known_architectures())
    seed = _integer(raw.get("seed", 0), "seed", fail)

    data = raw.get("data", {})
    sizes = {}
    for split in SPLITS:
        if split not in data:
            raise fail(f"[data] needs {split} = <number of examples>")
        sizes[split] = _integer(data[split], f"data.{split}", fail, minimum=1)
    data_seed = _integer(data.get("seed", derive_seed(seed, "data")), "data.seed", fail)

    search = raw.get("search", {})
    trials = _integer(search.get("trials", 0), "search.trials", fail, minimum=0)
    b_range = tuple(search.get("batch_tokens", (512, 2048)))
    lr_range = tuple(search.get("learning_rate", (1e-5, 1e-3)))
    if (
        len(b_range) != 2
        or not all(isinstance(b, int) for b in b_range)
        or not 0 < b_range[0] <= b_range[1]
    ):
        raise fail("search.batch_tokens must be [low, high], integers with 0 < low <= high")
    if len(lr_range) != 2 or not 0 < float(lr_range[0]) <= float(lr_range[1]):
        raise fail("search.learning_rate must be [low, high] with 0 < low <= high")

    final = raw.get("final", {})
    fixed_b, fixed_lr = final.get("batch_tokens"), final.get("learning_rate")
    if trials == 0 and (fixed_b is None or fixed_lr is None):
        raise fail("with search.trials = 0, [final] needs batch_tokens and learning_rate")
    if trials > 0 and (fixed_b is not None or fixed_lr is not None):
        raise fail("[final] batch_tokens/learning_rate are only for search.trials = 0")

    return Profile(
        name=name,
        description=str(raw.get("description", "")),
        reduced=bool(raw.get("reduced", True)),
        seed=seed,
        tasks=tasks,
        architectures=architectures,
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
        training=dict(raw.get("training", {})),
        source=source,
    )


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
    known = _known_architectures() or set(architectures)  # other architectures: harmless
    for key in value:
        if key != "default" and key not in known:
            raise fail(str(unknown_choice(f"key in {what}", key, ["default", *known])))
    if "default" not in value and not set(architectures) <= set(value):
        raise fail(f"{what} needs a 'default' or an entry for every architecture")
    return {k: _integer(v, f"{what}.{k}", fail, minimum=1) for k, v in value.items()}


def _names(raw, key, fail, known) -> tuple[str, ...]:
    values = raw.get(key)
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise fail(f"{key} must be a non-empty list of names")
    if len(set(values)) != len(values):
        raise fail(f"{key} lists a name twice")
    for v in values:
        if known is not None and v not in known:
            raise fail(str(unknown_choice(key[:-1], v, known)))
    return tuple(values)


def _known_tasks():
    try:
        from fruit.tasks import TASKS
    except ImportError:  # the tasks package is not importable (yet): accept any name
        return None
    return set(TASKS)


def _known_architectures():
    try:
        from fruit.models import ARCHITECTURES
    except ImportError:
        return None
    return set(ARCHITECTURES)


# ---------------------------------------------------------------------------
# Seeds and run specifications


def derive_seed(*parts: Any) -> int:
    """A 32-bit seed from any parts, e.g. (profile seed, task, architecture, phase, index)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything one training run needs; its folder name is ``<phase>-<index>``."""

    profile: str
    task: str
    architecture: str
    phase: str
    index: int
    seed: int
    learning_rate: float
    batch_tokens: int
    max_epochs: int
    draw_seed: int | None = None  # the seed B and the learning rate were drawn from (search)

    @property
    def name(self) -> str:
        return f"{self.task}/{self.architecture}/{self.phase}-{self.index}"

    def folder(self, runs_root: str | Path) -> Path:
        return Path(runs_root) / self.task / self.architecture / f"{self.phase}-{self.index}"

    def parameters(
        self, profile: Profile, *, data_dir, run_dir, results_dir, device: str, threads: int | None
    ) -> dict[str, Any]:
        """The papermill parameters of ``notebooks/train.ipynb`` for this run: the
        profile's ``[training]`` table, the data sizes, then the run's own settings."""
        params = dict(profile.training)
        params.update({f"{split}_size": n for split, n in profile.sizes.items()})
        params.update(
            task=self.task,
            architecture=self.architecture,
            phase=self.phase,
            index=self.index,
            seed=self.seed,
            learning_rate=self.learning_rate,
            batch_tokens=self.batch_tokens,
            max_epochs=self.max_epochs,
            profile=self.profile,
            data_dir=str(data_dir),
            generate_data=False,  # the runner prepared data_dir/<task>/ beforehand
            run_dir=str(run_dir),
            output_dir=str(results_dir),
            device=device,
            threads=threads,
        )
        return params


def draw_search_setting(profile: Profile, task: str, architecture: str, trial: int):
    """(draw seed, B, learning rate) of one search trial: B uniform over the integers of
    the range, the learning rate log-uniform (models.md §12.1)."""
    draw_seed = derive_seed(profile.seed, task, architecture, "search-draw", trial)
    rng = random.Random(draw_seed)
    low, high = profile.batch_tokens_range
    batch_tokens = rng.randint(low, high)
    lr_low, lr_high = profile.learning_rate_range
    learning_rate = math.exp(rng.uniform(math.log(lr_low), math.log(lr_high)))
    return draw_seed, batch_tokens, learning_rate


def search_specs(profile: Profile, task: str, architecture: str) -> list[RunSpec]:
    specs = []
    for trial in range(profile.search_trials):
        draw_seed, batch_tokens, learning_rate = draw_search_setting(
            profile, task, architecture, trial
        )
        specs.append(
            RunSpec(
                profile=profile.name,
                task=task,
                architecture=architecture,
                phase="search",
                index=trial,
                seed=derive_seed(profile.seed, task, architecture, "search", trial),
                learning_rate=learning_rate,
                batch_tokens=batch_tokens,
                max_epochs=profile.max_epochs("search", architecture),
                draw_seed=draw_seed,
            )
        )
    return specs


def final_specs(
    profile: Profile, task: str, architecture: str, learning_rate: float, batch_tokens: int
) -> list[RunSpec]:
    return [
        RunSpec(
            profile=profile.name,
            task=task,
            architecture=architecture,
            phase="final",
            index=i,
            seed=derive_seed(profile.seed, task, architecture, "final", i),
            learning_rate=learning_rate,
            batch_tokens=batch_tokens,
            max_epochs=profile.max_epochs("final", architecture),
        )
        for i in range(profile.final_runs)
    ]


def groups(profile: Profile) -> list[tuple[str, str]]:
    """The (task, architecture) pairs, in profile order."""
    return [(t, a) for t in profile.tasks for a in profile.architectures]


def plan(profile: Profile) -> dict[str, Any]:
    """The whole sweep as data (recorded in ``plan.json``): seeds and search draws."""
    return {
        "profile": profile.as_dict(),
        "search": [
            dataclasses.asdict(s) for t, a in groups(profile) for s in search_specs(profile, t, a)
        ],
        "final_seeds": {
            f"{t}/{a}": [
                derive_seed(profile.seed, t, a, "final", i) for i in range(profile.final_runs)
            ]
            for t, a in groups(profile)
        },
    }


# ---------------------------------------------------------------------------
# Run folders and selection


def read_metrics(folder: str | Path) -> dict[str, Any] | None:
    """The run's ``metrics.json``, or None while the run is unfinished (contracts.md §4)."""
    path = Path(folder) / "metrics.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:  # never written by fruit (atomic)
        raise FruitError(f"{path} is not valid JSON ({e}); remove it to rerun that run") from e


def check_metrics_match(spec: RunSpec, metrics: dict[str, Any], folder: Path) -> None:
    """A finished folder must hold *this* run, not one from an edited profile."""
    mismatched = [
        key
        for key in ("task", "architecture", "phase", "index", "seed", "batch_tokens")
        if key in metrics and metrics[key] != getattr(spec, key)
    ]
    lr = metrics.get("learning_rate")
    if lr is not None and not math.isclose(lr, spec.learning_rate, rel_tol=1e-9):
        mismatched.append("learning_rate")
    if mismatched:
        raise FruitError(
            f"{folder} holds a finished run whose {', '.join(mismatched)} differ from the "
            f"profile's run {spec.name}; move that folder away or use another --results"
        )


def select_best(search_metrics: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The search trial with the lowest best validation cross-entropy (ties: lowest index).

    Trials without a finite cross-entropy (e.g. diverged before the first checkpoint)
    cannot win; None when no trial has one.
    """

    def score(m):
        ce = m.get("best_validation_cross_entropy")
        return ce if isinstance(ce, (int, float)) and math.isfinite(ce) else None

    candidates = [m for m in search_metrics if score(m) is not None]
    if not candidates:
        return None
    return min(candidates, key=lambda m: (score(m), m.get("index", 0)))
