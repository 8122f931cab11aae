"""The seed study of claim C4 (profiles/qf-nd-seeds.toml) trains on seeds no earlier run used.

Its point is 20 independent draws beside the paper-search finals; a run sharing a start
(seed, parameter seed or shuffle seed) with a committed run would be a repeat, not a draw.
The oracle is every committed config.json in git (tracked files only).
"""

import json
import subprocess
from pathlib import Path

import pytest

from fruit.experiments.planning.plan import final_specs
from fruit.profiles import derive_seed, load_profile

ROOT = Path(__file__).resolve().parents[1]
SEED_KEYS = ("seed", "parameter_seed", "shuffle_seed")


def _committed_configs():
    out = subprocess.run(
        ["git", "ls-files", "results/runs"], cwd=ROOT, capture_output=True, text=True
    )
    if out.returncode != 0:
        pytest.skip("not a git checkout: the committed records cannot be listed")
    for line in out.stdout.splitlines():
        if line.endswith("/config.json"):
            yield line, json.loads((ROOT / line).read_text())


def _study_seeds():
    profile = load_profile("qf-nd-seeds")
    (task,), (arch,) = profile.tasks, profile.architectures
    specs = final_specs(
        profile, task, arch, profile.final_learning_rate, profile.final_batch_tokens
    )
    return profile, [
        {
            "seed": s.seed,
            "parameter_seed": derive_seed(s.seed, "parameters"),
            "shuffle_seed": derive_seed(s.seed, "shuffle"),
        }
        for s in specs
    ]


def test_the_seed_study_trains_at_least_20_finals_at_the_paper_search_selection():
    profile, seeds = _study_seeds()
    assert len(seeds) >= 20
    selection = ROOT / "results/runs/paper-search/question-formation/Tf+Nd/selection.json"
    chosen = json.loads(selection.read_text())
    assert profile.final_batch_tokens == chosen["batch_tokens"]
    assert profile.final_learning_rate == chosen["learning_rate"]
    ps = json.loads(
        (
            ROOT / "results/runs/paper-search/question-formation/Tf+Nd/final-0/config.json"
        ).read_text()
    )
    assert profile.task_data_seed("question-formation") == ps["data_seed"]


def test_no_seed_of_the_study_appears_in_any_other_committed_run():
    _, seeds = _study_seeds()
    ours = {s[k] for s in seeds for k in SEED_KEYS}
    assert len(ours) == 3 * len(seeds)  # the study's own runs share no start either
    seen = 0
    for path, config in _committed_configs():
        if config.get("profile") == "qf-nd-seeds":
            continue
        seen += 1
        taken = {config.get(k) for k in SEED_KEYS} & ours
        assert not taken, f"{path} uses the seed-study seed(s) {sorted(taken)}"
    assert seen > 100  # the committed records were really read


def test_the_studys_committed_runs_are_its_planned_ones():
    _, seeds = _study_seeds()
    planned = {(s["seed"], s["parameter_seed"], s["shuffle_seed"]) for s in seeds}
    for path, config in _committed_configs():
        if config.get("profile") == "qf-nd-seeds":
            assert tuple(config[k] for k in SEED_KEYS) in planned, path
