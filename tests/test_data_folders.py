"""Data folders: a split's file that is a folder is named as a folder, not reported as
missing; a run records the seed and source its folder's data.json names, never the profile's."""

from __future__ import annotations

import pytest

from fruit.errors import FruitError
from fruit.training.data import prepare_data

SIZES = {"train": 20, "dev": 5, "test": 5, "gen": 5}


def test_a_folder_where_train_tsv_goes_is_named(tmp_path):
    (tmp_path / "question-formation" / "train.tsv").mkdir(parents=True)
    with pytest.raises(FruitError, match=r"train\.tsv is a folder, not a file"):
        prepare_data(tmp_path, "question-formation", 1, SIZES)


def _tiny_run(data_dir, run_dir) -> dict:
    """A two-checkpoint Tf run on ``data_dir``; its config.json."""
    import json

    from fruit import training

    config = training.RunConfig(
        task="question-formation", architecture="Tf", profile="smoke", seed=7, d=16,
        learning_rate=1e-3, batch_tokens=256, train_size=20, dev_size=5, test_size=5,
        gen_size=5, checkpoint_every=10, max_epochs=1, data_dir=str(data_dir), device="cpu",
    )  # fmt: skip
    training.train_run(config, run_dir)
    return json.loads((run_dir / "config.json").read_text())


def test_records_name_the_data_folder_s_own_seed_or_none(tmp_path):
    """A run records the data seed and source its data folder's data.json names -- not
    the profile's, which made other data or none at all. A folder without data.json (a
    user's own files, which a sweep takes as they are) is recorded as "unrecorded" with no
    seed, and the sweep says so when it finds it."""
    from fruit.profiles import load_profile
    from fruit.tasks import get_task
    from fruit.tasks.splits import write_task

    task = get_task("question-formation")
    own = tmp_path / "own"
    write_task(own, task, task.generate(seed=3, sizes=dict(SIZES, train=1000)))  # no data.json
    found = prepare_data(own, "question-formation", 11, SIZES)
    assert found.startswith("found without data.json") and '"unrecorded"' in found
    config = _tiny_run(own, tmp_path / "run-own")
    assert (config["data_seed"], config["data_source"]) == (None, "unrecorded")

    made = tmp_path / "made"
    assert prepare_data(made, "question-formation", 5, SIZES) == "generated"
    config = _tiny_run(made, tmp_path / "run-made")
    assert load_profile("smoke").task_data_seed("question-formation") != 5
    assert (config["data_seed"], config["data_source"]) == (5, "generated")
    # the run goes on (and a finished one is checked) against what its folder recorded
    assert _tiny_run(made, tmp_path / "run-made") == config
    # its data.json gone (or the folder): the finished run is still its own, as recorded
    (made / "question-formation" / "data.json").unlink()
    assert _tiny_run(made, tmp_path / "run-made") == config
