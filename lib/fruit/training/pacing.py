"""One call of ``Run.train`` against the clock (``Pacing``): the training seconds over
every attempt at a run, and when to pause -- before a batch that would likely end after
``stop_at`` (two of the slowest batches so far), or once a pause file exists. One call
trains at least one batch before ``stop_at`` can pause it, so that every call that starts
moves its run on (a ``fruit run --time-limit`` loop ends even where starting a kernel took
all but the last seconds before the stop)."""

from __future__ import annotations

import os
import time


class Pacing:
    def __init__(self, seconds_before: float = 0.0, stop_at=None, pause_file=None):
        self.start = time.perf_counter()
        self.seconds_before = seconds_before  # what earlier attempts trained
        self.stop_at = stop_at  # a time.time() value, or None
        self.pause_file = pause_file
        self.slowest_batch = 0.0  # seconds
        self.batches = 0  # trained in this call
        self._batch_start = self.start

    def elapsed(self) -> float:
        """Training seconds over every attempt, up to now."""
        return self.seconds_before + (time.perf_counter() - self.start)

    def should_pause(self) -> bool:
        """Before a batch: would it (with room for another) run past ``stop_at`` (never
        before this call's first batch), or has a pause been requested?"""
        late = self.stop_at is not None and time.time() + 2 * self.slowest_batch > self.stop_at
        if late and self.batches > 0:
            return True
        return self.pause_file is not None and os.path.exists(self.pause_file)

    def batch_started(self) -> None:
        self._batch_start = time.perf_counter()

    def batch_ended(self) -> None:
        self.slowest_batch = max(self.slowest_batch, time.perf_counter() - self._batch_start)
        self.batches += 1
