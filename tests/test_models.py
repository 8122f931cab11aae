"""The fifteen models: decoding = forward, causality, training steps, wiring (docs/paper.md §2-§9)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from fruit.errors import FruitError
from fruit.models import ARCHITECTURES, build_model, nd_action_mass, num_parameters
from fruit.models.stack_attention import StackAttention

V = 11  # small vocabulary: ids 0..10, EOS = 11, BOS = 12 (transformers)
SMALL_D = {"Tf": 16, "RNN": 12, "LSTM": 12}


def small_model(arch: str, **options) -> torch.nn.Module:
    return build_model(arch, vocab_size=V, d=SMALL_D[arch.split("+")[0]], **options)


@torch.no_grad()
def scramble(model: torch.nn.Module, seed: int = 0, std: float = 0.4) -> torch.nn.Module:
    """Larger random weights than the initialiser's, so that stacks make decisive moves."""
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        if p.requires_grad:
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return model


def padded_batch(lengths, seed=1):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (len(lengths), max(lengths)), generator=g)
    for row, n in enumerate(lengths):
        tokens[row, n:] = 0  # padding: any valid id
    return tokens


def decode_stepwise(model, tokens):
    logits, state = model.start(tokens.shape[0])
    out = [logits]
    for t in range(tokens.shape[1]):
        logits, state = model.step(state, tokens[:, t])
        out.append(logits)
    return torch.stack(out, dim=1)


# -- (b) incremental decoding equals the whole-sequence forward -------------------------------


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_stepwise_decoding_equals_forward(arch):
    torch.manual_seed(0)
    model = scramble(small_model(arch)).eval()
    lengths = [9, 4, 7, 1]
    tokens = padded_batch(lengths)
    with torch.no_grad():
        full = model(tokens)
        steps = decode_stepwise(model, tokens)
        assert full.shape == (4, 10, V + 1)
        assert (full - steps).abs().max().item() <= 1e-5
        # Each string alone gives the same logits on its real positions (padding is harmless).
        for row, n in enumerate(lengths):
            alone = model(tokens[row : row + 1, :n])[0]
            assert (alone - full[row, : n + 1]).abs().max().item() <= 1e-5


def test_stepwise_decoding_at_paper_size():
    torch.manual_seed(0)
    tokens = padded_batch([12, 5, 9])
    for arch in ("Tf+Nd", "LSTM+Sup+R", "RNN+Nd+R"):
        model = build_model(arch, vocab_size=68).eval()
        tokens68 = tokens * 6  # ids up to 60
        with torch.no_grad():
            assert (model(tokens68) - decode_stepwise(model, tokens68)).abs().max() <= 1e-5


@pytest.mark.parametrize("arch", ["Tf+Sup+Sup", "LSTM+Nd", "RNN+Sup+R", "Tf"])
def test_select_state_reorders_rows(arch):
    model = scramble(small_model(arch)).eval()
    tokens = padded_batch([6, 6, 6], seed=3)
    with torch.no_grad():
        full = model(tokens)
        _, state = model.start(3)
        for t in range(3):
            _, state = model.step(state, tokens[:, t])
        index = torch.tensor([2, 0, 2])
        state = model.select_state(state, index)
        for t in range(3, 6):
            logits, state = model.step(state, tokens[index, t])
            assert (logits - full[index, t + 1]).abs().max() <= 1e-5


# -- (c) causality ------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_causality(arch):
    model = scramble(small_model(arch)).eval()
    tokens = padded_batch([8, 8])
    with torch.no_grad():
        base = model(tokens)
        for t in (0, 3, 6):
            changed = tokens.clone()
            changed[:, t:] = (changed[:, t:] + 1 + torch.arange(8 - t)) % V  # change w_{t+1}...
            logits = model(changed)
            # Position p predicts w_{p+1} from w_1..w_p: positions <= t must not move.
            assert torch.equal(logits[:, : t + 1], base[:, : t + 1])
            assert (logits[:, t + 1] - base[:, t + 1]).abs().max() > 1e-4  # and t+1 does


# -- (d) a training step ------------------------------------------------------------------------


def training_step(model, tokens, lengths, device):
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokens = tokens.to(device)
    targets = torch.cat((tokens, tokens.new_zeros(len(lengths), 1)), dim=1)  # (B, n+1)
    for row, n in enumerate(lengths):
        targets[row, n] = V  # EOS
        targets[row, n + 1 :] = -100  # padded positions: ignored
    logits = model(tokens)
    loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100, reduction="sum")
    loss = loss / len(lengths)  # mean over strings of -log p(w)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer.step()
    return loss, before


