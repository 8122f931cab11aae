"""fruit.tasks.statistics: the distances behind `fruit data --compare` (oracle: hand sums)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest

from fruit.tasks.statistics import distribution_distances, feature_counts, total_variation


def test_total_variation_by_hand():
    p = Counter(a=2, b=2)
    assert total_variation(p, Counter(a=5, b=5)) == 0
    assert total_variation(p, Counter(c=1)) == 1
    # p = (1/2, 1/2, 0), q = (1/4, 1/4, 1/2): half of 1/4 + 1/4 + 1/2
    q = Counter(a=1, b=1, c=2)
    assert total_variation(p, q) == pytest.approx(float(Fraction(1, 2)))
    assert total_variation(q, p) == total_variation(p, q)


def test_feature_counts():
    examples = [(["a", "b", "a", "quest"], ["b", "a"]), (["a", "decl"], ["a"])]
    counts = feature_counts(examples)
    assert counts["token"] == Counter(a=5, b=2, quest=1, decl=1)
    assert counts["bigram"] == Counter(
        {("a", "b"): 1, ("b", "a"): 1, ("a", "quest"): 1, ("a", "decl"): 1}
    )
    assert counts["length"] == Counter({4: 1, 2: 1})


def test_distances_compare_equal_sizes_and_refuse_too_few():
    theirs = [([w, "."], [w]) for w in "abcdefgh"]  # 8 -> two halves of 4
    ours = [(["z", "."], ["z"])] * 4
    distances = distribution_distances(ours, theirs)
    assert distances["length"] == (0.0, 0.0)  # all of length 2
    # ours: z 8/12, '.' 4/12; a half of theirs: 4 letters 2/12 each, '.' 4/12
    assert distances["token"][0] == pytest.approx(0.5 * (8 / 12 + 4 * 2 / 12))
    with pytest.raises(ValueError, match=">= 4 generated"):
        distribution_distances(ours[:3], theirs)


def test_a_published_train_split_is_compared_with_train(tmp_path, datasets_dir):
    import shutil

    from fruit.tasks import get_task, read_tsv
    from fruit.tasks.statistics import compare, compare_distributions, split_statistics

    slug = "question-formation"
    source = datasets_dir / slug
    ours, theirs = tmp_path / "ours" / slug, tmp_path / "theirs" / slug
    for folder in (ours, theirs):
        folder.mkdir(parents=True)
        for split in ("test", "gen"):
            shutil.copy(source / f"{split}.tsv", folder / f"{split}.tsv")
    shutil.copy(source / "test.tsv", ours / "train.tsv")
    without = compare(ours.parent, [slug], theirs.parent)  # no published train: train~test
    assert {r["split"] for r in without} == {"train~test", "test", "gen"}
    shutil.copy(source / "dev.tsv", theirs / "train.tsv")  # now one to compare with
    rows = [r for r in compare(ours.parent, [slug], theirs.parent) if r["split"] == "train"]
    expected = split_statistics(get_task(slug), read_tsv(source / "dev.tsv"))
    assert {r["statistic"]: r["published"] for r in rows} == expected
    splits = {r["split"] for r in compare_distributions(ours.parent, theirs.parent, [slug])}
    assert splits == {"train", "test", "gen"}


def test_splits_in_memory_compare_as_their_files_do(tmp_path):
    """compare_examples (data.ipynb) gives compare's rows for the same splits written out;
    a registered task the paper does not have is compared with nothing, and gen rows are
    not held to a tolerance."""
    from fruit.tasks import get_task
    from fruit.tasks.splits import write_task
    from fruit.tasks.statistics import compare, compare_examples

    task = get_task("question-formation")
    splits = task.generate(seed=3, sizes={"train": 300, "dev": 10, "test": 300, "gen": 300})
    write_task(tmp_path, task, splits)
    assert compare_examples(task, splits) == compare(tmp_path, [task.slug])
    rows = compare_examples(task, splits)
    assert {r["split"] for r in rows} == {"train~test", "test", "gen"}
    assert all(r["tolerance"] is None and r["ok"] is None for r in rows if r["split"] == "gen")
    assert all(r["ok"] is not None for r in rows if r["split"] != "gen")

    class Unpublished:  # a task the paper does not have: ours alone
        slug = "my-task"
        transform_marker = task.transform_marker
        subject_modifier = staticmethod(task.subject_modifier)

    alone = compare_examples(Unpublished(), {"test": splits["test"]})
    assert len(alone) == 4 and all(r["published"] is None and r["ok"] is None for r in alone)
