"""Opening a run folder again (docs/contracts.md §5): record or check ``config.json``,
resume from ``checkpoint.pt``, or -- when either record of an unfinished run is damaged --
keep it as ``<name>.damaged`` and train from scratch, with a warning in warnings.log.
A finished run's records are never replaced. A run resumed by another commit of the code
than the one config.json says started it gets a warning too: its numbers may then differ
from those of an uninterrupted run at either commit."""

from __future__ import annotations

import os
from pathlib import Path

from fruit.errors import FruitError
from fruit.io import PAUSED_MARKER, DamagedRecord
from fruit.training import checkpoints
from fruit.training.checkpoints import BEST, CHECKPOINT, write_log
from fruit.training.config import read_config, write_or_check_config
from fruit.training.data import DATA_MARKER
from fruit.training.records import config_record


def open_folder(run) -> None:
    """Write (or check against) config.json, then resume ``run`` from checkpoint.pt when
    the folder has one and the run is unfinished; ``run`` starts fresh beforehand.

    Where the data folder is one ``fruit`` prepared (it holds ``data.json``), its path
    is not compared: the data are those of the recorded task, data seed, source and
    sizes, which are, so a run folder carried to another machine or checkout goes on
    there. A user's own data folder has no such record, and its path must match."""
    record = config_record(run)
    prepared = (Path(run.config.data_dir) / run.config.task / DATA_MARKER).is_file()
    ignored = frozenset({"data_dir"}) if prepared else frozenset()
    try:
        write_or_check_config(run.dir, record, ignored)
    except DamagedRecord as e:
        if run.finished:
            raise FruitError(
                f"{e}: it records the finished run's settings; restore it, or delete "
                f"{run.dir} to train that run again"
            ) from None
        restart(run, f"config.json could not be read ({e.reason})", "config.json")
        write_or_check_config(run.dir, record, ignored)
    if (run.dir / CHECKPOINT).is_file() and not run.finished:
        try:
            run.state = checkpoints.load_checkpoint(
                run.dir, run.model, run.optimizer, run.scheduler, run.rng
            )
        except FruitError:  # readable, but a state this code cannot go on from
            raise
        except Exception as e:  # noqa: BLE001 - unreadable or damaged: train again
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            restart(run, f"checkpoint.pt could not be restored ({reason})", CHECKPOINT)
        else:
            write_log(run.dir, run.state.log)
            warn_if_other_commit(run, record["provenance"]["git"]["commit"])


def warn_if_other_commit(run, commit: str | None) -> None:
    """Resuming with code of another commit than the run started with: say so once, in
    warnings.log and so in metrics.json (no check where either commit is unknown, e.g.
    outside a git checkout)."""
    started = (read_config(run.dir) or {}).get("provenance", {}).get("git", {}).get("commit")
    if not (commit and started) or commit == started:
        return
    message = (
        f"resumed by commit {commit[:7]}, started by {started[:7]}: the code changed in "
        "between, so the result may differ from an uninterrupted run at either commit"
    )
    if not any(line.endswith(message) for line in checkpoints.read_warnings(run.dir)):
        run.warn(message)


def restart(run, reason: str, damaged: str) -> None:
    """A damaged record of an unfinished run: keep it as ``<name>.damaged``, drop what
    the earlier attempts made, record a warning, and train from scratch."""
    os.replace(run.dir / damaged, run.dir / f"{damaged}.damaged")
    for name in (CHECKPOINT, BEST, "log.csv", PAUSED_MARKER):
        (run.dir / name).unlink(missing_ok=True)
    run.warn(f"{reason}; kept as {damaged}.damaged, the run starts again from scratch")
    run.start_fresh()
