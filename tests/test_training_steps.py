"""The three ways of taking a training step (fruit.training.steps) against each other:
the plain step (reads the loss, skips on nan/inf) is the oracle. On the CPU, the graph
path runs with its stand-in (the step called instead of replayed); the `gpu` tests
compare real CUDA graphs with the eager step on the GPU."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from fruit import training
from fruit.errors import FruitError
from fruit.models import build_model
from fruit.training import graphs, steps
from fruit.training.objective import adam, batch_tensors, update, update_without_sync

EOS = 9  # question formation's vocabulary is larger; any id below V + 1 will do


def strings_of(lengths, seed=0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, EOS, (n,), generator=g).tolist() for n in lengths]


BATCHES = [strings_of([5, 6, 6], 1), strings_of([3, 4], 2), strings_of([5, 6, 6], 3),
           strings_of([7], 4), strings_of([3, 4], 5)]  # fmt: skip


def model_and_adam(architecture: str, device="cpu"):
    torch.manual_seed(3)
    model = build_model(architecture, vocab_size=EOS, d=12).to(device)
    return model, adam(model.parameters(), 1e-2)


def same_state(a, b) -> bool:
    """Parameters and Adam's state equal, bit for bit."""
    (ma, oa), (mb, ob) = a, b
    if not all(torch.equal(x, y) for x, y in zip(ma.parameters(), mb.parameters())):
        return False
    sa, sb = oa.state_dict()["state"], ob.state_dict()["state"]
    return sa.keys() == sb.keys() and all(
        torch.equal(sa[i][k], sb[i][k]) for i in sa for k in sa[i]
    )


@pytest.mark.parametrize("architecture", ["Tf", "Tf+Nd", "LSTM+Sup"])
def test_the_eager_step_takes_the_plain_steps_bit_for_bit(architecture):
    plain, eager = model_and_adam(architecture), model_and_adam(architecture)
    found_inf = torch.zeros(())
    torch.manual_seed(11)  # the dropout stream
    expected = [update(*plain, batch, EOS, "cpu", 10.0) for batch in BATCHES]
    torch.manual_seed(11)
    got = [
        float(update_without_sync(*eager, *batch_tensors(batch, EOS), 10.0, found_inf))
        for batch in BATCHES
    ]
    assert got == expected
    assert same_state(plain, eager)


class Exploding(torch.nn.Module):
    """A model whose training losses are nan from the given call on."""

    def __init__(self, inner, from_call: int):
        super().__init__()
        self.inner, self.d, self.calls, self.from_call = inner, inner.d, 0, from_call

    def forward(self, tokens):
        self.calls += 1
        logits = self.inner(tokens)
        return logits * float("nan") if self.training and self.calls >= self.from_call else logits


def test_a_nan_loss_skips_the_step_on_the_device():
    torch.manual_seed(3)
    model = Exploding(build_model("Tf", vocab_size=EOS, d=12), from_call=3)
    optimizer = adam(model.parameters(), 1e-2)
    found_inf = torch.zeros(())
    for batch in BATCHES[:2]:
        update_without_sync(model, optimizer, *batch_tensors(batch, EOS), 10.0, found_inf)
    before = copy.deepcopy((model, optimizer))
    loss = update_without_sync(model, optimizer, *batch_tensors(BATCHES[2], EOS), 10.0, found_inf)
    assert torch.isnan(loss) and float(found_inf) == 1.0
    assert same_state(before, (model, optimizer))  # parameters, moments, step count
    assert optimizer.state_dict()["state"][0]["step"] == 2
    assert not hasattr(optimizer, "found_inf")  # handed to the step only


class Recording:
    """The CPU stand-in that counts captures, warm-ups and resets, and can fail."""

    def __init__(self, fail=False):
        self.captures, self.warm_ups, self.resets, self.fail = 0, 0, 0, fail

    def reset(self):
        self.resets += 1

    def warm_up(self, fn):
        self.warm_ups += 1
        fn()

    def capture(self, fn):
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing\nmore")
        self.captures += 1
        return fn


def test_graphs_are_made_once_per_shape_and_again_when_the_rate_changes():
    """The LSTM has frozen parameters (the duplicate biases): Adam keeps no state for
    them, and neither does the graph path's (same_state compares the state's keys)."""
    plain, graphed = model_and_adam("LSTM"), model_and_adam("LSTM")
    backend = Recording()
    step = graphs.GraphedUpdates(*graphed, 10.0, backend=backend)
    torch.manual_seed(11)
    expected = [update(*plain, batch, EOS, "cpu", 10.0) for batch in BATCHES]
    torch.manual_seed(11)
    got = [float(step(*batch_tensors(batch, EOS))) for batch in BATCHES]
    assert got == expected and same_state(plain, graphed)
    assert backend.captures == backend.warm_ups == 3  # shapes (3, 6), (2, 4), (1, 7)
    for _, optimizer in (plain, graphed):
        optimizer.param_groups[0]["lr"] /= 2  # what the plateau schedule does
    torch.manual_seed(12)
    expected = [update(*plain, batch, EOS, "cpu", 10.0) for batch in BATCHES[:3]]
    torch.manual_seed(12)
    got = [float(step(*batch_tensors(batch, EOS))) for batch in BATCHES[:3]]
    assert got == expected and same_state(plain, graphed)
    assert backend.captures == 5 and backend.resets == 2  # the first rate, then the new one


