"""A run's data: preparing a task's data folder, and reading a run's splits from it
(docs/tasks.md, docs/contracts.md §1).

``data_dir`` (default ``data/<profile>``) holds ``<task>/{train,dev,test,gen}.tsv``.
With ``generate_data`` true, ``prepare_data`` -- the same function ``fruit run`` uses --
generates an absent folder with seed ``data_seed`` (default
``derive_seed(profile.data_seed, task)``), so ``fruit train --profile P`` and ``fruit run
--profile P`` read the same files; otherwise a missing train.tsv is a one-line error
naming ``--generate-data`` (never a command that would make other data). A folder with
some files but no train.tsv is never overwritten. Every line a run reads is checked
before its first batch (``read_task_data``: format, markers, vocabulary), and a folder
the sweep finds is checked once before any run starts.

This module needs no torch and no model code: the sweep calls ``prepare_data`` before
any run starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from fruit.errors import FruitError, check_split_size, unknown_choice
from fruit.io import (
    atomic_write_json,
    check_folder,
    read_json_record,
    remove_leftovers,
    writer_tag,
)
from fruit.profiles import DATA_SOURCES


class DataSettings(Protocol):
    """What this module reads of a run's settings: a resolved ``RunConfig``
    (``fruit.training.config``, which imports this module, so it is not imported here)."""

    task: str
    data_dir: str
    generate_data: bool
    data_seed: int
    data_source: str
    batch_tokens: int


# Generated train.tsv files have at least this many lines: train.tsv defines the
# vocabulary, and a few hundred sentences may miss a word type (a run uses the first
# train_size lines, so the sizes a run sees are still the profile's).
MIN_GENERATED_TRAIN = 1_000
DATA_MARKER = "data.json"  # written last by prepare_data: {task, seed, sizes}
# split -> the RunConfig field that holds its size
SPLIT_FIELDS = {"train": "train_size", "dev": "dev_size", "test": "test_size", "gen": "gen_size"}


@dataclass
class TaskData:
    train: list
    dev: list
    test: list
    gen: list  # (source, hierarchical target)
    gen_linear: list  # (source, linear-rule target), same sources as gen
    vocab: object


def data_digest(data: TaskData) -> str:
    """SHA-256 of the examples a run reads (every split, in order): the identity of its
    data wherever the folder lies (``fruit.training.resume``: a run folder carried to
    another path goes on only with the same data)."""
    splits = [data.train, data.dev, data.test, data.gen, data.gen_linear]
    return hashlib.sha256(json.dumps(splits).encode("utf-8")).hexdigest()


def _first(examples, n, path):
    if n is not None and len(examples) < n:
        raise FruitError(
            f"{path} has {len(examples)} examples but this run needs {n}; "
            "ask for fewer, or use a data folder made for these sizes"
        )
    return examples if n is None else examples[:n]


def published_folder(explicit=None) -> Path | None:
    """Where the published files are read from: ``explicit``, else ``$FRUIT_DATASETS``,
    else None (downloaded from the pinned commits, ``fruit.tasks.official``)."""
    if explicit:
        return Path(explicit)
    chosen = os.environ.get("FRUIT_DATASETS")
    if chosen and not Path(chosen).is_dir():
        raise FruitError(
            f"FRUIT_DATASETS={chosen!r} is not a folder (of <task>/{{dev,test,gen}}.tsv)"
        )
    return Path(chosen) if chosen else None


def prepare_data(
    data_dir,
    task_slug: str,
    seed: int,
    sizes: dict,
    source: str = "generated",
    published_dir=None,
) -> str:
    """Make ``data_dir/<task>/{train,dev,test,gen,gen.linear}.tsv`` unless already there.

    Used by ``fruit run`` (once per task) and by a run with ``generate_data``.
    ``source`` is the profile's ``[data] source``:

    * ``"generated"``: ``get_task(task).generate(seed, sizes)`` with at least
      ``MIN_GENERATED_TRAIN`` training lines;
    * ``"published"``: the published dev/test/gen files (from ``published_folder(
      published_dir)``, else downloaded), checked and fixed by ``fruit.tasks.official``,
      with a generated train split (seed ``seed``) that avoids all their sentences.

    The folder is made whole in a temporary sibling and renamed into place, with
    ``data.json`` (task, seed, sizes, source) inside, so an interrupted preparation
    leaves nothing behind and the next call makes exactly the same files. A folder whose
    record has another seed or source, or fewer lines than asked, is an error (a run
    reads the first lines of each split). A folder holding the four splits but no
    ``data.json`` is taken as user-provided and used as it is; one with some files but
    not all four splits is never overwritten. Either way the folder is checked as a run
    will read it (``read_task_data``: format, markers, vocabulary, sizes), so a sweep
    stops here, once, naming the file and line. Returns "generated", "found", or for
    a folder without data.json "found without data.json (...)".
    """
    from fruit.tasks import SPLITS, get_task

    if source not in DATA_SOURCES:
        raise unknown_choice("data source", source, DATA_SOURCES)
    root, task = Path(data_dir), get_task(task_slug)
    folder = root / task_slug
    check_folder(folder, "the data folder")  # not a file where it or a folder above goes
    remove_leftovers(root, (f".{task_slug}.*.partial",))  # what a killed preparation left
    _no_folder_for_a_split(folder, SPLITS)
    requested = {split: check_split_size(split, sizes[split]) for split in SPLITS}
    sizes = {**requested, "train": max(requested["train"], MIN_GENERATED_TRAIN)}
    have_splits = all((folder / f"{split}.tsv").is_file() for split in SPLITS)
    marker = folder / DATA_MARKER
    found = read_json_record(marker, f"remove the folder {folder} to have it made again")
    if found is not None:
        short = [s for s in SPLITS if found.get("sizes", {}).get(s, 0) < sizes[s]]
        if (
            found.get("task") != task_slug
            or found.get("seed") != seed
            or found.get("source", "generated") != source
            or short
        ):
            raise FruitError(
                f"{folder} holds data made with {found}, but this run needs {source} data "
                f"with seed {seed} and sizes {sizes}; use another data folder or remove that one"
            )
        if have_splits:
            check_task_folder(folder, task, requested)
            return "found"
    elif have_splits:
        check_task_folder(folder, task, requested)  # a user's own files: checked once here
        return (
            f"found without {DATA_MARKER} (not made by fruit: the runs record data_source "
            f'"{UNRECORDED}" and no data seed)'
        )
    if folder.is_dir() and any(folder.iterdir()):
        what = (
            "train.tsv is missing" if not (folder / "train.tsv").is_file() else "splits are missing"
        )
        raise FruitError(
            f"no complete data for {task_slug}: {folder} holds some files but its {what}; "
            f"remove that folder to have it made again (a partly filled folder is never overwritten)"
        )
    if source == "published":
        published_folder(published_dir)  # a bad FRUIT_DATASETS: said before any folder is made
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{task_slug}.{writer_tag()}", suffix=".partial", dir=root)
    )
    try:
        record = _make_data(staging, task, seed, sizes, source, published_dir)
        atomic_write_json(staging / task_slug / DATA_MARKER, record)
        if folder.is_dir():
            folder.rmdir()  # empty (checked above)
        os.replace(staging / task_slug, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # e.g. a dev/test/gen word that so small a train.tsv lacks: said once, here, not by
    # every run of a sweep
    check_task_folder(folder, task, requested)
    return "generated"


def _make_data(out: Path, task, seed: int, sizes: dict, source: str, published_dir) -> dict:
    """Write one task's splits into ``out/<task>/``; return its data.json record."""
    from fruit.tasks.splits import write_task

    record = {"task": task.slug, "seed": seed, "sizes": sizes, "source": source}
    if source == "generated":
        write_task(out, task, task.generate(seed=seed, sizes=sizes))
        return record
    from fruit.tasks import read_tsv
    from fruit.tasks.official import import_official

    where = published_folder(published_dir)
    import_official(
        out, [task.slug], where, seed, sizes["train"], log=lambda _: None, published_train=False,
        offline_hint="give a folder of local copies with --published DIR or FRUIT_DATASETS",
    )  # fmt: skip
    counts = {s: len(read_tsv(out / task.slug / f"{s}.tsv")) for s in sizes}
    short = [f"{s} has {counts[s]} lines, {sizes[s]} asked" for s in sizes if counts[s] < sizes[s]]
    if short:
        raise FruitError(f"the published {task.slug} files are too small: {'; '.join(short)}")
    record["sizes"] = counts
    record["published"] = str(where.resolve()) if where else "downloaded from the pinned commits"
    return record


