"""``build_model``: an architecture (``fruit.models.architectures``) built and initialised
(docs/paper.md §2, §9).

The registries it builds from live beside it: architecture names and their descriptions
in ``fruit.names.ARCHITECTURES``, stack kinds in ``fruit.models.stack_kinds.STACK_KINDS``
(docs/extending.md adds to both)."""

from __future__ import annotations

from fruit.errors import FruitError
from fruit.model_options import resolve_options
from fruit.models.architectures import ArchSpec, parse_architecture
from fruit.names import ARCHITECTURES, TARGET_PARAMS

__all__ = ["ARCHITECTURES", "ArchSpec", "build_model", "parse_architecture"]


def build_model(
    arch: str,
    vocab_size: int,
    target_params: int = TARGET_PARAMS,
    d: int | None = None,
    **options,
):
    """Build and initialise an architecture (a registered name or a description).

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
    if spec.transformer:
        if d < spec.num_heads or d % spec.num_heads:
            raise FruitError(f"{arch}: d must be a positive multiple of {spec.num_heads}, got {d}")
        model = TransformerLM(spec, vocab_size, d, opts)
    elif not spec.stacks:
        model = RecurrentLM(spec, vocab_size, d, opts)
    else:
        model = StackRNNLM(spec, vocab_size, d, opts)
    initialize(model, scale=opts["init_scale"])
    return model


def _stack_options(opts: dict) -> dict:
    return {k: opts[k] for k in ("sup_size", "nd_states", "nd_symbols", "nd_size")}
