"""fruit.evaluation against a hand-built model whose conditional distribution is known.

The oracle model: the logits for the next token depend on the previous token, the
number of tokens read so far (mod 3) and their sum (mod 4), so p(y | x) depends on
the whole prompt. Its probabilities are recomputed here in plain Python (float64,
no torch), which gives the analytic values of every metric.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from fruit import evaluation

V = 5  # content ids 0..4; EOS = 5
EOS = V
START = V  # row of the "previous token" table used before any token


def table(seed: int, rows: int, cols: int, scale: float) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.uniform(-scale, scale) for _ in range(cols)] for _ in range(rows)]


A = table(1, V + 1, V + 1, 3.0)  # by previous token (or START)
B = table(2, 3, V + 1, 1.0)  # by length mod 3
C = table(3, 4, V + 1, 1.0)  # by sum mod 4


def oracle_next(prefix: list[int]) -> list[float]:
    """p(. | prefix) over V+1 outputs, in plain Python."""
    prev = prefix[-1] if prefix else START
    z = [A[prev][k] + B[len(prefix) % 3][k] + C[sum(prefix) % 4][k] for k in range(V + 1)]
    top = max(z)
    e = [math.exp(v - top) for v in z]
    return [v / sum(e) for v in e]


class OracleModel(torch.nn.Module):
    """Implements the model contract (docs/contracts.md §3) for the distribution above."""

    def __init__(self):
        super().__init__()
        self.register_buffer("A", torch.tensor(A, dtype=torch.float64))
        self.register_buffer("B", torch.tensor(B, dtype=torch.float64))
        self.register_buffer("C", torch.tensor(C, dtype=torch.float64))
        self.vocab_size = V

    def _logits(self, prev, length, total):
        return (self.A[prev] + self.B[length % 3] + self.C[total % 4]).float()

    def forward(self, tokens):  # (B, n) -> (B, n+1, V+1)
        b, n = tokens.shape
        prev = torch.cat([torch.full((b, 1), START, dtype=torch.long), tokens], 1)
        length = torch.arange(n + 1).expand(b, n + 1)
        total = torch.cat([torch.zeros(b, 1, dtype=torch.long), tokens.cumsum(1)], 1)
        return self._logits(prev, length, total)

    def start(self, batch_size):
        state = (
            torch.full((batch_size,), START, dtype=torch.long),
            torch.zeros(batch_size, dtype=torch.long),
            torch.zeros(batch_size, dtype=torch.long),
        )
        return self._logits(*state), state

    def step(self, state, tokens):
        _, length, total = state
        state = (tokens, length + 1, total + tokens)
        return self._logits(*state), state

    def select_state(self, state, index):
        return tuple(s[index] for s in state)


class IdVocab:
    """Tokens are the strings "0".."4"."""

    size, eos_id = V, EOS

    def encode(self, tokens):
        return [int(t) for t in tokens]

    def decode(self, ids):
        return [str(i) for i in ids]


class FakeTask:
    def __init__(self, kind, match):
        self.partial_kind, self.partial_match = kind, match


def oracle_sequence_prob(x, y):
    p, prefix = 1.0, list(x)
    for token in list(y) + [EOS]:
        p *= oracle_next(prefix)[token]
        prefix.append(token)
    return p


def random_examples(n, seed):
    """Prompts of 1..7 random tokens; targets sampled from the oracle (so p(y | x) is sizable)."""
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        x = [rng.randrange(V) for _ in range(rng.randint(1, 7))]
        y = []
        while len(y) < 4:
            token = rng.choices(range(V + 1), weights=oracle_next(x + y))[0]
            if token == EOS and y:
                break
            if token != EOS:
                y.append(token)
        examples.append((x, y))
    return examples


def likely_pair(x):
    """The two most likely first tokens, in order, each followed by its likeliest successor."""
    first = oracle_next(x)[:V]
    a = max(range(V), key=first.__getitem__)
    second = oracle_next(x + [a])[:V]
    return [a, max(range(V), key=second.__getitem__)]


def words(examples):
    return [([str(t) for t in x], [str(t) for t in y]) for x, y in examples]


def test_full_and_first_word_accuracy_equal_the_closed_form():
    model = OracleModel()
    examples = random_examples(60, seed=7)
    # a tiny budget forces many batches of mixed lengths
    full, first = evaluation.target_log_probs(model, examples, eos_id=EOS, batch_tokens=20)
    for i, (x, y) in enumerate(examples):
        assert full[i].exp().item() == pytest.approx(oracle_sequence_prob(x, y), abs=1e-6)
        assert first[i].exp().item() == pytest.approx(oracle_next(x)[y[0]], abs=1e-6)

    gen = random_examples(40, seed=8)
    gen_linear = [(x, [(t + 1) % V for t in y]) for x, y in gen]
    task = FakeTask("first-word", None)
    m = evaluation.evaluate(
        model, task, IdVocab(), test=words(examples), gen=words(gen), gen_linear=words(gen_linear)
    )
    expect_fa = {
        "test": sum(oracle_sequence_prob(x, y) for x, y in examples) / len(examples),
        "hierarchical": sum(oracle_sequence_prob(x, y) for x, y in gen) / len(gen),
        "linear": sum(oracle_sequence_prob(x, y) for x, y in gen_linear) / len(gen),
    }
    expect_pa = {
        "test": sum(oracle_next(x)[y[0]] for x, y in examples) / len(examples),
        "hierarchical": sum(oracle_next(x)[y[0]] for x, y in gen) / len(gen),
        "linear": sum(oracle_next(x)[y[0]] for x, y in gen_linear) / len(gen),
    }
    for name in expect_fa:
        assert abs(m["full"][name] - expect_fa[name]) <= 1e-6
        assert abs(m["partial"][name] - expect_pa[name]) <= 1e-6
    for kind, expect in (("full", expect_fa), ("partial", expect_pa)):
        ratio = math.log(expect["hierarchical"]) - math.log(expect["linear"])
        assert m[kind]["log_ratio"] == pytest.approx(ratio, abs=1e-5)


def second_word_match(output, reference):
    return len(output) >= 2 and output[1] == reference[1]


def exact_second_word(x, reference):
    """P(a sample of at most 2 tokens has a 2nd token equal to reference[1])."""
    first = oracle_next(x)
    return sum(first[a] * oracle_next(x + [a])[reference[1]] for a in range(V))


def within_three_standard_errors(estimate, exact_per_source, num_samples):
    n = len(exact_per_source)
    mean = sum(exact_per_source) / n
    variance = sum(p * (1 - p) for p in exact_per_source) / (num_samples * n * n)
    return abs(estimate - mean) <= 3 * math.sqrt(variance), mean, math.sqrt(variance)


def test_sampled_second_word_accuracy_within_three_standard_errors():
    model = OracleModel()
    gen = [(x, likely_pair(x)) for x, _ in random_examples(300, seed=9)]
    gen_linear = [(x, [y[0], (y[1] + 1) % V]) for x, y in gen]
    task = FakeTask("second-word", second_word_match)
    m = evaluation.evaluate(
        model, task, IdVocab(), test=words(gen[:5]), gen=words(gen), gen_linear=words(gen_linear)
    )
    for name, data in (("hierarchical", gen), ("linear", gen_linear)):
        exact = [exact_second_word(x, y) for x, y in data]
        ok, mean, se = within_three_standard_errors(m["partial"][name], exact, 10)
        assert ok, (name, m["partial"][name], mean, se)


def test_sampled_exact_match_estimates_full_accuracy():
    """Long samples (select_state drops finished rows): P(sample == y) is p(y | x)."""
    model = OracleModel()
    data = random_examples(300, seed=10)
    prompts = [x for x, _ in data]
    samples = evaluation.sample_continuations(model, prompts, eos_id=EOS, max_tokens=50, seed=5)
    assert all(len(per) == 10 for per in samples)
    assert all(EOS not in s and len(s) <= 50 for per in samples for s in per)
    hits = sum(s == y for per, (_, y) in zip(samples, data) for s in per) / (10 * len(data))
    exact = [oracle_sequence_prob(x, y) for x, y in data]
    ok, mean, se = within_three_standard_errors(hits, exact, 10)
    assert ok, (hits, mean, se)

    # the same through evaluate() with a sampled ("pos-main-verb") kind and exact matching
    task = FakeTask("pos-main-verb", lambda output, reference: output == reference)
    linear = [(x, y[::-1]) for x, y in data]
    m = evaluation.evaluate(
        model, task, IdVocab(), test=words(data[:5]), gen=words(data), gen_linear=words(linear)
    )
    for name, pairs in (("hierarchical", data), ("linear", linear)):
        exact = [oracle_sequence_prob(x, y) for x, y in pairs]
        ok, mean, se = within_three_standard_errors(m["partial"][name], exact, 10)
        assert ok, (name, m["partial"][name], mean, se)
        assert m["full"][name] == pytest.approx(mean, abs=1e-6)


def test_sampling_is_seeded_and_its_shape_does_not_depend_on_the_batch_budget():
    """The same seed gives the same samples, another seed others; any prompt budget gives
    one list of NUM_SAMPLES outputs per prompt, in the prompts' order (the samples
    themselves depend on the batching, which a run's config fixes)."""
    model = OracleModel()
    prompts = [x for x, _ in random_examples(50, seed=11)]
    a = evaluation.sample_continuations(model, prompts, eos_id=EOS, seed=123)
    b = evaluation.sample_continuations(model, prompts, eos_id=EOS, seed=123)
    c = evaluation.sample_continuations(model, prompts, eos_id=EOS, seed=124)
    assert a == b
    assert a != c
    small = evaluation.sample_continuations(model, prompts, eos_id=EOS, seed=123, prompt_tokens=8)
    for out in (a, small):
        assert len(out) == len(prompts) and all(len(per) == evaluation.NUM_SAMPLES for per in out)
    greedy = [
        evaluation.sample_continuations(
            model, prompts, eos_id=EOS, num_samples=1, greedy=True, prompt_tokens=budget
        )
        for budget in (8, evaluation.SAMPLE_PROMPT_TOKENS)
    ]
    assert greedy[0] == greedy[1]  # no randomness: the batching changes nothing


