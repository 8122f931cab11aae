"""Training-step throughput of the fifteen architectures at paper size.

Batches are real question-formation strings (source + target, docs/paper.md §1) packed
as in training: sorted by length, b * max|w| <= 2048 tokens (§11). One training
step is forward, loss (mean over strings of -log p(w EOS)), backward, clipping at
10 and an Adam step. Throughput counts predicted positions, sum(|w| + 1), per second.
Each architecture's throughput is also given divided by the plain transformer's and
by its own base's (Tf, RNN or LSTM), measured in the same run, and the last lines say
whether the project's speed targets are met (Tf+Nd >= 1/2 of Tf, Tf+Nd+Nd >= 1/3 of
Tf, RNN+Nd >= 0.3 of RNN, LSTM+Nd >= 1/4 of LSTM, every Sup model >= 1/1.5 of its base). --arch adds Tf and
the bases of the architectures asked for.

    .venv/bin/python benchmarks/models.py [--data-dir DIR] [--seconds 10] [--arch Tf --arch Tf+Nd]

Runs on one CPU thread unless --threads says otherwise. Exits 0 with a message when
the data file is absent.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import torch

from fruit.batching import training_batches
from fruit.evaluation import next_token_log_probs

REPO = Path(__file__).resolve().parents[1]


def default_data_dir() -> Path:
    return Path(os.environ.get("FRUIT_DATASETS", REPO.parent / "shared" / "datasets"))


def load_load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def make_batches(strings: list[list[int]], budget: int, seed: int = 0) -> list[list[list[int]]]:
    """Training batches as in fruit.batching (b * max|w| <= budget), as lists of strings."""
    lengths = [len(w) for w in strings]
    batches = training_batches(lengths, budget, random.Random(seed))
    return [[strings[i] for i in batch] for batch in batches]


def train_step(model, optimizer, batch: list[list[int]], eos: int) -> float:
    """Mean over strings of -log p(w EOS), backward, clipping at 10, one optimiser step."""
    logp, real = next_token_log_probs(model, batch, eos_id=eos)  # (B, n+1)
    loss = -torch.where(real, logp, 0.0).sum() / len(batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    optimizer.step()
    return loss.item()


def measure(arch, vocab_size, batches, device, seconds, min_steps, warmup):
    from fruit.models import build_model, num_parameters

    torch.manual_seed(0)
    model = build_model(arch, vocab_size=vocab_size).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for batch in batches[:warmup]:
        train_step(model, optimizer, batch, vocab_size)
    sync()
    tokens_done, steps, start = 0, 0, time.perf_counter()
    for batch in batches[warmup:] + batches[:warmup]:
        train_step(model, optimizer, batch, vocab_size)
        sync()
        tokens_done += sum(len(w) + 1 for w in batch)  # predicted positions, EOS included
        steps += 1
        if steps >= min_steps and time.perf_counter() - start >= seconds:
            break
    elapsed = time.perf_counter() - start
    return {
        "d": model.d,
        "params": num_parameters(model),
        "steps": steps,
        "tokens_per_s": tokens_done / elapsed,
        "s_per_step": elapsed / steps,
    }


def main(argv=None) -> int:
    from fruit.models import ARCHITECTURES, PAPER_VOCAB_SIZES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--task", default="question-formation")
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-tokens", type=int, default=2048)
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per model")
    parser.add_argument("--min-steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--arch", action="append", help="only these (Tf is always added)")
    parser.add_argument("--device", default="auto")
    # One thread by default: on a small shared machine, PyTorch's intra-op threads spin
    # against other processes and a step can be 10x slower than with one thread.
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = parser.parse_args(argv)
    unknown = [a for a in args.arch or [] if a not in ARCHITECTURES]
    if unknown:
        parser.error(
            f"unknown architecture {unknown[0]!r}; valid choices: {', '.join(ARCHITECTURES)}"
        )

    path = args.data_dir / args.task / f"{args.split}.tsv"
    if not path.is_file():
        print(f"benchmarks/models.py: skipped: {path} not found (set --data-dir or FRUIT_DATASETS)")
        return 0
    from fruit.device import resolve_device
    from fruit.tasks import Vocabulary, read_tsv

    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    examples = read_tsv(path)
    vocab = Vocabulary.from_examples(examples)
    V = max(vocab.size, PAPER_VOCAB_SIZES.get(args.task, 0))
    strings = [vocab.encode(source + target) for source, target in examples]
    batches = make_batches(strings, args.batch_tokens)
    archs = list(ARCHITECTURES)
    if args.arch:  # those asked for, with Tf and their own bases (Tf, RNN, LSTM)
        wanted = {"Tf", *args.arch, *(base_of(a) for a in args.arch)}
        archs = [a for a in archs if a in wanted]

    print(
        f"# {path}: {len(strings)} strings, {len(batches)} batches (b*max|w| <= {args.batch_tokens}), V={V}"
    )
    print(f"# device={device} torch={torch.__version__} threads={torch.get_num_threads()}")
    print(f"# load average at start: {load_load()}")
    print(
        f"{'architecture':<12} {'d':>4} {'params':>8} {'steps':>5} {'s/step':>8} {'tokens/s':>10}"
        f" {'/Tf':>7} {'/base':>7}"
    )
    speed = {}
    for arch in archs:
        r = measure(arch, V, batches, device, args.seconds, args.min_steps, args.warmup)
        speed[arch] = r["tokens_per_s"]
        base = speed.get(base_of(arch))
        print(
            f"{arch:<12} {r['d']:>4} {r['params']:>8} {r['steps']:>5} {r['s_per_step']:>8.3f} "
            f"{speed[arch]:>10.0f} {speed[arch] / speed['Tf']:>7.3f} "
            f"{speed[arch] / base if base else float('nan'):>7.3f}",
            flush=True,
        )
    print(f"# load average at end: {load_load()}")
    for line in target_report(speed):
        print(line)
    return 0


def base_of(arch: str) -> str:
    """The plain model an architecture adds stacks to: Tf, RNN or LSTM."""
    return arch.split("+")[0]


# The project's speed targets: throughput at least this fraction of the base's (the
# plain model it adds stacks to), measured in the same run.
TARGETS = {"Tf+Nd": 1 / 2, "Tf+Nd+Nd": 1 / 3, "RNN+Nd": 0.3, "LSTM+Nd": 1 / 4}
SUP_TARGET = 1 / 1.5  # every Sup model within 1.5x of its base


def target_report(speed: dict[str, float]) -> list[str]:
    """'# target' lines for the measured architectures that have a target."""
    lines = []
    for arch, value in speed.items():
        want = TARGETS.get(arch, SUP_TARGET if "Sup" in arch else None)
        base = base_of(arch)
        if want is None or base not in speed:
            continue
        ratio = value / speed[base]
        verdict = "met" if ratio >= want else "NOT met"
        lines.append(f"# target {arch} >= {want:.3f} of {base}: {ratio:.3f} {verdict}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
