"""One device filled with runs: per-run and aggregate training throughput of the fifteen
architectures with K runs sharing the device, their peak memory, and ours against the
authors' (rau) on identical batches -- the prepared GPU check of issue 32.

    PYTHONPATH=lib python3 benchmarks/gpu.py --out OUT [--runs 1,4,8,16] [--seconds 4]
        [--budget-seconds 480] [--arch Tf ...] [--rau-src PATH] [--device cuda]

For each K, K processes start once (as K Dask workers on one GPU would, each with one
torch thread and its own CUDA context) and train every architecture in turn at paper
size: all K set up the architecture, start together (a barrier of files), train for
--seconds, then go on to the next. Every process trains the same mix of batches, the
paper's budgets 512, 1024, 1536 and 2048 tokens interleaved (benchmarks/models.py's
batching and training step), from its own offset, on generated question-formation
strings (no data files needed, so it runs on a machine with only the checkout). Printed
per (architecture, K): mean per-run tokens/s, aggregate tokens/s, aggregate over one run
alone (K = 1), and the largest peak of GPU memory a run allocated.

With --rau-src (a rau checkout's src/, commit 4ff0c04 as the paper pins) and rau's
dependencies importable, ours and the authors' Tf, Tf+Sup and Tf+Nd take turns on the
same batches in one process (benchmarks/authors_transformer.py's interleaving): ours
over theirs. rau is never a dependency: without it that part says why and is skipped.

--budget-seconds bounds the whole call: a K whose turn would not end in time is skipped
with a line saying so, and the figures gathered so far are written. Results go to
OUT/gpu.json and OUT/gpu.txt. --device cpu runs the same on CPU cores (the CPU half,
tests/test_gpu_benchmark.py). Where the checkout has no .git, set FRUIT_COMMIT to the
commit it is, so that the figures name it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUDGETS = (512, 1024, 1536, 2048)  # the paper's range of tokens per batch
AUTHORS_ARCHS = ("Tf", "Tf+Sup", "Tf+Nd", "LSTM")  # the pairs issue 32 compares
STEPS = ("today", "plain", "eager", "graphs")  # --step: this file's own, fruit.training.steps
SETUP_SECONDS = 20.0  # a K's processes importing torch and starting CUDA (assumed, per fill)


def load(name: str):
    """benchmarks/<name>.py as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def strings_and_vocabulary(count: int) -> tuple[list[list[int]], int]:
    """Generated question-formation strings (source + target) as ids, and V."""
    from fruit.models import PAPER_VOCAB_SIZES
    from fruit.tasks import Vocabulary, get_task

    sizes = {"train": 0, "dev": 0, "test": count, "gen": 0}
    examples = get_task("question-formation").generate(seed=0, sizes=sizes)["test"]
    vocab = Vocabulary.from_examples(examples)
    size = max(vocab.size, PAPER_VOCAB_SIZES["question-formation"])
    return [vocab.encode(s + t) for s, t in examples], size


def mixed_batches(strings: list[list[int]], offset: int) -> list[list[list[int]]]:
    """Batches of every budget of ``BUDGETS``, interleaved, starting at ``offset``."""
    bench = load("models")
    lists = [bench.make_batches(strings, b, seed=offset) for b in BUDGETS]
    mixed = [batch for group in zip(*lists) for batch in group]
    return mixed[offset % len(mixed) :] + mixed[: offset % len(mixed)]


def labels(args) -> list[str]:
    """What each process trains in turn: every architecture once per --step kind, as
    ARCH (today's step) or ARCH@KIND."""
    return [a if s == "today" else f"{a}@{s}" for a in args.arch for s in args.step]


def step_ratios(fills: dict, steps: list[str]) -> list[str]:
    """Lines: per architecture and K, each later --step kind's aggregate tokens/s over the
    first kind's (the base)."""
    if len(steps) == 1:
        return []
    base = steps[0]
    lines = [f"# the steps over {base} (aggregate tokens/s, same K, same call):"]
    for label, by_k in fills.items():
        arch, _, step = label.partition("@")
        if (step or "today") == base:
            continue
        reference = fills.get(arch if base == "today" else f"{arch}@{base}", {})
        for k, row in by_k.items():
            if reference.get(k):
                ratio = row["aggregate"] / reference[k]["aggregate"]
                lines.append(f"#   {arch} {step or 'today'} K = {k}: {ratio:.2f}x "
                             f"({row['aggregate']:.0f} against {reference[k]['aggregate']:.0f})")  # fmt: skip
    print("\n".join(lines), flush=True)
    return lines


