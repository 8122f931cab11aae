"""Device selection: CUDA when present, else CPU; always overridable."""

from __future__ import annotations

import torch

from fruit.errors import FruitError


def resolve_device(name: str | None = "auto") -> torch.device:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` into a ``torch.device``.

    ``"auto"`` (or ``None``) picks ``cuda`` when a GPU is visible, else ``cpu``.
    Asking for CUDA on a machine without it is an error, not a silent fallback.
    """
    if name in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as e:
        raise FruitError(f"unknown device {name!r}; valid choices: auto, cpu, cuda, cuda:N") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise FruitError(
            f"device {name!r} requested but CUDA is not available; use --device cpu or auto"
        )
    return device
