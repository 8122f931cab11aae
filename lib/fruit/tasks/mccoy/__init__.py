"""The three tasks of McCoy et al. (2020): question-formation, tense-reinflection(-with-do).

They are three renderings of one small language: ``Det N`` noun phrases, optionally
modified by a PP (``Prep Det N``) or a relative clause, and a main clause
``Subject VerbGroup (Object) .``. A *verb group* is one verb slot, spelled per task:

    question-formation            do/does/don't/doesn't + bare verb
    tense-reinflection (source)   past verb
    tense-reinflection-with-do    did/didn't + bare verb

Modules: ``lexicon`` (the words), ``parser`` (one structural parser for all three
spellings), ``pos`` (partial accuracy of the tense tasks), ``sampler`` and
``templates`` (template-stratified generation, docs/tasks.md Appendix A), ``task``
(the base class ``McCoyTask``, reading the grammar files), and the tasks themselves
in ``question_formation`` and ``tense_reinflection``.
"""
