"""The runs an experiment profile expands into (docs/paper.md §12, docs/architecture.md §6).

Profiles themselves (the TOML files, ``load_profile``, ``Profile``) live in
``fruit.profiles``. A profile expands into *run
specifications*: (task, architecture, phase, index) with every seed derived
deterministically from the profile seed, so the same profile always means the same runs. Search runs draw the batch-token budget B and the learning rate
from their own recorded seed; the final runs copy the winning trial's B and learning
rate, choosing the trial with the lowest best validation cross-entropy.

This module is plain Python (no Dask): the run specifications and the selection of the
final runs' setting. Where each planned run stands is ``run_state``; executing the runs
is ``fruit.experiments.execution.sweep``.
"""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path
from typing import Any

from fruit.errors import FruitError
from fruit.names import stacks_of
from fruit.profiles import Profile, derive_seed, run_folder

# ---------------------------------------------------------------------------
# Run specifications


# A sweep's runs redraw their progress bar at most this often: nobody watches them live
# (the executed notebook keeps the last state), and each redraw costs the run time.
SWEEP_PROGRESS_SECONDS = 10.0


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
    def pair(self) -> tuple[str, str]:
        """(task, architecture): the profile's unit of search and final runs."""
        return (self.task, self.architecture)

    @property
    def name(self) -> str:
        return f"{self.task}/{self.architecture}/{self.phase}-{self.index}"

    def folder(self, results_dir: str | Path) -> Path:
        """``RESULTS/runs/<profile>/<task>/<architecture>/<phase>-<index>``."""
        return run_folder(
            results_dir, self.profile, self.task, self.architecture, self.phase, self.index
        )

    def parameters(
        self, profile: Profile, *, data_dir, run_dir, results_dir, device: str, threads: int | None
    ) -> dict[str, Any]:
        """The papermill parameters of ``notebooks/train.ipynb`` for this run: the
        profile's ``[training]`` table, its sizes and data seed (all explicit, so the
        notebook needs no profile file), then the run's own settings."""
        params = dict(profile.training)
        params.update(profile.run_settings(self.phase, self.architecture))
        params.update(
            task=self.task,
            architecture=self.architecture,
            phase=self.phase,
            index=self.index,
            seed=self.seed,
            learning_rate=self.learning_rate,
            batch_tokens=self.batch_tokens,
            profile=self.profile,
            data_dir=str(data_dir),
            data_seed=profile.task_data_seed(self.task),
            data_source=profile.data_source,
            generate_data=False,  # the runner prepared data_dir/<task>/ beforehand
            run_dir=str(run_dir),
            output_dir=str(results_dir),
            device=device,
            threads=threads,
            progress_seconds=SWEEP_PROGRESS_SECONDS,
        )
        return params


# How much one stack of a kind adds to a run's cost, in units of the network without it:
# nondeterministic stacks are ~10x slower per token; a kind not listed counts as the slowest.
STACK_COST = {"Sup": 1, "Nd": 10}


def relative_cost(spec: RunSpec) -> int:
    """Rough relative cost, to start the slowest runs first (final runs train to
    convergence)."""
    slowest = max(STACK_COST.values())
    stacks = sum(STACK_COST.get(kind, slowest) for kind in stacks_of(spec.architecture))
    return (1 + stacks) * (3 if spec.phase == "final" else 1)


def draw_search_setting(profile: Profile, task: str, architecture: str, trial: int):
    """(draw seed, B, learning rate) of one search trial: B uniform over the integers of
    the range, the learning rate log-uniform (docs/paper.md §12.1)."""
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


def plan(profile: Profile) -> dict[str, Any]:
    """The whole sweep as data (recorded in ``plan.json``): seeds and search draws."""
    return {
        "profile": profile.as_dict(),
        "search": [
            dataclasses.asdict(s) for t, a in profile.pairs for s in search_specs(profile, t, a)
        ],
        "final_seeds": {
            f"{t}/{a}": [s.seed for s in final_specs(profile, t, a, 0.0, 0)]
            for t, a in profile.pairs
        },
    }


# ---------------------------------------------------------------------------
# Run folders and selection


def check_metrics_match(spec: RunSpec, metrics: dict[str, Any], folder: Path) -> None:
    """A finished folder must hold *this* run, not one from an edited profile."""
    mismatched = [
        key
        for key in ("profile", "task", "architecture", "phase", "index", "seed", "batch_tokens")
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


def selection_record(search_metrics: list[dict[str, Any]], best: dict[str, Any]) -> dict[str, Any]:
    """``selection.json`` of a (task, architecture) pair: the winner (``select_best``) and
    every trial it was chosen from."""
    keys = ("index", "learning_rate", "batch_tokens", "best_validation_cross_entropy", "status")
    trials = sorted(search_metrics, key=lambda m: m["index"])
    return {
        "criterion": "lowest best_validation_cross_entropy among search trials",
        "winner": best["index"],
        "learning_rate": best["learning_rate"],
        "batch_tokens": best["batch_tokens"],
        "best_validation_cross_entropy": best["best_validation_cross_entropy"],
        "trials": [{k: m.get(k) for k in keys} for m in trials],
    }
