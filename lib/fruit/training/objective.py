"""The objective and one optimiser step (docs/paper.md §11).

Language modelling on w = x y (source then target, no separator): the loss of a batch
is the mean over its strings of -log p(w EOS), in nats. Adam with PyTorch defaults,
gradients clipped to a global L2 norm (``clip_norm``), and the reduce-on-plateau
schedule of the learning rate. ``fruit.training.loop`` drives them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from fruit import evaluation
from fruit.batching import pad
from fruit.training.config import RunConfig


def adam(parameters, learning_rate: float) -> torch.optim.Adam:
    """Adam with PyTorch's defaults, as PyTorch's fused kernel on the CPU and CUDA (the
    same update in one pass over the parameters; about a tenth of a small transformer's
    step saved on the CPU)."""
    parameters = list(parameters)
    fused = all(p.device.type in ("cpu", "cuda") for p in parameters)
    return torch.optim.Adam(parameters, lr=learning_rate, fused=fused)


def optimizer_and_scheduler(model, config: RunConfig):
    """`adam` and the reduce-on-plateau schedule of its learning rate (docs/paper.md §11)."""
    optimizer = adam(model.parameters(), config.learning_rate)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer,
        mode="min",
        factor=config.lr_factor,
        patience=config.lr_patience,
        threshold=0.0,
        cooldown=0,
        min_lr=0.0,
    )
    return optimizer, scheduler


def batch_tensors(strings, eos_id: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens (B, n), padded with 0 (any valid id), and targets (B, n+1): each string's
    tokens then EOS, -1 at padding; on ``device`` (None: the CPU)."""
    tokens = pad(strings, 0, device)  # (B, n)
    targets = pad([w + [eos_id] for w in strings], -1, device)  # (B, n+1)
    return tokens, targets


def string_losses(model, strings, eos_id: int, device) -> torch.Tensor:
    """Summed -log p(w EOS) per string, (B,), with the graph."""
    return token_losses(model, *batch_tensors(strings, eos_id, device))


def token_losses(model, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """tokens (B, n), targets (B, n+1) (`batch_tensors`) -> summed -log p(w EOS) per
    string, (B,), with the graph."""
    logits = model(tokens)  # (B, n+1, V+1): position t predicts token t (EOS at n)
    nll = F.cross_entropy(
        logits.transpose(1, 2),  # (B, V+1, n+1): cross_entropy wants the classes second
        targets,
        ignore_index=-1,
        reduction="none",
    )  # (B, n+1), 0 at padding
    return nll.sum(1)  # (B,)


def validation_cross_entropy(model, strings, batches, eos_id: int, device) -> float:
    """Cross-entropy per token (EOS included) of ``strings``, in nats, without dropout."""
    total, num_tokens = 0.0, 0
    with evaluation.evaluating(model):
        for batch in batches:
            chosen = [strings[i] for i in batch]
            total += float(string_losses(model, chosen, eos_id, device).double().sum())
            num_tokens += sum(len(w) + 1 for w in chosen)
    return total / num_tokens


def update(model, optimizer, strings, eos_id: int, device, clip_norm: float) -> float:
    """One optimiser step on the mean loss of ``strings``, gradients clipped to a global
    L2 norm of ``clip_norm``; returns the loss (no step when it is nan/inf)."""
    model.train()
    loss = string_losses(model, strings, eos_id, device).mean()
    value = loss.item()
    if not math.isfinite(value):
        return value
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return value


def update_without_sync(
    model, optimizer, tokens, targets, clip_norm: float, found_inf: torch.Tensor
) -> torch.Tensor:
    """`update` on the device's batch tensors (`batch_tensors`), without waiting for the
    device: the loss is not read before the step, and a nan/inf loss skips the step on the
    device (Adam's ``found_inf``, as PyTorch's gradient scaler passes it: no change to the
    parameters, the moments or the step count). Returns the loss, detached (0-dim, on the
    device), for the caller to read after the step. found_inf: a float32 0-dim tensor on
    the device, overwritten. The same numbers as `update`, bit for bit, where the loss is
    finite (tests/test_training_steps.py); this is the step CUDA graphs capture
    (`fruit.training.graphs`)."""
    model.train()
    loss = token_losses(model, tokens, targets).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    found_inf.copy_(~torch.isfinite(loss.detach()))
    optimizer.found_inf = found_inf  # read by the fused Adam step (torch.optim.Adam.step)
    try:
        optimizer.step()
    finally:
        del optimizer.found_inf
    return loss.detach()