def worker(args) -> int:
    """One of K runs: each architecture in turn, set up, barrier, train, report."""
    import torch

    from fruit.device import resolve_device

    bench = load("models")
    torch.set_num_threads(1)
    device = resolve_device(args.device)
    barrier = Path(args.barrier)
    data = json.loads((barrier / "strings.json").read_text())
    batches = mixed_batches(data["strings"], args.worker_index)
    if args.cycle:
        batches = batches[: args.cycle]
    for arch in labels(args):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        name, _, step = arch.partition("@")
        meter = bench.Meter(name, data["vocab_size"], batches, device, warmup=2, step=step or None)
        (barrier / f"ready-{arch}-{args.worker_index}").touch()
        while not (barrier / f"go-{arch}").exists():
            if (barrier / "stop").exists():
                return 0
            time.sleep(0.01)
        meter.run(args.seconds, min_steps=2)
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
        row = {"arch": arch, "tokens": meter.tokens, "seconds": meter.elapsed, "peak": peak,
               "step_used": meter.step_used, "step_note": meter.step_note}  # fmt: skip
        print(json.dumps(row), flush=True)
        del meter
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return 0


def fill(k: int, args, barrier: Path, deadline: float) -> dict[str, list[dict]]:
    """K processes through every architecture; per architecture the K processes' rows
    (an architecture the deadline cut off is missing)."""
    folder = barrier / f"k{k}"
    folder.mkdir()
    (folder / "strings.json").write_text((barrier / "strings.json").read_text())
    command = [sys.executable, __file__, "--device", args.device, "--seconds", str(args.seconds),
               "--barrier", str(folder), "--cycle", str(args.cycle)]  # fmt: skip
    command += [x for a in args.arch for x in ("--arch", a)]
    command += [x for a in args.step for x in ("--step", a)]
    procs = [
        subprocess.Popen([*command, "--worker-index", str(i)], stdout=subprocess.PIPE, text=True)
        for i in range(k)
    ]
    try:
        for arch in labels(args):
            while len(list(folder.glob(f"ready-{arch}-*"))) < k:
                if time.time() > deadline or any(p.poll() not in (None, 0) for p in procs):
                    raise TimeoutError
                time.sleep(0.02)
            (folder / f"go-{arch}").touch()
    except TimeoutError:
        (folder / "stop").touch()
        print(f"# K = {k}: stopped at the time budget (or a run failed)", flush=True)
    rows: dict[str, list[dict]] = {}
    for p in procs:
        try:
            out = p.communicate(timeout=max(deadline - time.time(), 0) + 60)[0]
        except subprocess.TimeoutExpired:
            p.kill()
            out = p.communicate()[0]
        for line in out.splitlines():
            row = json.loads(line)
            rows.setdefault(row["arch"], []).append(row)
    return {arch: r for arch, r in rows.items() if len(r) == k}


def authors_rows(args, strings, vocab_size) -> list[str]:
    """Ours against rau's on the same batches, one process, taking turns."""
    if not args.rau_src:
        return ["# authors: skipped (no --rau-src; rau is never a dependency)"]
    sys.path.insert(0, str(Path(args.rau_src).resolve()))
    compare = load("authors_transformer")
    missing = compare.rau_missing()
    if missing:
        return [f"# authors: skipped (rau not importable from {args.rau_src}: {missing})"]
    import torch

    from fruit.device import resolve_device

    device = resolve_device(args.device)
    batches = mixed_batches(strings, 0)
    lines = []
    for arch in AUTHORS_ARCHS:
        ours, theirs = contenders(compare, arch, vocab_size, max(map(len, strings)), device)
        sync = torch.cuda.synchronize if device.type == "cuda" else None
        times = compare.interleave(
            [ours, theirs], batches, args.authors_seconds, 4, warmup=2, sync=sync
        )
        lines += [f"# authors {arch} on {device}:"] + compare.report(times)
        del ours, theirs
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return lines


