"""The paper's metrics (docs/paper.md §13, docs/tasks.md §3).

* Full accuracy (FA): the mean over examples of p(y | x), exactly, from one
  teacher-forced pass over x y; the prompt is the whole source including its task
  marker (no separator) and p(y | x) includes the EOS factor.
* Partial accuracy (PA), by the task's ``partial_kind``:
  "first-word"    -- exact: the mean of p(y_1 | x);
  "pos-main-verb" -- 10 ancestral samples per source, at most 50 tokens;
  "second-word"   -- 10 ancestral samples per source, at most 2 tokens;
  a sampled PA is the mean of ``task.partial_match(sample, reference)`` over all
  (source, sample) pairs, and the same samples are scored against the
  hierarchical and the linear targets.
* Log ratio: log(acc_hierarchical) - log(acc_linear), per run (model level).

Models follow docs/contracts.md §3: ``model(tokens)`` gives logits (B, n+1, V+1)
where position t predicts w_{t+1} and id V is EOS; ``model.start`` /
``model.step`` / ``model.select_state`` decode incrementally.

Shared helpers (also used by ``fruit.explore``, ``train.ipynb`` and the benchmarks):
``next_token_log_probs`` (the teacher-forced pass), ``prompt_state`` (feeding a prompt),
``target_log_probs``, ``sample_continuations`` and ``decoded_examples``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import torch

from fruit.batching import evaluation_batches, pad
from fruit.errors import unknown_choice

# partial_kind -> maximum sampled length (None: exact first-word accuracy).
SAMPLE_MAX_TOKENS = {"first-word": None, "pos-main-verb": 50, "second-word": 2}
NUM_SAMPLES = 10
SAMPLING_SEED = 123
EVAL_BATCH_TOKENS = 2048
SAMPLE_PROMPT_TOKENS = 512

Ids = list[int]


def model_device(model) -> torch.device:
    p = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    return p.device if p is not None else torch.device("cpu")


@contextlib.contextmanager
def evaluating(model):
    """Eval mode and no gradients for the duration; restores the previous mode."""
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        if was_training:
            model.train()


# ---------------------------------------------------------------- exact scores


def next_token_log_probs(
    model, strings: Sequence[Ids], *, eos_id: int, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One teacher-forced pass over right-padded strings (with the graph, if enabled).

    Returns ``logp`` (B, n+1) with ``logp[b, t] = log p(w_{t+1} | w_1..w_t)`` where
    w_{|w|+1} is EOS, in the model's dtype, and ``real`` (B, n+1), False at padding.
    """
    device = device or model_device(model)
    tokens = pad(strings, 0, device)  # (B, n); padding is any valid id
    # following[b, t] = w_{t+1}, with EOS after the last token; -1 = padding
    following = pad([list(s) + [eos_id] for s in strings], -1, device)  # (B, n+1)
    logp = model(tokens).log_softmax(-1)  # (B, n+1, V+1)
    real = following >= 0
    picked = logp.gather(-1, following.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, n+1)
    return picked, real


