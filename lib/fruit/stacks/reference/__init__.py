"""The two stacks as the paper writes them, in plain PyTorch with autograd for the
gradients: no hand-written adjoints, no scaling tricks, no preallocated buffers.

    superposition.superposition_readings(action_probs (B,n,3), pushed (B,n,m)) -> (B,n,m)
    dvpda.dvpda_readings(action_logits (B,n,A), pushed_log (B,n,m), bottom_log (m,), Q, S)
        -> (B,n,Q*S*m)

These are what every fast path (fruit.stacks.fast: the PyTorch scan with its adjoint,
the C kernels; fruit.models.passes: the fused stack-RNN passes) is tested against, and they are themselves tested
against the brute-force enumeration of runs (fruit.stacks.bruteforce). They are meant to
be read next to docs/paper.md §5 and §6, and are slow (the dVPDA keeps every gamma and
zeta of the dynamic program, O(n^2) tensors).
"""

from fruit.stacks.reference.dvpda import DVPDA, dvpda_readings
from fruit.stacks.reference.superposition import superposition_readings, superposition_update

__all__ = ["DVPDA", "dvpda_readings", "superposition_readings", "superposition_update"]
