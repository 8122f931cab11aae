"""Profiles, seeds, search draws and selection (fruit.experiments): fast, no Dask."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from fruit.errors import FruitError
from fruit.experiments.planning.plan import (
    draw_search_setting,
    final_specs,
    plan,
    search_specs,
    select_best,
)
from fruit.names import PAPER_ARCHITECTURES
from fruit.profiles import derive_seed, load_profile, profile_names

SHIPPED = ("smoke", "quick", "paper", "claims")


def test_shipped_profiles_load():
    assert set(SHIPPED) <= set(profile_names())
    for name in SHIPPED:
        p = load_profile(name)
        assert p.name == name
        assert p.tasks and p.architectures


def test_paper_profile_is_the_paper():
    from fruit.names import PAPER_ARCHITECTURES
    from fruit.tasks import PAPER_TASKS

    p = load_profile("paper")
    assert p.tasks == PAPER_TASKS
    assert set(p.architectures) == set(PAPER_ARCHITECTURES) and len(p.architectures) == 15
    assert p.sizes == {"train": 100_000, "dev": 1_000, "test": 10_000, "gen": 10_000}
    assert p.search_trials == 10
    assert all(p.max_epochs("search", a) == 5 for a in p.architectures)
    assert p.batch_tokens_range == (512, 2048)
    assert p.learning_rate_range == (1e-5, 1e-3)
    assert p.final_runs == 5
    assert all(p.max_epochs("final", a) == 1000 for a in p.architectures)
    assert p.training["checkpoint_every"] == 80_000
    assert not p.reduced


def test_quick_profile_promises():
    p = load_profile("quick")
    assert p.reduced
    assert "question-formation" in p.tasks
    # the pairs of claim C1, with enough final runs for the exact sign-flip test to
    # reach 0.05 (2^-runs < 0.05)
    assert {"Tf", "LSTM"} <= set(p.architectures)
    assert 2.0**-p.final_runs < 0.05


def test_unknown_profile_lists_choices():
    with pytest.raises(FruitError, match="unknown profile 'nope'.*paper.*quick.*smoke"):
        load_profile("nope")


def test_user_profile_file(tmp_path: Path):
    path = tmp_path / "mine.toml"
    path.write_text(
        'tasks = ["passivization"]\narchitectures = ["LSTM"]\nseed = 3\n'
        "[data]\ntrain = 10\ndev = 2\ntest = 2\ngen = 2\n"
        "[search]\ntrials = 2\n[final]\nruns = 7\n"
    )
    p = load_profile(path)
    assert p.name == "mine" and p.final_runs == 7 and p.search_trials == 2
    assert p.tasks == ("passivization",)


DATA = "[data]\ntrain = 10\ndev = 2\ntest = 2\ngen = 2\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (
            'tasks = ["question-formation"]\narchitectures = ["Tf"]\ntrails = 3\n',
            "unknown key 'trails'",
        ),
        ('tasks = ["nope"]\narchitectures = ["Tf"]\n', "unknown task 'nope'.*passivization"),
        (
            'tasks = ["passivization"]\narchitectures = ["Tf+Foo"]\n',
            "unknown architecture 'Tf\\+Foo'",
        ),
        ('tasks = ["passivization"]\narchitectures = ["Tf"]\n[data]\ntrain = 1\n', "needs dev"),
        ("tasks = [", "not valid TOML"),
        (
            'tasks = ["passivization"]\narchitectures = ["Tf"]\n'
            + DATA
            + "[search]\ntrials = 2\nlearning_rate = [1e-5, inf]\n",
            "search.learning_rate must be \\[low, high\\], finite numbers",
        ),
        (
            'tasks = ["passivization"]\narchitectures = ["Tf"]\n'
            + DATA
            + '[search]\ntrials = 2\nlearning_rate = ["1e-5", 1e-3]\n',
            "search.learning_rate must be \\[low, high\\], finite numbers",
        ),
        (
            'tasks = ["passivization"]\narchitectures = ["Tf"]\n'
            + DATA
            + "[search]\ntrials = 0\n[final]\nbatch_tokens = 600\nlearning_rate = nan\n",
            "final.learning_rate must be a finite number above 0, not nan",
        ),
        (  # it planned 5 final runs of up to 1000 epochs without a word (issue 34)
            'tasks = ["passivization"]\narchitectures = ["Tf"]\n' + DATA + "[search]\ntrials = 2\n",
            r"\[final\] is missing: give runs = <final runs per pair> and max_epochs = ",
        ),
        (
            'tasks = ["passivization"]\narchitectures = ["Tf"]\n[training]\ncheckpoint_evry = 5\n',
            r"^profile .*bad.toml: unknown key in \[training\] 'checkpoint_evry'; "
            r"valid choices: checkpoint_every, .*target_params$",
        ),
    ],
)
def test_bad_profiles_are_explained(tmp_path: Path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(FruitError, match=message):
        load_profile(path)


def test_seeds_are_deterministic_distinct_and_32_bit():
    p = load_profile("paper")
    seeds = [s.seed for t in p.tasks for a in p.architectures for s in search_specs(p, t, a)]
    seeds += [
        s.seed for t in p.tasks for a in p.architectures for s in final_specs(p, t, a, 1e-4, 1000)
    ]
    assert len(seeds) == 7 * 15 * 15 and len(set(seeds)) == len(seeds)
    assert all(0 <= s < 2**32 for s in seeds)
    again = [s.seed for s in search_specs(load_profile("paper"), p.tasks[0], p.architectures[0])]
    assert again == seeds[:10]
    assert derive_seed(1, "a") != derive_seed(2, "a")


def test_search_draws_match_their_distributions():
    p = load_profile("paper")
    draws = [draw_search_setting(p, "t", "a", i) for i in range(4000)]
    b = [d[1] for d in draws]
    log_lr = [math.log10(d[2]) for d in draws]
    assert min(b) >= 512 and max(b) <= 2048 and all(isinstance(x, int) for x in b)
    # uniform over integers: mean (512+2048)/2, both ends reachable
    assert abs(sum(b) / len(b) - 1280) < 20
    assert min(b) < 520 and max(b) > 2040
    # log-uniform: log10(lr) uniform on [-5, -3]: mean -4, quarter of mass below -4.5
    assert all(-5 <= x <= -3 for x in log_lr)
    assert abs(sum(log_lr) / len(log_lr) + 4) < 0.03
    assert abs(sum(x < -4.5 for x in log_lr) / len(log_lr) - 0.25) < 0.03
    # the draw is reproducible from the recorded draw seed alone
    draw_seed, b0, lr0 = draws[0]
    rng = random.Random(draw_seed)
    assert rng.randint(512, 2048) == b0
    assert math.isclose(math.exp(rng.uniform(math.log(1e-5), math.log(1e-3))), lr0)


def test_plan_records_every_seed_and_draw():
    p = load_profile("smoke")
    recorded = plan(p)
    assert len(recorded["search"]) == len(p.tasks) * len(p.architectures) * p.search_trials
    first = recorded["search"][0]
    assert {"seed", "draw_seed", "learning_rate", "batch_tokens"} <= set(first)
    # every run its own seed, every draw inside the profile's ranges, every pair its finals
    finals = recorded["final_seeds"]
    assert set(finals) == {f"{t}/{a}" for t, a in p.pairs}
    assert all(len(seeds) == p.final_runs for seeds in finals.values())
    seeds = [r["seed"] for r in recorded["search"]] + [s for v in finals.values() for s in v]
    assert len(set(seeds)) == len(seeds)
    (lo_lr, hi_lr), (lo_b, hi_b) = p.learning_rate_range, p.batch_tokens_range
    for r in recorded["search"]:
        assert lo_lr <= r["learning_rate"] <= hi_lr and lo_b <= r["batch_tokens"] <= hi_b, r


def test_select_best_against_brute_force():
    rng = random.Random(0)
    for _ in range(200):
        trials = [
            {
                "index": i,
                "best_validation_cross_entropy": rng.choice([rng.random(), None, float("nan")]),
            }
            for i in range(rng.randint(1, 6))
        ]
        finite = [
            t
            for t in trials
            if isinstance(t["best_validation_cross_entropy"], float)
            and not math.isnan(t["best_validation_cross_entropy"])
        ]
        best = select_best(trials)
        if not finite:
            assert best is None
            continue
        lowest = min(t["best_validation_cross_entropy"] for t in finite)
        assert best["best_validation_cross_entropy"] == lowest
        assert best["index"] == min(
            t["index"] for t in finite if t["best_validation_cross_entropy"] == lowest
        )


def test_max_epochs_per_architecture(tmp_path: Path):
    head = 'tasks = ["passivization"]\narchitectures = ["Tf", "Tf+Nd"]\n[data]\ntrain = 1\ndev = 1\ntest = 1\ngen = 1\n[search]\ntrials = 1\n'
    path = tmp_path / "p.toml"
    path.write_text(head + '[final]\nmax_epochs = { default = 6, "Tf+Nd" = 2 }\n')
    p = load_profile(path)
    assert p.max_epochs("final", "Tf") == 6 and p.max_epochs("final", "Tf+Nd") == 2
    assert [s.max_epochs for s in final_specs(p, "passivization", "Tf+Nd", 1e-3, 512)] == [2] * 5
    path.write_text(head + '[final]\nmax_epochs = { default = 2, "Tf+Sup" = 3 }\n')
    assert load_profile(path).max_epochs("final", "Tf") == 2  # Tf+Sup: not in this profile
    path.write_text(head + '[final]\nmax_epochs = { "Tf+Foo" = 2 }\n')
    with pytest.raises(FruitError, match="unknown key in final.max_epochs 'Tf\\+Foo'"):
        load_profile(path)
    path.write_text(head + '[final]\nmax_epochs = { "Tf" = 2 }\n')
    with pytest.raises(FruitError, match="needs a 'default'"):
        load_profile(path)


def test_progress_asks_a_growing_cluster_for_its_slots(monkeypatch):
    """A batch-job cluster starts with no worker: the estimate follows the slots it has
    now, asked at most every SLOTS_SECONDS, not the 1 it had at the start."""
    from fruit.experiments.execution import progress as progress_module
    from fruit.experiments.execution.progress import Progress

    p = load_profile("paper")
    left = search_specs(p, "passivization", "Tf")[1:5]  # 4 runs of 50 s
    slots = [0]
    progress = Progress(total=10, slots=lambda: slots[0], stream=None, label="paper")
    progress.add_run(search_specs(p, "passivization", "Tf")[0], 50.0)
    assert progress.estimate(left) == 4 * 50  # no worker yet: one slot
    slots[0] = 4
    assert progress.estimate(left) == 4 * 50  # asked again only after SLOTS_SECONDS
    monkeypatch.setattr(progress_module, "SLOTS_SECONDS", 0.0)
    assert progress.estimate(left) == 50  # the jobs started: four at once


def test_progress_estimate_and_line():
    import io

    from fruit.experiments.execution.progress import Progress

    p = load_profile("paper")
    tf_search = search_specs(p, "passivization", "Tf")
    nd_final = final_specs(p, "passivization", "Tf+Nd", 1e-4, 1000)
    stream = io.StringIO()
    progress = Progress(total=20, slots=2, stream=stream, label="paper")
    assert progress.estimate(tf_search) is None  # nothing measured yet
    progress.add_run(tf_search[0], 50.0)  # 5 epochs in 50 s: 10 s per epoch
    progress.done, progress.running, progress.failed = 3, 2, 1
    # 9 search runs of Tf at 5 epochs x 10 s on 2 slots: 5 after one another on one
    assert progress.estimate(tf_search[1:]) == 5 * 50
    # an unmeasured architecture falls back to the mean rate, times its max epochs capped
    # at FINAL_EPOCHS (early stopping ends final runs long before 1000 epochs)
    from fruit.experiments.planning.cost import FINAL_EPOCHS

    # (one run left on two slots: its whole time, a run is not shared between slots)
    assert progress.estimate(nd_final[:1]) == 10 * FINAL_EPOCHS
    # a run that stopped early counts the epochs it trained
    progress.add_run(nd_final[0], 300.0, epochs=3.0)
    assert progress.seconds_per_epoch["Tf+Nd"] == [100.0]
    progress.show(tf_search[1:], force=True)
    assert stream.getvalue() == (
        "[paper] done 3 / running 2 / failed 1 / left 14 of 20 | elapsed 0:00:00 | remaining ~0:04:10\n"
    )


def test_every_profile_file_loads():
    assert set(profile_names()) >= set(SHIPPED)
    for name in profile_names():
        assert load_profile(name).name == name


# The experiments behind the claims campaign rerun its final runs of Tf (or Tf+Nd) on
# question formation with one thing changed; everything else must be the claims runs'.
EXPERIMENTS = {  # profile -> whether it trains on the claims training set
    "qf-patience": True,
    "qf-nd-patience": True,
    "qf-nd-sigmoid": True,
    "qf-train-sample": False,
    "qf-train-20k-generated": True,  # the same generator and seed, 20k lines
    "qf-train-20k-published": True,  # (its data folder is filled by hand)
}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiment_profiles_pair_with_the_claims_finals(name):

    claims, p = load_profile("claims"), load_profile(name)
    (arch,) = p.architectures
    selection = Path(__file__).resolve().parents[1] / (
        f"results/runs/claims/question-formation/{arch}/selection.json"
    )
    if not selection.is_file():
        pytest.skip(f"the claims selection for {arch} on question formation is not committed")
    chosen = json.loads(selection.read_text())
    assert p.pairs == (("question-formation", arch),) and p.search_trials == 0
    assert (p.final_learning_rate, p.final_batch_tokens) == (
        chosen["learning_rate"],
        chosen["batch_tokens"],
    )
    assert (
        plan(p)["final_seeds"][f"question-formation/{arch}"]
        == (plan(claims)["final_seeds"][f"question-formation/{arch}"][: p.final_runs])
    )
    same_data = p.task_data_seed("question-formation") == claims.task_data_seed(
        "question-formation"
    )
    assert same_data == EXPERIMENTS[name]
    assert p.data_source == claims.data_source
    assert {s: p.sizes[s] for s in ("dev", "test", "gen")} == {
        s: claims.sizes[s] for s in ("dev", "test", "gen")
    }
    assert p.training["checkpoint_every"] == claims.training["checkpoint_every"]
    assert p.final_max_epochs == claims.final_max_epochs


def test_the_sigmoid_experiment_changes_only_the_pushed_vectors():
    claims, p = load_profile("claims"), load_profile("qf-nd-sigmoid")
    assert p.training == {**claims.training, "model_options": {"pushed_activation": "sigmoid"}}
    assert claims.training.get("model_options", {}).get("pushed_activation", "none") == "none"


def test_the_converged_search_trains_the_claims_trials_longer(tmp_path: Path):
    """qf-search-converged: the claims profile's search trials of Tf on question
    formation (settings, seeds, data), trained to early stopping instead of 3 epochs."""
    claims, p = load_profile("claims"), load_profile("qf-search-converged")
    pair = "question-formation/Tf"
    assert p.pairs == (("question-formation", "Tf"),)

    def trials(profile):  # the search draws and seeds, without the profile's name and length
        return [
            {k: v for k, v in s.items() if k not in ("profile", "max_epochs")}
            for s in plan(profile)["search"]
            if (s["task"], s["architecture"]) == ("question-formation", "Tf")
        ]

    assert len(trials(p)) == 4 and trials(p) == trials(claims)
    assert plan(p)["final_seeds"][pair] == plan(claims)["final_seeds"][pair][: p.final_runs]
    assert p.task_data_seed("question-formation") == claims.task_data_seed("question-formation")
    assert p.sizes == claims.sizes and p.data_source == claims.data_source
    assert p.training == claims.training
    assert (claims.max_epochs("search", "Tf"), p.max_epochs("search", "Tf")) == (3, 1000)

    # the sweep expects such a trial to last as long as a final run, not 1000 epochs
    from fruit.experiments.execution.progress import Progress
    from fruit.experiments.planning.cost import FINAL_EPOCHS

    def seconds(profile, trained=0.0):  # a Tf search trial's, at 60 s per epoch
        progress = Progress(total=6, slots=2, stream=None, label="x")
        progress.learn_from_records(profile, tmp_path, list(profile.pairs))
        progress.seconds_per_epoch["Tf"].append(60.0)
        return progress.run_seconds(search_specs(profile, "question-formation", "Tf")[0], trained)

    assert (seconds(p), seconds(claims)) == (60.0 * FINAL_EPOCHS, 60.0 * 3)
    assert seconds(claims, trained=3.0) == 0.0  # its 3 epochs are done
    assert seconds(p, trained=12.0) == 60.0  # past the expected length: one more epoch


def test_progress_rate_is_todays(tmp_path):
    """A sweep expects the rate of the runs it finished itself, else the fastest record:
    records made by older code or on a busier machine are slower (the claims search
    trials of Tf+Nd took 7-18 min per epoch, its first final run 2.3)."""

    from fruit.experiments.execution.progress import Progress
    from fruit.profiles import run_folder

    p = load_profile("claims")
    qf = "question-formation"
    for index, seconds in enumerate([3000.0, 1200.0, 411.0]):  # 1000, 400, 137 s per epoch
        folder = run_folder(tmp_path, "claims", qf, "Tf+Nd", "search", index)
        folder.mkdir(parents=True)
        metrics = {"epochs": 3.0, "train_seconds": seconds, "status": "complete"}
        (folder / "metrics.json").write_text(json.dumps(metrics))
    progress = Progress(total=9, slots=2, stream=None, label="claims")
    progress.learn_from_records(p, tmp_path, [(qf, "Tf+Nd"), (qf, "Tf")])
    nd_trial = search_specs(p, qf, "Tf+Nd")[3]
    assert progress.rate("Tf+Nd") == 137.0
    assert progress.run_seconds(nd_trial) == 137.0 * 3
    assert progress.rate("Tf") == 400.0  # nothing of Tf, no task: every rate's median
    # nothing of Tf measured: the dry-run's cost model for the pair
    from fruit.experiments.planning.cost import TOKENS_PER_SECOND, tokens_per_example

    predicted = p.sizes["train"] * tokens_per_example(qf) / TOKENS_PER_SECOND["Tf"]
    assert progress.rate("Tf", qf) == predicted
    assert progress.run_seconds(search_specs(p, qf, "Tf")[0]) == 3 * predicted
    for seconds in (600.0, 900.0, 1500.0):  # this call's runs: 200, 300, 500 s per epoch
        progress.add_run(nd_trial, seconds, epochs=3.0)
    assert progress.rate("Tf+Nd") == 300.0
    assert progress.run_seconds(nd_trial, trained=1.0) == 300.0 * 2
    assert Progress(total=1, slots=1, stream=None, label="x").rate("Tf") is None


def test_progress_rate_is_the_pairs_before_the_architectures(tmp_path):
    """An epoch's length differs between tasks (tense reinflection's strings are shorter
    than German questions'), so a run expects its own pair's rate where one is known,
    recorded or measured by this call, and only then the architecture's fastest."""

    from fruit.experiments.execution.progress import Progress
    from fruit.profiles import run_folder

    p = load_profile("claims")
    de, tense = "question-formation-in-german", "tense-reinflection-with-do"
    records = ((tense, 0, 330.0), (de, 0, 450.0), (de, 1, 900.0))  # 110, 150, 300 s/epoch
    for task, index, seconds in records:
        folder = run_folder(tmp_path, "claims", task, "Tf+Nd", "search", index)
        folder.mkdir(parents=True)
        metrics = {"epochs": 3.0, "train_seconds": seconds, "status": "complete"}
        (folder / "metrics.json").write_text(json.dumps(metrics))
    qf = "question-formation"
    progress = Progress(total=12, slots=1, stream=None, label="claims")
    progress.learn_from_records(p, tmp_path, [(de, "Tf+Nd"), (tense, "Tf+Nd"), (qf, "Tf+Nd")])
    assert progress.rate("Tf+Nd", de) == 150.0  # the pair's fastest, not tense's 110
    assert progress.rate("Tf+Nd", tense) == 110.0
    assert progress.rate("Tf+Nd", qf) == 110.0  # nothing of the pair: the architecture's
    assert progress.run_seconds(final_specs(p, de, "Tf+Nd", 1e-4, 591)[0]) == 150.0 * 10
    progress.add_run(search_specs(p, de, "Tf+Nd")[3], 600.0, epochs=3.0)  # this call: 200
    assert progress.rate("Tf+Nd", de) == 200.0
    assert progress.rate("Tf+Nd", tense) == 110.0  # this call measured no tense run
    assert progress.rate("Tf+Nd", qf) == 200.0  # the architecture: this call's runs first


