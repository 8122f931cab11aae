"""Simple RNN and LSTM language models (docs/paper.md §4).

Three layers of size d with a learned initial hidden state h_0 = tanh(θ_0) (c_0 = 0),
one bias per gate (PyTorch's redundant hidden-to-hidden bias is zeroed and frozen, as
in rau), dropout on the embeddings, between layers (PyTorch's inter-layer dropout) and
on the top layer's output, and tied output weights with no bias. No BOS: the initial
state's output predicts w_1.

The plain models run ``nn.RNN`` / ``nn.LSTM`` over the whole sequence. Stack RNNs must
interleave the controller with the stack one time step at a time; for them
``RecurrentCore.unroll`` gives a ``Cells`` object that runs one step of all layers
with the same parameters as plain matmuls and pointwise ops (a length-1 call of
``nn.LSTM`` costs several times more on the CPU), and projects the first layer's
token inputs for all time steps in one matmul.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fruit.kernels.products import project


class RecurrentCore(nn.Module):
    """A multi-layer ``nn.RNN`` (tanh) or ``nn.LSTM`` with a learned initial state.

    The state is ``h`` (layers, B, d) for the RNN and ``(h, c)`` for the LSTM.
    """

    def __init__(self, kind: str, input_size: int, d: int, num_layers: int, dropout: float):
        super().__init__()
        self.is_lstm = kind == "LSTM"
        cls = nn.LSTM if self.is_lstm else nn.RNN
        self.rnn = cls(input_size, d, num_layers, batch_first=True, dropout=dropout)
        for name, p in self.rnn.named_parameters():
            if name.startswith("bias_hh"):  # one bias per gate: freeze the duplicate at 0
                p.data.zero_()
                p.requires_grad_(False)
        self.initial_hidden = nn.Parameter(torch.empty(num_layers, d))  # θ_0

    def initial_state(self, batch_size: int):
        L, d = self.initial_hidden.shape
        h = torch.tanh(self.initial_hidden)[:, None, :].expand(L, batch_size, d).contiguous()
        return (h, torch.zeros_like(h)) if self.is_lstm else h

    def forward(self, x, state):  # x (B, T, in) -> outputs of the top layer (B, T, d), state
        return self.rnn(x, state)

    def top(self, state):  # -> top layer's hidden state (B, d)
        return (state[0] if self.is_lstm else state)[-1]

    def select(self, state, index):
        if self.is_lstm:
            return tuple(x.index_select(1, index) for x in state)
        return state.index_select(1, index)

    def unroll(self, token_size: int, defer: bool = False) -> Cells:
        """Step-by-step view of this core whose first-layer input is [token (token_size); extra].

        defer: one pass from `initial` on, stepped with this object only (the batched
        forward); weight gradients are then computed once for all steps."""
        return Cells(self, token_size, defer)


class Cells:
    """One forward pass of a ``RecurrentCore``, one time step at a time.

    Layer k computes its gates as [u; h] @ W_k^T with W_k = [W_ih | W_hh] joined once
    here (one matmul per layer and step). A step's state is a tuple with one entry per
    layer: ``h`` (B, d), or ``(h, c)`` for the LSTM.

    With ``defer``, weight gradients are deferred when differentiating: the per-step matmuls use
    detached weights, so autograd only propagates to their inputs; a hook on each
    step's gates keeps dL/dgates, and `_DeferredWeights`, placed on the first layer's
    initial h (which every step depends on, so its backward runs last), returns
    dL/dW_k = sum_t dgates_t^T [u_t; h_t] as one matmul over all steps (first-order
    gradients only: no create_graph through the weights).
    """

    def __init__(self, core: RecurrentCore, token_size: int, defer: bool = False):
        rnn = core.rnn
        self.is_lstm = core.is_lstm
        self.p = rnn.dropout
        self.training = core.training
        L = rnn.num_layers
        W_ih = [getattr(rnn, f"weight_ih_l{k}") for k in range(L)]
        W_hh = [getattr(rnn, f"weight_hh_l{k}") for k in range(L)]
        b_ih = [getattr(rnn, f"bias_ih_l{k}") for k in range(L)]
        b_hh = [getattr(rnn, f"bias_hh_l{k}") for k in range(L)]
        self.W_token = W_ih[0][:, :token_size]  # (G, token_size), G = 4d (LSTM) or d
        self.bias0 = b_ih[0] + b_hh[0]
        W_in = [W_ih[0][:, token_size:]] + W_ih[1:]  # the inputs stepped here: extra, h below
        # Parameters whose gradients are deferred, per layer: W_in, W_hh, biases (k > 0).
        self.params = [
            (W_in[k], W_hh[k]) + (() if k == 0 else (b_ih[k], b_hh[k])) for k in range(L)
        ]
        flat = [p for layer in self.params for p in layer]
        self.tape = None
        if defer and torch.is_grad_enabled() and any(p.requires_grad for p in flat):
            self.tape = _Tape(L)
        keep = (lambda x: x.detach()) if self.tape is not None else (lambda x: x)
        self.W_t = [keep(torch.cat((W_in[k], W_hh[k]), 1)).t() for k in range(L)]  # (K+d, G)
        self.bias = [None] + [keep(b_ih[k] + b_hh[k]) for k in range(1, L)]

    def initial(self, state) -> tuple:
        """The core's (L, B, d) state -> per-layer tuple."""
        if self.is_lstm:
            layers = list(zip(state[0].unbind(0), state[1].unbind(0)))
        else:
            layers = list(state.unbind(0))
        if self.tape is not None:  # every step depends on layer 1's h_0
            flat = [p for layer in self.params for p in layer]
            h0 = layers[0][0] if self.is_lstm else layers[0]
            h0 = _DeferredWeights.apply(self.tape, self.params, h0, *flat)
            layers[0] = (h0, layers[0][1]) if self.is_lstm else h0
        return tuple(layers)

    def project(self, tokens: Tensor) -> Tensor:
        """First layer's token part and bias, (..., token_size) -> (..., G); for all steps at once."""
        return project(tokens, self.W_token, self.bias0)  # oneDNN on the CPU, as nn.LSTM's

    def step(self, projected: Tensor, extra: Tensor, state: tuple) -> tuple[Tensor, tuple]:
        """projected (B, G) from `project`, extra (B, extra) -> top h (B, d), new state.

        Layer 1 gets [token; extra]; layer l > 1 gets Drop(h of layer l-1) (PyTorch's
        inter-layer dropout); the recurrences use the undropped h.
        """
        new = []
        below = None
        for k, layer in enumerate(state):
            h = layer[0] if self.is_lstm else layer
            if k == 0:
                x, base = torch.cat((extra, h), 1), projected
            else:
                x, base = torch.cat((F.dropout(below, self.p, self.training), h), 1), self.bias[k]
            gates = torch.addmm(base, x, self.W_t[k])  # (B, G)
            if self.tape is not None and gates.requires_grad:
                self.tape.record(k, x, gates)
            if self.is_lstm:
                below, c = _lstm_pointwise(gates, layer[1])
                new.append((below, c))
            else:
                below = torch.tanh(gates)
                new.append(below)
        return below, tuple(new)


