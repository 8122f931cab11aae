"""What a run folder keeps while training: ``checkpoint.pt``, ``best.pt`` and ``log.csv``
(docs/contracts.md §5, docs/architecture.md §5).

``checkpoint.pt`` holds everything needed to go on exactly where training stopped: the
parameters, the optimiser and scheduler, the torch, CUDA and shuffling generator states,
and the ``TrainingState`` (counters, position in the epoch, the log so far). The state is
stored as a plain dict of its fields under ``"state"``, the format the code has written
since the first runs, so checkpoints of runs started before ``TrainingState`` existed
resume unchanged (and the other way round). It also keeps the digest of the run's data
(``"data_digest"``; absent in older checkpoints), by which a run carried to another path
goes on there (``fruit.training.resume``). ``best.pt`` holds the best parameters by
validation cross-entropy; evaluation uses them.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fruit.errors import FruitError
from fruit.io import (
    BEST,
    CHECKPOINT,
    RESUME_FILES,
    WARNINGS_LOG,
    DamagedRecord,
    atomic_open,
    atomic_write_text,
)

LOG_COLUMNS = (
    "examples_seen",
    "epoch",
    "learning_rate",
    "train_loss",
    "validation_cross_entropy",
    "seconds",
)
WARNINGS = WARNINGS_LOG  # what went wrong and was mended, one line each (fruit.io)


@dataclass
class TrainingState:
    """Where a run's training stands (everything but the tensors and generators)."""

    epoch: int = 0  # completed epochs
    batch_index: int = 0  # next batch of the current epoch
    epoch_rng_state: tuple | None = None  # the shuffling generator at the epoch's start
    examples_seen: int = 0
    since_checkpoint: int = 0  # examples since the last checkpoint (carries over epochs)
    loss_sum: float = 0.0  # training loss summed over the examples since the last checkpoint
    loss_count: int = 0
    best: float | None = None  # best validation cross-entropy
    bad_checkpoints: int = 0  # checkpoints since the last strict improvement
    stopped: bool = False  # early stopping fired
    training_done: bool = False
    diverged: str | None = None  # reason, when the loss became nan/inf
    seconds: float = 0.0  # training time so far, over every attempt
    log: list[dict] = field(default_factory=list)  # the rows of log.csv

    def as_dict(self) -> dict:
        """The fields as the plain dict that ``checkpoint.pt`` stores under "state"."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, record: dict, where: Path | str = "checkpoint") -> TrainingState:
        """The state of a checkpoint's "state" dict (any version of the code wrote)."""
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [name for name in names if name not in record]
        if missing:
            raise FruitError(
                f"{where}: its training state lacks {', '.join(missing)}; "
                "delete the run folder to train it again"
            )
        return cls(**{name: record[name] for name in names})

    def count_batch(self, size: int, loss: float) -> None:
        """A training batch of ``size`` strings with mean loss ``loss`` was applied."""
        self.examples_seen += size
        self.since_checkpoint += size
        self.loss_sum += loss * size
        self.loss_count += size

    def judge(self, score: float, early_stop_patience: int) -> bool:
        """Record a validation score; True when it is a new best (strictly lower, finite):
        then ``best.pt`` must be written. A nan/inf score makes the run diverged."""
        if not math.isfinite(score):
            self.diverged = (
                f"validation cross-entropy became {score} at examples_seen={self.examples_seen}"
            )
        improved = self.best is None or score < self.best  # strict, as the scheduler
        if improved and self.diverged is None:
            self.best, self.bad_checkpoints = score, 0
            return True
        self.bad_checkpoints += 1
        self.stopped = self.bad_checkpoints >= early_stop_patience
        return False

    def log_checkpoint(
        self, score: float, learning_rate: float, train_size: int, checkpoint_every: int
    ) -> dict:
        """Append this checkpoint's row to the log and start the next interval."""
        row = {
            "examples_seen": self.examples_seen,
            "epoch": round(self.examples_seen / train_size, 6),
            "learning_rate": learning_rate,
            "train_loss": self.loss_sum / max(self.loss_count, 1),
            "validation_cross_entropy": score,
            "seconds": round(self.seconds, 3),
        }
        self.log.append(row)
        self.since_checkpoint %= checkpoint_every
        self.loss_sum, self.loss_count = 0.0, 0
        return row


