"""Our transformer with stack attention (Tf+Nd) against the authors' (rau), function for
function.

Ours is ``build_model("Tf+Nd", V, d)``: 5 pre-norm layers whose third has
nondeterministic stack attention (3 states, 3 symbols, pushed vectors of size 5) in
place of multi-head attention, d from choose_d (68 for question formation, V = 68). Theirs
is what ``rau``'s language model interface builds for ``--architecture
stack-transformer --stack-transformer-layers 2.nondeterministic-3-3-5.2`` with the same
sizes (4 heads, feed-forward size 2d, dropout 0.1, BOS, tied embeddings), initialised
with ``--init-scale 0.1``. The script

1. maps every parameter of ours to the parameter of theirs with the same role (it stops
   with an error naming any parameter, of either model, left without a partner or whose
   shape differs; ``--mapping`` prints the table);
2. initialises both, each with its own initialiser, after the same
   ``torch.manual_seed`` (as rau's CLI does on the CPU) and compares them: 0 when both
   draw the same distributions in the same order (Xavier for the stack-attention
   projections and the feed-forward of the stack layer, U[-0.1, 0.1] for everything
   else, layer norms 1 and 0). A second, informational line seeds each model as its
   trainer does (ours: seed, then build_model, whose module constructors draw before
   the initialiser; rau: construct, then seed, then initialise): the same seed then
   gives other draws;
3. copies our weights into theirs and, dropout off, compares the logits at every real
   position: each string alone, all of them in one right-padded batch, and our
   incremental decoding (``start``/``step``). This is done for our default
   ``pushed_activation="none"``, which must give rau's function (differences of float
   rounding, about 1e-6), and for ``"sigmoid"`` (the paper's text, [D1] in
   docs/paper.md), which must not;
4. prints the largest difference after the embedding, after each layer, inside each
   stack-attention sublayer (action logits, pushed vector before any activation,
   reading ρ, W_y ρ) and in the logits, so that a disagreement is located.

It exits 1 when "none" differs by more than --tolerance or "sigmoid" does not, else 0.
``--arch`` takes the other stack-attention transformers (Tf+Nd+Nd, Tf+Sup, Tf+Sup+Sup)
too; ``--vocab-size``/``--d`` change the sizes (by default V = 68 with choose_d's d, then
a small V = 7, d = 12).

rau is never a dependency of this project: install it, with this project, into an
environment of its own, e.g.

    python -m venv /work/rau-env && /work/rau-env/bin/pip install <torch wheel>
    /work/rau-env/bin/pip install humanfriendly torch-semiring-einsum sympy numpy
    echo <rau checkout>/src > /work/rau-env/lib/python3.11/site-packages/rau.pth
    /work/rau-env/bin/pip install --no-deps -e .
    OMP_NUM_THREADS=1 /work/rau-env/bin/python benchmarks/authors_nd.py [--mapping]

(the paper pins rau commits 1b80c20 and 4ff0c04, with the same model code). Without rau
it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import functools
import sys
import types

import torch

STACK_ARCHITECTURES = ("Tf+Nd", "Tf+Nd+Nd", "Tf+Sup", "Tf+Sup+Sup")
LENGTHS = (0, 1, 3, 8, 17, 30)  # of the random test strings


@functools.cache
def authors_transformer():
    """benchmarks/authors_transformer.py as a module (its standard-layer pairing)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "authors_transformer.py"
    spec = importlib.util.spec_from_file_location("authors_transformer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rau_missing() -> str | None:
    """Why rau cannot be imported, or None when it can."""
    try:
        import rau.models.stack_nn.transformer.parse  # noqa: F401
        import rau.tasks.language_modeling.model  # noqa: F401
    except ImportError as error:
        return str(error)
    return None


def rau_layers(spec, options: dict) -> str:
    """rau's --stack-transformer-layers string for our layer kinds, e.g.
    (None, None, "Nd", None, None) -> "2.nondeterministic-3-3-5.2"."""
    parts, run = [], 0
    for kind in spec.layer_kinds:
        if kind is None:
            run += 1
            continue
        if run:
            parts.append(str(run))
            run = 0
        if kind == "Nd":
            q, s, m = options["nd_states"], options["nd_symbols"], options["nd_size"]
            parts.append(f"nondeterministic-{q}-{s}-{m}")
        else:
            parts.append(f"superposition-{options['sup_size']}")
    if run:
        parts.append(str(run))
    return ".".join(parts)


class Authors:
    """rau's stack-transformer language model, as its CLI builds and initialises it."""

    def __init__(self, arch: str, vocab_size: int, d: int, generator: torch.Generator):
        from rau.models.stack_nn.transformer.parse import parse_stack_transformer_layers
        from rau.tasks.language_modeling.model import LanguageModelingModelInterface

        from fruit.model_options import DEFAULT_OPTIONS
        from fruit.models import parse_architecture

        self.layers = rau_layers(parse_architecture(arch), DEFAULT_OPTIONS)
        kwargs = dict(  # as rau's get_kwargs gives them for --architecture stack-transformer
            architecture="stack-transformer",
            num_layers=None,
            d_model=d,
            num_heads=4,
            feedforward_size=2 * d,
            dropout=0.1,
            hidden_units=None,
            stack_transformer_layers=parse_stack_transformer_layers(self.layers),
            stack_rnn_controller=None,
            stack_rnn_stack=None,
            stack_rnn_connect_reading_to_output=False,
            input_vocabulary_size=vocab_size + 2,  # content, EOS, BOS
            output_vocabulary_size=vocab_size + 1,  # content, EOS
            bos_index=vocab_size + 1,
            eos_index=vocab_size,
        )
        interface = LanguageModelingModelInterface(use_init=True)
        interface.device = torch.device("cpu")
        self.model = interface.construct_model(**kwargs)
        self.initialize(generator)
        interface.on_saver_constructed(None, types.SimpleNamespace(model=self.model, kwargs=kwargs))
        self.interface = interface

    def initialize(self, generator: torch.Generator) -> None:
        """rau's own initialiser (smart_init with U[-0.1, 0.1] as the fallback)."""
        from rau.tasks.language_modeling.model import LanguageModelingModelInterface

        args = types.SimpleNamespace(init_scale=0.1)
        LanguageModelingModelInterface.initialize(None, args, self.model, generator)

    def logits(self, strings: list[list[int]]) -> torch.Tensor:
        """(B, n+1, V+1) over right-padded strings, as rau's training computes them."""
        batch = [torch.tensor(w, dtype=torch.long) for w in strings]
        model_input, _ = self.interface.prepare_batch(batch, torch.device("cpu"))
        return self.interface.get_logits(self.model, model_input)


# ---------------------------------------------------------------- the parameter mapping


def _their_blocks(theirs):
    """rau's model in forward order: the tied embedding; per layer (kind, the module
    whose output is the layer's output, its parts), where a standard layer is a
    TransformerEncoderLayer and a stack layer a residual stack-attention sublayer and a
    residual feed-forward sublayer (parts: LN, stack attention, LN, W_1, W_2); the
    final layer norm."""
    from rau.models.stack_nn.transformer.stack_attention import StackAttention
    from rau.models.transformer.input_layer import ScaledEmbeddingLayer
    from rau.tools.torch.layer import Layer
    from rau.unidirectional import ResidualUnidirectional

    embeddings = [m for m in theirs.modules() if isinstance(m, ScaledEmbeddingLayer)]
    layers, pending, inside = [], None, set()
    for module in theirs.modules():  # pre-order: the order of the forward pass
        if isinstance(module, torch.nn.TransformerEncoderLayer):
            layers.append(("standard", module, module))
        elif isinstance(module, ResidualUnidirectional):
            norm = next(m for m in module.modules() if isinstance(m, torch.nn.LayerNorm))
            stack = [m for m in module.modules() if isinstance(m, StackAttention)]
            if stack:
                pending = (norm, stack[0])
            else:
                linears = [m.linear for m in module.modules() if isinstance(m, Layer)]
                layers.append(("stack", module, (*pending, norm, *linears)))
                pending = None
        else:
            continue
        inside.update(id(m) for m in module.modules())
    norms = [
        m for m in theirs.modules() if isinstance(m, torch.nn.LayerNorm) and id(m) not in inside
    ]
    if len(embeddings) != 1 or len(norms) != 1:
        raise MappingError(
            f"rau's model has {len(embeddings)} scaled embedding layers and {len(norms)} layer "
            "norms outside its layers; expected one of each"
        )
    return embeddings[0].embedding_layer.embeddings, layers, norms[0]


class MappingError(Exception):
    pass


def weight_pairs(ours, theirs) -> list[tuple[str, torch.Tensor, str, torch.Tensor]]:
    """(our name, our parameter, rau's name, rau's parameter) for every parameter of both
    models, paired by role. MappingError names whatever is left unpaired or misshapen."""
    embedding, layers, final_norm = _their_blocks(theirs)
    pairs = [(ours.embedding.weight, embedding)]
    kinds = ["stack" if layer.has_stack else "standard" for layer in ours.layers]
    if kinds != [kind for kind, _, _ in layers]:
        raise MappingError(
            f"layer kinds differ: ours {kinds}, rau's {[kind for kind, _, _ in layers]}"
        )
    for mine, (kind, _, their) in zip(ours.layers, layers):
        if kind == "standard":
            pairs += authors_transformer().standard_layer_pairs(mine, their)
            continue
        norm1, stack, norm2, hidden, out = their
        pairs += [
            (mine.norm1.weight, norm1.weight),
            (mine.norm1.bias, norm1.bias),
            (mine.attention.actions.weight, stack.action_layer.linear.weight),
            (mine.attention.pushed.weight, stack.input_to_pushed_vector_layer.linear.weight),
            (mine.attention.output.weight, stack.stack_reading_to_output_layer.linear.weight),
        ]
        if hasattr(mine.attention, "bottom") or hasattr(stack, "bottom_vector_logits"):
            pairs.append((getattr(mine.attention, "bottom", None),
                          getattr(stack, "bottom_vector_logits", None)))  # fmt: skip
        pairs += [
            (mine.norm2.weight, norm2.weight),
            (mine.norm2.bias, norm2.bias),
            (mine.ff.hidden.weight, hidden.weight),
            (mine.ff.hidden.bias, hidden.bias),
            (mine.ff.out.weight, out.weight),
            (mine.ff.out.bias, out.bias),
        ]
    pairs += [(ours.final_norm.weight, final_norm.weight), (ours.final_norm.bias, final_norm.bias)]
    return _named(ours, theirs, pairs)


def _named(ours, theirs, pairs):
    our_names = {id(p): n for n, p in ours.named_parameters()}
    their_names = {id(p): n for n, p in theirs.named_parameters()}
    problems, named = [], []
    for mine, their in pairs:
        a = our_names.get(id(mine), "(none)") if mine is not None else "(none)"
        b = their_names.get(id(their), "(none)") if their is not None else "(none)"
        if mine is None or their is None or a == "(none)" or b == "(none)":
            problems.append(f"unmatched: ours {a} <-> rau's {b}")
        elif mine.shape != their.shape:
            problems.append(
                f"shape: ours {a} {tuple(mine.shape)} <-> rau's {b} {tuple(their.shape)}"
            )
        else:
            named.append((a, mine, b, their))
    for names, side, used in ((our_names, "ours", 1), (their_names, "rau's", 3)):
        paired = [id(row[used]) for row in named]
        for key, name in names.items():
            if key not in paired and not any(name in p for p in problems):
                problems.append(f"unmatched: {side} {name} has no partner")
        if len(set(paired)) != len(paired):
            problems.append(f"{side} parameters paired twice")
    if problems:
        raise MappingError("the parameter mapping is wrong:\n  " + "\n  ".join(problems))
    return named


@torch.no_grad()
def copy_weights(pairs) -> None:
    """Our parameters into rau's."""
    for _, mine, _, their in pairs:
        their.copy_(mine)


def mapping_table(pairs) -> list[str]:
    width = max(len(b) for _, _, b, _ in pairs)
    return [f"  {b:<{width}}  <-  {a}  {tuple(m.shape)}" for a, m, b, _ in pairs]


# ---------------------------------------------------------------------- the checks


def strings_for(vocab_size: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(vocab_size, (n,), generator=g).tolist() for n in LENGTHS]


def max_real(mine: torch.Tensor, theirs: torch.Tensor, strings) -> float:
    """Max |difference| over the real positions 0..|w| of each string."""
    return max(
        float((mine[b, : len(w) + 1] - theirs[b, : len(w) + 1]).abs().max())
        for b, w in enumerate(strings)
    )


@torch.no_grad()
def our_steps(ours, strings) -> torch.Tensor:
    """(B, n+1, V+1): our incremental decoding (start, then step) over padded strings."""
    from fruit.batching import pad

    tokens = pad(strings, 0)
    logits, state = ours.start(tokens.size(0))
    out = [logits]
    for t in range(tokens.size(1)):
        logits, state = ours.step(state, tokens[:, t])
        out.append(logits)
    return torch.stack(out, 1)


@torch.no_grad()
def logit_differences(ours, authors: Authors, strings) -> dict[str, float]:
    """Max |logit difference| of ours and rau's (weights already copied, eval mode)."""
    from fruit.batching import pad

    alone = max(max_real(ours(pad([w], 0)), authors.logits([w]), [w]) for w in strings)
    theirs = authors.logits(strings)
    batch = max_real(ours(pad(strings, 0)), theirs, strings)
    steps = max_real(our_steps(ours, strings), theirs, strings)
    return {"one string at a time": alone, "padded batch": batch, "ours step by step": steps}


@torch.no_grad()
def layer_differences(ours, authors: Authors, strings) -> list[tuple[str, float]]:
    """Max |difference| at real positions after the embedding, after each layer, inside
    each stack-attention sublayer (action logits W_a ℓ, pushed W_v ℓ before any
    activation, reading ρ, W_y ρ) and in the logits, on one padded batch."""
    from rau.models.stack_nn.transformer.stack_attention import StackAttention

    from fruit.batching import pad

    _, blocks, _ = _their_blocks(authors.model)
    ends = [end for _, end, _ in blocks]  # the module whose output is the layer's
    stacks = [m for m in authors.model.modules() if isinstance(m, StackAttention)]
    captured = {"ours": {}, "theirs": {}}
    order = ["embedding"]

    def keep(side, key, pre=False):
        def hook(module, args, output=None):
            x = args[0] if pre else output
            captured[side][key] = x[0] if isinstance(x, tuple) else getattr(x, "output", x)

        return hook

    def watch(key, mine, their, pre=False):
        if key not in order:
            order.append(key)
        register = "register_forward_pre_hook" if pre else "register_forward_hook"
        return [
            getattr(mine, register)(keep("ours", key, pre)),
            getattr(their, register)(keep("theirs", key, pre)),
        ]

    # rau runs stack attention through its states, not through the module's __call__:
    # the hooks sit on the linear maps inside it, which are called as modules.
    handles = watch("embedding", ours.layers[0], ends[0], pre=True)
    stacks = iter(stacks)
    for i, (mine, their) in enumerate(zip(ours.layers, ends)):
        if mine.has_stack:
            stack, a = next(stacks), mine.attention
            handles += watch(f"L{i + 1} actions", a.actions, stack.action_layer)
            handles += watch(f"L{i + 1} pushed", a.pushed, stack.input_to_pushed_vector_layer)
            out = stack.stack_reading_to_output_layer
            handles += watch(f"L{i + 1} reading", a.output, out, pre=True)
            handles += watch(f"L{i + 1} W_y reading", a.output, out)
        handles += watch(f"L{i + 1}", mine, their)
    try:
        mine_logits = ours(pad(strings, 0))
        their_logits = authors.logits(strings)
    finally:
        for h in handles:
            h.remove()
    rows = [(k, max_real(captured["ours"][k], captured["theirs"][k], strings)) for k in order]
    return rows + [("logits", max_real(mine_logits, their_logits, strings))]


@torch.no_grad()
def initialisation_difference(arch, vocab_size, d, seed: int = 1) -> tuple[float, list[str]]:
    """Both models built, then initialised by their own initialisers from the global
    generator seeded with ``seed`` (as rau's CLI does on the CPU: ``generator =
    torch.manual_seed(seed)``; its smart_init does not hand the generator on, so it
    draws from the global one whatever it is given): the max |difference| of paired
    parameters, and the names of the pairs that differ."""
    from fruit.models import build_model
    from fruit.models.init import initialize

    ours = build_model(arch, vocab_size=vocab_size, d=d)
    authors = Authors(arch, vocab_size, d, torch.Generator())
    initialize(ours, scale=0.1, generator=torch.manual_seed(seed))
    authors.initialize(torch.manual_seed(seed))
    pairs = weight_pairs(ours, authors.model)
    diffs = [(a, b, float((m - t).abs().max())) for a, m, b, t in pairs]
    return max(x for _, _, x in diffs), [f"{a} / {b}" for a, b, x in diffs if x > 0]


@torch.no_grad()
def trainer_seeding_difference(arch, vocab_size, d, seed: int = 1) -> float:
    """Max |difference| of paired parameters when each model is seeded as its trainer
    seeds it: fruit.training.loop (torch.manual_seed, then build_model) and rau's
    ModelInterface on the CPU (construct, then torch.manual_seed, then initialise)."""
    from fruit.models import build_model

    torch.manual_seed(seed)
    ours = build_model(arch, vocab_size=vocab_size, d=d)
    authors = Authors(arch, vocab_size, d, torch.Generator())
    authors.initialize(torch.manual_seed(seed))
    return max(float((m - t).abs().max()) for _, m, _, t in weight_pairs(ours, authors.model))


def check(arch: str, vocab_size: int, d: int | None, tolerance: float, show_mapping: bool):
    """Print the checks for one size; True when they come out as expected."""
    from fruit.models import build_model

    ok = True
    models = {}
    for activation in ("none", "sigmoid"):
        torch.manual_seed(0)  # the same weights for both activations
        models[activation] = build_model(
            arch, vocab_size=vocab_size, d=d, pushed_activation=activation
        ).eval()
    d = models["none"].d
    authors = Authors(arch, vocab_size, d, torch.Generator().manual_seed(0))
    authors.model.eval()
    print(f"## {arch}, V={vocab_size}, d={d}: rau --stack-transformer-layers {authors.layers}")
    pairs = weight_pairs(models["none"], authors.model)
    ours_n = sum(p.numel() for p in models["none"].parameters())
    theirs_n = sum(p.numel() for p in authors.model.parameters())
    print(f"# parameters: ours {ours_n}, rau's {theirs_n}; {len(pairs)} tensors paired by role")
    if show_mapping:
        print("# rau's parameter  <-  ours (shape)")
        print("\n".join(mapping_table(pairs)))
    init, differing = initialisation_difference(arch, vocab_size, d)
    print(
        f"# initialisation after torch.manual_seed(1), each model's own initialiser: "
        f"max |difference| {init:.2e}" + (f" (differ: {', '.join(differing)})" if differing else "")
    )
    ok &= init == 0.0
    print(
        "# initialisation seeded as each trainer does (ours: seed, build; rau: build, seed, "
        f"initialise), informational: max |difference| {trainer_seeding_difference(arch, vocab_size, d):.2e}"
    )
    strings = strings_for(vocab_size)
    print(f"# strings of lengths {[len(w) for w in strings]}, dropout off")
    for activation, ours in models.items():
        copy_weights(weight_pairs(ours, authors.model))
        diffs = logit_differences(ours, authors, strings)
        worst = max(diffs.values())
        expected = worst <= tolerance if activation == "none" else worst > 100 * tolerance
        ok &= expected
        verdict = (
            ("same function" if expected else "NOT the same function")
            if activation == "none"
            else ("differs, as expected" if expected else "does NOT differ: unexpected")
        )
        parts = ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
        print(
            f'pushed_activation="{activation}": max |logit difference| {worst:.2e} ({parts}): {verdict}'
        )
        rows = layer_differences(ours, authors, strings)
        print("  by layer: " + "; ".join(f"{k} {v:.1e}" for k, v in rows))
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="Tf+Nd", choices=STACK_ARCHITECTURES)
    parser.add_argument("--vocab-size", type=int, help="V (default: 68, then 7)")
    parser.add_argument("--d", type=int, help="d (default: choose_d's, then 12)")
    parser.add_argument("--tolerance", type=float, default=1e-4, help='for "none"')
    parser.add_argument("--mapping", action="store_true", help="print the parameter table")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = parser.parse_args(argv)

    missing = rau_missing()
    if missing:
        print(f"benchmarks/authors_nd.py: skipped: rau is not importable ({missing})")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"# torch={torch.__version__} threads={torch.get_num_threads()}")
    if args.vocab_size or args.d:
        sizes = [(args.vocab_size or 68, args.d)]
    else:
        sizes = [(68, None), (7, 12)]
    ok = True
    for i, (V, d) in enumerate(sizes):
        try:
            ok &= check(args.arch, V, d, args.tolerance, args.mapping and i == 0)
        except MappingError as error:
            print(f"benchmarks/authors_nd.py: {error}")
            return 1
    print("# result: " + ("as expected" if ok else "NOT as expected"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
