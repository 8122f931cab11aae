"""Partial accuracy of the tense tasks: the authors' POS tags and main-verb match (docs/tasks.md §3.2)."""

from __future__ import annotations

from fruit.tasks.base import Tokens
from fruit.tasks.mccoy.lexicon import DETERMINERS, LEMMA, NUMBER, PREPOSITIONS, RELATIVIZERS

# The authors' pos_tense table (docs/tasks.md §3.2).
POS_TENSE = {
    **{w: "" for w in ("SOS", "sos")},
    **{w: "G" for w in "DECL decl QUEST quest PRESENT present PAST past".split()},
    **{w: "D" for w in DETERMINERS},
    **{w: "N" for w in NUMBER},
    **{w: "V" for w in LEMMA},
    **{w: "A" for w in "can will could would do does don't doesn't did didn't".split()},
    **{w: "P" for w in PREPOSITIONS},
    **{w: "R" for w in RELATIVIZERS},
    **{w: "T" for w in (".", "?")},
    **{w: "K" for w in ("+Q", "+q", "-Q", "-q")},
    "t": "C",
}


def pos_tags(tokens: Tokens) -> list[str]:
    # A token outside the table gets a tag of its own, so it matches only itself.
    return [POS_TENSE.get(t, "?" + t) for t in tokens]


def pos_main_verb_match(output: Tokens, reference: Tokens, verb_tag: str) -> bool:
    """Same POS sequence, and the same word at the main-verb position (docs/tasks.md §3.2)."""
    tags = pos_tags(output)
    if tags != pos_tags(reference):
        return False
    verbs = [i for i, tag in enumerate(tags) if tag == verb_tag]
    nth = 1 if len(tags) > 2 and tags[2] == "R" else 0  # subject RC: the second verb
    if len(verbs) <= nth:
        return False
    i = verbs[nth]
    return output[i] == reference[i]
