"""A run's records and its final evaluation: ``config.json`` (every setting and what the
run made of them) and ``metrics.json`` (the paper's metrics with the best parameters,
docs/contracts.md §5), written atomically and last: a folder with it is finished."""

from __future__ import annotations

import math
import time

from fruit import evaluation
from fruit.breakdown import has_subject_groups, subject_groups
from fruit.errors import FruitError
from fruit.io import atomic_write_json, read_metrics
from fruit.provenance import provenance
from fruit.training import checkpoints
from fruit.training.config import evaluation_settings, settings_record
from fruit.training.data import data_origin


def config_record(run) -> dict:
    """config.json: every setting, and what the run made of them (d, parameters, V)."""
    record = settings_record(run.config)
    record.update(data_origin(run.config.data_dir, run.config.task))  # what made the data
    record.update(
        device=str(run.device),
        d=getattr(run.model, "d", None),
        num_parameters=run.num_parameters,
        vocab_size=run.vocab.size,
        provenance=provenance(run.device),  # code commit, packages, CPU/GPU
    )
    if run.step_kind != "plain":  # how the steps ran (fruit.training.steps)
        record["provenance"]["step"] = run.step_kind
    return record


def evaluate_best(run) -> dict:
    """The paper's metrics with the best parameters (``best.pt``, put into ``run.model``),
    and for the McCoy tasks the generalization means by the subject's relative clause
    (``fruit.breakdown``), so that reports can break every run down from its records."""
    run.load_best()
    d = run.data
    groups = None
    if has_subject_groups(run.task):
        groups = subject_groups(run.task, [source for source, _ in d.gen])
    return evaluation.evaluate(
        run.model,
        run.task,
        run.vocab,
        test=d.test,
        gen=d.gen,
        gen_linear=d.gen_linear,
        device=run.device,
        gen_groups=groups,
        **evaluation_settings(run.config),
    )


def finish(run) -> dict:
    """Evaluate (unless diverged) and write metrics.json last; returns the metrics."""
    if run.finished:
        return read_metrics(run.dir)
    st = run.state
    if not st.training_done and st.diverged is None:
        raise FruitError(f"{run.dir}: training has not finished; call train() first")
    empty = {"test": None, "hierarchical": None, "linear": None, "log_ratio": None}
    start = time.perf_counter()
    if st.diverged is None:
        scores = run.evaluate()
    else:
        scores = {"full": dict(empty), "partial": dict(empty)}
    evaluation_seconds = time.perf_counter() - start
    metrics = _json_clean(metrics_record(run, scores, evaluation_seconds))
    atomic_write_json(run.dir / "metrics.json", metrics)
    return metrics


def metrics_record(run, scores: dict, evaluation_seconds: float = 0.0) -> dict:
    """metrics.json of a run whose training ended (docs/contracts.md §5); the evaluation's
    seconds are what ``fruit run --time-limit`` reserves before its limit for the next
    run of the same pair to evaluate."""
    st, c = run.state, run.config
    record = {
        "status": "complete" if st.diverged is None else "diverged",
        "reason": st.diverged,
        "task": c.task,
        "architecture": c.architecture,
        "phase": c.phase,
        "index": c.index,
        "seed": c.seed,
        "profile": c.profile,
        "learning_rate": c.learning_rate,
        "batch_tokens": c.batch_tokens,
        "d": getattr(run.model, "d", None),
        "num_parameters": run.num_parameters,
        "best_validation_cross_entropy": st.best,
        "epochs": st.examples_seen / len(run.train_strings),
        "examples_seen": st.examples_seen,
        "train_seconds": round(st.seconds, 3),
        "evaluation_seconds": round(evaluation_seconds, 3),
        "full": scores["full"],
        "partial": scores["partial"],
    }
    if "by_subject" in scores:
        record["by_subject"] = scores["by_subject"]
    warnings = checkpoints.read_warnings(run.dir)
    if warnings:  # e.g. a damaged checkpoint made the run start again
        record["warnings"] = warnings
    return record


def _json_clean(obj):
    """NaN/inf are not JSON: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_clean(v) for k, v in obj.items()}
    return obj
