"""Fake but schema-valid run folders (docs/contracts.md §5) for the reporting tests."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path


def write_run(
    results: Path,
    profile: str,
    task: str,
    architecture: str,
    index: int,
    full: dict | None = None,
    partial: dict | None = None,
    status: str = "complete",
    phase: str = "final",
) -> Path:
    """One run folder with config.json, log.csv and metrics.json (written last)."""
    run = results / profile / task / architecture / f"{phase}-{index}"
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(
        json.dumps({"task": task, "architecture": architecture, "phase": phase})
    )
    (run / "log.csv").write_text(
        "examples_seen,epoch,learning_rate,train_loss,validation_cross_entropy,seconds\n"
    )
    diverged = status == "diverged"
    metrics = {
        "status": status,
        "reason": "loss became nan at examples_seen=10" if diverged else None,
        "task": task,
        "architecture": architecture,
        "phase": phase,
        "index": index,
        "seed": 1000 + index,
        "profile": profile,
        "learning_rate": 0.001,
        "batch_tokens": 1024,
        "d": 16,
        "num_parameters": 1234,
        "best_validation_cross_entropy": None if diverged else 0.5,
        "epochs": 1.0,
        "examples_seen": 100,
        "train_seconds": 1.0,
        "full": {k: None for k in ("test", "hierarchical", "linear", "log_ratio")}
        if diverged
        else full,
        "partial": {k: None for k in ("test", "hierarchical", "linear", "log_ratio")}
        if diverged
        else partial,
    }
    (run / "metrics.json").write_text(json.dumps(metrics))
    return run


def random_metrics(rng: random.Random, good: bool) -> tuple[dict, dict]:
    """Plausible accuracies; ``good`` runs learn the test set (test FA near 1)."""
    test = rng.uniform(0.95, 1.0) if good else rng.uniform(0.0, 0.5)
    hier, lin = rng.uniform(0.01, 0.6), rng.uniform(0.01, 0.6)
    phier, plin = rng.uniform(0.05, 0.95), rng.uniform(0.05, 0.95)
    full = {"test": test, "hierarchical": hier, "linear": lin, "log_ratio": math.log(hier / lin)}
    partial = {
        "test": None,
        "hierarchical": phier,
        "linear": plin,
        "log_ratio": math.log(phier / plin),
    }
    return full, partial


def write_fake_results(
    results: Path, profile: str, tasks, architectures, runs: int = 2, seed: int = 0
) -> None:
    """``runs`` complete final runs for every (task, architecture); transformers learn the test set."""
    rng = random.Random(seed)
    for task in tasks:
        for arch in architectures:
            for i in range(runs):
                full, partial = random_metrics(rng, good=arch.startswith("Tf"))
                write_run(results, profile, task, arch, i, full, partial)


def test_fake_run_is_schema_valid(tmp_path):
    full, partial = random_metrics(random.Random(1), good=True)
    run = write_run(tmp_path, "smoke", "question-formation", "Tf+Nd", 3, full, partial)
    assert run == tmp_path / "smoke" / "question-formation" / "Tf+Nd" / "final-3"
    m = json.loads((run / "metrics.json").read_text())
    assert m["status"] == "complete" and m["index"] == 3
    assert set(m["full"]) == set(m["partial"]) == {"test", "hierarchical", "linear", "log_ratio"}
    assert math.isclose(
        m["full"]["log_ratio"], math.log(m["full"]["hierarchical"] / m["full"]["linear"])
    )
