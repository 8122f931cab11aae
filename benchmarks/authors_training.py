"""Train the plain transformer with the authors' own code (rau) on our data, evaluate it
with ours: an end-to-end check of how we train Tf.

benchmarks/authors_transformer.py shows that our Tf and rau's compute the same function
from the same weights. This script checks everything around it at once: rau's own data
preparation, batching, shuffling, initialisation, dropout, optimiser, learning-rate
schedule, checkpoints and early stopping, run as the authors ran them (`rau lm prepare`,
`rau lm train` with the flags of their train_and_evaluate_tuned_model.bash). The settings
(d, learning rate, tokens per batch, seeds) come from one of our run folders, so the
result sits next to that run's. When training has ended, rau's best parameters are copied
into our Tf (embedding rows mapped through the two vocabularies; the copy must give the
same logits as rau's model, else the script stops) and evaluated by
``fruit.evaluation.evaluate`` on the data folder's test, gen and gen.linear splits (for
the McCoy tasks also split by the subject's relative clause, ``fruit.breakdown``).

    RAU=/path/to/rau/src   # a rau checkout's src/ (the paper pins commit 4ff0c04)
    PY=/path/to/env/bin/python   # an environment with rau's dependencies and this project
    $PY benchmarks/authors_training.py --rau-src $RAU --run RUN_FOLDER --out OUT \
        [--data DATA_FOLDER] [--time-limit 2h]

RUN_FOLDER is one of our Tf runs (its config.json gives task, d, seeds, learning rate and
tokens per batch; DATA_FOLDER defaults to the run's data folder, which must hold the
task's train, dev, test, gen and gen.linear .tsv files). OUT receives rau's data (OUT/data)
and model (OUT/model) and, once trained, OUT/metrics.json. With --time-limit rau stops by
itself and the same command continues (rau's --continue) until training ends, so the run
advances in steps like a campaign. rau is never a dependency of this project; see
benchmarks/authors_transformer.py for an environment that has both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
RAU_RUNNER = (  # rau's CLI with --rau-src first on sys.path and any other rau removed
    "import os, sys; src = sys.argv.pop(1); "
    "sys.path[:] = [src] + [p for p in sys.path if not os.path.isdir(os.path.join(p, 'rau'))]; "
    "from rau.cli import main; sys.argv[0] = 'rau'; sys.exit(main())"
)


def rau(rau_src: Path, *args: str) -> int:
    command = [sys.executable, "-c", RAU_RUNNER, str(rau_src), *args]
    print("+ rau " + " ".join(args), flush=True)
    threads = str(torch.get_num_threads())  # as many as ours use (main sets them)
    env = {**os.environ, "PYTHONPATH": "", "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    return subprocess.call(command, env=env)


def prepare(rau_src: Path, data: Path, out: Path) -> None:
    """rau's language-modelling data, as the authors' download script lays it out: the
    TSV lines themselves (rau splits them on whitespace: source, marker, target)."""
    if (out / "main.prepared").is_file():
        return
    (out / "datasets" / "validation").mkdir(parents=True, exist_ok=True)
    (out / "main.tok").write_bytes((data / "train.tsv").read_bytes())
    (out / "datasets" / "validation" / "main.tok").write_bytes((data / "dev.tsv").read_bytes())
    code = rau(rau_src, "lm", "prepare", "--training-data", str(out),
               "--more-data", "validation", "--never-allow-unk")  # fmt: skip
    if code != 0:
        sys.exit(f"rau lm prepare failed with exit status {code}")


def train(rau_src: Path, config: dict, data: Path, model: Path, time_limit: str | None) -> bool:
    """rau lm train with our run's settings; True once training has ended."""
    if (model / "parameters.pt").is_file() and not (model / "checkpoint.pt").is_file():
        return True
    args = ["lm", "train", "--output", str(model), "--training-data", str(data)]
    if (model / "checkpoint.pt").is_file():
        if (model / "training.lock").is_file():  # rau stopped by a signal leaves it
            sys.exit(
                f"{model / 'training.lock'} exists: another rau is training this model, or one "
                "stopped by a signal left it; if none is running, delete it and run again"
            )
        args.append("--continue")
    else:
        d = config["d"]
        args += [
            "--architecture", "transformer", "--num-layers", "5", "--d-model", str(d),
            "--num-heads", "4", "--feedforward-size", str(2 * d),
            "--dropout", "0.1", "--init-scale", "0.1",
            "--max-epochs", str(config["max_epochs"]),
            "--max-tokens-per-batch", str(config["batch_tokens"]),
            "--optimizer", "Adam", "--initial-learning-rate", repr(config["learning_rate"]),
            "--gradient-clipping-threshold", str(config["clip_norm"]),
            "--early-stopping-patience", str(config["early_stop_patience"]),
            "--learning-rate-patience", str(config["lr_patience"] + 1),  # ours is PyTorch's
            "--learning-rate-decay-factor", str(config["lr_factor"]),
            "--examples-per-checkpoint", str(config["checkpoint_every"]),
            "--parameter-seed", str(config["parameter_seed"]),
            "--random-shuffling-seed", str(config["shuffle_seed"]),
            "--device", "cpu", "--no-progress",
        ]  # fmt: skip
    if time_limit:
        from fruit.commands.run import parse_duration

        args += ["--time-limit", str(int(parse_duration(time_limit)))]  # rau reads seconds
    code = rau(rau_src, *args)
    if code != 0 and (model / "checkpoint.pt").is_file():
        print("rau stopped before the end (time limit or signal); the same command continues")
        return False
    if code != 0:
        sys.exit(f"rau lm train failed with exit status {code}")
    return True


