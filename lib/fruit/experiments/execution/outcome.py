"""What one ``Sweep.run()`` did (``SweepResult``): runs found complete, trained, failed,
paused, left; the reports it wrote. ``fruit.experiments.execution.schedule`` fills it in, the sweep
and ``fruit run`` read it (its exit status: ``fruit.commands.run``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fruit.experiments.execution.progress import clock
from fruit.experiments.planning.run_state import describe_paused


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
    # a run finished, or trained further before it paused, or a data folder was made, in
    # this call; with a time limit and runs left, a call without any is stalled: the same
    # command would do nothing again (``stalled``)
    progressed: bool = False
    time_limited: bool = False  # the sweep ended at its time limit (not on request)
    # a signal or the time limit's end stopped the reports (every run is recorded)
    reports_stopped: bool = False
    reports_out_of_time: bool = False  # the time limit's end stopped them

    @property
    def stalled(self) -> bool:
        """Runs are left, the time limit ended the sweep, and nothing moved on; or the
        reports were all that was left and the limit ended them: a call under the same
        limit would end the same way (``fruit run`` exits 2, not 75)."""
        if not self.ok or self.progressed:
            return False
        return (self.left > 0 and self.time_limited) or self.reports_out_of_time

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

    def summary(
        self, limited: bool, on_request: bool, runs_root: Path, train_size: int
    ) -> list[str]:
        """What ``fruit run`` prints at the end: the counts, each failure with its executed
        notebook, and, when a time limit (``limited``) or a pause request (``on_request``)
        left runs, that the same command goes on, with where each paused run stands."""
        lines = [
            f"runs: {self.trained} trained, {self.found_complete} found complete, "
            f"{len(self.failures)} failed, of {self.total}; {clock(self.seconds)}"
        ]
        for f in self.failures:
            lines.append(f"  failed: {f.name}: {f.message}\n          notebook: {f.notebook}")
        if self.left and limited:
            paused = f" ({len(self.paused)} paused mid-run)" if self.paused else ""
            why = "paused on request" if on_request else "time limit reached"
            goes_on = "the same command goes on from here"
            if self.stalled:
                goes_on = "but no run started, moved on or finished in this call"
            lines.append(
                f"{why}: {self.left} run(s) left{paused}; every finished run is recorded, {goes_on}"
            )
        for name in self.paused:
            lines.append("  " + describe_paused(runs_root / name, train_size))
        if self.paused:
            lines.append(
                "  a paused run resumes from its resume files; on a machine without them "
                "it trains from the start (to move a campaign, carry them with the records)"
            )
        return lines
