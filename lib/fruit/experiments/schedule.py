"""The bookkeeping of one ``Sweep.run()`` (docs/architecture.md §4, steps 4-6).

A ``Schedule`` holds what that call has submitted and what each outcome unlocks: the
search runs of every (task, architecture) pair, their finished metrics and failures,
the pending Dask futures. A finished search run may close its pair's search, which picks
the winning trial (``selection.json``) and submits the pair's final runs; a failed run is
retried, then recorded; at the time limit whatever is still pending is abandoned (its
last checkpoint stays for the next call). Submitting and the settings are the ``Sweep``'s.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fruit.experiments.outcome import SweepResult
from fruit.experiments.plan import (
    RunSpec,
    final_specs,
    relative_cost,
    search_specs,
    select_best,
    selection_record,
)
from fruit.experiments.run_state import epochs_so_far
from fruit.experiments.worker import EXECUTED_NOTEBOOK
from fruit.io import atomic_write_json

if TYPE_CHECKING:
    from fruit.experiments.deadlines import Deadlines
    from fruit.experiments.progress import Progress
    from fruit.profiles import Profile


class Sweeper(Protocol):
    """What the schedule needs of the sweep that runs it (``fruit.experiments.sweep.Sweep``):
    the plan, where records go, the cluster, and the few decisions the sweep owns (when a
    run must stop, whether to pause, submitting a run, reading a finished one)."""

    profile: Profile
    pairs: list[tuple[str, str]]
    deadlines: Deadlines
    poll_seconds: float
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


TRAINED_SECONDS = 30.0  # how often the time estimate reads the pending runs' logs


def _write_if_changed(path: Path, record: dict) -> None:
    """Write a JSON record unless the file already holds it (a rerun touches nothing)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")) == json.loads(json.dumps(record)):
            return
    except (FileNotFoundError, json.JSONDecodeError):
        pass
    atomic_write_json(path, record)


def planned_runs(sweep: Sweeper) -> int:
    """How many runs the sweep's pairs hold: their search trials and final runs."""
    return len(sweep.pairs) * (sweep.profile.search_trials + sweep.profile.final_runs)


