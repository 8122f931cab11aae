"""What the bookkeeping of one ``Sweep.run()`` (``fruit.experiments.execution.schedule``,
``fruit.experiments.execution.dispatch``) needs of the sweep that runs it: a narrow interface, so
that neither imports ``fruit.experiments.execution.sweep``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fruit.experiments.planning.plan import RunSpec

if TYPE_CHECKING:
    from fruit.experiments.execution.deadlines import Deadlines
    from fruit.profiles import Profile


class Sweeper(Protocol):
    """What the schedule needs of the sweep that runs it (``fruit.experiments.execution.sweep.Sweep``):
    the plan, where records go, the cluster, and the few decisions the sweep owns (when a
    run must stop, whether to pause, submitting a run, reading a finished one)."""

    profile: Profile
    pairs: list[tuple[str, str]]
    deadlines: Deadlines
    poll_seconds: float
    no_worker_seconds: float
    retries: int
    results_dir: Path
    runs_root: Path
    cluster: Any
    client: Any

    def say(self, text: str) -> None: ...
    def pausing(self) -> bool: ...
    def stop_at_for(self, spec: RunSpec) -> float | None: ...
    def submit(self, spec: RunSpec, attempt: int) -> Any: ...
    def finished_metrics(self, spec: RunSpec) -> dict[str, Any] | None: ...
