"""The C kernels of the fused stack-RNN pass (fruit.models.passes.sup_cells, sup_cells.c)
against their PyTorch counterpart (fruit.models.passes.sup_cells.TorchCells), piece by
piece; how they are built by the one build helper (fruit.kernels.build) and what happens
when they cannot be; and the pass's matrix products (fruit.kernels.products) against
torch's."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch

from fruit.kernels import build, products
from fruit.models.passes.sup_cells import SOURCE, NativeCells, TorchCells, _native_cells, cells_for

REAL = {torch.float32: "float", torch.float64: "double"}
TOL = {torch.float32: 2e-6, torch.float64: 1e-13}


@pytest.fixture
def fresh_build(monkeypatch, tmp_path):
    """An empty cache folder, and no library remembered from earlier tests."""
    monkeypatch.setenv("FRUIT_CACHE_DIR", str(tmp_path))
    build.library.cache_clear()
    _native_cells.cache_clear()
    yield tmp_path
    build.library.cache_clear()
    _native_cells.cache_clear()


def native_cells(dtype) -> NativeCells:
    cells = cells_for(torch.zeros((), dtype=dtype))
    if cells is TorchCells:
        pytest.skip("the C kernels are not built here (no C compiler, or FRUIT_NATIVE=0)")
    return cells


def needs_compiler():
    if build.compiler() is None:
        pytest.skip("no C compiler ($CC or cc) on this machine")


def test_kernels_are_built_where_a_compiler_is(fresh_build):
    needs_compiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed build would warn
        for real in ("float", "double"):
            assert build.library(SOURCE, real) is not None
    built = sorted(fresh_build.iterdir())
    assert [p.name[:16] for p in built] == ["sup_cells-double", "sup_cells-float-"]  # no leftovers
    umask = os.umask(0)
    os.umask(umask)
    assert all(p.stat().st_mode & 0o777 == 0o755 & ~umask for p in built)  # others may load them
    assert isinstance(cells_for(torch.zeros(1)), NativeCells)


def test_loading_the_kernels_keeps_denormals(tmp_path):
    """Linked with -ffast-math, GCC < 13 would make loading the library switch the process
    to flush-to-zero; checked in a fresh process that builds and loads both libraries."""
    needs_compiler()
    script = (
        "import torch\n"
        "from fruit.kernels import build\n"
        "from fruit.models.passes.sup_cells import SOURCE\n"
        "assert build.library(SOURCE, 'float') is not None and build.library(SOURCE, 'double') is not None\n"
        "tiny = torch.tensor([1e-40]) * 1.0\n"
        "print(tiny.item() != 0.0, 5e-324 * 1.0 != 0.0)\n"
    )
    env = {**os.environ, "FRUIT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_a_damaged_library_is_rebuilt(fresh_build):
    needs_compiler()
    path = build.library_path(SOURCE.path, "double", build.compiler())
    path.write_bytes(b"not a shared library")  # e.g. a copy cut short
    assert build.library(SOURCE, "double") is not None  # loaded after a rebuild
    assert path.stat().st_size > 1000


def test_cc_may_carry_arguments(fresh_build, monkeypatch):
    needs_compiler()
    monkeypatch.setenv("CC", f"{build.compiler()[0]} -Wall")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build.library(SOURCE, "float") is not None


def test_failed_build_warns_and_falls_back(fresh_build, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a "compiler" that always fails
    with pytest.warns(RuntimeWarning, match="runs on PyTorch operations"):
        assert build.library(SOURCE, "float") is None
    assert cells_for(torch.zeros(1)) is TorchCells
    assert list(fresh_build.iterdir()) == []  # no half-written library left behind


def test_missing_compiler_and_switch_off(fresh_build, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with pytest.warns(RuntimeWarning, match="no C compiler"):
        assert build.library(SOURCE, "double") is None
    build.library.cache_clear()
    monkeypatch.setenv("FRUIT_NATIVE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build.library(SOURCE, "double") is None
    with pytest.raises(ValueError, match="real must be one of"):
        build.library(SOURCE, "half")


def test_cells_for_uses_torch_off_the_cpu_and_for_other_dtypes():
    assert cells_for(torch.zeros(1, dtype=torch.bfloat16)) is TorchCells
    if torch.cuda.is_available():
        assert cells_for(torch.zeros(1, device="cuda")) is TorchCells


# -- piece by piece against TorchCells -------------------------------------------------


def rows(B, width, offset, dtype, g):
    """A (B, width) view whose rows lie in a wider buffer, as the pass's buffers do."""
    buffer = torch.randn(B, width + offset + 3, dtype=dtype, generator=g)
    return buffer[:, offset : offset + width]


