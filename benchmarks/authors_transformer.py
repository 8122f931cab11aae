"""The plain transformer (Tf) against the authors' transformer (rau), step for step.

Both models get the paper's Tf hyperparameters (docs/paper.md §3): 5 pre-norm layers,
d from choose_d (68 for question formation), 4 heads, feed-forward size 2d, dropout
0.1, interleaved sinusoidal positions, BOS, tied embeddings with no output bias, a
final layer norm. Ours is ``build_model("Tf")``; theirs is what ``rau``'s language
model interface builds for ``--architecture transformer`` with the same sizes and
initialises with ``--init-scale 0.1``. Before timing, our weights are copied into
theirs and the two must give the same logits (dropout off), which checks that the
hyperparameters agree.

Batches are the question-formation strings of benchmarks/models.py (source + target,
b * max|w| <= 2048 tokens). One step of ours is ``fruit.training.objective.update``
(mean over strings of -log p(w EOS), backward, clipping at 10, Adam); one step of
theirs is rau's own ``run_parameter_update`` (its batch preparation, loss, clipping at
10 and its Adam). The two models take turns on the same batch (ours, theirs, theirs,
ours, ...) in one process, so that load from other processes falls on both alike; the
ratio of their times is what to read, the absolute numbers move with the load. Two
ratios are given: of the total times, and the median over batches of the per-batch
ratio; the target line (ours >= 1.25x theirs) uses the median, which a burst of load
during a few steps of one model does not move.

rau is never a dependency of this project: install it, with this project, into an
environment of its own, e.g.

    python -m venv /work/rau-env && /work/rau-env/bin/pip install <torch wheel>
    /work/rau-env/bin/pip install -e <rau checkout> && /work/rau-env/bin/pip install -e .
    /work/rau-env/bin/python benchmarks/authors_transformer.py [--seconds 60] [--threads 1]

Without rau, or without the data file, it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import statistics
import sys
import time
import types
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
TARGET = 1.25  # ours >= 1.25x the authors' tokens/s
STACK_SETTINGS = (  # construct_model's stack arguments, on rau's differentiable-stacks branch
    "stack_transformer_layers",
    "stack_rnn_controller",
    "stack_rnn_stack",
    "stack_rnn_connect_reading_to_output",
)


def models_benchmark():
    """benchmarks/models.py as a module (its batching, data location and load line)."""
    spec = importlib.util.spec_from_file_location("bench_models", HERE / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rau_missing() -> str | None:
    """Why rau cannot be imported, or None when it can."""
    try:
        import rau.tasks.language_modeling.model  # noqa: F401
        import rau.tasks.language_modeling.training_loop  # noqa: F401
    except ImportError as error:
        return str(error)
    return None


class Ours:
    """build_model("Tf") and one step of fruit.training.objective.update."""

    name = "ours"

    def __init__(self, vocab_size: int, d: int | None = None):
        from fruit.models import build_model

        self.model = build_model("Tf", vocab_size=vocab_size, d=d).train()
        from fruit.training.objective import adam

        self.optimizer = adam(self.model.parameters(), 1e-4)  # as training builds it
        self.config = types.SimpleNamespace(clip_norm=10.0)
        self.eos = vocab_size

    def convert(self, batch: list[list[int]]) -> list[list[int]]:
        return batch

    def step(self, batch: list[list[int]]) -> float:
        from fruit.training.objective import update

        return update(
            self.model, self.optimizer, batch, self.eos, torch.device("cpu"), self.config.clip_norm
        )


class Authors:
    """rau's transformer language model and one step of its training loop."""

    name = "authors"

    def __init__(self, vocab_size: int, d: int, max_length: int, generator: torch.Generator):
        from rau.tasks.language_modeling.model import LanguageModelingModelInterface
        from rau.tasks.language_modeling.training_loop import LanguageModelingTrainingLoop

        kwargs = dict(  # as rau's get_kwargs gives them for --architecture transformer
            architecture="transformer",
            num_layers=5,
            d_model=d,
            num_heads=4,
            feedforward_size=2 * d,
            dropout=0.1,
            hidden_units=None,
            input_vocabulary_size=vocab_size + 2,  # content, EOS, BOS
            output_vocabulary_size=vocab_size + 1,  # content, EOS
            bos_index=vocab_size + 1,
            eos_index=vocab_size,
        )
        interface = LanguageModelingModelInterface(use_init=True)
        interface.device = torch.device("cpu")
        # rau's differentiable-stacks branch (the paper's commits 1b80c20 and 4ff0c04) also
        # asks for the stack settings, which a plain transformer leaves unset
        accepted = inspect.signature(interface.construct_model).parameters
        for name in STACK_SETTINGS:
            if name in accepted:
                kwargs[name] = None
        model = interface.construct_model(**kwargs)
        interface.initialize(types.SimpleNamespace(init_scale=0.1), model, generator)
        self.saver = types.SimpleNamespace(model=model.train(), kwargs=kwargs)
        interface.on_saver_constructed(None, self.saver)
        interface._preallocate_positional_encodings(self.saver, max_length + 2)
        self.interface = interface
        self.model = model
        loop = dict(
            max_epochs=1,
            random_shuffling_seed=0,
            max_tokens_per_batch=2048,
            optimizer="Adam",
            initial_learning_rate=1e-4,
            weight_decay=None,
            label_smoothing_factor=0.0,
            gradient_clipping_threshold=10.0,
            no_early_stopping=True,
            early_stopping_patience=None,
            learning_rate_schedule_type="reduce-on-plateau",
            learning_rate_patience=None,
            learning_rate_decay_factor=None,
            learning_rate_warmup_examples=None,
            examples_per_checkpoint=1,
            every_n_examples=[],
        )
        # rau's main branch has no_early_stopping, the paper's commits do not (only one
        # step at a time is run here: early stopping never applies)
        accepted = inspect.signature(LanguageModelingTrainingLoop).parameters
        self.loop = LanguageModelingTrainingLoop(**{k: v for k, v in loop.items() if k in accepted})
        self.optimizer = self.loop.get_optimizer(model)

    def convert(self, batch: list[list[int]]) -> list[torch.Tensor]:
        return [torch.tensor(w) for w in batch]  # rau's examples are tensors

    def step(self, batch: list[torch.Tensor]) -> float:
        numerator, _, _ = self.loop.run_parameter_update(
            self.saver, self.interface, self.optimizer, batch
        )
        return numerator / len(batch)

    def logits(self, strings: list[list[int]]) -> torch.Tensor:
        """(B, n+1, V+1) over right-padded strings, as rau's training computes them."""
        batch = [torch.tensor(w) for w in strings]
        model_input, _ = self.interface.prepare_batch(batch, torch.device("cpu"))
        return self.interface.get_logits(self.model, model_input)


