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
unfinished; opening it again (``open_run``) resumes exactly from checkpoint.pt
(parameters, optimiser, scheduler, RNG states, counters, position in the epoch;
``fruit.training.checkpoints``). A damaged checkpoint.pt or config.json of an
unfinished run is kept as ``<name>.damaged`` and the run starts again from scratch
(the result is that of an uninterrupted run), with a warning in the folder's
warnings.log that metrics.json repeats under "warnings". A finished folder is only
ever reused by a run with its settings. Settings: ``fruit.training.config``; data:
``fruit.training.data``; the loss and the optimiser step: ``fruit.training.objective``;
opening a folder again (resume or restart): ``fruit.training.resume``; config.json,
the final evaluation and metrics.json: ``fruit.training.records``; the progress bar:
``fruit.training.progress``.
"""

from __future__ import annotations

import functools
import math
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from fruit.allocator import tune_for_training
from fruit.batching import evaluation_batches, training_batches
from fruit.device import resolve_device
from fruit.io import PAUSED_MARKER, atomic_write_json, read_metrics
from fruit.training import checkpoints, records, resume, steps
from fruit.training.checkpoints import TrainingState, write_log
from fruit.training.config import RunConfig, check_finished_settings, resolve_config
from fruit.training.data import TaskData, check_batch_tokens, data_digest, load_data
from fruit.training.objective import optimizer_and_scheduler, validation_cross_entropy
from fruit.training.pacing import Pacing
from fruit.training.progress import progress_bar


def default_model_factory(config: RunConfig, vocab_size: int):
    from fruit.models import build_model

    return build_model(
        config.architecture,
        vocab_size=vocab_size,
        target_params=config.target_params,
        d=config.d,
        **config.model_options,
    )


class Run:
    """One training run bound to its folder. ``open_run`` makes one (it resolves the
    config, loads the data, opens the folder: config.json, a resume from checkpoint.pt);
    ``Run(...)`` itself reads and writes no file."""

    def __init__(
        self,
        config: RunConfig,
        run_dir,
        data: TaskData,
        model_factory: Callable | None = None,
    ):
        from fruit.tasks import get_task

        if not config.resolved:
            raise TypeError("Run takes a resolved RunConfig: use open_run(config, run_dir)")
        self.config = c = config
        self.dir = Path(run_dir)
        self.task = get_task(c.task)
        self.device = resolve_device(c.device)
        self.data = data
        self.vocab = self.data.vocab
        self.eos_id = self.vocab.eos_id
        self._model_factory = model_factory or default_model_factory

        encode = self.vocab.encode
        self.train_strings = [encode(x) + encode(y) for x, y in self.data.train]
        self.dev_strings = [encode(x) + encode(y) for x, y in self.data.dev]
        check_batch_tokens(c, self.train_strings, self.dev_strings)
        self.dev_batches = evaluation_batches([len(w) for w in self.dev_strings], c.batch_tokens)
        self.start_fresh()
        # plain, eager or graphs (FRUIT_STEP; fruit.training.steps), as this model allows
        self.step_kind, note = steps.usable(steps.step_kind(self.device), self.model, self.device)
        if note is not None:
            print(f"fruit: note: {note}", file=sys.stderr)
        self.paused = False  # train() stopped at its stop_at or its pause_file (see train)
        self.pacing = Pacing()  # train() sets it: training seconds, when to pause

    def start_fresh(self) -> None:
        """The model, optimiser, shuffling generator and state of a run that has not
        trained yet (the same, bit for bit, however often this is called)."""
        c = self.config
        torch.manual_seed(c.parameter_seed)  # initialisation, then the dropout stream
        self.model = self._model_factory(c, self.vocab.size).to(self.device)
        self.optimizer, self.scheduler = optimizer_and_scheduler(self.model, c)
        self.rng = random.Random(c.shuffle_seed)
        self.state = TrainingState(epoch_rng_state=self.rng.getstate())

    def warn(self, message: str) -> None:
        """Print a warning and keep it in the run folder's warnings.log (metrics.json
        lists those lines under "warnings")."""
        print(f"fruit: warning: {self.dir}: {message}", file=sys.stderr)
        checkpoints.append_warning(self.dir, message)

    # ------------------------------------------------------------------ files

    @property
    def finished(self) -> bool:
        return (self.dir / "metrics.json").is_file()

    @property
    def num_parameters(self) -> int:
        from fruit.models import num_parameters

        return num_parameters(self.model)

    @functools.cached_property
    def data_digest(self) -> str:
        """The identity of the run's data (``fruit.training.data.data_digest``)."""
        return data_digest(self.data)

    def _save_checkpoint(self) -> None:
        parts = (self.model, self.optimizer, self.scheduler, self.rng, self.state)
        checkpoints.save_checkpoint(self.dir, *parts, self.data_digest)

    def load_best(self) -> None:
        """Put the best parameters (by validation cross-entropy) into ``self.model``."""
        checkpoints.load_best(self.dir, self.model, self.device)

    # ------------------------------------------------------------------ training

    def validate(self) -> float:
        """Cross-entropy per token (EOS included) on the dev set, in nats."""
        return validation_cross_entropy(
            self.model, self.dev_strings, self.dev_batches, self.eos_id, self.device
        )

    def _checkpoint(self, on_checkpoint: Callable | None, bar=None) -> None:
        st, c = self.state, self.config
        score = self.validate()
        # the rate used since the last checkpoint (read before scheduler.step changes it)
        learning_rate = self.optimizer.param_groups[0]["lr"]
        improved = st.judge(score, c.early_stop_patience)
        self.scheduler.step(score)
        if improved:
            checkpoints.save_best(self.dir, self.model, st.examples_seen, score)
        st.seconds = self.pacing.elapsed()
        row = st.log_checkpoint(score, learning_rate, len(self.train_strings), c.checkpoint_every)
        write_log(self.dir, st.log)
        self._save_checkpoint()
        if bar is not None:
            bar.set_postfix(val_ce=f"{row['validation_cross_entropy']:.4f}")
        if on_checkpoint is not None:
            on_checkpoint(self, row)

    def _train_epoch(self, bar, on_checkpoint: Callable | None) -> bool:
        """Go on with the current epoch; True when it ran to its end, False when it
        stopped early (a pause, divergence, early stopping)."""
        st, c = self.state, self.config
        self.rng.setstate(st.epoch_rng_state)
        batches = training_batches([len(w) for w in self.train_strings], c.batch_tokens, self.rng)
        while st.batch_index < len(batches):
            if self.pacing.should_pause():  # rather than run past stop_at, or on request
                self.paused = True
                return False
            batch = batches[st.batch_index]
            self.pacing.batch_started()
            strings = [self.train_strings[i] for i in batch]
            loss = self._step(strings)  # one optimiser step; nan/inf: no step
            self.pacing.batch_ended()
            st.batch_index += 1
            if not math.isfinite(loss):
                st.diverged = f"loss became {loss} at examples_seen={st.examples_seen}"
                return False
            st.count_batch(len(batch), loss)
            if bar is not None:
                bar.update(len(batch))
            if st.since_checkpoint >= c.checkpoint_every:
                self._checkpoint(on_checkpoint, bar)
                if st.stopped or st.diverged:
                    return False
        return True

    def train(
        self,
        progress=None,
        on_checkpoint: Callable | None = None,
        stop_at: float | None = None,
        pause_file: str | os.PathLike | None = None,
        progress_seconds: float | None = None,
    ) -> None:
        """Train until early stopping, ``max_epochs``, or a nan/inf loss or validation
        cross-entropy (the run is then marked diverged).

        ``progress``: None, True (a tqdm bar) or a tqdm-like object with ``update(n)``;
        ``progress_seconds``: the least time between two redraws of that bar (default:
        0.1 s for a widget or a terminal, 30 s for text in a log; ``fruit.training.progress``).
        ``on_checkpoint(run, row)`` is called after each checkpoint is saved.
        ``stop_at`` (a ``time.time()`` value): pause before a batch that would likely
        end after it -- the whole training state goes to ``checkpoint.pt``, ``paused``
        becomes True, and a later ``train()`` continues exactly where this one stopped
        (the same batches, random streams and optimiser state), so a paused-and-resumed
        run ends with the same parameters and metrics as an uninterrupted one.
        ``pause_file``: pause the same way before the first batch that finds this file
        (``fruit run`` creates it when asked to stop: SIGTERM, or a user's ``PAUSE`` file).
        """
        st, c = self.state, self.config
        self.paused = False
        (self.dir / PAUSED_MARKER).unlink(missing_ok=True)
        if self.finished or st.training_done:
            return
        bar = progress_bar(
            progress, total=c.max_epochs * len(self.train_strings), seconds=progress_seconds
        )
        if bar is not None:
            bar.update(st.examples_seen)
        self.pacing = Pacing(st.seconds, stop_at, pause_file)
        self._step = steps.stepper(
            self.step_kind, self.model, self.optimizer, self.eos_id, self.device, c.clip_norm,
            warn=self.warn,
        )  # fmt: skip
        resumed_from = st.examples_seen  # the pause marker says how far this call went
        while (
            not self.paused and not st.stopped and st.diverged is None and st.epoch < c.max_epochs
        ):
            if self._train_epoch(bar, on_checkpoint):
                st.epoch += 1
                st.batch_index = 0
                st.epoch_rng_state = self.rng.getstate()
        if self.paused:
            st.seconds = self.pacing.elapsed()
            write_log(self.dir, st.log)
            self._save_checkpoint()
            record = {
                "examples_seen": st.examples_seen,
                "resumed_from": resumed_from,
                "stop_at": stop_at,
            }
            atomic_write_json(self.dir / PAUSED_MARKER, record)
        else:
            if st.best is None and st.diverged is None:
                # fewer examples than one checkpoint interval: validate once at the end
                self._checkpoint(on_checkpoint)
            st.training_done = True
            st.seconds = self.pacing.elapsed()
            self._save_checkpoint()
        if bar is not None:
            bar.close()

    # ------------------------------------------------------------------ evaluation

    def evaluate(self) -> dict:
        """The paper's metrics with the best parameters."""
        return records.evaluate_best(self)

    def finish(self) -> dict:
        """Evaluate (unless diverged) and write metrics.json last; returns the metrics."""
        return records.finish(self)


def open_run(
    config: RunConfig,
    run_dir,
    *,
    data: TaskData | None = None,
    model_factory: Callable | None = None,
) -> Run:
    """A ``Run`` of ``config`` (resolved here unless it is already) in ``run_dir``, with
    the side effects of starting one: PyTorch's buffers kept in the heap
    (``fruit.allocator``), the data loaded (or generated, with ``generate_data``), the
    model built, and the folder opened -- config.json written or checked, an unfinished
    run resumed from checkpoint.pt, or restarted when a record is damaged
    (``fruit.training.resume``)."""
    tune_for_training()
    config = resolve_config(config)
    run = Run(config, run_dir, data if data is not None else load_data(config), model_factory)
    resume.open_folder(run)
    return run


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
    config = resolve_config(config)
    done = read_metrics(run_dir)
    if done is not None:  # only if it is this very run (its settings), else refused
        check_finished_settings(config, run_dir, done)
        return done
    run = open_run(config, run_dir, data=data, model_factory=model_factory)
    run.train(progress=progress, stop_at=stop_at)
    return None if run.paused else run.finish()