def check_training_step(arch, device):
    torch.manual_seed(0)
    model = small_model(arch).to(device)
    lengths = [7, 3, 5]
    loss, before = training_step(model, padded_batch(lengths), lengths, device)
    assert torch.isfinite(loss)
    for (name, p), old in zip(model.named_parameters(), before):
        if not p.requires_grad:
            assert name.split(".")[-1].startswith("bias_hh") and torch.equal(p, old)
            assert not p.abs().any()  # the frozen duplicate RNN bias stays 0
            continue
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert not torch.equal(p, old), name


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_training_step_cpu(arch):
    check_training_step(arch, torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_training_step_cuda(arch):
    check_training_step(arch, torch.device("cuda"))
    model = small_model(arch).cuda().eval()
    tokens = padded_batch([6, 4]).cuda()
    with torch.no_grad():
        assert (model(tokens) - decode_stepwise(model, tokens)).abs().max() <= 1e-4


# -- wiring against independent oracles ---------------------------------------------------------


def test_standard_layers_match_pytorch_pre_norm_encoder():
    """docs/paper.md §3.2: the standard layer is PyTorch's pre-norm encoder layer."""
    torch.manual_seed(0)
    model = scramble(build_model("Tf", vocab_size=V, d=16, dropout=0.0), std=0.2).eval()
    d = 16
    layers = []
    for ours in model.layers:
        ref = torch.nn.TransformerEncoderLayer(
            d, 4, 2 * d, dropout=0.0, batch_first=True, norm_first=True
        )
        with torch.no_grad():
            ref.self_attn.in_proj_weight.copy_(ours.attention.in_proj.weight)
            ref.self_attn.in_proj_bias.copy_(ours.attention.in_proj.bias)
            ref.self_attn.out_proj.weight.copy_(ours.attention.out_proj.weight)
            ref.self_attn.out_proj.bias.copy_(ours.attention.out_proj.bias)
            ref.linear1.load_state_dict(ours.ff.hidden.state_dict())
            ref.linear2.load_state_dict(ours.ff.out.state_dict())
            ref.norm1.load_state_dict(ours.norm1.state_dict())
            ref.norm2.load_state_dict(ours.norm2.state_dict())
        layers.append(ref.eval())
    tokens = padded_batch([7, 7])
    z = torch.cat((torch.full((2, 1), V + 1), tokens), dim=1)
    # Interleaved sinusoidal positions written out from §3.1.
    pos = torch.tensor(
        [
            [
                math.sin(t * math.exp(-(j // 2) * 2 * math.log(10000) / d))
                if j % 2 == 0
                else math.cos(t * math.exp(-(j // 2) * 2 * math.log(10000) / d))
                for j in range(d)
            ]
            for t in range(8)
        ]
    )
    E = model.embedding.weight
    h = math.sqrt(d) * E[z] + pos
    mask = torch.nn.Transformer.generate_square_subsequent_mask(8)
    with torch.no_grad():
        for ref in layers:
            h = ref(h, src_mask=mask, is_causal=True)
        expected = (
            F.layer_norm(h, (d,), model.final_norm.weight, model.final_norm.bias) @ E[: V + 1].T
        )
        assert (model(tokens) - expected).abs().max() <= 1e-4


def superposition_oracle(probs, pushed):
    """docs/paper.md §5.1 written out over lists: probs (n, 3) push/pop/no-op, pushed (n, m)."""
    stack, readings = [], []
    zero = torch.zeros(pushed.shape[1])
    for (push, pop, noop), v in zip(probs, pushed):
        get = lambda i, stack=stack: stack[i] if 0 <= i < len(stack) else zero  # noqa: E731
        stack = [
            push * (v if i == 0 else get(i - 1)) + noop * get(i) + pop * get(i + 1)
            for i in range(len(stack) + 1)
        ]
        readings.append(stack[0])
    return torch.stack(readings)


def test_stack_attention_sup_wiring_no_lag():
    """§7: ℓ -> softmax(W_a ℓ), W_v ℓ -> stack -> W_y ρ, reading t includes actions at t."""
    torch.manual_seed(0)
    layer = scramble(small_model("Tf+Sup"), std=0.5).layers[2]
    sub = layer.attention
    ell = torch.randn(1, 6, 16)
    out, probs = sub(ell)
    with torch.no_grad():
        expected_probs = torch.softmax(ell[0] @ sub.actions.weight.T, -1)
        readings = superposition_oracle(expected_probs, ell[0] @ sub.pushed.weight.T)
        assert torch.allclose(probs[0], expected_probs, atol=1e-6)
        assert torch.allclose(out[0], readings @ sub.output.weight.T, atol=1e-5)
        assert (readings < 0).any()  # [D1] rau pushes W_v ℓ with no sigmoid


def capture_readings(sub: StackAttention, ell):
    seen = []
    handle = sub.output.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    with torch.no_grad():
        sub(ell)
    handle.remove()
    return seen[0]


@pytest.mark.parametrize("kind", ["Sup", "Nd"])
def test_pushed_activation_switch(kind):
    arch = f"Tf+{kind}"
    ell = torch.randn(2, 8, 16) * 2
    rau = scramble(small_model(arch), std=0.6).layers[2].attention
    paper = scramble(small_model(arch, pushed_activation="sigmoid"), std=0.6).layers[2].attention
    r_rau, r_paper = capture_readings(rau, ell), capture_readings(paper, ell)
    assert r_paper.min() >= 0 and r_paper.max() <= 1  # averages of vectors in (0, 1)
    # exactly the paper's v_t = σ(W_v ℓ_t) (log σ for Nd) pushed, not just something in range
    with torch.no_grad():
        logits, pushed = paper.actions(ell), paper.pushed(ell)
        if kind == "Sup":  # the written-out superposition stack (§5.1) as the oracle
            probs = torch.softmax(logits, -1)
            expected = torch.stack(
                [superposition_oracle(probs[b], torch.sigmoid(pushed[b])) for b in range(2)]
            )
        else:  # the dVPDA (tested against brute force elsewhere) fed log σ(W_v ℓ)
            expected = paper.stack_kind.readings(
                logits, F.logsigmoid(pushed), paper._bottom(), paper.options
            )
    assert torch.allclose(r_paper, expected, atol=1e-5)
    if kind == "Sup":
        assert r_rau.min() < 0
    else:
        assert r_rau.max() > 1  # exp(W_v ℓ) is unbounded
    with pytest.raises(FruitError, match="sigmoid"):
        small_model(arch, pushed_activation="tanh")


def test_stack_attention_changes_output_at_same_position():
    """§14: changing ℓ (hence the actions) at position t changes the output at t, not before."""
    for arch in ("Tf+Sup", "Tf+Nd"):
        sub = scramble(small_model(arch), std=0.5).layers[2].attention
        ell = torch.randn(1, 7, 16)
        with torch.no_grad():
            base, _ = sub(ell)
            ell2 = ell.clone()
            ell2[0, 4] += 1.0
            out, _ = sub(ell2)
        assert torch.allclose(out[0, :4], base[0, :4], atol=1e-6)
        assert (out[0, 4] - base[0, 4]).abs().max() > 1e-4


def perturbed_actions_logits(model, tokens, step):
    """Logits with the action head's output changed at controller step ``step`` (1-based)."""
    calls = []

    def hook(module, args, output):
        calls.append(None)
        return output + 3.0 * torch.arange(output.shape[-1]) if len(calls) == step else output

    handle = model.stacks[0].actions.register_forward_hook(hook)
    with torch.no_grad():
        logits = model(tokens)
    handle.remove()
    return logits


@pytest.mark.parametrize("arch", ["RNN+Sup", "RNN+Nd", "LSTM+Sup+R", "LSTM+Nd+R"])
def test_stack_rnn_lag_and_short_circuit(arch):
    """§14: without +R, actions at step t reach y_{t+1} but not y_t; with +R they reach y_t."""
    model = scramble(small_model(arch), std=0.5).eval()
    tokens = padded_batch([7])
    # A hooked head sends the forward down the stepped path: compare like with like
    # (the fused Sup pass equals it to rounding, tested with the stepwise decoder).
    base = perturbed_actions_logits(model, tokens, step=0)
    t = 3
    logits = perturbed_actions_logits(model, tokens, t)
    assert torch.equal(logits[:, :t], base[:, :t])
    moved_now = (logits[:, t] - base[:, t]).abs().max() > 1e-4
    assert moved_now == arch.endswith("+R")
    assert (logits[:, t + 1] - base[:, t + 1]).abs().max() > 1e-4


def test_stack_rnn_sup_matches_written_out_equations():
    """RNN+Sup+R against §4/§8 written out with the superposition oracle (dropout off)."""
    model = scramble(small_model("RNN+Sup+R", dropout=0.0), std=0.5).eval()
    tokens = padded_batch([6])[0]
    rnn, E = model.core.rnn, model.embedding.weight
    W = [(getattr(rnn, f"weight_ih_l{k}"), getattr(rnn, f"weight_hh_l{k}")) for k in range(3)]
    b = [getattr(rnn, f"bias_ih_l{k}") for k in range(3)]  # the only bias per layer
    with torch.no_grad():
        h = list(torch.tanh(model.core.initial_hidden))
        reading = torch.zeros(50)
        outputs = [torch.cat((h[2], reading))]
        probs, pushed = [], []
        for w in tokens:
            u = torch.cat((E[w], reading))
            for k in range(3):
                h[k] = torch.tanh(W[k][0] @ u + W[k][1] @ h[k] + b[k])
                u = h[k]
            probs.append(
                torch.softmax(
                    model.stacks[0].actions.weight @ h[2] + model.stacks[0].actions.bias, -1
                )
            )
            pushed.append(
                torch.sigmoid(model.stacks[0].pushed.weight @ h[2] + model.stacks[0].pushed.bias)
            )
            reading = superposition_oracle(torch.stack(probs), torch.stack(pushed))[-1]
            outputs.append(torch.cat((h[2], reading)))
        expected = torch.stack(outputs) @ E.T
        assert (model(tokens[None])[0] - expected).abs().max() <= 1e-5


def test_sup_r_rau_compat_truncates_only_the_last_reading():
    """[D4]: rau's batched pass has r_T = a_push v_T; exact by default."""
    exact = scramble(small_model("LSTM+Sup+R"), std=0.5).eval()
    compat = scramble(small_model("LSTM+Sup+R", rau_compat=True), std=0.5).eval()
    tokens = padded_batch([6, 3])
    with torch.no_grad():
        a, b = exact(tokens), compat(tokens)
        assert torch.equal(a[:, :6], b[:, :6])
        assert (a[0, 6] - b[0, 6]).abs().max() > 1e-4
        assert (a - decode_stepwise(exact, tokens)).abs().max() <= 1e-5


def test_return_actions_shapes_and_nd_mass():
    tokens = padded_batch([5, 5])
    with torch.no_grad():
        _, acts = scramble(small_model("Tf+Sup+Sup")).eval()(tokens, return_actions=True)
        assert [a.shape for a in acts] == [(2, 6, 3)] * 2
        assert torch.allclose(acts[0].sum(-1), torch.ones(2, 6))
        _, acts = small_model("RNN+Nd").eval()(tokens, return_actions=True)
    assert acts[0].shape == (2, 5, 189)
    weights = torch.zeros(189)
    weights[0 * 21 + 4] = 1.0  # row (q0, x0): push r=1, y=1
    weights[4 * 21 + 9 + 2] = 2.0  # row (q1, x1): replace r=0, y=2
    weights[8 * 21 + 18 + 2] = 5.0  # row (q2, x2): pop to r=2
    assert nd_action_mass(weights).tolist() == [1.0, 2.0, 5.0]
    assert nd_action_mass(acts[0], normalize=True).sum(-1).allclose(torch.ones(2, 5))


# -- initialisation (§9) ------------------------------------------------------------------------


def xavier_bound(linear, gain=1.0):
    fan_out, fan_in = linear.weight.shape
    return gain * math.sqrt(6 / (fan_in + fan_out))


def assert_filled_to(t, bound):
    assert t.abs().max() <= bound + 1e-7
    assert t.abs().max() > (0.8 if t.numel() >= 40 else 0.2) * bound


def test_initialisation_transformer():
    torch.manual_seed(0)
    model = build_model("Tf+Nd", vocab_size=68)
    sub = model.layers[2].attention
    for linear, bound in ((sub.actions, 0.153), (sub.pushed, 0.287), (sub.output, 0.230)):
        assert xavier_bound(linear) == pytest.approx(bound, abs=5e-4)  # §9 example values
        assert_filled_to(linear.weight, xavier_bound(linear))
    ff = model.layers[2].ff
    assert_filled_to(ff.hidden.weight, xavier_bound(ff.hidden, math.sqrt(2)))
    assert_filled_to(ff.out.weight, xavier_bound(ff.out))
    assert not ff.hidden.bias.any() and not ff.out.bias.any()
    standard = model.layers[0]
    for p in (
        standard.ff.hidden.weight,
        standard.ff.hidden.bias,
        standard.attention.in_proj.weight,
        standard.attention.in_proj.bias,
        standard.attention.out_proj.bias,
        model.embedding.weight,
        sub.bottom,
    ):
        assert_filled_to(p, 0.1)
    for norm in (model.final_norm, standard.norm1, model.layers[2].norm2):
        assert torch.equal(norm.weight, torch.ones(68)) and not norm.bias.any()


def test_initialisation_stack_rnns():
    sup = build_model("LSTM+Sup", vocab_size=68)
    for linear in (sup.stacks[0].actions, sup.stacks[0].pushed):
        assert_filled_to(linear.weight, xavier_bound(linear))
        assert not linear.bias.any()
    nd = build_model("RNN+Nd+R", vocab_size=68)
    heads = nd.stacks[0]
    for p in (heads.actions.weight, heads.actions.bias, heads.pushed.bias, nd.bottom):
        assert_filled_to(p, 0.1)
    for p in (nd.core.rnn.weight_hh_l1, nd.core.rnn.bias_ih_l0, nd.core.initial_hidden):
        assert_filled_to(p, 0.1)
    assert not nd.core.rnn.bias_hh_l0.requires_grad and not nd.core.rnn.bias_hh_l0.any()


def test_options_are_validated():
    with pytest.raises(FruitError, match="nd_size"):
        build_model("Tf", vocab_size=V, stack_size=3)
    with pytest.raises(FruitError, match="multiple of 4"):
        build_model("Tf+Sup", vocab_size=V, d=18)
    model = build_model("Tf+Nd", vocab_size=V, d=16, nd_states=2, nd_symbols=2, nd_size=4)
    assert model.layers[2].attention.actions.out_features == 2 * 2 * (2 * 4 + 2)
    assert num_parameters(model) > 0


# -- the fused attention of CUDA, checked against the written-out one -------------------------


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("arch", ["Tf", "Tf+Nd"])
def test_fused_attention_equals_the_written_out_one(arch, device, monkeypatch):
    """scaled_dot_product_attention (CUDA's path; forced on the CPU) gives the written-out
    attention's logits, gradients and step-by-step decoding, without dropout."""
    torch.manual_seed(0)
    model = scramble(small_model(arch)).eval().to(device)
    tokens = padded_batch([9, 4, 7]).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    results = {}
    for choice in ("0", "1"):
        monkeypatch.setenv("FRUIT_FUSED_ATTENTION", choice)
        logits = model(tokens)
        grads = torch.autograd.grad(logits.square().sum(), params)
        with torch.no_grad():
            steps = decode_stepwise(model, tokens)
        results[choice] = logits.detach(), grads, steps
    (a, ga, sa), (b, gb, sb) = results["0"], results["1"]
    assert (a - b).abs().max() <= 1e-5 and (sa - sb).abs().max() <= 1e-5
    for x, y in zip(ga, gb):
        assert (x - y).abs().max() <= 1e-4 * max(1.0, x.abs().max().item())


def test_fused_attention_keeps_the_dropout_law(monkeypatch):
    """With dropout, the fused path drops attention probabilities at the same rate: the
    mean output of many draws approaches the no-dropout output (inverted dropout)."""
    from fruit.models.transformer import CausalSelfAttention

    monkeypatch.setenv("FRUIT_FUSED_ATTENTION", "1")
    torch.manual_seed(0)
    attention = CausalSelfAttention(16, 4, dropout=0.3)
    a = torch.randn(2, 6, 16)
    with torch.no_grad():
        expected = attention.eval()(a)
        attention.train()
        draws = torch.stack([attention(a) for _ in range(4000)])
    assert not torch.allclose(draws[0], expected, atol=1e-3)  # it does drop
    assert (draws.mean(0) - expected).abs().max() <= 0.02


def test_fused_attention_switch_is_checked(monkeypatch):
    from fruit.models.transformer import fused_attention

    monkeypatch.setenv("FRUIT_FUSED_ATTENTION", "yes")
    with pytest.raises(FruitError, match="FRUIT_FUSED_ATTENTION"):
        fused_attention(torch.device("cpu"))
    monkeypatch.delenv("FRUIT_FUSED_ATTENTION")
    assert not fused_attention(torch.device("cpu"))
    assert fused_attention(torch.device("cuda"))