def test_fruit_train_and_fruit_run_mean_the_same_sizes(tmp_path: Path):
    """The sizes, data folder and data seed a sweep passes to the train notebook are the
    ones `fruit train --profile` resolves by itself: one source (fruit.profiles) for both."""
    from fruit import training

    for name in SHIPPED:
        p = load_profile(name)
        for task, arch in [(p.tasks[0], a) for a in p.architectures]:
            specs = search_specs(p, task, arch)[:1] + final_specs(p, task, arch, 1e-3, 512)[:1]
            for spec in specs:
                params = spec.parameters(
                    p, data_dir=Path("data") / name, run_dir=tmp_path, results_dir=tmp_path,
                    device="cpu", threads=1,
                )  # fmt: skip
                config = training.resolve_config(
                    training.RunConfig(task, arch, phase=spec.phase, profile=name)
                )
                for field in training.PROFILE_FIELDS:
                    assert params[field] == getattr(config, field), (name, arch, spec.phase)
                assert params["profile"] == config.profile == name


def test_profiles_module_imports_neither_training_nor_experiments():
    # nor model code or torch: architecture names are data (fruit.names)
    import subprocess
    import sys

    above = ("fruit.training", "fruit.experiments", "fruit.models", "fruit.stacks")
    code = (
        "import sys, fruit.profiles as p; p.load_profile('paper'); print(sorted(m for m in "
        f"sys.modules if m.split('.')[0] == 'torch' or m.startswith({above!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_reporting_starts_without_torch_or_model_code():
    import subprocess
    import sys

    code = (
        "import sys, fruit.reporting, fruit.reporting.claims; fruit.reporting.claims.load_claims();"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'"
        " or m.startswith(('fruit.models', 'fruit.stacks', 'fruit.training', 'fruit.evaluation'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_task_architectures_and_data_source(tmp_path: Path):
    claims = load_profile("claims")
    assert claims.data_source == "published"
    assert ("question-formation", "LSTM") in claims.pairs
    assert ("tense-reinflection-with-do", "LSTM") not in claims.pairs
    assert len(claims.pairs) == 10
    assert load_profile("quick").data_source == "generated"
    base = 'tasks = ["passivization", "tense-reinflection"]\narchitectures = ["Tf", "LSTM"]\n'
    sizes = "[data]\ntrain = 10\ndev = 2\ntest = 2\ngen = 2\n"
    for extra, message in [
        (
            '[task_architectures]\n"passivization" = ["RNN"]\n',
            "unknown architecture in task_architectures",
        ),
        ('[task_architectures]\n"question-formation" = ["Tf"]\n', "unknown task in"),
        (
            '[task_architectures]\n"passivization" = ["Tf"]\n"tense-reinflection" = ["Tf"]\n',
            "LSTM listed but trained on no task",
        ),
        ('[task_architectures]\n"passivization" = []\n', "non-empty list"),
    ]:
        path = tmp_path / "bad.toml"
        path.write_text(base + extra + sizes)
        with pytest.raises(FruitError, match=message):
            load_profile(path)
    path = tmp_path / "bad.toml"
    path.write_text(base + sizes.replace("[data]\n", '[data]\nsource = "web"\n'))
    with pytest.raises(
        FruitError, match="unknown data.source 'web'; valid choices: generated, published"
    ):
        load_profile(path)


@pytest.mark.parametrize(
    "text, seconds",
    [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("150s", 150), ("600", 600), ("1.5h", 5400)],
)
def test_time_limits_parse(text, seconds):
    from fruit.commands.run import parse_duration

    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "h", "-5", "0", "1d", "1s", "29", "45s", "119"])
