"""Exploring one trained run: load it, feed it a sentence, look at its outputs and its stacks.

Used by ``notebooks/explore.ipynb``::

    run = load_run("results/runs/quick/question-formation/Tf+Nd/final-0")
    source = run.source("my walrus who does sleep doesn't giggle .")   # marker added
    first_words(run, source)          # p(y_1 | x), the k most probable
    best_outputs(run, source)         # beam search: the k most probable outputs, with p(y | x)
    decoded(run, source)              # greedy and sampled outputs next to both targets
    generalization_by_subject(run)    # FA and first-word PA per kind of subject (fruit.breakdown)
    greedy_outputs_by_subject(run)    # what the greedy outputs are, per kind of subject
    actions = stack_actions(run, source + greedy_output)
    stack_action_figure(actions)      # heat map: push / replace / pop (Nd), push / pop / no-op (Sup)

A run folder is read through its ``config.json`` (task, architecture, d, model options,
data_dir) and ``best.pt``; the vocabulary is rebuilt from ``data_dir/<task>/train.tsv``
(docs/contracts.md §1, §3, §5).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fruit.errors import FruitError, check_integer

# Bounds on what the explore notebook decodes, so that every answer comes in seconds.
# The tasks' sentences have at most 18 words and their targets 17 (the published gen
# sets); the nondeterministic stack's cost grows with the cube of the length. Measured on
# a loaded 2-core machine with a Tf+Nd run (one thread): a 200-word source took 8 s to
# beam-search (k 5, 50 tokens), 1,000 words 100 s (and 250 s to sample 5 outputs), and k
# 100 with 200 tokens 160 s. At the bounds below (59 words, k 50, 100 tokens, 50
# samples) it took 5 s to beam-search and 16 s to sample: the slowest answer.
MAX_SOURCE_TOKENS = 60  # words of a typed sentence, its marker included
MAX_OUTPUT_TOKENS = 100  # max_tokens: the longest output decoded
MAX_K = 50  # beam width / first words shown
MAX_SAMPLES = 50  # sampled outputs


@dataclass
class LoadedRun:
    path: Path
    config: dict
    model: torch.nn.Module
    vocab: object
    task: object
    metrics: dict | None = field(default=None, repr=False)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def source(self, sentence: str | list[str], marker: str | None = None) -> list[str]:
        """Source tokens of a typed sentence, ending in a task marker (the transformation
        marker unless the sentence ends in one or ``marker`` says otherwise)."""
        tokens = sentence.split() if isinstance(sentence, str) else list(sentence)
        if len(tokens) > MAX_SOURCE_TOKENS - 1:
            raise FruitError(
                f"the sentence has {len(tokens):,} words; at most {MAX_SOURCE_TOKENS - 1} are "
                f"decoded (the tasks' sentences have at most 18): type a shorter one"
            )
        markers = (self.task.identity_marker, self.task.transform_marker)
        if not tokens or tokens[-1] not in markers:
            tokens.append(marker or self.task.transform_marker)
        known = set(self.vocab.decode(list(range(self.vocab.size))))
        unknown = [t for t in tokens if t not in known]
        if unknown:
            sample = ", ".join(sorted(known)[:40])
            raise FruitError(
                f"word(s) not in the vocabulary of {self.config['task']}: {', '.join(unknown)}; "
                f"known words include: {sample}, ..."
            )
        return tokens


def load_run(
    run_dir: str | Path, device: str = "auto", data_dir: str | Path | None = None
) -> LoadedRun:
    """Rebuild a finished (or running) run's model with its best parameters.

    ``device`` is "auto" (CUDA when present, else CPU), "cpu", "cuda" or "cuda:N".
    """
    from fruit.device import resolve_device
    from fruit.io import read_json_record
    from fruit.models import build_model
    from fruit.tasks import Vocabulary, get_task, read_tsv

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "is a file, not a folder" if run_dir.exists() else "does not exist"
        raise FruitError(
            f"run_dir {run_dir} {what}; give a run folder with config.json and best.pt"
        )
    for name in ("config.json", "best.pt"):
        if not (run_dir / name).is_file():
            raise FruitError(f"{run_dir} is not a trained run folder: {name} is missing")
    config = read_json_record(run_dir / "config.json", "restore it, or train that run again")
    lacking = [k for k in ("task", "architecture", "d", "data_dir") if k not in config]
    if lacking:
        raise FruitError(
            f"{run_dir / 'config.json'} lacks {', '.join(lacking)}: not a run record fruit "
            "wrote; restore it, or train that run again"
        )
    data_dir = Path(data_dir or config["data_dir"])
    train = data_dir / config["task"] / "train.tsv"
    if not train.is_file():
        raise FruitError(
            f"{train} is missing: the vocabulary is rebuilt from it; pass data_dir= (the "
            "folder that holds <task>/train.tsv)"
        )
    vocab = Vocabulary.from_examples(read_tsv(train))
    if config.get("vocab_size") not in (None, vocab.size):
        raise FruitError(
            f"{train} gives {vocab.size} word types but the run had {config['vocab_size']}"
        )
    model = build_model(
        config["architecture"],
        vocab_size=vocab.size,
        d=config["d"],
        **config.get("model_options", {}),
    )
    device = resolve_device(device)
    load_parameters(model, run_dir / "best.pt", device)
    model.to(device).eval()
    metrics_path = run_dir / "metrics.json"
    metrics = (
        json.loads(metrics_path.read_text(encoding="utf-8")) if metrics_path.is_file() else None
    )
    return LoadedRun(run_dir, config, model, vocab, get_task(config["task"]), metrics)


def load_parameters(model: torch.nn.Module, path: Path, device) -> None:
    """Put the parameters saved in ``path`` (best.pt) into ``model``; a one-line
    ``DamagedRecord`` when the file cannot be read (truncated, not a torch file) or holds
    another model's parameters (another run's best.pt)."""
    from fruit.io import DamagedRecord

    advice = "copy the run's own best.pt back, or train that run again"
    try:
        saved = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # noqa: BLE001 - torch reports a damaged file in many ways
        reason = str(e).splitlines()[0].split(". ")[0] if str(e) else ""  # torch's first
        raise DamagedRecord(path, f"{type(e).__name__}: {reason}", advice) from None
    state = saved.get("model", saved) if isinstance(saved, dict) else None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise DamagedRecord(path, "it holds no model parameters", advice)
    ours = model.state_dict()
    missing = [k for k in ours if k not in state]
    other = [k for k in state if k not in ours]
    shapes = [k for k in ours if k in state and state[k].shape != ours[k].shape]
    if missing or other or shapes:
        example = (missing or other or shapes)[0]
        raise DamagedRecord(
            path,
            f"parameters of another model than config.json's: {len(missing)} missing, "
            f"{len(other)} unexpected, {len(shapes)} of another shape, e.g. {example}",
            "it may be another run's best.pt; " + advice,
        )
    model.load_state_dict(state)


# --- outputs ---------------------------------------------------------------------------------


def generalization_by_subject(run: LoadedRun, data_dir: str | Path | None = None) -> list[dict]:
    """FA (and first-word PA) over the run's generalization set, one row per kind of
    relative clause on the subject (``fruit.breakdown``): where a mean comes from. The
    linear targets are gen.linear.tsv's, or the task's linear rule where that is absent."""
    from fruit.breakdown import by_subject
    from fruit.tasks import read_tsv
    from fruit.tasks.splits import linear_examples

    folder = Path(data_dir or run.config["data_dir"]) / run.config["task"]
    gen = read_tsv(folder / "gen.tsv")
    linear = folder / "gen.linear.tsv"
    gen_linear = read_tsv(linear) if linear.is_file() else linear_examples(run.task, gen)
    return by_subject(run.model, run.task, run.vocab, gen=gen, gen_linear=gen_linear)


def greedy_outputs_by_subject(
    run: LoadedRun, data_dir: str | Path | None = None, limit: int | None = None
) -> list[dict]:
    """What the run's greedy outputs on its generalization set are (hierarchical, linear,
    which auxiliary fronted and which deleted, stopped early, other: ``fruit.breakdown``), as
    shares per kind of relative clause on the subject. ``limit``: the first that many
    sources only (decoding 10,000 takes 10-60 s on one CPU thread)."""
    from fruit.breakdown import outputs_by_subject
    from fruit.tasks import read_tsv

    folder = Path(data_dir or run.config["data_dir"]) / run.config["task"]
    gen = read_tsv(folder / "gen.tsv")[:limit]
    with torch.no_grad():
        return outputs_by_subject(run.model, run.task, run.vocab, [s for s, _ in gen])


def _prompt_state(run: LoadedRun, source: list[str]):
    """Feed the source to the model: -> (logits for y_1 (1, V+1), state)."""
    from fruit.evaluation import prompt_state

    return prompt_state(run.model, [run.vocab.encode(source)])


def _word(run: LoadedRun, i: int) -> str:
    return "<eos>" if i == run.vocab.eos_id else run.vocab.decode([i])[0]


@torch.no_grad()
def first_words(run: LoadedRun, source: list[str], k: int = 10) -> list[tuple[str, float]]:
    """The k most probable first output words with p(y_1 | x)."""
    k = check_integer("k", k, 1, MAX_K)
    logits, _ = _prompt_state(run, source)
    probs = logits[0].float().softmax(-1)
    top = probs.topk(min(k, probs.numel()))
    return [(_word(run, i), float(p)) for p, i in zip(top.values.tolist(), top.indices.tolist())]


@torch.no_grad()
def best_outputs(
    run: LoadedRun, source: list[str], k: int = 5, max_tokens: int = 50
) -> list[tuple[list[str], float, bool]]:
    """Beam search of width ``k``: the k most probable outputs with p(y | x) (EOS included).

    Returns (tokens, probability, finished). If fewer than k outputs end within
    ``max_tokens``, the best unfinished prefixes follow with ``finished`` False and the
    probability of the prefix.
    """
    k = check_integer("k", k, 1, MAX_K)
    max_tokens = check_integer("max_tokens", max_tokens, 1, MAX_OUTPUT_TOKENS)
    logits, state = _prompt_state(run, source)
    eos = run.vocab.eos_id
    beams = [([], 0.0)]  # (ids, log p) of the live hypotheses, one per state row
    finished: list[tuple[list[int], float]] = []
    for step in range(max_tokens):
        logp = logits.float().log_softmax(-1)  # (beams, V+1)
        scores = torch.tensor([s for _, s in beams], device=logp.device).unsqueeze(1) + logp
        flat = scores.flatten().topk(min(2 * k, scores.numel()))
        keep_rows, keep_tokens, live = [], [], []
        for score, index in zip(flat.values.tolist(), flat.indices.tolist()):
            row, token = divmod(index, logp.size(1))
            if token == eos:
                finished.append((beams[row][0], score))
            elif len(live) < k:
                live.append((beams[row][0] + [token], score))
                keep_rows.append(row)
                keep_tokens.append(token)
        finished.sort(key=lambda f: -f[1])
        finished = finished[:k]
        # stop when no live hypothesis can still beat the k-th finished one
        if not live or (len(finished) == k and live[0][1] <= finished[-1][1]):
            break
        if step == max_tokens - 1:
            break  # the live hypotheses stay unfinished
        index = torch.tensor(keep_rows, device=run.device)
        state = run.model.select_state(state, index)
        logits, state = run.model.step(state, torch.tensor(keep_tokens, device=run.device))
        beams = live
    out = [(run.vocab.decode(ids), math.exp(s), True) for ids, s in finished]
    unfinished = [(run.vocab.decode(ids), math.exp(s), False) for ids, s in live]
    return out + unfinished[: k - len(out)]


def target_probability(run: LoadedRun, source: list[str], target: list[str]) -> float:
    """p(target | source), EOS included, by one teacher-forced forward pass."""
    from fruit.evaluation import target_log_probs

    pair = (run.vocab.encode(source), run.vocab.encode(target))
    full, _ = target_log_probs(run.model, [pair], eos_id=run.vocab.eos_id)
    return math.exp(float(full[0]))


def decoded(
    run: LoadedRun, source: list[str], samples: int = 5, seed: int = 123, max_tokens: int = 50
) -> list[dict]:
    """Greedy and sampled outputs (at most ``max_tokens`` each) next to the hierarchical and
    linear targets, with p(y | x): ``fruit.evaluation.decoded_examples`` for one source, rows
    {"kind", "output", "probability"}."""
    from fruit.evaluation import decoded_examples

    samples = check_integer("samples", samples, 0, MAX_SAMPLES)
    max_tokens = check_integer("max_tokens", max_tokens, 1, MAX_OUTPUT_TOKENS)
    rows = decoded_examples(
        run.model, run.task, run.vocab, [source], samples=samples, max_tokens=max_tokens, seed=seed
    )
    return [{k: row[k] for k in ("kind", "output", "probability")} for row in rows]


# --- stack actions ---------------------------------------------------------------------------


@dataclass
class StackActions:
    """Per-position action mass of one stack: ``mass[i, t]`` for action ``labels[i]``."""

    name: str  # e.g. "layer 3 (Nd)" or "stack (Sup)"
    labels: tuple[str, ...]
    tokens: list[str]  # the position labels (inputs read at each position)
    mass: torch.Tensor  # (len(labels), positions), each column sums to 1


def _stack_kinds(run: LoadedRun) -> list[tuple[str, str]]:
    """(label, stack kind) of each stack, in the order ``return_actions`` reports them."""
    from fruit.models import parse_architecture

    spec = parse_architecture(run.config["architecture"])
    if spec.transformer:
        return [(f"layer {i + 1} ({k})", k) for i, k in enumerate(spec.layer_kinds) if k]
    if len(spec.stacks) == 1:
        return [(f"stack ({spec.stacks[0]})", spec.stacks[0])]
    return [(f"stack {i + 1} ({k})", k) for i, k in enumerate(spec.stacks)]


@torch.no_grad()
def stack_actions(run: LoadedRun, tokens: list[str]) -> list[StackActions]:
    """Stack actions over the positions of a string (source, or source + output).

    Transformers act at BOS and every token; stack RNNs after reading each token. Sup gives
    push / pop / no-op probabilities; Nd's action weights are summed into push / replace /
    pop mass and normalised per position. Empty for models without a stack.
    """
    from fruit.models import DEFAULT_OPTIONS
    from fruit.models.stack_kinds import stack_kind

    kinds = _stack_kinds(run)
    if not kinds:
        return []
    ids = torch.tensor([run.vocab.encode(tokens)], device=run.device)
    _, weights = run.model(ids, return_actions=True)  # [(1, n', A)] per stack
    opts = {**DEFAULT_OPTIONS, **run.config.get("model_options", {})}
    out = []
    for (name, kind), w in zip(kinds, weights):
        w = w[0].float()  # (n', A)
        labels_t = ["<bos>", *tokens] if w.size(0) == len(tokens) + 1 else list(tokens)
        mass, labels = stack_kind(kind).action_mass(w, opts)  # (n', k)
        out.append(StackActions(name, labels, labels_t, mass.T.cpu()))  # (k, n')
    return out


HEATMAP_POSITIONS = 30  # positions per row of the heat map; a longer string wraps


def stack_action_figure(actions: list[StackActions], title: str = ""):
    """One heat map per stack: actions (rows) over positions (columns), mass in [0, 1].
    A string longer than ``HEATMAP_POSITIONS`` positions wraps onto further rows, so the
    labels stay legible for long outputs; every row has the same cell width."""
    import seaborn as sns
    from matplotlib.figure import Figure

    rows = [
        (a, start) for a in actions for start in range(0, max(len(a.tokens), 1), HEATMAP_POSITIONS)
    ]
    n = max(len(rows), 1)
    longest = max((min(len(a.tokens), HEATMAP_POSITIONS) for a in actions), default=10)
    width = max(6.0, 0.35 * longest + 1.5)
    fig = Figure(figsize=(width, 1.6 * n + 0.6), layout="constrained")
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    for ax, (a, start) in zip(axes, rows):
        end = start + HEATMAP_POSITIONS
        mass = a.mass[:, start:end].numpy()  # (actions, <= HEATMAP_POSITIONS)
        if mass.shape[1] < longest:  # a short last row keeps the cells' width
            pad = torch.full((mass.shape[0], longest - mass.shape[1]), float("nan"))
            mass = torch.cat((torch.from_numpy(mass), pad), 1).numpy()
        sns.heatmap(
            mass,
            ax=ax,
            vmin=0,
            vmax=1,
            cmap="viridis",
            xticklabels=a.tokens[start:end] + [""] * (longest - len(a.tokens[start:end])),
            yticklabels=a.labels,
            cbar_kws={"label": "mass"},
        )
        wrapped = len(a.tokens) > HEATMAP_POSITIONS
        where = f" (positions {start + 1}-{min(end, len(a.tokens))})" if wrapped else ""
        ax.set_title(a.name + where, fontsize=9)
        ax.tick_params(axis="x", labelrotation=90, labelsize=8)
        ax.tick_params(axis="y", labelrotation=0)
    if not actions:
        axes[0].text(0.5, 0.5, "this architecture has no stack", ha="center", va="center")
        axes[0].set_axis_off()
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def figure_png(fig, dpi: int = 110) -> bytes:
    """PNG bytes of a figure (for ``IPython.display.Image`` or a file)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
