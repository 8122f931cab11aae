"""Moved to fruit.kernels: the C-build helper is fruit.kernels.build, the Sup pass's
kernels fruit.kernels.sup_cells. Only tests/conftest.py still imports this name (to
forget the libraries built before it sets FRUIT_CACHE_DIR); delete this file once it
imports fruit.kernels.build instead."""

from fruit.kernels.build import library  # noqa: F401