def weight_pairs(ours, theirs) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(our parameter, rau's parameter) for every parameter of our Tf: same shapes, same
    meaning (the embedding rows are in each model's own vocabulary order)."""
    from rau.models.transformer.input_layer import ScaledEmbeddingLayer

    (embedding,) = [m for m in theirs.modules() if isinstance(m, ScaledEmbeddingLayer)]
    (encoder,) = [m for m in theirs.modules() if isinstance(m, torch.nn.TransformerEncoder)]
    pairs = [(ours.embedding.weight, embedding.embedding_layer.embeddings)]
    for mine, their in zip(ours.layers, encoder.layers):
        pairs += standard_layer_pairs(mine, their)
    pairs += [
        (ours.final_norm.weight, encoder.norm.weight),
        (ours.final_norm.bias, encoder.norm.bias),
    ]
    return pairs


def standard_layer_pairs(mine, their) -> list:
    """(ours, rau's) parameters of one standard transformer layer: rau's is a
    ``torch.nn.TransformerEncoderLayer`` (also used by benchmarks/authors_nd.py)."""
    attention = their.self_attn
    return [
        (mine.norm1.weight, their.norm1.weight),
        (mine.norm1.bias, their.norm1.bias),
        (mine.attention.in_proj.weight, attention.in_proj_weight),
        (mine.attention.in_proj.bias, attention.in_proj_bias),
        (mine.attention.out_proj.weight, attention.out_proj.weight),
        (mine.attention.out_proj.bias, attention.out_proj.bias),
        (mine.norm2.weight, their.norm2.weight),
        (mine.norm2.bias, their.norm2.bias),
        (mine.ff.hidden.weight, their.linear1.weight),
        (mine.ff.hidden.bias, their.linear1.bias),
        (mine.ff.out.weight, their.linear2.weight),
        (mine.ff.out.bias, their.linear2.bias),
    ]


@torch.no_grad()
def copy_weights(ours, theirs) -> None:
    """Our Tf's parameters into rau's transformer."""
    for source, target in weight_pairs(ours, theirs):
        target.copy_(source)


def same_function(ours: Ours, authors: Authors, strings: list[list[int]]) -> float:
    """Max |logit difference| at real positions after copying our weights into theirs,
    dropout off (the copy is undone afterwards: theirs keeps its own initialisation)."""
    saved = {k: v.clone() for k, v in authors.model.state_dict().items()}
    copy_weights(ours.model, authors.model)
    ours.model.eval(), authors.model.eval()
    try:
        with torch.no_grad():
            from fruit.batching import pad

            mine = ours.model(pad(strings, 0, torch.device("cpu")))  # (B, n+1, V+1)
            theirs = authors.logits(strings)
        real = pad([w + [0] for w in strings], -1, torch.device("cpu")) >= 0  # (B, n+1)
        return float((mine - theirs).abs()[real].max())
    finally:
        authors.model.load_state_dict(saved)
        ours.model.train(), authors.model.train()


def interleave(contenders, batches, seconds: float, min_rounds: int, warmup: int, sync=None):
    """Rounds of one step of every contender on the same batch, taking turns (the
    order reversed every other round); returns per contender the (seconds, tokens) of
    its timed steps. ``sync`` (e.g. torch.cuda.synchronize) waits for the device before
    and after each timed step, so that work a step queued and did not wait for (our
    update reads the loss before backward) is not charged to the next contender."""
    sync = sync or (lambda: None)
    for batch in batches[:warmup]:
        for c in contenders:
            c.step(c.convert(batch))
    times = {c.name: [] for c in contenders}
    start, rounds = time.perf_counter(), 0
    order = batches[warmup:] + batches[:warmup]
    while True:
        batch = order[rounds % len(order)]
        tokens = sum(len(w) + 1 for w in batch)  # predicted positions, EOS included
        for c in contenders if rounds % 2 == 0 else contenders[::-1]:
            prepared = c.convert(batch)
            sync()
            t0 = time.perf_counter()
            c.step(prepared)
            sync()
            times[c.name].append((time.perf_counter() - t0, tokens))
        rounds += 1
        if rounds >= min_rounds and time.perf_counter() - start >= seconds:
            return times


def speeds(times: dict[str, list[tuple[float, int]]], reference: str) -> dict[str, tuple]:
    """Per contender: (steps, s/step, tokens/s, tokens/s over the reference's, median
    over batches of the reference's time over its own)."""
    ref = times[reference]
    ref_speed = sum(n for _, n in ref) / sum(t for t, _ in ref)
    out = {}
    for name, row in times.items():
        total = sum(t for t, _ in row)
        speed = sum(n for _, n in row) / total
        median = statistics.median(r / t for (t, _), (r, _) in zip(row, ref))
        out[name] = (len(row), total / len(row), speed, speed / ref_speed, median)
    return out


def report(times, reference: str = "authors") -> list[str]:
    lines = [
        f"{'model':<10} {'steps':>5} {'s/step':>8} {'tokens/s':>9} {'/' + reference:>9} {'median':>7}"
    ]
    for name, (steps, per_step, speed, ratio, median) in speeds(times, reference).items():
        lines.append(
            f"{name:<10} {steps:>5} {per_step:>8.4f} {speed:>9.0f} {ratio:>9.3f} {median:>7.3f}"
        )
    return lines


def profile(contenders, batches, steps: int, rows: int) -> None:
    """torch.profiler's top operators by self CPU time over ``steps`` steps of each."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    for c in contenders:
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for batch in batches[:steps]:
                c.step(c.convert(batch))
        print(f"# profile of {c.name}, {steps} steps")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench = models_benchmark()
    parser.add_argument("--data-dir", type=Path, default=bench.default_data_dir())
    parser.add_argument("--task", default="question-formation")
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-tokens", type=int, default=2048)
    parser.add_argument("--seconds", type=float, default=30.0, help="timed seconds, both models")
    parser.add_argument("--min-rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    parser.add_argument("--profile", type=int, default=0, help="then profile this many steps")
    args = parser.parse_args(argv)

    missing = rau_missing()
    if missing:
        print(f"benchmarks/authors_transformer.py: skipped: rau is not importable ({missing})")
        return 0
    path = args.data_dir / args.task / f"{args.split}.tsv"
    if not path.is_file():
        print(f"benchmarks/authors_transformer.py: skipped: {path} not found (set --data-dir)")
        return 0
    from fruit.allocator import tune_for_training
    from fruit.models import PAPER_VOCAB_SIZES, num_parameters
    from fruit.tasks import Vocabulary, read_tsv

    tune_for_training()  # malloc as in a training run (both models alike)
    if args.threads:
        torch.set_num_threads(args.threads)
    examples = read_tsv(path)
    vocab = Vocabulary.from_examples(examples)
    V = max(vocab.size, PAPER_VOCAB_SIZES.get(args.task, 0))
    strings = [vocab.encode(source + target) for source, target in examples]
    batches = bench.make_batches(strings, args.batch_tokens)

    torch.manual_seed(0)
    ours = Ours(V)
    authors = Authors(V, ours.model.d, max(map(len, strings)), torch.Generator().manual_seed(0))
    ours_params, their_params = num_parameters(ours.model), num_parameters(authors.model)

    print(
        f"# {path}: {len(strings)} strings, {len(batches)} batches (b*max|w| <= {args.batch_tokens}), V={V}"
    )
    print(f"# torch={torch.__version__} threads={torch.get_num_threads()} d={ours.model.d}")
    print(f"# parameters: ours {ours_params}, authors {their_params}")
    print(f"# same function: max |logit difference| {same_function(ours, authors, batches[0]):.2e}")
    print(f"# load average at start: {bench.load_load()}", flush=True)
    times = interleave([ours, authors], batches, args.seconds, args.min_rounds, args.warmup)
    print(f"# load average at end: {bench.load_load()}")
    print("\n".join(report(times)))
    _, _, _, total, median = speeds(times, "authors")["ours"]
    verdict = "met" if median >= TARGET else "NOT met"
    print(
        f"# target Tf >= {TARGET}x authors' Tf: {median:.3f} (median over batches;"
        f" total time {total:.3f}) {verdict}"
    )
    if args.profile:
        profile([ours, authors], batches, args.profile, rows=25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
