"""Malformed input to the task rules: a FruitError naming the problem, never a traceback.

Typed sentences (the explore notebook, ``fruit`` commands) reach ``target``,
``transform`` and ``linear`` unchecked, so every rule of every task must either
apply or raise FruitError; no IndexError, StopIteration, ValueError, KeyError or
AssertionError may escape.
"""

from __future__ import annotations

import random

import pytest

from fruit.errors import FruitError
from fruit.tasks import PAPER_TASKS, get_task
from fruit.tasks.base import auxiliary_pair, first_index, front, same_number_opposite_polarity

# One sentence of each task's grammar (docs/tasks.md §4, Figure 1), marker-free.
GRAMMATICAL = {
    "question-formation": "my raven that doesn't sleep does change .",
    "question-formation-in-german": (
        "die Hunde , die deine Löwen bewundern können , haben gewartet ."
    ),
    "tense-reinflection-with-do": "some newts by our yak did smile .",
    "passivization": "her yak by her zebras amused her newt .",
    "question-formation-with-have": "my unicorn that hasn't amused the yaks has eaten .",
    "tense-reinflection": "her peacocks who her salamander entertained waited .",
    "passivization-in-german": ("unsere Papageie bei meinen Dinosauriern bedauerten unsere Esel ."),
}


def mutations(sentence: list[str]) -> list[list[str]]:
    """Every prefix, every one-token deletion, every adjacent swap, no final '.'."""
    out = [sentence[:i] for i in range(len(sentence))]
    out += [sentence[:i] + ["."] for i in range(len(sentence))]
    out += [sentence[:i] + sentence[i + 1 :] for i in range(len(sentence))]
    out += [
        sentence[:i] + [sentence[i + 1], sentence[i]] + sentence[i + 2 :]
        for i in range(len(sentence) - 1)
    ]
    return out


def random_sentences(task, count: int, seed: int) -> list[list[str]]:
    """Token strings over the task's own words, most of them ending in '.'."""
    rng = random.Random(seed)
    words = sorted(task.grammar.terminals)
    out = []
    for _ in range(count):
        tokens = [rng.choice(words) for _ in range(rng.randrange(0, 12))]
        out.append(tokens + ["."] if rng.random() < 0.8 else tokens)
    return out


def apply_or_fruit_error(rule, sentence):
    """The rule's output (a list of words), or None when it raised FruitError."""
    try:
        out = rule(list(sentence))
    except FruitError as e:
        assert str(e), sentence
        return None
    assert isinstance(out, list) and all(isinstance(w, str) for w in out), (sentence, out)
    return out


@pytest.mark.parametrize("slug", PAPER_TASKS)
def test_rules_on_malformed_sentences_raise_only_fruit_error(slug):
    task = get_task(slug)
    good = GRAMMATICAL[slug].split()
    assert task.accepts(good)
    bad = mutations(good) + random_sentences(task, 300, seed=sum(map(ord, slug)))
    bad = [s for s in bad if not task.accepts(s)]
    assert len(bad) > 300
    refused = 0
    for sentence in bad:
        for rule in (task.transform, task.linear):
            refused += apply_or_fruit_error(rule, sentence) is None
    # Nearly all of these are refused outright, not turned into some output.
    assert refused > len(bad)


@pytest.mark.parametrize("slug", PAPER_TASKS)
def test_target_needs_one_of_the_two_markers(slug):
    task = get_task(slug)
    sentence = GRAMMATICAL[slug].split()
    choices = f"valid choices: {task.identity_marker}, {task.transform_marker}"
    with pytest.raises(FruitError, match=f"{slug}: unknown marker '\\?'.*{choices}"):
        task.target([*sentence, "?"])
    with pytest.raises(FruitError, match=f"{slug}: unknown marker None"):
        task.target([])
    with pytest.raises(FruitError, match=slug):  # a sentence typed without its marker
        task.target(sentence)