class _Tape:
    """Inputs [u_t; h_t] of each layer's matmul, and dL/dgates_t from hooks in the backward pass."""

    def __init__(self, num_layers: int):
        self.inputs = [[] for _ in range(num_layers)]
        self.grads = [{} for _ in range(num_layers)]

    def record(self, k: int, x: Tensor, gates: Tensor) -> None:
        t = len(self.inputs[k])
        self.inputs[k].append(x.detach())
        gates.register_hook(lambda g: self.grads[k].__setitem__(t, g))

    def weight_grads(self, k: int):
        """-> dL/d[W_in | W_hh] (G, K+d) and dL/db (G,) of layer k, or None if no hook fired."""
        grads = self.grads[k]
        if not grads:
            return None, None
        steps = sorted(grads)
        g = torch.cat([grads[t] for t in steps])  # (sum B, G)
        x = torch.cat([self.inputs[k][t] for t in steps])  # (sum B, K+d)
        grads.clear()  # a second backward pass over a retained graph refills them
        return g.t() @ x, g.sum(0)


class _DeferredWeights(torch.autograd.Function):
    """Identity on h_0; its backward also returns the deferred weight gradients."""

    @staticmethod
    def forward(ctx, tape, params, h0, *flat):
        ctx.tape, ctx.params = tape, params
        ctx.set_materialize_grads(False)
        return h0.clone()

    @staticmethod
    def backward(ctx, g_h0):
        out = []
        for k, layer in enumerate(ctx.params):
            g_W, g_b = ctx.tape.weight_grads(k)
            K = layer[0].size(1)
            grads = (None, None) if g_W is None else (g_W[:, :K], g_W[:, K:])
            grads += () if k == 0 else (g_b, g_b)
            out += [g if p.requires_grad else None for g, p in zip(grads, layer)]
        return (None, None, g_h0, *out)


def _lstm_pointwise(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """Gates (B, 4d) in PyTorch's order i, f, g, o; c (B, d) -> h, c."""
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


class RecurrentLM(nn.Module):
    def __init__(self, spec, vocab_size: int, d: int, options: dict):
        super().__init__()
        self.architecture = spec.name
        self.vocab_size = vocab_size
        self.d = d
        self.options = dict(options)
        p = options["dropout"]
        self.embedding = nn.Embedding(vocab_size + 1, d)  # content types and EOS
        self.core = RecurrentCore(spec.base, d, d, spec.num_layers, p)
        self.dropout = nn.Dropout(p)

    def _logits(self, h):  # (..., d) -> (..., V+1)
        return F.linear(self.dropout(h), self.embedding.weight)

    @property
    def not_capturable(self) -> str | None:
        """Why a CUDA graph cannot replay this model's training step
        (fruit.training.graphs), or None: cuDNN runs ``nn.RNN``/``nn.LSTM`` with a
        dropout state of its own, which a graph cannot advance (the stack RNNs step
        their own cells and have no such state)."""
        rnn = self.core.rnn
        if rnn.dropout > 0 and rnn.num_layers > 1:
            return f"cuDNN's {type(rnn).__name__} keeps a dropout state a graph cannot advance"
        return None

    def forward(self, tokens: torch.Tensor, return_actions: bool = False):
        """tokens (B, n) -> logits (B, n+1, V+1); position t predicts w_{t+1}."""
        state = self.core.initial_state(tokens.shape[0])
        h = self.core.top(state)[:, None]  # (B, 1, d): the initial state predicts w_1
        if tokens.shape[1] > 0:
            outputs, _ = self.core(self.dropout(self.embedding(tokens)), state)  # (B, n, d)
            h = torch.cat((h, outputs), dim=1)  # (B, n+1, d)
        logits = self._logits(h)
        return (logits, []) if return_actions else logits

    def start(self, batch_size: int):
        state = self.core.initial_state(batch_size)
        return self._logits(self.core.top(state)), state

    def step(self, state, tokens: torch.Tensor):
        x = self.dropout(self.embedding(tokens))[:, None]  # (B, 1, d)
        outputs, state = self.core(x, state)
        return self._logits(outputs[:, 0]), state

    def select_state(self, state, index: torch.Tensor):
        return self.core.select(state, index)