def test_first_samples_follow_first_word_distribution():
    """Max 1 token: the empirical first-token frequencies match p(y_1 | x)."""
    model = OracleModel()
    x = [1, 2, 3]
    samples = evaluation.sample_continuations(model, [x] * 400, eos_id=EOS, max_tokens=1)
    counts = [0] * (V + 1)
    for per in samples:
        for s in per:
            counts[s[0] if s else EOS] += 1
    n = 4000
    for k, p in enumerate(oracle_next(x)):
        assert abs(counts[k] / n - p) <= 3 * math.sqrt(p * (1 - p) / n) + 1e-9


def test_log_ratio_undefined_for_zero():
    assert evaluation.log_ratio(0.5, 0.0) is None
    assert evaluation.log_ratio(0.0, 0.5) is None
    assert evaluation.log_ratio(0.5, 0.25) == pytest.approx(math.log(2))


def test_prompt_batches_respect_budget_and_equal_lengths():
    rng = random.Random(0)
    prompts = [[0] * rng.randint(1, 30) for _ in range(500)]
    batches = evaluation.prompt_batches(prompts, 512)
    assert sorted(i for b in batches for i in b) == list(range(500))
    for b in batches:
        assert len({len(prompts[i]) for i in b}) == 1
        assert len(b) * len(prompts[b[0]]) <= 512