@pytest.mark.parametrize(
    "slug, rule, sentence, problem",
    [
        # the review's case: a Mueller question without the expected auxiliary
        ("question-formation-with-have", "linear", "my unicorn eaten .", "no auxiliary"),
        (
            "question-formation-with-have",
            "transform",
            "my unicorn eaten .",
            "no main auxiliary after the subject",
        ),
        (
            "question-formation-with-have",
            "transform",
            "my unicorn that hasn't amused the yaks eaten .",
            "no main auxiliary after the subject",
        ),
        (
            "question-formation-in-german",
            "transform",
            "die Hunde , die deine Löwen bewundern können haben gewartet .",
            "no main auxiliary after the subject",
        ),
        ("question-formation-in-german", "linear", "die Hunde gewartet .", "no auxiliary"),
        ("question-formation-with-have", "linear", "my unicorn has eaten", "ending in '.'"),
        ("question-formation", "linear", "my raven changed .", "no auxiliary"),
        ("question-formation", "linear", "my raven does change", "not a sentence"),
        ("question-formation", "transform", "my raven changed .", "main auxiliary"),
        ("tense-reinflection", "linear", "my raven .", "not a sentence"),
        ("tense-reinflection-with-do", "transform", "my raven changed .", "an auxiliary"),
        ("passivization", "transform", "her yak amused .", "Verb Det N"),
        ("passivization", "linear", "her yak amused .", "no second noun phrase"),
        ("passivization", "linear", "her yak her newt .", "no verb"),
        (
            "passivization-in-german",
            "transform",
            "unsere Papageie bedauerten der Esel .",
            "cannot read a determiner and noun",
        ),
    ],
)
def test_malformed_sentences_name_the_problem(slug, rule, sentence, problem):
    task = get_task(slug)
    with pytest.raises(FruitError, match=problem):
        getattr(task, rule)(sentence.split())


# ------------------------------------------------------------- shared rule pieces


def test_front_moves_one_word_and_asks():
    s = "my raven does change .".split()
    assert front(s, 2) == "does my raven change ?".split()
    assert front(s, 0) == "my raven does change ?".split()
    for bad in ([], "my raven does change".split()):
        with pytest.raises(FruitError, match="ending in '.'"):
            front(bad, 0)
    with pytest.raises(FruitError):
        front(s, 4)  # the '.' itself


def test_first_index_and_auxiliary_pair():
    assert first_index("a b c b".split(), {"b", "c"}) == 1
    assert first_index("a b".split(), {"z"}) is None
    aux = {"has", "have"}
    assert auxiliary_pair("x has y have .".split(), aux) == ("has", "have")
    assert auxiliary_pair("x has y .".split(), aux) is None
    assert auxiliary_pair("has has has".split(), aux) is None


def test_gen_filter_pairs_match_the_spec_table():
    """docs/tasks.md §4.1/§4.5: same number, opposite polarity; checked against a table
    of all 16 ordered pairs written out by hand."""
    singular = {"does", "doesn't"}
    allowed = {("does", "doesn't"), ("doesn't", "does"), ("do", "don't"), ("don't", "do")}
    words = ["do", "does", "don't", "doesn't"]
    for a in words:
        for b in words:
            assert same_number_opposite_polarity(a, b, singular) == ((a, b) in allowed), (a, b)

    qf = get_task("question-formation")
    for a in words:
        for b in words:
            sentence = f"my raven that {a} sleep {b} change .".split()
            assert qf.gen_filter(sentence) == ((a, b) in allowed), (a, b)

    have = get_task("question-formation-with-have")
    have_words = ["have", "has", "haven't", "hasn't"]
    have_allowed = {("has", "hasn't"), ("hasn't", "has"), ("have", "haven't"), ("haven't", "have")}
    for a in have_words:
        for b in have_words:
            sentence = f"my unicorn that {a} amused the yaks {b} eaten .".split()
            expected = "SRC" if (a, b) in have_allowed else None
            assert have.gen_class(sentence, sentence) == expected, (a, b)