# data_source a run records when its data folder has no data.json: files fruit did not
# make (a user's own, or copied without their record), whose seed cannot be known
UNRECORDED = "unrecorded"


def data_origin(data_dir, task_slug: str) -> dict:
    """``data_seed`` and ``data_source`` as the data folder's ``data.json`` records them
    (what a run's config.json records, rather than what its settings asked for); without
    one, no seed and ``UNRECORDED``, so that no record claims a seed it did not use."""
    folder = Path(data_dir) / task_slug
    found = read_json_record(
        folder / DATA_MARKER, f"remove the folder {folder} to have it made again"
    )
    if found is None:
        return {"data_seed": None, "data_source": UNRECORDED}
    return {"data_seed": found.get("seed"), "data_source": found.get("source", "generated")}


def load_data(config: DataSettings) -> TaskData:
    """The run's splits from ``data_dir/<task>/`` (generating them if allowed and absent);
    ``config`` is a resolved ``RunConfig`` (``fruit.training.resolve_config``)."""
    from fruit.tasks import get_task

    task = get_task(config.task)
    root = Path(config.data_dir)
    folder = root / config.task
    if config.generate_data:
        sizes = {s: getattr(config, f) for s, f in SPLIT_FIELDS.items()}
        prepare_data(root, config.task, config.data_seed, sizes, config.data_source)
    _no_folder_for_a_split(folder, SPLIT_FIELDS)
    if not (folder / "train.tsv").is_file():
        advice = (
            "add --generate-data (generate_data=True in the notebook) to make the profile's "
            "data there, as fruit run does"
        )
        if root.exists() and not root.is_dir():
            raise FruitError(
                f"data directory {root} is a file, not a folder; give the folder that holds "
                f"{config.task}/train.tsv"
            )
        if not root.is_dir():
            raise FruitError(f"data directory {root} does not exist; {advice}")
        if folder.is_dir() and any(folder.iterdir()):
            raise FruitError(
                f"no complete data for {config.task}: {folder} holds some files but no "
                "train.tsv; remove that folder and make it again (--generate-data)"
            )
        raise FruitError(
            f"no training data for {config.task}: {folder / 'train.tsv'} is missing; {advice}"
        )
    sizes = {split: getattr(config, field) for split, field in SPLIT_FIELDS.items()}
    return read_task_data(folder, task, sizes)


