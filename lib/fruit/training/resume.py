"""Opening a run folder again (docs/contracts.md §5): record or check ``config.json``,
resume from ``checkpoint.pt``, or -- when either record of an unfinished run is damaged --
keep it as ``<name>.damaged`` and train from scratch, with a warning in warnings.log.
A finished run's records are never replaced. A run resumed by another commit of the code,
on another kind of CPU or on another device than config.json says started it gets a
warning too: its numbers may then differ from those of an uninterrupted run."""

from __future__ import annotations

import os

from fruit.errors import FruitError, first_few
from fruit.io import CHECKPOINT, RESUME_FILES, RUNNER_LOG, WARNINGS_LOG, DamagedRecord
from fruit.resumed import resume_warnings
from fruit.training import checkpoints
from fruit.training.checkpoints import write_log
from fruit.training.config import read_config, write_or_check_config
from fruit.training.records import config_record


def open_folder(run) -> None:
    """Write (or check against) config.json, then resume ``run`` from checkpoint.pt when
    the folder has one and the run is unfinished; ``run`` starts fresh beforehand.

    A run folder carried to another path or machine goes on there with its data folder
    elsewhere too, when ``checkpoint.pt`` says the data are the same (the digest of every
    example the run reads, ``fruit.training.data.data_digest``); otherwise the data
    folder's path must be the one config.json records."""
    refuse_foreign_folder(run.dir)
    record = config_record(run)
    ignored = DATA_RECORD if _same_data_elsewhere(run, record) else frozenset()
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
            warn_if_resumed_elsewhere(run, record)


def refuse_foreign_folder(run_dir) -> None:
    """A folder without config.json is a run folder only when new or empty, or holding
    only fruit's own files: what a restart leaves (warnings.log, ``*.damaged``), an
    interrupted write's ``.NAME.*.tmp``, and what a sweep's worker writes before the run
    opens its folder (runner.log, the executed train notebook and earlier attempts'
    ``train.attempt-K.ipynb``: fruit.experiments.execution.worker). Files of anyone
    else's are not overwritten: refused in one line."""
    if not run_dir.is_dir() or (run_dir / "config.json").exists():
        return
    ours = lambda name: (  # noqa: E731
        name in (WARNINGS_LOG, RUNNER_LOG)
        or name.endswith((".damaged", ".ipynb"))
        or (name.startswith(".") and name.endswith(".tmp"))
    )
    theirs = sorted(p.name for p in run_dir.iterdir() if not ours(p.name))
    if theirs:
        shown = ", ".join(first_few(theirs))
        raise FruitError(
            f"{run_dir} holds files but no config.json ({shown}), so it is not a run "
            "folder; give a new or empty folder (--run-dir or --output-dir)"
        )


# what config.json says of the data folder: its path, and the seed and source of the data
# as its data.json records them (fruit.training.data.data_origin)
DATA_RECORD = frozenset({"data_dir", "data_seed", "data_source"})


def _same_data_elsewhere(run, record: dict) -> bool:
    """The unfinished run's data folder moved or lost its data.json (config.json records
    another path, seed or source) and its checkpoint says the data there are the ones it
    trained on (config.json keeps what it recorded of them)."""
    try:
        old = read_config(run.dir)
    except DamagedRecord:
        return False
    moved = old is not None and any(old.get(k) != record.get(k) for k in DATA_RECORD)
    if not moved or run.finished or not (run.dir / CHECKPOINT).is_file():
        return False
    return checkpoints.saved_data_digest(run.dir) == run.data_digest


def warn_if_resumed_elsewhere(run, record: dict) -> None:
    """Resuming with code of another commit, on another kind of CPU or on another device
    than the run started with (config.json's record of its first attempt): say so once, in
    warnings.log and so in metrics.json, where the tables' captions find it
    (``fruit.resumed.resumed_elsewhere``)."""
    started = read_config(run.dir) or {}
    said = checkpoints.read_warnings(run.dir)
    for message in resume_warnings(started, record):
        if not any(line.endswith(message) for line in said):
            run.warn(message)


def restart(run, reason: str, damaged: str) -> None:
    """A damaged record of an unfinished run: keep it as ``<name>.damaged``, drop what
    the earlier attempts made, record a warning, and train from scratch."""
    os.replace(run.dir / damaged, run.dir / f"{damaged}.damaged")
    for name in (*RESUME_FILES, "log.csv"):
        (run.dir / name).unlink(missing_ok=True)
    run.warn(f"{reason}; kept as {damaged}.damaged, the run starts again from scratch")
    run.start_fresh()
