"""The dVPDA's step mathematics in scaled real space (docs/paper.md §6.3-§6.4), shared by
the PyTorch implementation (`dvpda_scan`, `dvpda_run`) and mirrored by the C kernels
(`dvpda.c`). The paper-notation version, in log space with autograd, is
fruit.stacks.reference.dvpda; the tests hold this one to it.

Time: the paper's t = 0 is the initial stack; updates are t = 1..n; the API's reading
index t-1 is the paper's t. X = Q*S configurations (q, x), flattened as q*S + x.

We never build the vector inner weights zeta. Writing
  eta[t][r,y] = sum_{i,q,x} alpha[i][q,x] zeta[i->t][q,x->r,y]
and substituting the zeta recurrence gives (for t >= 1)
  alpha[t] = alpha[t-1] (P_t + R_t) + sum_{k<=t-2,u} alpha[k][u,y] gamma'[k->t][u,y->r]
  eta[t]   = (alpha[t-1] P_t) v_t + eta[t-1] R_t + sum_{k<=t-2,u} eta[k][u,y] gamma'[k->t][u,y->r]
with alpha[0] = 1[q0, bottom], eta[0] = 1[q0, bottom] v_0, and only the inner weights
gamma[i->t] for i >= 0 (the bottom row -1 is alpha itself).

Scaling instead of log space. Every quantity is kept in real space times a per-example
log scale that is treated as a constant:
  gamma[i->k] = exp(phi[k] - phi[i]) G[i,k],  alpha[k] = exp(psi[k]) A[k],
  eta[k] = exp(chi[k]) E[k].
The phi factors telescope through the pop contraction
gamma[i->k] gamma'[k->t] = exp(phi[t-1] - phi[i]) G[i,k] H[k,t], so the O(T^3) part is a
plain batched matmul. Each new column, A[t] and E[t] is divided by its max and the
log of that max is added to the scale. Readings are invariant to every scale, so
treating the scales as constants (detached) gives exact gradients.

Names: `gamma` is the table of the scaled inner weights G (so gamma[i->k] up to its
scale), `gamma_last` its column k = t-1, `gamma_prime` the scaled pop helper H (gamma'),
`alpha`/`eta` the scaled forward weights A/E, `push`/`replace`/`pop` the weights P/R/O
of update t. The table's layout (for the pop matmul): G[b, y, i, a, k, u] =
G[i->k][a -> (u, y)], shape (B, S, N, X, N, Q); with y in front, rows (i, a) and
columns (k, u) of G[b, y] form one strided matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def split_weights(weights: Tensor, num_states: int, num_symbols: int):
    """Flat (B, A) -> push (B, X, X), replace (B, X, X), pop (B, X, Q).

    Rows are (q, x); push/replace columns (r, y); pop columns r (docs/paper.md §6.1).
    """
    Q, S = num_states, num_symbols
    X = Q * S
    table = weights.reshape(weights.size(0), X, 2 * X + Q)
    return table[:, :, :X], table[:, :, X : 2 * X], table[:, :, 2 * X :]


def _finite_max(x: Tensor, dims) -> Tensor:
    """Detached max over dims; 0 where it is -inf (all entries are log 0)."""
    mx = x.detach().amax(dim=dims)
    return torch.nan_to_num(mx, nan=0.0, posinf=0.0, neginf=0.0)


def exp_shifted(x: Tensor) -> tuple[Tensor, Tensor]:
    """exp(x - shift) and shift, the detached finite max over the last dimension (any
    leading dimensions): the entries are at most 1, and 0 where x is -inf."""
    shift = _finite_max(x, -1)
    return torch.exp(x - shift[..., None]), shift


def _positive(x: Tensor) -> Tensor:
    """Clamp a detached normaliser away from 0 (an all-zero quantity stays zero)."""
    return x.clamp_min(torch.finfo(x.dtype).tiny)


@dataclass
class StepInputs:
    """One update's inputs, shifted to be at most 1, with their log shifts."""

    push: Tensor  # (B, X, X)
    replace: Tensor  # (B, X, X)
    pop: Tensor  # (B, X, Q)
    weights: Tensor  # (B, A) exp(logits - shift)
    shift: Tensor  # (B,) detached
    vector: Tensor  # (B, m) exp(pushed_log - vector_shift)
    vector_shift: Tensor  # (B,) detached

    @staticmethod
    def make(action_logits: Tensor, pushed_log: Tensor, Q: int, S: int) -> StepInputs:
        weights, shift = exp_shifted(action_logits)
        push, replace, pop = split_weights(weights, Q, S)
        vector, vector_shift = exp_shifted(pushed_log)
        return StepInputs(push, replace, pop, weights, shift, vector, vector_shift)


