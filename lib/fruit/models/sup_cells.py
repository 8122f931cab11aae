"""Moved to fruit.kernels.sup_cells. Only tests/conftest.py still imports this name;
delete this file once it imports fruit.kernels.build instead."""

from fruit.kernels.sup_cells import _native_cells  # noqa: F401
