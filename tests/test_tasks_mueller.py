"""The four Mueller et al. tasks, checked against the published files and docs/tasks.md.

Also the Figure 1 examples and the partial-accuracy checks of all seven tasks.
"""

from __future__ import annotations

import statistics
from collections import Counter

import pytest

from fruit.tasks import MUELLER_TASKS, PAPER_TASKS, Vocabulary, get_task, read_tsv
from fruit.tasks.mueller.passives import GERMAN_DETERMINERS, GERMAN_NOUNS, GERMAN_VERBS
from fruit.tasks.official import fix
from fruit.tasks.statistics import PUBLISHED, STATISTICS, split_statistics

SPLITS = ("dev", "test", "gen")


def published(datasets_dir, slug, split):
    task = get_task(slug)
    examples, _ = fix(task, read_tsv(datasets_dir / slug / f"{split}.tsv"))
    return examples


# ------------------------------------------------------- the published files


@pytest.mark.parametrize("slug", MUELLER_TASKS)
@pytest.mark.parametrize("split", SPLITS)
def test_hierarchical_rule_reproduces_every_published_target(datasets_dir, slug, split):
    task = get_task(slug)
    examples = published(datasets_dir, slug, split)
    assert len(examples) == (1000 if split == "dev" else 10000)
    wrong = [(s, t) for s, t in examples if task.target(s) != t]
    assert wrong == []


@pytest.mark.parametrize("split, changed", [("dev", 29), ("test", 290), ("gen", 816)])
def test_german_fix_changes_exactly_the_documented_lines(datasets_dir, split, changed):
    task = get_task("passivization-in-german")
    raw = read_tsv(datasets_dir / task.slug / f"{split}.tsv")
    fixed, n = fix(task, raw)
    assert n == changed
    # Without the fix, exactly those lines disagree with the correct rule (docs/tasks.md §8.3).
    assert sum(task.target(s) != t for s, t in raw) == changed
    diffs = [(a, b) for (_, a), (_, b) in zip(raw, fixed) if a != b]
    assert all(a[1] in ("Löwen", "Raben") and b[1] in ("Löwe", "Rabe") for a, b in diffs)
    assert all(a[:1] + a[2:] == b[:1] + b[2:] for a, b in diffs)


@pytest.mark.parametrize("slug", MUELLER_TASKS)
def test_grammar_accepts_every_published_source(datasets_dir, slug):
    task = get_task(slug)
    for split in SPLITS:
        for source, _ in published(datasets_dir, slug, split):
            assert source[-1] in (task.identity_marker, task.transform_marker)
            assert task.accepts(source[:-1]), " ".join(source)
    assert not task.accepts("the the .".split())


@pytest.mark.parametrize("slug", MUELLER_TASKS)
def test_linear_rule_agrees_in_distribution_and_differs_on_every_gen_line(datasets_dir, slug):
    task = get_task(slug)
    for split in ("dev", "test"):
        for source, target in published(datasets_dir, slug, split):
            if source[-1] == task.transform_marker:
                assert task.linear(source[:-1]) == target
    gen = published(datasets_dir, slug, "gen")
    assert all(task.linear(s[:-1]) != t for s, t in gen)
    if task.partial_kind == "first-word":  # docs/tasks.md §3.1: first words always differ
        assert all(task.linear(s[:-1])[0] != t[0] for s, t in gen)
    else:  # docs/tasks.md §3.3: second words coincide in 379 (EN) / 578 (DE, fixed) lines
        same = sum(task.linear(s[:-1])[1] == t[1] for s, t in gen)
        assert same == {"passivization": 379, "passivization-in-german": 578}[slug]


@pytest.mark.parametrize("slug", PAPER_TASKS)
def test_published_statistics_table_matches_the_files(datasets_dir, slug):
    # PUBLISHED (copied from docs/tasks.md §4) vs our subject_modifier on the files themselves.
    task = get_task(slug)
    for split in ("test", "gen"):
        ours = split_statistics(task, read_tsv(datasets_dir / slug / f"{split}.tsv"))
        for name, value in zip(STATISTICS, PUBLISHED[slug][split]):
            assert ours[name] == pytest.approx(value, abs=1e-4), (split, name)


# --------------------------------------------------- paper and spec examples

