"""fruit: a reproduction of "Bearing Syntactic Fruit with Stack-Augmented Neural Networks".

Subpackages, in import order (each depends only on those above it):

* ``fruit.tasks``    -- the seven syntactic transformation tasks (data, rules, partial checks)
* ``fruit.stacks``   -- differentiable stacks (superposition, nondeterministic dVPDA)
* ``fruit.models``   -- the fifteen architectures and their parameter sizing
* ``fruit.training`` / ``fruit.evaluation`` -- training loop and the paper's metrics
* ``fruit.experiments`` -- profiles, search and final runs on Dask
* ``fruit.reporting`` -- tables and bar charts from run folders
"""

__version__ = "0.1.0"