def pop_helper(gamma: Tensor, pop: Tensor, Q: int, S: int) -> tuple[Tensor, Tensor]:
    """The last column gamma[. -> t-1] and the pop helper gamma'[k -> t] = gamma[k -> t-1] pop_t
    (H[k, t] = G[k -> t-1] O_t, without its scale).

    gamma (B, S, t, X, t, Q) -> gamma_last (B, t, X, X) as [b, i, a, (s, z)] and
    gamma_prime (B, S, t*Q, Q) as [b, y, (k, u), r].
    """
    B, _, t, X, _, _ = gamma.shape
    gamma_last = gamma[:, :, :, :, t - 1, :].permute(0, 2, 3, 4, 1).reshape(B, t, X, X)
    H = gamma_last @ pop[:, None]  # (B, t, X=(u,y), Q=r)
    gamma_prime = H.view(B, t, Q, S, Q).permute(0, 3, 1, 2, 4).reshape(B, S, t * Q, Q)
    return gamma_last, gamma_prime


ROW_BLOCK = 8


def pop_contraction(gamma: Tensor, gamma_prime: Tensor) -> Tensor:
    """The pop terms of a new column of gamma: sum_{k,u} G[b, y, i, a, k, u]
    gamma'[b, y, (k, u), r] -> (B, S, t, X, Q).

    G[i -> k] is zero for k <= i, so rows are taken in blocks of ROW_BLOCK and each
    block is multiplied only by the columns to its right (about half the work).
    """
    B, S, t, X, _, Q = gamma.shape
    out = gamma.new_empty(B, S, t, X, Q)
    gamma_prime_t = gamma_prime.transpose(-1, -2).contiguous()
    for i0 in range(0, t, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, t)
        left = gamma[:, :, i0:i1, :, i0 + 1 :, :].reshape(B, S, (i1 - i0) * X, (t - i0 - 1) * Q)
        right_t = gamma_prime_t[:, :, :, (i0 + 1) * Q :]  # (B, S, Q, (t - i0 - 1) Q)
        out[:, :, i0:i1] = (
            (right_t @ left.transpose(-1, -2)).view(B, S, Q, i1 - i0, X).permute(0, 1, 3, 4, 2)
        )
    return out


def pop_contraction_adjoint(gamma: Tensor, g_out: Tensor) -> Tensor:
    """Adjoint of pop_contraction w.r.t. gamma': (B, S, t*Q, Q)."""
    B, S, t, X, _, Q = gamma.shape
    g_gamma_prime = gamma.new_zeros(B, S, t * Q, Q)
    for i0 in range(0, t, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, t)
        left = gamma[:, :, i0:i1, :, i0 + 1 :, :].reshape(B, S, (i1 - i0) * X, (t - i0 - 1) * Q)
        g = g_out[:, :, i0:i1].reshape(B, S, (i1 - i0) * X, Q)
        # (g^T L)^T: BLAS streams the table rows instead of a transposed walk.
        g_gamma_prime[:, :, (i0 + 1) * Q :] += (g.transpose(-1, -2) @ left).transpose(-1, -2)
    return g_gamma_prime


