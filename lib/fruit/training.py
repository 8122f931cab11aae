"""Training one run into a run folder (docs/paper.md §11-§13, docs/contracts.md §5).

The objective is language modelling on w = x y (source then target, no
separator): the loss of a batch is the mean over its strings of -log p(w EOS),
in nats. Adam with PyTorch defaults, gradients clipped to a global L2 norm of
10. Every ``checkpoint_every`` training examples (the count carries over
epochs): validation cross-entropy per token (EOS included), a reduce-on-plateau
step of the learning rate (factor 0.5 after 2 checkpoints without strict
improvement), early stopping after 3, and ``best.pt`` when the score improved.
Evaluation uses the best parameters.

A run folder (``Run.dir``) holds config.json, log.csv, checkpoint.pt, best.pt
and, written atomically and last, metrics.json. A folder without metrics.json is
unfinished; building a ``Run`` on it again resumes exactly from checkpoint.pt
(parameters, optimiser, scheduler, RNG states, counters, position in the epoch).

Seeds: ``seed`` names the run; ``parameter_seed`` (initialisation and dropout,
through ``torch.manual_seed``) and ``shuffle_seed`` (batching) are derived from
it unless given; ``sampling_seed`` (evaluation samples) is 123 by default. All
are written to config.json.

Data: ``data_dir`` (default ``data/<profile>``) holds ``<task>/{train,dev,test,gen}.tsv``.
With ``generate_data`` true, ``prepare_data`` -- the same function ``fruit run`` uses --
generates an absent folder with seed ``data_seed`` (default
``derive_seed(profile.data_seed, task)``), so ``fruit train --profile P`` and ``fruit run
--profile P`` read the same files; otherwise a missing train.tsv is a one-line error
naming ``fruit data``. A folder with some files but no train.tsv is never overwritten.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from fruit import evaluation
from fruit.batching import evaluation_batches, pad, training_batches
from fruit.device import resolve_device
from fruit.errors import FruitError, unknown_choice
from fruit.io import (
    PAUSED_MARKER,
    atomic_torch_save,
    atomic_write_json,
    atomic_write_text,
    read_metrics,
)
from fruit.profiles import PHASES, derive_seed, is_profile_path, load_profile, run_folder
from fruit.provenance import provenance

LOG_COLUMNS = (
    "examples_seen",
    "epoch",
    "learning_rate",
    "train_loss",
    "validation_cross_entropy",
    "seconds",
)
# Generated train.tsv files have at least this many lines: train.tsv defines the
# vocabulary, and a few hundred sentences may miss a word type (a run uses the first
# train_size lines, so the sizes a run sees are still the profile's).
MIN_GENERATED_TRAIN = 1_000
DATA_MARKER = "data.json"  # written last by prepare_data: {task, seed, sizes}
SPLIT_FIELDS = {"train": "train_size", "dev": "dev_size", "test": "test_size", "gen": "gen_size"}
# RunConfig fields that, when None, come from the profile (fruit.profiles)
PROFILE_FIELDS = (
    *SPLIT_FIELDS.values(),
    "checkpoint_every",
    "max_epochs",
    "data_dir",
    "data_seed",
    "data_source",
)


@dataclass
class RunConfig:
    """Every setting of one run. ``None`` means "from the profile" or "derived"."""

    task: str
    architecture: str
    phase: str = "final"
    index: int = 0
    seed: int = 0
    profile: str = "smoke"  # a shipped profile's name or the path of a .toml (fruit.profiles)
    learning_rate: float = 3e-4
    batch_tokens: int = 1024
    # sizes (None: the profile's); a split's first N lines are used
    train_size: int | None = None
    dev_size: int | None = None
    test_size: int | None = None
    gen_size: int | None = None
    checkpoint_every: int | None = None
    max_epochs: int | None = None
    # model
    target_params: int = 200_000
    d: int | None = None
    model_options: dict = field(default_factory=dict)
    # data and device (None: data/<profile>, derive_seed(profile.data_seed, task))
    data_dir: str | None = None
    generate_data: bool = False
    data_seed: int | None = None
    data_source: str | None = None  # "generated" or "published" dev/test/gen (fruit.profiles)
    device: str = "auto"
    # seeds (None: derived from ``seed``)
    parameter_seed: int | None = None
    shuffle_seed: int | None = None
    sampling_seed: int = evaluation.SAMPLING_SEED
    # optimisation (docs/paper.md §11)
    clip_norm: float = 10.0
    lr_patience: int = 1  # PyTorch's patience; rau's --learning-rate-patience 2
    lr_factor: float = 0.5
    early_stop_patience: int = 3
    # evaluation (docs/paper.md §13)
    num_samples: int = evaluation.NUM_SAMPLES
    eval_batch_tokens: int = evaluation.EVAL_BATCH_TOKENS
    sample_prompt_tokens: int = evaluation.SAMPLE_PROMPT_TOKENS
    partial_on_test: bool = True

    @classmethod
    def from_parameters(cls, parameters) -> RunConfig:
        """A config from a mapping (papermill parameters, a profile's ``[training]``):
        every key that names a field is used, converted to the field's type (None stays
        None); other keys are ignored."""
        casts = {"int": int, "float": float, "bool": bool, "str": str, "dict": dict}
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in parameters:
                value = parameters[f.name]
                cast = casts[str(f.type).split(" | ")[0]]
                values[f.name] = value if value is None else cast(value)
        return cls(**values)


def resolve_config(config: RunConfig) -> RunConfig:
    """Check names and fill every ``None`` from the profile or the seed.

    Sizes, ``checkpoint_every``, ``max_epochs`` (of this phase and architecture),
    ``data_dir`` and ``data_seed`` come from ``fruit.profiles.load_profile(config.profile)``
    exactly as ``fruit run`` sets them; explicit fields win. A profile given as a path is
    replaced by its name.
    """
    from fruit.models import ARCHITECTURES
    from fruit.tasks import get_task

    get_task(config.task)  # FruitError listing the tasks
    if config.architecture not in ARCHITECTURES:
        raise unknown_choice("architecture", config.architecture, ARCHITECTURES)
    if config.phase not in PHASES:
        raise unknown_choice("phase", config.phase, PHASES)
    c = dataclasses.replace(config, model_options=dict(config.model_options))
    missing = [name for name in PROFILE_FIELDS if getattr(c, name) is None]
    if missing or is_profile_path(c.profile):
        # the profile file is read only when it has something to give (or names a file):
        # a run whose every size is explicit (e.g. from fruit run) may carry any name
        profile = load_profile(c.profile)  # FruitError listing the shipped profiles
        settings = profile.run_settings(c.phase, c.architecture)
        settings["data_dir"] = str(Path("data") / profile.name)
        settings["data_seed"] = profile.task_data_seed(c.task)
        settings["data_source"] = profile.data_source
        for name in missing:
            setattr(c, name, settings[name])
        c.profile = profile.name  # a path becomes the name that its results go under
    if c.parameter_seed is None:
        c.parameter_seed = derive_seed(c.seed, "parameters")
    if c.shuffle_seed is None:
        c.shuffle_seed = derive_seed(c.seed, "shuffle")
    c.data_dir = str(c.data_dir)
    from fruit.profiles import DATA_SOURCES

    if c.data_source not in DATA_SOURCES:
        raise unknown_choice("data_source", c.data_source, DATA_SOURCES)
    for name in ("batch_tokens", "checkpoint_every", "max_epochs", "train_size"):
        if int(getattr(c, name)) < 1:
            raise FruitError(f"{name} must be a positive integer, got {getattr(c, name)!r}")
    if not c.learning_rate > 0:
        raise FruitError(f"learning_rate must be positive, got {c.learning_rate!r}")
    return c


def run_dir_for(output_dir, config: RunConfig) -> Path:
    """``OUT/runs/<profile>/<task>/<architecture>/<phase>-<index>`` (docs/contracts.md §5)."""
    c = config
    return run_folder(output_dir, c.profile, c.task, c.architecture, c.phase, c.index)


# ---------------------------------------------------------------------------- data


@dataclass
class TaskData:
    train: list
    dev: list
    test: list
    gen: list  # (source, hierarchical target)
    gen_linear: list  # (source, linear-rule target), same sources as gen
    vocab: object


def _first(examples, n, path):
    if n is not None and len(examples) < n:
        raise FruitError(
            f"{path} has {len(examples)} examples but this run needs {n}; "
            "regenerate the data (fruit data) or ask for fewer"
        )
    return examples if n is None else examples[:n]


def published_folder(explicit=None) -> Path | None:
    """Where the published files are read from: ``explicit``, else ``$FRUIT_DATASETS``,
    else None (downloaded from the pinned commits, ``fruit.tasks.official``)."""
    chosen = explicit or os.environ.get("FRUIT_DATASETS")
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
    not all four splits is never overwritten. Returns "found" or "generated".
    """
    from fruit.profiles import DATA_SOURCES
    from fruit.tasks import SPLITS, get_task

    if source not in DATA_SOURCES:
        raise unknown_choice("data source", source, DATA_SOURCES)
    root, task = Path(data_dir), get_task(task_slug)
    folder = root / task_slug
    sizes = {split: int(sizes[split]) for split in SPLITS}
    sizes["train"] = max(sizes["train"], MIN_GENERATED_TRAIN)
    have_splits = all((folder / f"{split}.tsv").is_file() for split in SPLITS)
    marker = folder / DATA_MARKER
    if marker.is_file():
        found = json.loads(marker.read_text(encoding="utf-8"))
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
            return "found"
    elif have_splits:
        return "found"
    if folder.is_dir() and any(folder.iterdir()):
        what = (
            "train.tsv is missing" if not (folder / "train.tsv").is_file() else "splits are missing"
        )
        raise FruitError(
            f"no complete data for {task_slug}: {folder} holds some files but its {what}; "
            f"remove that folder to have it made again (a partly filled folder is never overwritten)"
        )
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{task_slug}.", suffix=".partial", dir=root))
    try:
        record = _make_data(staging, task, seed, sizes, source, published_dir)
        atomic_write_json(staging / task_slug / DATA_MARKER, record)
        if folder.is_dir():
            folder.rmdir()  # empty (checked above)
        os.replace(staging / task_slug, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
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
        out, [task.slug], where, seed, sizes["train"], log=lambda _: None, published_train=False
    )
    counts = {s: len(read_tsv(out / task.slug / f"{s}.tsv")) for s in sizes}
    short = [f"{s} has {counts[s]} lines, {sizes[s]} asked" for s in sizes if counts[s] < sizes[s]]
    if short:
        raise FruitError(f"the published {task.slug} files are too small: {'; '.join(short)}")
    record["sizes"] = counts
    record["published"] = str(where.resolve()) if where else "downloaded from the pinned commits"
    return record


