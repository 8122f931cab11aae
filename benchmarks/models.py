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
        [--only] [--rounds R] [--stepped] [--clock wall|cpu]

--only times just the --arch architectures (no ratios); --rounds R interleaves the architectures (R slices of --seconds/R each), so that a ratio
compares throughputs measured under the same load; --stepped also times each stack RNN's
stepped pass (the path without the fused pass) as ARCH/stepped; --clock cpu counts the
process's CPU time instead of wall-clock seconds.

Runs on one CPU thread unless --threads says otherwise. Exits 0 with a message when
the data file is absent.
"""

from __future__ import annotations

import argparse
import functools
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


class Meter:
    """One architecture's model, optimiser and batches, timed in one or more slices."""

    def __init__(
        self, arch, vocab_size, batches, device, warmup, stepped=False, clock=time.perf_counter,
        step=None,
    ):  # fmt: skip
        from fruit.models import build_model, num_parameters

        torch.manual_seed(0)
        self.model = build_model(arch, vocab_size=vocab_size).to(device).train()
        if stepped:  # a hooked head makes a stack RNN take its stepped pass
            self.model.stacks[0].actions.register_forward_hook(lambda module, args, output: output)
        self.d, self.params, self.vocab_size = self.model.d, num_parameters(self.model), vocab_size
        from fruit.training.objective import adam

        self.optimizer = adam(self.model.parameters(), 1e-4)  # as training builds it
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        warm = batches[:warmup]
        self.step_used, self.step_note = step or "today", None
        if step is None:  # this benchmark's own step (as `fruit.training.objective.update`)
            self.step = functools.partial(train_step, self.model, self.optimizer, eos=vocab_size)
        else:  # one of `fruit.training.steps` (plain, eager, graphs), as the model allows
            from fruit.training.steps import stepper, usable

            self.step_used, self.step_note = usable(step, self.model, device)
            step = self.step_used
            self.step = stepper(step, self.model, self.optimizer, vocab_size, device, 10.0)
            # graphs are made the first time a shape comes: one step of every shape first
            warm = list({(len(b), max(map(len, b))): b for b in batches}.values()) + warm
        for batch in warm:
            self.step(batch)
        self.order, self.next = batches[warmup:] + batches[:warmup], 0
        self.tokens, self.steps, self.elapsed = 0, 0, 0.0
        self.clock = clock

    def run(self, seconds: float, min_steps: int) -> None:
        """Training steps for at least `seconds` and `min_steps`."""
        self.sync()
        steps, start = 0, self.clock()
        while steps < min_steps or self.clock() - start < seconds:
            batch = self.order[self.next % len(self.order)]
            self.next += 1
            self.step(batch)
            self.sync()
            self.tokens += sum(len(w) + 1 for w in batch)  # predicted positions, EOS included
            steps += 1
        self.elapsed += self.clock() - start
        self.steps += steps


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
    parser.add_argument(
        "--only",
        action="store_true",
        help="time only the --arch architectures, without Tf and their bases (no ratios)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="interleave the architectures: R rounds of --seconds/R each, so that their "
        "ratios see the same load on a shared machine",
    )
    parser.add_argument(
        "--stepped",
        action="store_true",
        help="also time each stack RNN's stepped pass (autograd through the step APIs) "
        "as ARCH/stepped, interleaved with its fused pass",
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="seconds of the wall clock, or of this process's CPU time (less sensitive to "
        "other processes on a shared machine)",
    )
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
    from fruit.allocator import tune_for_training
    from fruit.device import resolve_device
    from fruit.tasks import Vocabulary, read_tsv

    tune_for_training()  # malloc as in a training run
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
        wanted = (
            set(args.arch) if args.only else {"Tf", *args.arch, *(base_of(a) for a in args.arch)}
        )
        archs = [a for a in archs if a in wanted]

    print(
        f"# {path}: {len(strings)} strings, {len(batches)} batches (b*max|w| <= {args.batch_tokens}), V={V}"
    )
    print(
        f"# device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
        f"clock={args.clock} rounds={args.rounds}"
    )
    print(f"# load average at start: {load_load()}")
    print(
        f"{'architecture':<12} {'d':>4} {'params':>8} {'steps':>5} {'s/step':>8} {'tokens/s':>10}"
        f" {'/Tf':>7} {'/base':>7}"
    )
    names = list(archs)
    if args.stepped:  # the stack RNNs again, on their stepped pass
        names += [f"{a}/stepped" for a in archs if a.startswith(("RNN+", "LSTM+"))]
    meters = {}
    for _ in range(max(args.rounds, 1)):
        for name in names:
            if name not in meters:
                arch, _, variant = name.partition("/")
                clock = time.process_time if args.clock == "cpu" else time.perf_counter
                meters[name] = Meter(
                    arch, V, batches, device, args.warmup, variant == "stepped", clock
                )
            meters[name].run(args.seconds / max(args.rounds, 1), args.min_steps)
    speed = {}
    for name, meter in meters.items():
        speed[name] = meter.tokens / meter.elapsed
        base = speed.get(base_of(name))
        print(
            f"{name:<12} {meter.d:>4} {meter.params:>8} {meter.steps:>5} "
            f"{meter.elapsed / meter.steps:>8.3f} {speed[name]:>10.0f} "
            f"{speed[name] / speed['Tf'] if 'Tf' in speed else float('nan'):>7.3f} "
            f"{speed[name] / base if base else float('nan'):>7.3f}",
            flush=True,
        )
    print(f"# load average at end: {load_load()}")
    for line in target_report(speed):
        print(line)
    return 0


def base_of(arch: str) -> str:
    """The plain model an architecture adds stacks to: Tf, RNN or LSTM."""
    return arch.split("/")[0].split("+")[0]


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