def new_gamma_column(
    gamma: Tensor, gamma_last: Tensor, gamma_prime: Tensor, inputs: StepInputs, Q: int, S: int
):
    """Unnormalised column t of gamma: gamma[i -> t], (B, S, t, X, Q) as [b, y, i, a, r].

    Row i < t-1: replace (gamma[i->t-1] R_t) + pop (sum_k gamma[i->k] gamma'[k->t]);
    row t-1: push. Row t-1 of `gamma` is zero, so rows t-1 of the replace and pop terms are zero.
    """
    B, _, t, X, _, _ = gamma.shape
    pop = pop_contraction(gamma, gamma_prime)
    replace = (gamma_last @ inputs.replace[:, None]).view(B, t, X, Q, S).permute(0, 4, 1, 2, 3)
    push = inputs.push.view(B, X, Q, S).permute(0, 3, 1, 2)  # (B, S, X, Q)
    return torch.cat([(pop + replace)[:, :, : t - 1], push[:, :, None]], dim=2)


def forward_weights(
    alpha: Tensor,
    psi: Tensor,
    eta: Tensor,
    chi: Tensor,
    phi: Tensor,
    gamma_prime: Tensor,
    inputs: StepInputs,
    Q: int,
    S: int,
):
    """The forward weights alpha[t] and eta[t] (normalised) with their log scales.

    alpha (B, t, X), psi (B, t), eta (B, t, X, m), chi (B, t), phi (B, t): history k < t.
    Returns alpha_t (B, X), psi_t (B,), eta_t (B, X, m), chi_t (B,), and the detached
    constants (w, n, w_eta, w_push, n_eta) the backward pass needs.
    """
    B, t, X = alpha.shape
    m = eta.size(-1)
    base = inputs.shift + phi[:, t - 1]  # (B,) common scale exp(M_t + phi[t-1])
    # alpha: contributions of each k, relative scale exp(psi[k] - phi[k]).
    delta = psi - phi  # (B, t)
    D = delta.amax(-1)
    w = torch.exp(delta - D[:, None])  # (B, t)
    wA = w[:, :, None] * alpha  # (B, t, X)
    pop_a = (
        wA.view(B, t, Q, S).permute(0, 3, 1, 2).reshape(B, S, 1, t * Q) @ gamma_prime
    )  # (B,S,1,Q)
    pushed_a = (alpha[:, t - 1, None, :] @ inputs.push)[:, 0]  # (B, X): alpha[t-1] P_t
    U_alpha = (  # alpha[t] before its normalisation
        w[:, t - 1, None] * pushed_a
        + (wA[:, t - 1, None, :] @ inputs.replace)[:, 0]
        + pop_a[:, :, 0].transpose(1, 2).reshape(B, X)
    )
    n = _positive(U_alpha.detach().amax(-1))
    alpha_t = U_alpha / n[:, None]
    psi_t = base + D + torch.log(n)
    # eta: contributions of each k at scale exp(chi[k] - phi[k]); push at delta[t-1] + V_t.
    eps = chi - phi
    e_push = delta[:, t - 1] + inputs.vector_shift
    D_eta = torch.maximum(eps.amax(-1), e_push)
    w_eta = torch.exp(eps - D_eta[:, None])  # (B, t)
    w_push = torch.exp(e_push - D_eta)  # (B,)
    wE = w_eta[:, :, None, None] * eta  # (B, t, X, m)
    pop_e = wE.view(B, t, Q, S, m).permute(0, 3, 4, 1, 2).reshape(B, S, m, t * Q) @ gamma_prime
    U_eta = (  # eta[t] before its normalisation
        (w_push[:, None] * pushed_a)[:, :, None] * inputs.vector[:, None, :]
        + inputs.replace.transpose(1, 2) @ wE[:, t - 1]
        + pop_e.permute(0, 3, 1, 2).reshape(B, X, m)
    )
    n_eta = _positive(U_eta.detach().amax((1, 2)))
    eta_t = U_eta / n_eta[:, None, None]
    chi_t = base + D_eta + torch.log(n_eta)
    return alpha_t, psi_t, eta_t, chi_t, (w, n, w_eta, w_push, n_eta)


