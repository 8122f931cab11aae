"""A sweep waiting for workers (docs/cluster.md, "Lost jobs" and "When jobs are refused or
do not start"): one line when it has had none for ``no_worker_seconds`` while work waits,
instead of a silent wait, saying what the cluster's jobs do; the cluster's news (a failed
submission, tried again) said as it comes; a FruitError, which ends the command in one
line, where no worker can ever come (every submission refused for good, a job pending
for a reason that never clears); a pause request or the time limit ends such a wait at
once (``wait_for``), and a pause request that the running runs take too long to honour
ends them after ``PAUSE_GRACE_SECONDS``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fruit.errors import FruitError

if TYPE_CHECKING:
    from fruit.experiments.execution.sweeper import Sweeper

# How long a sweep may have no worker before it says so (the jobs of a busy cluster may
# wait longer in its queue, so it says so once per such stretch, and goes on waiting).
NO_WORKER_SECONDS = 300.0
# After a pause request (SIGTERM, Ctrl-C, the PAUSE file), how long a running run may take
# to reach its pause (it pauses before its next batch; one in its final evaluation cannot)
# before the sweep gives it up; it then resumes from its last checkpoint.
PAUSE_GRACE_SECONDS = 120.0


class WorkerWatch:
    """Notices a cluster without a worker while runs wait, and says so once."""

    def __init__(self, sweep: Sweeper):
        self.sweep = sweep
        self.since: float | None = None  # time.monotonic() when the last worker left
        self.said = False

    def check(self) -> None:
        """Called at every poll while work waits for a worker; raises FruitError where
        the cluster says that no worker can ever come."""
        cluster = self.sweep.cluster
        for line in cluster.news():
            self.sweep.say(line)
        try:
            workers = cluster.workers()
        except Exception:  # noqa: BLE001 - asked again at the next poll
            return
        now = time.monotonic()
        if workers:
            self.since, self.said = None, False
            return
        never = cluster.never_starts()
        if never:
            raise FruitError(never)
        if self.since is None:
            self.since = now
        elif not self.said and now - self.since >= self.sweep.no_worker_seconds:
            self.said = True
            minutes = (now - self.since) / 60
            self.sweep.say(f"no worker for {minutes:.0f} min: {cluster.waiting_note()}")


def wait_for(futures: list[Any], sweep: Sweeper) -> bool:
    """Wait until every future is done (True), or until a pause request or the time
    limit's deadline (False; the futures are then cancelled), saying so when no worker
    is there to run them."""
    watch, deadline = WorkerWatch(sweep), sweep.deadlines.deadline
    while not all(f.done() for f in futures):
        if sweep.pausing() or (deadline is not None and time.time() >= deadline):
            for f in futures:
                f.cancel()
            return False
        watch.check()
        time.sleep(sweep.poll_seconds)
    return True
