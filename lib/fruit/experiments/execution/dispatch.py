"""Runs waiting for a worker and runs on one (``Dispatcher``): which waiting run goes to a
free worker next (``priority``), and what is left over when a pause request or the time
limit ends the sweep. What each finished run unlocks is ``fruit.experiments.execution.schedule``'s."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fruit.experiments.planning.plan import RunSpec, relative_cost

if TYPE_CHECKING:
    from fruit.experiments.execution.progress import Progress
    from fruit.experiments.execution.sweeper import Sweeper


def priority(
    seconds: float | None, trained: float, stop_at: float | None, cost: int, now: float
) -> tuple[bool, bool, float, int]:
    """A waiting run's rank (the highest goes first). Longest first, so that no long run
    starts last and keeps one worker busy after the others are done; but under a time
    limit (``stop_at``) the runs expected to finish before it first, and among those (and
    among those that cannot) a paused run (``trained`` epochs > 0) before a fresh one, then
    the longest (of the runs that cannot finish: the one closest to its end). A paused run
    goes on only where its resume files are kept, so the fewer runs are left half-trained
    at the limit, the less a lost machine costs (a fresh run ranked first by length kept
    two paused runs waiting for a whole step of the claims campaign). ``seconds`` is the
    progress estimate of what the run has left (``Progress.run_seconds``); where even that
    is unknown, the relative ``cost`` alone ranks them."""
    resumes = stop_at is not None and trained > 0
    if seconds is None:
        return (True, resumes, 0.0, cost)
    fits = stop_at is None or now + seconds <= stop_at
    return (fits, resumes, seconds if fits else -seconds, cost)


class Dispatcher:
    """Waiting runs submitted to free workers in ``priority`` order; the pending ones
    followed; what a pause, a stop time or the deadline leaves over kept in
    ``unfinished`` for the next call."""

    def __init__(self, sweep: Sweeper, progress: Progress, epochs: Callable[[RunSpec], float]):
        self.sweep, self.progress, self.epochs = sweep, progress, epochs
        self.pending: dict[Any, tuple[RunSpec, int]] = {}  # future -> (spec, attempt)
        self.waiting: list[tuple[RunSpec, int]] = []  # launched, not yet submitted
        self.unfinished: list[RunSpec] = []  # paused, abandoned or never started

    def launch(self, spec: RunSpec, attempt: int = 1) -> None:
        """Queue a run; ``submit_waiting`` submits it when its turn comes."""
        self.waiting.append((spec, attempt))

    def submit_waiting(self) -> bool:
        """Submit waiting runs in ``priority`` order while a worker slot is free; True if
        any was submitted. Never more runs than slots go to Dask: Dask places a task on a
        worker when it is submitted and, with work stealing off (cluster.QUIET_DASK), never
        moves it, so a run queued behind a busy worker's hours-long run would wait there
        while another worker idles. (With a fixed number of workers nothing is lost by
        holding runs back; workers that join later raise ``slots()``.)"""
        if not self.waiting:
            return False
        if self.sweep.pausing():
            self.unfinished += [spec for spec, _ in self.waiting]  # left for the next call
            self.waiting.clear()
            return False
        now = time.time()
        stops = {spec.name: self.sweep.stop_at_for(spec) for spec, _ in self.waiting}
        late = [item for item in self.waiting if _past(stops[item[0].name], now)]
        if late:  # too late to start (its stop time, Sweep.stop_at_for, has come)
            self.unfinished += [spec for spec, _ in late]
            self.waiting = [item for item in self.waiting if item not in late]
        free = self.sweep.cluster.slots() - len(self.pending)
        if free <= 0 or not self.waiting:
            return False
        self.waiting.sort(key=lambda item: self.rank(item[0], stops[item[0].name]), reverse=True)
        for spec, attempt in self.waiting[:free]:
            self.pending[self.sweep.submit(spec, attempt)] = (spec, attempt)
        del self.waiting[:free]
        return True

    def rank(self, spec: RunSpec, stop_at: float | None) -> tuple[bool, bool, float, int]:
        """``priority`` of a waiting run, from its epochs so far and the progress estimate."""
        trained = self.epochs(spec)
        seconds = self.progress.run_seconds(spec, trained)
        return priority(seconds, trained, stop_at, relative_cost(spec), time.time())

    def done(self) -> list[tuple[RunSpec, int, Any]]:
        """(spec, attempt, future) of every pending run that ended, no longer pending."""
        ended = [f for f in self.pending if f.done()]
        return [(*self.pending.pop(f), f) for f in ended]

    def abandon(self, why: str = "time limit") -> list[RunSpec]:
        """At the time limit (or when a pause request has waited long enough): give up
        what is still pending (a run evaluating, one that has not reached a pause); its
        last checkpoint stays for the next call. Returns the runs given up while running."""
        given_up = []
        for future, (spec, _) in list(self.pending.items()):
            future.cancel()
            self.unfinished.append(spec)
            given_up.append(spec)
            self.sweep.say(f"{why}: {spec.name} left unfinished (resumes from its checkpoint)")
        self.unfinished += [spec for spec, _ in self.waiting]
        self.pending.clear()
        self.waiting.clear()
        return given_up

    def drop_unstarted(self) -> None:
        """When pausing: the pending runs that no worker is executing (their worker's job
        was lost, or none has started yet) are withdrawn and left for the next call, so
        that a pause never waits for a worker that may not come."""
        busy = self._processing()
        if busy is None:
            return
        for future, (spec, _) in list(self.pending.items()):
            if future.key not in busy and not future.done():
                future.cancel()
                del self.pending[future]
                self.unfinished.append(spec)

    def _processing(self) -> set | None:
        """The keys the workers are executing (None: the scheduler did not answer)."""
        try:
            processing = self.sweep.client.processing()
        except Exception:  # noqa: BLE001 - asked again at the next poll
            return None
        return {k for ks in processing.values() for k in ks}

    def running(self) -> int:
        """How many of the pending runs a worker is executing right now."""
        busy = self._processing()
        if busy is None:  # the display must not break the sweep
            return 0
        return min(sum(1 for f in self.pending if f.key in busy), self.sweep.cluster.slots())


def _past(stop_at: float | None, now: float) -> bool:
    return stop_at is not None and now >= stop_at