def reading_of(alpha_t: Tensor, psi_t: Tensor, eta_t: Tensor, chi_t: Tensor) -> Tensor:
    """r[r, y, c] = eta[r, y, c] / sum alpha, flattened (B, X*m)."""
    total = alpha_t.sum(-1).clamp_min(torch.finfo(alpha_t.dtype).tiny)  # (B,)
    scale = torch.exp(chi_t - psi_t) / total
    return (scale[:, None, None] * eta_t).flatten(1)


def initial_terms(bottom_log: Tensor, batch_size: int, X: int):
    """alpha[0], psi[0], eta[0], chi[0] for the initial configuration (q0, bottom)."""
    m = bottom_log.size(0)
    shift = _finite_max(bottom_log, 0)
    v0 = torch.exp(bottom_log - shift)  # (m,)
    alpha0 = bottom_log.new_zeros(batch_size, X)
    alpha0[:, 0] = 1
    eta0 = torch.cat([v0.expand(batch_size, 1, m), bottom_log.new_zeros(batch_size, X - 1, m)], 1)
    psi0 = bottom_log.new_zeros(batch_size)
    chi0 = shift.expand(batch_size)
    return alpha0, psi0, eta0, chi0


# The per-update quantities of a run's buffers, each (B, n+1, ...): entry t is written by
# update t. The last three are scales, 1 where no update has written them yet.
RUN_VECTORS = ("alpha", "eta", "psi", "chi", "phi", "col_scale", "n_alpha", "n_eta")
UNIT_SCALES = ("col_scale", "n_alpha", "n_eta")


def start_run_vectors(buffers, bottom_log: Tensor, batch_size: int, n: int, X: int) -> None:
    """Set ``buffers``' RUN_VECTORS for n updates: alpha (B, n+1, X), eta (B, n+1, X, m),
    psi, chi, phi (B, n+1) zeros, the scales ones, and entry 0 the initial configuration."""
    B, m = batch_size, bottom_log.size(0)
    new = dict(dtype=bottom_log.dtype, device=bottom_log.device)
    buffers.alpha = torch.empty(B, n + 1, X, **new)
    buffers.eta = torch.empty(B, n + 1, X, m, **new)
    buffers.psi, buffers.chi, buffers.phi = (torch.zeros(B, n + 1, **new) for _ in range(3))
    for name in UNIT_SCALES:
        setattr(buffers, name, torch.ones(B, n + 1, **new))
    with torch.no_grad():
        terms = initial_terms(bottom_log, B, X)
    buffers.alpha[:, 0], buffers.psi[:, 0], buffers.eta[:, 0], buffers.chi[:, 0] = terms


def copy_run_vectors(source, target, n: int, pick) -> None:
    """Set ``target``'s RUN_VECTORS with room for n updates, entries 0..min(n, source.n)
    taken from ``source`` (rows ``pick(x)`` of each), the rest zeros (ones for scales)."""
    keep = min(n, source.n)
    for name in RUN_VECTORS:
        x = pick(getattr(source, name))
        shape = (x.size(0), n + 1) + x.shape[2:]
        y = x.new_ones(shape) if name in UNIT_SCALES else x.new_zeros(shape)
        y[:, : keep + 1] = x[:, : keep + 1]
        setattr(target, name, y)


def bottom_gradient(eta: Tensor, chi: Tensor, bottom_log: Tensor) -> Tensor:
    """Gradient of bottom_log (m,) from the adjoint eta (B, n+1, X, m) of a backward pass:
    eta[0] = 1[q0, bottom] exp(bottom_log - shift), shift = chi[0, 0]."""
    return bottom_log_gradient(eta[:, 0, 0], chi, bottom_log)


def bottom_log_gradient(g_eta0: Tensor, chi: Tensor, bottom_log: Tensor) -> Tensor:
    """The same from the adjoint of eta[0]'s (q0, bottom) entry alone, g_eta0 (B, m)."""
    return (g_eta0 * torch.exp(bottom_log - chi[0, 0])).sum(0)
