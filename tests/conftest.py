"""Shared test fixtures.

The published dev/test/gen files are never part of the repository. Tests that need
them read ``$FRUIT_DATASETS`` or, by default, ``../shared/datasets`` next to the
checkout, and skip with a clear reason when neither exists.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def published_datasets_dir() -> Path | None:
    env = os.environ.get("FRUIT_DATASETS")
    candidates = [Path(env)] if env else [REPO.parent / "shared" / "datasets"]
    for c in candidates:
        if (c / "question-formation" / "gen.tsv").is_file():
            return c
    return None


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    d = published_datasets_dir()
    if d is None:
        pytest.skip(
            "published datasets not found: set FRUIT_DATASETS to a folder with "
            "<task>/{dev,test,gen}.tsv (default ../shared/datasets)"
        )
    return d


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="CUDA not available on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _few_threads():
    # One thread: predictable and fast on small or shared machines (oversubscribed
    # threads slowed runs 5x in measurements here).
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session", autouse=True)
def _compiled_kernels_in_a_temporary_folder(tmp_path_factory):
    """The C kernels (fruit.kernels.build) are built for this session in a temporary
    folder, not in the user's ~/.cache/fruit."""
    from fruit.kernels import build
    from fruit.models.passes import sup_cells

    os.environ.setdefault("FRUIT_CACHE_DIR", str(tmp_path_factory.mktemp("fruit-cache")))
    build.library.cache_clear()
    sup_cells._native_cells.cache_clear()
