"""fruit.breakdown: the subject's relative clause of a generalization sentence, per-group
means against hand-computed ones, and rows that add up to fruit.evaluation's means."""

from __future__ import annotations

import math
import random

import pytest
import torch

from fruit.breakdown import (
    OUTPUT_KINDS,
    by_subject,
    format_rows,
    group_means,
    output_kind,
    outputs_by_subject,
    subject_groups,
)
from fruit.errors import FruitError
from fruit.evaluation import evaluate
from fruit.models import build_model
from fruit.tasks import Vocabulary, get_task, read_tsv
from fruit.tasks.splits import linear_examples

QF = get_task("question-formation")
AUXILIARIES = {"do", "does", "don't", "doesn't"}


def test_the_three_kinds_of_subject_relative_clause():
    sources = [
        "my raven that doesn't sleep does change . quest",
        "her orangutan who doesn't admire our quail does comfort the orangutan . quest",
        "our raven who my tyrannosaurus doesn't confuse does amuse some unicorns . quest",
        "our raven who my tyrannosaurus doesn't confuse does amuse some unicorns .",
    ]
    assert subject_groups(QF, [s.split() for s in sources]) == [
        "SRC-intrans",
        "SRC-trans",
        "ORC",
        "ORC",
    ]


def test_tasks_without_a_parse_are_refused():
    task = get_task("passivization")
    with pytest.raises(
        FruitError, match="passivization: split by subject is defined for the McCoy"
    ):
        subject_groups(task, [["the", "newt", "giggled", ".", "active"]])


def test_group_means_against_hand_computed_values():
    log_p = torch.log(torch.tensor([0.5, 0.2, 0.9, 0.4], dtype=torch.float64))
    rows = group_means(["ORC", "SRC-trans", "ORC", "ORC"], {"FA linear": log_p})
    assert [r["subject"] for r in rows] == ["ORC", "SRC-trans"]
    assert [r["n"] for r in rows] == [3, 1]
    assert rows[0]["FA linear"] == pytest.approx((0.5 + 0.9 + 0.4) / 3)
    assert rows[1]["FA linear"] == pytest.approx(0.2)
    table = format_rows(rows)
    assert "| ORC | 3 | 0.600 |" in table and "| SRC-trans | 1 | 0.200 |" in table


def test_published_gen_splits_as_the_surface_says(datasets_dir):
    """Oracle: in a subject relative clause the relativizer is followed by an auxiliary,
    in an object relative clause by the clause's own subject."""
    gen = read_tsv(datasets_dir / "question-formation" / "gen.tsv")
    groups = subject_groups(QF, [s for s, _ in gen])
    for (source, _), group in zip(gen, groups):
        after = source[next(i for i, w in enumerate(source) if w in ("who", "that")) + 1]
        assert (group == "ORC") == (after not in AUXILIARIES), (source, group)
    assert set(groups) == {"SRC-intrans", "SRC-trans", "ORC"}


def test_each_row_is_fruit_evaluation_on_that_group_alone(datasets_dir):
    """Oracle: fruit.evaluation's means over the sentences of one kind of subject."""
    folder = datasets_dir / "question-formation"
    gen, test = (read_tsv(folder / f) for f in ("gen.tsv", "test.tsv"))
    gen = [gen[i] for i in sorted(random.Random(0).sample(range(len(gen)), 60))]
    gen_linear = linear_examples(QF, gen)
    vocab = Vocabulary.from_examples(read_tsv(folder / "dev.tsv") + gen + gen_linear + test)
    torch.manual_seed(0)
    model = build_model("Tf", vocab_size=vocab.size, d=16).eval()
    with torch.no_grad():  # sharper than at initialisation, so the means differ by group
        for p in model.parameters():
            p.mul_(8.0)
    rows = by_subject(model, QF, vocab, gen=gen, gen_linear=gen_linear)
    assert sum(r["n"] for r in rows) == len(gen) and len(rows) == 3
    groups = subject_groups(QF, [s for s, _ in gen])
    for row in rows:
        members = [i for i, g in enumerate(groups) if g == row["subject"]]
        alone = evaluate(
            model, QF, vocab, test=test[:2],
            gen=[gen[i] for i in members], gen_linear=[gen_linear[i] for i in members],
        )  # fmt: skip
        for kind, column in (("full", "FA"), ("partial", "PA")):
            for rule in ("hierarchical", "linear"):
                assert math.isclose(row[f"{column} {rule}"], alone[kind][rule], rel_tol=1e-9)


