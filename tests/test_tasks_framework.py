"""The task registry, vocabulary, data-file reading and the grammar machinery."""

from __future__ import annotations

import importlib
import itertools
import math
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from fruit.errors import FruitError
from fruit.tasks import PAPER_TASKS, TASKS, Vocabulary, get_task, read_tsv, write_tsv
from fruit.tasks.base import Task, first_word_match, second_word_match
from fruit.tasks.grammar import GRAMMAR_DIR, Grammar, strip

UPSTREAM_MARKERS = (
    "N1 N1S N1P N2 N3 N4 N5 N5S N5P N6 AUX1 AUX2 AUX3 AUX4 AUX5 VI1 VI2 VT1 VT2 VT3 RN RA".split()
)
MUELLER_GRAMMARS = [
    "passivization",
    "passivization-in-german",
    "question-formation-in-german",
    "question-formation-with-have",
]


# ------------------------------------------------------------------ registry


def test_seven_tasks_in_the_paper_order():
    assert (
        TASKS[: len(PAPER_TASKS)]
        == PAPER_TASKS
        == (
            "question-formation",
            "question-formation-in-german",
            "tense-reinflection-with-do",
            "passivization",
            "question-formation-with-have",
            "tense-reinflection",
            "passivization-in-german",
        )
    )


@pytest.mark.parametrize("slug", TASKS)
def test_get_task_gives_a_task_with_its_slug(slug):
    task = get_task(slug)
    assert isinstance(task, Task)
    assert task.slug == slug
    assert task.partial_kind in ("first-word", "pos-main-verb", "second-word")
    assert task.identity_marker != task.transform_marker


def test_unknown_task_lists_the_valid_ones():
    with pytest.raises(FruitError) as e:
        get_task("question-formation-in-french")
    message = str(e.value)
    assert "question-formation-in-french" in message
    assert all(slug in message for slug in TASKS)


# ---------------------------------------------------------------- vocabulary


def test_vocabulary_ids_follow_code_point_order_then_eos_bos():
    examples = [(["b", "a", "quest"], ["a", "b", "?"]), (["Z", "ä"], ["."])]
    vocab = Vocabulary.from_examples(examples)
    assert vocab.types == tuple(sorted({"a", "b", "quest", "?", "Z", "ä", "."}))
    assert vocab.types[0] == "."  # code point 46 comes before '?', 'Z', 'a'
    assert vocab.size == len(vocab) == 7
    assert (vocab.eos_id, vocab.bos_id) == (7, 8)
    ids = vocab.encode(["a", "ä", "Z"])
    assert ids == [vocab.types.index("a"), 6, vocab.types.index("Z")]
    assert vocab.decode(ids + [vocab.eos_id]) == ["a", "ä", "Z", "<eos>"]


def test_vocabulary_has_no_unk():
    vocab = Vocabulary(["a", "b"])
    with pytest.raises(FruitError, match="'c' is not in the vocabulary"):
        vocab.encode(["a", "c"])
    with pytest.raises(FruitError):
        vocab.decode([5])


def test_question_formation_vocabulary_has_68_types(datasets_dir):
    # docs/paper.md §1: dev ∪ test of question formation has exactly 68 types.
    examples = [
        e
        for split in ("dev", "test")
        for e in read_tsv(datasets_dir / "question-formation" / f"{split}.tsv")
    ]
    vocab = Vocabulary.from_examples(examples)
    assert vocab.size == 68
    assert {"decl", "quest", ".", "?", "don't", "doesn't", "high_five"} <= set(vocab.types)


# -------------------------------------------------------------------- files


def test_write_then_read_round_trip(tmp_path):
    examples = [(["der", "Löwe", ".", "decl"], ["der", "Löwe", "."]), (["a", "quest"], ["?"])]
    write_tsv(tmp_path / "x.tsv", examples)
    assert (tmp_path / "x.tsv").read_bytes() == "der Löwe . decl\tder Löwe .\na quest\t?\n".encode()
    assert read_tsv(tmp_path / "x.tsv") == examples


