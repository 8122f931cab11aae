"""The seven syntactic transformation tasks (docs/contracts.md §1).

``get_task(slug)`` imports the task's module only when first asked for.
"""

from __future__ import annotations

import importlib

from fruit.errors import unknown_choice
from fruit.tasks.base import PAPER_SIZES, SPLITS, Task
from fruit.tasks.tsv import read_tsv, write_tsv
from fruit.tasks.vocab import Vocabulary

# slug -> "module:attribute" (the paper's order).
_REGISTRY = {
    "question-formation": "fruit.tasks.mccoy.question_formation:TASK",
    "question-formation-in-german": "fruit.tasks.mueller.tasks:QUESTION_FORMATION_IN_GERMAN",
    "tense-reinflection-with-do": "fruit.tasks.mccoy.tense_reinflection:TASK_WITH_DO",
    "passivization": "fruit.tasks.mueller.tasks:PASSIVIZATION",
    "question-formation-with-have": "fruit.tasks.mueller.tasks:QUESTION_FORMATION_WITH_HAVE",
    "tense-reinflection": "fruit.tasks.mccoy.tense_reinflection:TASK",
    "passivization-in-german": "fruit.tasks.mueller.tasks:PASSIVIZATION_IN_GERMAN",
}

TASKS: tuple[str, ...] = tuple(_REGISTRY)
MUELLER_TASKS = (
    "question-formation-in-german",
    "passivization",
    "question-formation-with-have",
    "passivization-in-german",
)
MCCOY_TASKS = ("question-formation", "tense-reinflection-with-do", "tense-reinflection")


def get_task(slug: str) -> Task:
    """The task object of a slug; FruitError listing the valid slugs if unknown."""
    if slug not in _REGISTRY:
        raise unknown_choice("task", slug, TASKS)
    module, attribute = _REGISTRY[slug].split(":")
    return getattr(importlib.import_module(module), attribute)


__all__ = [
    "MCCOY_TASKS",
    "MUELLER_TASKS",
    "PAPER_SIZES",
    "SPLITS",
    "TASKS",
    "Task",
    "Vocabulary",
    "get_task",
    "read_tsv",
    "write_tsv",
]
