"""fruit.kernels.dropout: the counter-based dropout of the transformers.

Oracles: splitmix64 written with Python integers (arbitrary precision, masked to 64
bits) for the random bits; the C kernel against the PyTorch version bit for bit;
binomial bounds for the law; the definition y = mask ⊙ x / (1-p) for the gradient.
"""

from __future__ import annotations

import pytest
import torch

from fruit.kernels import build
from fruit.kernels import dropout as D

M64 = 2**64 - 1


def splitmix_bits(n: int, seed: int) -> list[int]:
    """The 32 bits of each of n elements, from the definition, with Python integers."""

    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    h = (n + 1) // 2
    draws = [mix((seed + (j + 1) * 0x9E3779B97F4A7C15) & M64) for j in range(h)]
    return [z & 0xFFFFFFFF for z in draws] + [z >> 32 for z in draws[: n // 2]]


def has_c_kernel() -> bool:
    return build.library_for(D.SOURCE, torch.zeros(1)) is not None


@pytest.mark.parametrize("n", [1, 2, 3, 10, 257])
@pytest.mark.parametrize("seed", [0, 1, 2**63 - 1, 2**63, 2**64 - 1, 0x1234_5678_9ABC_DEF0])
def test_pytorch_bits_follow_the_definition(n, seed):
    assert D.keep_bits(n, seed).tolist() == splitmix_bits(n, seed)


@pytest.mark.skipif(not has_c_kernel(), reason="the C kernel is not built here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 2, 7, 1000, 4097])
def test_c_kernel_equals_pytorch_version(dtype, n, monkeypatch):
    torch.manual_seed(n)
    x = torch.randn(n, dtype=dtype)
    for p in (0.1, 0.5, 0.9):
        seed = D.fresh_seed()
        native = D.apply_mask(x, seed, p)
        monkeypatch.setenv("FRUIT_NATIVE", "0")
        plain = D.apply_mask(x, seed, p)
        monkeypatch.delenv("FRUIT_NATIVE")
        assert torch.equal(native, plain)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_law_keep_fraction_scale_and_pairs(p):
    torch.manual_seed(0)
    n = 1_000_000
    y = D.dropout(torch.ones(n), p, training=True)
    kept = y != 0
    assert torch.all(kept | (y == 0))
    assert torch.allclose(y[kept], torch.tensor(1.0 / (1.0 - p)))
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(kept.double().mean().item() - (1 - p)) < 5 * sigma
    # neighbours, and the two halves of one draw (element j and h + j), independent
    h = n // 2
    for a, b in ((kept[:-1:2], kept[1::2]), (kept[:h], kept[h:])):
        both = (a & b).double().mean().item()
        assert abs(both - (1 - p) ** 2) < 5 * (1 / len(a)) ** 0.5 * 0.5


def test_gradient_is_the_forward_mask():
    torch.manual_seed(1)
    x = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 5, 7, dtype=torch.float64)
    y = D.dropout(x, 0.3, training=True)
    (y * w).sum().backward()
    mask = (y / x).detach()  # 0 or 1/(1-p) per element
    assert set(torch.unique(mask.round(decimals=9)).tolist()) <= {0.0, round(1 / 0.7, 9)}
    assert torch.allclose(x.grad, mask * w)


def test_same_seed_same_mask_and_identity_when_off():
    x = torch.randn(64, 32)
    torch.manual_seed(5)
    a = D.dropout(x, 0.1, training=True)
    torch.manual_seed(5)
    b = D.dropout(x, 0.1, training=True)
    assert torch.equal(a, b)
    assert not torch.equal(a, D.dropout(x, 0.1, training=True))  # a fresh seed per call
    assert D.dropout(x, 0.1, training=False) is x
    assert D.dropout(x, 0.0, training=True) is x
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        D.dropout(x, 1.0, training=True)


def test_transformer_training_forward_is_reproducible_and_dropped():
    from fruit.models import build_model

    torch.manual_seed(0)
    model = build_model("Tf", vocab_size=10, d=16).train()
    tokens = torch.randint(0, 10, (4, 9))
    outs = []
    for seed in (3, 3, 4):
        torch.manual_seed(seed)
        outs.append(model(tokens))
    assert torch.equal(outs[0], outs[1])
    assert not torch.allclose(outs[0], outs[2])
    model.eval()
    assert torch.equal(model(tokens), model(tokens))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_masks_equal_the_cpu_masks(dtype):
    # the CUDA path runs the PyTorch integer version: same bits as the CPU (C or PyTorch)
    assert D.keep_bits(257, 2**63 + 5, "cuda").tolist() == splitmix_bits(257, 2**63 + 5)
    x = torch.randn(4097, dtype=dtype)
    for p in (0.1, 0.5):
        seed = D.fresh_seed()
        assert torch.equal(D.apply_mask(x.cuda(), seed, p).cpu(), D.apply_mask(x, seed, p))


def test_pytorch_dropout_is_taken_where_the_switch_says(monkeypatch):
    # the CUDA default, forced on the CPU: the output is PyTorch's own dropout under the
    # same generator state (the oracle), and the gradient carries the same mask
    monkeypatch.setenv("FRUIT_COUNTER_DROPOUT", "0")
    x = torch.randn(3, 257, requires_grad=True)
    torch.manual_seed(5)
    y = D.dropout(x, 0.3, training=True)
    torch.manual_seed(5)
    expected = torch.nn.functional.dropout(x.detach(), 0.3, training=True)
    assert torch.equal(y, expected)
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(grad, (expected != 0).float() / 0.7)
    monkeypatch.setenv("FRUIT_COUNTER_DROPOUT", "1")  # counter-based: not PyTorch's masks
    torch.manual_seed(5)
    assert not torch.equal(D.dropout(x, 0.3, training=True), expected)


def test_dropout_switch_defaults_and_checks(monkeypatch):
    from fruit.errors import FruitError

    monkeypatch.delenv("FRUIT_COUNTER_DROPOUT", raising=False)
    assert D.counter_based(torch.device("cpu")) and not D.counter_based(torch.device("cuda"))
    monkeypatch.setenv("FRUIT_COUNTER_DROPOUT", "1")
    assert D.counter_based(torch.device("cuda"))
    monkeypatch.setenv("FRUIT_COUNTER_DROPOUT", "0")
    assert not D.counter_based(torch.device("cpu"))
    monkeypatch.setenv("FRUIT_COUNTER_DROPOUT", "on")
    with pytest.raises(FruitError, match="FRUIT_COUNTER_DROPOUT='on'"):
        D.dropout(torch.ones(4), 0.1, training=True)


@pytest.mark.gpu
def test_cuda_dropout_is_pytorchs_and_keeps_the_law():
    # CUDA default: PyTorch's dropout from the CUDA generator, a kept fraction of 1 - p
    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.manual_seed(3)
    y = D.dropout(x, 0.1, training=True)
    torch.cuda.manual_seed(3)
    assert torch.equal(y, torch.nn.functional.dropout(x, 0.1, training=True))
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.9) < 5 * (0.9 * 0.1 / x.numel()) ** 0.5


@pytest.mark.parametrize("variable", ["FRUIT_NATIVE", "FRUIT_ONEDNN"])
def test_a_switch_with_another_value_than_0_or_1_is_an_error(variable, monkeypatch):
    # FRUIT_NATIVE=false used to leave the C kernels on without a word
    from fruit.errors import FruitError
    from fruit.kernels import products

    check = build.enabled if variable == "FRUIT_NATIVE" else products._prefer_onednn
    for value, expected in (("0", False), ("1", True)):
        monkeypatch.setenv(variable, value)
        assert check() is expected
    monkeypatch.setenv(variable, "false")
    with pytest.raises(FruitError, match=f"{variable}='false': set it to 0 \\(off\\) or 1"):
        check()


def test_a_cache_folder_that_is_a_file_is_named_as_the_cause(tmp_path, monkeypatch):
    if build.compiler() is None:
        pytest.skip("no C compiler here")
    (tmp_path / "cache").write_text("a file, not a folder\n")
    monkeypatch.setenv("FRUIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FRUIT_NATIVE", raising=False)
    reasons = []
    assert build.load(D.SOURCE.path, "float", D.SOURCE.declare, reasons.append) is None
    assert reasons == [
        f"the kernels' cache folder {tmp_path / 'cache'} is a file (FRUIT_CACHE_DIR?)"
    ]
