"""The kinds of differentiable stack, one registry entry each (``STACK_KINDS``).

A stack kind says everything a model needs to drive that stack, so that the transformer's
stack-attention layer (``fruit.models.stack_attention``) and the stack RNN
(``fruit.models.stack_rnn``) hold no kind-specific code, and the parameter count
(``fruit.models.sizing``) none either:

* ``sizes(options)``: (A, m, r), the actions per step, the pushed vector's size and the
  reading's size; ``bottom``: whether the stack has a learned bottom vector θ_⊥ (m more
  parameters);
* ``attention_inputs`` / ``rnn_inputs``: the stack's actions and pushed vector from the
  two linear heads' outputs (and, for the attention layer, the action weights it reports);
* ``readings``: the whole-sequence reading (training); ``initial``: the step API's empty
  stack (decoding, the stepped RNN path);
* ``fused`` (optional): the stack RNN's one-pass forward with a hand-written backward
  (one stack); a kind without one (``fused = None``) runs the stepped loop there;
* ``action_mass``: push / pop / ... mass per position, for the explore notebook;
* ``xavier_rnn_heads``: how a stack RNN's heads are initialised ([D2]).

The paper has two: the superposition stack ``Sup`` (docs/paper.md §5) and the
nondeterministic stack ``Nd`` (the dVPDA, §6). A new kind is one more subclass of
``StackKind`` and one more instance in ``STACK_KINDS``; options of its own (sizes) go
into ``fruit.model_options.DEFAULT_OPTIONS`` (docs/extending.md, section 3).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

SUP_ACTIONS = ("push", "pop", "no-op")


class StackKind:
    """The interface of a stack kind (see the module docstring)."""

    name: str = ""
    bottom: bool = False  # a learned bottom vector θ_⊥ (m parameters)
    xavier_rnn_heads: bool = True
    # rau's last reading of a +R stack RNN's batched pass, (actions, pushed) -> (B, r) [D4];
    # None: the kind has none (the model then updates the stack once more)
    rau_last_reading = None

    def sizes(self, options: dict) -> tuple[int, int, int]:
        raise NotImplementedError

    def attention_inputs(self, logits: Tensor, pushed: Tensor, sigmoid_push: bool):
        """Head outputs (..., A), (..., m) -> (actions, pushed, action weights (..., A))."""
        raise NotImplementedError

    def rnn_inputs(self, logits: Tensor, pushed: Tensor):
        """A stack RNN's head outputs -> (actions, pushed)."""
        raise NotImplementedError

    def reported(self, actions: Tensor) -> Tensor:
        """The action weights a model reports (``return_actions``) for its actions."""
        raise NotImplementedError

    def readings(self, actions: Tensor, pushed: Tensor, bottom: Tensor | None, options: dict):
        """Whole sequence: actions (B, T, A), pushed (B, T, m) -> readings (B, T, r)."""
        raise NotImplementedError

    def initial(self, bottom, batch_size: int, options: dict, dtype, device, length=None):
        """The empty stack of the step API (``step(actions, pushed)``, ``reading()``)."""
        raise NotImplementedError

    # A stack RNN's one-pass forward (``fruit.models.passes``), optional: a method
    # fused(projected, h0, c0, W_head, b_head, bottom, options, layers, updates, masks)
    # -> (tops (n, B, d), readings r_1.. (updates, B, r), the empty stack's reading r_0
    # (1, B, r)); None: one-stack RNNs run the stepped loop (correct, slower).
    fused = None

    def action_mass(self, weights: Tensor, options: dict) -> tuple[Tensor, tuple[str, ...]]:
        """Reported weights (n, A) -> (mass (n, k), its k labels), each row summing to 1."""
        raise NotImplementedError


