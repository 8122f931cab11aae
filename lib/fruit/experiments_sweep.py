"""The experiment runner: data, search, selection, final runs, reports -- on Dask.

``Sweep(profile, cluster, ...).run()`` does, in order:

1. write ``plan.json`` (profile, every seed and search draw) into the profile's runs folder;
2. prepare each task's data folder once (one Dask task per task);
3. submit every unfinished search run (a run folder with ``metrics.json`` is complete and
   is skipped; one without it is resumed from its checkpoint by the train notebook);
4. as soon as all search trials of a (task, architecture) pair are finished, pick the
   trial with the lowest best validation cross-entropy (``selection.json``) and submit
   that pair's final runs;
5. retry a failed run up to ``retries`` times, then report it by name with its executed
   notebook and go on with the others;
6. execute ``tables.ipynb``, ``figures.ipynb`` and ``reproduction.ipynb`` when every run
   finished.

With a ``time_limit`` the sweep ends by itself before that many seconds: no run starts
after ``stop_at`` (the limit less a reserve for evaluations and closing down), a run in
progress pauses before it with its whole state in ``checkpoint.pt``, and at the limit
itself anything still going is abandoned (records are written atomically, so nothing is
half-written). The same command later goes on where this one stopped, and a run paused
and resumed ends exactly as an uninterrupted one would.

A one-line progress display shows runs done / running / failed / left and an estimate
of the time remaining.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from fruit.errors import FruitError
from fruit.experiments import (
    RunSpec,
    check_metrics_match,
    final_specs,
    groups,
    plan,
    search_specs,
    select_best,
)
from fruit.experiments_cost import FINAL_EPOCHS
from fruit.experiments_worker import (
    EXECUTED_NOTEBOOK,
    RunFailed,
    allocator_environment,
    execute_report,
    execute_run,
)
from fruit.io import atomic_write_json, read_metrics
from fruit.profiles import Profile

REPORT_NOTEBOOKS = ("tables", "figures", "reproduction")


@dataclasses.dataclass
class Failure:
    name: str
    message: str
    notebook: Path


@dataclasses.dataclass
class SweepResult:
    total: int = 0  # runs planned (search + final)
    found_complete: int = 0  # skipped: metrics.json already there
    trained: int = 0  # executed to completion by this invocation
    failures: list[Failure] = dataclasses.field(default_factory=list)
    skipped_groups: list[str] = dataclasses.field(default_factory=list)
    paused: list[str] = dataclasses.field(default_factory=list)  # stopped at the time limit
    left: int = 0  # runs not finished when a time limit ended the sweep
    reports: list[Path] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and not self.skipped_groups

    @property
    def complete(self) -> bool:
        """Every planned run finished (nothing left for a later call)."""
        return self.ok and self.left == 0


def _cost(spec: RunSpec) -> int:
    """Rough relative cost, to start the slowest runs first (nondeterministic stacks
    are ~10x slower per token, and final runs train to convergence)."""
    stacks = spec.architecture.count("+Nd") * 10 + spec.architecture.count("+Sup")
    return (1 + stacks) * (3 if spec.phase == "final" else 1)


class Progress:
    """Runs done / running / failed / left, and a time estimate from finished runs."""

    def __init__(self, total: int, slots: int, stream: TextIO | None, label: str):
        self.total, self.slots, self.stream, self.label = total, max(1, slots), stream, label
        self.done = self.failed = self.running = 0
        self.durations: dict[str, list[float]] = defaultdict(list)  # seconds per epoch
        self.start = time.monotonic()
        self._last_line = ""
        self._last_print = 0.0
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())

    def finished(self, spec: RunSpec, seconds: float, epochs: float | None = None) -> None:
        """A run of ``spec`` took ``seconds`` for ``epochs`` epochs (default: its maximum)."""
        epochs = epochs if epochs and epochs > 0 else spec.max_epochs
        self.durations[spec.architecture].append(seconds / epochs)

    def estimate(self, left: list[RunSpec]) -> float | None:
        """Seconds until the runs ``left`` are done: each at its architecture's measured
        seconds per epoch times its maximum epochs, at most ``FINAL_EPOCHS`` (early
        stopping ends final runs; fruit.experiments_cost), spread over the run slots."""
        if not left:
            return 0.0
        everything = [r for rates in self.durations.values() for r in rates]
        if not everything:
            return None
        overall = sum(everything) / len(everything)
        work = 0.0
        for s in left:
            rates = self.durations.get(s.architecture)
            work += (sum(rates) / len(rates) if rates else overall) * min(
                s.max_epochs, FINAL_EPOCHS
            )
        return work / self.slots

    def show(self, left: list[RunSpec], force: bool = False) -> None:
        if self.stream is None:
            return
        eta = self.estimate(left)
        remaining = "?" if eta is None else _clock(eta)
        line = (
            f"[{self.label}] done {self.done} / running {self.running} / failed {self.failed} "
            f"/ left {self.total - self.done - self.failed - self.running} of {self.total}"
            f" | elapsed {_clock(time.monotonic() - self.start)} | remaining ~{remaining}"
        )
        now = time.monotonic()
        if self._tty:
            self.stream.write("\r" + line.ljust(len(self._last_line)))
            self.stream.flush()
        elif (
            force
            or line.split(" | ")[0] != self._last_line.split(" | ")[0]
            or now - self._last_print > 60
        ):
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last_print = now
        self._last_line = line

    def end(self) -> None:
        if self.stream is not None and self._tty:
            self.stream.write("\n")


def _write_if_changed(path: Path, record: dict) -> None:
    """Write a JSON record unless the file already holds it (a rerun touches nothing)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")) == json.loads(json.dumps(record)):
            return
    except (FileNotFoundError, json.JSONDecodeError):
        pass
    atomic_write_json(path, record)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Sweep:
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
    ):
        self.profile = profile
        self.cluster = cluster
        self.client = cluster.client
        self.results_dir = Path(results_dir).resolve()
        self.runs_root = self.results_dir / "runs" / profile.name
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
        if time_limit is not None and not time_limit > 0:
            raise FruitError(f"the time limit must be positive, not {time_limit}")
        self.time_limit = time_limit
        # the (task, architecture) pairs this call trains: the profile's, or a subset
        self.pairs = (
            list(groups(profile)) if only is None else [g for g in groups(profile) if g in only]
        )
        if not self.pairs:
            raise FruitError(f"no (task, architecture) pair of profile {profile.name} is selected")
        # the kernels get the launching process's malloc settings, not the Dask workers'
        # (fruit.experiments_worker._ALLOCATOR_PREFIX). Take them before any Dask nanny
        # starts in this process: a nanny writes its settings into os.environ.
        self.allocator = allocator_environment() if allocator is None else dict(allocator)

    # -- helpers ----------------------------------------------------------------

    def say(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _finished(self, spec: RunSpec) -> dict[str, Any] | None:
        folder = spec.folder(self.results_dir)
        metrics = read_metrics(folder)
        if metrics is not None:
            check_metrics_match(spec, metrics, folder)
        return metrics

    def _submit(self, spec: RunSpec, attempt: int):
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
            self.stop_at,
            key=f"run-{self.profile.name}-{spec.name}-attempt{attempt}".replace("/", ":"),
            pure=False,
            retries=0,
            priority=_cost(spec),
            resources=self.cluster.resources,
        )

    # -- phases -----------------------------------------------------------------

    def prepare_data(self) -> None:
        from fruit.training import prepare_data  # the same as `fruit train --generate-data`

        futures = {
            task: self.client.submit(
                prepare_data,
                str(self.data_dir),
                task,
                self.profile.task_data_seed(task),
                self.profile.sizes,
                self.profile.data_source,
                None if self.published_dir is None else str(self.published_dir),
                key=f"data-{self.profile.name}-{task}",
                pure=False,
            )
            for task in dict.fromkeys(t for t, _ in self.pairs)
        }
        for task, future in futures.items():
            try:
                outcome = future.result()
            except FruitError:
                raise
            except Exception as e:
                raise FruitError(
                    f"preparing the data of {task} failed: {type(e).__name__}: {e}"
                ) from e
            self.say(f"data {task}: {outcome} in {self.data_dir / task}")

    def run(self) -> SweepResult:
        self._begin()
        profile, result = self.profile, self.result
        selected = "" if len(self.pairs) == len(profile.pairs) else f" (of {len(profile.pairs)})"
        self.say(
            f"profile {profile.name} ({profile.source}): {len(self.pairs)}{selected} "
            f"(task, architecture) pair(s), {profile.search_trials} search trial(s) + "
            f"{profile.final_runs} final run(s) each; {self.cluster.description}"
        )
        self.prepare_data()
        # Costliest first: idle workers take runs as soon as they are submitted, so the
        # submission order (not only the Dask priority) decides what starts first.
        for spec in sorted(self._collect_finished(), key=_cost, reverse=True):
            self._launch(spec)
        for group in self.search:
            if self._search_closed(group):
                self._start_finals(group)

        while self.pending:
            self.progress.running = self._running()
            self.progress.show(self._left_specs())
            if self.deadline is not None and time.time() >= self.deadline:
                self._abandon()
                break
            done = [f for f in self.pending if f.done()]
            if not done:
                time.sleep(self.poll_seconds)
            for future in done:
                spec, attempt = self.pending.pop(future)
                if future.status == "finished":
                    self._on_result(spec, *future.result())
                else:
                    self._on_failure(spec, attempt, future.exception())
        self.progress.running = 0
        self.progress.show([], force=True)
        self.progress.end()

        result.seconds = time.monotonic() - self._start
        result.left = result.total - result.trained - result.found_complete - len(result.failures)
        self.say(
            f"runs: {result.trained} trained, {result.found_complete} found complete, "
            f"{len(result.failures)} failed, of {result.total}; {_clock(result.seconds)}"
        )
        for f in result.failures:
            self.say(f"  failed: {f.name}: {f.message}\n          notebook: {f.notebook}")
        if result.left and self.time_limit is not None:
            paused = f" ({len(result.paused)} paused mid-run)" if result.paused else ""
            self.say(
                f"time limit reached: {result.left} run(s) left{paused}; every finished run "
                "is recorded, and the same command goes on from here"
            )
        if self.reports:
            if result.complete:
                result.reports = self.run_reports()
            elif result.ok:
                self.say("tables and figures not made: runs are left (see above)")
            else:
                self.say("tables and figures not made: some runs failed or were skipped")
        result.seconds = time.monotonic() - self._start
        return result

    # -- the state of one run() ----------------------------------------------------

    def _begin(self) -> None:
        """Fresh bookkeeping: per group its search specs, finished search metrics and
        failed trials; the pending futures (future -> (spec, attempt))."""
        self._start = time.monotonic()
        self.deadline = self.stop_at = None
        if self.time_limit is not None:
            # to abandon what is still running and close the cluster (a LocalCluster
            # takes a few seconds to stop its workers and their kernels)
            closing = min(30.0, max(5.0, 0.05 * self.time_limit))
            evaluation = min(600.0, 0.1 * self.time_limit)  # a run's final evaluation
            self.deadline = time.time() + self.time_limit - closing
            self.stop_at = self.deadline - evaluation
        self.runs_root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.runs_root / "plan.json", plan(self.profile))
        self.result = SweepResult()
        self.search = {g: search_specs(self.profile, *g) for g in self.pairs}
        self.search_done: dict[tuple[str, str], list[dict]] = defaultdict(list)
        self.search_failed: dict[tuple[str, str], int] = defaultdict(int)
        self.pending: dict[Any, tuple[RunSpec, int]] = {}
        self.result.total = sum(map(len, self.search.values()))
        self.result.total += len(self.search) * self.profile.final_runs
        self.progress = Progress(
            self.result.total, self.cluster.slots(), self.stream, self.profile.name
        )

    def _launch(self, spec: RunSpec, attempt: int = 1) -> None:
        if self.stop_at is not None and time.time() >= self.stop_at:
            return  # left for the next call
        self.pending[self._submit(spec, attempt)] = (spec, attempt)

    def _abandon(self) -> None:
        """At the time limit: give up what is still pending (a run evaluating, one that
        has not reached a pause); its last checkpoint stays for the next call."""
        for future, (spec, _) in list(self.pending.items()):
            future.cancel()
            self.say(f"time limit: {spec.name} left unfinished (resumes from its checkpoint)")
        self.pending.clear()

    def _found_complete(self) -> None:
        self.result.found_complete += 1
        self.progress.done += 1

    def _collect_finished(self) -> list[RunSpec]:
        """Record the search runs already finished; return the others."""
        unfinished = []
        for group, specs in self.search.items():
            for spec in specs:
                metrics = self._finished(spec)
                if metrics is None:
                    unfinished.append(spec)
                else:
                    self.search_done[group].append(metrics)
                    self._found_complete()
        return unfinished

    def _search_closed(self, group) -> bool:
        """Every search trial of the group finished or failed for good."""
        closed = len(self.search_done[group]) + self.search_failed[group]
        return closed == len(self.search[group])

    def _on_result(self, spec: RunSpec, metrics: dict | None, seconds: float) -> None:
        if metrics is None:  # paused at, or not started after, the time limit
            if seconds > 0:
                self.result.paused.append(spec.name)
            return
        self.result.trained += 1
        self.progress.done += 1
        if seconds > 0:
            self.progress.finished(spec, seconds, metrics.get("epochs"))
        if spec.phase == "search":
            group = (spec.task, spec.architecture)
            self.search_done[group].append(metrics)
            if self._search_closed(group):
                self._start_finals(group)

    def _on_failure(self, spec: RunSpec, attempt: int, error: BaseException) -> None:
        message = str(error) or type(error).__name__
        if type(error).__name__ == "KilledWorker":
            message = f"{spec.name}: its worker died repeatedly ({error})"
        if attempt <= self.retries:
            self.say(f"retrying {spec.name} (attempt {attempt + 1}): {message}")
            self._launch(spec, attempt + 1)
            return
        notebook = spec.folder(self.results_dir) / EXECUTED_NOTEBOOK
        self.result.failures.append(Failure(spec.name, message, notebook))
        self.progress.failed += 1
        self.say(f"FAILED {spec.name} after {attempt} attempt(s): {message}")
        if spec.phase == "search":
            group = (spec.task, spec.architecture)
            self.search_failed[group] += 1
            if self._search_closed(group):
                self._start_finals(group)

    def _skip(self, group, why: str) -> None:
        self.result.skipped_groups.append("/".join(group))
        self.result.total -= self.profile.final_runs
        self.progress.total -= self.profile.final_runs
        self.say(f"final runs of {'/'.join(group)} skipped: {why}")

    def _start_finals(self, group) -> None:
        """Submit the group's final runs with the fixed setting or the search winner's."""
        profile, (task, arch) = self.profile, group
        if profile.search_trials == 0:
            lr, b = profile.final_learning_rate, profile.final_batch_tokens
        elif self.search_failed[group]:
            return self._skip(group, "search trials failed")
        else:
            best = select_best(self.search_done[group])
            if best is None:
                return self._skip(group, "no trial has a finite validation cross-entropy")
            lr, b = best["learning_rate"], best["batch_tokens"]
            self._write_selection(group, best)
        for spec in final_specs(profile, task, arch, lr, b):
            if self._finished(spec) is not None:
                self._found_complete()
            else:
                self._launch(spec)

    def _write_selection(self, group, best: dict) -> None:
        keys = ("index", "learning_rate", "batch_tokens", "best_validation_cross_entropy", "status")
        trials = sorted(self.search_done[group], key=lambda m: m["index"])
        _write_if_changed(
            self.runs_root / group[0] / group[1] / "selection.json",
            {
                "criterion": "lowest best_validation_cross_entropy among search trials",
                "winner": best["index"],
                "learning_rate": best["learning_rate"],
                "batch_tokens": best["batch_tokens"],
                "best_validation_cross_entropy": best["best_validation_cross_entropy"],
                "trials": [{k: m.get(k) for k in keys} for m in trials],
            },
        )

    def _running(self) -> int:
        """How many of our pending runs a worker is executing right now."""
        try:
            processing = self.client.processing()
        except Exception:  # noqa: BLE001 - the display must not break the sweep
            return 0
        keys = {f.key for f in self.pending}
        busy = sum(1 for ks in processing.values() for k in ks if k in keys)
        return min(busy, self.cluster.slots())

    def _left_specs(self) -> list[RunSpec]:
        """Runs still to do (pending, plus final runs of groups whose search is open),
        for the time estimate."""
        left = [s for s, _ in self.pending.values()]
        for task, arch in self.search:
            if not self._search_closed((task, arch)):
                left += final_specs(self.profile, task, arch, 0.0, 0)
        return left

    # -- reports ----------------------------------------------------------------

    def run_reports(self) -> list[Path]:
        """Execute tables.ipynb, figures.ipynb and reproduction.ipynb (next to the train
        notebook), in parallel on the cluster; their executed copies go to
        ``results/notebooks/<profile>/``."""
        executed_dir = self.results_dir / "notebooks" / self.profile.name
        outputs = {
            "tables": {"output_dir": str(self.tables_dir)},
            "figures": {"output_dir": str(self.figures_dir)},
            "reproduction": {
                "tables_dir": str(self.tables_dir),
                "figures_dir": str(self.figures_dir),
            },
        }
        futures = {}
        for name in REPORT_NOTEBOOKS:
            source = self.notebook.parent / f"{name}.ipynb"
            if not source.is_file():
                raise FruitError(
                    f"the {name} notebook {str(source)!r} does not exist; "
                    f"use --skip-reports to stop after the runs"
                )
            executed = executed_dir / f"{name}.ipynb"
            self.say(f"executing {source.name} -> {executed}")
            parameters = {
                "results_dir": str(self.results_dir),
                "profile": self.profile.name,
                **outputs[name],
            }
            futures[name] = self.client.submit(
                execute_report,
                str(source),
                str(executed),
                parameters,
                self.allocator,
                key=f"report-{self.profile.name}-{name}",
                pure=False,
                resources=self.cluster.resources,
            )
        made = []
        for future in futures.values():
            try:
                made.append(Path(future.result()))
            except RunFailed as e:
                raise FruitError(str(e)) from None
        for name in REPORT_NOTEBOOKS:
            folders = sorted({Path(v) / self.profile.name for v in outputs[name].values()})
            self.say(f"{name}: {', '.join(map(str, folders))}")
        return made
