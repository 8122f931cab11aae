"""The stack-attention sublayer (docs/paper.md §7), superposition or nondeterministic.

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
import torch.nn.functional as F
from torch import nn

from fruit.models.init import xavier
from fruit.models.sizing import stack_sizes


class StackAttention(nn.Module):
    def __init__(self, kind: str, d: int, options: dict):
        super().__init__()
        self.kind = kind
        num_actions, m, r = stack_sizes(kind, options)
        self.m = m
        self.num_states = options["nd_states"]
        self.num_symbols = options["nd_symbols"]
        self.sigmoid_push = options["pushed_activation"] == "sigmoid"
        self.actions = xavier(nn.Linear(d, num_actions, bias=False))  # W_a
        self.pushed = xavier(nn.Linear(d, m, bias=False))  # W_v
        self.output = xavier(nn.Linear(r, d, bias=False))  # W_y
        if kind == "Nd":
            self.bottom = nn.Parameter(torch.empty(m))  # θ_⊥; v_0 = σ(θ_⊥)

    def _stack_inputs(self, ell):
        """ℓ (..., d) -> (stack actions, pushed vector or its log, action weights to report)."""
        logits = self.actions(ell)  # (..., A)
        pushed = self.pushed(ell)  # (..., m)
        if self.kind == "Sup":
            probs = torch.softmax(logits, dim=-1)  # [push, pop, no-op] [D7]
            return probs, torch.sigmoid(pushed) if self.sigmoid_push else pushed, probs
        pushed_log = F.logsigmoid(pushed) if self.sigmoid_push else pushed
        return logits, pushed_log, logits.exp()

    def forward(self, ell: torch.Tensor):
        """ℓ (B, T, d) -> (W_y ρ (B, T, d), action weights (B, T, A))."""
        from fruit.stacks import dvpda_readings, superposition_readings

        actions, pushed, weights = self._stack_inputs(ell)
        if self.kind == "Sup":
            readings = superposition_readings(actions, pushed)  # (B, T, m)
        else:
            readings = dvpda_readings(  # (B, T, Q*S*m)
                actions, pushed, F.logsigmoid(self.bottom), self.num_states, self.num_symbols
            )
        return self.output(readings), weights

    def initial_state(self, batch_size: int, dtype: torch.dtype, device: torch.device):
        from fruit.stacks import DVPDAStack, SuperpositionStack

        if self.kind == "Sup":
            return SuperpositionStack.initial(batch_size, self.m, dtype=dtype, device=device)
        return DVPDAStack.initial(
            F.logsigmoid(self.bottom), batch_size, self.num_states, self.num_symbols
        )

    def step(self, ell: torch.Tensor, stack):
        """ℓ_t (B, d), stack state -> (W_y ρ_t (B, d), new stack state, action weights (B, A))."""
        actions, pushed, weights = self._stack_inputs(ell)
        stack = stack.step(actions, pushed)
        return self.output(stack.reading()), stack, weights
