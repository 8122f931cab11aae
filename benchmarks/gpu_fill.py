"""How much one device gives when K runs of one architecture share it, against one run alone
in the same call: the measurement behind choosing how many runs `fruit run` puts on a GPU.

Each of the K runs is its own process (as a Dask worker's run is), training the
architecture at paper size on question-formation batches (benchmarks/models.py's
batching and training step) with its own batch budget from --batch-tokens, cycled over
the runs (default: 512, 1024, 1536, 2048 tokens, the paper's range). The K processes set
up, then start together (a barrier of files) and train for --seconds; each counts its
predicted positions. Printed per (architecture, K): the mean per-run tokens/s, the
aggregate (their sum) and the aggregate over one run alone (K = 1, measured first).

    python benchmarks/gpu_fill.py --device cuda --arch Tf --arch Tf+Nd --arch LSTM \
        --runs 1,2,4,8,16 --seconds 20

On the CPU (--device cpu, one thread per run) it measures the same on a machine's cores.
Exits 0 with a message when the data file is absent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def models_benchmark():
    """benchmarks/models.py as a module (its batching, training step and data location)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_models", HERE / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker(args) -> int:
    """One run: set up, wait at the barrier, train for --seconds, print its count."""
    import torch

    bench = models_benchmark()
    from fruit.device import resolve_device
    from fruit.models import PAPER_VOCAB_SIZES
    from fruit.tasks import Vocabulary, read_tsv

    torch.set_num_threads(1)
    device = resolve_device(args.device)
    examples = read_tsv(args.data_dir / "question-formation" / "test.tsv")
    vocab = Vocabulary.from_examples(examples)
    V = max(vocab.size, PAPER_VOCAB_SIZES["question-formation"])
    strings = [vocab.encode(s + t) for s, t in examples]
    batches = bench.make_batches(strings, args.worker_batch_tokens, seed=args.worker_index)
    meter = bench.Meter(args.worker, V, batches, device, warmup=2)
    barrier = Path(args.barrier)
    (barrier / f"ready-{args.worker_index}").touch()
    while not (barrier / "go").exists():
        time.sleep(0.01)
    meter.run(args.seconds, min_steps=2)
    print(json.dumps({"tokens": meter.tokens, "seconds": meter.elapsed}), flush=True)
    return 0


def fill(arch: str, k: int, args) -> list[dict]:
    """K worker processes of ``arch`` started together; their counts."""
    budgets = [int(b) for b in args.batch_tokens.split(",")]
    with tempfile.TemporaryDirectory() as barrier:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    arch,
                    "--worker-index",
                    str(i),
                    "--worker-batch-tokens",
                    str(budgets[i % len(budgets)]),
                    "--barrier",
                    barrier,
                    "--device",
                    args.device,
                    "--seconds",
                    str(args.seconds),
                    "--data-dir",
                    str(args.data_dir),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for i in range(k)
        ]
        deadline = time.time() + args.setup_timeout
        while len(list(Path(barrier).glob("ready-*"))) < k:
            if time.time() > deadline or any(p.poll() not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                raise SystemExit(f"{arch} x{k}: the runs did not all set up in time")
            time.sleep(0.05)
        (Path(barrier) / "go").touch()
        return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", action="append", help="default: Tf, Tf+Nd, LSTM")
    parser.add_argument("--runs", default="1,2,4,8", help="the K to measure (1 is added)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-tokens", default="512,1024,1536,2048")
    parser.add_argument("--setup-timeout", type=float, default=300.0)
    parser.add_argument("--data-dir", type=Path, default=None)
    # a worker's own arguments (the script starts itself once per run)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--worker-batch-tokens", type=int, default=2048, help=argparse.SUPPRESS)
    parser.add_argument("--barrier", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.data_dir is None:
        args.data_dir = models_benchmark().default_data_dir()
    if args.worker:
        return worker(args)
    path = args.data_dir / "question-formation" / "test.tsv"
    if not path.is_file():
        print(f"benchmarks/gpu_fill.py: skipped: {path} not found (set --data-dir)")
        return 0
    import torch

    from fruit.device import resolve_device

    device = resolve_device(args.device)
    args.device = str(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"# device {device} ({name}), torch {torch.__version__}, {args.seconds:g} s per fill")
    print(
        f"{'architecture':<12} {'runs':>4} {'tokens/s per run':>17} {'aggregate':>11} {'x alone':>8}"
    )
    ks = sorted({1, *(int(k) for k in args.runs.split(","))})
    for arch in args.arch or ["Tf", "Tf+Nd", "LSTM"]:
        alone = None
        for k in ks:
            counts = fill(arch, k, args)
            rates = [c["tokens"] / c["seconds"] for c in counts]
            aggregate = sum(rates)
            alone = alone or aggregate
            print(
                f"{arch:<12} {k:>4} {aggregate / k:>17.0f} {aggregate:>11.0f} "
                f"{aggregate / alone:>8.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
