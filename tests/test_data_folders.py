"""A split's file that is a folder is named as a folder, not reported as missing."""

from __future__ import annotations

import pytest

from fruit.errors import FruitError
from fruit.training.data import prepare_data

SIZES = {"train": 20, "dev": 5, "test": 5, "gen": 5}


def test_a_folder_where_train_tsv_goes_is_named(tmp_path):
    (tmp_path / "question-formation" / "train.tsv").mkdir(parents=True)
    with pytest.raises(FruitError, match=r"train\.tsv is a folder, not a file"):
        prepare_data(tmp_path, "question-formation", 1, SIZES)
