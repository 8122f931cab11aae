"""The fifteen architectures by name, and ``build_model`` (docs/paper.md §2).

A name is parsed into an ``ArchSpec``: the base network, where the stacks go and
whether the reading is short-circuited to the output (+R). Only the paper's fifteen
names are accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from fruit.errors import FruitError, unknown_choice
from fruit.model_options import resolve_options
from fruit.names import ARCHITECTURES, TARGET_PARAMS


@dataclass(frozen=True)
class ArchSpec:
    name: str
    base: str  # "Tf" | "RNN" | "LSTM"
    # Transformers: one entry per layer, None for a standard layer, "Sup"/"Nd" for stack attention.
    layer_kinds: tuple = ()
    # Stack RNNs: the stack kind ("Sup"/"Nd") or None, and +R.
    stack: str | None = None
    reading_to_output: bool = False
    num_layers: int = 3
    num_heads: int = 4


def parse_architecture(name: str) -> ArchSpec:
    """Map one of ``ARCHITECTURES`` to its spec; anything else is a FruitError."""
    if name not in ARCHITECTURES:
        raise unknown_choice("architecture", name, ARCHITECTURES)
    base, *rest = name.split("+")
    if base == "Tf":
        # One stack layer replaces layer 3; two replace layers 2 and 4 (of 5).
        positions = {0: (), 1: (2,), 2: (1, 3)}[len(rest)]
        kinds = [None] * 5
        for pos, kind in zip(positions, rest):
            kinds[pos] = kind
        return ArchSpec(name, base, layer_kinds=tuple(kinds), num_layers=5, num_heads=4)
    stack = rest[0] if rest else None
    return ArchSpec(name, base, stack=stack, reading_to_output=rest[1:] == ["R"], num_layers=3)


def build_model(
    arch: str,
    vocab_size: int,
    target_params: int = TARGET_PARAMS,
    d: int | None = None,
    **options,
):
    """Build and initialise one of the fifteen architectures.

    ``d`` defaults to ``choose_d(arch, vocab_size, target_params)`` (docs/paper.md §10.3).
    ``options``: see ``fruit.model_options``. The model is on the CPU; move it with ``.to``.
    """
    from fruit.models.init import initialize
    from fruit.models.recurrent import RecurrentLM
    from fruit.models.sizing import choose_d
    from fruit.models.stack_rnn import StackRNNLM
    from fruit.models.transformer import TransformerLM

    spec = parse_architecture(arch)
    opts = resolve_options(options)
    if vocab_size < 1:
        raise FruitError(f"vocab_size must be positive, got {vocab_size}")
    if d is None:
        d = choose_d(arch, vocab_size, target_params, **_stack_options(opts))
    d = int(d)
    if d < 1:
        raise FruitError(f"{arch}: d must be positive, got {d}")
    if spec.base == "Tf":
        if d < spec.num_heads or d % spec.num_heads:
            raise FruitError(f"{arch}: d must be a positive multiple of {spec.num_heads}, got {d}")
        model = TransformerLM(spec, vocab_size, d, opts)
    elif spec.stack is None:
        model = RecurrentLM(spec, vocab_size, d, opts)
    else:
        model = StackRNNLM(spec, vocab_size, d, opts)
    initialize(model, scale=opts["init_scale"])
    return model


def _stack_options(opts: dict) -> dict:
    return {k: opts[k] for k in ("sup_size", "nd_states", "nd_symbols", "nd_size")}
