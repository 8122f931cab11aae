"""The stack-RNN controller of docs/paper.md §4 and §8, step by step with autograd: the
oracle of the fused passes' tests (test_models_sup_pass, test_models_nd_pass), which
differ only in the stack that `stack_step` stands for.

Each step t feeds [r_{t-1}; h^1] to layer 1 and [Drop(h^{k-1}); h^k] to layer k (cat,
matmul, then the LSTM or tanh cell); the top layer's head W_head h^L + b_head drives the
stack, whose reading is the next step's input.
"""

from __future__ import annotations

import torch


def controller_steps(
    projected, h0, c0, W_head, b_head, weights, biases, updates, masks, reading, stack_step
):
    """projected (n, B, G) (layer 1's token part), h0, c0 (L, B, d) (c0 None: tanh cells),
    weights W^k ((K_k + d, G)), biases b^2..b^L, masks (L-1, n, B, d) or None, reading r_0
    (B, r), stack_step(head (B, ·)) -> the next reading (B, r), called for the first
    `updates` steps -> (top states h^L_1..h^L_n, readings r_1..r_updates) as lists."""
    lstm = c0 is not None
    h = list(h0.unbind(0))
    c = list(c0.unbind(0)) if lstm else None
    tops, readings = [], []
    for t in range(projected.size(0)):
        below = reading
        for k in range(len(h)):
            z = torch.cat((below, h[k]), 1) @ weights[k]
            z = z + (projected[t] if k == 0 else biases[k - 1])
            if lstm:
                i, f, g, o = z.chunk(4, 1)
                c[k] = torch.sigmoid(f) * c[k] + torch.sigmoid(i) * torch.tanh(g)
                h[k] = torch.sigmoid(o) * torch.tanh(c[k])
            else:
                h[k] = torch.tanh(z)
            below = h[k] if masks is None or k == len(h) - 1 else h[k] * masks[k, t]
        tops.append(h[-1])
        if t < updates:
            reading = stack_step(h[-1] @ W_head + b_head)
            readings.append(reading)
    return tops, readings
