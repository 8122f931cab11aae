"""The pre-norm transformer language model and its stack-attention variants (docs/paper.md §3).

Input z_0 = BOS, z_t = w_t; h⁰_t = Drop(√d E[z_t] + p_t) with interleaved sinusoidal
positions. The description's pre-norm layers (five in the paper's models; each standard,
or with stack attention in place of multi-head attention), a final LN, and tied output weights E[0..V] with no bias.

Incremental decoding keeps, per layer, the keys and values seen so far (standard
layers) or the stack state (stack layers), so one step costs one position.

Dropout is `fruit.kernels.dropout` (the law of torch.nn.Dropout on a counter-based
random stream, about three times cheaper on the CPU), so on the CPU attention is written
out here (scores, softmax, dropout on the probabilities, weighted values): every mask is
a function of the seed, the same on every CPU. On CUDA, where one run's step is a chain
of small kernels, the standard layers' attention is PyTorch's fused
``scaled_dot_product_attention`` instead, whose dropout draws its masks from the CUDA
generator: the law is the same, the masks are not the CPU's, so a CUDA run is
reproducible on CUDA (the same seed, device kind and PyTorch version), not bit for bit
against the CPU (the other dropouts are PyTorch's own on CUDA too, see
``fruit.kernels.dropout``). ``FRUIT_FUSED_ATTENTION=0`` keeps the written-out attention
on CUDA, ``=1`` takes the fused one on the CPU too (the tests compare the two).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fruit.kernels.build import switch
from fruit.kernels.dropout import Dropout, dropout
from fruit.models.init import xavier
from fruit.models.stack_attention import StackAttention


def sinusoidal_positions(positions: torch.Tensor, d: int) -> torch.Tensor:
    """positions (T,) -> (T, d): p[t, 2i] = sin(t ω_i), p[t, 2i+1] = cos(t ω_i), ω_i = 10000^(-2i/d)."""
    i = torch.arange(d // 2, device=positions.device, dtype=torch.float32)
    omega = torch.exp(-2 * i * math.log(10000.0) / d)  # (d/2,)
    angles = positions.to(torch.float32)[:, None] * omega[None, :]  # (T, d/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # interleaved


def fused_attention(device: torch.device) -> bool:
    """Whether the standard layers attend with scaled_dot_product_attention on ``device``:
    on CUDA unless FRUIT_FUSED_ATTENTION=0, elsewhere only with FRUIT_FUSED_ATTENTION=1."""
    choice = switch("FRUIT_FUSED_ATTENTION", "")
    return choice == "1" or (choice == "" and device.type == "cuda")


def causal_mask(T: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(T, T): 0 on and below the diagonal, -inf above (position t sees 0..t). Cached,
    except while a CUDA graph is being captured: the graph then makes it itself, since a
    cached tensor could be evicted and its memory reused while the graph still reads it."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return _causal_mask(T, dtype, device)
    return _cached_causal_mask(T, dtype, device)


def _causal_mask(T: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.full((T, T), float("-inf"), dtype=dtype, device=device).triu(1)


_cached_causal_mask = functools.lru_cache(maxsize=16)(_causal_mask)


class FeedForward(nn.Module):
    """W_2 Drop(ReLU(W_1 b + c_1)) + c_2 with hidden size 2d."""

    def __init__(self, d: int, dropout: float, use_xavier: bool):
        super().__init__()
        self.hidden = nn.Linear(d, 2 * d)
        self.out = nn.Linear(2 * d, d)
        if use_xavier:  # inside stack-attention layers [D2]
            xavier(self.hidden, gain=math.sqrt(2.0))
            xavier(self.out, gain=1.0)
        self.dropout = Dropout(dropout)

    def forward(self, b):
        return self.out(self.dropout(F.relu(self.hidden(b))))


class CausalSelfAttention(nn.Module):
    """Multi-head causal attention with one in-projection [q;k;v] and an output projection."""

    def __init__(self, d: int, num_heads: int, dropout: float):
        super().__init__()
        self.num_heads = num_heads
        self.in_proj = nn.Linear(d, 3 * d)
        self.out_proj = nn.Linear(d, d)
        self.dropout = dropout  # on the attention probabilities

    def _heads(self, x):  # (B, T, d) -> (B, heads, T, d/heads)
        B, T, d = x.shape
        return x.view(B, T, self.num_heads, d // self.num_heads).transpose(1, 2)

    def _attend(self, a, cache, causal: bool):
        q, k, v = (self._heads(x) for x in self.in_proj(a).chunk(3, dim=-1))
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)  # (B, heads, t+1, d/heads)
            v = torch.cat((cache[1], v), dim=2)
        B, H, T, dh = q.shape
        if fused_attention(q.device):  # one fused kernel (dropout: PyTorch's own masks)
            p = self.dropout if self.training else 0.0
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
            return self.out_proj(o.transpose(1, 2).reshape(B, T, H * dh)), (k, v)
        q_, k_, v_ = (x.reshape(B * H, -1, dh) for x in (q, k, v))  # (B·heads, ., d/heads)
        if causal:  # q k^T / sqrt(d/heads), -inf above the diagonal: (B·heads, T, T)
            mask = causal_mask(T, q.dtype, q.device)
            scores = torch.baddbmm(mask, q_, k_.transpose(1, 2), alpha=1.0 / math.sqrt(dh))
        else:  # the new queries see every key so far: (B·heads, T, keys)
            scores = torch.bmm(q_, k_.transpose(1, 2)) / math.sqrt(dh)
        weights = dropout(scores.softmax(-1), self.dropout, self.training)
        o = torch.bmm(weights, v_).view(B, H, T, dh)  # (B, heads, T, d/heads)
        return self.out_proj(o.transpose(1, 2).reshape(B, T, H * dh)), (k, v)

    def forward(self, a):  # (B, T, d) -> (B, T, d)
        return self._attend(a, None, causal=True)[0]

    def step(self, a, cache):  # a (B, d); cache (keys, values) or None -> (B, d), cache
        out, cache = self._attend(a[:, None], cache, causal=False)
        return out[:, 0], cache


class TransformerLayer(nn.Module):
    """Pre-norm layer: u = h + Drop(Attn(LN₁ h)); h' = u + Drop(FF(LN₂ u)).

    Attn is causal multi-head attention (``stack=None``) or stack attention of the stack
    kind ``stack`` (``fruit.models.stack_kinds``).
    """

    def __init__(self, d: int, options: dict, num_heads: int, stack: str | None):
        super().__init__()
        p = options["dropout"]
        self.norm1 = nn.LayerNorm(d)
        if stack is None:
            self.attention = CausalSelfAttention(d, num_heads, p)
        else:
            self.attention = StackAttention(stack, d, options)
        self.norm2 = nn.LayerNorm(d)
        self.ff = FeedForward(d, p, use_xavier=stack is not None)
        self.dropout = Dropout(p)
        self.has_stack = stack is not None

    def forward(self, h):  # (B, T, d) -> (B, T, d), action weights or None
        weights = None
        if self.has_stack:
            a, weights = self.attention(self.norm1(h))
        else:
            a = self.attention(self.norm1(h))
        u = h + self.dropout(a)
        return u + self.dropout(self.ff(self.norm2(u))), weights

    def initial_state(self, batch_size: int, dtype, device):
        if self.has_stack:
            return self.attention.initial_state(batch_size, dtype, device)
        return None  # empty key/value cache

    def step(self, h, state):  # h (B, d) -> (B, d), state, action weights or None
        weights = None
        if self.has_stack:
            a, state, weights = self.attention.step(self.norm1(h), state)
        else:
            a, state = self.attention.step(self.norm1(h), state)
        u = h + self.dropout(a)
        return u + self.dropout(self.ff(self.norm2(u))), state, weights


@dataclass
class TransformerState:
    position: int  # of the next input
    layers: list  # per layer: (keys, values) / None, or a stack state


class TransformerLM(nn.Module):
    def __init__(self, spec, vocab_size: int, d: int, options: dict):
        super().__init__()
        self.architecture = spec.name
        self.vocab_size = vocab_size
        self.d = d
        self.options = dict(options)
        self.bos_id = vocab_size + 1
        self.embedding = nn.Embedding(vocab_size + 2, d)  # content, EOS, BOS [D10]
        self.layers = nn.ModuleList(
            TransformerLayer(d, options, spec.num_heads, kind) for kind in spec.layer_kinds
        )
        self.final_norm = nn.LayerNorm(d)
        self.dropout = Dropout(options["dropout"])

    def _input(self, z, positions):  # z (..., T) ids, positions (T,) -> (..., T, d)
        p = sinusoidal_positions(positions, self.d).to(self.embedding.weight.dtype)
        return self.dropout(math.sqrt(self.d) * self.embedding(z) + p)

    def _logits(self, h):  # BOS row is input-only
        return F.linear(self.final_norm(h), self.embedding.weight[: self.vocab_size + 1])

    def forward(self, tokens: torch.Tensor, return_actions: bool = False):
        """tokens (B, n) -> logits (B, n+1, V+1); position t predicts w_{t+1}."""
        B, n = tokens.shape
        bos = tokens.new_full((B, 1), self.bos_id)
        z = torch.cat((bos, tokens), dim=1)  # (B, n+1)
        h = self._input(z, torch.arange(n + 1, device=tokens.device))
        actions = []
        for layer in self.layers:
            h, weights = layer(h)
            if weights is not None:
                actions.append(weights)  # (B, n+1, A)
        logits = self._logits(h)
        return (logits, actions) if return_actions else logits

    def start(self, batch_size: int):
        """Read BOS: -> (logits for w_1 (B, V+1), state)."""
        w = self.embedding.weight
        state = TransformerState(
            0, [layer.initial_state(batch_size, w.dtype, w.device) for layer in self.layers]
        )
        bos = torch.full((batch_size,), self.bos_id, dtype=torch.long, device=w.device)
        return self.step(state, bos)

    def step(self, state: TransformerState, tokens: torch.Tensor):
        """Read z_t (B,) at position state.position: -> (logits for the next token, state)."""
        positions = torch.tensor([state.position], device=tokens.device)
        h = self._input(tokens[:, None], positions)[:, 0]  # (B, d)
        new_layers = []
        for layer, layer_state in zip(self.layers, state.layers):
            h, layer_state, _ = layer.step(h, layer_state)
            new_layers.append(layer_state)
        return self._logits(h), TransformerState(state.position + 1, new_layers)

    def select_state(self, state: TransformerState, index: torch.Tensor) -> TransformerState:
        layers = []
        for layer_state in state.layers:
            if layer_state is None:
                layers.append(None)
            elif isinstance(layer_state, tuple):
                layers.append(tuple(x.index_select(0, index) for x in layer_state))
            else:
                layers.append(layer_state.select(index))
        return TransformerState(state.position, layers)