def target_log_probs(
    model,
    pairs: Sequence[tuple[Ids, Ids]],
    *,
    eos_id: int,
    batch_tokens: int = EVAL_BATCH_TOKENS,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each (source ids, target ids): log p(y | x) with EOS, and log p(y_1 | x).

    Returns two float64 CPU tensors of shape (N,).
    """
    device = device or model_device(model)
    n = len(pairs)
    full = torch.zeros(n, dtype=torch.float64)
    first = torch.zeros(n, dtype=torch.float64)
    lengths = [len(x) + len(y) for x, y in pairs]
    with evaluating(model):
        for batch in evaluation_batches(lengths, batch_tokens):
            strings = [list(pairs[i][0]) + list(pairs[i][1]) for i in batch]
            picked, real = next_token_log_probs(model, strings, eos_id=eos_id, device=device)
            picked = picked.double()  # (B, n+1)
            src_len = torch.tensor([len(pairs[i][0]) for i in batch], device=device)
            positions = torch.arange(picked.size(1), device=device).unsqueeze(0)  # (1, n+1)
            # positions |x| .. |x|+|y| predict y_1 .. y_|y|, EOS
            in_target = (positions >= src_len.unsqueeze(1)) & real
            full[batch] = torch.where(in_target, picked, 0.0).sum(1).cpu()
            first[batch] = picked.gather(1, src_len.unsqueeze(1)).squeeze(1).cpu()
    return full, first


def mean_probability(log_probs: torch.Tensor) -> float:
    """The mean of exp(log p): an expected 0/1 accuracy."""
    return float(log_probs.exp().mean()) if len(log_probs) else float("nan")


# ---------------------------------------------------------------- sampling


def prompt_batches(prompts: Sequence[Ids], prompt_tokens: int) -> list[list[int]]:
    """Group prompt indices into batches of equal prompt length with b * |x| <= budget."""
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(i)
    batches = []
    for length in sorted(by_length):
        size = max(1, prompt_tokens // max(length, 1))
        group = by_length[length]
        batches += [group[k : k + size] for k in range(0, len(group), size)]
    return batches


def prompt_state(model, prompts):
    """Feed equal-length prompts: ``model.start`` then ``model.step`` over each position.

    ``prompts`` is a (B, |x|) LongTensor or B id lists of one length. Returns the logits
    for the first output token (B, V+1) and the state after the prompt.
    """
    if not torch.is_tensor(prompts):
        prompts = torch.tensor([list(p) for p in prompts], dtype=torch.long)
    x = prompts.to(model_device(model))  # (B, |x|)
    logits, state = model.start(x.size(0))
    for t in range(x.size(1)):
        logits, state = model.step(state, x[:, t])
    return logits, state


def sample_continuations(
    model,
    prompts: Sequence[Ids],
    *,
    eos_id: int,
    num_samples: int = NUM_SAMPLES,
    max_tokens: int = 50,
    seed: int = SAMPLING_SEED,
    prompt_tokens: int = SAMPLE_PROMPT_TOKENS,
    greedy: bool = False,
    device=None,
) -> list[list[Ids]]:
    """Ancestral samples (or greedy outputs) after each prompt, by incremental decoding.

    Full softmax sampling over the V+1 outputs, no temperature; a sample stops at
    EOS (not included) or after ``max_tokens`` tokens. Finished rows are dropped
    from the batch with ``model.select_state``. One generator on the device,
    seeded with ``seed``, is used for all batches in turn.

    Returns ``out[i][k]``: the k-th sample (content ids) for prompt i.
    """
    device = device or model_device(model)
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    out: list[list[Ids]] = [[[] for _ in range(num_samples)] for _ in prompts]
    with evaluating(model):
        for batch in prompt_batches(prompts, prompt_tokens):
            x = torch.tensor([list(prompts[i]) for i in batch], dtype=torch.long, device=device)
            x = x.repeat_interleave(num_samples, dim=0)  # (R, |x|), R = b * num_samples
            logits, state = prompt_state(model, x)
            # row r of the state is sample (batch[r // S], r % S)
            rows = torch.arange(x.size(0), device=device)
            for k in range(max_tokens):
                if greedy:
                    token = logits.argmax(-1)
                else:
                    probs = logits.float().softmax(-1)
                    token = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (R',)
                alive = token != eos_id
                for r, tok in zip(rows[alive].tolist(), token[alive].tolist()):
                    out[batch[r // num_samples]][r % num_samples].append(tok)
                if k + 1 == max_tokens or not bool(alive.any()):
                    break
                keep = alive.nonzero().squeeze(1)
                state = model.select_state(state, keep)
                rows, token = rows[keep], token[keep]
                logits, state = model.step(state, token)
    return out


def sampled_partial_accuracy(task, samples: Sequence[Sequence[list[str]]], references) -> float:
    """Mean of task.partial_match over all (source, sample) pairs."""
    hits = total = 0
    for outputs, reference in zip(samples, references, strict=True):
        for output in outputs:
            hits += bool(task.partial_match(list(output), list(reference)))
            total += 1
    return hits / total if total else float("nan")


# ---------------------------------------------------------------- one run's metrics


def log_ratio(hierarchical: float | None, linear: float | None) -> float | None:
    """log(h) - log(l); None when it is undefined (a zero or missing accuracy)."""
    if hierarchical is None or linear is None or hierarchical <= 0 or linear <= 0:
        return None
    value = math.log(hierarchical) - math.log(linear)
    return value if math.isfinite(value) else None


def evaluate(
    model,
    task,
    vocab,
    *,
    test,
    gen,
    gen_linear,
    num_samples: int = NUM_SAMPLES,
    sampling_seed: int = SAMPLING_SEED,
    batch_tokens: int = EVAL_BATCH_TOKENS,
    prompt_tokens: int = SAMPLE_PROMPT_TOKENS,
    partial_on_test: bool = True,
    gen_groups: Sequence[str] | None = None,
    device=None,
) -> dict:
    """All metrics of one run: ``{"full": {...}, "partial": {...}}`` as in metrics.json.

    ``test``, ``gen`` (hierarchical targets) and ``gen_linear`` (linear targets) are
    lists of (source tokens, target tokens); ``gen`` and ``gen_linear`` share sources.
    With ``gen_groups`` (a group name per generalization sentence, e.g. the kind of
    relative clause on its subject: ``fruit.breakdown.subject_groups``) the result also
    holds ``"by_subject"``: ``group_means`` of FA (and first-word PA) under both rules,
    from the same per-sentence probabilities as the means.
    """
    kind = task.partial_kind
    if kind not in SAMPLE_MAX_TOKENS:
        raise unknown_choice("partial-accuracy kind", kind, SAMPLE_MAX_TOKENS)
    if [s for s, _ in gen] != [s for s, _ in gen_linear]:
        raise ValueError("gen and gen_linear must list the same sources in the same order")
    eos = vocab.eos_id

    def encode(examples):
        return [(vocab.encode(s), vocab.encode(t)) for s, t in examples]

    scores = {}
    for name, examples in (("test", test), ("hierarchical", gen), ("linear", gen_linear)):
        scores[name] = target_log_probs(
            model, encode(examples), eos_id=eos, batch_tokens=batch_tokens, device=device
        )
    full = {name: mean_probability(f) for name, (f, _) in scores.items()}
    if kind == "first-word":
        partial = {name: mean_probability(w) for name, (_, w) in scores.items()}
        if not partial_on_test:
            partial["test"] = None
    else:

        def sampled(examples_list):
            prompts = [vocab.encode(s) for s, _ in examples_list[0]]
            ids = sample_continuations(
                model,
                prompts,
                eos_id=eos,
                num_samples=num_samples,
                max_tokens=SAMPLE_MAX_TOKENS[kind],
                seed=sampling_seed,
                prompt_tokens=prompt_tokens,
                device=device,
            )
            words = [[vocab.decode(s) for s in per_source] for per_source in ids]
            return [
                sampled_partial_accuracy(task, words, [t for _, t in examples])
                for examples in examples_list
            ]

        hierarchical, linear = sampled([gen, gen_linear])
        partial = {"hierarchical": hierarchical, "linear": linear, "test": None}
        if partial_on_test:
            (partial["test"],) = sampled([test])
    full["log_ratio"] = log_ratio(full["hierarchical"], full["linear"])
    partial["log_ratio"] = log_ratio(partial["hierarchical"], partial["linear"])
    result = {"full": full, "partial": partial}
    if gen_groups is not None:
        columns = {f"FA {rule}": scores[rule][0] for rule in ("hierarchical", "linear")}
        if kind == "first-word":
            columns.update({f"PA {rule}": scores[rule][1] for rule in ("hierarchical", "linear")})
        result["by_subject"] = group_means(gen_groups, columns)
    return result


def group_means(groups: Sequence[str], columns: dict[str, torch.Tensor]) -> list[dict]:
    """One row per group (in order of first appearance): its size ``n`` and, for each
    column of per-sentence log probabilities (N,), the mean probability over the group;
    the rows weighted by ``n`` give the means over all N sentences."""
    if any(len(log_probs) != len(groups) for log_probs in columns.values()):
        raise ValueError("every column needs one log probability per group label")
    order = list(dict.fromkeys(groups))
    index = torch.tensor([order.index(g) for g in groups])  # (N,) group of each sentence
    rows = []
    for k, group in enumerate(order):
        members = index == k
        row = {"subject": group, "n": int(members.sum())}
        for name, log_probs in columns.items():
            row[name] = float(log_probs[members].exp().mean())
        rows.append(row)
    return rows


def decoded_examples(
    model, task, vocab, sources, *, samples: int = 1, max_tokens: int = 50, seed=SAMPLING_SEED
) -> list[dict]:
    """Greedy and sampled outputs next to both targets, each with p(output | source).

    For each source (tokens ending in a task marker): the hierarchical target, the
    linear-rule target (transformation sources only), the greedy output and ``samples``
    sampled outputs. One row per (source, output): ``{"source", "kind", "output",
    "probability"}`` with space-joined strings; the probability includes EOS.
    """
    sources = [list(s) for s in sources]
    prompts = [vocab.encode(s) for s in sources]
    eos = vocab.eos_id
    greedy = sample_continuations(
        model, prompts, eos_id=eos, num_samples=1, max_tokens=max_tokens, greedy=True
    )
    sampled = (
        sample_continuations(
            model, prompts, eos_id=eos, num_samples=samples, max_tokens=max_tokens, seed=seed
        )
        if samples
        else [[] for _ in sources]
    )
    rows = []  # (source index, kind, output tokens)
    for i, source in enumerate(sources):
        rows.append((i, "hierarchical target", task.target(source)))
        if source[-1] == task.transform_marker:
            rows.append((i, "linear target", task.linear(source[:-1])))
        rows.append((i, "greedy", vocab.decode(greedy[i][0])))
        rows += [(i, f"sample {k + 1}", vocab.decode(s)) for k, s in enumerate(sampled[i])]
    log_p, _ = target_log_probs(
        model, [(prompts[i], vocab.encode(out)) for i, _, out in rows], eos_id=eos
    )
    return [
        {
            "source": " ".join(sources[i]),
            "kind": kind,
            "output": " ".join(out),
            "probability": float(p),
        }
        for (i, kind, out), p in zip(rows, log_p.exp().tolist())
    ]
