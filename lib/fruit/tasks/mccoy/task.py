"""The base class of the three McCoy tasks (docs/tasks.md §2.2, §4.1, §4.3, §4.6).

Reads the task's grammar file, parses with ``fruit.tasks.mccoy.parser`` and
generates by template-stratified sampling (``fruit.tasks.mccoy.sampler``) from the
measured tables of docs/tasks.md Appendix A (``fruit.tasks.mccoy.templates``).
"""

from __future__ import annotations

import functools
import random

from fruit.errors import FruitError
from fruit.tasks.base import PAPER_SIZES, SPLITS, Example, Task, Tokens
from fruit.tasks.grammar import GRAMMAR_DIR, Grammar, Rule
from fruit.tasks.mccoy.parser import Parse, parse, subject_modifier_of
from fruit.tasks.mccoy.sampler import PP_NUMBERS_FREE, Sampler
from fruit.tasks.mccoy.templates import Table, allocate


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
        sampler = Sampler(rng, self.pp_numbers)
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

    def _fill(self, templates: Table, n: int, sampler: Sampler, seen: set, gen: bool):
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

    def _draw(self, key, count: int, sampler: Sampler, seen: set, gen: bool) -> list[Tokens]:
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
