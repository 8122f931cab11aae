"""fruit.experiments.planning.reuse: a profile takes over another profile's records of the very
same runs, and only those. Oracle: the runs themselves, trained under each profile."""

from __future__ import annotations

import json

import pytest

from fruit import training
from fruit.errors import FruitError
from fruit.experiments.planning.plan import check_metrics_match, search_specs
from fruit.experiments.planning.reuse import reusable_runs, take_over
from fruit.profiles import load_profile
from fruit.training.data import prepare_data

TASK = "question-formation"
PROFILE = """
name = "{name}"
seed = 11
tasks = ["question-formation"]
architectures = ["Tf"]
{extra}
[data]
seed = 3
train = 60
dev = 10
test = 10
gen = 10
[search]
trials = {trials}
max_epochs = 3
learning_rate = {lr}
[final]
runs = 1
max_epochs = 1
[training]
checkpoint_every = 20
d = 16
{training}
"""


def profile(tmp_path, name, trials=2, lr="[1e-5, 1e-3]", extra="", training_lines=""):
    path = tmp_path / f"{name}.toml"
    text = PROFILE.format(name=name, trials=trials, lr=lr, extra=extra, training=training_lines)
    path.write_text(text)
    return load_profile(path)


def config(spec, prof, data_dir):
    params = spec.parameters(
        prof, data_dir=data_dir, run_dir="", results_dir="", device="cpu", threads=None
    )
    return training.RunConfig.from_parameters(params)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Profile "src"'s two search trials, trained; trial 1 paused half way."""
    tmp_path = tmp_path_factory.mktemp("reuse")
    src = profile(tmp_path, "src")
    data_dir = tmp_path / "data"
    prepare_data(data_dir, TASK, src.task_data_seed(TASK), src.sizes)  # as a sweep makes it
    results = tmp_path / "results"
    first, second = search_specs(src, TASK, "Tf")
    training.train_run(config(first, src, data_dir), first.folder(results))
    run = training.open_run(config(second, src, data_dir), second.folder(results))
    run.train(
        on_checkpoint=lambda run, row: (tmp_path / "PAUSE").touch(), pause_file=tmp_path / "PAUSE"
    )
    assert run.paused
    return tmp_path, data_dir, results


def test_the_same_runs_are_taken_over_and_go_on(trained, tmp_path):
    root, data_dir, results = trained
    dst = profile(root, "dst", trials=3, extra='reuse = ["src"]')
    found = reusable_runs(dst, results, data_dir)
    assert [(r.spec.index, r.finished) for r in found] == [(0, True), (1, False)]
    for r in found:
        take_over(r, dst, results)
    # the finished trial: the source's metrics under this profile, saying where from
    spec0, spec1, spec2 = search_specs(dst, TASK, "Tf")
    src_metrics = json.loads((results / "runs/src" / TASK / "Tf/search-0/metrics.json").read_text())
    metrics = json.loads((spec0.folder(results) / "metrics.json").read_text())
    check_metrics_match(spec0, metrics, spec0.folder(results))
    assert metrics.pop("reused_from") == "src/question-formation/Tf/search-0"
    assert metrics.pop("profile") == "dst"
    assert metrics == {k: v for k, v in src_metrics.items() if k != "profile"}
    # trained again under this profile, it would refuse nothing and return those records
    assert (
        training.train_run(config(spec0, dst, data_dir), spec0.folder(results))["full"]
        == (src_metrics["full"])
    )
    # the paused trial resumes under this profile to what an uninterrupted run gives
    resumed = training.train_run(config(spec1, dst, data_dir), spec1.folder(results))
    whole = training.train_run(config(spec1, dst, data_dir), tmp_path / "whole")
    assert resumed["full"] == whole["full"] and resumed["epochs"] == whole["epochs"]
    # nothing is taken over twice, and trial 2 (not run under src) is not there to take
    assert reusable_runs(dst, results, data_dir) == []


@pytest.mark.parametrize(
    "changes",
    [
        {"training_lines": "clip_norm = 5.0"},  # another training setting
        {"lr": "[1e-4, 1e-3]"},  # other draws of the learning rate
        {"extra": ""},  # reuse not asked for
    ],
)
def test_other_runs_are_not_taken_over(trained, changes):
    root, data_dir, results = trained
    settings = {"extra": 'reuse = ["src"]', **changes}
    other = profile(root, "other", **settings)
    assert reusable_runs(other, results, data_dir) == []


def test_a_damaged_or_contradicting_source_is_named_not_retrained_or_copied(trained, tmp_path):
    """A source run whose config.json is damaged is not silently trained again (hours for
    paper-search): one line names the file. One whose config.json and metrics.json
    contradict each other is not copied: the line names the source, not a copy."""
    import shutil

    root, data_dir, results = trained
    mine = tmp_path / "results"
    shutil.copytree(results / "runs" / "src", mine / "runs" / "src")  # dst: nothing yet
    dst = profile(root, "dst", trials=3, extra='reuse = ["src"]')
    source = mine / "runs/src" / TASK / "Tf/search-0"
    good = (source / "config.json").read_text()
    (source / "config.json").write_text(good[: len(good) // 2])
    with pytest.raises(FruitError, match=r"search-0/config\.json.*cannot be told") as caught:
        reusable_runs(dst, mine, data_dir)
    assert str(source) in str(caught.value) and "\n" not in str(caught.value)
    (source / "config.json").write_text(good)
    metrics = json.loads((source / "metrics.json").read_text())
    (source / "metrics.json").write_text(json.dumps({**metrics, "num_parameters": 1}))
    with pytest.raises(FruitError, match="records disagree") as caught:
        reusable_runs(dst, mine, data_dir)
    assert str(source) in str(caught.value)
    assert not (mine / "runs/dst").exists()  # nothing copied


def test_a_profile_cannot_reuse_itself_or_a_non_list(tmp_path):
    with pytest.raises(FruitError, match="reuse names the profile itself"):
        profile(tmp_path, "me", extra='reuse = ["me"]')
    with pytest.raises(FruitError, match="reuse must be a list"):
        profile(tmp_path, "me", extra='reuse = "claims"')


def test_the_dry_run_names_the_runs_it_will_take_over(trained):
    from fruit.experiments.planning.cost import describe

    root, data_dir, results = trained
    dry = profile(root, "dry", trials=3, extra='reuse = ["src"]')
    text = describe(dry, results_dir=results)
    assert (
        "the same runs, to take over: src/question-formation/Tf/search-0 (finished), "
        "src/question-formation/Tf/search-1 (paused)"
    ) in text
    assert "left: 3 runs" in text  # 4 planned (3 trials + 1 final), one finished elsewhere
