"""Stack RNN / LSTM: a 3-layer controller driving one stack (docs/paper.md §8).

At t = 0 the controller is in its learned initial state, the stack is empty and
r_0 = Reading(S_0). For t ≥ 1:

    H_t = Rec(H_{t-1}, [Drop(E[w_t]); r_{t-1}])        the previous reading is fed back [D5]
    actions, pushed vector from the undropped top state h_t   [D12]
    S_t = Stack(S_{t-1}, actions, pushed);  r_t = Reading(S_t)
    y_t = E Drop(h_t), or E Drop([h_t; r_t]) with +R (then E has d + r columns)

Sup: softmax actions (push, pop, no-op), pushed σ(W_v h + b_v). Nd: unnormalised
log-weights W_a h + b_a, log pushed log σ(W_v h + b_v), learned bottom vector.

Speed (the controller cannot be run over the whole sequence, so every op is paid per
time step): the batched forward is one autograd Function with a hand-written backward,
controller and stack together (fruit.models.passes.stack_pass: oneDNN products and C
kernels for the pointwise work of each step on the CPU; the stack's driver is `sup_pass`
for Sup and `nd_pass`, the dVPDA's step kernels, for Nd). It tells the stack how many
updates follow (exact truncation for Sup, buffers allocated once for Nd). The stepped
loop (`recurrent.Cells`, one matmul per layer and step, the first layer's token part for
all steps at once, weight gradients deferred to one matmul per layer, and the stacks'
step API) is taken when `return_actions` is asked for or a head has module hooks;
`start` / `step` use the cells without deferral and untruncated stacks. The fused and
the stepped passes agree to rounding (float32 ~1e-6) but draw their dropout masks
differently, so one seed gives different masks on the two.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fruit.models.init import xavier
from fruit.models.passes.nd_pass import nd_pass
from fruit.models.passes.sup_pass import sup_pass
from fruit.models.recurrent import Cells, RecurrentCore
from fruit.models.sizing import stack_sizes


@dataclass
class StackRNNState:
    hidden: tuple  # controller state, one entry per layer: h (B, d) or (h, c)
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

    def _cells(self, defer: bool = False) -> Cells:
        """The controller one step at a time (weights arranged once per pass)."""
        return self.core.unroll(self.embedding.embedding_dim, defer)

    def _initial_state(self, batch_size: int, cells, length: int | None = None) -> StackRNNState:
        """H_0, the empty stack S_0 and r_0. length: the number of updates that will
        follow, when known (lets the stack keep only what can still be read)."""
        from fruit.stacks import DVPDAStack, SuperpositionStack

        w = self.embedding.weight
        if self.kind == "Sup":
            stack = SuperpositionStack.initial(
                batch_size, self.m, dtype=w.dtype, device=w.device, length=length
            )
        else:
            stack = DVPDAStack.initial(
                F.logsigmoid(self.bottom),
                batch_size,
                self.num_states,
                self.num_symbols,
                length=length,
            )
        hidden = cells.initial(self.core.initial_state(batch_size))
        return StackRNNState(hidden, stack, stack.reading())

    def _stack_inputs(self, h):
        """h (B, d) -> (stack actions, pushed vector or its log)."""
        logits = self.actions(h)  # the heads are called as modules: hooks see every step
        if self.kind == "Sup":
            probs = torch.softmax(logits, dim=-1)  # [push, pop, no-op] [D7]
            return probs, torch.sigmoid(self.pushed(h))
        return logits, F.logsigmoid(self.pushed(h))

    def _logits(self, h, reading):  # -> (B, V+1)
        return F.linear(self.dropout(self._output(h, reading)), self.embedding.weight)

    def _top(self, hidden):  # top layer's h (B, d)
        return hidden[-1][0] if self.core.is_lstm else hidden[-1]

    # -- API ------------------------------------------------------------------------------

    def start(self, batch_size: int):
        state = self._initial_state(batch_size, self._cells())
        return self._logits(self._top(state.hidden), state.reading), state

    def step(self, state: StackRNNState, tokens: torch.Tensor):
        cells = self._cells()
        projected = cells.project(self.dropout(self.embedding(tokens)))  # (B, G)
        h, hidden = cells.step(projected, state.reading, state.hidden)
        actions, pushed = self._stack_inputs(h)
        stack = state.stack.step(actions, pushed)
        reading = stack.reading()
        return self._logits(h, reading), StackRNNState(hidden, stack, reading)

    def select_state(self, state: StackRNNState, index: torch.Tensor) -> StackRNNState:
        pick = lambda x: x.index_select(0, index)  # noqa: E731
        if self.core.is_lstm:
            hidden = tuple((pick(h), pick(c)) for h, c in state.hidden)
        else:
            hidden = tuple(pick(h) for h in state.hidden)
        return StackRNNState(hidden, state.stack.select(index), pick(state.reading))

    def forward(self, tokens: torch.Tensor, return_actions: bool = False):
        """tokens (B, n) -> logits (B, n+1, V+1); with return_actions also [(B, n, A)]."""
        B, n = tokens.shape
        if n > 0 and not return_actions and not self._heads_hooked():
            return self._forward_fused(tokens)
        updates = self._num_updates(n)
        cells = self._cells(defer=True)
        state = self._initial_state(B, cells, length=max(updates, 0))
        hidden, stack, reading = state.hidden, state.stack, state.reading
        # First layer's token part for all steps in one matmul: n x (B, G).
        projected = cells.project(self.dropout(self.embedding(tokens))).unbind(1)
        outputs = [self._output(self._top(hidden), reading)]
        weights = []
        for t in range(n):
            h, hidden = cells.step(projected[t], reading, hidden)
            actions, pushed = self._stack_inputs(h)
            if return_actions:
                weights.append(actions if self.kind == "Sup" else actions.exp())
            if t < updates:
                stack = stack.step(actions, pushed)
                reading = stack.reading()
            elif self.reading_to_output:  # rau_compat's last reading
                reading = actions[:, :1] * pushed
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

    def _num_updates(self, n: int) -> int:
        """Stack updates whose readings are used: r_1..r_{n-1}, and r_n with +R (§8.3);
        rau_compat replaces the last update by rau's r_n = a_push v_n [D4]."""
        return n if self.reading_to_output and not self.rau_compat else n - 1

    def _heads_hooked(self) -> bool:
        """Module hooks on the heads: they must see every step, so take the stepped pass."""
        return any(
            module._forward_hooks or module._forward_pre_hooks
            for module in (self.actions, self.pushed)
        )

    def _forward_fused(self, tokens: torch.Tensor) -> torch.Tensor:
        """The batched forward as one pass with a hand-written backward (`sup_pass` or
        `nd_pass`; the same result as the stepped loop in `forward`)."""
        B, n = tokens.shape
        updates = self._num_updates(n)
        cells = self._cells()  # W^k = [W_in | W_hh]ᵀ, biases, the token projection
        projected = cells.project(self.dropout(self.embedding(tokens.t())))  # (n, B, G)
        state = self.core.initial_state(B)
        h0, c0 = state if self.core.is_lstm else (state, None)
        L, _, d = h0.shape
        masks = None
        p = self.core.rnn.dropout
        if self.core.training and p > 0 and L > 1:  # Drop(h) between layers, as Cells
            # (torch.rand >= p) / (1 - p): F.dropout's law from a faster generator (p < 1)
            masks = torch.rand(L - 1, n, B, d, dtype=h0.dtype, device=h0.device).ge_(p)
            masks.mul_(1 / (1 - p))
        W_head = torch.cat((self.actions.weight, self.pushed.weight)).t()  # (d, A+m)
        b_head = torch.cat((self.actions.bias, self.pushed.bias))
        layers = cells.W_t, cells.bias[1:]
        if self.kind == "Sup":
            tops, readings = sup_pass(projected, h0, c0, W_head, b_head, *layers, updates, masks)
            r0 = readings.new_zeros(1, B, self.m)  # the empty stack reads 0
        else:
            from fruit.stacks import implementation
            from fruit.stacks.nondeterministic import COMPUTE_DTYPE

            Q, S = self.num_states, self.num_symbols
            bottom_log = F.logsigmoid(self.bottom)  # log v_0 (m,)
            work = bottom_log.detach().to(COMPUTE_DTYPE)
            buffers = implementation.dvpda_buffers(work, B, updates, Q, S)
            tops, readings = nd_pass(
                buffers, projected, h0, c0, W_head, b_head, bottom_log, Q, S, *layers, updates,
                masks,
            )  # fmt: skip
            v0 = torch.cat((bottom_log.exp(), bottom_log.new_zeros((Q * S - 1) * self.m)))
            r0 = v0.expand(1, B, Q * S * self.m)  # v_0 in the block (q0, ⊥)
        h = torch.cat((h0[-1][None], tops))  # (n+1, B, d): the initial state predicts w_1
        if self.reading_to_output:
            r = [r0, readings]  # r_0, r_1..r_updates
            if updates < n:  # rau_compat's last reading r_n = a_push v_n [D4]
                actions, pushed = self._stack_inputs(tops[-1])
                r.append((actions[:, :1] * pushed)[None])
            h = torch.cat((h, torch.cat(r)), -1)  # (n+1, B, d+r)
        return F.linear(self.dropout(h.transpose(0, 1)), self.embedding.weight)
