"""Device selection: CUDA when present, else CPU; always overridable.

``check_device`` checks a name once, up front (``fruit train`` before any data is read,
``fruit run`` before the cluster starts), without building anything; ``resolve_device``
turns a checked name into a ``torch.device``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fruit.errors import FruitError

if TYPE_CHECKING:
    import torch

DEVICE_CHOICES = "auto, cpu, cuda, cuda:N, mps"
_DEVICE = re.compile(r"(cpu|cuda|mps)(?::(\d+))?")


def check_device(name: str | None = "auto", syntax_only: bool = False) -> str:
    """``name`` if it names a device this machine has (``"auto"`` always does); a
    one-line FruitError listing the valid choices otherwise. ``syntax_only``: check the
    spelling alone (for runs that execute on other machines)."""
    if name in (None, "", "auto"):
        return "auto"
    match = _DEVICE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise FruitError(f"unknown device {name!r}; valid choices: {DEVICE_CHOICES}")
    kind, index = match.group(1), match.group(2)
    if kind == "cpu" and index is not None:  # torch takes cpu:7, then cannot load its saves
        raise FruitError(
            f"device {name!r}: the CPU has no numbered devices; use cpu "
            f"(--threads sets how many cores a run uses); valid choices: {DEVICE_CHOICES}"
        )
    if syntax_only or kind == "cpu":
        return name
    import torch

    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise FruitError(
                f"device {name!r} requested but this machine has no Apple GPU (MPS); "
                "valid choices here: auto, cpu"
            )
        return name
    if not torch.cuda.is_available():
        raise FruitError(
            f"device {name!r} requested but CUDA is not available on this machine; "
            "valid choices here: auto, cpu"
        )
    count = torch.cuda.device_count()
    if index is not None and int(index) >= count:
        raise FruitError(
            f"device {name!r} requested but this machine has {count} GPU(s); "
            f"valid choices here: auto, cpu, cuda, cuda:0 to cuda:{count - 1}"
        )
    return name


def resolve_device(name: str | None = "auto") -> torch.device:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"`` into a
    ``torch.device``.

    ``"auto"`` (or ``None``) picks ``cuda`` when a GPU is visible, else ``cpu``.
    Asking for CUDA on a machine without it is an error, not a silent fallback.
    """
    import torch

    name = check_device(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
