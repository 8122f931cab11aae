"""The four tasks of Mueller et al. (2022), generated with the pipeline of docs/tasks.md §2.1."""

from fruit.tasks.mueller.passives import EnglishPassivization, GermanPassivization
from fruit.tasks.mueller.questions import QuestionFormationInGerman, QuestionFormationWithHave

QUESTION_FORMATION_IN_GERMAN = QuestionFormationInGerman()
PASSIVIZATION = EnglishPassivization()
QUESTION_FORMATION_WITH_HAVE = QuestionFormationWithHave()
PASSIVIZATION_IN_GERMAN = GermanPassivization()
