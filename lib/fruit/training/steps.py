"""How a training step is run on the device: the one place that chooses.

Three ways to take the same optimiser step (`fruit.training.objective`):

- ``plain``: `objective.update`. It reads the loss after the forward pass and skips the
  backward pass and the step when it is nan/inf. The reference, and the CPU's way (on
  the CPU reading the loss costs nothing).
- ``eager``: `objective.update_without_sync`. The whole step is queued without waiting
  for the device; a nan/inf loss skips the step on the device; the loss is read once the
  step is queued. Bit for bit the same parameters as ``plain`` where the loss is finite.
- ``graphs``: the ``eager`` step captured once per batch shape as a CUDA graph and
  replayed (`fruit.training.graphs`): one launch a step instead of thousands, which is
  what bounds the stack models on a GPU (docs/cluster.md). Not yet the default on CUDA:
  it becomes so once the GPU check (scripts/gpu-check-steps.sh) has shown it equal to
  the eager step there; until then ``FRUIT_STEP=graphs`` asks for it.

``FRUIT_STEP=plain|eager|graphs`` overrides the choice; `usable` turns ``graphs`` into
``eager`` for a model that cannot be replayed (`graphs.cannot_capture`), saying why. On
the CPU, ``graphs`` runs the graph path's bookkeeping (static batch buffers per shape,
recapture when the learning rate changes) with the step called instead of replayed,
which is how the suite tests it without a GPU. A run records the way it stepped in
config.json's provenance ("step"), unless it is ``plain``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from fruit.errors import FruitError
from fruit.training.objective import batch_tensors, update, update_without_sync

STEPS = ("plain", "eager", "graphs")


def step_kind(device: torch.device) -> str:
    """The way steps run on ``device``: FRUIT_STEP when set, else ``plain``. A step other
    than ``plain`` needs PyTorch's fused Adam (CPU and CUDA); elsewhere (MPS) it is
    refused in one line."""
    choice = os.environ.get("FRUIT_STEP", "")
    if choice not in ("", *STEPS):
        raise FruitError(f"FRUIT_STEP={choice!r}: set it to one of {', '.join(STEPS)}, or unset it")
    if not choice:
        return "plain"
    if choice != "plain" and device.type not in ("cpu", "cuda"):
        raise FruitError(
            f"FRUIT_STEP={choice} needs PyTorch's fused Adam, which {device.type} lacks; "
            "unset FRUIT_STEP there"
        )
    return choice


def usable(kind: str, model, device: torch.device) -> tuple[str, str | None]:
    """``kind``, or ``eager`` where ``kind`` is ``graphs`` and ``model`` cannot be replayed
    as a CUDA graph on ``device``; with a line saying why (else None)."""
    if kind == "graphs":
        from fruit.training.graphs import cannot_capture

        reason = cannot_capture(model, device)
        if reason is not None:
            return "eager", f"FRUIT_STEP=graphs: steps run eagerly, since {reason}"
    return kind, None


def stepper(
    kind: str, model, optimizer, eos_id: int, device: torch.device, clip_norm: float, warn=None
) -> Callable[[list[list[int]]], float]:
    """A function strings -> the batch's loss (a float, read after the step) that takes
    one optimiser step the way ``kind`` says (see `usable`). An optimiser that is not
    PyTorch's fused Adam (one restored from a checkpoint made before fruit used it) takes
    the ``plain`` step, said through ``warn(message)``."""
    if kind != "plain" and not all(group.get("fused") for group in optimizer.param_groups):
        if warn is not None:
            warn(f"FRUIT_STEP={kind} needs the fused Adam this run's checkpoint lacks: plain steps")
        kind = "plain"
    if kind == "plain":
        return lambda strings: update(model, optimizer, strings, eos_id, device, clip_norm)
    if kind == "eager":
        found_inf = torch.zeros((), dtype=torch.float32, device=device)

        def eager(strings) -> float:
            tokens, targets = batch_tensors(strings, eos_id)
            tokens = tokens.to(device, non_blocking=True)  # queued: no wait for the device
            targets = targets.to(device, non_blocking=True)
            loss = update_without_sync(model, optimizer, tokens, targets, clip_norm, found_inf)
            return float(loss)

        return eager
    if kind == "graphs":
        from fruit.training.graphs import GraphedUpdates

        graphed = GraphedUpdates(model, optimizer, clip_norm)

        def replayed(strings) -> float:
            return float(graphed(*batch_tensors(strings, eos_id)))

        return replayed
    raise ValueError(f"unknown step kind {kind!r}; one of {STEPS}")
