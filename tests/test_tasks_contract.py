"""The task contract (fruit.tasks.base.Task), checked over every registered task: what
every command relies on, whatever the task. Grammar-specific tests live in
test_tasks_mccoy.py, test_tasks_mueller.py and test_tasks_framework.py."""

from __future__ import annotations

import pytest

from fruit.evaluation import SAMPLE_MAX_TOKENS
from fruit.tasks import SPLITS, TASKS, Task, get_task

SIZES = {"train": 60, "dev": 10, "test": 10, "gen": 20}


@pytest.fixture(scope="module", params=TASKS)
def generated(request):
    task = get_task(request.param)
    return task, task.generate(seed=3, sizes=SIZES)


def test_it_is_a_task_with_its_slug_and_markers(generated):
    task, _ = generated
    assert isinstance(task, Task) and task.slug in TASKS
    assert task.identity_marker != task.transform_marker
    assert task.partial_kind in SAMPLE_MAX_TOKENS  # how fruit.evaluation scores it


def test_generate_gives_every_split_at_its_size_and_is_seeded(generated):
    task, splits = generated
    assert set(splits) == set(SPLITS)
    assert {s: len(v) for s, v in splits.items()} == SIZES
    assert task.generate(seed=3, sizes=SIZES) == splits


def test_targets_follow_the_markers_and_the_grammar_accepts_the_sentences(generated):
    task, splits = generated
    for split, examples in splits.items():
        for source, target in examples:
            marker, sentence = source[-1], source[:-1]
            assert marker in (task.identity_marker, task.transform_marker), split
            assert task.accepts(sentence), (split, sentence)
            expected = sentence if marker == task.identity_marker else task.transform(sentence)
            assert target == expected == task.target(source)


def test_the_rules_differ_on_the_generalization_set(generated):
    """Every generalization source transforms, and the hierarchical and the linear rule
    give different outputs on it (what the metrics compare)."""
    task, splits = generated
    for source, target in splits["gen"]:
        assert source[-1] == task.transform_marker
        assert task.linear(source[:-1]) != target


def test_partial_match_accepts_the_reference_itself(generated):
    task, splits = generated
    for _, target in splits["gen"]:
        assert task.partial_match(target, target)
