"""When a sweep's runs must stop (``Deadlines``): under a time limit no run starts after
its stop time, a run in progress pauses before it, and at the deadline whatever is still
pending is abandoned. ``Sweep.run()`` takes them once, when it starts. A batch job's
walltime is a limit of the same kind for the runs on that job's workers (``of_job``):
``fruit.experiments.execution.worker.execute_run`` pauses a run at the earlier of the two stops."""

from __future__ import annotations

import dataclasses
import time

# A run whose pair has a recorded final evaluation stops training this long before the
# deadline: its longest evaluation times EVALUATION_MARGIN, plus EVALUATION_EXTRA seconds
# (a tenth of a shorter limit) for the notebook's last cells and the kernel's end
# (evaluations under load vary: the claims campaign's tense Tf+Nd runs took 419-464 s,
# its Tf runs 88-113 s). At most half the limit.
EVALUATION_MARGIN = 1.5
EVALUATION_EXTRA = 60.0


@dataclasses.dataclass(frozen=True)
class Deadlines:
    """A sweep's time limit as ``time.time()`` values; all None without a limit."""

    time_limit: float | None = None  # seconds, as given
    deadline: float | None = None  # what is still pending is abandoned
    stop_at: float | None = None  # runs pause, where nothing better is known

    @classmethod
    def starting_now(cls, time_limit: float | None) -> Deadlines:
        """Runs pause from ``stop_at`` on, leaving time for a run's final evaluation (a
        tenth of the limit, at most 10 minutes); at ``deadline`` whatever is pending is
        abandoned, leaving time to close the cluster (a LocalCluster takes a few seconds
        to stop its workers)."""
        return cls.starting_at(time.time(), time_limit)

    @classmethod
    def starting_at(cls, start: float, time_limit: float | None) -> Deadlines:
        """As ``starting_now``, for a limit that started at ``start``."""
        if time_limit is None:
            return cls()
        closing = min(30.0, max(5.0, 0.05 * time_limit))
        evaluation = min(600.0, 0.1 * time_limit)
        deadline = start + time_limit - closing
        return cls(time_limit, deadline, deadline - evaluation)

    @classmethod
    def of_job(cls, started: float, walltime: float | None) -> Deadlines:
        """A batch job's walltime as a time limit of its own: a run on one of the job's
        workers pauses before the job ends as a run pauses before ``--time-limit`` (the
        same reserves, counted from the job's start: ``fruit.experiments.clusters.jobs``), so that
        a job ending at its walltime loses no training."""
        return cls.starting_at(started, walltime)

    def stop_at_for(self, evaluation: float | None) -> float | None:
        """When a run must pause to evaluate before the deadline: where its pair has a
        recorded final evaluation of ``evaluation`` seconds, that x ``EVALUATION_MARGIN``
        + ``EVALUATION_EXTRA`` (or a tenth of the limit, if less; at most half the limit)
        before the deadline; else ``stop_at``."""
        if self.deadline is None or self.time_limit is None:
            return None
        if evaluation is None:
            return self.stop_at
        extra = min(EVALUATION_EXTRA, 0.1 * self.time_limit)
        reserve = EVALUATION_MARGIN * evaluation + extra
        return self.deadline - min(reserve, 0.5 * self.time_limit)
