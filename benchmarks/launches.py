"""Operations per training step: what a GPU is launched for, counted on the CPU.

On CUDA a run of these small models is bound by its CPU thread launching kernels, one
per operation (docs/cluster.md, "On a GPU"), so the number of operations a training
step dispatches predicts its speed there better than a CPU timing does. This counts
them with PyTorch's dispatcher (``TorchDispatchMode``): every ATen operation of one
training step (``fruit.training.objective.update``: forward, loss, backward, clipping,
Adam), split into *compute* operations (each a kernel on a GPU) and *views* (no
kernel), and where in fruit the most frequent compute operations come from.

Run it as CUDA would run the model: ``FRUIT_NATIVE=0`` (the stacks' PyTorch code, not
the CPU's C kernels), ``FRUIT_COUNTER_DROPOUT=0`` and ``FRUIT_FUSED_ATTENTION=1``
(PyTorch's dropout and attention). On the CPU, PyTorch's dropout is two operations
where CUDA has one fused kernel.

    FRUIT_NATIVE=0 FRUIT_COUNTER_DROPOUT=0 FRUIT_FUSED_ATTENTION=1 \\
        .venv/bin/python benchmarks/launches.py [--arch Tf --arch Tf+Nd] [--length 28]
        [--strings 40] [--sites 8]
"""

from __future__ import annotations

import argparse
import collections
import sys
import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# ATen operations that only make a new view of the same memory: no kernel on a GPU
VIEWS = frozenset(
    "alias as_strided detach diagonal expand is_same_size lift_fresh narrow permute "
    "reshape select slice split split_with_sizes squeeze t transpose unbind unfold "
    "unsqueeze view _reshape_alias _unsafe_view".split()
)


class Counter(TorchDispatchMode):
    """Counts the ATen operations dispatched inside it; for compute operations, also
    the innermost fruit source line that asked for them ("autograd" for backward
    formulas that PyTorch runs itself)."""

    def __init__(self, sites: bool = False):
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()
        self.sites: collections.Counter[tuple[str, str]] = collections.Counter()
        self._sites = sites

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops[name] += 1
        if self._sites and name not in VIEWS:
            self.sites[name, site()] += 1
        return func(*args, **(kwargs or {}))

    def compute(self) -> int:
        return sum(n for name, n in self.ops.items() if name not in VIEWS)


def site() -> str:
    """``package/module.py:line function`` of the innermost fruit frame, else "autograd"."""
    frames = [f for f in traceback.extract_stack() if "/fruit/" in f.filename]
    if not frames:
        return "autograd"
    f = frames[-1]
    return f"{f.filename.split('/fruit/')[-1]}:{f.lineno} {f.name}"


def count_step(arch: str, length: int, strings: int, sites: bool) -> Counter:
    """The operations of one training step of ``arch`` (after one step of warm-up) on
    ``strings`` random strings of ``length`` tokens."""
    from fruit.models import build_model
    from fruit.training.objective import adam, update

    torch.manual_seed(0)
    vocab_size = 30
    model = build_model(arch, vocab_size=vocab_size).train()
    optimizer = adam(model.parameters(), 1e-4)
    batch = torch.randint(0, vocab_size, (strings, length)).tolist()
    device = torch.device("cpu")
    update(model, optimizer, batch, vocab_size, device, 10.0)  # lazy state made here
    with Counter(sites) as counter:
        update(model, optimizer, batch, vocab_size, device, 10.0)
    return counter


def main(argv=None) -> int:
    from fruit.names import PAPER_ARCHITECTURES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", action="append", help="default: Tf, Tf+Sup, Tf+Nd, LSTM")
    parser.add_argument("--length", type=int, default=28, help="tokens per string")
    parser.add_argument("--strings", type=int, default=40, help="strings per batch")
    parser.add_argument("--sites", type=int, default=0, help="top fruit sources to list")
    args = parser.parse_args(argv)
    archs = args.arch or ["Tf", "Tf+Sup", "Tf+Nd", "LSTM"]
    unknown = [a for a in archs if a not in PAPER_ARCHITECTURES]
    if unknown:
        parser.error(
            f"unknown architecture {unknown[0]!r}; valid: {', '.join(PAPER_ARCHITECTURES)}"
        )
    print(
        f"# one training step, {args.strings} strings of {args.length} tokens, torch {torch.__version__}"
    )
    print(f"{'architecture':<12} {'compute ops':>11} {'views':>7} {'per token':>9}")
    for arch in archs:
        counter = count_step(arch, args.length, args.strings, args.sites > 0)
        compute = counter.compute()
        views = sum(counter.ops.values()) - compute
        print(f"{arch:<12} {compute:>11} {views:>7} {compute / (args.length + 1):>9.1f}")
        for (name, where), n in counter.sites.most_common(args.sites):
            print(f"    {n:>6} {name:<16} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