def test_output_kinds_of_outputs_built_from_the_rules():
    """Oracle: outputs made from the source's words at the positions of its auxiliaries,
    found by hand (not from the task's rules)."""
    cases = [  # source, index of the main clause's auxiliary, of the first auxiliary
        ("my raven that doesn't sleep does change . quest", 5, 3),
        ("her orangutan who doesn't admire our quail does comfort the orangutan . quest", 7, 3),
        ("our raven who my tyrannosaurus doesn't confuse does amuse some unicorns . quest", 7, 5),
    ]
    for text, main, first in cases:
        source = text.split()
        words = source[:-2]  # without "." and the marker
        assert words[main] in AUXILIARIES and words[first] in AUXILIARIES

        def move(fronted, deleted, words=words):
            rest = [w for k, w in enumerate(words) if k != deleted]
            return [words[fronted], *rest, "?"]

        hierarchical, linear = move(main, main), move(first, first)
        assert QF.target(source) == hierarchical and QF.linear(source[:-1]) == linear
        assert output_kind(QF, source, hierarchical) == "hierarchical"
        assert output_kind(QF, source, linear) == "linear"
        assert output_kind(QF, source, move(main, None)) == "fronts main, deletes none"
        assert output_kind(QF, source, move(first, None)) == "fronts first, deletes none"
        assert output_kind(QF, source, move(first, main)) == "fronts first, deletes main"
        assert output_kind(QF, source, move(main, first)) == "fronts main, deletes first"
        for whole in (hierarchical, linear, move(first, None), move(main, first)):
            assert output_kind(QF, source, [*whole[:4], "?"]) == "stopped early"
            assert output_kind(QF, source, whole[:-1]) == "other"  # no "?"
        assert output_kind(QF, source, [*hierarchical[1:], hierarchical[0]]) == "other"
        assert output_kind(QF, source, [words[0], *words, "?"]) == "other"  # not an auxiliary
        assert output_kind(QF, source, []) == "other"


def test_tasks_whose_rules_move_nothing_have_no_fronting_kinds():
    task = get_task("tense-reinflection")
    source = "the yaks that some unicorn entertained applauded her salamanders . PRESENT".split()
    hierarchical, linear = task.target(source), task.linear(source[:-1])
    assert output_kind(task, source, hierarchical) == "hierarchical"
    assert output_kind(task, source, linear) == "linear"
    assert output_kind(task, source, [*hierarchical[:3], "."]) == "stopped early"
    assert output_kind(task, source, source[:-1]) == "other"


def test_outputs_by_subject_counts_every_source_once(datasets_dir):
    gen = read_tsv(datasets_dir / "question-formation" / "gen.tsv")[:30]
    sources = [s for s, _ in gen]
    vocab = Vocabulary.from_examples(gen + linear_examples(QF, gen))
    torch.manual_seed(0)
    model = build_model("Tf", vocab_size=vocab.size, d=16).eval()
    rows = outputs_by_subject(model, QF, vocab, sources, max_tokens=20)
    groups = subject_groups(QF, sources)
    assert [r["subject"] for r in rows] == list(dict.fromkeys(groups))
    for row in rows:
        assert row["n"] == groups.count(row["subject"])
        assert sum(row[k] for k in OUTPUT_KINDS) == pytest.approx(1.0)
    assert format_rows(rows).splitlines()[0] == "| subject | n | " + " | ".join(OUTPUT_KINDS) + " |"


def test_outputs_by_subject_gives_the_shares_of_the_outputs_kinds(datasets_dir, monkeypatch):
    """Scripted greedy outputs (the decoder is not what is tested here): the hierarchical
    question for object relative clauses, the linear one for the other subjects, and an
    early stop for every fifth source; the shares are then known by counting."""
    import fruit.breakdown as breakdown

    gen = read_tsv(datasets_dir / "question-formation" / "gen.tsv")[:60]
    linear = dict((tuple(s), t) for s, t in linear_examples(QF, gen))
    sources = [s for s, _ in gen]
    groups = subject_groups(QF, sources)
    vocab = Vocabulary.from_examples(gen + linear_examples(QF, gen))
    planned = {}
    for i, ((source, target), group) in enumerate(zip(gen, groups)):
        output = target if group == "ORC" else linear[tuple(source)]
        planned[tuple(vocab.encode(list(source)))] = [*output[:2], "?"] if i % 5 == 0 else output

    def scripted(model, prompts, **options):
        assert options["greedy"] and options["num_samples"] == 1
        return [[vocab.encode(planned[tuple(p)])] for p in prompts]

    monkeypatch.setattr(breakdown, "sample_continuations", scripted)
    rows = {r["subject"]: r for r in outputs_by_subject(None, QF, vocab, sources)}
    assert set(rows) == set(groups) and {"ORC", "SRC-trans", "SRC-intrans"} <= set(rows)
    for group, row in rows.items():
        members = [i for i, g in enumerate(groups) if g == group]
        early = sum(i % 5 == 0 for i in members)
        rule = "hierarchical" if group == "ORC" else "linear"
        assert row["n"] == len(members)
        assert row["stopped early"] == pytest.approx(early / len(members))
        assert row[rule] == pytest.approx(1 - early / len(members)), (group, row)
