"""The one-line progress display of a sweep: runs done / running / failed / left, and
the time still needed, estimated from the profile's recorded runs (their seconds per
epoch, the final runs' length per pair) and then from the runs this call finishes.

The same per-run estimate orders a sweep under a time limit (runs that fit first), so it
should be today's rate for the run's own task: an epoch's length differs between tasks
(the claims campaign's Tf+Nd: 1.8 minutes per epoch on tense reinflection, 2.4-2.6 on
German question formation), so the pair's runs speak first, then the architecture's.
Within each, the runs this call finishes say it best; among recorded runs the fastest
does, since a record made by older code or on a busier machine (two sweeps on two cores)
is only slower, often several times. Before anything of an architecture is measured, the
dry-run's cost model (``fruit.experiments.planning.cost``) predicts it from the reference
throughput.

On a terminal the line is redrawn in place; in a log a new line is written when the
counts change, and at least every ``LOG_LINE_SECONDS`` otherwise.
"""

from __future__ import annotations

import heapq
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from fruit.errors import FruitError
from fruit.experiments.planning.cost import (
    FINAL_EPOCHS,
    epoch_seconds,
    final_length,
    search_until_early_stopping,
)
from fruit.experiments.planning.plan import RunSpec
from fruit.experiments.planning.run_state import run_states
from fruit.profiles import Profile

LOG_LINE_SECONDS = 60  # off a terminal, repeat an unchanged line at most this often


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


SLOTS_SECONDS = 30.0  # how often a cluster is asked how many runs it holds at once


