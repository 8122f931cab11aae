"""fruit.batching and fruit.training: the batching rule, the schedule, resume, determinism.

Runs use generated question-formation data (tiny sizes) and small real models.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from fruit import batching, profiles, training
from fruit.breakdown import subject_groups
from fruit.cli import main as cli_main
from fruit.errors import FruitError
from fruit.evaluation import evaluate
from fruit.training import pacing

# ---------------------------------------------------------------- batching


def test_training_batches_follow_the_budget_rule():
    rng = random.Random(3)
    lengths = [rng.randint(1, 60) for _ in range(400)] + [300]  # one over-long string
    budget = 200
    batches = batching.training_batches(lengths, budget, random.Random(5))
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= budget
    assert [300] in [[lengths[i] for i in b] for b in batches]
    # greedy: no batch could have taken the next string of the sorted order
    flat = batching.evaluation_batches(lengths, budget)
    for b, nxt in zip(flat, flat[1:]):
        grown = b + nxt[:1]
        assert len(grown) * max(lengths[i] for i in grown) > budget


def test_batches_are_a_shuffled_stable_sort():
    lengths = [5, 3, 5, 3, 5, 3, 9]
    seed = 11
    batches = batching.training_batches(lengths, 1000, random.Random(seed))
    # budget large enough for one batch: the batch is the shuffled order, stably sorted
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    expected = sorted(order, key=lambda i: lengths[i])
    assert batches == [expected]
    # same seed, same batches; the validation batches ignore any RNG
    assert batching.training_batches(lengths, 10, random.Random(1)) == batching.training_batches(
        lengths, 10, random.Random(1)
    )
    assert batching.evaluation_batches(lengths, 1000) == [[1, 3, 5, 0, 2, 4, 6]]


def test_pad_right_pads_every_sequence():
    rng = random.Random(5)
    for _ in range(50):
        sequences = [[rng.randrange(30) for _ in range(rng.randrange(6))] for _ in range(4)]
        padded = batching.pad(sequences, -1)
        width = max(len(s) for s in sequences)
        assert padded.dtype == torch.long and padded.shape == (4, width)
        for row, s in zip(padded.tolist(), sequences):  # the sequence, then the pad value
            assert row == s + [-1] * (width - len(s))
    assert batching.pad([], 0).shape == (0, 0)
    assert batching.pad([[], []], 7).shape == (2, 0)


# ---------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from fruit.tasks import get_task
    from fruit.tasks.splits import write_task

    root = tmp_path_factory.mktemp("data")
    task = get_task("question-formation")
    sizes = {"train": 120, "dev": 20, "test": 20, "gen": 20}
    write_task(root, task, task.generate(seed=1, sizes=sizes))
    return root


def tiny_config(data_dir, **overrides) -> training.RunConfig:
    settings = dict(
        task="question-formation",
        architecture="Tf",
        profile="smoke",
        seed=7,
        d=16,
        learning_rate=1e-3,
        batch_tokens=256,
        train_size=120,
        dev_size=20,
        test_size=20,
        gen_size=20,
        checkpoint_every=50,
        max_epochs=2,
        data_dir=str(data_dir),
        device="cpu",
    )
    settings.update(overrides)
    return training.RunConfig(**settings)


def without_timing(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k not in ("train_seconds", "evaluation_seconds")}


def log_without_seconds(run_dir: Path) -> list[list[str]]:
    rows = (run_dir / "log.csv").read_text().splitlines()
    return [row.split(",")[:-1] for row in rows]


def test_run_folder_is_complete(tmp_path, data_dir):
    metrics = training.train_run(tiny_config(data_dir), tmp_path / "run")
    run_dir = tmp_path / "run"
    for name in ("config.json", "log.csv", "checkpoint.pt", "best.pt", "metrics.json"):
        assert (run_dir / name).is_file(), name
    assert metrics == json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "complete" and metrics["reason"] is None
    expected_keys = {
        "status", "reason", "task", "architecture", "phase", "index", "seed", "profile",
        "learning_rate", "batch_tokens", "d", "num_parameters", "best_validation_cross_entropy",
        "epochs", "examples_seen", "train_seconds", "evaluation_seconds", "full", "partial",
        "by_subject",
    }  # fmt: skip
    assert set(metrics) == expected_keys
    assert 0.0 < metrics["evaluation_seconds"] < 600.0  # the final evaluation's, timed
    for kind in ("full", "partial"):
        assert set(metrics[kind]) == {"test", "hierarchical", "linear", "log_ratio"}
        for name in ("test", "hierarchical", "linear"):
            assert 0.0 <= metrics[kind][name] <= 1.0
    assert metrics["examples_seen"] == 240 and metrics["epochs"] == 2.0
    config = json.loads((run_dir / "config.json").read_text())
    for key in ("parameter_seed", "shuffle_seed", "sampling_seed", "device", "provenance", "d"):
        assert key in config
    assert config["d"] == 16 and config["device"] == "cpu"
    log = training.read_log(run_dir)
    assert list(log.columns) == list(training.LOG_COLUMNS)
    # the count carries over (mod 50) so, with batches of < 50 strings, checkpoint i comes
    # at the first update where examples_seen >= 50 i, across the epoch boundary at 120
    assert [e // 50 for e in log["examples_seen"]] == [1, 2, 3, 4]
    assert metrics["best_validation_cross_entropy"] == pytest.approx(
        log["validation_cross_entropy"].min()
    )


def test_the_learning_curve_draws_the_log_it_is_given():
    import pandas as pd

    log = pd.DataFrame(
        {"examples_seen": [50, 100, 150], "epochs": [0.5, 1.0, 1.5], "learning_rate": [1e-3, 1e-3, 5e-4],
         "train_loss": [30.0, 20.0, 15.0], "validation_cross_entropy": [2.0, 1.5, 1.4],
         "validation_accuracy": [0.1, 0.2, 0.3], "seconds": [1.0, 2.0, 3.0]}
    )  # fmt: skip
    fig = training.learning_curve(log, "qf / Tf / final-0")
    validation, loss, rate = fig.axes
    assert list(validation.lines[0].get_ydata()) == [2.0, 1.5, 1.4]
    assert list(loss.lines[0].get_ydata()) == [30.0, 20.0, 15.0]
    assert list(rate.lines[0].get_ydata()) == [1e-3, 1e-3, 5e-4]
    assert all(list(a.lines[0].get_xdata()) == [50, 100, 150] for a in fig.axes)
    assert fig._suptitle.get_text() == "qf / Tf / final-0"
    assert training.as_png(fig).startswith(b"\x89PNG\r\n\x1a\n")


def test_metrics_break_the_generalization_set_down_by_subject(tmp_path, data_dir):
    """Oracle: each row is fruit.evaluation's means over that kind of subject alone, with
    the run's best parameters; the rows weighted by their sizes give the run's means."""
    run = training.open_run(tiny_config(data_dir), tmp_path / "run")
    run.train()
    metrics = run.finish()
    rows = metrics["by_subject"]
    assert sum(r["n"] for r in rows) == len(run.data.gen) == 20 and len(rows) >= 2
    gen, gen_linear = run.data.gen, run.data.gen_linear
    groups = subject_groups(run.task, [s for s, _ in gen])
    for row in rows:
        members = [i for i, g in enumerate(groups) if g == row["subject"]]
        alone = evaluate(
            run.model, run.task, run.vocab, test=run.data.test[:2],
            gen=[gen[i] for i in members], gen_linear=[gen_linear[i] for i in members],
        )  # fmt: skip
        assert row["n"] == len(members)
        for kind, column in (("full", "FA"), ("partial", "PA")):
            for rule in ("hierarchical", "linear"):
                assert math.isclose(row[f"{column} {rule}"], alone[kind][rule], rel_tol=1e-9)
    for kind, column in (("full", "FA"), ("partial", "PA")):
        for rule in ("hierarchical", "linear"):
            pooled = sum(r["n"] * r[f"{column} {rule}"] for r in rows) / 20
            assert math.isclose(pooled, metrics[kind][rule], rel_tol=1e-9)


def test_validation_cross_entropy_per_token_by_brute_force(tmp_path, data_dir):
    run = training.open_run(tiny_config(data_dir, dev_size=7), tmp_path / "run")
    run.model.eval()
    total = tokens = 0.0
    with torch.no_grad():
        for x, y in run.data.dev:  # one string at a time, no padding
            w = run.vocab.encode(x) + run.vocab.encode(y)
            logp = run.model(torch.tensor([w])).log_softmax(-1)[0]  # (n+1, V+1)
            nxt = w + [run.vocab.eos_id]
            total -= sum(logp[t, nxt[t]].item() for t in range(len(nxt)))
            tokens += len(nxt)
    assert run.validate() == pytest.approx(total / tokens, rel=1e-5)


def test_same_run_twice_gives_identical_metrics(tmp_path, data_dir):
    config = tiny_config(data_dir, architecture="LSTM", d=12)
    a = training.train_run(config, tmp_path / "a")
    b = training.train_run(config, tmp_path / "b")
    assert without_timing(a) == without_timing(b)
    assert log_without_seconds(tmp_path / "a") == log_without_seconds(tmp_path / "b")
    c = training.train_run(tiny_config(data_dir, architecture="LSTM", d=12, seed=8), tmp_path / "c")
    assert without_timing(c) != without_timing(a)  # the seed matters


def test_plateau_schedule_and_early_stopping(tmp_path, data_dir, monkeypatch):
    """Scripted validation scores; expectations written out from docs/paper.md §11."""
    scores = iter([5.0, 4.0, 4.0, 4.5, 3.0, 3.5, 3.5, 3.5, 1.0, 1.0])
    monkeypatch.setattr(training.Run, "validate", lambda self: next(scores))
    config = tiny_config(data_dir, checkpoint_every=10, max_epochs=50, learning_rate=0.01)
    metrics = training.train_run(config, tmp_path / "run")
    log = training.read_log(tmp_path / "run")
    lr = 0.01
    # lr in force before each checkpoint: halved after the 2nd non-improving checkpoint in a
    # row (4.0 ties are not improvements), counter restarts; stop at the 3rd bad one in a row
    assert log["learning_rate"].tolist() == pytest.approx([lr] * 4 + [lr / 2] * 3 + [lr / 4])
    assert log["validation_cross_entropy"].tolist() == [5.0, 4.0, 4.0, 4.5, 3.0, 3.5, 3.5, 3.5]
    assert metrics["best_validation_cross_entropy"] == 3.0
    best = torch.load(tmp_path / "run" / "best.pt", weights_only=False)
    assert best["examples_seen"] == log["examples_seen"][4]


def test_nan_loss_stops_the_run_as_diverged(tmp_path, data_dir):
    from fruit.models import build_model

    class Exploding(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.d, self.calls = inner, inner.d, 0

        def forward(self, tokens):
            self.calls += 1
            logits = self.inner(tokens)
            return logits * float("nan") if self.training and self.calls > 3 else logits

    def factory(config, vocab_size):
        return Exploding(build_model("Tf", vocab_size=vocab_size, d=16))

    run = training.open_run(tiny_config(data_dir), tmp_path / "run", model_factory=factory)
    run.train()
    metrics = run.finish()
    assert metrics["status"] == "diverged"
    assert "nan" in metrics["reason"] and "examples_seen=" in metrics["reason"]
    for kind in ("full", "partial"):
        assert all(v is None for v in metrics[kind].values())
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "diverged"


def test_resume_refuses_different_settings(tmp_path, data_dir):
    training.open_run(tiny_config(data_dir), tmp_path / "run")
    with pytest.raises(FruitError, match="learning_rate"):
        training.open_run(tiny_config(data_dir, learning_rate=0.5), tmp_path / "run")


# every shipped profile (sorted, "PATH.toml" first), as an unknown name's error lists them
PROFILE_CHOICES = ", ".join(sorted(["PATH.toml", *profiles.profile_names()]))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--task", "nope", "--architecture", "Tf"], "unknown task 'nope'; valid choices:"),
        (["--task", "passivization", "--architecture", "GRU"], "unknown architecture 'GRU'"),
        (["--task", "passivization", "--architecture", "Tf", "--data-dir", "/nonexistent/x"], "data directory /nonexistent/x does not exist"),
        (["--task", "passivization", "--architecture", "Tf", "--profile", "nope"], f"unknown profile 'nope'; valid choices: {PROFILE_CHOICES}"),
        (["--task", "passivization", "--architecture", "Tf", "--profile", "/nonexistent/mine.toml"], "profile file '/nonexistent/mine.toml' does not exist"),
    ],
)  # fmt: skip
def test_cli_errors_are_one_line(argv, message, capsys, tmp_path):
    code = cli_main(["train", *argv, "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("fruit: error: ") and message in err and "\n" not in err


# ---------------------------------------------------------------- resume after SIGKILL

WORKER = r"""
import json, os, signal, sys
import torch
torch.set_num_threads(1)
from fruit import training
config = training.RunConfig(**json.loads(sys.argv[1]))
kill_after = int(sys.argv[3])  # batches after the 2nd checkpoint; -1: never

