"""fruit.breakdown: the subject's relative clause of a generalization sentence, per-group
means against hand-computed ones, and rows that add up to fruit.evaluation's means."""

from __future__ import annotations

import math
import random

import pytest
import torch

from fruit.breakdown import by_subject, format_rows, group_means, subject_groups
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
