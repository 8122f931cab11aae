"""The dVPDA in PyTorch operations with a hand-written backward: the fast path on CUDA
(and on the CPU without the C kernels); `dvpda_native` is the same on C kernels.

`TorchScan` (whole sequences) runs the step math of `dvpda_math` on views of one
preallocated (B, S, n, X, n, Q) table gamma of scaled inner weights, writing column t
in place. The backward pass is the reverse loop (the outside algorithm) over the same
table with an adjoint table of the same size, so memory is O(B n^2 Q^2 S^2) and
autograd stores nothing per step. All scales are constants (see dvpda_math), so the
hand-written backward is the exact gradient of the readings.

`Buffers` (the forward state and one update) and `Adjoint` (the reverse of one
update) are shared with the step API (`dvpda_run`), so both APIs compute the same
numbers. fruit.stacks.implementation chooses between this module and `dvpda_native`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from fruit.stacks.fast.dvpda_math import (
    StepInputs,
    _positive,
    bottom_gradient,
    copy_run_vectors,
    forward_weights,
    new_gamma_column,
    pop_contraction_adjoint,
    pop_helper,
    reading_of,
    start_run_vectors,
)


class Buffers:
    """The scaled quantities of one run, for updates t = 1..n (dvpda_math):
    gamma, the table of scaled inner weights (B, S, N, X, N, Q) with N = max(n, 1), the
    forward weights alpha and eta, their log scales psi, chi, gamma's column scales phi,
    and the normalisers of times 0..n. Entry t is written by update t and never
    rewritten."""

    def __init__(self, bottom_log: Tensor, batch_size: int, n: int, Q: int, S: int):
        B, X, N = batch_size, Q * S, max(n, 1)
        new = dict(dtype=bottom_log.dtype, device=bottom_log.device)
        self.Q, self.S, self.n = Q, S, n
        self.gamma = torch.zeros(B, S, N, X, N, Q, **new)
        start_run_vectors(self, bottom_log, B, n, X)

    def resized(self, n: int, index: Tensor | None = None) -> Buffers:
        """A copy with room for n updates (entries up to min(n, self.n) kept), rows index."""
        out = Buffers.__new__(Buffers)
        out.Q, out.S, out.n = self.Q, self.S, n
        N = max(n, 1)
        pick = (lambda x: x) if index is None else (lambda x: x.index_select(0, index))
        gamma = pick(self.gamma)
        B, S, N0, X, _, Q = gamma.shape
        out.gamma = gamma.new_zeros(B, S, N, X, N, Q)
        k = min(N, N0)
        out.gamma[:, :, :k, :, :k] = gamma[:, :, :k, :, :k]
        copy_run_vectors(self, out, n, pick)
        return out

    def step(
        self, t: int, logits: Tensor, pushed_log: Tensor, write_column: bool, keep_inputs=False
    ) -> Tensor:
        """Update t (1 <= t <= n) from logits (B, A) and pushed_log (B, m): writes entry t
        (and column t of gamma if write_column, which needs t < N) -> reading (B, X*m).
        keep_inputs: a backward pass will follow (used by `NativeBuffers` only)."""
        Q, S = self.Q, self.S
        alpha, eta, psi, chi, phi = self.alpha, self.eta, self.psi, self.chi, self.phi
        inputs = StepInputs.make(logits, pushed_log, Q, S)
        gamma = self.gamma[:, :, :t, :, :t, :]  # gamma[i -> k] for i, k < t
        gamma_last, gamma_prime = pop_helper(gamma, inputs.pop, Q, S)
        a_t, psi[:, t], e_t, chi[:, t], consts = forward_weights(
            alpha[:, :t], psi[:, :t], eta[:, :t], chi[:, :t], phi[:, :t], gamma_prime, inputs, Q, S
        )
        alpha[:, t], eta[:, t] = a_t, e_t
        self.n_alpha[:, t], self.n_eta[:, t] = consts[1], consts[4]
        if write_column:
            gamma_t = new_gamma_column(gamma, gamma_last, gamma_prime, inputs, Q, S)  # (B,S,t,X,Q)
            c = _positive(gamma_t.amax((1, 2, 3, 4)))
            self.gamma[:, :, :t, :, t, :] = gamma_t / c[:, None, None, None, None]
            self.col_scale[:, t] = c
            phi[:, t] = phi[:, t - 1] + inputs.shift + torch.log(c)
        return reading_of(a_t, psi[:, t], e_t, chi[:, t])

    def adjoint(self, n: int | None = None) -> Adjoint:
        """The adjoint buffers of a backward pass over updates n, n-1, ..., 1 (default:
        the capacity)."""
        return Adjoint(self, n)


class Adjoint:
    """Adjoints of one backward pass over a run: of alpha, eta and gamma
    (`_GammaAdjoint`), filled from the last update down to the first."""

    def __init__(self, buffers: Buffers, n: int | None = None):
        """n: the number of updates taken (default: the buffers' capacity)."""
        self.alpha = torch.zeros_like(buffers.alpha)
        self.eta = torch.zeros_like(buffers.eta)
        self.gamma = _GammaAdjoint(
            buffers.gamma, buffers.n if n is None else n, buffers.Q, buffers.S
        )

    def step(
        self,
        buffers: Buffers,
        t: int,
        column_written: bool,
        g_reading: Tensor | None,
        logits: Tensor,
        pushed_log: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """Adjoint of update t, given g_reading (B, X*m) and everything from updates > t
        -> gradients of its logits (B, A) and pushed_log (B, m)."""
        b = buffers
        Q, S = b.Q, b.S
        B, X, m = logits.size(0), Q * S, pushed_log.size(-1)
        if g_reading is not None:
            # reading r = s E[t] with s = exp(chi - psi) / sum A[t]
            a_t, e_t = b.alpha[:, t], b.eta[:, t]
            total = a_t.sum(-1).clamp_min(torch.finfo(a_t.dtype).tiny)
            s = torch.exp(b.chi[:, t] - b.psi[:, t]) / total  # (B,)
            g_r = g_reading.reshape(B, X, m)
            self.eta[:, t] += s[:, None, None] * g_r
            self.alpha[:, t] -= ((s / total) * (g_r * e_t).sum((1, 2)))[:, None]
        scales = b.col_scale, b.n_alpha, b.n_eta
        return _step_backward(
            t, column_written, b.gamma, self.gamma, b.alpha, b.eta, b.psi,
            b.chi, b.phi, scales, self.alpha, self.eta, logits, pushed_log, Q, S,
        )  # fmt: skip

    def bottom(self, buffers: Buffers, bottom_log: Tensor) -> Tensor:
        return bottom_gradient(self.eta, buffers.chi, bottom_log)


class TorchScan(torch.autograd.Function):
    """(logits (B, n, A), pushed_log (B, n, m), bottom_log (m,), Q, S) -> readings
    (B, n, Q*S*m), in the inputs' dtype (the compute dtype)."""

    @staticmethod
    def forward(ctx, logits, pushed_log, bottom_log, Q, S):
        B, n, _ = logits.shape
        m = pushed_log.size(-1)
        buffers = Buffers(bottom_log, B, n, Q, S)
        readings = logits.new_empty(B, n, Q * S * m)
        for t in range(1, n + 1):  # column n is never read
            readings[:, t - 1] = buffers.step(t, logits[:, t - 1], pushed_log[:, t - 1], t < n)
        ctx.save_for_backward(logits, pushed_log, bottom_log)
        ctx.buffers = buffers
        return readings

    @staticmethod
    def backward(ctx, g_readings):
        logits, pushed_log, bottom_log = ctx.saved_tensors
        buffers = ctx.buffers
        n = logits.size(1)
        adjoint = Adjoint(buffers)
        g_logits = torch.zeros_like(logits)
        g_pushed = torch.zeros_like(pushed_log)
        for t in range(n, 0, -1):
            g_logits[:, t - 1], g_pushed[:, t - 1] = adjoint.step(
                buffers, t, t < n, g_readings[:, t - 1], logits[:, t - 1], pushed_log[:, t - 1]
            )
        return g_logits, g_pushed, adjoint.bottom(buffers, bottom_log), None, None


def _step_backward(
    t,
    column_written,
    gamma_all,
    g_gamma,
    alpha,
    eta,
    psi,
    chi,
    phi,
    scales,
    g_alpha,
    g_eta,
    logits,
    pushed_log,
    Q,
    S,
):
    """Adjoint of update t: adds into g_gamma (`_GammaAdjoint`) / g_alpha / g_eta for times < t and
    returns the gradients of this step's logits (B, A) and pushed_log (B, m).
    ``column_written``: whether the forward wrote gamma's column t (every update but the
    last of a sequence, whose column no reading uses)."""
    B = logits.size(0)
    X = Q * S
    col_scale, n_alphas, n_etas = scales
    m = pushed_log.size(-1)
    inputs = StepInputs.make(logits, pushed_log, Q, S)
    P, R, O, v = inputs.push, inputs.replace, inputs.pop, inputs.vector
    gamma = gamma_all[:, :, :t, :, :t, :]
    gamma_last, gamma_prime = pop_helper(gamma, O, Q, S)  # (B, t, X, X), (B, S, t*Q, Q)
    # Same constants as the forward pass.
    delta = psi[:, :t] - phi[:, :t]
    w = torch.exp(delta - delta.amax(-1, keepdim=True))  # (B, t)
    eps = chi[:, :t] - phi[:, :t]
    e_push = delta[:, t - 1] + inputs.vector_shift
    D_eta = torch.maximum(eps.amax(-1), e_push)
    w_eta = torch.exp(eps - D_eta[:, None])
    w_push = torch.exp(e_push - D_eta)
    A_prev = alpha[:, t - 1]  # (B, X)
    wA = w[:, :, None] * alpha[:, :t]  # (B, t, X)
    wE = w_eta[:, :, None, None] * eta[:, :t]  # (B, t, X, m)
    pushed_a = (A_prev[:, None, :] @ P)[:, 0]  # (B, X)
    n_alpha = n_alphas[:, t]
    gP = torch.zeros_like(P)
    gR = torch.zeros_like(R)
    gO = torch.zeros_like(O)
    g_gamma_prime = torch.zeros_like(gamma_prime)

    # ---- alpha[t] = U / n,  U = w[t-1] A[t-1] P + wA[t-1] R + pop_alpha
    gU = g_alpha[:, t] / n_alpha[:, None]  # (B, X)
    g_pushed_a = w[:, t - 1, None] * gU
    g_wA = torch.zeros_like(wA)
    g_wA[:, t - 1] += (gU[:, None, :] @ R.transpose(1, 2))[:, 0]
    gR += wA[:, t - 1, :, None] * gU[:, None, :]
    g_pop = gU.view(B, Q, S).transpose(1, 2)[:, :, None, :]  # (B, S, 1, Q)
    wA_r = wA.view(B, t, Q, S).permute(0, 3, 1, 2).reshape(B, S, 1, t * Q)
    g_wA += (
        (g_pop @ gamma_prime.transpose(-1, -2))
        .view(B, S, t, Q)
        .permute(0, 2, 3, 1)
        .reshape(B, t, X)
    )
    g_gamma_prime += wA_r.transpose(-1, -2) @ g_pop

    # ---- eta[t] = V / n_eta,  V = w_push (A[t-1] P) v + R^T wE[t-1] + pop_eta
    n_eta = n_etas[:, t]
    gV = g_eta[:, t] / n_eta[:, None, None]  # (B, X, m)
    g_pushed_a += w_push[:, None] * (gV @ v[:, :, None])[:, :, 0]
    g_v = w_push[:, None] * (pushed_a[:, None, :] @ gV)[:, 0]  # (B, m)
    g_wE = torch.zeros_like(wE)
    g_wE[:, t - 1] += R @ gV
    gR += wE[:, t - 1] @ gV.transpose(1, 2)
    g_pop_e = gV.view(B, Q, S, m).permute(0, 2, 3, 1)  # (B, S, m, Q)
    wE_r = wE.view(B, t, Q, S, m).permute(0, 3, 4, 1, 2).reshape(B, S, m, t * Q)
    g_wE += (
        (g_pop_e @ gamma_prime.transpose(-1, -2))
        .view(B, S, m, t, Q)
        .permute(0, 3, 4, 1, 2)
        .reshape(B, t, X, m)
    )
    g_gamma_prime += wE_r.transpose(-1, -2) @ g_pop_e

    # pushed_a = A[t-1] P
    g_alpha[:, t - 1] += (g_pushed_a[:, None, :] @ P.transpose(1, 2))[:, 0]
    gP += A_prev[:, :, None] * g_pushed_a[:, None, :]
    g_alpha[:, :t] += w[:, :, None] * g_wA
    g_eta[:, :t] += w_eta[:, :, None, None] * g_wE

    # ---- column t of gamma (only when the forward wrote it)
    g_gamma_last = torch.zeros_like(gamma_last)  # (B, t, X, X) [b, i, a, (s, z)]
    if column_written:
        gUc = g_gamma.column(t) / col_scale[:, t, None, None, None, None]  # (B,S,t,X,Q)
        g_gamma.record(t, gUc, gamma_prime)
        gP += gUc[:, :, t - 1].permute(0, 2, 3, 1).reshape(B, X, X)
        # pop = L @ gamma' with L the (B, S, tX, tQ) view of gamma
        g_gamma_prime += pop_contraction_adjoint(gamma, gUc)
        # replace = gamma_last @ R, laid out [b, y, i, a, r]
        g_rep = gUc.permute(0, 2, 3, 4, 1).reshape(B, t, X, X)
        g_gamma_last += g_rep @ R.transpose(1, 2)[:, None]
        gR += gamma_last.reshape(B, t * X, X).transpose(1, 2) @ g_rep.reshape(B, t * X, X)
    # H = gamma_last @ O, gamma_prime[b, y, (k, u), r] = H[b, k, (u, y), r]
    gH = g_gamma_prime.view(B, S, t, Q, Q).permute(0, 2, 3, 1, 4).reshape(B, t, X, Q)
    g_gamma_last += gH @ O.transpose(1, 2)[:, None]
    gO += gamma_last.reshape(B, t * X, X).transpose(1, 2) @ gH.reshape(B, t * X, Q)
    # gamma_last [b, i, a, (s, z)] is gamma[b, z, i, a, t-1, s]
    g_gamma.pending = g_gamma_last.view(B, t, X, Q, S).permute(0, 4, 1, 2, 3)  # (B,S,t,X,Q)

    g_weights = torch.cat([gP, gR, gO], dim=2).reshape(B, -1)
    return g_weights * inputs.weights, g_v * v


class _GammaAdjoint:
    """Adjoint of gamma's columns without a read-modify-write of an n x n table.

    Column k is the left factor of the pop matmul at every later step t'
    (gamma_t' = L_t' @ gamma'_t'), so its adjoint is sum_{t' > k+1} gU_t'[i] gamma'_t'[k]^T:
    one matmul over (t', r) when column k is reached in the reverse loop. We store gU_t'
    (the adjoint of column t' of gamma) in a buffer laid out like gamma,
    GU[b, y, i, a, t', r], and gamma'_t' in HR[b, y, t', k, u, r].
    """

    def __init__(self, gamma: Tensor, n: int, Q: int, S: int):
        B, _, N, X, _, _ = gamma.shape
        self.n, self.Q, self.S, self.X = n, Q, S, X
        self.GU = torch.zeros_like(gamma)  # (B, S, N, X, N, Q)
        self.HR = gamma.new_zeros(B, S, N, N, Q, Q)
        self.pending = None  # adjoint of column t from step t+1: (B, S, t, X, Q)

    def record(self, t: int, gU: Tensor, gamma_prime: Tensor) -> None:
        B, S, Q = gU.size(0), self.S, self.Q
        self.GU[:, :, :t, :, t, :] = gU
        self.HR[:, :, t, :t] = gamma_prime.view(B, S, t, Q, Q)

    def column(self, t: int) -> Tensor:
        """Complete adjoint of (normalised) column t, (B, S, t, X, Q) as [b, y, i, a, u]."""
        B = self.GU.size(0)
        S, Q, X = self.S, self.Q, self.X
        g = self.pending[:, :, :t] if self.pending is not None else self.GU.new_zeros(B, S, t, X, Q)
        later = self.n - (t + 2)  # steps t' = t+2 .. n-1 pop column t
        if later > 0:
            left = self.GU[:, :, :t, :, t + 2 : self.n, :].reshape(B, S, t * X, later * Q)
            right = self.HR[:, :, t + 2 : self.n, t].transpose(-1, -2).reshape(B, S, later * Q, Q)
            g = g + (left @ right).view(B, S, t, X, Q)
        return g