class Progress:
    """Runs done / running / failed / left, and a time estimate from finished runs."""

    def __init__(
        self, total: int, slots: int | Callable[[], int], stream: TextIO | None, label: str
    ):
        """``slots``: the runs at once, or a function that says how many there are now (a
        batch-job cluster's grow as its jobs start)."""
        self.total, self._slots, self.stream, self.label = total, slots, stream, label
        self._slots_read: tuple[float, int] | None = None  # (when, how many) of a function
        self.done = self.failed = self.running = 0
        # architecture -> seconds per epoch of the runs this call finished / of the records
        self.seconds_per_epoch: dict[str, list[float]] = defaultdict(list)
        self.recorded_seconds_per_epoch: dict[str, list[float]] = defaultdict(list)
        # (task, architecture) -> the same, of that pair's runs
        self.pair_seconds_per_epoch: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.recorded_pair_seconds_per_epoch: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.predicted_seconds_per_epoch: dict[tuple[str, str], float] = {}  # (task, arch) ->
        # (task, architecture) -> the final evaluations' seconds (records and this call)
        self.evaluation_seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.final_epochs: dict[tuple[str, str], float] = {}  # (task, arch) -> expected length
        self.long_search: set[tuple[str, str]] = set()  # pairs whose trials early stopping ends
        self.start = time.monotonic()
        self._last_line = ""
        self._last_print = 0.0
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())

    def add_run(
        self,
        spec: RunSpec,
        seconds: float,
        epochs: float | None = None,
        evaluation_seconds: float | None = None,
    ) -> None:
        """A run of ``spec`` trained ``seconds`` for ``epochs`` epochs (default: its
        maximum): its ``train_seconds`` where it has them, which a resumed run sums over
        every attempt, as its ``epochs`` do; then evaluated for ``evaluation_seconds``."""
        epochs = epochs if epochs and epochs > 0 else spec.max_epochs
        self.seconds_per_epoch[spec.architecture].append(seconds / epochs)
        self.pair_seconds_per_epoch[spec.pair].append(seconds / epochs)
        if evaluation_seconds and evaluation_seconds > 0:
            self.evaluation_seconds[spec.pair].append(evaluation_seconds)

    def evaluation(self, spec: RunSpec) -> float | None:
        """The longest final evaluation recorded for ``spec``'s (task, architecture) pair,
        in seconds (None when none is: records older than ``evaluation_seconds``). Only
        the pair's own: the same architecture took 7 s on German question formation and
        100 s on tense reinflection (its test and generalization sets differ)."""
        seconds = self.evaluation_seconds.get(spec.pair)
        return max(seconds) if seconds else None

    def learn_from_records(
        self, profile: Profile, results_dir: str | Path, pairs: list[tuple[str, str]]
    ) -> None:
        """Start from what the profile's recorded runs show: their training seconds per
        epoch, and the final runs' length per pair (``fruit.experiments.planning.cost``); and
        what the cost model predicts per epoch of each pair, for architectures not yet
        measured."""
        for task, arch in pairs:
            self.predicted_seconds_per_epoch[task, arch] = epoch_seconds(profile, task, arch)
        try:
            states = run_states(profile, results_dir)
        except FruitError:  # a damaged record: the sweep itself reports it
            return
        for r in states:
            if r.finished and r.epochs > 0 and r.train_seconds > 0:
                rate = r.train_seconds / r.epochs
                self.recorded_seconds_per_epoch[r.architecture].append(rate)
                self.recorded_pair_seconds_per_epoch[r.task, r.architecture].append(rate)
            if r.finished and r.evaluation_seconds > 0:
                self.evaluation_seconds[r.task, r.architecture].append(r.evaluation_seconds)
        for task, arch in pairs:
            self.final_epochs[task, arch] = final_length(profile, task, arch, states)[0]
            if search_until_early_stopping(profile, arch):
                self.long_search.add((task, arch))

    def rate(self, architecture: str, task: str | None = None) -> float | None:
        """Seconds per epoch expected of a run of ``architecture`` (on ``task``): the
        median of the pair's runs this call finished, else the fastest of the pair's
        recorded runs; else the same of the architecture's runs on any task; else the
        cost model's prediction for the pair (``learn_from_records``), else the median
        of every rate known (None when nothing is known)."""
        if self.pair_seconds_per_epoch.get((task, architecture)):
            return statistics.median(self.pair_seconds_per_epoch[task, architecture])
        if self.recorded_pair_seconds_per_epoch.get((task, architecture)):
            return min(self.recorded_pair_seconds_per_epoch[task, architecture])
        if self.seconds_per_epoch.get(architecture):
            return statistics.median(self.seconds_per_epoch[architecture])
        if self.recorded_seconds_per_epoch.get(architecture):
            return min(self.recorded_seconds_per_epoch[architecture])
        if (task, architecture) in self.predicted_seconds_per_epoch:
            return self.predicted_seconds_per_epoch[task, architecture]
        known = (*self.seconds_per_epoch.values(), *self.recorded_seconds_per_epoch.values())
        everything = [rate for rates in known for rate in rates]
        return statistics.median(everything) if everything else None

    def run_seconds(self, spec: RunSpec, trained: float = 0.0) -> float | None:
        """Seconds ``spec`` still needs on one slot: its architecture's ``rate`` (None
        when nothing is known) times its maximum epochs, at most ``FINAL_EPOCHS`` or,
        for a final run (and a search trial that only early stopping ends), the pair's
        expected length (``learn_from_records``), less the epochs it has ``trained``
        already (such a run past the expected length counts one more epoch)."""
        rate = self.rate(spec.architecture, spec.task)
        if rate is None:
            return None
        like_final = spec.phase == "final" or spec.pair in self.long_search
        expected = FINAL_EPOCHS
        if like_final:
            expected = self.final_epochs.get(spec.pair, FINAL_EPOCHS)
        epochs = min(spec.max_epochs, expected)
        if trained:
            epochs = max(epochs - trained, 1.0 if like_final else 0.0)
        return rate * epochs

    @property
    def slots(self) -> int:
        """The runs at once now (a function is asked at most every ``SLOTS_SECONDS``)."""
        if not callable(self._slots):
            return max(1, self._slots)
        now = time.monotonic()
        if self._slots_read is None or now - self._slots_read[0] >= SLOTS_SECONDS:
            self._slots_read = (now, max(1, self._slots()))
        return self._slots_read[1]

    def estimate(
        self, left: list[RunSpec], trained: dict[str, float] | None = None
    ) -> float | None:
        """Seconds until the runs ``left`` are done: their ``run_seconds`` (less the
        epochs each has ``trained``, by run name), laid out in that order on the run
        slots as the dispatcher hands them out, each to the first slot that is free; the
        last slot's end. A run is not shared between slots, so one long run left on two
        slots takes its whole time, not half of it."""
        trained = trained or {}
        seconds = [self.run_seconds(s, trained.get(s.name, 0.0)) for s in left]
        if None in seconds:
            return None
        free = [0.0] * self.slots  # when each slot is free again (a min-heap); slots as now
        for run in seconds:
            heapq.heapreplace(free, free[0] + run)
        return max(free)

    def show(
        self, left: list[RunSpec], force: bool = False, trained: dict[str, float] | None = None
    ) -> None:
        if self.stream is None:
            return
        eta = self.estimate(left, trained)
        if eta is not None and left:
            eta = max(eta, 1.0)  # runs are left: never "0:00:00"
        remaining = "?" if eta is None else clock(eta)
        line = (
            f"[{self.label}] done {self.done} / running {self.running} / failed {self.failed} "
            f"/ left {self.total - self.done - self.failed - self.running} of {self.total}"
            f" | elapsed {clock(time.monotonic() - self.start)} | remaining ~{remaining}"
        )
        now = time.monotonic()
        if self._tty:
            self.stream.write("\r" + line.ljust(len(self._last_line)))
            self.stream.flush()
        elif (
            force
            or line.split(" | ")[0] != self._last_line.split(" | ")[0]
            or now - self._last_print > LOG_LINE_SECONDS
        ):
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last_print = now
        self._last_line = line

    def end(self) -> None:
        if self.stream is not None and self._tty:
            self.stream.write("\n")
