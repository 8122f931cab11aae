"""Generalization accuracies split by what modifies the subject (McCoy tasks).

A mean over the generalization set can hide how a model generalizes. In McCoy et al.'s
generalization sets every subject carries a relative clause, of one of three kinds
(docs/tasks.md): subject-relative with an intransitive verb (``SRC-intrans``, "my raven
that doesn't sleep"), subject-relative with a transitive verb (``SRC-trans``, "her
orangutan who doesn't admire our quail") and object-relative (``ORC``, "our raven who my
tyrannosaurus doesn't confuse"). ``by_subject`` gives expected full accuracy (and, for
tasks whose partial accuracy is the first word, the exact first-word accuracy) per kind,
computed exactly as ``fruit.evaluation`` computes the means, so that the rows, weighted by
their counts, give the run's own numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fruit.errors import FruitError
from fruit.evaluation import EVAL_BATCH_TOKENS, target_log_probs


def subject_groups(task, sources: Sequence[Sequence[str]]) -> list[str]:
    """The subject's modifier of each source sentence (its task marker is ignored)."""
    if not hasattr(task, "parse"):
        raise FruitError(
            f"{task.slug}: split by subject is defined for the McCoy tasks "
            "(question-formation, tense-reinflection, and their German/do variants)"
        )
    return [task.parse(s).subject.modifier for s in sources]


def group_means(groups: Sequence[str], columns: dict[str, torch.Tensor]) -> list[dict]:
    """One row per group (in order of first appearance): its size ``n`` and, for each
    column of per-sentence log probabilities, the mean probability over the group."""
    order = list(dict.fromkeys(groups))
    index = torch.tensor([order.index(g) for g in groups])  # (N,) group of each sentence
    rows = []
    for k, group in enumerate(order):
        members = index == k
        row = {"subject": group, "n": int(members.sum())}
        for name, log_probs in columns.items():
            row[name] = float(log_probs[members].exp().mean())
        rows.append(row)
    return rows


def by_subject(
    model,
    task,
    vocab,
    *,
    gen,
    gen_linear,
    batch_tokens: int = EVAL_BATCH_TOKENS,
    device=None,
) -> list[dict]:
    """Rows ``{"subject", "n", "FA hierarchical", "FA linear"[, "PA hierarchical",
    "PA linear"]}`` over the generalization set, one per kind of subject modifier."""
    if [s for s, _ in gen] != [s for s, _ in gen_linear]:
        raise ValueError("gen and gen_linear must list the same sources in the same order")
    groups = subject_groups(task, [s for s, _ in gen])
    columns = {}
    for rule, examples in (("hierarchical", gen), ("linear", gen_linear)):
        pairs = [(vocab.encode(s), vocab.encode(t)) for s, t in examples]
        full, first = target_log_probs(
            model, pairs, eos_id=vocab.eos_id, batch_tokens=batch_tokens, device=device
        )
        columns[f"FA {rule}"] = full
        if task.partial_kind == "first-word":
            columns[f"PA {rule}"] = first
    return group_means(groups, dict(sorted(columns.items())))


def format_rows(rows: list[dict]) -> str:
    """A Markdown table of ``by_subject``'s rows, probabilities to 3 decimals."""
    names = [k for k in rows[0] if k not in ("subject", "n")]
    lines = ["| subject | n | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for row in rows:
        values = " | ".join(f"{row[k]:.3f}" for k in names)
        lines.append(f"| {row['subject']} | {row['n']} | {values} |")
    return "\n".join(lines)
