"""The stacks' fast implementations, next to the paper-notation references
(fruit.stacks.reference) and brute-force oracles (fruit.stacks.bruteforce) that the
tests hold them to; they are never built on them.

    dvpda_math            the dVPDA's step math in scaled real space (PyTorch)
    dvpda_scan            whole sequences on PyTorch operations, hand-written backward
    dvpda_run             the step API's machinery (one autograd Function per update)
    dvpda_native, dvpda.c the same on C kernels (CPU; built by fruit.kernels.build)
    superposition_update  one superposition update with its written-out adjoint
    superposition_native, superposition.c  whole sequences of updates in C (CPU)

Which implementation a stack layer runs on is chosen in fruit.stacks.implementation
(the stack RNNs' fused passes: fruit.models.passes.sup_cells.cells_for).
"""
