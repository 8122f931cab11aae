"""What the three McCoy tasks share (docs/tasks.md §2.2, §4.1, §4.3, §4.6).

question-formation, tense-reinflection and tense-reinflection-with-do are three
renderings of one small language: ``Det N`` noun phrases, optionally modified by a
PP (``Prep Det N``) or a relative clause, and a main clause ``Subject VerbGroup
(Object) .``. A *verb group* is one verb slot, spelled per task:

    question-formation            do/does/don't/doesn't + bare verb
    tense-reinflection (source)   past verb
    tense-reinflection-with-do    did/didn't + bare verb

This module holds the lexicon, the grammar files (recognized with
``fruit.tasks.grammar``), one structural parser for all three spellings, the
generator (template-stratified sampling from the measured tables of docs/tasks.md
Appendix A) and the base class of the McCoy tasks.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path

from fruit.errors import FruitError
from fruit.tasks.base import PAPER_SIZES, SPLITS, Example, Task, Tokens
from fruit.tasks.grammar import Grammar, Rule

# --------------------------------------------------------------------------- lexicon

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

_DET = frozenset(DETERMINERS)
_PREP = frozenset(PREPOSITIONS)
_REL = frozenset(RELATIVIZERS)

MODIFIERS = ("none", "PP", "SRC-intrans", "SRC-trans", "ORC")
OBJECT_TYPES = ("intrans",) + MODIFIERS  # "intrans": no object; else the object's modifier

# --------------------------------------------------------------------------- grammar files

GRAMMAR_DIR = Path(__file__).resolve().parent / "grammars"


def read_grammar(filename: str, rename=None) -> Grammar:
    """A ``mccoy_*.gr`` grammar (upstream ``weight LHS RHS...`` format, ``#`` comments).

    ``rename(word) -> word`` rewrites its terminals, e.g. present verbs to past ones.
    """
    lines = (GRAMMAR_DIR / filename).read_text(encoding="utf-8").splitlines()
    text = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    grammar = Grammar.from_upstream(text, markers=(), name=filename)
    if rename is None:
        return grammar
    rules = [
        Rule(r.lhs, tuple(rename(s) if s in grammar.terminals else s for s in r.rhs), r.weight)
        for r in grammar.rules
    ]
    return Grammar(rules, name=filename)


# --------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class NounPhrase:
    """``Det N`` with its modifier; indices into the sentence."""

    head: int  # the head noun
    end: int  # one past the last token
    modifier: str  # one of MODIFIERS
    inner: int | None = None  # the PP's noun, the ORC's subject or the SRC-trans object
    finite: int | None = None  # the RC's finite word (auxiliary or tensed verb)

    @property
    def controller(self) -> int | None:
        """The noun the RC's finite word agrees with (SRC: the head; ORC: its own subject)."""
        if self.finite is None:
            return None
        return self.inner if self.modifier == "ORC" else self.head


@dataclass(frozen=True)
class Parse:
    """The structure of a McCoy sentence (marker-free, ending in ``.``)."""

    subject: NounPhrase
    finite: int  # the main clause's finite word (auxiliary or tensed verb)
    object: NounPhrase | None

    @property
    def object_type(self) -> str:
        return "intrans" if self.object is None else self.object.modifier

    def agreement(self) -> list[tuple[int, int]]:
        """(finite word, the noun it agrees with) for every clause, left to right."""
        pairs = [(self.subject.finite, self.subject.controller), (self.finite, self.subject.head)]
        if self.object is not None:
            pairs.append((self.object.finite, self.object.controller))
        return sorted((f, c) for f, c in pairs if f is not None)


class _ParseError(Exception):
    pass


def _expect(tokens: Tokens, i: int, words, what: str) -> None:
    if i >= len(tokens) or tokens[i] not in words:
        found = repr(tokens[i]) if i < len(tokens) else "the end"
        raise _ParseError(f"expected {what} at token {i + 1}, found {found}")


def _verb_group(tokens: Tokens, i: int) -> tuple[int, int]:
    """(finite word, one past the lexical verb): ``Aux V`` or a tensed ``V``."""
    finite = i
    if i < len(tokens) and tokens[i] in AUXILIARIES:
        i += 1
    _expect(tokens, i, LEMMA, "a verb")
    return finite, i + 1


def _noun_phrase(tokens: Tokens, i: int) -> NounPhrase:
    _expect(tokens, i, _DET, "a determiner")
    _expect(tokens, i + 1, NUMBER, "a noun")
    head, j = i + 1, i + 2
    if j < len(tokens) and tokens[j] in _PREP:
        _expect(tokens, j + 1, _DET, "a determiner")
        _expect(tokens, j + 2, NUMBER, "a noun")
        return NounPhrase(head, j + 3, "PP", inner=j + 2)
    if j < len(tokens) and tokens[j] in _REL:
        if j + 1 < len(tokens) and tokens[j + 1] in _DET:  # ORC: Rel Det N (Aux) V_trans
            _expect(tokens, j + 2, NUMBER, "a noun")
            finite, k = _verb_group(tokens, j + 3)
            if LEMMA[tokens[k - 1]] not in VERBS_TRANS:
                raise _ParseError(f"expected a transitive verb at token {k}")
            return NounPhrase(head, k, "ORC", inner=j + 2, finite=finite)
        finite, k = _verb_group(tokens, j + 1)
        if LEMMA[tokens[k - 1]] in VERBS_INTRANS:
            return NounPhrase(head, k, "SRC-intrans", finite=finite)
        _expect(tokens, k, _DET, "a determiner")
        _expect(tokens, k + 1, NUMBER, "a noun")
        return NounPhrase(head, k + 2, "SRC-trans", inner=k + 1, finite=finite)
    return NounPhrase(head, j, "none")


def parse(sentence: Tokens) -> Parse:
    """The structure of a marker-free sentence; FruitError if it has none."""
    try:
        subject = _noun_phrase(sentence, 0)
        finite, k = _verb_group(sentence, subject.end)
        obj = None
        if LEMMA[sentence[k - 1]] in VERBS_TRANS:
            obj = _noun_phrase(sentence, k)
            k = obj.end
        _expect(sentence, k, {"."}, "'.'")
        if k + 1 != len(sentence):
            raise _ParseError(f"expected the end after '.' at token {k + 1}")
    except _ParseError as e:
        raise FruitError(
            f"not a sentence of the McCoy grammars: {' '.join(sentence)!r}: {e}"
        ) from None
    return Parse(subject, finite, obj)


def subject_modifier_of(sentence: Tokens) -> str:
    """ "none" | "PP" | "RC" for the sentence's subject."""
    modifier = parse(sentence).subject.modifier
    return modifier if modifier in ("none", "PP") else "RC"


# --------------------------------------------------------------------------- partial accuracy

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


# --------------------------------------------------------------------------- generation


@dataclass(frozen=True)
class Slot:
    """A verb slot before spelling: its lemma, its agreement number, its polarity."""

    lemma: str
    number: str
    negated: bool


# Number patterns (head, PP noun) and weights for a PP-modified noun phrase.
PP_NUMBERS_FREE = (
    (("sg", "sg"), 1.0),
    (("sg", "pl"), 1.0),
    (("pl", "sg"), 1.0),
    (("pl", "pl"), 1.0),
)


class _Sampler:
    """Expands a template (subject modifier, object type) into a sentence of slots."""

    def __init__(self, rng: random.Random, pp_numbers):
        self.rng = rng
        self.pp_patterns = [p for p, _ in pp_numbers]
        self.pp_weights = [w for _, w in pp_numbers]

    def noun(self, number: str) -> str:
        return self.rng.choice(NOUNS_SG if number == "sg" else NOUNS_PL)

    def slot(self, verbs, number: str) -> Slot:
        return Slot(self.rng.choice(verbs), number, self.rng.random() < 0.5)

    def noun_phrase(self, modifier: str) -> tuple[str, list]:
        """(head number, items) of ``Det N`` + modifier."""
        rng = self.rng
        if modifier == "PP":
            ((number, pp_number),) = rng.choices(self.pp_patterns, self.pp_weights)
        else:
            number = rng.choice(("sg", "pl"))
        items = [rng.choice(DETERMINERS), self.noun(number)]
        if modifier == "PP":
            items += [rng.choice(PREPOSITIONS), rng.choice(DETERMINERS), self.noun(pp_number)]
        elif modifier != "none":
            inner = rng.choice(("sg", "pl"))
            items.append(rng.choice(RELATIVIZERS))
            if modifier == "SRC-intrans":
                items.append(self.slot(VERBS_INTRANS, number))
            elif modifier == "SRC-trans":
                items += [self.slot(VERBS_TRANS, number), rng.choice(DETERMINERS), self.noun(inner)]
            else:  # ORC
                items += [rng.choice(DETERMINERS), self.noun(inner), self.slot(VERBS_TRANS, inner)]
        return number, items

    def sentence(self, subject_modifier: str, object_type: str) -> list:
        number, items = self.noun_phrase(subject_modifier)
        if object_type == "intrans":
            items.append(self.slot(VERBS_INTRANS, number))
        else:
            items.append(self.slot(VERBS_TRANS, number))
            items += self.noun_phrase(object_type)[1]
        items.append(".")
        return items


def allocate(total: int, weights: list[float]) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainders; deterministic)."""
    s = sum(weights)
    if total <= 0 or s <= 0:
        return [0] * len(weights)
    exact = [total * w / s for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (counts[i] - exact[i], i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


# A template: (marker kind, subject modifier, object type) -> count.
Table = dict[tuple[str, str, str], int]


def table(rows: str, marker: str) -> Table:
    """Parse an Appendix A block: one line per subject modifier, six object-type counts."""
    out: Table = {}
    for line in rows.strip().splitlines():
        modifier, *counts = line.split()
        for object_type, count in zip(OBJECT_TYPES, counts):
            if int(count):
                out[(marker, modifier, object_type)] = int(count)
    return out


# Consecutive failed draws after which a template counts as exhausted (all its
# distinct sentences used); its shortfall then goes to the templates of the same marker.
_EXHAUSTED_AFTER = 5_000


class McCoyTask(Task):
    """A McCoy task: subclasses spell verb slots and define the transformation."""

    grammar_file: str
    in_distribution: Table  # Appendix A, dev+test pooled; markers "identity"/"transform"
    generalization: Table  # measured on the published gen split; marker "transform"
    pp_numbers = PP_NUMBERS_FREE

    # -- to be defined by subclasses
    def spell(self, items: list, rng: random.Random) -> Tokens:
        """The source sentence of a sampled item list."""
        raise NotImplementedError

    def gen_filter(self, sentence: Tokens) -> bool:
        """Extra condition on a generalization sentence (beyond being withheld)."""
        return True

    def is_withheld(self, sentence: Tokens) -> bool:
        """Whether the sentence has the structure withheld from transformation examples."""
        raise NotImplementedError

    # -- shared
    @functools.cached_property
    def grammar(self) -> Grammar:
        """The grammar of the source sentences."""
        return read_grammar(self.grammar_file, self._source_word)

    def _source_word(self, word: str) -> str:
        return word

    def accepts(self, sentence: Tokens) -> bool:
        return self.grammar.accepts(self.strip_marker(sentence))

    def strip_marker(self, sentence: Tokens) -> Tokens:
        """The sentence without a trailing task marker, if it has one."""
        if sentence and sentence[-1] in (self.identity_marker, self.transform_marker):
            return list(sentence[:-1])
        return list(sentence)

    def parse(self, sentence: Tokens) -> Parse:
        return parse(self.strip_marker(sentence))

    def subject_modifier(self, sentence: Tokens) -> str:
        """ "none" | "PP" | "RC": what modifies the subject (a trailing marker is ignored)."""
        return subject_modifier_of(self.strip_marker(sentence))

    def generate(self, seed: int, sizes: dict[str, int] | None = None) -> dict[str, list[Example]]:
        sizes = self._check_sizes(sizes)
        rng = random.Random(seed)
        sampler = _Sampler(rng, self.pp_numbers)
        seen: set[tuple[str, ...]] = set()  # sources (sentence + marker): global de-duplication
        n_pool = sizes["train"] + sizes["dev"] + sizes["test"]
        pool = self._fill(self.in_distribution, n_pool, sampler, seen, gen=False)
        gen = self._fill(self.generalization, sizes["gen"], sampler, seen, gen=True)
        rng.shuffle(pool)
        rng.shuffle(gen)
        a, b = sizes["train"], sizes["train"] + sizes["dev"]
        splits = {"train": pool[:a], "dev": pool[a:b], "test": pool[b:], "gen": gen}
        return {name: [(s, self.target(s)) for s in sources] for name, sources in splits.items()}

    def _check_sizes(self, sizes):
        out = dict(PAPER_SIZES)
        for name, n in (sizes or {}).items():
            if name not in SPLITS:
                raise FruitError(f"unknown split {name!r}; valid choices: {', '.join(SPLITS)}")
            if not isinstance(n, int) or n < 0:
                raise FruitError(f"split size of {name!r} must be an integer >= 0, got {n!r}")
            out[name] = n
        return out

    def _fill(self, templates: Table, n: int, sampler: _Sampler, seen: set, gen: bool):
        """``n`` distinct sources, stratified over the templates by their counts."""
        keys = list(templates)
        quota = dict(zip(keys, allocate(n, [templates[k] for k in keys])))
        out: list[Tokens] = []
        exhausted: set = set()
        while True:
            shortfall: dict[str, int] = {}
            for key in keys:
                if quota[key] and key not in exhausted:
                    got = self._draw(key, quota[key], sampler, seen, gen)
                    out += got
                    if len(got) < quota[key]:
                        exhausted.add(key)
                        shortfall[key[0]] = shortfall.get(key[0], 0) + quota[key] - len(got)
                quota[key] = 0
            if not shortfall:
                return out
            for marker, missing in shortfall.items():
                rest = [k for k in keys if k[0] == marker and k not in exhausted]
                if not rest:
                    raise FruitError(
                        f"{self.slug}: cannot draw {missing} more distinct "
                        f"{marker} examples; ask for smaller splits"
                    )
                for k, extra in zip(rest, allocate(missing, [templates[k] for k in rest])):
                    quota[k] += extra

    def _draw(self, key, count: int, sampler: _Sampler, seen: set, gen: bool) -> list[Tokens]:
        marker_kind, subject_modifier, object_type = key
        marker = self.identity_marker if marker_kind == "identity" else self.transform_marker
        out: list[Tokens] = []
        failures = 0
        while len(out) < count and failures < _EXHAUSTED_AFTER:
            sentence = self.spell(sampler.sentence(subject_modifier, object_type), sampler.rng)
            source = (*sentence, marker)
            ok = source not in seen
            if ok and marker_kind == "transform":
                withheld = self.is_withheld(sentence)
                ok = withheld and self.gen_filter(sentence) if gen else not withheld
            if not ok:
                failures += 1
                continue
            failures = 0
            seen.add(source)
            out.append(list(source))
        return out
