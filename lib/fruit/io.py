"""Atomic file writing: a reader never sees a half-written file.

Everything is written to a temporary file in the destination folder and then
renamed over the destination (``os.replace`` is atomic on POSIX and Windows).
Plain Python, no torch: checkpoints are saved through ``atomic_open`` by
``fruit.training.checkpoints``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from fruit.errors import STORAGE_ERRNOS, FruitError, storage_error

# A run folder's marker that its training paused at a time limit (fruit.training.Run.train
# writes it, removes it when training goes on); the runner reads it to tell a paused run
# from a failed one.
PAUSED_MARKER = "paused.json"
# What training keeps beside the records: the whole state to go on from, and the best
# parameters so far (fruit.training.checkpoints). With the marker above they are a paused
# run's resume files, what another machine needs to go on from where it paused.
CHECKPOINT = "checkpoint.pt"
BEST = "best.pt"
RESUME_FILES = (CHECKPOINT, BEST, PAUSED_MARKER)
# A run folder's record of what went wrong and was mended (a damaged checkpoint.pt made
# the run start again, ...), one line each (fruit.training.checkpoints); metrics.json
# repeats them under "warnings" and the sweep's runner.log notes them.
WARNINGS_LOG = "warnings.log"
# What a sweep's worker writes in a run folder (fruit.experiments.execution.worker): its
# record of attempts, and the train notebook as papermill executed it (an earlier
# attempt's is kept as train.attempt-K.ipynb).
RUNNER_LOG = "runner.log"
EXECUTED_NOTEBOOK = "train.ipynb"
# A failed write on a file system with less room than this is reported as a full disk.
FULL_BELOW_BYTES = 1 << 20


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs):
    """Open a temporary sibling of ``path`` for writing; rename it to ``path`` on success.

    On an exception the temporary file is removed and ``path`` is left untouched. A
    folder that cannot be written (read-only, no permission) or a full disk raises
    ``fruit.errors.StorageError`` naming ``path`` in one line, whatever library was
    writing (torch reports a full disk as a RuntimeError about stream positions).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.{writer_tag()}", suffix=".tmp"
        )
    except OSError as e:
        if e.errno in STORAGE_ERRNOS:
            raise storage_error(path, e) from None
        raise
    try:
        if "b" not in mode:
            kwargs.setdefault("encoding", "utf-8")
            kwargs.setdefault("newline", "\n")
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException as e:
        # is the disk full? asked before the temporary file goes: removing it frees what
        # it held (a checkpoint of a few MB would leave room enough to hide the cause)
        full = isinstance(e, Exception) and not isinstance(e, FruitError) and disk_full(path.parent)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in STORAGE_ERRNOS:
            raise storage_error(path, e) from None
        if full:
            raise storage_error(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))) from None
        raise


# Temporary files (``.NAME.~PID@HOST~XXXX.tmp``) and staging folders (``.TASK.~PID@HOST~
# XXXX.partial``, fruit.training.data) name their writer, so that the next call that owns
# the folder can tell what a killed writer left from a write in progress
# (``remove_leftovers``). One written elsewhere, or by an older fruit, is a leftover
# once it is this old: no write takes a day.
LEFTOVER_SECONDS = 24 * 3600
_WRITER = re.compile(r"~(\d+)@([^~/]+)~")


def writer_tag() -> str:
    """``~PID@HOST~``: this process, as temporary names carry it."""
    return f"~{os.getpid()}@{socket.gethostname()}~"


def is_leftover(path: Path) -> bool:
    """Whether the temporary file or folder ``path`` is what an interrupted write left:
    its writer (named in it) no longer runs on this machine; or, written on another
    machine or by an older fruit, it is ``LEFTOVER_SECONDS`` old."""
    match = _WRITER.search(path.name)
    if match and match.group(2) == socket.gethostname():
        return not _running(int(match.group(1)))
    try:
        return time.time() - path.lstat().st_mtime > LEFTOVER_SECONDS
    except OSError:
        return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: it exists
        return True
    return True


def remove_leftovers(folder: str | os.PathLike, patterns=(".*.tmp",)) -> list[Path]:
    """Remove the leftovers of interrupted writes (``is_leftover``) matching ``patterns``
    in ``folder`` (not below it); what could not be removed (a read-only folder) stays.
    Called by whoever owns the folder next: a run's folder by the run, a data root by
    ``prepare_data``, the runs of a profile by the sweep. Returns what was removed."""
    removed = []
    for pattern in patterns:
        for path in Path(folder).glob(pattern):
            if not is_leftover(path):
                continue
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except OSError:
                continue
            removed.append(path)
    return removed


def check_folder(path: str | os.PathLike, option: str) -> None:
    """``path`` can become a folder to write into: it is a folder, or does not exist and
    no file stands where it or a folder above it would be (a one-line FruitError naming
    ``option`` otherwise), checked before any work starts."""
    path = Path(path)
    for place in (path, *path.parents):
        if place.exists():
            if not place.is_dir():
                raise FruitError(f"{option} {path}: {place} is a file, not a folder")
            return


def check_outside_records(path: str | os.PathLike, option: str, results) -> None:
    """An output folder (tables, figures) does not lie in the run records
    (``results/runs``), which are committed: a one-line FruitError naming ``option``."""
    records = (Path(results) / "runs").resolve()
    place = Path(path).resolve()
    if place == records or records in place.parents:
        raise FruitError(
            f"{option} {path} lies inside the run records ({Path(results) / 'runs'}); "
            "give a folder outside it"
        )


def disk_full(folder: Path) -> bool:
    """Whether the file system of ``folder`` has (almost) no space left."""
    try:
        stats = os.statvfs(folder)
    except (OSError, AttributeError):  # no statvfs (Windows) or the folder is gone
        return False
    return stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


class DamagedRecord(FruitError):
    """A JSON record (metrics.json, config.json, data.json) that is not the JSON object
    fruit wrote: edited, truncated or broken outside fruit (fruit writes atomically)."""

    def __init__(self, path: str | os.PathLike, reason: str, what_to_do: str = ""):
        super().__init__(
            f"{path} is damaged ({reason})" + (f"; {what_to_do}" if what_to_do else "")
        )
        self.path, self.reason, self.what_to_do = Path(path), reason, what_to_do

    def __reduce__(self):  # pickled with its fields: a Dask task's error keeps its message
        return (type(self), (self.path, self.reason, self.what_to_do))


_JSON_KINDS = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def read_json_record(path: str | os.PathLike, what_to_do: str = "") -> dict[str, Any] | None:
    """The JSON object in ``path``; None when the file is absent; a one-line
    ``DamagedRecord`` naming it (and ``what_to_do``) when it is not a JSON object."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise DamagedRecord(path, f"not valid JSON: {e}", what_to_do) from None
    if not isinstance(record, dict):
        kind = "null" if record is None else _JSON_KINDS.get(type(record), type(record).__name__)
        raise DamagedRecord(path, f"{kind}, not a JSON object", what_to_do)
    return record


def read_metrics(folder: str | os.PathLike) -> dict[str, Any] | None:
    """A run folder's ``metrics.json``, or None while the run is unfinished (docs/contracts.md §5)."""
    return read_json_record(Path(folder) / "metrics.json", "remove it to rerun that run")
