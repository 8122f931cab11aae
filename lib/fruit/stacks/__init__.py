"""Differentiable stacks: superposition (docs/paper.md §5) and nondeterministic (dVPDA, §6).

Whole-sequence (training) API, pure functions, batched; reading t is after update t:
    superposition_readings(action_probs (B,n,3), pushed (B,n,m)) -> (B,n,m)
    dvpda_readings(action_logits (B,n,A), pushed_log (B,n,m), bottom_log (m,),
                   num_states, num_symbols) -> (B,n,Q*S*m)
Step API: SuperpositionStack, DVPDAStack (initial / step / reading / select); both
accept ``initial(..., length=T)``, a promise of at most T updates (Sup: keeps only the
elements that can still reach the top; Nd: buffers allocated once).

This package holds the public API (`superposition`, `nondeterministic`), the
paper-notation references (`reference`: plain PyTorch, autograd gradients), the
brute-force oracles (`bruteforce`), the fast implementations tested against them
(`fast`: scaled PyTorch operations with written-out adjoints, and C kernels), and
`implementation`, which chooses the fast implementation a stack layer runs on (C kernels
on the CPU, PyTorch operations on CUDA, without a compiler, or with FRUIT_NATIVE=0; the
stack RNNs' fused passes choose their cells the same way, in fruit.models.passes).
"""

from fruit.stacks.nondeterministic import (
    DVPDAStack,
    dvpda_readings,
    dvpda_readings_stepwise,
    num_actions,
)
from fruit.stacks.superposition import SuperpositionStack, superposition_readings

__all__ = [
    "DVPDAStack",
    "SuperpositionStack",
    "dvpda_readings",
    "dvpda_readings_stepwise",
    "num_actions",
    "superposition_readings",
]
