"""Summaries of the per-position stack actions that ``model(tokens, return_actions=True)`` gives."""

from __future__ import annotations

import torch

ND_ACTION_KINDS = ("push", "replace", "pop")


def nd_action_mass(
    weights: torch.Tensor, num_states: int = 3, num_symbols: int = 3, normalize: bool = False
) -> torch.Tensor:
    """Sum Nd action weights (..., A) into push / replace / pop mass (..., 3).

    The flat layout is docs/paper.md §6.1: rows (q, x), columns |Q||Γ| push, |Q||Γ| replace,
    |Q| pop. With ``normalize`` each position's three masses sum to 1.
    """
    qs = num_states * num_symbols
    table = weights.unflatten(-1, (qs, 2 * qs + num_states))  # (..., Q*S, 2QS+Q)
    mass = torch.stack(
        (
            table[..., :qs].sum((-2, -1)),
            table[..., qs : 2 * qs].sum((-2, -1)),
            table[..., 2 * qs :].sum((-2, -1)),
        ),
        dim=-1,
    )
    return mass / mass.sum(-1, keepdim=True) if normalize else mass
