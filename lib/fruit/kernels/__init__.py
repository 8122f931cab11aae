"""The fast implementations of the stacks and of the stack-RNN passes: the speed
machinery, below fruit.stacks and fruit.models in the layering.

    build                 the one C-build helper (compile on first use, cache, load)
    dvpda_math            the dVPDA's step math in scaled real space (PyTorch)
    dvpda_scan            whole sequences on PyTorch operations, hand-written backward
    dvpda_run             the step API's machinery (one autograd Function per update)
    dvpda_native, dvpda.c the same on C kernels (CPU)
    workspace             reused memory for the C kernels' large buffers
    superposition_update  one superposition update with its written-out adjoint
    products              matrix products through oneDNN on the CPU
    sup_cells, sup_cells.c  the pointwise pieces of a stack-RNN step (PyTorch / C)
    stack_pass            a stack RNN's controller and stack as one pass, written-out backward
    sup_pass, nd_pass     its superposition and dVPDA drivers (RNN/LSTM+Sup, RNN/LSTM+Nd)
    dropout, dropout.c    the transformers' dropout on a counter-based random stream

Which implementation runs is chosen in one place, fruit.stacks.implementation (and
`sup_cells.cells_for` for the pass's pieces). Everything here is tested against the
paper-notation references of fruit.stacks.reference.
"""
