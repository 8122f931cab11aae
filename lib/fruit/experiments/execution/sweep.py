"""The experiment runner: data, search, selection, final runs, reports -- on Dask.

``Sweep(profile, cluster, ...).run()`` does, in order:

1. write ``plan.json`` (profile, every seed and search draw) into the profile's runs folder;
2. prepare each task's data folder once (one Dask task per task);
3. submit every unfinished search run (a run folder with ``metrics.json`` is complete and
   is skipped; one without it is resumed from its checkpoint by the train notebook);
4. as soon as all search trials of a (task, architecture) pair are finished, pick the
   trial with the lowest best validation cross-entropy (``selection.json``) and submit
   that pair's final runs;
5. retry a failed run up to ``retries`` times (not one its notebook refused with fruit's
   own error: bad settings, damaged or unwritable files fail the same way every time),
   then report it by name with its executed notebook and go on with the others;
6. execute ``report.ipynb`` (``fruit.reporting.report``, as ``fruit report``) when every run
   finished.

With a ``time_limit`` the sweep ends by itself before that many seconds: no run starts
after ``stop_at`` (the limit less a reserve for evaluations and closing down), a run in
progress pauses before it with its whole state in ``checkpoint.pt``, and at the limit
itself anything still going is abandoned (records are written atomically, so nothing is
half-written). The same command later goes on where this one stopped, and a run paused
and resumed ends exactly as an uninterrupted one would.

A one-line progress display (``fruit.experiments.execution.progress``) shows runs done / running
/ failed / left and an estimate of the time remaining. The bookkeeping of one ``run()`` (what each finished or failed run
unlocks next) is ``fruit.experiments.execution.schedule``; the report notebooks,
``fruit.experiments.execution.reports``.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from fruit.errors import FruitError
from fruit.experiments.execution.deadlines import Deadlines
from fruit.experiments.execution.outcome import SweepResult
from fruit.experiments.execution.progress import Progress
from fruit.experiments.execution.reports import ReportsStopped, run_reports
from fruit.experiments.execution.schedule import Schedule, planned_runs
from fruit.experiments.execution.watch import NO_WORKER_SECONDS, wait_for
from fruit.experiments.execution.worker import allocator_environment, execute_run
from fruit.experiments.planning.plan import RunSpec, check_metrics_match, plan, relative_cost
from fruit.experiments.planning.reuse import same_run_elsewhere, take_over
from fruit.experiments.planning.run_state import check_records_agree
from fruit.io import atomic_write_json, read_metrics, remove_leftovers
from fruit.profiles import Profile

PAUSE_FILE = "PAUSE"  # in runs/<profile>/: while it exists, runs pause and none start


def _prepare_data_on_worker(*args) -> str | FruitError:
    """``fruit.training.data.prepare_data`` on a worker (as `fruit train --generate-data`),
    with a FruitError (bad input: no network, a folder without the published files)
    returned rather than raised, so that the worker does not log it with a traceback
    before `fruit run` prints it as one line."""
    from fruit.training.data import prepare_data

    try:
        return prepare_data(*args)
    except FruitError as e:
        return e


def prepare_data(
    client, profile: Profile, tasks, data_dir: Path, published, say, wait
) -> list[str] | None:
    """Each task's data folder made (or checked) once, one Dask task per task, before any
    run starts; bad input (no network, a folder without the published files) ends the
    sweep with its one line. ``wait(futures)`` waits for them (``watch.wait_for``). What
    was done for each task ("generated", "found", ...); None when a pause request or the
    time limit came first."""
    futures = {
        task: client.submit(
            _prepare_data_on_worker,
            str(data_dir),
            task,
            profile.task_data_seed(task),
            profile.sizes,
            profile.data_source,
            None if published is None else str(published),
            key=f"data-{profile.name}-{task}-{uuid.uuid4().hex[:8]}",  # see Sweep._token
            pure=False,
        )
        for task in tasks
    }
    if not wait(list(futures.values())):
        return None
    outcomes = []
    for task, future in futures.items():
        try:
            outcome = future.result()
        except Exception as e:
            raise FruitError(f"preparing the data of {task} failed: {type(e).__name__}: {e}") from e
        if isinstance(outcome, FruitError):  # bad input, said in one line
            raise outcome
        say(f"data {task}: {outcome} in {data_dir / task}")
        outcomes.append(outcome)
    return outcomes


class Sweep:
    """A profile's runs on a Dask cluster (see the module's docstring); ``run()`` does it."""

    def __init__(
        self,
        profile: Profile,
        cluster,
        *,
        results_dir: str | Path = "results",
        data_dir: str | Path | None = None,
        notebook: str | Path,
        device: str = "auto",
        retries: int = 2,
        reports: bool = True,
        published_dir: str | Path | None = None,
        figures_dir: str | Path = "figures",
        time_limit: float | None = None,
        only: tuple[tuple[str, str], ...] | None = None,
        allocator: dict[str, str] | None = None,
        stream: TextIO | None = sys.stdout,
        poll_seconds: float = 1.0,
        no_worker_seconds: float = NO_WORKER_SECONDS,
    ):
        self.profile = profile
        self.cluster = cluster
        self.client = cluster.client
        self.results_dir = Path(results_dir).resolve()
        self.runs_root = self.results_dir / "runs" / profile.name
        self.pause_file = self.runs_root / PAUSE_FILE
        self.data_dir = Path(data_dir or Path("data") / profile.name).resolve()
        self.notebook = Path(notebook).resolve()
        if not self.notebook.is_file():
            raise FruitError(f"train notebook {str(self.notebook)!r} does not exist")
        self.device = device
        self.published_dir = None if published_dir is None else Path(published_dir).resolve()
        self.retries = retries
        self.reports = reports
        self.tables_dir = self.results_dir / "tables"
        self.figures_dir = Path(figures_dir).resolve()
        self.stream = stream
        self.poll_seconds = poll_seconds
        self.no_worker_seconds = no_worker_seconds  # then a line says the sweep has none
        if time_limit is not None and not time_limit > 0:
            raise FruitError(f"the time limit must be positive, not {time_limit}")
        self.time_limit = time_limit
        # the (task, architecture) pairs this call trains: the profile's, or a subset
        self.pairs = [p for p in profile.pairs if only is None or p in only]
        if not self.pairs:
            raise FruitError(f"no (task, architecture) pair of profile {profile.name} is selected")
        # the kernels get the launching process's malloc settings, not the Dask workers'
        # (fruit.experiments.execution.worker._ALLOCATOR_PREFIX). Take them before any Dask nanny
        # starts in this process: a nanny writes its settings into os.environ.
        self.allocator = allocator_environment() if allocator is None else dict(allocator)
        self.deadlines = Deadlines()  # set by run(): when runs pause, when it ends
        self.paused_on_request = False
        self._submitted: Counter[str] = Counter()  # run name -> submissions (Dask keys)
        # Dask keys are unique per sweep too: a scheduler may still hold a key that an
        # earlier sweep cancelled (a time limit, Ctrl-C), and a future submitted under it
        # again can come back cancelled (seen with two sweeps on one cluster in a row)
        self._token = uuid.uuid4().hex[:8]
        self._start = time.monotonic()
        self.progress: Progress | None = None  # set by run(): what the runs have taken
        self.ready_at: float | None = None  # set by run(): time.time() the data was ready
        self.stage = "runs"  # then "reports" (what a signal stops: fruit.commands.run)
        self._reports_stopped = False

    # -- helpers ----------------------------------------------------------------

    def say(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(text + "\n")
            self.stream.flush()

    def finished_metrics(self, spec: RunSpec) -> dict[str, Any] | None:
        """The run's metrics.json, when it finished (and holds this very run), else None.
        A run not yet started here whose very same run another profile of the profile's
        ``reuse`` holds is taken over first (``fruit.experiments.planning.reuse``)."""
        folder = spec.folder(self.results_dir)
        same = same_run_elsewhere(spec, self.profile, self.results_dir, self.data_dir)
        if same is not None:
            take_over(same, self.profile, self.results_dir)
            state = "finished" if same.finished else "paused; it goes on here"
            self.say(f"{spec.name}: the same run as {same.source_name} ({state}), taken over")
        metrics = read_metrics(folder)
        if metrics is not None:
            check_metrics_match(spec, metrics, folder)
            check_records_agree(folder, metrics)  # not a hand-edited config.json
        return metrics

    def stop_at_for(self, spec: RunSpec) -> float | None:
        """When ``spec`` must pause under the time limit (``Deadlines.stop_at_for``, with
        its pair's recorded final evaluation where there is one)."""
        evaluation = None if self.progress is None else self.progress.evaluation(spec)
        return self.deadlines.stop_at_for(evaluation)

    def _key(self, spec: RunSpec) -> str:
        """The Dask key of the run's current submission (shown on the dashboard)."""
        name = spec.name.replace("/", ":")
        return f"run-{self.profile.name}-{name}-{self._submitted[spec.name]}-{self._token}"

    def submit(self, spec: RunSpec, attempt: int):
        """Submit one attempt at a run to the cluster; returns its future (its key is
        the run's name and how many times this sweep has submitted it)."""
        self._submitted[spec.name] += 1  # a run goes on in a new job: a key of its own
        params = spec.parameters(
            self.profile,
            data_dir=self.data_dir,
            run_dir=spec.folder(self.results_dir),
            results_dir=self.results_dir,
            device=self.device,
            threads=self.cluster.threads,
        )
        return self.client.submit(
            execute_run,
            spec.name,
            str(self.notebook),
            params,
            attempt,
            self.cluster.threads,
            self.allocator,
            self.stop_at_for(spec),
            str(self.pause_file),
            getattr(self.cluster, "walltime", None),  # positional, as every argument here
            None if self.progress is None else self.progress.evaluation(spec),
            key=self._key(spec),
            pure=False,
            retries=0,
            priority=relative_cost(spec),
            resources=self.cluster.resources,
        )

    # -- phases -----------------------------------------------------------------

    def run(self) -> SweepResult:
        self._start = time.monotonic()
        self.stage, self._reports_stopped = "runs", False
        self.deadlines = Deadlines.starting_now(self.time_limit)
        self.paused_on_request = False
        self.runs_root.mkdir(parents=True, exist_ok=True)
        for folder in [self.runs_root, *(self.runs_root / t / a for t, a in self.pairs)]:
            remove_leftovers(folder)  # plan.json's, selection.json's of a killed call
        if self.pause_file.exists():
            self.pause_file.unlink()
            self.say(f"removed {self.pause_file} (a pause request from an earlier call)")
        atomic_write_json(self.runs_root / "plan.json", plan(self.profile))
        result = SweepResult(total=planned_runs(self))
        progress = Progress(result.total, self.cluster.slots, self.stream, self.profile.name)
        progress.learn_from_records(self.profile, self.results_dir, self.pairs)
        self.progress = progress
        schedule = Schedule(self, result, progress)

        profile = self.profile
        selected = "" if len(self.pairs) == len(profile.pairs) else f" (of {len(profile.pairs)})"
        self.say(
            f"profile {profile.name} ({profile.source}): {len(self.pairs)}{selected} "
            f"(task, architecture) pair(s), {profile.search_trials} search trial(s) + "
            f"{profile.final_runs} final run(s) each; {self.cluster.description}"
        )
        tasks = dict.fromkeys(t for t, _ in self.pairs)
        wait = lambda futures: wait_for(futures, self)  # noqa: E731
        made = prepare_data(
            self.client, profile, tasks, self.data_dir, self.published_dir, self.say, wait
        )
        if made is None:
            self.say("stopped before the data was ready (pause request or time limit)")
        self.ready_at = None if made is None else time.time()
        result.progressed = made is not None and "generated" in made
        schedule.execute(start=made is not None)
        self.paused_on_request = self.pausing()
        result.time_limited = self.time_limit is not None and not self.paused_on_request
        self.pause_file.unlink(missing_ok=True)  # done: the next call starts afresh

        result.seconds = time.monotonic() - self._start
        result.left = result.total - result.trained - result.found_complete - len(result.failures)
        limited = self.time_limit is not None or self.paused_on_request
        for line in result.summary(
            limited, self.paused_on_request, self.runs_root, self.profile.sizes["train"]
        ):
            self.say(line)
        if self.reports:
            if result.complete:
                self.stage = "reports"
                try:
                    result.reports = self.run_reports()
                except ReportsStopped as e:
                    result.reports_stopped = True
                    result.reports_out_of_time = not self._reports_stopped  # not a signal
                    self.say(str(e))
            elif result.ok:
                self.say("tables and figures not made: runs are left (see above)")
            else:
                self.say("tables and figures not made: some runs failed or were skipped")
        result.seconds = time.monotonic() - self._start
        return result

    def request_pause(self) -> None:
        """Stop starting runs, and have the running ones pause before their next batch
        (resumably, as at a time limit): what SIGTERM to `fruit run` does; a user may
        also create the file ``runs/<profile>/PAUSE`` under the results folder."""
        self.pause_file.parent.mkdir(parents=True, exist_ok=True)
        self.pause_file.touch()

    def pausing(self) -> bool:
        return self.pause_file.exists()

    def stop_reports(self) -> None:
        """Stop the report notebook (a signal during the reports: every run is already
        recorded, and the same command, or `fruit report`, makes them later); the end of
        ``--time-limit`` stops them the same way."""
        self._reports_stopped = True

    def _past_deadline(self) -> bool:
        """The time limit's end has come (the reports stop there as at a signal)."""
        deadline = self.deadlines.deadline
        return deadline is not None and time.time() >= deadline

    def run_reports(self) -> list[Path]:
        """Execute report.ipynb (next to the train notebook) on the cluster: the same
        ``fruit.reporting.report`` as ``fruit report``; its executed copy goes to
        ``results/notebooks/<profile>/`` (``fruit.experiments.execution.reports``)."""
        return run_reports(
            self.client,
            notebook_dir=self.notebook.parent,
            results_dir=self.results_dir,
            tables_dir=self.tables_dir,
            figures_dir=self.figures_dir,
            profile=self.profile,
            allocator=self.allocator,
            resources=self.cluster.resources,
            say=self.say,
            stopped=lambda: self._reports_stopped or self._past_deadline(),
        )
