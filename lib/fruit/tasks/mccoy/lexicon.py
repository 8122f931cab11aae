"""The McCoy lexicon: determiners, nouns, verbs and their forms, auxiliaries (docs/tasks.md §4.6).

One small vocabulary shared by the three McCoy tasks; the grammar files in
``fruit/tasks/grammars/mccoy_*.gr`` use the same words.
"""

from __future__ import annotations

DETERMINERS = ("the", "some", "my", "your", "our", "her")
NOUNS_SG = (
    "newt orangutan peacock quail raven salamander tyrannosaurus unicorn vulture walrus "
    "xylophone yak zebra"
).split()
NOUNS_PL = (
    "newts orangutans peacocks quails ravens salamanders tyrannosauruses unicorns vultures "
    "walruses xylophones yaks zebras"
).split()
PREPOSITIONS = ("around", "near", "with", "upon", "by", "behind", "above", "below")
RELATIVIZERS = ("who", "that")

# lemma (= plural present), 3sg present, past (docs/tasks.md §4.6 verb table)
_VERB_TABLE = [
    ("giggle", "giggles", "giggled"),
    ("smile", "smiles", "smiled"),
    ("sleep", "sleeps", "slept"),
    ("swim", "swims", "swam"),
    ("wait", "waits", "waited"),
    ("move", "moves", "moved"),
    ("change", "changes", "changed"),
    ("read", "reads", "read"),
    ("eat", "eats", "ate"),
    ("entertain", "entertains", "entertained"),
    ("amuse", "amuses", "amused"),
    ("high_five", "high_fives", "high_fived"),
    ("applaud", "applauds", "applauded"),
    ("confuse", "confuses", "confused"),
    ("admire", "admires", "admired"),
    ("accept", "accepts", "accepted"),
    ("remember", "remembers", "remembered"),
    ("comfort", "comforts", "comforted"),
]
VERBS_INTRANS = tuple(v for v, _, _ in _VERB_TABLE[:9])
VERBS_TRANS = tuple(v for v, _, _ in _VERB_TABLE[9:])
THIRD_SINGULAR = {v: s for v, s, _ in _VERB_TABLE}
PAST = {v: p for v, _, p in _VERB_TABLE}
LEMMA = {form: row[0] for row in _VERB_TABLE for form in row}

# (number, negated) -> present auxiliary
PRESENT_AUX = {
    ("sg", False): "does",
    ("sg", True): "doesn't",
    ("pl", False): "do",
    ("pl", True): "don't",
}
PAST_AUX = {False: "did", True: "didn't"}
AUXILIARIES = frozenset(PRESENT_AUX.values()) | frozenset(PAST_AUX.values())
NUMBER = {**{n: "sg" for n in NOUNS_SG}, **{n: "pl" for n in NOUNS_PL}}

MODIFIERS = ("none", "PP", "SRC-intrans", "SRC-trans", "ORC")
OBJECT_TYPES = ("intrans",) + MODIFIERS  # "intrans": no object; else the object's modifier
