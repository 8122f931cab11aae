"""The syntactic transformation tasks (docs/contracts.md §1): the registry.

``REGISTRY`` maps a slug to the ``module:attribute`` of its ``Task`` object (the
contract: ``fruit.tasks.base.Task``); ``get_task(slug)`` imports the module only when
first asked for. The paper's seven come first (``PAPER_TASKS``: the published data, the
paper's tables and numbers exist for these only); a new task is one more entry
(docs/extending.md).
"""

from __future__ import annotations

import importlib

from fruit.errors import check_name, unknown_choice
from fruit.tasks.base import PAPER_SIZES, SPLITS, Task
from fruit.tasks.tsv import read_tsv, write_tsv
from fruit.tasks.vocab import Vocabulary

# slug -> "module:attribute"; the paper's seven in the paper's order, then yours.
REGISTRY = {
    "question-formation": "fruit.tasks.mccoy.question_formation:TASK",
    "question-formation-in-german": "fruit.tasks.mueller.tasks:QUESTION_FORMATION_IN_GERMAN",
    "tense-reinflection-with-do": "fruit.tasks.mccoy.tense_reinflection:TASK_WITH_DO",
    "passivization": "fruit.tasks.mueller.tasks:PASSIVIZATION",
    "question-formation-with-have": "fruit.tasks.mueller.tasks:QUESTION_FORMATION_WITH_HAVE",
    "tense-reinflection": "fruit.tasks.mccoy.tense_reinflection:TASK",
    "passivization-in-german": "fruit.tasks.mueller.tasks:PASSIVIZATION_IN_GERMAN",
    # Yours below, e.g. "main-negation": "fruit.tasks.main_negation:TASK" (docs/extending.md)
}

# The paper's seven, in the paper's order.
PAPER_TASKS = (
    "question-formation",
    "question-formation-in-german",
    "tense-reinflection-with-do",
    "passivization",
    "question-formation-with-have",
    "tense-reinflection",
    "passivization-in-german",
)
TASKS: tuple[str, ...] = tuple(check_name("task", slug) for slug in REGISTRY)  # every one
MUELLER_TASKS = (
    "question-formation-in-german",
    "passivization",
    "question-formation-with-have",
    "passivization-in-german",
)
MCCOY_TASKS = ("question-formation", "tense-reinflection-with-do", "tense-reinflection")


def get_task(slug: str) -> Task:
    """The task object of a slug; FruitError listing the valid slugs if unknown."""
    if slug not in REGISTRY:
        raise unknown_choice("task", slug, TASKS)
    module, attribute = REGISTRY[slug].split(":")
    return getattr(importlib.import_module(module), attribute)


__all__ = [
    "MCCOY_TASKS",
    "MUELLER_TASKS",
    "PAPER_SIZES",
    "PAPER_TASKS",
    "REGISTRY",
    "SPLITS",
    "TASKS",
    "Task",
    "Vocabulary",
    "get_task",
    "read_tsv",
    "write_tsv",
]