def close(a, b, dtype):
    scale = max(1.0, b.abs().max().item()) if b.numel() else 1.0
    return (a - b).abs().max().item() <= TOL[dtype] * scale if b.numel() else True


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("masked", [True, False], ids=["mask", "no-mask"])
@pytest.mark.parametrize("top", [False, True], ids=["below-top", "top"])
def test_lstm_pieces(dtype, masked, top):
    cells = native_cells(dtype)
    g = torch.Generator().manual_seed(1)
    B, d, n = 5, 7, 3
    z = 3 * torch.randn(B, 4 * d, dtype=dtype, generator=g)
    c_prev = torch.randn(B, d, dtype=dtype, generator=g)
    mask = (torch.rand(B, d, generator=g) > 0.3).to(dtype) / 0.7 if masked else None
    outs = []
    for impl in (cells, TorchCells):
        a, c, tc = (torch.full((B, k * d), float("nan"), dtype=dtype) for k in (4, 1, 1))
        h, up = rows(B, d, 2, dtype, g), None if top else rows(B, d, 0, dtype, g)
        impl.lstm_forward(z.clone(), a, c_prev, c, tc, h, mask, up)
        outs.append([a, c, tc, h] + ([] if top else [up]))
    for x, y in zip(*outs):
        assert close(x, y, dtype)

    A = torch.rand(n, B, 4 * d, dtype=dtype, generator=g)
    C = torch.randn(n + 1, B, d, dtype=dtype, generator=g)
    TC = torch.tanh(C[1:])
    dh_a, dh_b = rows(B, d, 1, dtype, g), rows(B, d, 4, dtype, g)
    dc0 = torch.randn(B, d, dtype=dtype, generator=g)
    outs = []
    for impl in (cells, TorchCells):
        local = impl.lstm_locals(A, C, TC)[1]
        dc, dz = dc0.clone(), torch.full((B, 4 * d), float("nan"), dtype=dtype)
        impl.lstm_backward(dh_a, dh_b, mask, local, dc, dz)
        outs.append([dc, dz])
    for x, y in zip(*outs):
        assert close(x, y, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("masked", [True, False], ids=["mask", "no-mask"])
def test_rnn_pieces(dtype, masked):
    cells = native_cells(dtype)
    g = torch.Generator().manual_seed(2)
    B, d, n = 4, 9, 3
    z = 3 * torch.randn(B, d, dtype=dtype, generator=g)
    mask = (torch.rand(B, d, generator=g) > 0.3).to(dtype) / 0.7 if masked else None
    outs = []
    for impl in (cells, TorchCells):
        h, up = rows(B, d, 3, dtype, g), rows(B, d, 0, dtype, g)
        impl.rnn_forward(z.clone(), h, mask, up)
        outs.append([h, up])
    for x, y in zip(*outs):
        assert close(x, y, dtype)

    H = torch.rand(n, B, 2 * d, dtype=dtype, generator=g)[:, :, d:]  # rows in a wider buffer
    dh_a, dh_b = rows(B, d, 1, dtype, g), rows(B, d, 2, dtype, g)
    outs = []
    for impl in (cells, TorchCells):
        dz = torch.full((B, d), float("nan"), dtype=dtype)
        impl.rnn_backward(dh_a, dh_b, mask, impl.rnn_locals(H)[2], dz)
        outs.append(dz)
    assert close(*outs, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(
    "h, height",
    [(0, 1), (1, 2), (3, 4), (4, 4), (5, 3), (2, 1), (1, 4), (0, 3)],
    ids=lambda v: str(v),
)
def test_stack_pieces(dtype, h, height):
    """One update from a stack of h elements to `height` (growing, kept, truncated; the
    pass never asks for height > h + 1, but the kernels give its zero rows too)."""
    cells = native_cells(dtype)
    g = torch.Generator().manual_seed(3)
    B, m = 4, 6
    head = (
        4 * torch.randn(B, 3 + m + 2, dtype=dtype, generator=g)[:, 1:-1]
    )  # rows in a wider buffer
    head[0, :3] = torch.tensor([60.0, -60.0, 0.0])  # saturated actions stay finite
    old = torch.randn(B, h, m, dtype=dtype, generator=g)
    outs = []
    for impl in (cells, TorchCells):
        probs, pushed = torch.empty(B, 3, dtype=dtype), torch.empty(B, m, dtype=dtype)
        reading = rows(B, m, 2, dtype, g)
        new = impl.stack_forward(head, probs, pushed, old, height, reading)
        outs.append([probs, pushed, new, reading])
    for x, y in zip(*outs):
        assert x.shape == y.shape and torch.isfinite(x).all()
        assert close(x, y, dtype)

    probs, pushed = outs[1][0], outs[1][1]
    grad = torch.randn(B, height, m, dtype=dtype, generator=g)
    g_b = torch.randn(B, m, dtype=dtype, generator=g)
    for g_a in (None, rows(B, m, 1, dtype, g)):
        outs = []
        for impl in (cells, TorchCells):
            dhead = torch.full((B, 3 + m + 3), float("nan"), dtype=dtype)[:, 2:-1]  # rows, too
            g_new = grad.clone()
            g_old = impl.stack_backward(old, probs, pushed, g_new, g_a, g_b, dhead)
            outs.append([g_old, dhead, g_new])
        for x, y in zip(*outs):
            assert x.shape == y.shape
            assert close(x, y, dtype)


# -- the matrix products -----------------------------------------------------------------


@pytest.fixture(params=["default", "onednn", "mkl"])
def library(request, monkeypatch):
    """The products on this machine's choice, on oneDNN (where PyTorch has it) and on torch's
    own matmul (MKL)."""
    if request.param == "onednn":
        monkeypatch.setenv("FRUIT_ONEDNN", "1")
        op = products._onednn_op()
        if op is None:
            pytest.skip("PyTorch's oneDNN linear is not available here")
        monkeypatch.setattr(products, "_ONEDNN", op)
    elif request.param == "mkl":
        monkeypatch.setattr(products, "_ONEDNN", None)
    return request.param


def test_onednn_is_preferred_where_torch_runs_avx512(monkeypatch):
    for choice, want in (("1", True), ("0", False)):
        monkeypatch.setenv("FRUIT_ONEDNN", choice)
        assert products._prefer_onednn() is want
    monkeypatch.delenv("FRUIT_ONEDNN")
    avx512 = torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    assert products._prefer_onednn() is avx512


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_products_match_torch(dtype, library):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(30, 50, dtype=dtype, generator=g)[:, 3:40]  # rows in a wider buffer
    weight = torch.randn(37, 20, dtype=dtype, generator=g).t()  # a transposed view (20, 37)
    bias = torch.randn(20, dtype=dtype, generator=g)
    other = torch.randn(30, 20, dtype=dtype, generator=g)
    want = x.double() @ weight.double().t()
    tol = 1e-4 if dtype == torch.float32 else 1e-12
    assert (products.linear(x, weight) - want).abs().max() < tol
    assert (products.linear(x, weight, bias) - (want + bias.double())).abs().max() < tol
    assert (products.linear_add(x, weight, other) - (want + other.double())).abs().max() < tol
    for strided in (torch.randn(40, dtype=dtype, generator=g)[::2], bias.expand(3, 20)[1]):
        # a bias with a stride (oneDNN would ignore it) or a stride-0 one
        assert (products.linear(x, weight, strided) - (want + strided.double())).abs().max() < tol
    out = torch.empty(30, 20, dtype=dtype)
    assert products.linear(x, weight, bias, out=out) is out
    assert (out - (want + bias.double())).abs().max() < tol
    assert products.linear_add(x, weight, other, out=out) is out
    assert (out - (want + other.double())).abs().max() < tol
    # the weight gradient's shape of call: transposed views of both
    X, dZ = torch.randn(64, 11, dtype=dtype), torch.randn(64, 13, dtype=dtype)
    assert (products.linear(X.t(), dZ.t()) - X.double().t() @ dZ.double()).abs().max() < tol
    assert products.uses_onednn(x) == (dtype == torch.float32 and products._ONEDNN is not None)


def test_products_with_empty_operands(library):
    """oneDNN refuses empty operands; the products then go to torch."""
    w = torch.randn(4, 3)
    assert products.linear(torch.zeros(0, 3), w).shape == (0, 4)
    assert products.linear_add(torch.zeros(0, 3), w, torch.zeros(0, 4)).shape == (0, 4)
    assert torch.equal(products.linear(torch.randn(2, 0), torch.randn(4, 0)), torch.zeros(2, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("arch", ["RNN+Sup", "LSTM+Sup+R"])
def test_sup_models_take_an_empty_batch(arch, dtype):
    from fruit.models import build_model

    model = build_model(arch, vocab_size=7, d=5).to(dtype).train()
    logits = model(torch.zeros(0, 4, dtype=torch.long))
    assert logits.shape == (0, 5, 8)
    logits.sum().backward()
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_project_matches_functional_linear(dtype, library):
    """products.project (an autograd node on oneDNN for float32) against F.linear: values
    and gradients, with a weight that is a column slice of a larger matrix (the token part
    of a stack RNN's first layer) and inputs with two leading dimensions."""
    g = torch.Generator().manual_seed(7)
    big = torch.randn(12, 30, dtype=dtype, generator=g, requires_grad=True)
    bias = torch.randn(12, dtype=dtype, generator=g, requires_grad=True)
    x = torch.randn(4, 5, 17, dtype=dtype, generator=g, requires_grad=True)
    w_out = torch.randn(4, 5, 12, dtype=dtype, generator=g)
    results = []
    for fn in (products.project, torch.nn.functional.linear):
        y = fn(x, big[:, 2:19], bias)
        grads = torch.autograd.grad((y * w_out).sum(), (x, big, bias))
        results.append((y, *grads))
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    for got, want in zip(*results):
        assert got.shape == want.shape
        assert (got - want).abs().max() < tol
    assert not results[0][2][:, :2].any()  # the slice's gradient lands in its columns only


def test_a_compiler_without_march_native_still_builds(fresh_build, monkeypatch):
    """E.g. a compiler that refuses -march=native: the build retries without it."""
    needs_compiler()
    (fresh_build / "bin").mkdir()
    wrapper = fresh_build / "bin" / "cc-without-march-native"
    wrapper.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = -march=native ] && exit 1; done\n'
        f'exec {build.compiler()[0]} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib = build.library(SOURCE, "double")
    assert lib is not None
    cells = NativeCells(SOURCE.declare(lib), None)  # the cells alone: no stack update here
    z, h = torch.randn(2, 3, dtype=torch.float64), torch.empty(2, 3, dtype=torch.float64)
    cells.rnn_forward(z, h, None, None)
    assert (h - torch.tanh(z)).abs().max() < 1e-12
