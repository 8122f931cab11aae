"""Stack RNN / LSTM: a 3-layer controller driving one stack (models.md §8).

At t = 0 the controller is in its learned initial state, the stack is empty and
r_0 = Reading(S_0). For t ≥ 1:

    H_t = Rec(H_{t-1}, [Drop(E[w_t]); r_{t-1}])        the previous reading is fed back [D5]
    actions, pushed vector from the undropped top state h_t   [D12]
    S_t = Stack(S_{t-1}, actions, pushed);  r_t = Reading(S_t)
    y_t = E Drop(h_t), or E Drop([h_t; r_t]) with +R (then E has d + r columns)

Sup: softmax actions (push, pop, no-op), pushed σ(W_v h + b_v). Nd: unnormalised
log-weights W_a h + b_a, log pushed log σ(W_v h + b_v), learned bottom vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fruit.models.init import xavier
from fruit.models.recurrent import RecurrentCore
from fruit.models.sizing import stack_sizes


@dataclass
class StackRNNState:
    hidden: object  # controller state: h (L, B, d) or (h, c)
    stack: object  # SuperpositionStack / DVPDAStack
    reading: torch.Tensor  # r_{t-1} (B, r), fed into the next step


class StackRNNLM(nn.Module):
    def __init__(self, spec, vocab_size: int, d: int, options: dict):
        super().__init__()
        self.architecture = spec.name
        self.vocab_size = vocab_size
        self.d = d
        self.options = dict(options)
        self.kind = spec.stack
        self.reading_to_output = spec.reading_to_output
        # [D4] only Sup+R has rau's truncated last reading in the batched forward pass.
        self.rau_compat = bool(options["rau_compat"]) and self.kind == "Sup"
        num_actions, m, r = stack_sizes(self.kind, options)
        self.m = m
        self.num_states = options["nd_states"]
        self.num_symbols = options["nd_symbols"]
        p = options["dropout"]
        e = d + r if self.reading_to_output else d
        self.embedding = nn.Embedding(vocab_size + 1, e)  # tied to an output of size e
        self.core = RecurrentCore(spec.base, e + r, d, spec.num_layers, p)
        self.actions = nn.Linear(d, num_actions)  # W_a, b_a
        self.pushed = nn.Linear(d, m)  # W_v, b_v
        if self.kind == "Sup":
            xavier(self.actions)
            xavier(self.pushed)
        else:  # Nd heads are plain uniform-initialised linear layers [D2]
            self.bottom = nn.Parameter(torch.empty(m))  # θ_⊥
        self.dropout = nn.Dropout(p)

    # -- pieces ---------------------------------------------------------------------------

    def _initial_stack(self, batch_size: int):
        from fruit.stacks import DVPDAStack, SuperpositionStack

        w = self.embedding.weight
        if self.kind == "Sup":
            return SuperpositionStack.initial(batch_size, self.m, dtype=w.dtype, device=w.device)
        return DVPDAStack.initial(
            F.logsigmoid(self.bottom), batch_size, self.num_states, self.num_symbols
        )

    def _stack_inputs(self, h):
        """h (B, d) -> (stack actions, pushed vector or its log, reported action weights)."""
        logits = self.actions(h)
        if self.kind == "Sup":
            probs = torch.softmax(logits, dim=-1)  # [push, pop, no-op] [D7]
            return probs, torch.sigmoid(self.pushed(h)), probs
        return logits, F.logsigmoid(self.pushed(h)), logits.exp()

    def _logits(self, h, reading):  # -> (B, V+1)
        return F.linear(self.dropout(self._output(h, reading)), self.embedding.weight)

    def _controller(self, state: StackRNNState, x):
        """x: dropped-out embedding of w_t (B, e) -> (h_t (B, d), controller state)."""
        u = torch.cat((x, state.reading), dim=-1)[:, None]  # (B, 1, e + r)
        outputs, hidden = self.core(u, state.hidden)
        return outputs[:, 0], hidden

    # -- API ------------------------------------------------------------------------------

    def start(self, batch_size: int):
        hidden = self.core.initial_state(batch_size)
        stack = self._initial_stack(batch_size)
        state = StackRNNState(hidden, stack, stack.reading())
        return self._logits(self.core.top(hidden), state.reading), state

    def step(self, state: StackRNNState, tokens: torch.Tensor):
        h, hidden = self._controller(state, self.dropout(self.embedding(tokens)))
        actions, pushed, _ = self._stack_inputs(h)
        stack = state.stack.step(actions, pushed)
        reading = stack.reading()
        return self._logits(h, reading), StackRNNState(hidden, stack, reading)

    def select_state(self, state: StackRNNState, index: torch.Tensor) -> StackRNNState:
        return StackRNNState(
            self.core.select(state.hidden, index),
            state.stack.select(index),
            state.reading.index_select(0, index),
        )

    def forward(self, tokens: torch.Tensor, return_actions: bool = False):
        """tokens (B, n) -> logits (B, n+1, V+1); with return_actions also [(B, n, A)]."""
        B, n = tokens.shape
        _, state = self.start(B)
        x = self.dropout(self.embedding(tokens))  # (B, n, e)
        outputs = [self._output(self.core.top(state.hidden), state.reading)]
        weights = []
        for t in range(n):
            h, hidden = self._controller(state, x[:, t])
            actions, pushed, w = self._stack_inputs(h)
            weights.append(w)
            stack, reading = state.stack, state.reading
            if t < n - 1 or self.reading_to_output:  # without +R, r_n is never used
                if t == n - 1 and self.rau_compat:
                    reading = actions[:, :1] * pushed  # rau's r_T = a_push v_T [D4]
                else:
                    stack = stack.step(actions, pushed)
                    reading = stack.reading()
            state = StackRNNState(hidden, stack, reading)
            outputs.append(self._output(h, reading))
        logits = F.linear(self.dropout(torch.stack(outputs, dim=1)), self.embedding.weight)
        if not return_actions:
            return logits
        return logits, [
            torch.stack(weights, dim=1)
            if weights
            else logits.new_zeros(B, 0, self.actions.out_features)
        ]

    def _output(self, h, reading):  # the undropped output vector (B, e)
        return torch.cat((h, reading), dim=-1) if self.reading_to_output else h