class Killer:
    batches = 0
    def update(self, n):
        if kill_after >= 0 and len(run.state.log) == 2:
            if self.batches == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            self.batches += 1
    def set_postfix(self, **kw): pass
    def close(self): pass

run = training.open_run(config, sys.argv[2])
run.train(progress=Killer())
print(json.dumps(run.finish()))
"""


def run_worker(config, run_dir, kill_after):
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run(
        [sys.executable, "-c", WORKER, json.dumps(asdict(config)), str(run_dir), str(kill_after)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_resume_after_sigkill_gives_the_same_metrics(tmp_path, data_dir):
    # dropout is on (Tf), the 2nd checkpoint falls inside epoch 1, the kill lands on or
    # after it (2 updates later, so work since the checkpoint is lost and redone), and the
    # resumed run crosses an epoch boundary
    kill_after = 1
    config = tiny_config(data_dir, architecture="Tf", d=16, checkpoint_every=30)
    training.train_run(config, tmp_path / "whole")  # uninterrupted, in this process
    killed = run_worker(config, tmp_path / "killed", kill_after)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (tmp_path / "killed" / "metrics.json").exists()
    assert len((tmp_path / "killed" / "log.csv").read_text().splitlines()) == 1 + 2
    resumed = run_worker(config, tmp_path / "killed", -1)
    assert resumed.returncode == 0, resumed.stderr
    a = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    b = json.loads((tmp_path / "killed" / "metrics.json").read_text())
    assert without_timing(a) == without_timing(b)
    assert log_without_seconds(tmp_path / "whole") == log_without_seconds(tmp_path / "killed")


def test_cli_trains_a_run(tmp_path, capsys):
    argv = [
        "train", "--task", "question-formation", "--architecture", "Tf", "--d", "16",
        "--train-size", "40", "--dev-size", "10", "--test-size", "10", "--gen-size", "10",
        "--checkpoint-every", "20", "--max-epochs", "1", "--batch-tokens", "128",
        "--data-dir", str(tmp_path / "data"), "--generate-data",
        "--output-dir", str(tmp_path / "results"), "--device", "cpu", "--no-progress",
    ]  # fmt: skip
    assert cli_main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    run_dir = tmp_path / "results" / "runs" / "smoke" / "question-formation" / "Tf" / "final-0"
    assert printed == json.loads((run_dir / "metrics.json").read_text())
    assert json.loads((tmp_path / "data" / "question-formation" / "data.json").read_text())[
        "sizes"
    ] == {"train": 1000, "dev": 10, "test": 10, "gen": 10}
    # a second call finds the finished run and only prints its metrics
    assert cli_main(argv) == 0
    assert json.loads(capsys.readouterr().out) == printed


def test_fruit_train_reads_the_data_fruit_run_makes(tmp_path, monkeypatch, capsys):
    """`fruit train --profile smoke --generate-data` (all defaults) writes the data folder
    that `fruit run --profile smoke` prepares: same folder, seed, sizes and files."""
    from fruit.profiles import derive_seed, load_profile

    monkeypatch.chdir(tmp_path / ".")
    argv = [
        "train", "--task", "question-formation", "--architecture", "Tf", "--d", "16",
        "--max-epochs", "1", "--generate-data", "--device", "cpu", "--no-progress",
    ]  # fmt: skip
    assert cli_main(argv) == 0
    capsys.readouterr()
    ours = tmp_path / "data" / "smoke" / "question-formation"
    profile = load_profile("smoke")
    seed = derive_seed(profile.data_seed, "question-formation")  # the sweep's formula
    record = json.loads((ours / "data.json").read_text())
    assert record["seed"] == seed
    assert record["sizes"] == dict(profile.sizes, train=max(1000, profile.sizes["train"]))
    theirs = tmp_path / "sweep-data"
    assert training.prepare_data(theirs, "question-formation", seed, profile.sizes) == "generated"
    for name in ("train", "dev", "test", "gen", "gen.linear"):
        assert (ours / f"{name}.tsv").read_text() == (
            theirs / "question-formation" / f"{name}.tsv"
        ).read_text(), name
    # the sweep finds the folder fruit train made; a different seed is refused
    assert (
        training.prepare_data(
            tmp_path / "data" / "smoke", "question-formation", seed, profile.sizes
        )
        == "found"
    )
    with pytest.raises(FruitError, match="holds data made with"):
        training.prepare_data(
            tmp_path / "data" / "smoke", "question-formation", seed + 1, profile.sizes
        )
    config = json.loads(
        (tmp_path / "results/runs/smoke/question-formation/Tf/final-0/config.json").read_text()
    )
    assert config["data_seed"] == seed and config["train_size"] == profile.sizes["train"]


def test_run_config_from_parameters_takes_every_field():
    from dataclasses import fields

    values = {"task": "t", "architecture": "Tf", "index": "3", "learning_rate": "0.01"}
    values.update(target_params=1234, num_samples=7, lr_factor=0.25, data_seed=None, other=1)
    c = training.RunConfig.from_parameters(values)
    assert (c.index, c.learning_rate, c.target_params, c.num_samples) == (3, 0.01, 1234, 7)
    assert c.lr_factor == 0.25 and c.data_seed is None
    # every field can come from a mapping
    defaults = asdict(training.RunConfig("t", "Tf"))
    assert asdict(training.RunConfig.from_parameters(defaults)) == defaults
    assert {f.name for f in fields(training.RunConfig)} == set(defaults)


def test_profile_training_keys_are_the_run_config_fields_not_set_per_run():
    """[training] may hold a RunConfig field unless fruit run sets it per run (a profile
    value would be overridden silently) or it is derived from the run seed."""
    from dataclasses import fields

    from fruit.experiments.planning.plan import final_specs
    from fruit.profiles import _TABLE_KEYS, load_profile

    profile = load_profile("smoke")
    spec = final_specs(profile, profile.tasks[0], profile.architectures[0], 1e-3, 512)[0]
    per_run = set(spec.parameters(profile, data_dir="d", run_dir="r", results_dir="o",
                                  device="cpu", threads=1))  # fmt: skip
    per_run -= set(profile.training)
    field_names = {f.name for f in fields(training.RunConfig)}
    allowed = _TABLE_KEYS["training"]
    assert allowed <= field_names
    derived = {"parameter_seed", "shuffle_seed", "resolved"}  # from the seed; resolve_config's
    assert field_names - allowed == (per_run & field_names) | derived


def test_a_config_is_resolved_once_into_a_frozen_value_that_runs_take(tmp_path):
    """resolve_config fills every None and returns a resolved config as it is (no second
    reading of the profile); the value cannot be changed; a Run takes only a resolved one,
    and config.json records the settings, not the flag."""
    import dataclasses

    from fruit.training.config import PROFILE_FIELDS, settings_record

    given = training.RunConfig("question-formation", "Tf", profile="smoke")
    c = training.resolve_config(given)
    assert c.resolved and not given.resolved
    assert all(getattr(c, name) is not None for name in PROFILE_FIELDS)
    assert c.parameter_seed is not None and c.shuffle_seed is not None
    assert training.resolve_config(c) is c
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.learning_rate = 1.0
    assert "resolved" not in settings_record(c)
    with pytest.raises(TypeError, match="resolved RunConfig"):
        training.Run(given, tmp_path / "run", data=None)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"dropout": 2}, "model option dropout must be in"),
        ({"nd_size": 0}, "model option nd_size must be a positive integer"),
        ({"stack_size": 3}, "model option 'stack_size'"),
    ],
)
def test_model_options_are_checked_when_the_config_is_resolved(options, message, tmp_path):
    """Bad model options stop resolve_config, before any data is read or generated; the
    config keeps the overrides as given (config.json records those)."""
    given = training.RunConfig(
        "question-formation", "Tf+Nd", profile="smoke", data_dir=str(tmp_path / "data"),
        model_options=options,
    )  # fmt: skip
    with pytest.raises(FruitError, match=message):
        training.resolve_config(given)
    assert not (tmp_path / "data").exists()
    good = training.resolve_config(replace(given, model_options={"nd_size": 5}))
    assert good.model_options == {"nd_size": 5}


def test_data_errors_name_the_problem(tmp_path, data_dir):
    with pytest.raises(FruitError, match="has 120 examples but this run needs 500"):
        training.load_data(training.resolve_config(tiny_config(data_dir, train_size=500)))
    partial = tmp_path / "published" / "question-formation"
    partial.mkdir(parents=True)
    (partial / "dev.tsv").write_text("a . decl\ta .\n")
    config = tiny_config(tmp_path / "published", generate_data=True)
    # the message names what to do without advising a command that would make other data
    with pytest.raises(
        FruitError, match="train.tsv is missing; remove that folder to have it made"
    ):
        training.load_data(training.resolve_config(config))
    assert sorted(p.name for p in partial.iterdir()) == ["dev.tsv"]  # never overwritten


# ---------------------------------------------------------------- profiles (fruit.profiles)


def shipped_toml(name: str) -> dict:
    """A shipped profile read with tomllib alone: the oracle for what resolve_config fills."""
    try:  # the same fallback as fruit.profiles
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    return tomllib.loads((Path(profiles.__file__).parent / f"{name}.toml").read_text())


def expected_max_epochs(raw: dict, phase: str, architecture: str) -> int:
    epochs = raw[phase]["max_epochs"]
    return epochs.get(architecture, epochs["default"]) if isinstance(epochs, dict) else epochs


@pytest.mark.parametrize("name", ["smoke", "quick", "paper"])
def test_sizes_come_from_the_profile_file(name):
    raw = shipped_toml(name)
    for phase in ("search", "final"):
        for architecture in ("Tf", "Tf+Nd", "LSTM+Sup+R"):
            c = training.resolve_config(
                training.RunConfig("passivization", architecture, profile=name, phase=phase)
            )
            sizes = (c.train_size, c.dev_size, c.test_size, c.gen_size)
            assert sizes == tuple(raw["data"][s] for s in ("train", "dev", "test", "gen"))
            assert c.checkpoint_every == raw["training"]["checkpoint_every"]
            assert c.max_epochs == expected_max_epochs(raw, phase, architecture)
            assert c.profile == name
            assert c.parameter_seed != c.shuffle_seed and c.sampling_seed == 123


def test_per_architecture_epochs_and_explicit_fields_win():
    raw = shipped_toml("quick")
    assert isinstance(raw["final"]["max_epochs"], dict)  # else this test shows nothing
    tf, lstm = (
        training.resolve_config(training.RunConfig("passivization", a, profile="quick"))
        for a in ("Tf", "LSTM")
    )
    assert (tf.max_epochs, lstm.max_epochs) == (
        raw["final"]["max_epochs"]["default"],
        raw["final"]["max_epochs"]["LSTM"],
    )
    assert tf.max_epochs != lstm.max_epochs
    c = training.resolve_config(
        training.RunConfig("passivization", "LSTM", profile="quick", train_size=5, max_epochs=9)
    )
    assert (c.train_size, c.max_epochs) == (5, 9)
    assert (c.dev_size, c.checkpoint_every) == (
        raw["data"]["dev"],
        raw["training"]["checkpoint_every"],
    )


USER_PROFILE = """
name = "mine"
tasks = ["question-formation"]
architectures = ["Tf"]
[data]
train = 40
dev = 10
test = 10
gen = 10
[search]
trials = 1
max_epochs = 3
[final]
max_epochs = { default = 2, "Tf" = 1 }
[training]
checkpoint_every = 20
num_samples = 3
lr_factor = 0.25
"""


def test_user_profile_file_and_unknown_names(tmp_path):
    path = tmp_path / "my-profile.toml"
    path.write_text(USER_PROFILE)
    c = training.resolve_config(training.RunConfig("passivization", "Tf", profile=str(path)))
    assert (c.train_size, c.dev_size, c.checkpoint_every, c.max_epochs) == (40, 10, 20, 1)
    assert c.profile == "mine"  # the name its results go under, not the path
    c = training.resolve_config(training.RunConfig("passivization", "LSTM", profile=str(path)))
    assert c.max_epochs == 2
    c = training.resolve_config(
        training.RunConfig("passivization", "LSTM", profile=str(path), phase="search")
    )
    assert c.max_epochs == 3
    # without [training] checkpoint_every: the paper's 80,000 (docs/paper.md §12.1)
    path.write_text(USER_PROFILE.replace("checkpoint_every = 20", ""))
    c = training.resolve_config(training.RunConfig("passivization", "Tf", profile=str(path)))
    assert c.checkpoint_every == 80_000
    with pytest.raises(FruitError, match="profile file '.*nope.toml' does not exist"):
        training.resolve_config(training.RunConfig("passivization", "LSTM", profile="nope.toml"))
    with pytest.raises(
        FruitError,
        match=rf"^unknown profile 'mine'; valid choices: {re.escape(PROFILE_CHOICES)}$",
    ):
        training.resolve_config(training.RunConfig("passivization", "LSTM", profile="mine"))
    # every size and the data explicit (as fruit run passes them): the name needs no file
    sizes = dict(
        train_size=1, dev_size=1, test_size=1, gen_size=1, checkpoint_every=1, max_epochs=1,
        data_dir="data/mine", data_seed=5, data_source="generated",
    )  # fmt: skip
    c = training.resolve_config(
        training.RunConfig("passivization", "LSTM", profile="mine", **sizes)
    )
    assert c.profile == "mine"
    assert not hasattr(training, "PROFILES")  # one source of sizes: the TOML files


def test_cli_trains_with_a_user_profile_file(tmp_path, capsys):
    path = tmp_path / "my-profile.toml"
    path.write_text(USER_PROFILE)
    argv = [
        "train", "--task", "question-formation", "--architecture", "Tf", "--d", "16",
        "--profile", str(path), "--batch-tokens", "128",
        "--data-dir", str(tmp_path / "data"), "--generate-data",
        "--output-dir", str(tmp_path / "results"), "--device", "cpu", "--no-progress",
    ]  # fmt: skip
    assert cli_main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    run_dir = tmp_path / "results" / "runs" / "mine" / "question-formation" / "Tf" / "final-0"
    assert printed == json.loads((run_dir / "metrics.json").read_text())
    assert printed["profile"] == "mine" and printed["examples_seen"] == 40  # 1 epoch of 40
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["train_size"], config["checkpoint_every"], config["max_epochs"]) == (40, 20, 1)
    assert (config["num_samples"], config["lr_factor"]) == (3, 0.25)  # [training], as fruit run
    log = training.read_log(run_dir)  # a checkpoint every 20 examples, from the file
    assert [e // 20 for e in log["examples_seen"]] == [1, 2]


class FakeClock:
    """time.time() for fruit.training.pacing that advances one second per call, so a run with
    ``stop_at = start + k`` pauses after a known number of batches."""

    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        self.now += 1.0
        return self.now


CUDA_ARCHITECTURES = ["Tf", "Tf+Sup", "Tf+Nd", "RNN+Sup+R", "LSTM+Nd"]


@pytest.mark.parametrize(
    "architecture, device",
    [("Tf", "cpu"), pytest.param("Tf+Nd", "cpu", marks=pytest.mark.slow)]
    + [pytest.param(a, "cuda", marks=pytest.mark.gpu) for a in CUDA_ARCHITECTURES],
)
def test_paused_runs_resume_to_the_uninterrupted_result(
    tmp_path, data_dir, monkeypatch, architecture, device
):
    # pauses mid-epoch, between validation checkpoints and on an epoch boundary; each
    # process-level resume (a new Run) must continue exactly where the last one stopped
    config = tiny_config(
        data_dir, architecture=architecture, checkpoint_every=30, max_epochs=3, device=device
    )
    whole = training.train_run(config, tmp_path / "whole")
    clock = FakeClock()
    monkeypatch.setattr(pacing.time, "time", clock)
    pauses = 0
    for budget in (3, 2, 7, 1, 4, 10_000):
        run = training.open_run(config, tmp_path / "paused")
        seen = run.state.examples_seen
        run.train(stop_at=clock.now + budget)
        if not run.paused:
            break
        pauses += 1
        assert run.state.examples_seen > seen  # every call trains at least one batch
        marker = json.loads((tmp_path / "paused" / "paused.json").read_text())
        assert (marker["resumed_from"], marker["examples_seen"]) == (seen, run.state.examples_seen)
        assert not (tmp_path / "paused" / "metrics.json").exists()
        # a stop already past: still one batch, then the pause (a time-limited loop ends)
        seen = run.state.examples_seen
        assert training.train_run(config, tmp_path / "paused", stop_at=clock.now - 100) is None
        marker = json.loads((tmp_path / "paused" / "paused.json").read_text())
        assert marker["resumed_from"] == seen < marker["examples_seen"]
    assert pauses >= 4
    resumed = run.finish()
    assert without_timing(resumed) == without_timing(whole)
    assert log_without_seconds(tmp_path / "whole") == log_without_seconds(tmp_path / "paused")


def test_a_pause_file_pauses_before_the_next_batch_and_the_run_resumes_exactly(tmp_path, data_dir):
    config = tiny_config(data_dir, checkpoint_every=30, max_epochs=2)
    whole = training.train_run(config, tmp_path / "whole")
    pause = tmp_path / "PAUSE"
    seen = []

    def at_checkpoint(run, row):  # ask for a pause at the first checkpoint
        seen.append(run.state.examples_seen)
        pause.touch()

    run = training.open_run(config, tmp_path / "paused")
    run.train(on_checkpoint=at_checkpoint, pause_file=pause)
    assert run.paused and run.state.examples_seen == seen[0]  # not one batch more
    assert not (tmp_path / "paused" / "metrics.json").exists()
    run = training.open_run(config, tmp_path / "paused")
    run.train(pause_file=pause)  # the file is still there: pauses again at once
    assert run.paused and run.state.examples_seen == seen[0]
    pause.unlink()
    resumed = training.train_run(config, tmp_path / "paused", stop_at=None)
    assert without_timing(resumed) == without_timing(whole)


def test_a_paused_run_carried_elsewhere_goes_on_with_its_prepared_data_there(tmp_path):
    """A run folder and its data folder moved to other paths, as on another machine:
    the run resumes there and ends as an uninterrupted run; with other data there (the
    checkpoint's digest of the examples differs) it is refused, naming data_dir."""
    import shutil

    here, there = tmp_path / "here", tmp_path / "there"
    config = tiny_config(here / "data", checkpoint_every=30, max_epochs=2, generate_data=True)
    whole = training.train_run(config, tmp_path / "whole")
    pause = tmp_path / "PAUSE"
    pause.touch()
    training.open_run(config, here / "run").train(pause_file=pause)
    pause.unlink()
    assert (here / "run" / "checkpoint.pt").is_file()
    shutil.copytree(here, there)
    moved = tiny_config(there / "data", checkpoint_every=30, max_epochs=2, generate_data=True)
    resumed = training.train_run(moved, there / "run")
    assert without_timing(resumed) == without_timing(whole)

    elsewhere = tmp_path / "elsewhere"  # the same run folder, other data (dev reversed)
    shutil.copytree(here, elsewhere)
    (elsewhere / "data" / "question-formation" / "data.json").unlink()  # a user's own
    dev = elsewhere / "data" / "question-formation" / "dev.tsv"
    dev.write_text("".join(reversed(dev.read_text().splitlines(keepends=True))))
    other = tiny_config(elsewhere / "data", checkpoint_every=30, max_epochs=2)
    with pytest.raises(FruitError, match="holds a run with other settings \\(data_dir: "):
        training.open_run(other, elsewhere / "run")
    (elsewhere / "data" / "question-formation" / "dev.tsv").write_text(
        (here / "data" / "question-formation" / "dev.tsv").read_text()
    )  # the same examples again, in a folder fruit did not make: it goes on
    assert without_timing(training.train_run(other, elsewhere / "run")) == without_timing(whole)


def test_a_run_resumed_by_another_commit_says_so_once(tmp_path, data_dir):
    from fruit.provenance import git_state

    if git_state()["commit"] is None:
        pytest.skip("the code does not run from a git checkout: no commit to compare")
    config = tiny_config(data_dir, checkpoint_every=30, max_epochs=2)
    pause = tmp_path / "PAUSE"
    run_dir = tmp_path / "run"
    pause.touch()
    for _ in range(2):  # paused before its first batch, then resumed by the same code
        training.open_run(config, run_dir).train(pause_file=pause)
    assert (run_dir / "checkpoint.pt").is_file() and not (run_dir / "warnings.log").exists()
    # config.json now says another commit started the run
    record = json.loads((run_dir / "config.json").read_text())
    record["provenance"]["git"]["commit"] = "0123456789" * 4
    (run_dir / "config.json").write_text(json.dumps(record))
    for _ in range(2):  # two more pauses: one warning, not two
        training.open_run(config, run_dir).train(pause_file=pause)
    pause.unlink()
    metrics = training.train_run(config, run_dir, stop_at=None)
    (warning,) = metrics["warnings"]
    assert "resumed by commit " in warning and "started by 0123456" in warning


def test_a_run_resumed_on_another_cpu_kind_or_device_says_so_and_the_captions_name_it(
    tmp_path, data_dir
):
    """As for a commit: a run that started on another kind of CPU (model or vector width)
    or another device than it resumes on says so once in warnings.log and metrics.json,
    and the tables' captions name both CPUs and count the run as resumed elsewhere."""
    from fruit.provenance import provenance
    from fruit.reporting.render import caption
    from fruit.reporting.runs import load_runs
    from fruit.reporting.tables import aggregate
    from fruit.resumed import cpu_kind, resumed_elsewhere

    here = cpu_kind(provenance("cpu"))
    if here is None:
        pytest.skip("this machine's CPU is not known: nothing to compare")
    config = tiny_config(data_dir, checkpoint_every=30, max_epochs=2)
    run_dir = tmp_path / "results" / "runs" / "smoke" / "question-formation" / "Tf" / "final-0"
    pause = tmp_path / "PAUSE"
    pause.touch()
    training.open_run(config, run_dir).train(pause_file=pause)
    # config.json now says the run started on another CPU kind, on a CUDA device
    record = json.loads((run_dir / "config.json").read_text())
    record["provenance"].update(cpu="Other CPU 9000", cpu_capability="AVX2", gpu="Some GPU")
    record["device"] = "cuda:0"
    (run_dir / "config.json").write_text(json.dumps(record))
    for _ in range(2):  # two pauses: each warning once
        training.open_run(config, run_dir).train(pause_file=pause)
    pause.unlink()
    metrics = training.train_run(config, run_dir, stop_at=None)
    assert len(metrics["warnings"]) == 2, metrics["warnings"]
    assert resumed_elsewhere(metrics["warnings"]) == {
        "commit": [], "cpu": [here], "device": ["cpu"],
    }  # fmt: skip
    runs = load_runs(tmp_path / "results", "smoke")
    (run,) = runs
    assert run.moved and run.cpus == ["Other CPU 9000 (AVX2)", here]
    text = caption(aggregate(runs, "question-formation", "smoke"))
    assert f"CPUs {', '.join(sorted(['Other CPU 9000 (AVX2)', here]))}" in text
    assert "1 run(s) resumed under another commit, CPU or device" in text


# The training state in checkpoint.pt as the code has always written it: a plain dict with
# exactly these keys (runs paused by earlier versions must resume, and the other way round).
CHECKPOINT_STATE_KEYS = {
    "epoch",
    "batch_index",
    "epoch_rng_state",
    "examples_seen",
    "since_checkpoint",
    "loss_sum",
    "loss_count",
    "best",
    "bad_checkpoints",
    "stopped",
    "training_done",
    "diverged",
    "seconds",
    "log",
}


def test_checkpoint_state_stays_a_plain_dict_that_resumes(tmp_path, data_dir, monkeypatch):
    config = tiny_config(data_dir, architecture="Tf", checkpoint_every=30, max_epochs=2)
    whole = training.train_run(config, tmp_path / "whole")
    clock = FakeClock()
    monkeypatch.setattr(pacing.time, "time", clock)
    run = training.open_run(config, tmp_path / "paused")
    run.train(stop_at=clock.now + 5)  # mid-epoch, after a checkpoint
    assert run.paused and run.state.log
    path = tmp_path / "paused" / "checkpoint.pt"
    checkpoint = torch.load(path, weights_only=False)
    assert type(checkpoint["state"]) is dict
    assert set(checkpoint["state"]) == CHECKPOINT_STATE_KEYS
    # as an earlier version wrote it: no TrainingState anywhere in the file
    checkpoint["state"] = {k: checkpoint["state"][k] for k in sorted(CHECKPOINT_STATE_KEYS)}
    torch.save(checkpoint, path)
    resumed = training.open_run(config, tmp_path / "paused")
    assert resumed.state == training.TrainingState(**checkpoint["state"])
    resumed.train()
    assert without_timing(resumed.finish()) == without_timing(whole)
    assert log_without_seconds(tmp_path / "whole") == log_without_seconds(tmp_path / "paused")
    checkpoint["state"].pop("log")
    torch.save(checkpoint, path)
    (tmp_path / "paused" / "metrics.json").unlink()
    with pytest.raises(FruitError, match="training state lacks log"):
        training.open_run(config, tmp_path / "paused")


def test_published_data_is_prepared_whole_or_not_at_all(tmp_path, datasets_dir, monkeypatch):
    # the claims profile's data: published dev/test/gen, a generated train split avoiding
    # them; a preparation killed half-way leaves nothing, and the next one is identical
    from fruit.tasks import read_tsv
    from fruit.tasks import splits as splits_module

    sizes = {"train": 1000, "dev": 1000, "test": 10_000, "gen": 10_000}
    task = "question-formation"
    whole = tmp_path / "whole"
    assert training.prepare_data(whole, task, 5, sizes, "published", datasets_dir) == "generated"
    folder = whole / task
    record = json.loads((folder / "data.json").read_text())
    assert record["source"] == "published" and record["sizes"] == sizes
    assert (folder / "test.tsv").read_bytes() == (datasets_dir / task / "test.tsv").read_bytes()
    published = {
        " ".join(s)
        for split in ("dev", "test", "gen")
        for s, _ in read_tsv(folder / f"{split}.tsv")
    }
    assert not published & {" ".join(s) for s, _ in read_tsv(folder / "train.tsv")}
    with pytest.raises(FruitError, match="needs generated data"):
        training.prepare_data(whole, task, 5, sizes, "generated")

    broken = tmp_path / "broken"
    real_write = splits_module.write_tsv
    calls = []

    def dies_on_the_third_file(path, examples):
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt  # a kill in the middle of writing the folder
        real_write(path, examples)

    monkeypatch.setattr(splits_module, "write_tsv", dies_on_the_third_file)
    with pytest.raises(KeyboardInterrupt):
        training.prepare_data(broken, task, 5, sizes, "published", datasets_dir)
    monkeypatch.setattr(splits_module, "write_tsv", real_write)
    assert list(broken.iterdir()) == []  # no task folder, no staging folder
    assert training.prepare_data(broken, task, 5, sizes, "published", datasets_dir) == "generated"
    for name in ("train", "dev", "test", "gen", "gen.linear"):
        assert (broken / task / f"{name}.tsv").read_bytes() == (folder / f"{name}.tsv").read_bytes()


def test_provenance_names_the_commit_and_sees_a_dirty_tree(tmp_path):
    import subprocess

    from fruit.provenance import git_state, provenance

    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    (repo / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert git_state(repo) == {"commit": head, "dirty": False}
    (repo / "notes.txt").write_text("untracked files do not make the tree dirty\n")
    assert git_state(repo)["dirty"] is False
    (repo / "code.py").write_text("x = 2\n")  # a tracked file changed
    assert git_state(repo) == {"commit": head, "dirty": True}
    assert git_state(tmp_path / "nowhere") == {"commit": None, "dirty": None}
    record = provenance("cpu")
    assert set(record) == {"git", "versions", "cpu", "cpu_capability", "gpu", "host"}
    assert record["gpu"] is None
    import torch  # the kernels' vector instructions: AVX2 and AVX-512 round differently

    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["versions"]["torch"] and record["versions"]["dask"]


def test_text_progress_bar_off_a_terminal_redraws_rarely(monkeypatch):
    # Under papermill a text bar's every redraw becomes one notebook output that papermill
    # saves and validates with the whole notebook (4,000+ per quick run, seen): off a
    # terminal the bar redraws every 30 s; on one, as often as tqdm likes.
    from fruit.training import progress as bars

    monkeypatch.setattr(bars, "is_widget", lambda cls: False)
    monkeypatch.setattr(bars, "on_terminal", lambda: False)
    bar = bars.progress_bar(True, 10)
    assert bar.mininterval == bars.TEXT_BAR_SECONDS >= 30
    bar.close()
    monkeypatch.setattr(bars, "on_terminal", lambda: True)
    bar = bars.progress_bar(True, 10)
    assert bar.mininterval < 1
    bar.close()
    assert bars.progress_bar(False, 10) is None


def test_progress_bar_redraw_interval_can_be_set(monkeypatch):
    from fruit.training import progress as bars

    monkeypatch.setattr(bars, "on_terminal", lambda: True)
    bar = bars.progress_bar(True, 10, seconds=10.0)
    assert bar.mininterval == 10.0
    bar.close()
