"""What a profile's search did, and how its final runs generalize by kind of subject, from
the run records alone.

* ``markdown_search``: per (task, architecture) pair, every search trial with its drawn
  learning rate and batch budget, how long it trained, its best validation
  cross-entropy (what selects) and its accuracies, the selected trial marked, and where
  a trial was taken over from another profile (``reused_from``,
  ``fruit.experiments.planning.reuse``).
* ``markdown_by_subject``: per pair, every final run's (and search trial's) generalization
  accuracies by the kind of modifier on the subject (``by_subject`` in metrics.json,
  recorded at the end of each run: ``fruit.breakdown``, or afterwards from its best.pt:
  ``fruit.backfill``), so that a mean can be read as the mix it is. Runs recorded before
  metrics.json carried it are listed as such.
"""

from __future__ import annotations

import math

from fruit.reporting.runs import ARCHITECTURE_ORDER, TASK_ORDER, TASK_TITLES, RunResult


def _pairs(runs: list[RunResult]) -> list[tuple[str, str]]:
    """The (task, architecture) pairs of ``runs`` in the paper's order of tasks and rows
    (unknown names last)."""

    def place(order, name):
        return order.index(name) if name in order else len(order)

    pairs = set((r.task, r.architecture) for r in runs)
    return sorted(
        pairs, key=lambda p: (place(TASK_ORDER, p[0]), place(ARCHITECTURE_ORDER, p[1]), p)
    )


def _selected(trials: list[RunResult]) -> RunResult | None:
    """The trial with the lowest finite best validation cross-entropy (ties: lowest
    index), as ``fruit.experiments.planning.plan.select_best`` selects, once every trial finished."""
    if any(t.metrics is None for t in trials):
        return None
    scored = [
        (ce, t.index, t)
        for t in trials
        if isinstance(ce := t.metrics.get("best_validation_cross_entropy"), (int, float))
        and math.isfinite(ce)
    ]
    return min(scored, key=lambda s: s[:2])[2] if scored else None


def _number(value, digits: int = 3) -> str:
    return "--" if value is None else f"{value:.{digits}f}"


