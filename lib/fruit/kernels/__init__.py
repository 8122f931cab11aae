"""Generic speed machinery, below fruit.stacks and fruit.models in the layering and
independent of both:

    build                 the one C-build helper (compile on first use, cache, load)
    products              matrix products through oneDNN on the CPU
    dropout, dropout.c    the transformers' dropout on a counter-based random stream
    workspace             reused memory for the C kernels' large buffers

The stacks' fast implementations are in fruit.stacks.fast (next to the paper-notation
references they are tested against), and the stack RNNs' fused passes in
fruit.models.passes; each C file lives next to the module that calls it and is built
by `build`.
"""
