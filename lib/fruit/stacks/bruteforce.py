"""Brute-force stack readings by enumerating runs: the test oracles.

Written from the definitions, not from the dynamic programs:

* Superposition stack (docs/paper.md §5.1, the paper's Sec. 3.1): the reading is the
  expectation, over all 3^t action sequences weighted by the product of their action
  probabilities, of the top vector of a stack that starts as an infinite column of
  zero vectors (popping it leaves it full of zeros). This is what the recurrence (and
  the authors' code) computes; the paper's closed form, Eq. (5), normalises over the
  runs that start with a push and never pop the empty stack, which gives other values
  (docs/paper.md §5.3).
* dVPDA (paper appendix B, docs/paper.md §6): a run is a sequence of transitions from
  (q0, [bottom]) that never pops the bottom element; its weight is the product of
  its transition weights; reading[r, y] = (sum of weight x top vector over runs
  ending in state r with y on top) / (total weight of all runs).

Runs that reach the same configuration (state, stack of (symbol, push time)) have
identical futures, so we add their weights: that is still an exact sum over runs.
Everything is plain Python floats (float64) and is meant for n <= 5.
"""

from __future__ import annotations

import itertools

import numpy as np


def superposition_bruteforce(action_probs, pushed) -> np.ndarray:
    """action_probs (n, 3) as (push, pop, no-op); pushed (n, m) -> readings (n, m)."""
    action_probs = np.asarray(action_probs, dtype=np.float64)
    pushed = np.asarray(pushed, dtype=np.float64)
    n, m = pushed.shape
    readings = np.zeros((n, m))
    for t in range(1, n + 1):
        for seq in itertools.product(range(3), repeat=t):
            stack: list[np.ndarray] = []  # top last; missing elements are zeros
            weight = 1.0
            for step, action in enumerate(seq):
                weight *= action_probs[step, action]
                if action == 0:
                    stack.append(pushed[step])
                elif action == 1 and stack:
                    stack.pop()
            top = stack[-1] if stack else np.zeros(m)
            readings[t - 1] += weight * top
    return readings


def dvpda_bruteforce(action_logits, pushed_log, bottom_log, num_states, num_symbols) -> np.ndarray:
    """action_logits (n, A) in the flat layout of docs/paper.md §6.1; pushed_log (n, m);
    bottom_log (m,) -> readings (n, Q*S*m) flattened as (state, symbol, component)."""
    Q, S = num_states, num_symbols
    weights = np.exp(np.asarray(action_logits, dtype=np.float64))
    vectors = [np.exp(np.asarray(bottom_log, dtype=np.float64))]
    vectors += list(np.exp(np.asarray(pushed_log, dtype=np.float64)))
    n = weights.shape[0]
    m = vectors[0].shape[0]
    columns = 2 * Q * S + Q
    # configuration: (state, ((symbol, vector index), ...) bottom first) -> total weight
    configs = {(0, ((0, 0),)): 1.0}
    readings = np.zeros((n, Q, S, m))
    for t in range(1, n + 1):
        w = weights[t - 1].reshape(Q * S, columns)
        nxt: dict = {}
        for (q, stack), weight in configs.items():
            x, _ = stack[-1]
            row = w[q * S + x]
            for r in range(Q):
                for y in range(S):
                    push = (r, stack + ((y, t),))
                    nxt[push] = nxt.get(push, 0.0) + weight * row[r * S + y]
                    replace = (r, stack[:-1] + ((y, stack[-1][1]),))
                    nxt[replace] = nxt.get(replace, 0.0) + weight * row[Q * S + r * S + y]
                if len(stack) > 1:
                    pop = (r, stack[:-1])
                    nxt[pop] = nxt.get(pop, 0.0) + weight * row[2 * Q * S + r]
        configs = nxt
        total = sum(configs.values())
        for (r, stack), weight in configs.items():
            y, index = stack[-1]
            readings[t - 1, r, y] += weight * vectors[index]
        readings[t - 1] /= total
    return readings.reshape(n, Q * S * m)
