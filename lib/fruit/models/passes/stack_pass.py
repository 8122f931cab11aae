"""The batched pass of a stack RNN / LSTM (+R): controller and stack in one autograd
Function whose backward is written out (backpropagation through time). The stack is
a `StackDriver`: superposition (`sup_pass`) or dVPDA (`nd_pass`).

A stack RNN cannot run its controller over the whole sequence (the reading r_{t-1}
enters layer 1 at step t), so every operation is paid once per time step. Through
autograd one step of a 3-layer LSTM with its stack is some sixty graph nodes. Here the
forward runs without a graph and the backward is the adjoint recurrence, so a step costs
its matrix products (fruit.kernels.products: oneDNN on the CPU), between each two of
them one call to a pointwise piece (`sup_cells`: C kernels on the CPU), and the stack's
update.

Forward, for t = 1..n (docs/paper.md §4, §8; layer k has input width K_k + d, K_1 = r
the reading's width):

    x¹_t = [r_{t-1}; h¹_{t-1}]           z¹_t = x¹_t W¹ + (token part, projected outside)
    x^k_t = [Drop(h^{k-1}_t); h^k_{t-1}]  z^k_t = x^k_t W^k + b^k                (k > 1)
    RNN:  h = tanh(z)      LSTM: i, f, g, o = σ, σ, tanh, σ of z;  c = f c' + i g;  h = o tanh(c)
    head_t = h^L_t W_head + b_head;  r_t = the stack's reading after update t  (t ≤ updates)

The buffer X[k] (n+1, B, K_k + d) holds every step's input of layer k: each new h is
written straight into the row where the next product reads it, so no step
concatenates, and the weight gradients are one product per layer over all steps,
dW^k = X[k][:n]ᵀ dZ[k].
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from fruit.kernels.products import linear, linear_add


def check_updates(n: int, updates: int) -> None:
    if n < 1 or not n - 1 <= updates <= n:
        raise ValueError(
            f"stack pass: needs n >= 1 steps and n - 1 or n updates, got n={n}, updates={updates}"
        )


class StackDriver(Protocol):
    """One stack inside the pass. Updates are counted from 0 here (update t gives r_{t+1})."""

    width: int  # r, the reading's width

    def initial(self, reading: Tensor) -> None:
        """Write r_0 into reading (B, r), a row view of X[0]."""

    def forward(self, t: int, head: Tensor, reading: Tensor) -> None:
        """Update t from head (B, head width): write r_{t+1} into reading (B, r)."""

    def backward(self, t: int, g_a: Tensor | None, g_b: Tensor, dhead: Tensor) -> None:
        """The adjoint of update t, given dL/dr_{t+1} = g_a (rows of B x r, or None) + g_b:
        write dL/dhead into dhead (B, head width)."""

    def extra_grad(self, g_initial: Tensor) -> Tensor | None:
        """After the last backward: dL/d(the driver's extra input), given dL/dr_0 (B, r)."""


class StackPass(torch.autograd.Function):
    """(projected (n, B, G), h0, c0 (L, B, d), W_head (d, head width), b_head, extra,
    W¹..W^L ((K_k + d, G) each), b²..b^L (G,)) -> top-layer states h^L_1..h^L_n (n, B, d)
    and readings r_1..r_updates (updates, B, r).

    ``cells`` are the pointwise pieces (`sup_cells.cells_for`); ``lstm`` picks the cell; ``masks`` (L-1, n, B, d) are the inter-layer dropout
    multipliers (None: no dropout); ``updates`` is the number of stack updates
    (n, or n - 1 when the last reading is not used). c0 is ignored for the RNN.
    ``extra`` is an input of the stack (the dVPDA's bottom_log; an empty tensor for Sup)
    whose gradient the driver gives.

    Every buffer is allocated once and viewed per step before the loops (`unbind`),
    so the loops index Python lists; tensor indexing costs microseconds per call.
    In the loops, t counts from 0: step t computes h^k_{t+1}, r_{t+1} (row t+1 of X).
    First-order gradients only (the backward is not itself differentiable).
    """

    @staticmethod
    def forward(
        ctx, cells, driver, lstm, updates, masks, projected, h0, c0, W_head, b_head, extra, *weights
    ):
        n, B, G = projected.shape
        L, _, d = h0.shape
        r = driver.width
        check_updates(n, updates)
        projected = projected.contiguous()
        if masks is not None:  # full (L-1, n, B, d), contiguous, of the pass's dtype
            masks = masks.to(projected.dtype).expand(L - 1, n, B, d).contiguous()
        W = weights[:L]
        WT = [w.t() for w in W]  # (G, K_k + d): the products take weights as nn.Linear does
        W_head_t = W_head.t()  # (head width, d)
        K = [r] + [d] * (L - 1)  # the stepped input width of each layer, before h
        new = projected.new_empty
        X = [new(n + 1, B, K[k] + d) for k in range(L)]  # x^k_1..x^k_n; row n: h^k_n only
        for k in range(L):
            X[k][0, :, K[k] :] = h0[k]
        driver.initial(X[0][0, :, :r])  # r_0
        x = [X[k].unbind(0) for k in range(L)]  # x[k][t]: input of layer k on step t
        h = [X[k][1:, :, K[k] :].unbind(0) for k in range(L)]  # h[k][t] = h^k_{t+1}
        # up[k][t]: where layer k+1 reads Drop(h^k_{t+1}); mask[k][t]: its multipliers
        # (None: no dropout; the top layer has neither)
        up = [X[k + 1][:n, :, :d].unbind(0) for k in range(L - 1)] + [[None] * n]
        no_mask = [None] * n
        mask = [no_mask] * L if masks is None else [*(y.unbind(0) for y in masks), no_mask]
        reading = X[0][1:, :, :r].unbind(0)  # reading[t] = r_{t+1}
        token_part = projected.unbind(0)
        bias = [None, *weights[L:]]
        if lstm:
            A = [new(n, B, G) for _ in range(L)]  # activated gates i, f, g, o
            C = [new(n + 1, B, d) for _ in range(L)]  # cell states c_0..c_n
            TC = [new(n, B, d) for _ in range(L)]  # tanh(c_1..c_n)
            for k in range(L):
                C[k][0] = c0[k]
            a = [A[k].unbind(0) for k in range(L)]
            c = [C[k].unbind(0) for k in range(L)]
            tc = [TC[k].unbind(0) for k in range(L)]
        for t in range(n):
            for k in range(L):
                # z^k_t = x^k_t W^k + (layer 1: the token part; above: b^k)  (B, G)
                if k == 0:
                    z = linear_add(x[0][t], WT[0], token_part[t])
                else:
                    z = linear(x[k][t], WT[k], bias[k])
                if lstm:
                    cells.lstm_forward(
                        z, a[k][t], c[k][t], c[k][t + 1], tc[k][t], h[k][t], mask[k][t], up[k][t]
                    )
                else:
                    cells.rnn_forward(z, h[k][t], mask[k][t], up[k][t])
            if t < updates:  # r_{t+1} is written where layer 1 reads it on the next step
                driver.forward(t, linear(h[L - 1][t], W_head_t, b_head), reading[t])
        ctx.driver, ctx.lstm, ctx.updates, ctx.K, ctx.cells = driver, lstm, updates, K, cells
        per_layer = [*W, *X, *A, *C, *TC] if lstm else [*W, *X]
        ctx.save_for_backward(masks, W_head, *per_layer)
        tops = X[L - 1][1:, :, K[-1] :].clone()  # (n, B, d)
        readings = X[0][1 : updates + 1, :, :r].clone()  # (updates, B, r)
        return tops, readings

    @staticmethod
    @once_differentiable
    def backward(ctx, g_tops, g_readings):
        driver, lstm, updates, K, cells = ctx.driver, ctx.lstm, ctx.updates, ctx.K, ctx.cells
        L = len(K)
        masks, W_head, *saved = ctx.saved_tensors
        groups = 5 if lstm else 2  # per layer: W, X (+ A, C, TC for the LSTM)
        W, X, *ACT = (saved[j * L : (j + 1) * L] for j in range(groups))
        n, B, d = g_tops.shape
        r = K[0]
        g_tops, g_readings = g_tops.contiguous(), g_readings.contiguous()
        # What each step's backward needs of the forward (with PyTorch operations: the
        # local derivatives of all steps at once, a few large operations)
        if lstm:
            local = [cells.lstm_locals(*(Y[k] for Y in ACT)) for k in range(L)]
        else:
            local = [cells.rnn_locals(X[k][1:, :, K[k] :]) for k in range(L)]
        dZ = [g_tops.new_empty(n, B, W[k].size(1)) for k in range(L)]  # dL/dz^k_t (n, B, G)
        dz = [dZ[k].unbind(0) for k in range(L)]
        dHead = g_tops.new_empty(updates, B, W_head.size(1))  # dL/dhead
        dhead = dHead.unbind(0)
        g_top, g_reading = g_tops.unbind(0), g_readings.unbind(0)
        no_mask = [None] * n
        mask = [no_mask] * (L - 1) if masks is None else [y.unbind(0) for y in masks]
        # Adjoints carried from the step after (t+1) to step t:
        dH = [g_tops.new_zeros(B, d) for _ in range(L)]  # dL/dh^k, through the recurrence
        dC = [g_tops.new_zeros(B, d) for _ in range(L)]  # dL/dc^k (LSTM), updated in place
        dR = None  # dL/dr, through layer 1's input (None: no later step)
        for t in reversed(range(n)):
            # dL/dh^L_t = dh_a + dh_b: from the output (and the heads), and from step t+1
            if t < updates:  # step t's stack update and the heads that drove it
                driver.backward(t, dR, g_reading[t], dhead[t])
                dh_a = linear_add(dHead[t], W_head, g_top[t])  # (B, d)
            else:
                dh_a = g_top[t]
            dh_b, mask_t = dH[L - 1], None
            for k in reversed(range(L)):
                if lstm:
                    cells.lstm_backward(dh_a, dh_b, mask_t, local[k][t], dC[k], dz[k][t])
                else:
                    cells.rnn_backward(dh_a, dh_b, mask_t, local[k][t], dz[k][t])
                dx = linear(dz[k][t], W[k])  # dz W^kᵀ (B, K_k + d)
                dH[k] = dx[:, K[k] :]  # to the previous step's h^k
                if k > 0:  # dL/dh^{k-1}_t = dH[k-1] + Drop'(the input part of dx)
                    dh_a, dh_b, mask_t = dH[k - 1], dx[:, :d], mask[k - 1][t]
                else:
                    dR = dx[:, :r]  # to the previous step's reading
        g_extra = driver.extra_grad(dR)  # dR is now dL/dr_0
        # Weight gradients: one product per layer over all steps.
        g_W = [  # X^kᵀ dZ^k
            linear(X[k][:n].reshape(n * B, K[k] + d).t(), dZ[k].reshape(n * B, W[k].size(1)).t())
            for k in range(L)
        ]
        g_b = [dZ[k].sum((0, 1)) for k in range(1, L)]
        tops = X[L - 1][1 : updates + 1, :, K[-1] :].reshape(updates * B, d)
        g_W_head = linear(tops.t(), dHead.reshape(updates * B, W_head.size(1)).t())  # topsᵀ dHead
        g_b_head = dHead.sum((0, 1))
        g_h0 = torch.stack(dH)
        g_c0 = torch.stack(dC) if lstm and ctx.needs_input_grad[7] else None
        return (None,) * 5 + (dZ[0], g_h0, g_c0, g_W_head, g_b_head, g_extra, *g_W, *g_b)


def stack_pass(
    cells,
    driver,
    projected: Tensor,
    h0: Tensor,
    c0: Tensor | None,
    W_head: Tensor,
    b_head: Tensor,
    extra: Tensor,
    weights: list[Tensor],
    biases: list[Tensor],
    updates: int,
    masks: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """`StackPass` with named arguments; c0 None: simple RNN cells."""
    lstm = c0 is not None
    if c0 is None:
        c0 = h0.new_zeros(())
    return StackPass.apply(
        cells, driver, lstm, updates, masks, projected, h0, c0, W_head, b_head, extra,
        *weights, *biases,
    )  # fmt: skip