def markdown_search(runs: list[RunResult], note: str, trials: int | None = None) -> str:
    """The search trials of ``runs`` (any phases; search ones are used), pair by pair;
    ``trials``: how many each pair plans (the profile's; default: the folders found)."""
    searched = sorted((r for r in runs if r.phase == "search"), key=lambda r: r.index)
    lines = [
        f"**The search trials ({note}).** Per pair, each trial's drawn learning rate and "
        "batch budget (tokens), the epochs it trained, its best validation cross-entropy "
        "(the trial with the lowest is selected, **bold**, once every trial finished) and "
        "its full and partial accuracies with its best parameters; *taken over*: the same "
        "run recorded under another profile.",
    ]
    for task, arch in _pairs(searched):
        mine = [t for t in searched if (t.task, t.architecture) == (task, arch)]
        planned = max(trials or 0, len(mine))
        best = _selected(mine) if len(mine) == planned else None
        finished = sum(t.metrics is not None for t in mine)
        head = f"{TASK_TITLES.get(task, task)}, {arch}: {finished} of {planned} trials finished"
        if best is not None:
            m = best.metrics
            head += (
                f"; selected trial {best.index} (learning rate {m['learning_rate']:.2e}, "
                f"B {m['batch_tokens']})"
            )
        lines += [
            "",
            f"*{head}.*",
            "",
            "| Trial | Learning rate | B | Epochs | Best val. CE | FA test | FA hier. "
            "| FA linear | PA hier. | PA linear | |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|",
        ]
        for t in mine:
            if t.metrics is None:
                lines.append(f"| {t.index} | | | | | | | | | | unfinished |")
                continue
            m = t.metrics
            mark = "**" if t is best else ""
            note_text = m.get("status", "")
            if t.reused_from:
                note_text += f"; taken over from {t.reused_from}"
                if not m.get("reused_from"):  # it was unfinished there, and went on here
                    note_text += " unfinished, finished here"
            cells = [
                f"{mark}{t.index}{mark}",
                f"{m['learning_rate']:.2e}",
                str(m["batch_tokens"]),
                _number(m.get("epochs"), 1),
                f"{mark}{_number(m.get('best_validation_cross_entropy'), 4)}{mark}",
                _number(t.value("full", "test")),
                _number(t.value("full", "hierarchical")),
                _number(t.value("full", "linear")),
                _number(t.value("partial", "hierarchical")),
                _number(t.value("partial", "linear")),
                note_text,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_by_subject(runs: list[RunResult], note: str) -> str:
    """The final runs' generalization accuracies by kind of subject modifier, pair by
    pair, and the search trials' where their records carry them (the selected trial
    marked once every trial finished)."""
    done = [r for r in runs if r.metrics is not None]
    finals = sorted((r for r in done if r.phase == "final"), key=lambda r: r.index)
    trials = sorted((r for r in done if r.phase == "search"), key=lambda r: r.index)
    lines = [
        f"**Generalization by the subject's modifier ({note}).** Per final run, for each "
        "kind of modifier on the subject of the generalization sentences (ORC: object "
        "relative clause; SRC-intrans / SRC-trans: subject relative clause with an "
        "intransitive / transitive verb; PP: prepositional phrase) and its number of "
        "sentences n: full accuracy (FA) and, where partial accuracy is the first word's, "
        "partial accuracy (PA) under the hierarchical and the linear rule. Weighted by n, "
        "a run's rows give its means.",
    ]
    added = sorted(
        {
            r.metrics["by_subject_added"].get("commit") or "?"
            for r in done
            if r.metrics.get("by_subject") and r.metrics.get("by_subject_added")
        }
    )
    if added:
        commits = ", ".join(c[:7] for c in added)
        lines[0] += (
            " Rows marked † were computed after the run from a best.pt, by commit "
            f"{commits} (`python -m fruit.backfill`; metrics.json's by_subject_added says "
            "from which): the run's code predates recording them."
        )
    for task, arch in _pairs(finals):
        mine = [r for r in finals if (r.task, r.architecture) == (task, arch)]
        lines += ["", f"*{TASK_TITLES.get(task, task)}, {arch}.*", ""]
        if not any(r.metrics.get("by_subject") for r in mine):
            lines.append(
                "Not recorded: the runs were made before metrics.json carried it, or the "
                "task has no breakdown by subject (fruit.breakdown)."
            )
            continue
        lines += _subject_table(mine, lambda r: f"final-{r.index}")
    for task, arch in _pairs(trials):
        mine = [r for r in trials if (r.task, r.architecture) == (task, arch)]
        if not any(r.metrics.get("by_subject") for r in mine):
            continue
        if "search trials" not in lines[0]:
            lines[0] += (
                " Then the search trials, where their records carry the breakdown (the "
                "selected trial **bold**)."
            )
        best = _selected(mine)
        lines += ["", f"*{TASK_TITLES.get(task, task)}, {arch}: search trials.*", ""]
        lines += _subject_table(
            mine, lambda r, best=best: f"**search-{r.index}**" if r is best else f"search-{r.index}"
        )
    return "\n".join(lines) + "\n"


def _subject_table(runs: list[RunResult], label) -> list[str]:
    """One row per run (``label(run)``), a column per kind of subject and accuracy."""
    recorded = [r for r in runs if r.metrics.get("by_subject")]
    kinds = list(dict.fromkeys(row["subject"] for r in recorded for row in r.metrics["by_subject"]))
    columns = [c for c in recorded[0].metrics["by_subject"][0] if c not in ("subject", "n")]
    sizes = {row["subject"]: row["n"] for row in recorded[0].metrics["by_subject"]}
    header = ["Run"] + [f"{k} (n {sizes.get(k, '?')}): {c}" for k in kinds for c in columns]
    lines = ["| " + " | ".join(header) + " |", "|:---|" + "---:|" * (len(header) - 1)]
    for r in runs:
        rows = {row["subject"]: row for row in r.metrics.get("by_subject") or []}
        if not rows:
            lines.append(f"| {label(r)} |" + " not recorded |" * (len(header) - 1))
            continue
        mark = " †" if r.metrics.get("by_subject_added") else ""
        values = [_number(rows.get(k, {}).get(c)) for k in kinds for c in columns]
        lines.append(f"| {label(r)}{mark} | " + " | ".join(values) + " |")
    return lines
