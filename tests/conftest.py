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


@pytest.fixture(scope="session")
def benchmark_script():
    """``load(name)``: benchmarks/<name>.py as a module (the scripts are not a package)."""
    import importlib.util

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


# The longest tests (whole sweeps through Dask and papermill, the tutorial), started first
# so that, spread over pytest-xdist's workers, none of them is left to run alone at the end
LONGEST_FIRST = ("test_experiments_smoke.py", "test_tutorial.py")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.path.name not in LONGEST_FIRST)  # stable: else as found
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="CUDA not available on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session", autouse=True)
def _one_thread_from_the_start():
    # before any module- or session-scoped fixture trains or evaluates a model: runs
    # compared for equality must reduce in the same order
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _few_threads():
    # One thread: predictable and fast on small or shared machines (oversubscribed
    # threads slowed runs 5x in measurements here); every test starts with it, whatever
    # the test before it set.
    torch.set_num_threads(1)
    yield


@pytest.fixture(autouse=True)
def _malloc_environment_restored():
    """A plain Dask LocalCluster's nanny writes MALLOC_TRIM_THRESHOLD_ into this process's
    os.environ (fruit's clusters do not: fruit.experiments.clusters.cluster.QUIET_DASK); put the
    malloc variables back after each test, so that a later test's cluster does not inherit
    them whatever ran before it in the same process (pytest-xdist changes that order)."""
    before = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    yield
    for name in [k for k in os.environ if k.startswith("MALLOC_") and k not in before]:
        del os.environ[name]
    os.environ.update(before)


@pytest.fixture(scope="session", autouse=True)
def _compiled_kernels_in_a_temporary_folder(tmp_path_factory):
    """The C kernels (fruit.kernels.build) are built for this session in a temporary
    folder, not in the user's ~/.cache/fruit."""
    from fruit.kernels import build
    from fruit.models.passes import sup_cells

    os.environ.setdefault("FRUIT_CACHE_DIR", str(tmp_path_factory.mktemp("fruit-cache")))
    build.library.cache_clear()
    sup_cells._native_cells.cache_clear()


@pytest.fixture
def fused_equals_stepped(monkeypatch):
    """check(model, pass_name, pass_fn, masks_at): a stack RNN's fused pass (the function
    ``pass_name`` of fruit.models.passes.<pass_name>, which the stack kind's ``fused``
    driver calls; its argument ``masks_at`` holds the
    inter-layer dropout masks) and its stepped pass (taken when a head has a hook) give
    the same logits and gradients in training mode, float64, when the stepped pass's
    inter-layer dropout uses the fused pass's masks (embedding and output dropout off)."""
    import importlib

    import fruit.models.recurrent as recurrent

    def check(model, pass_name, pass_fn, masks_at):
        passes = importlib.import_module(f"fruit.models.passes.{pass_name}")
        with torch.no_grad():
            for p in model.parameters():
                if p.requires_grad:
                    p.uniform_(-0.8, 0.8)
        model.dropout = torch.nn.Identity()
        tokens = torch.randint(0, 7, (3, 6), generator=torch.Generator().manual_seed(7))
        weights = torch.randn(
            3, 7, 8, generator=torch.Generator().manual_seed(8), dtype=torch.float64
        )
        params = [p for p in model.parameters() if p.requires_grad]
        seen = []
        spy = lambda *a: seen.append(a[masks_at]) or pass_fn(*a)  # noqa: E731
        monkeypatch.setattr(passes, pass_name, spy)
        fused = model(tokens)
        fused_grads = torch.autograd.grad((fused * weights).sum(), params)
        (masks,) = seen
        assert masks is not None and (masks == 0).any()
        order = iter([masks[k, t] for t in range(6) for k in range(2)])  # Cells' call order
        monkeypatch.setattr(recurrent.F, "dropout", lambda x, p, training: x * next(order))
        model.stacks[0].actions.register_forward_hook(
            lambda module, args, output: output
        )  # stepped
        stepped = model(tokens)
        stepped_grads = torch.autograd.grad((stepped * weights).sum(), params)
        assert next(order, None) is None  # every mask used once
        assert (fused - stepped).abs().max() < 1e-12
        for a, b in zip(fused_grads, stepped_grads):
            assert (a - b).abs().max() < 1e-10

    return check