@pytest.mark.parametrize(
    "content, line, expected",
    [
        ("a b\tc\nno tab here\n", 2, "exactly one tab"),
        ("a\tb\tc\n", 1, "exactly one tab"),
        ("a  b\tc\n", 1, "single spaces"),
        ("a b\t\n", 1, "target"),
        ("\tb\n", 1, "source"),
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path, content, line, expected):
    path = tmp_path / "bad.tsv"
    path.write_text(content)
    with pytest.raises(FruitError) as e:
        read_tsv(path)
    message = str(e.value)
    assert message.startswith(f"{path}:{line}: ")
    assert expected in message
    assert "\n" not in message


def test_missing_file_and_bad_encoding(tmp_path):
    with pytest.raises(FruitError, match="file not found"):
        read_tsv(tmp_path / "absent.tsv")
    (tmp_path / "latin1.tsv").write_bytes("a\tb\nL\xf6we\tc\n".encode("latin-1"))
    with pytest.raises(FruitError, match=r"latin1.tsv:2: expected UTF-8"):
        read_tsv(tmp_path / "latin1.tsv")


# ------------------------------------------------------------------ grammar

TOY = """
# a toy grammar with an ambiguity and an annotation marker
ROOT -> S .
2 S -> NP VP
S -> NP
NP -> Det N | Det N {PP} P Det N
VP -> V | V NP
Det -> the | a
N -> cat
N -> dog
P -> near
V -> sleeps
"""


def _language(grammar: Grammar, symbol: str = "ROOT"):
    """Brute force: every derivation of a finite grammar as (annotated tokens, probability)."""
    if symbol not in grammar.by_lhs:
        yield [symbol], 1.0
        return
    rules = grammar.by_lhs[symbol]
    total = sum(r.weight for r in rules)
    for rule in rules:
        expansions = [list(_language(grammar, s)) for s in rule.rhs]
        for parts in itertools.product(*expansions):
            tokens = [t for part, _ in parts for t in part]
            yield tokens, rule.weight / total * math.prod(p for _, p in parts)


def test_grammar_reading():
    g = Grammar.from_text(TOY)
    assert g.terminals == {".", "the", "a", "cat", "dog", "near", "sleeps"}
    assert {r.weight for r in g.by_lhs["S"]} == {2.0, 1.0}
    assert len(g.by_lhs["Det"]) == 2
    with pytest.raises(FruitError, match=r"toy:1: expected '\[weight\] LHS -> RHS"):
        Grammar.from_text("ROOT S .", name="toy")


def test_sampler_frequencies_match_the_rule_probabilities():
    g = Grammar.from_text(TOY)
    exact = Counter()
    for tokens, p in _language(g):
        exact[" ".join(tokens)] += p
    assert math.isclose(sum(exact.values()), 1.0)
    rng = random.Random(0)
    n = 40_000
    observed = Counter(" ".join(g.sample(rng)) for _ in range(n))
    assert set(observed) <= set(exact)
    for string, p in exact.items():
        # within 5 standard deviations of the binomial count
        assert abs(observed[string] - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1, string


def test_recogniser_counts_derivations_like_brute_force():
    g = Grammar.from_text(TOY + "NP -> Det N\n")  # a duplicated rule doubles the count
    derivations = Counter(" ".join(strip(tokens)) for tokens, _ in _language(g))
    for sentence, count in derivations.items():
        assert g.count_parses(sentence.split()) == count
    assert g.count_parses("the cat sleeps".split()) == 0  # no final '.'
    assert not g.accepts("the cat near .".split())
    assert g.accepts("a dog near the cat sleeps the dog .".split())


def test_strip_removes_annotation_markers_only():
    assert strip(["{N1}", "the", "{AUX2}", "{", "}", "?"]) == ["the", "{", "}", "?"]


@pytest.mark.parametrize("slug", MUELLER_GRAMMARS)
def test_shipped_grammar_has_the_upstream_rules_and_weights(slug, datasets_dir):
    ours = Grammar.load(f"{slug}.cfg")
    upstream_text = (datasets_dir / slug / "grammar.gr").read_text("utf-8")
    upstream = Grammar.from_upstream(upstream_text, UPSTREAM_MARKERS)
    assert ours.rule_multiset() == upstream.rule_multiset()
    # The German line "1 N_S_Acc Löwen" is separated by a space, not a tab.
    if slug == "passivization-in-german":
        assert ours.rule_multiset()[("N_S_Acc", ("Löwen",))] == 1.0


def test_partial_match_helpers():
    assert first_word_match(["does", "x"], ["does", "y"])
    assert not first_word_match([], ["does"])
    assert second_word_match(["a", "b"], ["c", "b", "d"])
    assert not second_word_match(["a"], ["a"])


# ------------------------------------------------------------------ layout

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _resolves(dotted: str) -> bool:
    """Whether ``fruit.a.b.C.d`` names a module, or an attribute chain inside one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("doc", ["tasks.md", "architecture.md"])
def test_task_code_named_in_the_docs_exists(doc):
    named = set(re.findall(r"`(fruit\.tasks(?:\.\w+)*)", (DOCS / doc).read_text("utf-8")))
    missing = sorted(ref for ref in named if not _resolves(ref))
    assert not missing, f"docs/{doc} names code that does not exist: {missing}"


def test_grammar_files_are_found_where_the_package_data_puts_them():
    # pyproject.toml ships "tasks/grammars/*"; both readers must look there.
    assert GRAMMAR_DIR.name == "grammars" and GRAMMAR_DIR.parent.name == "tasks"
    for name in ("mccoy_question.gr", "mccoy_tense.gr", "passivization.cfg"):
        assert (GRAMMAR_DIR / name).is_file()
    assert Grammar.load("passivization.cfg").rules