def contenders(compare, arch: str, vocab_size: int, max_length: int, device):
    """(ours, theirs) for ``arch`` on ``device``: benchmarks/authors_transformer.py's
    Ours and Authors (rau's model, its training loop and Adam), moved to the device; for
    Tf+Sup and Tf+Nd, rau's stack transformer as benchmarks/authors_nd.py builds it, in
    that same training loop. Same d (ours chooses it), same batches."""
    import torch

    from fruit.models import build_model
    from fruit.training.objective import adam, update

    class Ours(compare.Ours):
        def __init__(self):
            self.model = build_model(arch, vocab_size=vocab_size).to(device).train()
            self.optimizer = adam(self.model.parameters(), 1e-4)  # as training builds it
            self.eos, self.clip = vocab_size, 10.0

        def step(self, batch):
            return update(self.model, self.optimizer, batch, self.eos, device, self.clip)

    ours = Ours()
    generator = torch.Generator().manual_seed(1)
    d = 8 if arch == "LSTM" else ours.model.d  # for the LSTM only rau's loop is kept
    theirs = compare.Authors(vocab_size, d, max_length, generator)
    if arch == "LSTM":  # the same loop around rau's LSTM language model
        lstm = authors_lstm(vocab_size, ours.model, generator)
        theirs.model, theirs.interface = lstm.model, lstm.interface
        theirs.saver.model = lstm.model.train()
        theirs.optimizer = theirs.loop.get_optimizer(lstm.model)
    elif arch != "Tf":  # the same loop around rau's stack transformer
        stack = load("authors_nd").Authors(arch, vocab_size, ours.model.d, generator)
        theirs.model, theirs.interface = stack.model, stack.interface
        theirs.saver.model = stack.model.train()
        theirs.optimizer = theirs.loop.get_optimizer(stack.model)
    theirs.model.to(device)  # in place: the optimizer keeps the same parameters
    theirs.interface.device = device
    return ours, theirs


def authors_lstm(vocab_size: int, ours, generator):
    """rau's LSTM language model as its CLI builds it for ``--architecture lstm`` with our
    LSTM's sizes (``ours.core.rnn``: layers, hidden units d; dropout 0.1; a learned
    initial state), initialised by rau; its model interface, for the training loop."""
    import inspect
    import types

    from rau.tasks.language_modeling.model import LanguageModelingModelInterface

    rnn = ours.core.rnn
    kwargs = dict(
        architecture="lstm",
        num_layers=rnn.num_layers,
        d_model=None,
        num_heads=None,
        feedforward_size=None,
        dropout=0.1,
        hidden_units=rnn.hidden_size,
        stack_transformer_layers=None,
        stack_rnn_controller=None,
        stack_rnn_stack=None,
        stack_rnn_connect_reading_to_output=False,
        input_vocabulary_size=vocab_size + 2,  # content, EOS, BOS
        output_vocabulary_size=vocab_size + 1,  # content, EOS
        bos_index=vocab_size + 1,
        eos_index=vocab_size,
    )
    interface = LanguageModelingModelInterface(use_init=True)
    accepted = inspect.signature(interface.construct_model).parameters
    kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    model = interface.construct_model(**kwargs)
    interface.initialize(types.SimpleNamespace(init_scale=0.1), model, generator)
    interface.on_saver_constructed(None, types.SimpleNamespace(model=model, kwargs=kwargs))
    return types.SimpleNamespace(model=model, interface=interface)


def commit() -> str:
    """This checkout's commit; where the folder has no .git (a copy of the working tree
    on a device machine), $FRUIT_COMMIT."""
    if os.environ.get("FRUIT_COMMIT"):
        return os.environ["FRUIT_COMMIT"]
    try:
        done = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True)  # fmt: skip
    except OSError:  # no git there
        return "unknown"
    return done.stdout.strip() or "unknown"


