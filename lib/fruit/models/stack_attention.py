"""The stack-attention sublayer (docs/paper.md §7), of any stack kind
(``fruit.models.stack_kinds``: superposition or nondeterministic in the paper).

It takes the layer-normed input ℓ_t at every position t = 0..n (BOS included), and
for t = 0..n in order updates a fresh stack with actions and a pushed vector computed
from ℓ_t, then maps the reading ρ_t (which includes position t's own actions: no
lag [D13]) through W_y. Projections have no biases.

[D1] The pushed vector has no activation by default, as in rau: Sup pushes W_v ℓ_t and
Nd uses W_v ℓ_t as the log of its pushed vector. ``pushed_activation="sigmoid"`` gives
the paper's σ(W_v ℓ_t) (log σ for Nd).
"""

from __future__ import annotations

import torch
from torch import nn

from fruit.models.init import xavier
from fruit.models.stack_kinds import stack_kind


class StackAttention(nn.Module):
    """A stack of kind ``kind`` (``fruit.models.stack_kinds``) read in place of attention."""

    def __init__(self, kind: str, d: int, options: dict):
        super().__init__()
        self.kind = kind  # its name: saved with the model, compared in tests
        self.stack_kind = stack_kind(kind)
        num_actions, m, r = self.stack_kind.sizes(options)
        self.m = m
        self.options = dict(options)
        self.sigmoid_push = options["pushed_activation"] == "sigmoid"
        self.actions = xavier(nn.Linear(d, num_actions, bias=False))  # W_a
        self.pushed = xavier(nn.Linear(d, m, bias=False))  # W_v
        self.output = xavier(nn.Linear(r, d, bias=False))  # W_y
        if self.stack_kind.bottom:
            self.bottom = nn.Parameter(torch.empty(m))  # θ_⊥; v_0 = σ(θ_⊥)

    def _bottom(self):
        return self.bottom if self.stack_kind.bottom else None

    def _stack_inputs(self, ell):
        """ℓ (..., d) -> (stack actions, pushed vector or its log, action weights to report)."""
        logits = self.actions(ell)  # (..., A)
        pushed = self.pushed(ell)  # (..., m)
        return self.stack_kind.attention_inputs(logits, pushed, self.sigmoid_push)

    def forward(self, ell: torch.Tensor):
        """ℓ (B, T, d) -> (W_y ρ (B, T, d), action weights (B, T, A))."""
        actions, pushed, weights = self._stack_inputs(ell)
        readings = self.stack_kind.readings(actions, pushed, self._bottom(), self.options)
        return self.output(readings), weights  # readings (B, T, r)

    def initial_state(self, batch_size: int, dtype: torch.dtype, device: torch.device):
        return self.stack_kind.initial(self._bottom(), batch_size, self.options, dtype, device)

    def step(self, ell: torch.Tensor, stack):
        """ℓ_t (B, d), stack state -> (W_y ρ_t (B, d), new stack state, action weights (B, A))."""
        actions, pushed, weights = self._stack_inputs(ell)
        stack = stack.step(actions, pushed)
        return self.output(stack.reading()), stack, weights