def authors_model(rau_src: Path, model_dir: Path):
    """rau's saved best model, the interface that runs it, and its content tokens
    (ids 0..V-1; EOS = V, BOS = V+1)."""
    sys.path[:] = [str(rau_src)] + [p for p in sys.path if not (Path(p) / "rau").is_dir()]
    from rau.tasks.language_modeling.model import LanguageModelingModelInterface
    from rau.tasks.language_modeling.vocabulary import load_vocabulary_data_from_file
    from rau.tools.torch.saver import ModelSaver

    interface = LanguageModelingModelInterface()
    interface.device = torch.device("cpu")
    saver = ModelSaver.read(interface.construct_model, model_dir, torch.device("cpu"))
    interface.on_saver_constructed(argparse.Namespace(), saver)
    vocabulary = load_vocabulary_data_from_file(model_dir.parent / "data" / "main.vocab")
    return saver.model.eval(), interface, list(vocabulary.tokens)


@torch.no_grad()
def into_ours(theirs, their_tokens: list[str], vocab, d: int):
    """Our Tf with rau's weights, embedding rows reordered from rau's ids to ours;
    also ``rows``: rau's id of each of our ids (content, EOS, BOS)."""
    sys.path.insert(0, str(HERE))
    from authors_transformer import weight_pairs

    from fruit.models import build_model

    if sorted(their_tokens) != list(vocab.types):
        sys.exit("rau's vocabulary and ours hold different words: not the same training file?")
    ours = build_model("Tf", vocab_size=vocab.size, d=d).eval()
    rows = [their_tokens.index(t) for t in vocab.types] + [vocab.size, vocab.size + 1]
    for mine, their in weight_pairs(ours, theirs):
        mine.copy_(their[rows] if mine is ours.embedding.weight else their)
    return ours, rows


@torch.no_grad()
def check_same_function(ours, theirs, interface, rows: list[int], strings) -> float:
    """Max |logit difference| at real positions between our copy and rau's model (both
    without dropout) on the same strings, given to each in its own ids."""
    from fruit.batching import pad

    mine = ours(pad(strings, 0, torch.device("cpu")))  # (B, n+1, V+1), our ids
    batch = [torch.tensor([rows[i] for i in w]) for w in strings]  # rau's ids, no BOS/EOS
    model_input, _ = interface.prepare_batch(batch, torch.device("cpu"))
    logits = interface.get_logits(theirs, model_input)  # (B, n+1, V+1), rau's ids
    logits = logits[:, :, rows[:-1]]  # columns in our id order (content, EOS)
    return max(
        (mine[b, : len(w) + 1] - logits[b, : len(w) + 1]).abs().max().item()
        for b, w in enumerate(strings)
    )


def evaluate(rau_src: Path, out: Path, data: Path, config: dict) -> dict:
    from fruit.evaluation import evaluate as evaluate_run
    from fruit.tasks import Vocabulary, get_task, read_tsv

    train_examples = read_tsv(data / "train.tsv")
    vocab = Vocabulary.from_examples(train_examples)
    theirs, interface, tokens = authors_model(rau_src, out / "model")
    ours, rows = into_ours(theirs, tokens, vocab, config["d"])
    strings = [vocab.encode(s + t) for s, t in train_examples[:64]]
    difference = check_same_function(ours, theirs, interface, rows, strings)
    print(f"rau's model and our copy of it: max |logit difference| {difference:.2e}")
    if difference > 1e-4:
        sys.exit("the copy does not compute rau's function: the weight mapping is wrong")
    test, gen, gen_linear = (read_tsv(data / f) for f in ("test.tsv", "gen.tsv", "gen.linear.tsv"))
    metrics = evaluate_run(
        ours, get_task(config["task"]), vocab, test=test, gen=gen, gen_linear=gen_linear,
        partial_on_test=False, device="cpu",
    )  # fmt: skip
    result = {"logit_difference": difference, **metrics}
    task = get_task(config["task"])
    if hasattr(task, "parse"):  # McCoy tasks: where the generalization means come from
        from fruit.breakdown import by_subject, format_rows

        result["by_subject"] = by_subject(ours, task, vocab, gen=gen, gen_linear=gen_linear)
        print(format_rows(result["by_subject"]))
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rau-src", type=Path, required=True, help="a rau checkout's src/")
    parser.add_argument("--run", type=Path, required=True, help="one of our Tf run folders")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, help="default: the run's data folder")
    parser.add_argument("--time-limit", help="e.g. 2h: rau pauses, the same command continues")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not (args.rau_src / "rau" / "cli.py").is_file():
        sys.exit(f"{args.rau_src} is not a rau checkout's src/ (no rau/cli.py)")
    config = json.loads((args.run / "config.json").read_text())
    if config["architecture"] != "Tf":
        sys.exit(f"{args.run} is a {config['architecture']} run; this check covers Tf only")
    data = args.data or Path(config["data_dir"]) / config["task"]
    prepare(args.rau_src, data, args.out / "data")
    if not train(args.rau_src, config, args.out / "data", args.out / "model", args.time_limit):
        return
    metrics = evaluate(args.rau_src, args.out, data, config)
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    ours = (
        json.loads((args.run / "metrics.json").read_text())
        if (args.run / "metrics.json").is_file()
        else None
    )
    for kind in ("full", "partial"):
        for key, value in metrics[kind].items():
            mine = "" if ours is None else f"   ours {ours[kind][key]}"
            print(f"{kind} {key}: rau {value}{mine}")


if __name__ == "__main__":
    main()
