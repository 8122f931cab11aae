"""Generalization accuracies split by what modifies the subject (McCoy tasks).

A mean over the generalization set can hide how a model generalizes. In McCoy et al.'s
generalization sets (question formation and the two tense reinflection tasks) the
subject carries a modifier: a prepositional phrase (``PP``, only in the tense tasks'
sets) or a relative clause of one of three kinds (docs/tasks.md): subject-relative with
an intransitive verb (``SRC-intrans``, "my raven that doesn't sleep"), subject-relative
with a transitive verb (``SRC-trans``, "her orangutan who doesn't admire our quail") and
object-relative (``ORC``, "our raven who my tyrannosaurus doesn't confuse"); in question
formation's every subject has a relative clause. ``by_subject`` gives expected full accuracy (and, for
tasks whose partial accuracy is the first word, the exact first-word accuracy) per kind,
computed exactly as ``fruit.evaluation`` computes the means, so that the rows, weighted by
their counts, give the run's own numbers.

Expected accuracies near 0 under both rules say only that the outputs follow neither.
``outputs_by_subject`` says what they are instead: it decodes each generalization source
greedily and sorts the output into one of ``OUTPUT_KINDS`` (``output_kind``): either
rule's target, or which word it fronts and which it deletes ("fronts main, deletes none"
and so on), stopped early, or other.
"""

from __future__ import annotations

from collections.abc import Sequence

from fruit.errors import FruitError
from fruit.evaluation import (
    EVAL_BATCH_TOKENS,
    group_means,
    sample_continuations,
    target_log_probs,
)

# What a greedy output on a generalization source can be (output_kind), in this order.
# "main" is the word the hierarchical rule moves (the main clause's auxiliary in question
# formation), "first" the word the linear rule moves (the first auxiliary).
OUTPUT_KINDS = (
    "hierarchical",
    "linear",
    "fronts main, deletes none",
    "fronts first, deletes none",
    "fronts first, deletes main",
    "fronts main, deletes first",
    "stopped early",
    "other",
)


def has_subject_groups(task) -> bool:
    """Whether ``subject_groups`` is defined for ``task`` (the McCoy tasks)."""
    return hasattr(task, "parse")


def subject_groups(task, sources: Sequence[Sequence[str]]) -> list[str]:
    """The subject's modifier of each source sentence (its task marker is ignored)."""
    if not has_subject_groups(task):
        raise FruitError(
            f"{task.slug}: split by subject is defined for the McCoy tasks "
            "(question-formation, tense-reinflection, tense-reinflection-with-do)"
        )
    return [task.parse(s).subject.modifier for s in sources]


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


def output_kind(task, source: Sequence[str], output: Sequence[str]) -> str:
    """One of ``OUTPUT_KINDS`` for ``output`` on ``source`` (a sentence, its final
    punctuation and its marker):

    - "hierarchical" / "linear": the target of that rule, word for word;
    - "fronts X, deletes Y": for tasks whose two rules each move one word to the front
      (question formation), the word that rule X moves put first, the sentence copied
      after it without the word that rule Y moves (Y = none: with every word), ending
      as the targets end; e.g. "does my raven that doesn't sleep does change ?" fronts main and
      deletes none. (Fronts main, deletes main is hierarchical; first, first is linear.)
    - "stopped early": the start of an output of one of those kinds, then the targets'
      final token ("doesn't my raven that doesn't sleep ?");
    - "other": anything else.
    """
    sentence, output = list(source[:-1]), list(output)
    hierarchical, linear = task.target(list(source)), task.linear(sentence)
    if output == hierarchical:
        return "hierarchical"
    if output == linear:
        return "linear"
    end, words = hierarchical[-1], sentence[:-1]  # words: without the final punctuation
    complete = [hierarchical, linear]  # what a whole output of each kind is
    moved = {"main": _moved(words, hierarchical), "first": _moved(words, linear)}
    if None not in moved.values():
        for fronted, i in moved.items():
            for deleted, j in (*moved.items(), ("none", None)):
                rest = words if j is None else words[:j] + words[j + 1 :]
                if output == [words[i], *rest, end]:
                    return f"fronts {fronted}, deletes {deleted}"
                complete.append([words[i], *rest, end])
    n = len(output)
    for whole in complete:
        if 2 <= n < len(whole) and output[:-1] == whole[: n - 1] and output[-1] == end:
            return "stopped early"
    return "other"


def _moved(words: list[str], target: list[str]) -> int | None:
    """The position i such that ``target`` is ``words[i]`` moved to the front, then the
    final token; None when the target is not such a move."""
    for i, word in enumerate(words):
        if target[:-1] == [word, *words[:i], *words[i + 1 :]]:
            return i
    return None


def outputs_by_subject(
    model, task, vocab, sources: Sequence[Sequence[str]], *, max_tokens: int = 50, device=None
) -> list[dict]:
    """Rows ``{"subject", "n", <kind>: share, ...}``, one per kind of subject modifier:
    the share of the sources whose greedy output is of each of ``OUTPUT_KINDS``."""
    groups = subject_groups(task, sources)
    prompts = [vocab.encode(list(s)) for s in sources]
    greedy = sample_continuations(  # out[i][0]: the greedy output's ids
        model, prompts, eos_id=vocab.eos_id, num_samples=1, max_tokens=max_tokens,
        greedy=True, device=device,
    )  # fmt: skip
    kinds = [output_kind(task, s, vocab.decode(g[0])) for s, g in zip(sources, greedy)]
    rows = []
    for group in dict.fromkeys(groups):  # in order of first appearance
        members = [k for k, g in zip(kinds, groups) if g == group]
        row = {"subject": group, "n": len(members)}
        row.update({kind: members.count(kind) / len(members) for kind in OUTPUT_KINDS})
        rows.append(row)
    return rows


def format_rows(rows: list[dict]) -> str:
    """A Markdown table of ``by_subject``'s (or ``outputs_by_subject``'s) rows, numbers to
    3 decimals."""
    names = [k for k in rows[0] if k not in ("subject", "n")]
    lines = ["| subject | n | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for row in rows:
        values = " | ".join(f"{row[k]:.3f}" for k in names)
        lines.append(f"| {row['subject']} | {row['n']} | {values} |")
    return "\n".join(lines)
