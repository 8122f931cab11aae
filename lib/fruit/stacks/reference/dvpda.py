"""The nondeterministic stack (dVPDA, docs/paper.md §6) as the paper writes it: the inner
weights gamma and vector inner weights zeta, the forward weights alpha and eta, and the
reading, in log space, differentiated by autograd.

Time: t = 0 is the initial configuration (q0, ⊥) with the bottom vector v_0; updates
are t = 1..n. A configuration (q, x) is a state and a top symbol, flattened q S + x
(X = Q S of them). The weights of update t, read from the flat logits as in
docs/paper.md §6.1, are push_t[q,x -> r,y], replace_t[q,x -> r,y] and pop_t[q,x -> r].

gamma[i->t][q,x -> r,y] (0 <= i < t) is the total weight of the partial runs that
start at time i in (q, x), push an element at time i+1 and, at time t, are in state
r with that element (now symbol y) on top and x right below it; zeta is the same sum
with each run also weighted by its top vector (the vector pushed at i+1):

    gamma[i->t] = push_t                                                   (i = t-1)
                + gamma[i->t-1] replace_t                                  (i <= t-2)
                + sum_{k=i+1}^{t-2} sum_u gamma[i->k][q,x -> u,y] gamma'[k->t][u,y -> r]
    gamma'[k->t][u,y -> r] = sum_{s,z} gamma[k->t-1][u,y -> s,z] pop_t[s,z -> r]
    zeta[i->t]  = push_t v_t                                               (i = t-1)
                + zeta[i->t-1] replace_t
                + sum_{k=i+1}^{t-2} sum_u zeta[i->k][q,x -> u,y] gamma'[k->t][u,y -> r]

The bottom row i = -1 starts at the initial configuration only (the bottom element is
never popped, and may be replaced): gamma[-1->0] = 1 at (q0, ⊥), zeta[-1->0] = v_0
there, and for t >= 1 the replace and pop terms above. Then

    alpha[t][r,y] = sum_{i=-1}^{t-1} sum_{q,x} alpha[i][q,x] gamma[i->t][q,x -> r,y]
    eta[t][r,y]   = sum_{i=-1}^{t-1} sum_{q,x} alpha[i][q,x] zeta[i->t][q,x -> r,y]
    reading_t[r,y] = eta[t][r,y] / sum_{r',y'} alpha[t][r',y']      (paper's Eq. (6))

with alpha[-1] = 1 for the initial configuration (so alpha[0] = gamma[-1->0]).
Every quantity is stored as its logarithm and every sum is one logsumexp over all
its terms at once (log 0 = -inf terms then get zero gradient).
"""

from __future__ import annotations

import torch
from torch import Tensor

NEG_INF = float("-inf")


def log_matmul(a: Tensor, b: Tensor) -> Tensor:
    """log(exp(a) @ exp(b)) for a (..., I, J), b (..., J, K)."""
    return torch.logsumexp(a[..., :, :, None] + b[..., None, :, :], dim=-2)


