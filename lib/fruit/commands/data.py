"""``fruit data``: generate the seven tasks' splits, take the published files, or compare.

fruit data --task all --out data [--seed 1] [--train-size 100000 ...]
fruit data --official [--from DIR] --out data [--task all]
fruit data --compare data [--published DIR]
"""

from __future__ import annotations

import time
from pathlib import Path

from fruit.errors import MAX_SEED, MAX_SPLIT_SIZE, FruitError, check_integer, unknown_choice
from fruit.tasks import PAPER_SIZES, PAPER_TASKS, TASKS


def add_arguments(parser):
    parser.add_argument(
        "--task", default="all", help=f"a task slug or 'all' (default); one of: {', '.join(TASKS)}"
    )
    parser.add_argument("--out", default="data", help="output folder (default: data)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    for split, size in PAPER_SIZES.items():
        parser.add_argument(
            f"--{split}-size", type=int, default=size, metavar="N", help=f"(default: {size})"
        )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--official",
        action="store_true",
        help="take the published files (downloaded from the pinned commits, or --from DIR)",
    )
    mode.add_argument(
        "--compare",
        metavar="DIR",
        help="print the statistics of DIR's train/test/gen splits next to the published ones",
    )
    parser.add_argument(
        "--from",
        dest="from_dir",
        metavar="DIR",
        help="with --official: local copies in DIR/<task>/{train,dev,test,gen}.tsv",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the split files already in --out/<task>/ (by default a folder that "
        "holds any is refused, so that no split of yours or of a sweep is overwritten)",
    )
    parser.add_argument(
        "--published",
        metavar="DIR",
        help="with --compare: compute the published side from DIR/<task>/{train,test,gen}.tsv "
        "(train where DIR has it, else test), and also compare whole token, bigram and length "
        "distributions",
    )


def _slugs(task: str, published: bool = False) -> tuple[str, ...]:
    """The tasks of ``--task``; with ``published`` (--official), the paper's only:
    published files exist for those. ``--compare`` with a named task takes any registered
    one (one the paper does not have gets its own statistics, with nothing published
    beside them); ``--compare --task all`` lists the paper's seven (``main``)."""
    known = PAPER_TASKS if published else TASKS
    if task == "all":
        return known
    if task not in known:
        what = "task with published data" if published else "task"
        raise unknown_choice(what, task, (*known, "all"))
    return (task,)


def check_arguments(args, slugs=()) -> None:
    """Every number in its range, and every output folder writable, before anything is
    read or written."""
    from fruit.io import check_folder

    check_integer("--seed", args.seed, 0, MAX_SEED)
    if not args.compare:
        check_folder(args.out, "--out")
        for slug in slugs:  # a file where a task's folder goes would stop us half-way
            if (Path(args.out) / slug).exists() and not (Path(args.out) / slug).is_dir():
                raise FruitError(f"{Path(args.out) / slug} is a file, not a folder")
    for split in PAPER_SIZES:
        check_integer(f"--{split}-size", getattr(args, f"{split}_size"), 1, MAX_SPLIT_SIZE)


SPLIT_FILES = ("train.tsv", "dev.tsv", "test.tsv", "gen.tsv", "gen.linear.tsv", "data.json")


def check_not_overwriting(out, slugs, force: bool) -> None:
    """Refuse, before anything is written, to write into a task folder that already holds
    split files (made by you, by another call, or by a sweep), unless ``force``."""
    if force:
        return
    for slug in slugs:
        folder = Path(out) / slug
        there = [name for name in SPLIT_FILES if (folder / name).exists()]
        if there:
            raise FruitError(
                f"{folder} already holds {', '.join(there)}: not replaced (they may be your "
                "own files or a sweep's data); give another --out, or --force to replace them"
            )


def write_data_record(folder: Path, slug: str, seed: int, sizes: dict, source: str) -> None:
    """``data.json`` as ``fruit.training.data.prepare_data`` writes it: a sweep or a run
    that finds the folder checks its seed, sizes and source against its own, and never
    records a seed the data were not made with."""
    from fruit.io import atomic_write_json

    record = {"task": slug, "seed": seed, "sizes": dict(sizes), "source": source}
    atomic_write_json(Path(folder) / "data.json", record)


def main(args) -> int:
    slugs = _slugs(args.task, published=bool(args.official))
    if args.compare and args.task == "all":
        slugs = PAPER_TASKS  # the listing of every task: the ones with published statistics
    check_arguments(args, slugs)
    if args.from_dir and not args.official:
        raise FruitError("--from DIR goes with --official (take the published files from DIR)")
    if args.published and not args.compare:
        raise FruitError("--published DIR goes with --compare DIR")
    for option, folder in (("--from", args.from_dir), ("--compare", args.compare),
                           ("--published", args.published)):  # fmt: skip
        if folder and not Path(folder).is_dir():  # read from: it must be there
            what = "is a file, not a folder" if Path(folder).exists() else "does not exist"
            raise FruitError(f"{option} {folder} {what}")
    if args.compare:
        from fruit.tasks import statistics

        rows = statistics.compare(args.compare, slugs, args.published)
        if not rows:
            raise FruitError(f"{args.compare}: no <task>/test.tsv found to compare")
        print(statistics.format_table(rows))
        if args.published:
            distances = statistics.compare_distributions(args.compare, args.published, slugs)
            print("\nTotal variation distance to the published split, and between two random")
            print("halves of it (sampling noise at the same size):\n")
            print(statistics.format_distances(distances))
        if any("~" in r["split"] for r in rows):
            print(f"\n{statistics.LEGEND}")
        return 0 if all(r["ok"] is not False for r in rows) else 1
    check_not_overwriting(args.out, slugs, args.force)
    if args.official:
        from fruit.tasks import read_tsv
        from fruit.tasks.official import import_official

        import_official(args.out, slugs, args.from_dir, args.seed, args.train_size)
        for slug in slugs:  # what a sweep finding the folder checks (fruit.training.data)
            folder = Path(args.out) / slug
            counts = {s: len(read_tsv(folder / f"{s}.tsv")) for s in PAPER_SIZES}
            write_data_record(folder, slug, args.seed, counts, "published")
        return 0
    from fruit.tasks.splits import generate_task

    sizes = {split: getattr(args, f"{split}_size") for split in PAPER_SIZES}
    start = time.perf_counter()
    counts = ", ".join(f"{split} {n:,}" for split, n in sizes.items())
    for slug in slugs:
        t = time.perf_counter()
        # a task takes seconds at the paper's sizes, a minute or more at a million lines:
        # say what is being made before it starts
        print(f"{slug}: generating {counts} ...", flush=True)
        folder = generate_task(args.out, slug, args.seed, sizes)
        write_data_record(folder, slug, args.seed, sizes, "generated")
        print(f"{slug}: wrote {folder} ({time.perf_counter() - t:.1f} s)")
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0
