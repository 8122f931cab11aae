"""The batched pass of RNN+Sup / LSTM+Sup (+R): controller and superposition stack in
one autograd Function whose backward is written out (backpropagation through time).

A stack RNN cannot run its controller over the whole sequence (the reading r_{t-1}
enters layer 1 at step t), so every operation is paid once per time step. Through
autograd one step of a 3-layer LSTM with its stack is some sixty graph nodes. Here
the forward runs without a graph and the backward is the adjoint recurrence, so a
step costs its matrix products and a few dozen small in-place operations.

Measured with benchmarks/models.py on one CPU thread, LSTM+Sup trains about 20% faster
than through autograd, yet at only about 0.55 of the plain LSTM's throughput: the matrix
products already run at the core's peak and cost what nn.LSTM's do (the parameter
counts are equal), and what remains is ~0.8 ms per time step of small operations
(a few µs each) against nn.LSTM's single fused oneDNN call per layer.

Forward, for t = 1..n (models.md §4, §8; layer k has input width K_k + d):

    x¹_t = [r_{t-1}; h¹_{t-1}]           z¹_t = x¹_t W¹ + (token part, projected outside)
    x^k_t = [Drop(h^{k-1}_t); h^k_{t-1}]  z^k_t = x^k_t W^k + b^k                (k > 1)
    RNN:  h = tanh(z)      LSTM: i, f, g, o = σ, σ, tanh, σ of z;  c = f c' + i g;  h = o tanh(c)
    [a; u] = h^L_t W_head + b_head;  probs = softmax(a);  v = σ(u)           (t ≤ updates)
    V_t = update(V_{t-1}, probs, v)  (exact depth truncation);  r_t = V_t[0]

The buffer X[k] (n+1, B, K_k + d) holds every step's input of layer k: each new h is
written straight into the row where the next product reads it, so no step
concatenates, and the weight gradients are one product per layer over all steps,
dW^k = X[k][:n]ᵀ dZ[k].
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from fruit.stacks.superposition import update_backward, update_forward


class SupPass(torch.autograd.Function):
    """(projected (n, B, G), h0, c0 (L, B, d), W_head (d, 3+m), b_head (3+m,), W¹..W^L
    ((K_k + d, G) each), b²..b^L (G,)) -> top-layer states h^L_1..h^L_n (n, B, d) and
    readings r_1..r_updates (updates, B, m).

    ``lstm`` picks the cell; ``masks`` (L-1, n, B, d) are the inter-layer dropout
    multipliers (None: no dropout); ``updates`` is the number of stack updates
    (n, or n - 1 when the last reading is not used). c0 is ignored for the RNN.

    Every buffer is allocated once and viewed per step before the loops (`unbind`),
    so the loops index Python lists; tensor indexing costs microseconds per call.
    In the loops, t counts from 0: step t computes h^k_{t+1}, r_{t+1} (row t+1 of X).
    First-order gradients only (the backward is not itself differentiable).
    """

    @staticmethod
    def forward(ctx, lstm, updates, masks, projected, h0, c0, W_head, b_head, *weights):
        n, B, G = projected.shape
        L, _, d = h0.shape
        m = W_head.size(1) - 3
        if n < 1 or not n - 1 <= updates <= n:
            raise ValueError(
                f"SupPass: needs n >= 1 steps and n - 1 or n updates, got n={n}, updates={updates}"
            )
        W = weights[:L]
        K = [m] + [d] * (L - 1)  # the stepped input width of each layer, before h
        new = projected.new_empty
        X = [new(n + 1, B, K[k] + d) for k in range(L)]  # x^k_1..x^k_n; row n: h^k_n only
        for k in range(L):
            X[k][0, :, K[k] :] = h0[k]
        X[0][0, :, :m] = 0.0  # r_0: the empty stack reads zero
        x = [X[k].unbind(0) for k in range(L)]  # x[k][t]: input of layer k on step t
        h = [X[k][1:, :, K[k] :].unbind(0) for k in range(L)]  # h[k][t] = h^k_{t+1}
        up = [X[k + 1][:n, :, :d].unbind(0) for k in range(L - 1)]  # Drop(h^k) for layer k+1
        reading = X[0][1:, :, :m].unbind(0)  # reading[t] = r_{t+1}
        base = [projected.unbind(0)] + [[weights[L + k - 1]] * n for k in range(1, L)]
        mask = None if masks is None else [masks[k].unbind(0) for k in range(L - 1)]
        if lstm:
            A = [new(n, B, G) for _ in range(L)]  # activated gates i, f, g, o
            C = [new(n + 1, B, d) for _ in range(L)]  # cell states c_0..c_n
            TC = [new(n, B, d) for _ in range(L)]  # tanh(c_1..c_n)
            for k in range(L):
                C[k][0] = c0[k]
            a = [A[k].unbind(0) for k in range(L)]
            # gi[k][t] ... go[k][t]: the four gates of layer k on step t, (B, d) each
            gi, gf, gg, go = zip(*([y.unbind(0) for y in A[k].split(d, -1)] for k in range(L)))
            c = [C[k].unbind(0) for k in range(L)]
            tc = [TC[k].unbind(0) for k in range(L)]
        else:
            z = new(B, G)  # pre-activation scratch
        probs, pushed = new(updates, B, 3), new(updates, B, m)
        p, v = probs.unbind(0), pushed.unbind(0)
        stacks = []  # V_0..V_{updates-1}, the inputs of each update
        stack = projected.new_zeros(B, 0, m)
        for t in range(n):
            for k in range(L):
                if lstm:
                    torch.addmm(base[k][t], x[k][t], W[k], out=a[k][t])  # (B, 4d)
                    g = gg[k][t]
                    g.mul_(2)  # tanh(g) = 2σ(2g) - 1: one sigmoid for all four gates
                    a[k][t].sigmoid_()
                    g.mul_(2).sub_(1)
                    torch.mul(gf[k][t], c[k][t], out=c[k][t + 1]).addcmul_(gi[k][t], g)
                    torch.mul(go[k][t], _tanh(c[k][t + 1], out=tc[k][t]), out=h[k][t])
                else:
                    _tanh(torch.addmm(base[k][t], x[k][t], W[k], out=z), out=h[k][t])
                if k + 1 < L:  # the layer above reads Drop(h)
                    if mask is None:
                        up[k][t].copy_(h[k][t])
                    else:
                        torch.mul(h[k][t], mask[k][t], out=up[k][t])
            if t < updates:
                head = torch.addmm(b_head, h[L - 1][t], W_head)  # (B, 3+m)
                p[t].copy_(torch.softmax(head[:, :3], 1))
                torch.sigmoid(head[:, 3:], out=v[t])
                stacks.append(stack)
                height = min(stack.size(1) + 1, updates - t)  # below: can't reach a reading
                stack = update_forward(stack, p[t], v[t], height)
                reading[t].copy_(stack[:, 0])  # r_{t+1}: layer 1 reads it on the next step
        ctx.lstm, ctx.updates, ctx.K = lstm, updates, K
        per_layer = [*W, *X, *A, *C, *TC] if lstm else [*W, *X]
        ctx.save_for_backward(masks, W_head, probs, pushed, *per_layer, *stacks)
        tops = X[L - 1][1:, :, K[-1] :].clone()  # (n, B, d)
        readings = X[0][1 : updates + 1, :, :m].clone()  # (updates, B, m)
        return tops, readings

    @staticmethod
    @once_differentiable
    def backward(ctx, g_tops, g_readings):
        lstm, updates, K = ctx.lstm, ctx.updates, ctx.K
        L = len(K)
        masks, W_head, probs, pushed, *saved = ctx.saved_tensors
        groups = 5 if lstm else 2  # per layer: W, X (+ A, C, TC for the LSTM)
        W, X, *ACT = (saved[j * L : (j + 1) * L] for j in range(groups))
        stacks = saved[groups * L :]  # V_0..V_{updates-1}
        n, B, d = g_tops.shape
        m = pushed.size(2)
        # The local derivatives of every step at once (a few large operations instead
        # of many small ones inside the loop).
        if lstm:
            A, C, TC = ACT
            local = [_lstm_local_derivatives(A[k], C[k], TC[k]) for k in range(L)]
        else:
            h = [X[k][1:, :, K[k] :] for k in range(L)]
            local = [h[k].square().neg_().add_(1).unbind(0) for k in range(L)]  # tanh' (B, d)
        d_pushed = torch.addcmul(pushed, pushed, pushed, value=-1).unbind(0)  # σ' (B, m)
        dZ = [g_tops.new_empty(n, B, W[k].size(1)) for k in range(L)]  # dL/dz^k_t (n, B, G)
        dz = [dZ[k].unbind(0) for k in range(L)]
        if lstm:
            dz_ifg = [dZ[k].view(n, B, 4, d)[:, :, :3].unbind(0) for k in range(L)]
            dz_o = [dZ[k][:, :, 3 * d :].unbind(0) for k in range(L)]
        dHead = g_tops.new_empty(updates, B, 3 + m)
        dhead_a, dhead_u = dHead[:, :, :3].unbind(0), dHead[:, :, 3:].unbind(0)
        g_top, g_reading = g_tops.unbind(0), g_readings.unbind(0)
        p, v = probs.unbind(0), pushed.unbind(0)
        mask = None if masks is None else [masks[k].unbind(0) for k in range(L - 1)]
        W_t = [w.t() for w in W]
        W_head_t = W_head.t()
        # Adjoints carried from the step after (t+1) to step t:
        dH = [g_tops.new_zeros(B, d) for _ in range(L)]  # dL/dh^k, through the recurrence
        dC = [g_tops.new_zeros(B, d) for _ in range(L)]  # dL/dc^k (LSTM)
        dR = g_tops.new_zeros(B, m)  # dL/dr, through layer 1's input
        dV = None  # dL/dV, through the next stack update
        for t in reversed(range(n)):
            dh = dH[L - 1] + g_top[t]
            if t < updates:  # step t's stack update and the heads that drove it
                g = dR + g_reading[t]  # dL/d(reading[t]), the top of the updated stack
                if dV is None:
                    dV = g[:, None]
                else:
                    dV[:, 0] += g
                dV, g_probs, g_pushed = update_backward(stacks[t], p[t], v[t], dV)
                g_probs -= (g_probs * p[t]).sum(1, keepdim=True)  # softmax'
                torch.mul(g_probs, p[t], out=dhead_a[t])
                torch.mul(g_pushed, d_pushed[t], out=dhead_u[t])
                dh.addmm_(dHead[t], W_head_t)
            for k in reversed(range(L)):
                if lstm:
                    dc_dz, dh_dzo, dh_dc, f = local[k]
                    dc = dC[k].addcmul_(dh, dh_dc[t])  # dL/dc^k of this step
                    torch.mul(dc_dz[t], dc[:, None], out=dz_ifg[k][t])  # i, f, g
                    torch.mul(dh, dh_dzo[t], out=dz_o[k][t])  # o
                    dC[k] = dc.mul_(f[t])  # to the previous step's cell
                else:
                    torch.mul(dh, local[k][t], out=dz[k][t])
                dx = torch.mm(dz[k][t], W_t[k])  # (B, K_k + d)
                dH[k] = dx[:, K[k] :]  # to the previous step's h^k
                if k > 0:  # to this step's h^{k-1}, through the input of layer k
                    below = dx[:, :d]
                    dh = (
                        dH[k - 1] + below
                        if mask is None
                        else dH[k - 1].addcmul(below, mask[k - 1][t])
                    )
                else:
                    dR = dx[:, :m]  # to the previous step's reading
        # Weight gradients: one product per layer over all steps.
        g_W = [X[k][:n].reshape(n * B, -1).t() @ dZ[k].reshape(n * B, -1) for k in range(L)]
        g_b = [dZ[k].sum((0, 1)) for k in range(1, L)]
        tops = X[L - 1][1 : updates + 1, :, K[-1] :].reshape(updates * B, d)
        g_W_head = tops.t() @ dHead.reshape(updates * B, 3 + m)
        g_b_head = dHead.sum((0, 1))
        g_h0 = torch.stack(dH)
        g_c0 = torch.stack(dC) if lstm and ctx.needs_input_grad[5] else None
        return (None, None, None, dZ[0], g_h0, g_c0, g_W_head, g_b_head, *g_W, *g_b)


def _tanh(x: Tensor, out: Tensor) -> Tensor:
    """tanh(x) = 2σ(2x) - 1 into ``out`` (may be x): PyTorch's CPU tanh costs about
    four times its sigmoid, and on these small tensors it was the largest pointwise
    cost of a step."""
    return torch.mul(x, 2, out=out).sigmoid_().mul_(2).sub_(1)


def _lstm_local_derivatives(A: Tensor, C: Tensor, TC: Tensor):
    """One LSTM layer's local derivatives at all steps, from its activated gates A
    (n, B, 4d) = i, f, g, o, cells C (n+1, B, d) and TC = tanh(C[1:]), each as a list
    over steps (z: pre-activations; c' the previous cell):

        dc_dz  (B, 3, d)  ∂c/∂z_i, ∂c/∂z_f, ∂c/∂z_g = g σ'(i), c' σ'(f), i tanh'(g)
        dh_dzo (B, d)     ∂h/∂z_o = tanh(c) σ'(o)
        dh_dc  (B, d)     ∂h/∂c = o tanh'(c)
        f      (B, d)     ∂c/∂c'

    with σ' = s - s² and tanh' = 1 - y² of the activations (addcmul: fewer passes).
    """
    n, B, G = A.shape
    d = G // 4
    i, f, g, o = A.split(d, -1)
    S = torch.addcmul(A, A, A, value=-1)  # σ' of every gate (g's slot is not used)
    s_i, s_f, _, s_o = S.split(d, -1)
    dc_dz = A.new_empty(n, B, 3, d)
    torch.mul(g, s_i, out=dc_dz[:, :, 0])
    torch.mul(C[:-1], s_f, out=dc_dz[:, :, 1])
    torch.addcmul(i, i * g, g, value=-1, out=dc_dz[:, :, 2])  # i (1 - g²)
    dh_dc = torch.addcmul(o, o * TC, TC, value=-1)  # o (1 - tanh² c)
    return dc_dz.unbind(0), (TC * s_o).unbind(0), dh_dc.unbind(0), f.unbind(0)


def sup_pass(
    projected: Tensor,
    h0: Tensor,
    c0: Tensor | None,
    W_head: Tensor,
    b_head: Tensor,
    weights: list[Tensor],
    biases: list[Tensor],
    updates: int,
    masks: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """`SupPass` with named arguments; weights W¹..W^L, biases b²..b^L (see its docstring).
    c0 None: the cells are simple RNN cells."""
    lstm = c0 is not None
    if c0 is None:
        c0 = h0.new_zeros(())
    return SupPass.apply(lstm, updates, masks, projected, h0, c0, W_head, b_head, *weights, *biases)