def load_data(config: RunConfig) -> TaskData:
    """The run's splits from ``data_dir/<task>/`` (generating them if allowed and absent)."""
    from fruit.tasks import Vocabulary, get_task, read_tsv

    task = get_task(config.task)
    root = Path(config.data_dir)
    folder = root / config.task
    if config.generate_data:
        sizes = {s: getattr(config, f) for s, f in SPLIT_FIELDS.items()}
        prepare_data(root, config.task, config.data_seed, sizes, config.data_source)
    if not (folder / "train.tsv").is_file():
        empty = not folder.is_dir() or not any(folder.iterdir())
        if not root.is_dir():
            raise FruitError(
                f"data directory {root} does not exist; create it with "
                f"`fruit data --out {root}` (or generate_data=True)"
            )
        else:
            raise FruitError(
                f"no training data for {config.task}: {folder / 'train.tsv'} is missing; "
                f"create it with `fruit data --out {root}`"
                + (" (or generate_data=True)" if empty else "")
            )
    full_train = read_tsv(folder / "train.tsv")
    vocab = Vocabulary.from_examples(full_train)  # train.tsv defines the vocabulary
    data = {"train": _first(full_train, config.train_size, folder / "train.tsv")}
    for split in ("dev", "test", "gen"):
        path = folder / f"{split}.tsv"
        data[split] = _first(read_tsv(path), getattr(config, SPLIT_FIELDS[split]), path)
    linear_path = folder / "gen.linear.tsv"
    if linear_path.is_file():
        gen_linear = read_tsv(linear_path)[: len(data["gen"])]
        if [s for s, _ in gen_linear] != [s for s, _ in data["gen"]]:
            raise FruitError(f"{linear_path}: sources differ from {folder / 'gen.tsv'}")
    else:
        gen_linear = [(s, task.linear(s[:-1])) for s, _ in data["gen"]]
    return TaskData(**data, gen_linear=gen_linear, vocab=vocab)