def test_bad_time_limits_are_refused(text):
    from fruit.commands.run import parse_duration

    with pytest.raises(FruitError, match="--time-limit"):
        parse_duration(text)


def test_compute_estimate_scales_with_the_profile():
    from fruit.experiments.planning.cost import TOKENS_PER_SECOND, pair_costs, tokens_per_example

    claims = load_profile("claims")
    costs = {(c.task, c.architecture): c for c in pair_costs(claims)}
    assert set(costs) == set(claims.pairs)
    assert set(TOKENS_PER_SECOND) == set(PAPER_ARCHITECTURES)
    qf = "question-formation"
    # the same task and data: cost is inversely proportional to the measured throughput
    ratio = costs[qf, "Tf+Nd"].core_hours / costs[qf, "Tf"].core_hours
    assert ratio == pytest.approx(TOKENS_PER_SECOND["Tf"] / TOKENS_PER_SECOND["Tf+Nd"])
    # a search trial of 3 epochs over 100k examples of ~tokens_per_example tokens
    epoch_hours = 100_000 * tokens_per_example(qf) / TOKENS_PER_SECOND["Tf"] / 3600
    assert costs[qf, "Tf"].core_hours > 4 * 3 * epoch_hours
    # search trials that only early stopping ends (max 1000 epochs) count as final runs do
    (converged,) = pair_costs(load_profile("qf-search-converged"))
    evaluation_hours = 21_000 * tokens_per_example(qf) / TOKENS_PER_SECOND["Tf"] / 3600 / 3
    assert converged.final_epochs == 10
    assert converged.core_hours == pytest.approx((4 + 2) * (10 * epoch_hours + evaluation_hours))