def test_a_step_that_cannot_be_captured_ends_the_run_in_one_line_naming_the_cause():
    model, optimizer = model_and_adam("Tf+Sup")
    before = copy.deepcopy((model, optimizer))
    step = graphs.GraphedUpdates(model, optimizer, 10.0, backend=Recording(fail=True))
    with pytest.raises(FruitError) as raised:
        step(*batch_tensors(BATCHES[0], EOS))
    message = str(raised.value)
    assert (
        "\n" not in message and "could not be captured as a CUDA graph of shape (3, 6)" in message
    )
    assert "RuntimeError: operation not permitted when stream is capturing" in message
    assert "FRUIT_STEP=eager" in message
    model.train(), before[0].train()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), before[0].parameters()))


def test_models_that_cannot_be_replayed_take_the_eager_step_and_say_why(monkeypatch):
    """The plain LSTM (cuDNN's dropout state) and, on CUDA, the counter-based dropout;
    a stack LSTM steps its own cells and is captured; the CPU's stand-in takes any."""
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    lstm = build_model("LSTM", vocab_size=EOS, d=12)
    kind, note = steps.usable("graphs", lstm, cuda)
    assert kind == "eager" and "cuDNN's LSTM keeps a dropout state" in note
    assert steps.usable("graphs", lstm, cpu) == ("graphs", None)
    assert steps.usable("eager", lstm, cuda) == ("eager", None)
    stack_lstm = build_model("LSTM+Nd", vocab_size=EOS, d=12)
    assert steps.usable("graphs", stack_lstm, cuda) == ("graphs", None)
    monkeypatch.setenv("FRUIT_COUNTER_DROPOUT", "1")
    kind, note = steps.usable("graphs", stack_lstm, cuda)
    assert kind == "eager" and "counter-based dropout" in note


def test_an_optimiser_that_is_not_fused_adam_takes_the_plain_step():
    plain, other = model_and_adam("Tf"), model_and_adam("Tf")
    for _, optimizer in (plain, other):
        for group in optimizer.param_groups:
            group["fused"] = None  # as a checkpoint from before the fused Adam restores it
    said = []
    step = steps.stepper("graphs", *other, EOS, torch.device("cpu"), 10.0, warn=said.append)
    torch.manual_seed(11)
    expected = [update(*plain, batch, EOS, "cpu", 10.0) for batch in BATCHES]
    torch.manual_seed(11)
    assert [step(batch) for batch in BATCHES] == expected
    assert len(said) == 1 and "plain steps" in said[0]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from fruit.tasks import get_task
    from fruit.tasks.splits import write_task

    root = tmp_path_factory.mktemp("data")
    task = get_task("question-formation")
    write_task(
        root, task, task.generate(seed=1, sizes={"train": 120, "dev": 20, "test": 20, "gen": 20})
    )
    return root


def tiny_config(data_dir, architecture: str, device: str) -> training.RunConfig:
    return training.RunConfig(
        task="question-formation", architecture=architecture, profile="smoke", seed=7, d=16,
        learning_rate=0.01, batch_tokens=256, train_size=120, dev_size=20, test_size=20,
        gen_size=20, checkpoint_every=20, max_epochs=3, lr_patience=0, early_stop_patience=100,
        data_dir=str(data_dir), device=device,
    )  # fmt: skip


def records(run_dir) -> tuple:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics = {k: v for k, v in metrics.items() if k not in ("train_seconds", "evaluation_seconds")}
    log = [row.split(",")[:-1] for row in (run_dir / "log.csv").read_text().splitlines()]
    best = torch.load(run_dir / "best.pt", weights_only=False)["model"]
    return metrics, log, best


def same_records(a: tuple, b: tuple) -> bool:
    return (
        a[:2] == b[:2]
        and a[2].keys() == b[2].keys()
        and all(torch.equal(a[2][k], b[2][k]) for k in a[2])
    )


STEP_CASES = [
    pytest.param("Tf", "cpu", "eager"),
    pytest.param("Tf+Nd", "cpu", "graphs"),
    pytest.param("LSTM", "cpu", "graphs"),
] + [
    pytest.param(a, "cuda", "graphs", marks=pytest.mark.gpu)
    for a in ("Tf", "Tf+Sup", "Tf+Nd", "RNN+Sup+R", "LSTM+Nd")
]


