"""The bookkeeping of one ``Sweep.run()`` (docs/architecture.md §4, steps 4-6).

A ``Schedule`` holds what each outcome unlocks: the search runs of every (task,
architecture) pair, their finished metrics and failures; the runs waiting for a worker and
the pending Dask futures are its ``Dispatcher``'s (``fruit.experiments.execution.dispatch``). A finished search run may close its pair's search, which picks
the winning trial (``selection.json``) and submits the pair's final runs; a failed run is
retried, then recorded; at the time limit whatever is still pending is abandoned (its
last checkpoint stays for the next call). Submitting and the settings are the ``Sweep``'s.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from fruit.experiments.clusters.jobs import retire_worker_of
from fruit.experiments.execution.dispatch import Dispatcher
from fruit.experiments.execution.outcome import SweepResult
from fruit.experiments.execution.watch import PAUSE_GRACE_SECONDS, WorkerWatch
from fruit.experiments.planning.plan import (
    RunSpec,
    final_specs,
    search_specs,
    select_best,
    selection_record,
)
from fruit.experiments.planning.run_state import epochs_so_far
from fruit.io import EXECUTED_NOTEBOOK, atomic_write_json

if TYPE_CHECKING:
    from fruit.experiments.execution.progress import Progress
    from fruit.experiments.execution.sweeper import Sweeper


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
        self.queue = Dispatcher(sweep, progress, self._epochs)  # waiting, pending runs
        self._trained: dict[str, float] = {}  # run name -> epochs trained (pending runs)
        self._trained_at = -float("inf")  # time.monotonic() of that reading
        self.started = time.time()  # a checkpoint saved since: its run moved on

    def execute(self, start: bool = True) -> None:
        """Submit every unfinished run and follow them until none is pending (or the
        time limit ends the sweep). ``start`` False: count what is done and left, and
        start nothing (the sweep stopped before its data was ready)."""
        for spec in self._collect_finished():
            self.queue.launch(spec)
        for pair in self.search:
            if self._search_closed(pair):
                self._start_finals(pair)
        if not start:
            self.queue.unfinished += [spec for spec, _ in self.queue.waiting]
            self.queue.waiting.clear()

        deadline, queue = self.sweep.deadlines.deadline, self.queue
        watch, asked = WorkerWatch(self.sweep), None  # asked: when a pause was requested
        while True:
            queue.submit_waiting()
            if self.sweep.pausing():  # what waits for a worker waits no longer
                queue.drop_unstarted()
                asked = time.monotonic() if asked is None else asked
            if not queue.pending:
                break
            watch.check()
            self.progress.running = queue.running()
            self.progress.show(self._left_specs(), trained=self._trained_so_far())
            if deadline is not None and time.time() >= deadline:
                self._given_up(queue.abandon())
                break
            if asked is not None and time.monotonic() - asked >= PAUSE_GRACE_SECONDS:
                self._given_up(
                    queue.abandon(f"not paused {PAUSE_GRACE_SECONDS:.0f} s after the request")
                )
                break
            ended = queue.done()
            if not ended:
                time.sleep(self.sweep.poll_seconds)
            for spec, attempt, future in ended:
                if future.status == "finished":
                    self._on_result(spec, attempt, future)
                elif future.status == "cancelled":  # e.g. the scheduler's connection lost
                    self._on_failure(spec, attempt, RuntimeError("cancelled by the scheduler"))
                else:
                    self._on_failure(spec, attempt, future.exception())
        self.progress.running = 0
        left = self._left_specs() + queue.unfinished  # what a later call has to train
        self.progress.show(left, force=True, trained={s.name: self._epochs(s) for s in left})
        self.progress.end()

    def _given_up(self, specs: list[RunSpec]) -> None:
        """Runs abandoned while running moved on if they saved a checkpoint in this call
        (e.g. one whose training ended and whose evaluation the limit cut short)."""
        for spec in specs:
            try:
                saved = (spec.folder(self.sweep.results_dir) / "checkpoint.pt").stat().st_mtime
            except OSError:
                continue
            self.result.progressed |= saved >= self.started

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

    def _on_result(self, spec: RunSpec, attempt: int, future) -> None:
        outcome = future.result()
        metrics, seconds = outcome
        moved = getattr(outcome, "progressed", seconds > 0)  # trained further, or finished
        self.result.progressed |= metrics is not None or bool(moved)
        if metrics is None and getattr(outcome, "job_ending", False) and not self.sweep.pausing():
            retire_worker_of(self.sweep.client, future)  # its job ends; a fresh one comes
            done = "paused" if seconds > 0 else "not started"
            self.sweep.say(f"{spec.name}: {done} before its job's walltime; goes on in a new job")
            self.queue.launch(spec, attempt)
            return
        if metrics is None:  # paused at, or not started after, the time limit
            self.queue.unfinished.append(spec)
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
            self.queue.launch(spec, attempt + 1)
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
                self.queue.launch(spec)

    def _trained_so_far(self) -> dict[str, float]:
        """Epochs each pending run has trained (its log and pause marker), read again
        every ``TRAINED_SECONDS`` at most, for the time estimate."""
        now = time.monotonic()
        if now - self._trained_at >= TRAINED_SECONDS:
            pending = self.queue.pending.values()
            self._trained = {spec.name: self._epochs(spec) for spec, _ in pending}
            self._trained_at = now
        return self._trained

    def _epochs(self, spec: RunSpec) -> float:
        """Epochs ``spec`` has trained so far (its folder's pause marker or log)."""
        return epochs_so_far(spec.folder(self.sweep.results_dir), self.profile.sizes["train"])

    def _left_specs(self) -> list[RunSpec]:
        """Runs still to do (pending, plus final runs of pairs whose search is open), for
        the time estimate."""
        left = [s for s, _ in self.queue.pending.values()] + [s for s, _ in self.queue.waiting]
        for task, arch in self.search:
            if not self._search_closed((task, arch)):
                left += final_specs(self.profile, task, arch, 0.0, 0)
        return left