def test_search_trials_that_early_stopping_ends_tell_how_long_runs_take(tmp_path):
    """paper-search trains its trials until early stopping, as its final runs: before any
    final run is recorded, the pair's recorded trials give the length (diverged ones say
    nothing), and stand in for the architecture on another task; a recorded final run of
    the pair then takes over."""

    from fruit.experiments.planning.cost import pair_costs
    from fruit.profiles import run_folder

    profile = load_profile("paper-search")
    qf, de = "question-formation", "question-formation-in-german"

    def record(phase, index, epochs, status="complete"):
        path = run_folder(tmp_path, "paper-search", qf, "Tf+Nd", phase, index)
        path.mkdir(parents=True)
        metrics = {"epochs": epochs, "train_seconds": 60.0, "status": status}
        (path / "metrics.json").write_text(json.dumps(metrics))

    def cost():
        return {(c.task, c.architecture): c for c in pair_costs(profile, results_dir=tmp_path)}

    for index, epochs in enumerate((15.0, 20.0, 25.0)):
        record("search", index, epochs)
    record("search", 3, 0.4, status="diverged")
    c = cost()
    assert c[qf, "Tf+Nd"].final_epochs == 20.0
    assert "3 recorded search trials" in c[qf, "Tf+Nd"].final_epochs_from
    assert c[de, "Tf+Nd"].final_epochs == 20.0 and "other tasks" in c[de, "Tf+Nd"].final_epochs_from
    record("final", 0, 32.0)
    assert cost()[qf, "Tf+Nd"].final_epochs == 32.0


