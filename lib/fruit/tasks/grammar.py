"""Weighted context-free grammars: reading, top-down sampling, recognising.

Grammar files (``fruit/tasks/grammars/*.cfg``) have one rule per line::

    # comment
    ROOT -> S .
    2 NP -> Det {N1} N RC        # optional leading weight (default 1)
    Det -> the | some | my       # alternatives, each with the line's weight

A symbol that is never a left-hand side is a terminal. Terminals written in
braces, like ``{N1}``, are *annotation markers* (docs/tasks.md §2.1): the sampler
emits them so a task can see which rule was used, ``strip`` deletes them, and
the recogniser treats them as the empty string. Duplicate rules count twice.

``Grammar.from_upstream`` reads the upstream ``weight<ws>LHS<ws>RHS...`` format
(split on any whitespace), naming which terminals are annotation markers.
"""

from __future__ import annotations

import bisect
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from fruit.errors import FruitError

# The grammar files shipped with the package (package data "tasks/grammars/*").
GRAMMAR_DIR = Path(__file__).resolve().parent / "grammars"


@dataclass(frozen=True)
class Rule:
    lhs: str
    rhs: tuple[str, ...]
    weight: float = 1.0


def is_marker(symbol: str) -> bool:
    return symbol.startswith("{") and symbol.endswith("}") and len(symbol) > 2


def strip(tokens: Iterable[str]) -> list[str]:
    """The surface sentence: the tokens without annotation markers."""
    return [t for t in tokens if not is_marker(t)]


class Grammar:
    def __init__(self, rules: Sequence[Rule], start: str = "ROOT", name: str = "grammar"):
        self.name = name
        self.start = start
        self.rules = tuple(rules)
        self.by_lhs: dict[str, list[Rule]] = defaultdict(list)
        for rule in self.rules:
            self.by_lhs[rule.lhs].append(rule)
        self.by_lhs = dict(self.by_lhs)
        if start not in self.by_lhs:
            raise FruitError(f"{name}: no rule for the start symbol {start!r}")
        self.nonterminals = frozenset(self.by_lhs)
        symbols = {s for rule in self.rules for s in rule.rhs}
        self.terminals = frozenset(s for s in symbols - self.nonterminals if not is_marker(s))
        self._compile()

    # ----------------------------------------------------------------- reading

    @classmethod
    def from_text(cls, text: str, name: str = "grammar", start: str = "ROOT") -> Grammar:
        rules = []
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if "->" not in line:
                raise FruitError(f"{name}:{number}: expected '[weight] LHS -> RHS | RHS ...'")
            left, right = line.split("->", 1)
            left = left.split()
            weight = 1.0
            if len(left) == 2:
                try:
                    weight = float(left[0])
                except ValueError:
                    raise FruitError(
                        f"{name}:{number}: expected a number, got {left[0]!r}"
                    ) from None
                left = left[1:]
            if len(left) != 1:
                raise FruitError(f"{name}:{number}: expected one left-hand-side symbol")
            for alternative in right.split("|"):
                rhs = tuple(alternative.split())
                if not rhs:
                    raise FruitError(f"{name}:{number}: empty right-hand side")
                rules.append(Rule(left[0], rhs, weight))
        return cls(rules, start=start, name=name)

    @classmethod
    def load(cls, filename: str) -> Grammar:
        """A grammar shipped in ``fruit/tasks/grammars/``."""
        text = resources.files("fruit.tasks").joinpath("grammars", filename).read_text("utf-8")
        return cls.from_text(text, name=filename)

    @classmethod
    def from_upstream(cls, text: str, markers: Iterable[str], name: str = "grammar") -> Grammar:
        """The upstream ``.gr`` format; ``markers`` are written as ``{marker}`` here."""
        markers = set(markers)
        rules = []
        for number, raw in enumerate(text.splitlines(), 1):
            fields = raw.split()
            if not fields:
                continue
            if len(fields) < 3:
                raise FruitError(f"{name}:{number}: expected 'weight LHS RHS...'")
            rhs = tuple(f"{{{s}}}" if s in markers else s for s in fields[2:])
            rules.append(Rule(fields[1], rhs, float(fields[0])))
        return cls(rules, name=name)

    def rule_multiset(self) -> dict[tuple[str, tuple[str, ...]], float]:
        """Total weight of each distinct rule (for comparing two grammars)."""
        total: dict[tuple[str, tuple[str, ...]], float] = defaultdict(float)
        for rule in self.rules:
            total[rule.lhs, rule.rhs] += rule.weight
        return dict(total)

    # ---------------------------------------------------------------- sampling

    def _compile(self):
        # symbol -> (cumulative weights, total, right-hand sides reversed for the stack)
        self._table = {}
        for lhs, rules in self.by_lhs.items():
            cumulative, total = [], 0.0
            for rule in rules:
                total += rule.weight
                cumulative.append(total)
            self._table[lhs] = (cumulative, total, [tuple(reversed(r.rhs)) for r in rules])
        # Pre-terminals: nonterminals whose rules all rewrite to one terminal.
        self._lexical = {}
        for lhs, rules in self.by_lhs.items():
            if all(len(r.rhs) == 1 and r.rhs[0] not in self.by_lhs for r in rules):
                counts: dict[str, int] = defaultdict(int)
                for r in rules:
                    counts[r.rhs[0]] += 1
                self._lexical[lhs] = dict(counts)

    def sample(self, rng: random.Random) -> list[str]:
        """One top-down sample from the start symbol, annotation markers included."""
        table = self._table
        uniform = rng.random
        out: list[str] = []
        stack = [self.start]
        while stack:
            symbol = stack.pop()
            entry = table.get(symbol)
            if entry is None:
                out.append(symbol)
                continue
            cumulative, total, rhss = entry
            if len(rhss) == 1:
                stack.extend(rhss[0])
            else:
                stack.extend(rhss[bisect.bisect_right(cumulative, uniform() * total)])
        return out

    # ------------------------------------------------------------- recognising

    def count_parses(self, sentence: Sequence[str]) -> int:
        """Number of derivations of a surface sentence (0: not in the language)."""
        sentence = tuple(sentence)
        memo: dict[tuple[str, int], dict[int, int]] = {}
        return self._ends(self.start, 0, sentence, memo).get(len(sentence), 0)

    def accepts(self, sentence: Sequence[str]) -> bool:
        return self.count_parses(sentence) > 0

    def _ends(self, symbol, i, sentence, memo) -> dict[int, int]:
        """end position j -> number of derivations of sentence[i:j] from symbol."""
        key = (symbol, i)
        if key in memo:
            return memo[key]
        memo[key] = {}  # guards against left recursion (none in these grammars)
        lexical = self._lexical.get(symbol)
        if lexical is not None:
            count = lexical.get(sentence[i], 0) if i < len(sentence) else 0
            result = {i + 1: count} if count else {}
        else:
            result: dict[int, int] = defaultdict(int)
            for rule in self.by_lhs[symbol]:
                frontier = {i: 1}
                for s in rule.rhs:
                    nxt: dict[int, int] = defaultdict(int)
                    for j, n in frontier.items():
                        if s in self.by_lhs:
                            for k, m in self._ends(s, j, sentence, memo).items():
                                nxt[k] += n * m
                        elif is_marker(s):
                            nxt[j] += n
                        elif j < len(sentence) and sentence[j] == s:
                            nxt[j + 1] += n
                    frontier = nxt
                    if not frontier:
                        break
                for j, n in frontier.items():
                    result[j] += n
            result = dict(result)
        memo[key] = result
        return result