def _no_folder_for_a_split(folder: Path, splits) -> None:
    """A folder where a split's file goes is said as such, not as a missing file."""
    for split in splits:
        path = folder / f"{split}.tsv"
        if path.is_dir():
            raise FruitError(f"{path} is a folder, not a file: move it away or remove it")


def check_task_folder(folder: Path, task, sizes: dict) -> None:
    """Check a task's data folder as a run would read it (``read_task_data``), once,
    before any run starts: a FruitError names the file and line of the first problem."""
    read_task_data(folder, task, sizes)


def read_task_data(folder: Path, task, sizes: dict) -> TaskData:
    """The first ``sizes[split]`` examples of each split in ``folder`` (None: all), after
    checking every line: the TSV format (``fruit.tasks.tsv``), a marker of the task at
    the end of every source, and every dev/test/gen token in the vocabulary of
    train.tsv -- so bad data stops a run before its first batch, naming file and line."""
    from fruit.tasks import Vocabulary, read_tsv
    from fruit.tasks.tsv import check_sources

    markers = (task.identity_marker, task.transform_marker)

    def read(split: str) -> tuple[list, Path]:
        path = folder / f"{split}.tsv"
        examples = read_tsv(path)
        check_sources(examples, markers, str(path))
        return examples, path

    full_train, train_path = read("train")
    vocab = Vocabulary.from_examples(full_train)  # train.tsv defines the vocabulary
    data = {"train": _first(full_train, sizes["train"], train_path)}
    for split in ("dev", "test", "gen"):
        examples, path = read(split)
        data[split] = _first(examples, sizes[split], path)
        vocab.check_known(data[split], str(path))
    linear_path = folder / "gen.linear.tsv"
    if linear_path.is_file():
        gen_linear = read("gen.linear")[0][: len(data["gen"])]
        if [s for s, _ in gen_linear] != [s for s, _ in data["gen"]]:
            raise FruitError(f"{linear_path}: sources differ from {folder / 'gen.tsv'}")
        vocab.check_known(gen_linear, str(linear_path))
    else:
        gen_linear = [(s, task.linear(s[:-1])) for s, _ in data["gen"]]
        vocab.check_known(gen_linear, f"{folder / 'gen.tsv'} (its linear-rule targets)")
    return TaskData(**data, gen_linear=gen_linear, vocab=vocab)


def check_batch_tokens(config: DataSettings, train: list, dev: list) -> None:
    """The token budget B holds the longest training and validation string: a batch is
    at most B tokens (docs/paper.md §11), so a smaller B makes no sense."""
    for split, strings in (("train", train), ("dev", dev)):
        if not strings:
            continue
        longest = max(range(len(strings)), key=lambda i: len(strings[i]))
        if len(strings[longest]) > config.batch_tokens:
            where = Path(config.data_dir) / config.task / f"{split}.tsv"
            raise FruitError(
                f"batch_tokens {config.batch_tokens} is below the longest {split} example "
                f"({len(strings[longest])} tokens, source and target, at {where}:{longest + 1}); "
                f"it must be at least {len(strings[longest])}"
            )