@pytest.mark.parametrize("architecture, device, kind", STEP_CASES)
def test_a_run_gives_the_same_records_whichever_way_it_steps(
    tmp_path, data_dir, monkeypatch, architecture, device, kind
):
    """On the CPU the plain step is the reference; on CUDA the eager one (today's CUDA
    runs read the loss mid-step, which the eager step equals bit for bit). The learning
    rate halves at every checkpoint that does not improve (lr_patience 0), so graphs are
    made again mid-run."""
    reference = "plain" if device == "cpu" else "eager"
    config = tiny_config(data_dir, architecture, device)
    made = {}
    for name in (reference, kind):
        monkeypatch.setenv("FRUIT_STEP", name)
        training.train_run(config, tmp_path / name)
        made[name] = records(tmp_path / name)
    assert same_records(made[reference], made[kind])
    rates = {row[2] for row in made[kind][1][1:]}  # log.csv's learning_rate column
    assert len(rates) > 1 or device == "cuda"  # the rate changed on the way
    recorded = json.loads((tmp_path / kind / "config.json").read_text())["provenance"]
    assert recorded["step"] == kind
    if reference == "plain":
        assert (
            "step" not in json.loads((tmp_path / "plain" / "config.json").read_text())["provenance"]
        )


def test_fruit_step_is_checked(monkeypatch):
    assert steps.step_kind(torch.device("cpu")) == "plain"
    monkeypatch.setenv("FRUIT_STEP", "graph")
    with pytest.raises(
        FruitError, match="FRUIT_STEP='graph': set it to one of plain, eager, graphs"
    ):
        steps.step_kind(torch.device("cpu"))
    monkeypatch.setenv("FRUIT_STEP", "eager")
    with pytest.raises(FruitError, match="fused Adam"):
        steps.step_kind(torch.device("mps"))


@pytest.mark.gpu
@pytest.mark.parametrize("architecture", ["Tf", "Tf+Nd", "LSTM+Nd"])
def test_a_replayed_step_never_waits_for_the_device(architecture):
    model, optimizer = model_and_adam(architecture, "cuda")
    step = graphs.GraphedUpdates(model, optimizer, 10.0)
    tokens, targets = batch_tensors(BATCHES[0], EOS)
    step(tokens, targets)  # captured here
    assert not step.failed
    torch.cuda.set_sync_debug_mode("error")
    try:
        step(tokens, targets)
        step(tokens, targets)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(step.loss).item()


@pytest.mark.parametrize(
    "architecture, device",
    [("Tf+Sup", "cpu")]
    + [pytest.param(a, "cuda", marks=pytest.mark.gpu) for a in ("Tf+Nd", "LSTM+Nd")],
)
def test_a_paused_run_that_steps_by_graphs_resumes_to_the_uninterrupted_records(
    tmp_path, data_dir, monkeypatch, architecture, device
):
    """Each resume is a new Run with new graphs (and a new warm-up before each capture):
    the records equal those of one uninterrupted run."""
    from fruit.training import pacing

    monkeypatch.setenv("FRUIT_STEP", "graphs")
    config = tiny_config(data_dir, architecture, device)
    training.train_run(config, tmp_path / "whole")
    now = [1_000_000.0]

    def clock():
        now[0] += 1.0
        return now[0]

    monkeypatch.setattr(pacing.time, "time", clock)
    pauses = 0
    for budget in (4, 3, 9, 2, 10_000):
        run = training.open_run(config, tmp_path / "paused")
        run.train(stop_at=now[0] + budget)
        if not run.paused:
            break
        pauses += 1
    run.finish()
    assert pauses >= 3
    assert same_records(records(tmp_path / "whole"), records(tmp_path / "paused"))


@pytest.mark.gpu
def test_a_real_capture_that_fails_names_its_cause_and_leaves_the_process_usable():
    """A forward that reads the device (``.item()``) cannot be captured: one line with the
    first error (not capture_end's), the default stream current again, and eager steps
    afterwards as in a fresh process."""

    class Reading(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.d = inner, inner.d

        def forward(self, tokens):
            logits = self.inner(tokens)
            return logits * (1.0 + 0.0 * logits.sum().item())

    torch.manual_seed(3)
    model = Reading(build_model("Tf", vocab_size=EOS, d=12)).cuda()
    optimizer = adam(model.parameters(), 1e-2)
    step = graphs.GraphedUpdates(model, optimizer, 10.0)
    with pytest.raises(FruitError) as raised:
        step(*batch_tensors(BATCHES[0], EOS))
    assert "\n" not in str(raised.value) and "FRUIT_STEP=eager" in str(raised.value)
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    plain = model_and_adam("Tf", "cuda")
    loss = update(*plain, BATCHES[0], EOS, "cuda", 10.0)
    assert loss == loss  # finite, and no error from the generator or the allocator