class DVPDA:
    """One run of the dVPDA, one update at a time: `step` -> the reading after it.

    gamma[i, t]: log gamma[i->t], (B, rows_i, X) with rows_{-1} = 1 (the initial
    configuration) and rows_i = X for i >= 0; zeta[i, t]: log zeta[i->t], (B, rows_i, X, m);
    alpha[i]: log alpha[i], (B, rows_i) as the rows it multiplies (alpha[-1] = 0: weight 1).
    """

    def __init__(self, bottom_log: Tensor, batch_size: int, num_states: int, num_symbols: int):
        B, m = batch_size, bottom_log.size(0)
        self.Q, self.S, self.X = num_states, num_symbols, num_states * num_symbols
        self.t = 0
        start = bottom_log.new_full((B, 1, self.X), NEG_INF)  # 1 at (q0, ⊥); bottom_log's device
        start[:, :, 0] = 0.0
        v0 = torch.cat((bottom_log[None], bottom_log.new_full((self.X - 1, m), NEG_INF)))  # (X, m)
        self.gamma = {(-1, 0): start}
        self.zeta = {(-1, 0): v0.expand(B, 1, self.X, m)}
        self.alpha = {-1: bottom_log.new_zeros(B, 1), 0: start[:, 0]}

    def reading(self) -> Tensor:
        """reading_t (B, X*m) = eta[t] / sum alpha[t], flattened as (state, symbol, component)."""
        t = self.t
        eta = self._forward(self.zeta, t)  # (B, X, m)
        total = torch.logsumexp(self.alpha[t], dim=-1)  # (B,)
        return torch.exp(eta - total[:, None, None]).flatten(1)

    def step(self, action_logits: Tensor, pushed_log: Tensor) -> Tensor:
        """Update t+1 from action_logits (B, A) (log weights, flat layout of docs/paper.md
        §6.1) and pushed_log (B, m) = log v_t -> reading (B, X*m)."""
        Q, S, X = self.Q, self.S, self.X
        B = action_logits.size(0)
        t = self.t = self.t + 1
        table = action_logits.view(B, X, 2 * X + Q)  # rows (q, x)
        push, replace, pop = table[:, :, :X], table[:, :, X : 2 * X], table[:, :, 2 * X :]
        # gamma'[k->t] for k = 0..t-2: (B, X (u,y), Q (r))
        gamma_pop = {k: log_matmul(self.gamma[k, t - 1], pop) for k in range(t - 1)}
        for i in range(-1, t):
            if i == t - 1:  # the push that starts gamma[t-1->t]
                self.gamma[i, t] = push
                self.zeta[i, t] = push[..., None] + pushed_log[:, None, None, :]
                continue
            ways = [_replace_ways(self.gamma[i, t - 1], replace)]  # (B, rows, X, ways)
            vector_ways = [_replace_ways(self.zeta[i, t - 1], replace)]  # (B, rows, X, m, ways)
            ks = range(i + 1, t - 1)  # the times k of the pop terms
            if ks:
                popped = torch.stack([gamma_pop[k] for k in ks], -1)  # (B, X, Q, K)
                gamma_ik = torch.stack([self.gamma[i, k] for k in ks], -1)  # (B, rows, X, K)
                zeta_ik = torch.stack([self.zeta[i, k] for k in ks], -1)  # (B, rows, X, m, K)
                ways.append(_pop_ways(gamma_ik, popped, Q, S))
                vector_ways.append(_pop_ways(zeta_ik, popped, Q, S))
            self.gamma[i, t] = torch.logsumexp(torch.cat(ways, -1), -1)
            self.zeta[i, t] = torch.logsumexp(torch.cat(vector_ways, -1), -1)
        self.alpha[t] = self._forward(self.gamma, t)  # (B, X)
        return self.reading()

    def _forward(self, inner: dict, t: int) -> Tensor:
        """sum_{i,(q,x)} alpha[i][q,x] inner[i->t][q,x -> .]: alpha[t] from gamma (B, X),
        eta[t] from zeta (B, X, m)."""
        terms = []
        for i in range(-1, t):
            a = self.alpha[i]  # (B, rows)
            x = inner[i, t]  # (B, rows, X[, m])
            terms.append(a.view(a.shape + (1,) * (x.dim() - 2)) + x)
        return torch.logsumexp(torch.cat(terms, 1), 1)


def _replace_ways(inner: Tensor, replace: Tensor) -> Tensor:
    """The replace terms of inner[i->t-1] replace_t, one per (s,z), not yet summed:
    inner (B, rows, X (s,z)[, m]), replace (B, X (s,z), X (r,y)) -> (B, rows, X (r,y)[, m], X (s,z))."""
    if inner.dim() == 3:
        return inner[:, :, None, :] + replace.transpose(1, 2)[:, None]
    return inner.transpose(2, 3)[:, :, None] + replace.transpose(1, 2)[:, None, :, None]


def _pop_ways(inner: Tensor, gamma_pop: Tensor, Q: int, S: int) -> Tensor:
    """The pop terms, one per (u, k), not yet summed: inner[i->k][q,x -> u,y]
    gamma'[k->t][u,y -> r]. inner (B, rows, X (u,y)[, m], K), gamma_pop (B, X (u,y), Q (r), K)
    -> (B, rows, X (r,y)[, m], Q K)."""
    B, rows, K = inner.size(0), inner.size(1), inner.size(-1)
    m = inner.shape[3:-1]  # () or (m,)
    a = inner.reshape(B, rows, Q, S, *m, K).movedim(2, -2)  # (B, rows, y[, m], u, K)
    h = gamma_pop.view(B, Q, S, Q, K).permute(0, 3, 2, 1, 4)  # (B, r, y, u, K)
    h = h.reshape(B, 1, Q, S, *(1,) * len(m), Q, K)  # (B, 1, r, y[, 1], u, K)
    return (a[:, :, None] + h).reshape(B, rows, Q * S, *m, Q * K)


def dvpda_readings(
    action_logits: Tensor, pushed_log: Tensor, bottom_log: Tensor, num_states: int, num_symbols: int
) -> Tensor:
    """action_logits (B, n, A), pushed_log (B, n, m), bottom_log (m,) -> readings
    (B, n, Q*S*m), reading t after update t (the same interface as fruit.stacks)."""
    B, n, m = pushed_log.shape
    run = DVPDA(bottom_log, B, num_states, num_symbols)
    readings = [run.step(action_logits[:, t], pushed_log[:, t]) for t in range(n)]
    if not readings:
        return pushed_log.new_zeros(B, 0, num_states * num_symbols * m)
    return torch.stack(readings, 1)
