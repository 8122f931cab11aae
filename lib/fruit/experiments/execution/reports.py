"""The report a sweep makes once every run finished (docs/architecture.md §4, step 7):
``notebooks/report.ipynb``, executed on the cluster, which calls ``fruit.reporting.report``
exactly as ``fruit report`` does, so both write the same files for the same runs. Its
executed copy goes to ``results/notebooks/<profile>/report.ipynb``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from fruit.errors import FruitError, StageFailed
from fruit.experiments.clusters.checks import REPORT_NOTEBOOK
from fruit.experiments.execution.worker import RunFailed, execute_report

POLL_SECONDS = 0.2  # how often the wait for the report notebook looks for a stop


class ReportsStopped(Exception):
    """A signal or the time limit's end stopped the report notebook (every run is
    recorded)."""


def profile_reference(profile) -> str:
    """What the report notebook gets to find the very profile the sweep ran: a shipped
    profile's name, or the absolute path of the user's file (its name alone would be
    looked up among the shipped ones, or not found)."""
    if profile.source == f"fruit/profiles/{profile.name}.toml":
        return profile.name
    return str(Path(profile.source).resolve())


def _guarded(execute, *args):
    """``execute(*args)``, its failure returned rather than raised: Dask logs a task that
    raises with its whole traceback, and the one line fruit prints is the message."""
    try:
        return execute(*args)
    except RunFailed as e:
        return e


def run_reports(
    client,
    *,
    notebook_dir: Path,
    results_dir: Path,
    tables_dir: Path,
    figures_dir: Path,
    profile,
    allocator: dict[str, str],
    resources: dict | None,
    say: Callable[[str], None],
    stopped: Callable[[], bool] = lambda: False,
) -> list[Path]:
    """Execute the report notebook found in ``notebook_dir`` (next to the train notebook)
    on ``client``'s cluster for ``profile`` (``fruit.profiles.Profile``); returns the
    executed copy's path. A failing report is a ``StageFailed`` (exit status 1); a wait
    that ``stopped()`` ends (a signal, the time limit's end) is ``ReportsStopped`` (exit
    status 75; 2 where the reports were all a call had to do: ``SweepResult.stalled``)."""
    source = notebook_dir / f"{REPORT_NOTEBOOK}.ipynb"
    if not source.is_file():
        raise FruitError(
            f"the report notebook {str(source)!r} does not exist; "
            "use --skip-reports to stop after the runs"
        )
    executed = results_dir / "notebooks" / profile.name / source.name
    say(f"executing {source.name} -> {executed}")
    parameters = {
        "results_dir": str(results_dir),
        "profile": profile_reference(profile),
        "tables_dir": str(tables_dir),
        "figures_dir": str(figures_dir),
    }
    future = client.submit(
        _guarded,
        execute_report,
        str(source),
        str(executed),
        parameters,
        allocator,
        key=f"report-{profile.name}-{uuid.uuid4().hex[:8]}",  # see Sweep._token
        pure=False,
        resources=resources,
    )
    while not future.done():  # a stop (SIGINT, SIGTERM) ends the wait, not the notebook's end
        if stopped():
            future.cancel()
            raise ReportsStopped(
                "reports stopped: every run is recorded; the same command (or `fruit report "
                f"--profile {profile_reference(profile)} --results {results_dir} --out "
                f"{tables_dir} --figures {figures_dir}`) makes them"
            )
        time.sleep(POLL_SECONDS)
    made = future.result()
    if isinstance(made, RunFailed):
        raise StageFailed(f"the reports failed after every run finished: {made}")
    made = Path(made)
    say(f"reports: {tables_dir / profile.name}, {figures_dir / profile.name}")
    return [made]