# ---------------------------------------------------------------------------- the run


def default_model_factory(config: RunConfig, vocab_size: int):
    from fruit.models import build_model

    return build_model(
        config.architecture,
        vocab_size=vocab_size,
        target_params=config.target_params,
        d=config.d,
        **config.model_options,
    )


def _json_clean(obj):
    """NaN/inf are not JSON: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_clean(v) for k, v in obj.items()}
    return obj


class Run:
    """One training run bound to its folder; resumes from ``checkpoint.pt`` if present."""

    def __init__(
        self,
        config: RunConfig,
        run_dir,
        *,
        data: TaskData | None = None,
        model_factory: Callable | None = None,
    ):
        from fruit.tasks import get_task

        self.config = resolve_config(config)
        self.dir = Path(run_dir)
        self.task = get_task(self.config.task)
        self.device = resolve_device(self.config.device)
        self.data = data if data is not None else load_data(self.config)
        self.vocab = self.data.vocab
        self.eos_id = self.vocab.eos_id
        c = self.config

        torch.manual_seed(c.parameter_seed)  # initialisation, then the dropout stream
        self.model = (model_factory or default_model_factory)(c, self.vocab.size).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=c.learning_rate)
        self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self.optimizer,
            mode="min",
            factor=c.lr_factor,
            patience=c.lr_patience,
            threshold=0.0,
            cooldown=0,
            min_lr=0.0,
        )
        self.train_strings = [
            self.vocab.encode(x) + self.vocab.encode(y) for x, y in self.data.train
        ]
        self.dev_strings = [self.vocab.encode(x) + self.vocab.encode(y) for x, y in self.data.dev]
        self.dev_batches = evaluation_batches([len(w) for w in self.dev_strings], c.batch_tokens)
        self.rng = random.Random(c.shuffle_seed)
        self.state = {
            "epoch": 0,  # completed epochs
            "batch_index": 0,  # next batch of the current epoch
            "epoch_rng_state": self.rng.getstate(),  # shuffling RNG at the epoch's start
            "examples_seen": 0,
            "since_checkpoint": 0,
            "loss_sum": 0.0,
            "loss_count": 0,
            "best": None,  # best validation cross-entropy
            "bad_checkpoints": 0,
            "stopped": False,  # early stopping fired
            "training_done": False,
            "diverged": None,  # reason, when the loss became nan/inf
            "seconds": 0.0,
            "log": [],
        }
        self.paused = False  # train() stopped at its stop_at (see train)
        self._write_or_check_config()
        if (self.dir / "checkpoint.pt").is_file() and not self.finished:
            self._load_checkpoint()

    # ------------------------------------------------------------------ files

    @property
    def finished(self) -> bool:
        return (self.dir / "metrics.json").is_file()

    @property
    def num_parameters(self) -> int:
        from fruit.models import num_parameters

        return num_parameters(self.model)

    def config_record(self) -> dict:
        record = dataclasses.asdict(self.config)
        record.update(
            trial=self.config.index,  # docs/contracts.md §5 calls the index "trial" here
            device=str(self.device),
            d=getattr(self.model, "d", None),
            num_parameters=self.num_parameters,
            vocab_size=self.vocab.size,
            provenance=provenance(self.device),  # code commit, packages, CPU/GPU
        )
        return record

    def _write_or_check_config(self) -> None:
        path = self.dir / "config.json"
        record = self.config_record()
        if path.is_file():
            old = json.loads(path.read_text(encoding="utf-8"))
            ignore = {"device", "versions", "provenance"}  # where, not what
            changed = sorted(
                k for k in record if k not in ignore and old.get(k) != _json_roundtrip(record[k])
            )
            if changed:
                raise FruitError(
                    f"{self.dir} holds a run with different settings ({', '.join(changed)}); "
                    "use another output folder or delete it"
                )
            return
        atomic_write_json(path, record)

    def _save_checkpoint(self) -> None:
        state = dict(self.state)
        checkpoint = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "shuffle_rng": self.rng.getstate(),
            "state": state,
        }
        atomic_torch_save(self.dir / "checkpoint.pt", checkpoint)

    def _load_checkpoint(self) -> None:
        checkpoint = torch.load(self.dir / "checkpoint.pt", map_location="cpu", weights_only=False)
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        torch.set_rng_state(checkpoint["torch_rng"])
        if checkpoint["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(checkpoint["cuda_rng"])
        self.rng.setstate(checkpoint["shuffle_rng"])
        self.state = checkpoint["state"]
        self._write_log()

    def _write_log(self) -> None:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=LOG_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.state["log"])
        atomic_write_text(self.dir / "log.csv", buffer.getvalue())

    def load_best(self) -> None:
        """Put the best parameters (by validation cross-entropy) into ``self.model``."""
        best = torch.load(self.dir / "best.pt", map_location=self.device, weights_only=False)
        self.model.load_state_dict(best["model"])

    # ------------------------------------------------------------------ training

    def _string_losses(self, strings) -> torch.Tensor:
        """Summed -log p(w EOS) per string, (B,), with the graph."""
        tokens = pad(strings, 0, self.device)  # (B, n); padding is any valid id
        targets = pad([w + [self.eos_id] for w in strings], -1, self.device)  # (B, n+1)
        logits = self.model(tokens)  # (B, n+1, V+1)
        nll = F.cross_entropy(
            logits.transpose(1, 2), targets, ignore_index=-1, reduction="none"
        )  # (B, n+1)
        return nll.sum(1)

    def validate(self) -> float:
        """Cross-entropy per token (EOS included) on the dev set, in nats."""
        total, tokens = 0.0, 0
        with evaluation.evaluating(self.model):
            for batch in self.dev_batches:
                strings = [self.dev_strings[i] for i in batch]
                total += float(self._string_losses(strings).double().sum())
                tokens += sum(len(w) + 1 for w in strings)
        return total / tokens

    def _update(self, batch) -> float:
        self.model.train()
        loss = self._string_losses([self.train_strings[i] for i in batch]).mean()
        value = loss.item()
        if not math.isfinite(value):
            return value
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
        self.optimizer.step()
        return value

    def _checkpoint(self, clock_start: float, seconds_before: float) -> dict:
        st, c = self.state, self.config
        score = self.validate()
        learning_rate = self.optimizer.param_groups[0]["lr"]  # in force since the last one
        if not math.isfinite(score):
            st["diverged"] = (
                f"validation cross-entropy became {score} at examples_seen={st['examples_seen']}"
            )
        improved = st["best"] is None or score < st["best"]  # strict, as the scheduler
        self.scheduler.step(score)
        if improved and st["diverged"] is None:
            st["best"], st["bad_checkpoints"] = score, 0
            atomic_torch_save(
                self.dir / "best.pt",
                {
                    "model": self.model.state_dict(),
                    "examples_seen": st["examples_seen"],
                    "score": score,
                },
            )
        else:
            st["bad_checkpoints"] += 1
            st["stopped"] = st["bad_checkpoints"] >= c.early_stop_patience
        st["seconds"] = seconds_before + (time.perf_counter() - clock_start)
        row = {
            "examples_seen": st["examples_seen"],
            "epoch": round(st["examples_seen"] / len(self.train_strings), 6),
            "learning_rate": learning_rate,
            "train_loss": st["loss_sum"] / max(st["loss_count"], 1),
            "validation_cross_entropy": score,
            "seconds": round(st["seconds"], 3),
        }
        st["log"].append(row)
        st["since_checkpoint"] %= c.checkpoint_every
        st["loss_sum"], st["loss_count"] = 0.0, 0
        self._write_log()
        self._save_checkpoint()
        return row

    def train(
        self,
        progress=None,
        on_checkpoint: Callable | None = None,
        stop_at: float | None = None,
    ) -> None:
        """Train until early stopping, ``max_epochs``, or a nan/inf loss.

        ``progress``: None, True (a tqdm bar) or a tqdm-like object with ``update(n)``.
        ``on_checkpoint(run, row)`` is called after each checkpoint is saved.
        ``stop_at`` (a ``time.time()`` value): pause before a batch that would likely
        end after it -- the whole training state goes to ``checkpoint.pt``, ``paused``
        becomes True, and a later ``train()`` continues exactly where this one stopped
        (the same batches, random streams and optimiser state), so a paused-and-resumed
        run ends with the same parameters and metrics as an uninterrupted one.
        """
        st, c = self.state, self.config
        self.paused = False
        (self.dir / PAUSED_MARKER).unlink(missing_ok=True)
        if self.finished or st["training_done"]:
            return
        bar = _progress_bar(progress, total=c.max_epochs * len(self.train_strings))
        if bar is not None:
            bar.update(st["examples_seen"])
        lengths = [len(w) for w in self.train_strings]
        clock_start, seconds_before = time.perf_counter(), st["seconds"]
        slowest_batch = 0.0  # seconds, for stop_at
        while (
            not self.paused
            and not st["stopped"]
            and st["diverged"] is None
            and st["epoch"] < c.max_epochs
        ):
            self.rng.setstate(st["epoch_rng_state"])
            batches = training_batches(lengths, c.batch_tokens, self.rng)
            while st["batch_index"] < len(batches):
                if stop_at is not None and time.time() + 2 * slowest_batch > stop_at:
                    self.paused = True
                    break
                batch = batches[st["batch_index"]]
                batch_start = time.perf_counter()
                loss = self._update(batch)
                slowest_batch = max(slowest_batch, time.perf_counter() - batch_start)
                st["batch_index"] += 1
                if not math.isfinite(loss):
                    st["diverged"] = f"loss became {loss} at examples_seen={st['examples_seen']}"
                    break
                st["examples_seen"] += len(batch)
                st["since_checkpoint"] += len(batch)
                st["loss_sum"] += loss * len(batch)
                st["loss_count"] += len(batch)
                if bar is not None:
                    bar.update(len(batch))
                if st["since_checkpoint"] >= c.checkpoint_every:
                    row = self._checkpoint(clock_start, seconds_before)
                    if bar is not None:
                        bar.set_postfix(val_ce=f"{row['validation_cross_entropy']:.4f}")
                    if on_checkpoint is not None:
                        on_checkpoint(self, row)
                    if st["stopped"] or st["diverged"]:
                        break
            else:  # the epoch ran to its end
                st["epoch"] += 1
                st["batch_index"] = 0
                st["epoch_rng_state"] = self.rng.getstate()
        if self.paused:
            st["seconds"] = seconds_before + (time.perf_counter() - clock_start)
            self._write_log()
            self._save_checkpoint()
            atomic_write_json(
                self.dir / PAUSED_MARKER,
                {"examples_seen": st["examples_seen"], "stop_at": stop_at},
            )
            if bar is not None:
                bar.close()
            return
        if st["best"] is None and st["diverged"] is None:
            # fewer examples than one checkpoint interval: validate once at the end
            row = self._checkpoint(clock_start, seconds_before)
            if on_checkpoint is not None:
                on_checkpoint(self, row)
        st["training_done"] = True
        st["seconds"] = seconds_before + (time.perf_counter() - clock_start)
        self._save_checkpoint()
        if bar is not None:
            bar.close()

    # ------------------------------------------------------------------ evaluation

    def evaluate(self) -> dict:
        """The paper's metrics with the best parameters."""
        self.load_best()
        c = self.config
        return evaluation.evaluate(
            self.model,
            self.task,
            self.vocab,
            test=self.data.test,
            gen=self.data.gen,
            gen_linear=self.data.gen_linear,
            num_samples=c.num_samples,
            sampling_seed=c.sampling_seed,
            batch_tokens=c.eval_batch_tokens,
            prompt_tokens=c.sample_prompt_tokens,
            partial_on_test=c.partial_on_test,
            device=self.device,
        )

    def finish(self) -> dict:
        """Evaluate (unless diverged) and write metrics.json last; returns the metrics."""
        if self.finished:
            return read_metrics(self.dir)
        if not self.state["training_done"] and self.state["diverged"] is None:
            raise FruitError(f"{self.dir}: training has not finished; call train() first")
        st, c = self.state, self.config
        empty = {"test": None, "hierarchical": None, "linear": None, "log_ratio": None}
        if st["diverged"] is None:
            scores = self.evaluate()
        else:
            scores = {"full": dict(empty), "partial": dict(empty)}
        metrics = {
            "status": "complete" if st["diverged"] is None else "diverged",
            "reason": st["diverged"],
            "task": c.task,
            "architecture": c.architecture,
            "phase": c.phase,
            "index": c.index,
            "seed": c.seed,
            "profile": c.profile,
            "learning_rate": c.learning_rate,
            "batch_tokens": c.batch_tokens,
            "d": getattr(self.model, "d", None),
            "num_parameters": self.num_parameters,
            "best_validation_cross_entropy": st["best"],
            "epochs": st["examples_seen"] / len(self.train_strings),
            "examples_seen": st["examples_seen"],
            "train_seconds": round(st["seconds"], 3),
            "full": scores["full"],
            "partial": scores["partial"],
        }
        metrics = _json_clean(metrics)
        atomic_write_json(self.dir / "metrics.json", metrics)
        return metrics


def _json_roundtrip(value):
    return json.loads(json.dumps(value))


def _progress_bar(progress, total: int):
    if progress is None or progress is False:
        return None
    if progress is True:
        try:  # a widget in JupyterLab when ipywidgets is there, else a text bar
            import ipywidgets  # noqa: F401
            from tqdm.auto import tqdm
        except ImportError:
            from tqdm import tqdm

        return tqdm(total=total, unit="ex", desc="training")
    return progress


def read_log(run_dir):
    """log.csv as a pandas DataFrame."""
    import pandas as pd

    return pd.read_csv(Path(run_dir) / "log.csv")


def train_run(
    config: RunConfig,
    run_dir,
    *,
    progress=None,
    data=None,
    model_factory=None,
    stop_at: float | None = None,
) -> dict | None:
    """Train (or resume) one run and write its metrics; returns metrics.json's content,
    or None when it paused at ``stop_at`` (see ``Run.train``)."""
    done = read_metrics(run_dir)
    if done is not None:
        return done
    run = Run(config, run_dir, data=data, model_factory=model_factory)
    run.train(progress=progress, stop_at=stop_at)
    return None if run.paused else run.finish()
