"""fruit: a reproduction of "Bearing Syntactic Fruit with Stack-Augmented Neural Networks".

Subpackages, in import order (each depends only on those above it; docs/architecture.md §2,
checked by ``lint-imports``):

* ``fruit.tasks``    -- the seven syntactic transformation tasks (data, rules, partial checks)
* ``fruit.stacks``   -- differentiable stacks (superposition, nondeterministic dVPDA)
* ``fruit.models``   -- the fifteen architectures and their parameter sizing
* ``fruit.training`` / ``fruit.evaluation`` -- training loop and the paper's metrics
* ``fruit.experiments`` -- a profile's search and final runs on Dask
* ``fruit.reporting`` -- tables, bar charts and the paper's claims from run records

Beside them: ``fruit.profiles`` (experiment profiles), ``fruit.names`` (architecture names
and the parameter target, without torch), ``fruit.explore`` (looking inside a trained run),
``fruit.cli`` and ``fruit.commands`` (the ``fruit`` command).
"""

__version__ = "0.1.0"
