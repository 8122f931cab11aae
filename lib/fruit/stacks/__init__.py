"""Differentiable stacks: superposition (docs/paper.md §5) and nondeterministic (dVPDA, §6).

Whole-sequence (training) API, pure functions, batched; reading t is after update t:
    superposition_readings(action_probs (B,n,3), pushed (B,n,m)) -> (B,n,m)
    dvpda_readings(action_logits (B,n,A), pushed_log (B,n,m), bottom_log (m,),
                   num_states, num_symbols) -> (B,n,Q*S*m)
Step API: SuperpositionStack, DVPDAStack (initial / step / reading / select); both
accept ``initial(..., length=T)``, a promise of at most T updates (Sup: keeps only the
elements that can still reach the top; Nd: buffers allocated once).

On the CPU the dVPDA runs on C kernels (dvpda.c, compiled on first use; see
`dvpda_native`), with the PyTorch implementation of `scan` / `dvpda_step` as the
reference and for CUDA; FRUIT_NATIVE=0 selects the reference everywhere.
"""

from fruit.stacks.dvpda_step import DVPDAStack, dvpda_readings_stepwise
from fruit.stacks.nondeterministic import num_actions
from fruit.stacks.scan import dvpda_readings
from fruit.stacks.superposition import SuperpositionStack, superposition_readings

__all__ = [
    "DVPDAStack",
    "SuperpositionStack",
    "dvpda_readings",
    "dvpda_readings_stepwise",
    "num_actions",
    "superposition_readings",
]