def test_compute_estimate_learns_from_the_run_records(tmp_path):
    """With a results folder, final runs are counted at their recorded length and only
    what is unfinished is left (less the epochs a paused run has logged)."""

    from fruit.experiments.planning.cost import (
        FINAL_EPOCHS,
        TOKENS_PER_SECOND,
        pair_costs,
        tokens_per_example,
    )
    from fruit.profiles import run_folder

    claims = load_profile("claims")
    qf, de = "question-formation", "question-formation-in-german"

    def cost(results):
        return {(c.task, c.architecture): c for c in pair_costs(claims, results_dir=results)}

    untouched, plain = cost(tmp_path), {(c.task, c.architecture): c for c in pair_costs(claims)}
    for pair, c in untouched.items():  # nothing recorded: everything is left
        assert c.recorded == 0 and c.final_epochs == FINAL_EPOCHS
        assert c.left_core_hours == pytest.approx(c.core_hours)
        assert c.core_hours == pytest.approx(plain[pair].core_hours)

    def folder(task, arch, phase, index):
        path = run_folder(tmp_path, "claims", task, arch, phase, index)
        path.mkdir(parents=True)
        return path

    def record(task, arch, phase, index, epochs, seconds=3600.0, status="complete"):
        metrics = {"epochs": epochs, "train_seconds": seconds, "status": status}
        (folder(task, arch, phase, index) / "metrics.json").write_text(json.dumps(metrics))

    def unfinished(task, arch, phase, index, logged, paused_at=None):
        path = folder(task, arch, phase, index)
        (path / "log.csv").write_text(f"examples_seen,epoch\n80000,0.8\n1,{logged}\n")
        if paused_at is not None:  # where it paused, after its last checkpoint
            (path / "paused.json").write_text(json.dumps({"examples_seen": paused_at}))

    record(qf, "LSTM", "final", 0, 30.0)
    record(qf, "LSTM", "final", 1, 40.0)
    record(qf, "LSTM", "final", 4, 0.2, status="diverged")  # says nothing of the length
    record(qf, "Tf", "final", 0, 14.0)
    record(qf, "Tf", "search", 0, 3.0)
    unfinished(qf, "LSTM", "final", 2, 19.2, paused_at=2_000_000)  # 20 epochs: 15 short
    unfinished(qf, "LSTM", "final", 3, 50.0)  # past the mean: still one more epoch
    unfinished(qf, "LSTM", "search", 0, 2.4, paused_at=250_000)  # 0.5 epochs left
    unfinished(qf, "LSTM", "search", 1, 3.0)  # its last checkpoint: nothing left
    c = cost(tmp_path)

    lstm = c[qf, "LSTM"]
    assert lstm.final_epochs == 35.0 and "2 recorded" in lstm.final_epochs_from
    assert lstm.recorded == 3
    epoch = 100_000 * tokens_per_example(qf) / TOKENS_PER_SECOND["LSTM"] / 3600
    # left: search 0.5 + 0 + 3 + 3 epochs, finals 2 and 3: 15 and 1
    # (each plus one evaluation, under a fortieth of an epoch here)
    assert lstm.left_core_hours == pytest.approx((0.5 + 0 + 3 + 3 + 15 + 1) * epoch, rel=0.05)
    assert lstm.recorded_train_hours == pytest.approx(3.0)
    assert lstm.recorded_estimate_hours == pytest.approx(70.2 * epoch)
    # Tf on German has no final run of its own: Tf's on question formation stand in
    assert c[de, "Tf"].final_epochs == 14.0 and "other tasks" in c[de, "Tf"].final_epochs_from
    assert c[qf, "Tf"].recorded == 2
    assert c[de, "Tf+Nd"].final_epochs == FINAL_EPOCHS  # nothing recorded for Tf+Nd
    # costing one pair still learns from the others' records
    (only,) = pair_costs(claims, [(de, "Tf")], results_dir=tmp_path)
    assert only.final_epochs == 14.0 and only.recorded == 0

    # a record whose numbers are not numbers: one line naming the file
    (run_folder(tmp_path, "claims", qf, "Tf", "search", 0) / "metrics.json").write_text(
        json.dumps({"epochs": "n/a", "train_seconds": 1.0, "status": "complete"})
    )
    with pytest.raises(FruitError, match=r"search-0/metrics.json is damaged \(epochs is 'n/a'"):
        cost(tmp_path)


