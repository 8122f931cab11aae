"""The report notebooks a sweep executes once every run finished (docs/architecture.md §4,
step 7): ``tables.ipynb``, ``figures.ipynb`` and ``reproduction.ipynb``, in parallel on
the cluster, with their executed copies in ``results/notebooks/<profile>/``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from fruit.errors import FruitError
from fruit.experiments.worker import RunFailed, execute_report

REPORT_NOTEBOOKS = ("tables", "figures", "reproduction")


def run_reports(
    client,
    *,
    notebook_dir: Path,
    results_dir: Path,
    tables_dir: Path,
    figures_dir: Path,
    profile: str,
    allocator: dict[str, str],
    resources: dict | None,
    say: Callable[[str], None],
) -> list[Path]:
    """Execute the report notebooks found in ``notebook_dir`` (next to the train notebook)
    on ``client``'s cluster; returns the executed copies' paths."""
    executed_dir = results_dir / "notebooks" / profile
    outputs = {
        "tables": {"output_dir": str(tables_dir)},
        "figures": {"output_dir": str(figures_dir)},
        "reproduction": {
            "tables_dir": str(tables_dir),
            "figures_dir": str(figures_dir),
        },
    }
    futures = {}
    for name in REPORT_NOTEBOOKS:
        source = notebook_dir / f"{name}.ipynb"
        if not source.is_file():
            raise FruitError(
                f"the {name} notebook {str(source)!r} does not exist; "
                f"use --skip-reports to stop after the runs"
            )
        executed = executed_dir / f"{name}.ipynb"
        say(f"executing {source.name} -> {executed}")
        parameters = {
            "results_dir": str(results_dir),
            "profile": profile,
            **outputs[name],
        }
        futures[name] = client.submit(
            execute_report,
            str(source),
            str(executed),
            parameters,
            allocator,
            key=f"report-{profile}-{name}-{uuid.uuid4().hex[:8]}",  # see Sweep._token
            pure=False,
            resources=resources,
        )
    made = []
    for future in futures.values():
        try:
            made.append(Path(future.result()))
        except RunFailed as e:
            raise FruitError(str(e)) from None
    for name in REPORT_NOTEBOOKS:
        folders = sorted({Path(v) / profile for v in outputs[name].values()})
        say(f"{name}: {', '.join(map(str, folders))}")
    return made