def main(argv=None) -> int:
    from fruit.names import PAPER_ARCHITECTURES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for gpu.json and gpu.txt")
    parser.add_argument("--arch", action="append", help="default: all fifteen")
    parser.add_argument("--runs", default="1,4,8,16", help="the K to measure (1 is added)")
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per fill")
    parser.add_argument("--budget-seconds", type=float, default=480.0)
    parser.add_argument("--strings", type=int, default=2000, help="generated strings")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rau-src", help="a rau checkout's src/, for ours against theirs")
    parser.add_argument("--authors-seconds", type=float, default=8.0)
    parser.add_argument(
        "--step", action="append", choices=STEPS,
        help="how each run steps: today (this benchmark's own step, as fruit.training."
        "objective.update), or a fruit.training.steps kind (plain, eager, graphs); several "
        "give each architecture once per kind, as ARCH@KIND, and the ratios over the first",
    )  # fmt: skip
    parser.add_argument(
        "--cycle", type=int, default=0,
        help="train on the first N batches of the mix, cycled (0: all); graphs are made "
        "once per shape before the timing, so a short cycle keeps that short",
    )  # fmt: skip
    parser.add_argument("--barrier", help=argparse.SUPPRESS)  # a worker's own arguments
    parser.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.arch = args.arch or list(PAPER_ARCHITECTURES)
    args.step = args.step or ["today"]
    unknown = [a for a in args.arch if a not in PAPER_ARCHITECTURES]
    if unknown:
        parser.error(
            f"unknown architecture {unknown[0]!r}; valid: {', '.join(PAPER_ARCHITECTURES)}"
        )
    if args.barrier:
        return worker(args)
    if args.out is None:
        parser.error("--out FOLDER is required")
    return measure(args)


def measure(args) -> int:
    import torch

    from fruit.device import resolve_device

    deadline = time.time() + args.budget_seconds
    device = resolve_device(args.device)
    args.device = str(device)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    strings, vocab_size = strings_and_vocabulary(args.strings)
    head = (f"# {card}, torch {torch.__version__}, commit {commit()}, "
            f"{datetime.date.today()}, {os.cpu_count()} CPU cores, {args.seconds:g} s per fill, "
            f"batches of {'/'.join(map(str, BUDGETS))} tokens interleaved")  # fmt: skip
    lines = [head, f"{'architecture':<15} {'K':>3} {'tokens/s per run':>17} "
             f"{'aggregate':>10} {'x alone':>8} {'peak MiB':>9}"]  # fmt: skip
    print("\n".join(lines), flush=True)
    record = {"card": card, "torch": torch.__version__, "commit": commit(), "budgets": BUDGETS,
              "date": str(datetime.date.today()), "seconds": args.seconds, "fills": {}}  # fmt: skip
    ks = sorted({1, *(int(k) for k in args.runs.split(","))})
    record["steps"], record["cycle"] = args.step, args.cycle
    with tempfile.TemporaryDirectory() as tmp:
        barrier = Path(tmp)
        (barrier / "strings.json").write_text(
            json.dumps({"strings": strings, "vocab_size": vocab_size})
        )
        alone: dict[str, float] = {}
        for k in ks:
            needed = SETUP_SECONDS + len(labels(args)) * (args.seconds + 2)
            if time.time() + needed > deadline:
                lines.append(f"# K = {k}: skipped, the time budget would not cover it")
                print(lines[-1], flush=True)
                continue
            for arch, rows in fill(k, args, barrier, deadline).items():
                if rows[0].get("step_note"):  # asked for graphs, the model took another step
                    lines.append(f"# {arch} stepped {rows[0]['step_used']}: {rows[0]['step_note']}")
                    print(lines[-1], flush=True)
                rates = [r["tokens"] / r["seconds"] for r in rows]
                aggregate = sum(rates)
                alone.setdefault(arch, aggregate if k == 1 else float("nan"))
                peak = max(r["peak"] for r in rows) / 2**20
                record["fills"].setdefault(arch, {})[k] = {
                    "per_run": aggregate / k,
                    "aggregate": aggregate,
                    "peak_mib": peak,
                }
                lines.append(f"{arch:<15} {k:>3} {aggregate / k:>17.0f} {aggregate:>10.0f} "
                             f"{aggregate / alone[arch]:>8.2f} {peak:>9.0f}")  # fmt: skip
                print(lines[-1], flush=True)
    lines += step_ratios(record["fills"], args.step)
    if args.rau_src and time.time() + 3 * len(AUTHORS_ARCHS) * args.authors_seconds > deadline:
        extra = ["# authors: skipped, the time budget would not cover it"]
    else:
        extra = authors_rows(args, strings, vocab_size)
    print("\n".join(extra), flush=True)
    lines += extra
    record["authors"] = extra
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu.json").write_text(json.dumps(record, indent=1))
    (args.out / "gpu.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