def test_a_paused_run_is_described_by_its_epochs_and_resume_files(tmp_path: Path):
    """The line a time-limited sweep prints for each run it leaves paused: what a user
    must carry to another machine for the run to go on rather than start again."""

    from fruit.experiments.planning.run_state import describe_paused
    from fruit.profiles import run_folder

    folder = run_folder(tmp_path, "claims", "question-formation", "LSTM", "final", 3)
    folder.mkdir(parents=True)
    (folder / "log.csv").write_text("examples_seen,epoch\n2000000,20.0\n")
    (folder / "paused.json").write_text(json.dumps({"examples_seen": 2_050_000}))
    (folder / "checkpoint.pt").write_bytes(bytes(2_000_000))
    (folder / "best.pt").write_bytes(bytes(500_000))
    assert describe_paused(folder, 100_000) == (
        "paused: question-formation/LSTM/final-3 at 20.5 epochs; "
        "resume files checkpoint.pt, best.pt, paused.json (2.5 MB)"
    )
    (folder / "paused.json").unlink()  # paused before this code wrote the marker
    assert "at 20.0 epochs; resume files checkpoint.pt, best.pt (2.5 MB)" in describe_paused(
        folder, 100_000
    )


def test_every_parameter_a_sweep_passes_reaches_the_train_notebook(tmp_path: Path):
    """A name the notebook neither declares nor reads as a RunConfig field would be set
    by papermill and silently ignored (e.g. the sweep's quieter progress bar)."""
    import ast
    import dataclasses

    from fruit import training
    from fruit.experiments.planning.plan import SWEEP_PROGRESS_SECONDS

    notebook = json.loads((Path(__file__).parent.parent / "notebooks/train.ipynb").read_text())
    cell = next(c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", []))
    declared = {
        t.id
        for node in ast.parse("".join(cell["source"])).body
        if isinstance(node, ast.Assign)
        for t in node.targets
    }
    fields = {f.name for f in dataclasses.fields(training.RunConfig)}
    p = load_profile("claims")
    spec = search_specs(p, p.tasks[0], p.architectures[0])[0]
    params = spec.parameters(
        p, data_dir=tmp_path, run_dir=tmp_path, results_dir=tmp_path, device="cpu", threads=1
    )
    assert set(params) <= declared | fields, set(params) - declared - fields
    assert params["progress_seconds"] == SWEEP_PROGRESS_SECONDS >= 1


def test_progress_estimate_starts_from_the_run_records(tmp_path):
    """A sweep resumed over recorded runs estimates at once, from their seconds per
    epoch and their final runs' length, instead of showing "remaining ~?"."""

    from fruit.experiments.execution.progress import Progress
    from fruit.profiles import run_folder

    p = load_profile("claims")
    qf = "question-formation"
    for phase, index, epochs, seconds in [("search", 0, 3.0, 300.0), ("final", 0, 30.0, 3000.0)]:
        folder = run_folder(tmp_path, "claims", qf, "LSTM", phase, index)
        folder.mkdir(parents=True)
        metrics = {"epochs": epochs, "train_seconds": seconds, "status": "complete"}
        (folder / "metrics.json").write_text(json.dumps(metrics))
    progress = Progress(total=9, slots=2, stream=None, label="claims")
    progress.learn_from_records(p, tmp_path, [(qf, "LSTM")])
    assert progress.recorded_seconds_per_epoch["LSTM"] == [100.0, 100.0]
    assert progress.final_epochs[qf, "LSTM"] == 30.0
    left = final_specs(p, qf, "LSTM", 1e-3, 1000)[1:]  # 4 final runs at 30 epochs
    assert progress.estimate(left) == 4 * 30 * 100.0 / 2
    # runs under way count what they have left: 10 epochs, and one past the mean
    trained = {left[0].name: 20.0, left[1].name: 45.0}
    # on 2 slots: 10 epochs, then 30 on one; 1, then 30 on the other
    assert progress.estimate(left, trained) == (10 + 30) * 100.0
    # a damaged record leaves the estimate to the cost model, until this call finishes runs
    from fruit.experiments.planning.cost import FINAL_EPOCHS, epoch_seconds

    (run_folder(tmp_path, "claims", qf, "LSTM", "final", 0) / "metrics.json").write_text("{")
    fresh = Progress(total=9, slots=2, stream=None, label="claims")
    fresh.learn_from_records(p, tmp_path, [(qf, "LSTM")])
    assert fresh.estimate(left) == 4 * FINAL_EPOCHS * epoch_seconds(p, qf, "LSTM") / 2


def test_a_run_stops_training_its_pairs_evaluation_before_the_deadline(tmp_path):
    """Under --time-limit a run pauses early enough to evaluate before the deadline: a
    tenth of the limit (at most 10 minutes) while its pair's final evaluation is unknown,
    else that evaluation's recorded seconds x EVALUATION_MARGIN + EVALUATION_EXTRA (the
    claims campaign's Tf runs evaluated tense reinflection in 88-113 s, German question
    formation in 7 s, and waited 10 minutes each at every step's end)."""
    from types import SimpleNamespace

    from fruit.experiments.execution.deadlines import EVALUATION_EXTRA, EVALUATION_MARGIN, Deadlines
    from fruit.experiments.execution.progress import Progress
    from fruit.experiments.execution.sweep import Sweep
    from fruit.profiles import run_folder

    p = load_profile("claims")
    tense, de = "tense-reinflection-with-do", "question-formation-in-german"
    for index, evaluation in enumerate([88.0, 113.0]):
        folder = run_folder(tmp_path, "claims", tense, "Tf", "final", index)
        folder.mkdir(parents=True)
        metrics = {"epochs": 3.0, "train_seconds": 30.0, "evaluation_seconds": evaluation}
        (folder / "metrics.json").write_text(json.dumps({**metrics, "status": "complete"}))
    older = run_folder(tmp_path, "claims", de, "Tf", "final", 0)  # a record from before
    older.mkdir(parents=True)
    (older / "metrics.json").write_text('{"epochs": 3.0, "train_seconds": 30.0}')
    progress = Progress(total=18, slots=1, stream=None, label="claims")
    progress.learn_from_records(p, tmp_path, [(tense, "Tf"), (de, "Tf")])

    limit, deadline = 7200.0, 1_000_000.0
    sweep = SimpleNamespace(
        deadlines=Deadlines(limit, deadline, deadline - 600.0), progress=progress
    )
    tense_run = final_specs(p, tense, "Tf", 1e-3, 600)[2]
    de_run = final_specs(p, de, "Tf", 1e-3, 600)[2]
    assert Sweep.stop_at_for(sweep, tense_run) == deadline - (1.5 * 113.0 + 60.0)
    assert (EVALUATION_MARGIN, EVALUATION_EXTRA) == (1.5, 60.0)
    assert Sweep.stop_at_for(sweep, de_run) == deadline - 600.0  # no evaluation recorded
    progress.add_run(de_run, 30.0, epochs=3.0, evaluation_seconds=7.0)  # this call's
    assert Sweep.stop_at_for(sweep, de_run) == deadline - (1.5 * 7.0 + 60.0)
    progress.add_run(tense_run, 30.0, epochs=3.0, evaluation_seconds=3000.0)
    assert Sweep.stop_at_for(sweep, tense_run) == deadline - limit / 2  # at most half
    # under a short limit the extra is a tenth of it (2 minutes: 12 s, not 60)
    short = SimpleNamespace(
        deadlines=Deadlines(120.0, deadline, deadline - 12.0), progress=progress
    )
    assert Sweep.stop_at_for(short, de_run) == deadline - (1.5 * 7.0 + 12.0)
    no_limit = SimpleNamespace(deadlines=Deadlines.starting_now(None), progress=progress)
    assert Sweep.stop_at_for(no_limit, de_run) is None


def test_a_mixed_kind_models_gpu_label_names_each_kind(monkeypatch):
    """LSTM(Nd,Sup): LSTM + (LSTM+Nd - LSTM) + (LSTM+Sup - LSTM) in s/token, each kind
    named (the number was right before, the label named Nd twice)."""
    from fruit.experiments.planning import gpu_rates

    record = gpu_rates.CardRecord(
        "test", "Test GPU", {"LSTM": 100.0, "LSTM+Nd": 10.0, "LSTM+Sup": 50.0, "Tf": 80.0,
                             "Tf+Nd": 20.0}, "planted",
    )  # fmt: skip
    names = {
        **gpu_rates.ARCHITECTURES,
        "LSTM+Nd+Sup": "LSTM(Nd,Sup)",
        "Tf+Nd@4,5": "Tf(-,-,-,Nd,Nd)",
    }
    monkeypatch.setattr(gpu_rates, "ARCHITECTURES", names)
    rate, label = gpu_rates.rate(record, "LSTM+Nd+Sup")
    assert label == "model: LSTM + (LSTM+Nd - LSTM) + (LSTM+Sup - LSTM) in s/token"
    assert rate == pytest.approx(1 / (1 / 100 + (1 / 10 - 1 / 100) + (1 / 50 - 1 / 100)))
    rate, label = gpu_rates.rate(record, "Tf+Nd@4,5")
    assert label == "model: Tf + 2 x (Tf+Nd - Tf) in s/token"
    assert rate == pytest.approx(1 / (1 / 80 + 2 * (1 / 20 - 1 / 80)))


def test_the_cpu_estimate_says_when_a_throughput_is_modelled(monkeypatch):
    from fruit.experiments.planning import cost

    names = {**cost.ARCHITECTURES, "Tf+Nd@4,5": "Tf(-,-,-,Nd,Nd)"}
    monkeypatch.setattr(cost, "ARCHITECTURES", names)
    profile = load_profile("smoke")
    pairs = [("question-formation", "Tf"), ("question-formation", "Tf+Nd@4,5")]
    monkeypatch.setattr(
        cost, "pair_costs", lambda p, pairs, results: [_FakeCost(t, a) for t, a in pairs]
    )
    lines = cost.describe(profile, workers=2, pairs=pairs).splitlines()
    modelled = [line for line in lines if "Tf+Nd@4,5" in line]
    measured = [line for line in lines if "question-formation/Tf:" in line]
    assert modelled and "throughput modelled, not measured" in modelled[0]
    assert measured and "modelled" not in measured[0]


class _FakeCost:
    def __init__(self, task, arch):
        self.task, self.architecture = task, arch
        self.runs, self.core_hours, self.final_epochs_from = 2, 1.0, "assumed"
        self.left_core_hours, self.taken_over = None, ()


def test_the_default_figures_folder_never_overwrites_the_checkouts(tmp_path, monkeypatch):
    """--figures' default: beside the results folder, except where beside is this
    folder's ./figures and --results is not ./results (then inside the results folder)."""
    from fruit.experiments.options import default_figures

    monkeypatch.chdir(tmp_path)
    assert default_figures("results") == "figures"
    assert default_figures("build/reproduce/results") == "build/reproduce/figures"
    assert default_figures("results-try") == "results-try/figures"
    assert default_figures(str(tmp_path / "other")) == str(tmp_path / "other" / "figures")
    assert default_figures(str(tmp_path / "results")) == str(tmp_path / "figures")


def test_reports_cut_by_the_time_limit_stall_only_a_call_that_did_nothing_else():
    """The time limit ended the reports: after a call that trained (progressed) the same
    command goes on (75: it will find only the reports to do); a call that had only the
    reports to do would end the same way again (2), so a retry loop ends."""
    from fruit.commands.run import EXIT_PAUSED, exit_status
    from fruit.experiments.execution.outcome import SweepResult

    cut = SweepResult(total=2, found_complete=2, reports_stopped=True, reports_out_of_time=True)
    assert cut.stalled and exit_status(cut) == 2
    trained = SweepResult(
        total=2, trained=2, progressed=True, reports_stopped=True, reports_out_of_time=True
    )
    assert not trained.stalled and exit_status(trained) == EXIT_PAUSED
    signalled = SweepResult(total=2, found_complete=2, reports_stopped=True)
    assert not signalled.stalled and exit_status(signalled) == EXIT_PAUSED
