"""What a profile is: the validated ``Profile`` value, its phases and splits, and the
seeds and run folders derived from it (``fruit.profiles`` reads and checks the files)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from fruit.errors import FruitError, unknown_choice

PHASES = ("search", "final")
SPLITS = ("train", "dev", "test", "gen")
# docs/paper.md §11/§12.1: the paper validates every 80,000 training examples. A profile
# without [training] checkpoint_every gets this.
PAPER_CHECKPOINT_EVERY = 80_000

# Where a profile's dev/test/gen come from: made by our generators, or the published files
# (``fruit.tasks.official``) with a generated train split that avoids their sentences.
DATA_SOURCES = ("generated", "published")


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
    # profiles whose records of the very same runs are taken over (fruit.experiments.planning.reuse)
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