FIGURE_1 = [
    (
        "question-formation",
        "my raven that doesn't sleep does change . quest",
        "does my raven that doesn't sleep change ?",
        "doesn't my raven that sleep does change ?",
    ),
    (
        "question-formation-in-german",
        "dein Rabe , der gegessen hat , kann feiern . quest",
        "kann dein Rabe , der gegessen hat , feiern ?",
        "hat dein Rabe , der gegessen , kann feiern ?",
    ),
    (
        "tense-reinflection-with-do",
        "some newts by our yak did smile . PRESENT",
        "some newts by our yak do smile .",
        "some newts by our yak does smile .",
    ),
    (
        "passivization",
        "her yak by her zebras amused her newt . passiv",
        "her newt was amused by her yak by her zebras .",
        "her zebras were amused by her yak .",
    ),
]
SPEC_EXAMPLES = [  # docs/tasks.md §4.5, §4.7, §5
    (
        "question-formation-with-have",
        "my unicorn that hasn't amused the yaks has eaten . quest",
        "has my unicorn that hasn't amused the yaks eaten ?",
        "hasn't my unicorn that amused the yaks has eaten ?",
    ),
    (
        "passivization-in-german",
        "unsere Papageie bei meinen Dinosauriern bedauerten unsere Esel . passiv",
        "unsere Esel wurden von unseren Papageien bei meinen Dinosauriern bedauert .",
        "meine Dinosaurier wurden von unseren Papageien bedauert .",
    ),
    (
        "passivization-in-german",
        "ein Wellensittich bei den Löwen verwirrte den Hund . passiv",
        None,
        "der Löwe wurde von einem Wellensittich verwirrt .",
    ),
    (
        "passivization-in-german",
        "ein Wellensittich bei den Papageien verwirrte den Löwen . passiv",
        "der Löwe wurde von einem Wellensittich bei den Papageien verwirrt .",
        "die Papageie wurden von einem Wellensittich verwirrt .",
    ),
    (
        "question-formation-in-german",
        "die Hunde , die deine Löwen bewundern können , haben gewartet . quest",
        "haben die Hunde , die deine Löwen bewundern können , gewartet ?",
        "können die Hunde , die deine Löwen bewundern , haben gewartet ?",
    ),
]


@pytest.mark.parametrize("slug, source, hierarchical, linear", FIGURE_1 + SPEC_EXAMPLES)
def test_paper_and_spec_examples(slug, source, hierarchical, linear):
    task = get_task(slug)
    source = source.split()
    if hierarchical is not None:
        assert " ".join(task.target(source)) == hierarchical
    assert " ".join(task.linear(source[:-1])) == linear
    assert task.target(source[:-2] + [".", task.identity_marker]) == source[:-1]


def test_german_morphology_tables_cover_the_grammar():
    g = get_task("passivization-in-german").grammar
    words = {lhs: {r.rhs[0] for r in rules} for lhs, rules in g.by_lhs.items()}
    columns = list(zip(*GERMAN_DETERMINERS))
    assert set(columns[0]) == words["Det_S_Nom"]
    assert set(columns[1]) == words["Det_S_Acc"]
    assert set(columns[2]) == words["Det_S_Dat"]
    assert set(columns[3]) == words["Det_P_Nom"] == words["Det_P_Acc"]
    assert set(columns[4]) == words["Det_P_Dat"]
    nouns = list(zip(*GERMAN_NOUNS))
    for column, lhs in zip(nouns, ["N_S_Nom", "N_S_Acc", "N_S_Dat", "N_P_Nom", "N_P_Dat"]):
        assert set(column) == words[lhs]
    assert set(nouns[3]) == words["N_P_Acc"]
    verbs = list(zip(*GERMAN_VERBS))
    assert set(verbs[0]) == words["V_trans_S"] and set(verbs[1]) == words["V_trans_P"]


# ----------------------------------------------------------- partial accuracy

# For each task: a gen source, then outputs that are (correct, wrong in the
# hierarchical sense = the linear output, wrong in the linear sense = neither).
PARTIAL = [
    (
        "question-formation",
        "my raven that doesn't sleep does change . quest",
        "does my raven that doesn't sleep change ?",
        "doesn't my raven that sleep does change ?",
        "my raven that doesn't sleep does change ?",
    ),
    (
        "question-formation-in-german",
        "dein Rabe , der gegessen hat , kann feiern . quest",
        "kann dein Rabe ?",
        "hat dein Rabe , der gegessen , kann feiern ?",
        "dein Rabe kann feiern ?",
    ),
    (
        "tense-reinflection-with-do",
        "some newts by our yak did smile . PRESENT",
        "some newts by her yak do smile .",
        "some newts by our yak does smile .",
        "some newts by our yak don't smile .",
    ),
    (
        "passivization",
        "her yak by her zebras amused her newt . passiv",
        "the newt",
        "her zebras were amused by her yak .",
        "her yak was amused by her newt .",
    ),
    (
        "question-formation-with-have",
        "my unicorn that hasn't amused the yaks has eaten . quest",
        "has the unicorn eaten ?",
        "hasn't my unicorn that amused the yaks has eaten ?",
        "haven't my unicorn that hasn't amused the yaks eaten ?",
    ),
    (
        "tense-reinflection",
        "our zebra below the vultures changed . PRESENT",
        "our zebra below the vultures changes .",
        "our zebra below the vultures change .",
        "our zebra below the vultures changes the yak .",
    ),
    (
        "passivization-in-german",
        "ein Wellensittich bei den Papageien verwirrte den Löwen . passiv",
        "der Löwe wurde",
        "die Papageie wurden von einem Wellensittich verwirrt .",
        "der Löwen wurde von einem Wellensittich verwirrt .",
    ),
]


