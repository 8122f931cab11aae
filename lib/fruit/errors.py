"""The one exception type that the command line turns into a one-line error, and the
checks that build it (names, numbers, files that cannot be written)."""

from __future__ import annotations

import errno
import math
import re

# OSError numbers that mean "this place cannot be written": the message names the path
# and the reason, in one line (fruit.cli, fruit.io.atomic_open).
STORAGE_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("EROFS", "EACCES", "EPERM", "ENOSPC", "EDQUOT", "EFBIG")
    if hasattr(errno, name)
)


# Valid ranges shared by the commands, the notebooks and the run settings.
MAX_SEED = 2**63 - 1  # seeds go to random.Random and torch.manual_seed (64 bits at most)
# The most examples of one split: 10x the paper's training set. More is a typo, not a
# plan: generation with de-duplication would run for hours and could exhaust memory.
MAX_SPLIT_SIZE = 1_000_000
# A run's dev set is validated at every checkpoint, so its cost recurs over the run's whole
# length. Measured (Tf, d 68, one thread): 2,200 dev examples/s on a free core, 140/s on
# the loaded 2-core machine, where a 20,000-line dev set took 135 s per checkpoint and
# 100,000 lines had not finished the first checkpoint after 10 minutes (990,000: about
# 2 hours a checkpoint). The paper's has 1,000 lines; a run takes at most 20 times that.
# (Generating is not the limit: 1,000,000 lines took 35-86 s per task on that machine.)
MAX_DEV_SIZE = 20_000
# Model sizes far beyond the paper's (~200k parameters, d up to a few hundred): a typo,
# not a plan (d = 100,000 would need hundreds of GB before the first batch).
MAX_D = 4096
MAX_TARGET_PARAMS = 100_000_000


class FruitError(Exception):
    """A user-facing error: bad input, a missing file, an unknown name.

    The message must say what was wrong and, where there is a fixed set of valid
    choices, list them. ``fruit`` prints it as ``fruit: error: <message>`` and exits
    with status 2, without a traceback.
    """


class StageFailed(FruitError):
    """A stage of a command failed after its input was accepted (e.g. the reports after
    every run finished): one line like any FruitError, but exit status 1, not 2, which
    the README keeps for bad input."""

    exit_code = 1


class StorageError(FruitError):
    """A file could not be written: read-only, no permission, or the disk is full."""


# Names of tasks, architectures and profiles become folder names (results/runs/<profile>/
# <task>/<architecture>/): checked once where they are registered or read.
NAME_CHARACTERS = "letters, digits and + @ , . _ -, starting with a letter or digit"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9+@,._-]*")


def check_name(kind: str, name) -> str:
    """``name`` if it may name a folder of run records, else a one-line FruitError that
    names the allowed characters."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise FruitError(
            f"{kind} name {name!r} may use only {NAME_CHARACTERS} (it names a folder of run "
            "records)"
        )
    return name


def first_few(items, keep: int = 3) -> list[str]:
    """``items`` as strings, or, when more than ``keep + 1``, the first ``keep`` and
    "and N more": what keeps a one-line error one line."""
    items = [str(item) for item in items]
    if len(items) > keep + 1:
        return [*items[:keep], f"and {len(items) - keep} more"]
    return items


def unknown_choice(kind: str, value: str, choices) -> FruitError:
    """Build the standard "unknown X 'v'; valid choices: a, b, c" error."""
    listed = ", ".join(sorted(choices))
    return FruitError(f"unknown {kind} {value!r}; valid choices: {listed}")


def storage_error(path, error: OSError) -> StorageError:
    """``cannot write PATH: No space left on device`` (one line, the path named)."""
    reason = error.strerror or str(error) or type(error).__name__
    return StorageError(f"cannot write {path}: {reason}")


def check_integer(name: str, value, minimum: int | None = None, maximum: int | None = None):
    """``value`` as an int within [minimum, maximum]; a FruitError naming ``name`` if it
    is not an integer (booleans and fractions are not) or lies outside."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise FruitError(f"{name} must be an integer{_bounds(minimum, maximum)}, not {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise FruitError(f"{name} must be an integer{_bounds(minimum, maximum)}, not {value!r}")
    return value


def check_split_size(split: str, size) -> int:
    """A run's split size: from 1 to ``MAX_SPLIT_SIZE``, for the dev set at most
    ``MAX_DEV_SIZE`` (a one-line FruitError otherwise)."""
    size = check_integer(f"{split}_size", size, 1, MAX_SPLIT_SIZE)
    if split == "dev" and size > MAX_DEV_SIZE:
        raise FruitError(
            f"dev_size {size:,} is too large: the dev set is validated at every checkpoint "
            f"(~2,000 examples/s on a CPU core), so a run takes at most {MAX_DEV_SIZE:,} "
            "(the paper's has 1,000)"
        )
    return size


def check_number(
    name: str,
    value,
    above: float | None = None,
    below: float | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float:
    """``value`` as a finite float within the bounds given (``above``/``below``: strict,
    ``minimum``/``maximum``: inclusive); a FruitError naming ``name`` otherwise. nan and
    inf never pass: they make no sense as settings, and config.json could not hold them."""
    bounds = (
        ("above", above, lambda x, b: x > b),
        ("below", below, lambda x, b: x < b),
        ("at least", minimum, lambda x, b: x >= b),
        ("at most", maximum, lambda x, b: x <= b),
    )
    words = " and ".join(f"{word} {bound:g}" for word, bound, _ in bounds if bound is not None)
    wanted = f"{name} must be a finite number" + (f" {words}" if words else "")
    try:
        number = float(value) if not isinstance(value, (bool, str)) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    ok = math.isfinite(number) and all(
        holds(number, bound) for _, bound, holds in bounds if bound is not None
    )
    if not ok:
        raise FruitError(f"{wanted}, not {value!r}")
    return number


def _bounds(minimum, maximum) -> str:
    if minimum is not None and maximum is not None:
        return f" from {minimum:,} to {maximum:,}"
    if minimum is not None:
        return f" >= {minimum:,}"
    if maximum is not None:
        return f" <= {maximum:,}"
    return ""


def one_line_notebook_errors() -> None:
    """In a Jupyter kernel: show a ``FruitError`` as its one-line message, not a traceback.

    The cell still fails (papermill raises, with ename "FruitError" and the message as
    evalue), so a bad parameter stops a headless run with a short, clear reason.
    Elsewhere (plain Python) this does nothing.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def handler(shell, etype, value, tb, tb_offset=None):
        short = [f"{etype.__name__}: {value}"]  # the "structured traceback": one line
        shell._showtraceback(etype, value, short)  # the cell's error output (as IPython's own)
        return short

    shell.set_custom_exc((FruitError,), handler)