class MoreEos(torch.nn.Module):
    """A real model whose EOS logit is raised right after tokens 0 and 1, so that greedy
    outputs end at different steps."""

    def __init__(self, inner, boost=5.0):
        super().__init__()
        self.inner, self.boost = inner, boost

    def _more(self, logits, previous):  # previous: the last token read, -1 for none
        raise_eos = (previous == 0) | (previous == 1)
        eos = logits[..., -1:] + self.boost * raise_eos.unsqueeze(-1)
        return torch.cat([logits[..., :-1], eos], -1)

    def forward(self, tokens):  # (B, n) -> (B, n+1, V+1); position t has read w_1..w_t
        previous = torch.cat([torch.full_like(tokens[:, :1], -1), tokens], 1)
        return self._more(self.inner(tokens), previous)

    def start(self, batch_size):
        logits, state = self.inner.start(batch_size)
        return self._more(logits, torch.full((batch_size,), -1)), state

    def step(self, state, tokens):
        logits, state = self.inner.step(state, tokens)
        return self._more(logits, tokens), state

    def select_state(self, state, index):
        return self.inner.select_state(state, index)


@pytest.mark.parametrize("architecture, d", [("Tf+Nd", 8), ("LSTM+Sup+R", 10), ("RNN+Nd", 10)])
def test_incremental_greedy_decoding_matches_full_forward_passes(architecture, d):
    """The decoder (start/step/select_state, rows finishing at different times) against
    brute force: re-running the whole-sequence forward pass after every token."""
    from fruit.models import build_model

    torch.manual_seed(0)
    vocab_size = 6
    model = MoreEos(build_model(architecture, vocab_size=vocab_size, d=d)).eval()
    rng = random.Random(1)
    prompts = [[rng.randrange(vocab_size) for _ in range(rng.choice([3, 5]))] for _ in range(12)]
    max_tokens = 8
    got = evaluation.sample_continuations(
        model, prompts, eos_id=vocab_size, num_samples=1, max_tokens=max_tokens, greedy=True
    )
    lengths = set()
    for prompt, (output,) in zip(prompts, got):
        expected = []
        with torch.no_grad():
            while len(expected) < max_tokens:
                token = model(torch.tensor([prompt + expected]))[0, -1].argmax().item()
                if token == vocab_size:
                    break
                expected.append(token)
        assert output == expected
        lengths.add(len(output))
    assert len(lengths) > 1, lengths  # rows finished at different steps


