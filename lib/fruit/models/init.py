"""Initialisation as rau does it (docs/paper.md §9, [D2]).

1. Linear maps marked with ``xavier(linear, gain)`` (rau's ``Layer``s: stack-attention
   projections, the FF inside stack-attention layers, the Sup stack-RNN heads) get
   Xavier-uniform weights and zero biases. They are drawn first, in module order.
2. LayerNorms get gain 1 and bias 0.
3. Every other trainable parameter (embeddings, standard attention and FF, RNN weights
   and biases, learned initial states, Nd stack-RNN heads, bottom vectors) gets
   U[-scale, scale], in parameter-registration order.

Frozen parameters (the RNNs' zeroed hidden-to-hidden biases) are left alone.
"""

from __future__ import annotations

import torch
from torch import nn


def xavier(linear: nn.Linear, gain: float = 1.0) -> nn.Linear:
    """Mark ``linear`` for Xavier-uniform initialisation with ``gain`` (and a zero bias)."""
    linear.xavier_gain = float(gain)
    return linear


@torch.no_grad()
def initialize(model: nn.Module, scale: float = 0.1, generator: torch.Generator | None = None):
    done: set[int] = set()
    for module in model.modules():
        if isinstance(module, nn.Linear) and hasattr(module, "xavier_gain"):
            nn.init.xavier_uniform_(module.weight, gain=module.xavier_gain, generator=generator)
            done.add(id(module.weight))
            if module.bias is not None:
                module.bias.zero_()
                done.add(id(module.bias))
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.weight.fill_(1.0)
            module.bias.zero_()
            done.update((id(module.weight), id(module.bias)))
    for p in model.parameters():
        if p.requires_grad and id(p) not in done:
            p.uniform_(-scale, scale, generator=generator)
    return model
