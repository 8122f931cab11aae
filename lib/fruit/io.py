"""Atomic file writing: a reader never sees a half-written file.

Everything is written to a temporary file in the destination folder and then
renamed over the destination (``os.replace`` is atomic on POSIX and Windows).
Plain Python, no torch: checkpoints are saved through ``atomic_open`` by
``fruit.training.checkpoints``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

# A run folder's marker that its training paused at a time limit (fruit.training.Run.train
# writes it, removes it when training goes on); the runner reads it to tell a paused run
# from a failed one.
PAUSED_MARKER = "paused.json"


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs):
    """Open a temporary sibling of ``path`` for writing; rename it to ``path`` on success.

    On an exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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


def read_metrics(folder: str | os.PathLike) -> dict[str, Any] | None:
    """A run folder's ``metrics.json``, or None while the run is unfinished (docs/contracts.md §5)."""
    path = Path(folder) / "metrics.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:  # never written by fruit (atomic)
        from fruit.errors import FruitError

        raise FruitError(f"{path} is not valid JSON ({e}); remove it to rerun that run") from e