def test_next_token_log_probs_match_the_oracle_at_every_real_position():
    model = OracleModel()
    strings = [[3, 1, 4], [2], [], [0, 0, 1, 2, 3]]
    with torch.no_grad():
        logp, real = evaluation.next_token_log_probs(model, strings, eos_id=EOS)
    assert logp.shape == real.shape == (4, 6)
    for b, w in enumerate(strings):
        assert real[b].tolist() == [t <= len(w) for t in range(6)]
        for t, following in enumerate(w + [EOS]):
            expected = math.log(oracle_next(w[:t])[following])
            assert math.isclose(float(logp[b, t]), expected, rel_tol=1e-5, abs_tol=1e-6)


def test_prompt_state_gives_the_next_token_distribution_after_the_prompt():
    model = OracleModel()
    prompts = [[3, 1, 4], [0, 2, 2]]
    for given in (prompts, torch.tensor(prompts)):
        logits, state = evaluation.prompt_state(model, given)
        assert logits.shape == (2, V + 1)
        for row, prompt in enumerate(prompts):
            probs = logits[row].double().softmax(-1).tolist()
            assert all(math.isclose(p, q, rel_tol=1e-5) for p, q in zip(probs, oracle_next(prompt)))
    # the state continues the prompt: one more step gives p(. | prompt + [1])
    logits, _ = model.step(state, torch.tensor([1, 1]))
    probs = logits[0].double().softmax(-1).tolist()
    assert all(math.isclose(p, q, rel_tol=1e-5) for p, q in zip(probs, oracle_next([3, 1, 4, 1])))


class MarkerTask:
    """Token "4" is the transformation marker; targets are easy functions of the sentence."""

    transform_marker = "4"

    def target(self, source):
        return source[-2::-1] if source[-1] == "4" else source[:-1]

    def linear(self, sentence):
        return sorted(sentence)


def test_decoded_examples_rows_and_probabilities():
    model = OracleModel()
    sources = [["3", "1", "4"], ["2", "0"], ["1", "1", "2", "4"]]
    rows = evaluation.decoded_examples(
        model, MarkerTask(), IdVocab(), sources, samples=2, max_tokens=6
    )
    kinds = ["hierarchical target", "linear target", "greedy", "sample 1", "sample 2"]
    expected_kinds = kinds + [k for k in kinds if k != "linear target"] + kinds
    assert [r["kind"] for r in rows] == expected_kinds
    by = {(r["source"], r["kind"]): r["output"] for r in rows}
    assert by["3 1 4", "hierarchical target"] == "1 3"
    assert by["3 1 4", "linear target"] == "1 3"
    assert by["2 0", "hierarchical target"] == "2"
    for r in rows:
        x = [int(t) for t in r["source"].split()]
        y = [int(t) for t in r["output"].split()]
        assert math.isclose(r["probability"], oracle_sequence_prob(x, y), rel_tol=1e-4)
        if r["kind"] == "greedy":  # the argmax chain of the oracle, at most 6 tokens
            chain = []
            while len(chain) < 6:
                p = oracle_next(x + chain)
                token = max(range(V + 1), key=p.__getitem__)
                if token == EOS:
                    break
                chain.append(token)
            assert y == chain
