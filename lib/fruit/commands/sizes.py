"""``fruit sizes``: d and the parameter count of every architecture, for every task.

V is the number of content types of the task's training file when ``--data-dir``
holds ``<task>/train.tsv``, and otherwise the paper's V (counted from the published
files, docs/paper.md §10.5). A registered task the paper does not have needs its
training file (``--data-dir``): without it, ``--task`` says so in one line and the
listing of every task names it as left out. With ``--check`` every model is also built and its
trainable parameters counted, which must equal the SymPy expression.
"""

from __future__ import annotations

from pathlib import Path

from fruit.errors import MAX_TARGET_PARAMS, FruitError, check_integer, unknown_choice
from fruit.names import TARGET_PARAMS


def add_arguments(parser):
    parser.add_argument("--task", help="one task slug (default: every registered task)")
    parser.add_argument(
        "--data-dir", type=Path, help="folder with <task>/train.tsv to count V from"
    )
    parser.add_argument(
        "--target", type=int, default=TARGET_PARAMS, help=f"parameter target ({TARGET_PARAMS})"
    )
    parser.add_argument(
        "--check", action="store_true", help="also build each model and count its parameters"
    )


def vocab_size(task: str, data_dir: Path | None) -> tuple[int, str]:
    """(V, where it came from) for one task."""
    from fruit.models import PAPER_VOCAB_SIZES
    from fruit.tasks import Vocabulary, read_tsv

    no_data = FruitError(
        f"task {task} is not one of the paper's, so its V comes from its training file: give "
        f"--data-dir DIR with {task}/train.tsv (`fruit data --task {task} --out DIR` makes it)"
    )
    if data_dir is None:
        if task not in PAPER_VOCAB_SIZES:
            raise no_data
        return PAPER_VOCAB_SIZES[task], "paper"
    if not data_dir.is_dir():
        raise FruitError(f"--data-dir {str(data_dir)!r} is not a folder")
    train = data_dir / task / "train.tsv"
    if not train.exists():  # a data folder of some tasks only: the others keep the paper's V
        if task not in PAPER_VOCAB_SIZES:
            raise no_data
        return PAPER_VOCAB_SIZES[task], "paper"
    if not train.is_file():
        raise FruitError(f"{train} is not a file")
    examples = read_tsv(train)
    if not examples:
        raise FruitError(f"{train}: no examples, so no vocabulary")
    return Vocabulary.from_examples(examples).size, str(train)


def size_rows(vocab: int, target: int, check: bool = False) -> list[dict]:
    from fruit.models import ARCHITECTURES, build_model, choose_d, num_parameters, parameter_count

    rows = []
    for arch in ARCHITECTURES:
        d = choose_d(arch, vocab, target)
        row = {"architecture": arch, "d": d, "parameters": parameter_count(arch, d, vocab)}
        if check:
            built = num_parameters(build_model(arch, vocab, d=d))
            if built != row["parameters"]:
                raise FruitError(f"{arch}: built model has {built} parameters, SymPy says {row}")
        rows.append(row)
    return rows


def main(args) -> int:
    from fruit.models import PAPER_VOCAB_SIZES
    from fruit.tasks import TASKS

    check_integer("--target", args.target, 1, MAX_TARGET_PARAMS)
    if args.task is not None and args.task not in TASKS:
        raise unknown_choice("task", args.task, TASKS)
    tasks = [args.task] if args.task else list(TASKS)
    skipped = []
    printed = 0
    for task in tasks:
        try:
            vocab, source = vocab_size(task, args.data_dir)
        except FruitError:
            if args.task is not None or task in PAPER_VOCAB_SIZES:
                raise
            skipped.append(task)  # the listing of every task: named below, not an error
            continue
        i, printed = printed, printed + 1
        rows = size_rows(vocab, args.target, args.check)  # before printing: errors come alone
        if i:
            print()
        print(f"{task}  V={vocab} ({source})  target={args.target:,}")
        print(f"{'architecture':<12} {'d':>4} {'parameters':>11}")
        for row in rows:
            print(f"{row['architecture']:<12} {row['d']:>4} {row['parameters']:>11,}")
    if skipped:
        print(
            f"\nleft out: {', '.join(skipped)} (not the paper's tasks: their V comes from "
            "their training files, give --data-dir DIR with <task>/train.tsv)"
        )
    return 0