def atomic_torch_save(path: Path, obj) -> None:
    """``torch.save`` into a temporary sibling, renamed into place (``fruit.io``)."""
    with atomic_open(path, "wb") as f:
        torch.save(obj, f)


def save_checkpoint(
    run_dir: Path,
    model,
    optimizer,
    scheduler,
    rng: random.Random,
    state: TrainingState,
    data_digest: str | None = None,
) -> None:
    """Write ``checkpoint.pt`` atomically (``data_digest``: the identity of the data the
    run trains on, ``fruit.training.data.data_digest``)."""
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "shuffle_rng": rng.getstate(),
        "state": state.as_dict(),
        "data_digest": data_digest,
    }
    atomic_torch_save(run_dir / CHECKPOINT, checkpoint)


def saved_data_digest(run_dir: Path) -> str | None:
    """The data digest ``checkpoint.pt`` records (None: none, or no readable checkpoint;
    checkpoints written before the digest existed have none)."""
    try:
        checkpoint = torch.load(run_dir / CHECKPOINT, map_location="cpu", weights_only=False)
        return checkpoint.get("data_digest")
    except Exception:  # noqa: BLE001 - absent or damaged: resume.open_folder deals with it
        return None


def load_checkpoint(run_dir: Path, model, optimizer, scheduler, rng: random.Random):
    """Restore ``checkpoint.pt`` into the objects given; returns its ``TrainingState``."""
    path = run_dir / CHECKPOINT
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.set_rng_state(checkpoint["torch_rng"])
    if checkpoint["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(checkpoint["cuda_rng"])
    rng.setstate(checkpoint["shuffle_rng"])
    return TrainingState.from_dict(checkpoint["state"], path)


def save_best(run_dir: Path, model, examples_seen: int, score: float) -> None:
    """Write ``best.pt``: the parameters, with when and how well they scored."""
    best = {"model": model.state_dict(), "examples_seen": examples_seen, "score": score}
    atomic_torch_save(run_dir / BEST, best)


def load_best(run_dir: Path, model, device) -> None:
    """Put the parameters of ``best.pt`` into ``model``; a one-line ``DamagedRecord``
    naming it when it cannot be read or holds another model's parameters (damaged or
    replaced outside fruit, which writes it atomically)."""
    path = run_dir / BEST
    try:
        best = torch.load(path, map_location=device, weights_only=False)
        model.load_state_dict(best["model"])
    except Exception as e:  # noqa: BLE001 - torch reports a damaged file in many ways
        reason = str(e).splitlines()[0].split(". ")[0] if str(e) else ""
        raise DamagedRecord(
            path,
            f"{type(e).__name__}: {reason}",
            f"it held the run's best parameters; remove {', '.join(RESUME_FILES)} from "
            f"{run_dir} to train the run again",
        ) from None


def write_log(run_dir: Path, rows: list[dict]) -> None:
    """Write ``log.csv`` (``LOG_COLUMNS``) atomically."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=LOG_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(run_dir / "log.csv", buffer.getvalue())


def append_warning(run_dir: Path, message: str) -> None:
    """Add one line to the run folder's ``warnings.log`` (rewritten whole, atomically)."""
    lines = read_warnings(run_dir) + [
        f"{datetime.datetime.now().isoformat(timespec='seconds')} {message}"
    ]
    atomic_write_text(Path(run_dir) / WARNINGS, "".join(f"{line}\n" for line in lines))


def read_warnings(run_dir: Path) -> list[str]:
    """The lines of ``warnings.log`` (none when absent)."""
    try:
        return (Path(run_dir) / WARNINGS).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


def read_log(run_dir):
    """log.csv as a pandas DataFrame."""
    import pandas as pd

    return pd.read_csv(Path(run_dir) / "log.csv")