class Superposition(StackKind):
    """Superposition stack: softmax over push, pop, no-op; a pushed vector of size m."""

    name = "Sup"

    def sizes(self, options):
        m = options["sup_size"]
        return 3, m, m

    def attention_inputs(self, logits, pushed, sigmoid_push):
        probs = torch.softmax(logits, dim=-1)  # [push, pop, no-op] [D7]
        return probs, torch.sigmoid(pushed) if sigmoid_push else pushed, probs

    def rnn_inputs(self, logits, pushed):
        return torch.softmax(logits, dim=-1), torch.sigmoid(pushed)

    @staticmethod
    def rau_last_reading(actions, pushed):
        return actions[:, :1] * pushed  # r_n = a_push v_n

    def reported(self, actions):
        return actions

    def readings(self, actions, pushed, bottom, options):
        from fruit.stacks import superposition_readings

        return superposition_readings(actions, pushed)

    def initial(self, bottom, batch_size, options, dtype, device, length=None):
        from fruit.stacks import SuperpositionStack

        m = options["sup_size"]
        return SuperpositionStack.initial(batch_size, m, dtype=dtype, device=device, length=length)

    def fused(self, projected, h0, c0, W_head, b_head, bottom, options, layers, updates, masks):
        from fruit.models.passes.sup_pass import sup_pass

        tops, readings = sup_pass(projected, h0, c0, W_head, b_head, *layers, updates, masks)
        r0 = readings.new_zeros(1, h0.size(1), options["sup_size"])  # the empty stack reads 0
        return tops, readings, r0

    def action_mass(self, weights, options):
        return weights / weights.sum(-1, keepdim=True), SUP_ACTIONS


class Nondeterministic(StackKind):
    """The dVPDA: unnormalised log-weights of |Q||Γ|(2|Q||Γ| + |Q|) actions, the log of
    the pushed vector, a learned bottom vector; reading size |Q||Γ|m."""

    name = "Nd"
    bottom = True
    xavier_rnn_heads = False  # plain uniform-initialised linear layers [D2]

    def sizes(self, options):
        from fruit.stacks.nondeterministic import num_actions

        q, s, m = options["nd_states"], options["nd_symbols"], options["nd_size"]
        return num_actions(q, s), m, q * s * m

    def attention_inputs(self, logits, pushed, sigmoid_push):
        pushed_log = F.logsigmoid(pushed) if sigmoid_push else pushed
        return logits, pushed_log, logits.exp()

    def rnn_inputs(self, logits, pushed):
        return logits, F.logsigmoid(pushed)

    def reported(self, actions):
        return actions.exp()

    def readings(self, actions, pushed, bottom, options):
        from fruit.stacks import dvpda_readings

        return dvpda_readings(  # (B, T, Q*S*m)
            actions, pushed, F.logsigmoid(bottom), options["nd_states"], options["nd_symbols"]
        )

    def initial(self, bottom, batch_size, options, dtype, device, length=None):
        from fruit.stacks import DVPDAStack

        return DVPDAStack.initial(
            F.logsigmoid(bottom),
            batch_size,
            options["nd_states"],
            options["nd_symbols"],
            length=length,
        )

    def fused(self, projected, h0, c0, W_head, b_head, bottom, options, layers, updates, masks):
        from fruit.models.passes.nd_pass import nd_pass
        from fruit.stacks import implementation
        from fruit.stacks.nondeterministic import COMPUTE_DTYPE

        Q, S = options["nd_states"], options["nd_symbols"]
        B = h0.size(1)
        bottom_log = F.logsigmoid(bottom)  # log v_0 (m,)
        work = bottom_log.detach().to(COMPUTE_DTYPE)
        buffers = implementation.dvpda_buffers(work, B, updates, Q, S)
        tops, readings = nd_pass(
            buffers, projected, h0, c0, W_head, b_head, bottom_log, Q, S, *layers, updates,
            masks,
        )  # fmt: skip
        m = bottom.numel()
        v0 = torch.cat((bottom_log.exp(), bottom_log.new_zeros((Q * S - 1) * m)))
        return tops, readings, v0.expand(1, B, Q * S * m)  # v_0 in the block (q0, ⊥)

    def action_mass(self, weights, options):
        from fruit.models.actions import ND_ACTION_KINDS, nd_action_mass

        mass = nd_action_mass(weights, options["nd_states"], options["nd_symbols"], normalize=True)
        return mass, ND_ACTION_KINDS


# Kinds of your own: a subclass here, an instance in the registry below.


# The registry: kind name (as in architecture descriptions, fruit.names) -> its entry.
STACK_KINDS: dict[str, StackKind] = {
    kind.name: kind
    for kind in (
        Superposition(),
        Nondeterministic(),
        # Yours below
    )
}


def stack_kind(name: str) -> StackKind:
    from fruit.errors import unknown_choice

    if name not in STACK_KINDS:
        raise unknown_choice("stack kind", name, tuple(STACK_KINDS))
    return STACK_KINDS[name]
