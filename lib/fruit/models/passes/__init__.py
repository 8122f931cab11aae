"""The stack RNNs' fused passes: controller and stack as one autograd Function with a
written-out backward (backpropagation through time), on the stacks' fast code
(fruit.stacks.fast) and the generic machinery of fruit.kernels.

    stack_pass              a stack RNN's controller and stack as one pass
    sup_pass, nd_pass       its superposition and dVPDA drivers (RNN/LSTM+Sup, RNN/LSTM+Nd)
    sup_cells, sup_cells.c  the pointwise pieces of a step (PyTorch / C)

`sup_cells.cells_for` chooses the pieces' implementation (C kernels on the CPU when they
are built, PyTorch operations otherwise), and fruit.stacks.implementation the dVPDA's.
The passes are tested against the same recurrences written with plain autograd
operations and the stacks' paper-notation references (fruit.stacks.reference).
"""
