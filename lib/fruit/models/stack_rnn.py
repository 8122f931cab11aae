"""Stack RNN / LSTM: a 3-layer controller driving one stack, or several (docs/paper.md §8).

At t = 0 the controller is in its learned initial state, the stack is empty and
r_0 = Reading(S_0). For t ≥ 1:

    H_t = Rec(H_{t-1}, [Drop(E[w_t]); r_{t-1}])        the previous reading is fed back [D5]
    actions, pushed vector from the undropped top state h_t   [D12]
    S_t = Stack(S_{t-1}, actions, pushed);  r_t = Reading(S_t)
    y_t = E Drop(h_t), or E Drop([h_t; r_t]) with +R (then E has d + r columns)

Sup: softmax actions (push, pop, no-op), pushed σ(W_v h + b_v). Nd: unnormalised
log-weights W_a h + b_a, log pushed log σ(W_v h + b_v), learned bottom vector (each kind's
entry in ``fruit.models.stack_kinds``). With several stacks, each has its own heads on
h_t, and r_t is their readings one after the other.

Speed (the controller cannot be run over the whole sequence, so every op is paid per
time step): with one stack, the batched forward is one autograd Function with a hand-written backward,
controller and stack together (fruit.models.passes.stack_pass: oneDNN products and C
kernels for the pointwise work of each step on the CPU; the stack's driver is `sup_pass`
for Sup and `nd_pass`, the dVPDA's step kernels, for Nd). It tells the stack how many
updates follow (exact truncation for Sup, buffers allocated once for Nd). The stepped
loop (`recurrent.Cells`, one matmul per layer and step, the first layer's token part for
all steps at once, weight gradients deferred to one matmul per layer, and the stacks'
step API) is taken with several stacks, with a kind that has no fused driver, when
`return_actions` is asked for or a head has module hooks;
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
from fruit.models.recurrent import Cells, RecurrentCore
from fruit.models.stack_kinds import stack_kind


@dataclass
class StackRNNState:
    hidden: tuple  # controller state, one entry per layer: h (B, d) or (h, c)
    stacks: list  # one stack state per stack (fruit.models.stack_kinds' step API)
    reading: torch.Tensor  # r_{t-1} (B, r), every stack's reading, fed into the next step


class StackHeads(nn.Module):
    """One stack's heads on the controller's top state: W_a h + b_a and W_v h + b_v.
    (A kind's learned bottom vector is the language model's own parameter:
    ``StackRNNLM.bottom_vector``.)"""

    def __init__(self, kind: str, d: int, options: dict):
        super().__init__()
        self.kind = kind
        self.stack_kind = stack_kind(kind)
        num_actions, self.m, self.r = self.stack_kind.sizes(options)
        self.actions = nn.Linear(d, num_actions)  # W_a, b_a
        self.pushed = nn.Linear(d, self.m)  # W_v, b_v
        if self.stack_kind.xavier_rnn_heads:
            xavier(self.actions)
            xavier(self.pushed)

    def inputs(self, h):
        """h (B, d) -> (stack actions, pushed vector or its log). The heads are called as
        modules: hooks see every step."""
        return self.stack_kind.rnn_inputs(self.actions(h), self.pushed(h))

    def hooked(self) -> bool:
        return any(
            module._forward_hooks or module._forward_pre_hooks
            for module in (self.actions, self.pushed)
        )


class StackRNNLM(nn.Module):
    def __init__(self, spec, vocab_size: int, d: int, options: dict):
        super().__init__()
        self.architecture = spec.name
        self.vocab_size = vocab_size
        self.d = d
        self.options = dict(options)
        self.reading_to_output = spec.reading_to_output
        p = options["dropout"]
        heads = [StackHeads(kind, d, options) for kind in spec.stacks]
        r = sum(h.r for h in heads)  # every stack's reading together
        e = d + r if self.reading_to_output else d
        self.embedding = nn.Embedding(vocab_size + 1, e)  # tied to an output of size e
        self.core = RecurrentCore(spec.base, e + r, d, spec.num_layers, p)
        self.stacks = nn.ModuleList(heads)  # registered after the core: rau's parameter order
        # [D4] only Sup+R has rau's truncated last reading in the batched forward pass.
        self.rau_compat = (
            bool(options["rau_compat"])
            and len(heads) == 1
            and heads[0].stack_kind.rau_last_reading is not None
        )
        # θ_⊥ of the kinds that have one: the model's own parameters, which come before
        # every module's in parameters() and so in the initialisation's draws (rau's order)
        for i, head in enumerate(heads):
            if head.stack_kind.bottom:
                self.register_parameter(_bottom_name(i), nn.Parameter(torch.empty(head.m)))
        self.dropout = nn.Dropout(p)
        self._register_load_state_dict_pre_hook(_one_stack_keys)

    def bottom_vector(self, i: int):
        """θ_⊥ of stack i, or None when its kind has none."""
        return getattr(self, _bottom_name(i)) if self.stacks[i].stack_kind.bottom else None

    # -- pieces ---------------------------------------------------------------------------

    def _cells(self, defer: bool = False) -> Cells:
        """The controller one step at a time (weights arranged once per pass)."""
        return self.core.unroll(self.embedding.embedding_dim, defer)

    def _initial_state(self, batch_size: int, cells, length: int | None = None) -> StackRNNState:
        """H_0, the empty stacks S_0 and r_0. length: the number of updates that will
        follow, when known (lets a stack keep only what can still be read)."""
        w = self.embedding.weight
        stacks = [
            head.stack_kind.initial(
                self.bottom_vector(i), batch_size, self.options, w.dtype, w.device, length=length
            )
            for i, head in enumerate(self.stacks)
        ]
        hidden = cells.initial(self.core.initial_state(batch_size))
        return StackRNNState(hidden, stacks, self._reading(stacks))

    @staticmethod
    def _reading(stacks):  # (B, r)
        readings = [stack.reading() for stack in stacks]
        return readings[0] if len(readings) == 1 else torch.cat(readings, -1)

    def _step_stacks(self, stacks, h):
        """Every stack one update on h (B, d) -> (new stacks, their actions)."""
        new, actions = [], []
        for head, stack in zip(self.stacks, stacks):
            a, pushed = head.inputs(h)
            new.append(stack.step(a, pushed))
            actions.append(a)
        return new, actions

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
        stacks, _ = self._step_stacks(state.stacks, h)
        reading = self._reading(stacks)
        return self._logits(h, reading), StackRNNState(hidden, stacks, reading)

    def select_state(self, state: StackRNNState, index: torch.Tensor) -> StackRNNState:
        pick = lambda x: x.index_select(0, index)  # noqa: E731
        if self.core.is_lstm:
            hidden = tuple((pick(h), pick(c)) for h, c in state.hidden)
        else:
            hidden = tuple(pick(h) for h in state.hidden)
        stacks = [stack.select(index) for stack in state.stacks]
        return StackRNNState(hidden, stacks, pick(state.reading))

    def forward(self, tokens: torch.Tensor, return_actions: bool = False):
        """tokens (B, n) -> logits (B, n+1, V+1); with return_actions also one (B, n, A)
        tensor of action weights per stack."""
        B, n = tokens.shape
        if n > 0 and self._fused_driver() and not return_actions and not self._heads_hooked():
            return self._forward_fused(tokens)
        updates = self._num_updates(n)
        cells = self._cells(defer=True)
        state = self._initial_state(B, cells, length=max(updates, 0))
        hidden, stacks, reading = state.hidden, state.stacks, state.reading
        # First layer's token part for all steps in one matmul: n x (B, G).
        projected = cells.project(self.dropout(self.embedding(tokens))).unbind(1)
        outputs = [self._output(self._top(hidden), reading)]
        weights = [[] for _ in self.stacks]
        for t in range(n):
            h, hidden = cells.step(projected[t], reading, hidden)
            if t < updates:
                stacks, actions = self._step_stacks(stacks, h)
                reading = self._reading(stacks)
            else:  # no update: the actions only (for the weights, and rau_compat)
                inputs = [head.inputs(h) for head in self.stacks]
                actions = [a for a, _ in inputs]
                if self.reading_to_output:  # rau_compat's last reading
                    reading = self.stacks[0].stack_kind.rau_last_reading(*inputs[0])
            if return_actions:
                for w, head, a in zip(weights, self.stacks, actions):
                    w.append(head.stack_kind.reported(a))
            outputs.append(self._output(h, reading))
        logits = F.linear(self.dropout(torch.stack(outputs, dim=1)), self.embedding.weight)
        if not return_actions:
            return logits
        return logits, [
            torch.stack(w, dim=1) if w else logits.new_zeros(B, 0, head.actions.out_features)
            for w, head in zip(weights, self.stacks)
        ]

    def _output(self, h, reading):  # the undropped output vector (B, e)
        return torch.cat((h, reading), dim=-1) if self.reading_to_output else h

    def _num_updates(self, n: int) -> int:
        """Stack updates whose readings are used: r_1..r_{n-1}, and r_n with +R (§8.3);
        rau_compat replaces the last update by rau's r_n = a_push v_n [D4]."""
        return n if self.reading_to_output and not self.rau_compat else n - 1

    def _fused_driver(self) -> bool:
        """One stack whose kind has a fused one-pass driver (``StackKind.fused``)."""
        return len(self.stacks) == 1 and self.stacks[0].stack_kind.fused is not None

    def _heads_hooked(self) -> bool:
        """Module hooks on the heads: they must see every step, so take the stepped pass."""
        return any(head.hooked() for head in self.stacks)

    def _forward_fused(self, tokens: torch.Tensor) -> torch.Tensor:
        """The batched forward of a one-stack model as one pass with a hand-written
        backward (its kind's ``fused`` driver; the same result as the stepped loop)."""
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
        (head,) = self.stacks
        W_head = torch.cat((head.actions.weight, head.pushed.weight)).t()  # (d, A+m)
        b_head = torch.cat((head.actions.bias, head.pushed.bias))
        layers = cells.W_t, cells.bias[1:]
        tops, readings, r0 = head.stack_kind.fused(
            projected, h0, c0, W_head, b_head, self.bottom_vector(0), self.options, layers,
            updates, masks,
        )  # fmt: skip
        h = torch.cat((h0[-1][None], tops))  # (n+1, B, d): the initial state predicts w_1
        if self.reading_to_output:
            r = [r0, readings]  # r_0, r_1..r_updates
            if updates < n:  # rau_compat's last reading r_n = a_push v_n [D4]
                last = head.stack_kind.rau_last_reading(*head.inputs(tops[-1]))
                r.append(last[None])
            h = torch.cat((h, torch.cat(r)), -1)  # (n+1, B, d+r)
        return F.linear(self.dropout(h.transpose(0, 1)), self.embedding.weight)


def _bottom_name(i: int) -> str:
    return "bottom" if i == 0 else f"bottom_{i}"


def _one_stack_keys(state_dict, prefix, *args):
    """Checkpoints saved before models could have several stacks name the one stack's
    heads ``actions.*`` and ``pushed.*``: read them as ``stacks.0.*``."""
    for key in list(state_dict):
        rest = key[len(prefix) :]
        if key.startswith(prefix) and rest.split(".")[0] in ("actions", "pushed"):
            state_dict[f"{prefix}stacks.0.{rest}"] = state_dict.pop(key)
