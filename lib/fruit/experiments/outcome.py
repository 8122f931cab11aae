"""What one ``Sweep.run()`` did (``SweepResult``): runs found complete, trained, failed,
paused, left; the reports it wrote. ``fruit.experiments.schedule`` fills it in, the sweep
and ``fruit run`` read it (its exit status: ``fruit.commands.run``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass
class Failure:
    name: str
    message: str
    notebook: Path


@dataclasses.dataclass
class SweepResult:
    total: int = 0  # runs planned (search + final)
    found_complete: int = 0  # skipped: metrics.json already there
    trained: int = 0  # executed to completion by this invocation
    failures: list[Failure] = dataclasses.field(default_factory=list)
    skipped_pairs: list[str] = dataclasses.field(default_factory=list)
    paused: list[str] = dataclasses.field(default_factory=list)  # stopped at the time limit
    left: int = 0  # runs not finished when a time limit ended the sweep
    reports: list[Path] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and not self.skipped_pairs

    @property
    def complete(self) -> bool:
        """Every planned run finished (nothing left for a later call)."""
        return self.ok and self.left == 0

    def add_failure(self, name: str, message: str, notebook: Path) -> None:
        """A run failed for good (after its retries)."""
        self.failures.append(Failure(name, message, notebook))
