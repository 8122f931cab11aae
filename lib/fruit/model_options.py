"""The options every architecture accepts, with the paper's defaults, as plain data.

``fruit.models.build_model`` takes them as keyword arguments and a profile's
``[training] model_options`` table sets them; both check them with ``resolve_options``,
which needs neither torch nor model code, so that a bad profile is refused when it
loads, before any run starts.
"""

from __future__ import annotations

import math

from fruit.errors import FruitError, unknown_choice

# Every option build_model accepts, with the paper's defaults. Options that do not apply
# to an architecture (e.g. nd_size for Tf+Sup) are accepted and ignored, so that one set
# of options can be passed to every architecture.
DEFAULT_OPTIONS = {
    "dropout": 0.1,
    "init_scale": 0.1,  # U[-s, s] for every parameter that is not Xavier-initialised (§9)
    "sup_size": 50,  # m of the superposition stack
    "nd_states": 3,  # |Q| of the nondeterministic stack
    "nd_symbols": 3,  # |Γ|
    "nd_size": 5,  # m of the nondeterministic stack
    # [D1] stack attention's pushed vector: "none" as rau (Sup: W_v ℓ; Nd: log v = W_v ℓ),
    # "sigmoid" as the paper (Sup: σ(W_v ℓ); Nd: log v = log σ(W_v ℓ)).
    "pushed_activation": "none",
    # [D4] True reproduces rau's truncated last reading of Sup+R in the batched forward pass.
    "rau_compat": False,
}
PUSHED_ACTIVATIONS = ("none", "sigmoid")


def resolve_options(options: dict) -> dict:
    """Fill in defaults and reject unknown option names or values."""
    unknown = sorted(set(options) - set(DEFAULT_OPTIONS))
    if unknown:
        raise unknown_choice("model option", unknown[0], DEFAULT_OPTIONS)
    opts = {**DEFAULT_OPTIONS, **options}
    if opts["pushed_activation"] not in PUSHED_ACTIVATIONS:
        raise unknown_choice("pushed_activation", opts["pushed_activation"], PUSHED_ACTIVATIONS)
    for key in ("sup_size", "nd_states", "nd_symbols", "nd_size"):
        value = opts[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FruitError(f"model option {key} must be a positive integer, got {value!r}")
    if not _real(opts["dropout"]) or not 0.0 <= opts["dropout"] < 1.0:
        raise FruitError(f"model option dropout must be in [0, 1), got {opts['dropout']!r}")
    if not _real(opts["init_scale"]) or not 0.0 < opts["init_scale"] < math.inf:
        raise FruitError(
            f"model option init_scale must be a positive number, got {opts['init_scale']!r}"
        )
    if not isinstance(opts["rau_compat"], bool):
        raise FruitError(
            f"model option rau_compat must be true or false, got {opts['rau_compat']!r}"
        )
    return opts


def _real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
