"""A run folder's ``runner.log`` as a record of attempts: every attempt at a run gets the
next number, whichever call of ``fruit run`` and whichever Dask retry started it, and an
attempt whose worker vanished mid-run (a cancelled or preempted batch job, one ended by its
walltime, a killed worker) is named as lost when the next one starts.

``runner.log`` lines are written by ``fruit.experiments.execution.worker.execute_run``: ``attempt N
started on ...`` opens an attempt, ``attempt N finished|failed|paused|lost ...`` closes it.
"""

from __future__ import annotations

import re
from pathlib import Path

from fruit.io import RUNNER_LOG

_STARTED = re.compile(r" attempt \d+ started on ")
_ENDED = re.compile(r" attempt \d+ (finished|failed|paused|lost)\b")
_WHERE = re.compile(r" started on (\S+) \(worker pid (\d+)\)")


def attempt_history(folder: Path) -> tuple[int, str | None]:
    """(how many attempts ``runner.log`` records as started, and, when the last of them
    never ended, where it ran -- "HOST (worker pid P)" -- else None)."""
    try:
        lines = (Path(folder) / RUNNER_LOG).read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return 0, None
    started, open_on = 0, None
    for line in lines:
        if _STARTED.search(line):
            started += 1
            where = _WHERE.search(line)
            open_on = f"{where.group(1)} (worker pid {where.group(2)})" if where else "?"
        elif _ENDED.search(line):
            open_on = None
    return started, open_on


def kept_notebook_name(folder: Path, attempt: int) -> Path:
    """Where the executed notebook of attempt ``attempt`` is kept when the next attempt
    starts: ``train.attempt-<attempt>.ipynb``, or the first free ``train.attempt-<k>``
    where a folder of an older fruit already holds that name."""
    folder = Path(folder)
    path = folder / f"train.attempt-{attempt}.ipynb"
    if attempt < 1 or path.exists():
        k = 1
        while (folder / f"train.attempt-{k}.ipynb").exists():
            k += 1
        path = folder / f"train.attempt-{k}.ipynb"
    return path