@pytest.mark.parametrize("slug, source, correct, linear_like, neither", PARTIAL)
def test_partial_accuracy_checks(slug, source, correct, linear_like, neither):
    task = get_task(slug)
    source = source.split()
    hierarchical = task.target(source)
    linear = task.linear(source[:-1])
    assert " ".join(linear) == linear_like  # the linear reference, written by hand
    for reference in (hierarchical, linear):
        assert task.partial_match(reference, reference)
    assert task.partial_match(correct.split(), hierarchical)
    assert not task.partial_match(correct.split(), linear)
    assert task.partial_match(linear_like.split(), linear)
    assert not task.partial_match(linear_like.split(), hierarchical)
    assert not task.partial_match(neither.split(), hierarchical)
    assert not task.partial_match(neither.split(), linear)
    assert not task.partial_match([], hierarchical)


# ------------------------------------------------------------ generated data


@pytest.fixture(scope="module")
def generated():
    """Paper-size splits of the four Mueller tasks (a few seconds each)."""
    return {slug: get_task(slug).generate(seed=7) for slug in MUELLER_TASKS}


@pytest.mark.parametrize("slug", MUELLER_TASKS)
def test_generated_splits_obey_the_withholding_rules(generated, slug):
    task = get_task(slug)
    splits = generated[slug]
    assert {k: len(v) for k, v in splits.items()} == {
        "train": 100_000,
        "dev": 1_000,
        "test": 10_000,
        "gen": 10_000,
    }
    # The ambiguity design, checked without the task's structure code: on every
    # in-distribution transformation line the linear rule gives the same output,
    # on every gen line a different one.
    for split in ("train", "dev", "test"):
        for source, target in splits[split]:
            assert target == task.target(source)
            if source[-1] == task.transform_marker:
                assert task.linear(source[:-1]) == target, " ".join(source)
            else:
                assert target == source[:-1]
    for source, target in splits["gen"]:
        assert source[-1] == task.transform_marker
        assert task.linear(source[:-1]) != target


@pytest.mark.parametrize("slug", MUELLER_TASKS)
def test_generated_splits_are_in_the_grammar_without_overlaps(generated, slug):
    task = get_task(slug)
    splits = generated[slug]
    sources = {split: [" ".join(s) for s, _ in examples] for split, examples in splits.items()}
    for split, lines in sources.items():
        assert len(set(lines)) == len(lines), f"duplicate source in {split}"
    train = set(sources["train"])
    for split in ("dev", "test", "gen"):
        assert train.isdisjoint(sources[split])
    for split in ("dev", "test", "gen"):
        for source, _ in splits[split]:
            assert task.accepts(source[:-1])
    for source, _ in splits["train"][:3000]:
        assert task.accepts(source[:-1])


@pytest.mark.parametrize("slug", MUELLER_TASKS)
def test_generated_statistics_match_the_published_ones(generated, slug):
    task = get_task(slug)
    ours = split_statistics(task, generated[slug]["test"])
    for name, value in zip(STATISTICS, PUBLISHED[slug]["test"]):
        assert abs(ours[name] - value) <= 0.02, (name, ours[name], value)


def test_question_formation_gen_filters(generated):
    # docs/tasks.md §4.2, §4.5: two auxiliaries, same number; quota SRC 6,667 / ORC 3,333.
    have = get_task("question-formation-with-have")
    gen = generated[have.slug]["gen"]
    pairs = Counter(tuple(t for t in s if t in have.auxiliaries) for s, _ in gen)
    assert set(pairs) == {
        ("has", "hasn't"),
        ("hasn't", "has"),
        ("have", "haven't"),
        ("haven't", "have"),
    }
    kinds = Counter("SRC" if s[3] in have.auxiliaries else "ORC" for s, _ in gen)
    assert kinds == {"SRC": 6667, "ORC": 3333}
    german = get_task("question-formation-in-german")
    pairs = Counter(
        tuple(t for t in s if t in german.auxiliaries) for s, _ in generated[german.slug]["gen"]
    )
    assert set(pairs) == {
        ("kann", "hat"),
        ("hat", "kann"),
        ("können", "haben"),
        ("haben", "können"),
    }


@pytest.mark.parametrize("slug", MUELLER_TASKS)
def test_generated_vocabulary_equals_the_published_one(generated, datasets_dir, slug):
    ours = Vocabulary.from_examples(generated[slug]["train"])
    theirs = Vocabulary.from_examples(
        [e for split in SPLITS for e in published(datasets_dir, slug, split)]
    )
    assert ours == theirs


def test_generation_is_seeded_and_smaller_splits_are_prefixes(generated):
    task = get_task("passivization")
    small = task.generate(seed=7, sizes={"train": 500, "dev": 10, "test": 20, "gen": 30})
    for split, n in {"train": 500, "dev": 10, "test": 20, "gen": 30}.items():
        assert small[split] == generated[task.slug][split][:n]
    other = task.generate(seed=8, sizes={"train": 500, "dev": 0, "test": 0, "gen": 0})
    assert other["train"] != small["train"] and other["dev"] == []
    lengths = [len(s) for s, _ in generated[task.slug]["test"]]
    assert statistics.median(lengths) == 10
