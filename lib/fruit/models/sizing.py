"""Parameter counts as SymPy expressions, and the choice of d (docs/paper.md §10).

``parameter_count_expr(arch)`` is the number of trainable parameters of the model
``build_model(arch, ...)`` builds, as a polynomial in the model size ``d`` and the
number of content types ``V``. It is assembled from the building blocks of
docs/paper.md §10.1, so it is independent of the module code; the tests check that the
two agree for every architecture.

``choose_d`` implements rau's ``lm model-size`` rule (§10.3, [D6]): solve
``N(d) = P`` for the positive real root and round it, half to even. For
transformers the root is taken in ``s = d / heads`` and ``d = heads * round(s)``.
"""

from __future__ import annotations

from fractions import Fraction

import sympy

from fruit.errors import FruitError
from fruit.model_options import DEFAULT_OPTIONS
from fruit.models.architectures import ArchSpec, parse_architecture
from fruit.models.stack_kinds import stack_kind
from fruit.names import TARGET_PARAMS

d_symbol = sympy.Symbol("d", positive=True)
V_symbol = sympy.Symbol("V", positive=True, integer=True)

# Content-type counts V of the published files (dev ∪ test; gen adds no type), one per task,
# from docs/paper.md §10.5. `fruit sizes --data-dir` recounts V from a train.tsv when one exists.
PAPER_VOCAB_SIZES = {  # in the paper's task order
    "question-formation": 68,
    "question-formation-in-german": 104,
    "tense-reinflection-with-do": 69,
    "passivization": 54,
    "question-formation-with-have": 68,
    "tense-reinflection": 98,
    "passivization-in-german": 94,
}


def stack_sizes(kind: str, options: dict) -> tuple[int, int, int]:
    """(A, m, r) for one stack: actions per step, pushed-vector size, reading size."""
    return stack_kind(kind).sizes(options)


def _bottom(kind: str, m):
    """The learned bottom vector's parameters, if the kind has one."""
    return m if stack_kind(kind).bottom else 0


def _transformer_expr(spec: ArchSpec, options: dict, d, V):
    standard_layer = 8 * d**2 + 11 * d  # attention 4d²+4d, FF (F=2d) 4d²+3d, 2 LNs 4d
    ff_and_norms = 4 * d**2 + 3 * d + 4 * d
    total = (V + 2) * d + 2 * d  # embedding with EOS and BOS rows; final LN
    for kind in spec.layer_kinds:
        if kind is None:
            total += standard_layer
            continue
        A, m, r = stack_sizes(kind, options)
        total += ff_and_norms + A * d + m * d + r * d  # W_a, W_v, W_y: no biases
        total += _bottom(kind, m)  # bottom vector θ_⊥
    return total


def _recurrent_expr(spec: ArchSpec, options: dict, d, V):
    gates = 4 if spec.base == "LSTM" else 1
    layers = spec.num_layers
    r, heads = 0, 0  # r: all the stacks' readings together
    for kind in spec.stacks:
        A, m, r_kind = stack_sizes(kind, options)
        r += r_kind
        heads += (A + m) * (d + 1) + _bottom(kind, m)  # W_a, b_a, W_v, b_v (and θ_⊥)
    e = d + r if spec.reading_to_output else d
    n_in = e + r
    core = layers * d  # learned initial states θ_0
    core += gates * (d + n_in + 1) * d  # first layer: input and recurrent weights, one bias
    core += (layers - 1) * gates * (2 * d + 1) * d
    return (V + 1) * e + core + heads


def parameter_count_expr(arch: str, d=d_symbol, V=V_symbol, **options):
    """Trainable parameters of ``arch`` as a SymPy expression in ``d`` and ``V``.

    Pass integers for ``d`` and/or ``V`` to substitute them. Stack options are those of
    ``build_model`` (``sup_size``, ``nd_states``, ``nd_symbols``, ``nd_size``).
    """
    spec = parse_architecture(arch)
    opts = {**DEFAULT_OPTIONS, **options}
    build = _transformer_expr if spec.transformer else _recurrent_expr
    return sympy.expand(build(spec, opts, sympy.sympify(d), sympy.sympify(V)))


def parameter_count(arch: str, d: int, vocab_size: int, **options) -> int:
    return int(parameter_count_expr(arch, d=d, V=vocab_size, **options))


def _round_half_even(x: sympy.Expr) -> int:
    """Python's round() on an exact real root (exact ties go to even).

    A root of a polynomial with rational coefficients from ``sympy.roots`` is a
    Rational when it is rational; only then can it be a tie. Otherwise sympy's floor
    evaluates the surd to whatever precision it needs.
    """
    if x.is_Rational:
        return round(Fraction(int(x.p), int(x.q)))  # Fraction rounds half to even
    return int(sympy.floor(x + sympy.Rational(1, 2)))


def _positive_root(expr, symbol, target: int, arch: str):
    roots = [r for r in sympy.roots(sympy.Poly(expr - target, symbol)) if r.is_real and r > 0]
    if not roots:  # N grows with d, so the target lies below N(0)
        raise FruitError(
            f"{arch} has {int(expr.subs(symbol, 0))} parameters before any width: a target "
            f"of {target} is too small"
        )
    if len(roots) != 1:
        raise ValueError(f"expected one positive root of N = {target}, got {roots}")
    return roots[0]


def real_root(arch: str, vocab_size: int, target_params: int = TARGET_PARAMS, **options) -> float:
    """The real d* with N(d*) = target (docs/paper.md §10.4, 'real root' column)."""
    expr = parameter_count_expr(arch, d=d_symbol, V=vocab_size, **options)
    return float(_positive_root(expr, d_symbol, target_params, arch))


def choose_d(arch: str, vocab_size: int, target_params: int = TARGET_PARAMS, **options) -> int:
    """rau's rule for d (docs/paper.md §10.3): round the real root of N(d) = target."""
    spec = parse_architecture(arch)
    if spec.transformer:
        s = sympy.Symbol("s", positive=True)
        heads = spec.num_heads
        expr = parameter_count_expr(arch, d=heads * s, V=vocab_size, **options)
        d = heads * _round_half_even(_positive_root(expr, s, target_params, arch))
    else:
        expr = parameter_count_expr(arch, d=d_symbol, V=vocab_size, **options)
        d = _round_half_even(_positive_root(expr, d_symbol, target_params, arch))
    if d < 1:
        smallest = parameter_count(arch, spec.num_heads if spec.transformer else 1, vocab_size,
                                   **options)  # fmt: skip
        raise FruitError(
            f"a target of {target_params} parameters gives {arch} a width of 0; the smallest "
            f"{arch} has {smallest}"
        )
    return d