class Schedule:
    """The runs of one ``Sweep.run()``: submitted, finished, failed, and what comes next."""

    def __init__(self, sweep: Sweeper, result: SweepResult, progress: Progress):
        self.sweep, self.profile = sweep, sweep.profile
        self.result, self.progress = result, progress
        self.search = {pair: search_specs(self.profile, *pair) for pair in sweep.pairs}
        self.search_done: dict[tuple[str, str], list[dict]] = defaultdict(list)
        self.search_failed: dict[tuple[str, str], int] = defaultdict(int)
        self.pending: dict[Any, tuple[RunSpec, int]] = {}  # future -> (spec, attempt)
        self.waiting: list[tuple[RunSpec, int]] = []  # launched, not yet submitted
        self._trained: dict[str, float] = {}  # run name -> epochs trained (pending runs)
        self._trained_at = -float("inf")  # time.monotonic() of that reading
        self.unfinished: list[RunSpec] = []  # paused, abandoned or never started: left over

    def execute(self) -> None:
        """Submit every unfinished run and follow them until none is pending (or the
        time limit ends the sweep)."""
        for spec in self._collect_finished():
            self._launch(spec)
        for pair in self.search:
            if self._search_closed(pair):
                self._start_finals(pair)

        deadline = self.sweep.deadlines.deadline
        while True:
            self._submit_waiting()
            if not self.pending:
                break
            self.progress.running = self._running()
            self.progress.show(self._left_specs(), trained=self._trained_so_far())
            if deadline is not None and time.time() >= deadline:
                self._abandon()
                break
            finished_futures = [f for f in self.pending if f.done()]
            if not finished_futures:
                time.sleep(self.sweep.poll_seconds)
            for future in finished_futures:
                spec, attempt = self.pending.pop(future)
                if future.status == "finished":
                    self._on_result(spec, *future.result())
                else:
                    self._on_failure(spec, attempt, future.exception())
        self.progress.running = 0
        left = self._left_specs() + self.unfinished  # what a later call has to train
        self.progress.show(left, force=True, trained={s.name: self._epochs(s) for s in left})
        self.progress.end()

    def _launch(self, spec: RunSpec, attempt: int = 1) -> None:
        """Queue a run; the loop in ``execute`` submits it when its turn comes."""
        self.waiting.append((spec, attempt))

    def _submit_waiting(self) -> bool:
        """Submit waiting runs in the order of ``_priority`` while a worker slot is free;
        True if any was submitted. Never more runs than slots go to Dask: Dask places a
        task on a worker when it is submitted and, with work stealing off (cluster.QUIET_DASK),
        never moves it, so a run queued behind a busy worker's hours-long run would wait
        there while another worker idles. (With a fixed number of workers nothing is
        lost by holding runs back; workers that join later raise ``slots()``.)"""
        if not self.waiting:
            return False
        if self.sweep.pausing():
            self.unfinished += [spec for spec, _ in self.waiting]  # left for the next call
            self.waiting.clear()
            return False
        now = time.time()
        late = [item for item in self.waiting if self._past_stop(item[0], now)]
        if late:  # too late to start (its stop time, Sweep.stop_at_for, has come)
            self.unfinished += [spec for spec, _ in late]
            self.waiting = [item for item in self.waiting if item not in late]
        free = self.sweep.cluster.slots() - len(self.pending)
        if free <= 0 or not self.waiting:
            return False
        self.waiting.sort(
            key=lambda item: self._priority(item[0], self.sweep.stop_at_for(item[0])),
            reverse=True,
        )
        for spec, attempt in self.waiting[:free]:
            self.pending[self.sweep.submit(spec, attempt)] = (spec, attempt)
        del self.waiting[:free]
        return True

    def _past_stop(self, spec: RunSpec, now: float) -> bool:
        stop_at = self.sweep.stop_at_for(spec)
        return stop_at is not None and now >= stop_at

    def _priority(self, spec: RunSpec, stop_at: float | None) -> tuple[bool, bool, float, int]:
        """Longest first (so that no long run starts last and keeps one worker busy
        after the others are done), but under a time limit the runs expected to finish
        before it first, and among those (and among those that cannot) a paused run (one
        with epochs trained) before a fresh one, then the longest (of the runs that cannot
        finish: the one closest to its end). A paused run
        goes on only where its resume files are kept, so the fewer runs are left
        half-trained at the limit, the less a lost machine costs (a fresh run ranked
        first by length kept two paused runs waiting for a whole step of the claims
        campaign). How long a run takes is the progress estimate (the architecture's
        seconds per epoch, ``Progress.rate``: measured, or the cost model's before
        anything is, times a final run's expected length, less the epochs it has
        trained); where even that is unknown, ``relative_cost`` alone ranks them."""
        trained = self._epochs(spec)
        resumes = stop_at is not None and trained > 0
        seconds = self.progress.run_seconds(spec, trained)
        if seconds is None:
            return (True, resumes, 0.0, relative_cost(spec))
        fits = stop_at is None or time.time() + seconds <= stop_at
        return (fits, resumes, seconds if fits else -seconds, relative_cost(spec))

    def _abandon(self) -> None:
        """At the time limit: give up what is still pending (a run evaluating, one that
        has not reached a pause); its last checkpoint stays for the next call."""
        for future, (spec, _) in list(self.pending.items()):
            future.cancel()
            self.unfinished.append(spec)
            self.sweep.say(f"time limit: {spec.name} left unfinished (resumes from its checkpoint)")
        self.unfinished += [spec for spec, _ in self.waiting]
        self.pending.clear()
        self.waiting.clear()

    def _found_complete(self) -> None:
        self.result.found_complete += 1
        self.progress.done += 1

    def _collect_finished(self) -> list[RunSpec]:
        """Record the search runs already finished; return the others."""
        unfinished = []
        for pair, specs in self.search.items():
            for spec in specs:
                metrics = self.sweep.finished_metrics(spec)
                if metrics is None:
                    unfinished.append(spec)
                else:
                    self.search_done[pair].append(metrics)
                    self._found_complete()
        return unfinished

    def _search_closed(self, pair: tuple[str, str]) -> bool:
        """Every search trial of the pair finished or failed for good."""
        closed = len(self.search_done[pair]) + self.search_failed[pair]
        return closed == len(self.search[pair])

    def _search_trial_ended(self, spec: RunSpec) -> None:
        """A search trial finished or failed for good: the last one starts the finals."""
        if self._search_closed(spec.pair):
            self._start_finals(spec.pair)

    def _on_result(self, spec: RunSpec, metrics: dict | None, seconds: float) -> None:
        if metrics is None:  # paused at, or not started after, the time limit
            self.unfinished.append(spec)
            if seconds > 0:
                self.result.paused.append(spec.name)
            return
        self.result.trained += 1
        self.progress.done += 1
        trained = metrics.get("train_seconds")  # all attempts (``seconds``: this one's)
        if not (isinstance(trained, (int, float)) and trained > 0):
            trained = seconds
        evaluation = metrics.get("evaluation_seconds")
        if not isinstance(evaluation, (int, float)):
            evaluation = None
        if trained > 0:
            self.progress.add_run(spec, trained, metrics.get("epochs"), evaluation)
        if spec.phase == "search":
            self.search_done[spec.pair].append(metrics)
            self._search_trial_ended(spec)

    def _on_failure(self, spec: RunSpec, attempt: int, error: BaseException) -> None:
        say = self.sweep.say
        message = str(error) or type(error).__name__
        if type(error).__name__ == "KilledWorker":
            message = f"{spec.name}: its worker died repeatedly ({error})"
        if attempt <= self.sweep.retries and not getattr(error, "final", False):
            say(f"retrying {spec.name} (attempt {attempt + 1}): {message}")
            self._launch(spec, attempt + 1)
            return
        notebook = spec.folder(self.sweep.results_dir) / EXECUTED_NOTEBOOK
        self.result.add_failure(spec.name, message, notebook)
        self.progress.failed += 1
        say(f"FAILED {spec.name} after {attempt} attempt(s): {message}")
        if spec.phase == "search":
            self.search_failed[spec.pair] += 1
            self._search_trial_ended(spec)

    def _skip(self, pair: tuple[str, str], why: str) -> None:
        self.result.skipped_pairs.append("/".join(pair))
        self.result.total -= self.profile.final_runs
        self.progress.total -= self.profile.final_runs
        self.sweep.say(f"final runs of {'/'.join(pair)} skipped: {why}")

    def _start_finals(self, pair: tuple[str, str]) -> None:
        """Submit the pair's final runs with the fixed setting or the search winner's."""
        profile, (task, arch) = self.profile, pair
        if profile.search_trials == 0:
            lr, b = profile.final_learning_rate, profile.final_batch_tokens
        elif self.search_failed[pair]:
            return self._skip(pair, "search trials failed")
        else:
            best = select_best(self.search_done[pair])
            if best is None:
                return self._skip(pair, "no trial has a finite validation cross-entropy")
            lr, b = best["learning_rate"], best["batch_tokens"]
            selection = selection_record(self.search_done[pair], best)
            _write_if_changed(self.sweep.runs_root / task / arch / "selection.json", selection)
        for spec in final_specs(profile, task, arch, lr, b):
            if self.sweep.finished_metrics(spec) is not None:
                self._found_complete()
            else:
                self._launch(spec)

    def _running(self) -> int:
        """How many of our pending runs a worker is executing right now."""
        try:
            processing = self.sweep.client.processing()
        except Exception:  # noqa: BLE001 - the display must not break the sweep
            return 0
        keys = {f.key for f in self.pending}
        busy = sum(1 for ks in processing.values() for k in ks if k in keys)
        return min(busy, self.sweep.cluster.slots())

    def _trained_so_far(self) -> dict[str, float]:
        """Epochs each pending run has trained (its log and pause marker), read again
        every ``TRAINED_SECONDS`` at most, for the time estimate."""
        now = time.monotonic()
        if now - self._trained_at >= TRAINED_SECONDS:
            self._trained = {spec.name: self._epochs(spec) for spec, _ in self.pending.values()}
            self._trained_at = now
        return self._trained

    def _epochs(self, spec: RunSpec) -> float:
        """Epochs ``spec`` has trained so far (its folder's pause marker or log)."""
        return epochs_so_far(spec.folder(self.sweep.results_dir), self.profile.sizes["train"])

    def _left_specs(self) -> list[RunSpec]:
        """Runs still to do (pending, plus final runs of pairs whose search is open), for
        the time estimate."""
        left = [s for s, _ in self.pending.values()] + [s for s, _ in self.waiting]
        for task, arch in self.search:
            if not self._search_closed((task, arch)):
                left += final_specs(self.profile, task, arch, 0.0, 0)
        return left
