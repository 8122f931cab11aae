"""The architectures by name (``fruit.names.ARCHITECTURES``), parsed into ``ArchSpec``
(docs/paper.md §2, docs/extending.md); ``fruit.models.registry`` builds them.

A registered name is parsed, through its description, into an ``ArchSpec``: the base
network, which transformer layers are stack-attention layers and of which kind, or which
stacks a stack RNN drives, and whether the readings also go to the output (+R). A
description itself (``"Tf(-,-,-,Nd,Nd)"``) is accepted too, for building a model
outside a run; runs need a registered name, which names their folders.
"""

from __future__ import annotations

from dataclasses import dataclass

from fruit.errors import FruitError, unknown_choice
from fruit.names import ARCHITECTURES, RECURRENT_BASES, TRANSFORMER_BASES, split_description

STANDARD_LAYER = "-"  # a transformer layer with multi-head self-attention


@dataclass(frozen=True)
class ArchSpec:
    name: str
    base: str  # "Tf" | "RNN" | "LSTM"
    # Transformers: one entry per layer, None for a standard layer, a stack kind otherwise.
    layer_kinds: tuple = ()
    # Stack RNNs: the kinds of the stacks the controller drives (none: a plain RNN), and +R.
    stacks: tuple = ()
    reading_to_output: bool = False
    num_layers: int = 3
    num_heads: int = 4

    @property
    def transformer(self) -> bool:
        return self.base in TRANSFORMER_BASES

    @property
    def stack_kinds(self) -> tuple[str, ...]:
        """Every stack of the model, in order (transformer layers, then RNN stacks)."""
        return tuple(k for k in self.layer_kinds if k is not None) + tuple(self.stacks)


def parse_description(description: str, name: str | None = None) -> ArchSpec:
    """``"Tf(-,-,Nd,-,-)"``, ``"LSTM(Nd,Sup)+R"``, ... -> ArchSpec (FruitError naming the
    problem). See ``fruit.names`` for the grammar."""
    from fruit.models.stack_kinds import STACK_KINDS

    name = name or description
    split = split_description(description)
    if split is None:
        raise FruitError(
            f"architecture {name!r}: description {description!r} is not of the form "
            "Tf(-,-,Nd,-,-), LSTM(Nd) or LSTM(Nd)+R"
        )
    base, parts, reading_to_output = split
    if base not in TRANSFORMER_BASES + RECURRENT_BASES:
        raise unknown_choice(
            f"base network of architecture {name!r}", base, TRANSFORMER_BASES + RECURRENT_BASES
        )
    allowed = set(STACK_KINDS) | ({STANDARD_LAYER} if base in TRANSFORMER_BASES else set())
    for part in parts:
        if part not in allowed:
            raise unknown_choice(f"layer of architecture {name!r}", part, sorted(allowed))
    if base in TRANSFORMER_BASES:
        if not parts:
            raise FruitError(f"architecture {name!r}: a transformer needs at least one layer")
        if reading_to_output:
            raise FruitError(f"architecture {name!r}: +R is for stack RNNs only")
        kinds = tuple(None if p == STANDARD_LAYER else p for p in parts)
        return ArchSpec(name, base, layer_kinds=kinds, num_layers=len(kinds), num_heads=4)
    if reading_to_output and not parts:
        raise FruitError(f"architecture {name!r}: +R needs a stack to read")
    return ArchSpec(name, base, stacks=parts, reading_to_output=reading_to_output)


def parse_architecture(name: str) -> ArchSpec:
    """A registered name (``fruit.names.ARCHITECTURES``), or a description, -> its spec;
    anything else is a FruitError listing the registered names."""
    if name in ARCHITECTURES:
        return parse_description(ARCHITECTURES[name], name)
    if "(" in name:
        return parse_description(name)
    raise unknown_choice("architecture", name, tuple(ARCHITECTURES))
