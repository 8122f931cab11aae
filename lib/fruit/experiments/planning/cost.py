"""What a profile will cost: runs, and CPU core-hours, before anything is trained.

``fruit run --dry-run`` prints ``describe(profile)``, so that a user can plan a campaign
in steps (``--time-limit``) or a cluster allocation. The estimate is

    core-seconds of a run = epochs x (predicted tokens of one epoch) / (tokens per second)

with the training throughput of each architecture measured at one thread on the
reference CPU (``TOKENS_PER_SECOND``, from ``benchmarks/models.py --threads 1``), the
tokens of an epoch from a sample of the task's generated data (source + target + EOS per
string, as the benchmark counts them), search trials at their maximum epochs (trials
that only early stopping ends, whose maximum is the final runs', at a final run's
length), and final runs at ``FINAL_EPOCHS`` (early stopping decides: the paper's
protocol gives no fixed length) plus one evaluation of dev/test/gen (forward passes
only, counted as a third of a training token each). It is a planning number, not a
promise: throughput changes with string length (the nondeterministic stack's cost grows
faster than linearly with it) and with the batch-token budget.

Given the results folder, the estimate also reads the profile's run records, so that a
campaign in progress can be planned from what it has learned: final runs are counted at
the mean length of the pair's recorded final runs (else of its recorded search trials
where early stopping ends those too, else of the architecture's recorded final runs on
other tasks, else ``FINAL_EPOCHS``; diverged runs left out), and what is
*left* counts only runs without ``metrics.json``, less the epochs an unfinished run has
already trained (a final run at least one more epoch; ``fruit.experiments.planning.run_state``).
The training time the recorded runs took (their
``train_seconds``) is printed next to what the same formula predicts for them, which
says how far this machine's load is from the reference measurements.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from fruit.errors import FruitError
from fruit.experiments.planning.reuse import reusable_runs
from fruit.experiments.planning.run_state import RunState, epochs_so_far, run_states
from fruit.names import ARCHITECTURES, TRANSFORMER_BASES, split_description
from fruit.profiles import Profile

# Training tokens per second at one thread (benchmarks/models.py --threads 1, all fifteen
# in one run, question-formation batches of <= 2048 tokens, on the 2-core AMD EPYC (AVX2)
# reference machine at load average 1.0, 2026-11-26, with the dVPDA's C kernels).
TOKENS_PER_SECOND = {
    "Tf": 15_403,
    "Tf+Sup": 15_203,
    "Tf+Sup+Sup": 13_667,
    "Tf+Nd": 11_034,
    "Tf+Nd+Nd": 8_992,
    "RNN": 29_805,
    "RNN+Sup": 22_510,
    "RNN+Sup+R": 22_313,
    "RNN+Nd": 8_937,
    "RNN+Nd+R": 7_946,
    "LSTM": 29_668,
    "LSTM+Sup": 23_244,
    "LSTM+Sup+R": 23_798,
    "LSTM+Nd": 6_998,
    "LSTM+Nd+R": 7_488,
}
# Epochs assumed for a final run that early stopping ends, until a profile's records say
# better (the claims campaign's transformers stopped after 7-17 epochs on question
# formation, its LSTMs after 34 or more); a profile's smaller max_epochs wins.
FINAL_EPOCHS = 10
EVALUATION_TOKEN_COST = 1 / 3  # a forward-only token, in training tokens


@dataclasses.dataclass(frozen=True)
class PairCost:
    task: str
    architecture: str
    runs: int
    core_hours: float  # every run of the pair
    final_epochs: float  # the length assumed for a final run
    final_epochs_from: str  # where that length comes from, in words
    recorded: int = 0  # runs with metrics.json
    left_core_hours: float | None = None  # the runs still to train (None: records not read)
    recorded_train_hours: float = 0.0  # what the recorded runs took (their train_seconds)
    recorded_estimate_hours: float = 0.0  # what the formula predicts for those same runs
    # runs another profile recorded (fruit.experiments.planning.reuse)
    taken_over: tuple[str, ...] = ()
    tokens: float = 0.0  # training tokens of every run of the pair (evaluation weighted as above)


@functools.cache
def tokens_per_example(task: str, sample: int = 2000) -> float:
    """Mean predicted tokens per training string (|source| + |target| + EOS), from a
    sample of the task's generated training data."""
    from fruit.tasks import get_task

    examples = get_task(task).generate(
        seed=0, sizes={"train": sample, "dev": 0, "test": 0, "gen": 0}
    )
    train = examples["train"]
    return sum(len(s) + len(t) + 1 for s, t in train) / len(train)


def tokens_per_second(arch: str) -> float:
    """The reference throughput of ``arch``: measured (``TOKENS_PER_SECOND``) for the
    paper's fifteen; for another registered architecture, modelled from its description:
    the plain network's seconds per token (a transformer's scaled by its layers, the
    measured ones have 5), plus, per stack, what one stack of that kind adds to that
    network as measured (one stack layer for a transformer; a kind not measured counts
    as the slowest measured)."""
    if arch in TOKENS_PER_SECOND:
        return TOKENS_PER_SECOND[arch]
    split = split_description(ARCHITECTURES.get(arch, ""))
    if split is None:
        raise FruitError(f"architecture {arch!r} is not registered in fruit.names.ARCHITECTURES")
    base, parts, reading_to_output = split
    plain = 1 / TOKENS_PER_SECOND[base]
    if base in TRANSFORMER_BASES:  # the measured transformers have 5 layers
        plain *= len(parts) / 5
    extra = {
        kind: 1 / TOKENS_PER_SECOND[f"{base}+{kind}" + ("+R" if reading_to_output else "")]
        - 1 / TOKENS_PER_SECOND[base]
        for kind in ("Sup", "Nd")
    }
    slowest = max(extra.values())
    seconds = plain + sum(extra.get(p, slowest) for p in parts if p != "-")
    return 1 / seconds


def epoch_seconds(profile: Profile, task: str, arch: str) -> float:
    """Core-seconds of one training epoch of (task, arch) at the profile's training size,
    by the reference throughput (``tokens_per_second``)."""
    return profile.sizes["train"] * tokens_per_example(task) / tokens_per_second(arch)


def final_length(
    profile: Profile, task: str, arch: str, states: list[RunState]
) -> tuple[float, str]:
    """(epochs, where from) assumed for a final run of (task, arch): the mean of the
    pair's completed final runs, else of its completed search trials where early stopping
    ends those too (``search_until_early_stopping``), else of the architecture's final
    runs (and such trials) on other tasks, else ``FINAL_EPOCHS``; never more than the
    profile's maximum.
    Diverged runs say nothing about how long early stopping takes and are left out."""
    stopped = ("final", "search") if search_until_early_stopping(profile, arch) else ("final",)
    complete = [s for s in states if s.complete and s.architecture == arch and s.phase in stopped]
    own = [s.epochs for s in complete if s.task == task and s.phase == "final"]
    trials = [s.epochs for s in complete if s.task == task and s.phase == "search"]
    other = [s.epochs for s in complete if s.task != task]
    if own:
        epochs, source = sum(own) / len(own), f"mean of its {len(own)} recorded"
    elif trials:
        epochs = sum(trials) / len(trials)
        source = f"mean of its {len(trials)} recorded search trials, which early stopping ends"
    elif other:
        epochs, source = (
            sum(other) / len(other),
            f"mean of {arch}'s {len(other)} recorded runs on other tasks",
        )
    else:
        epochs, source = FINAL_EPOCHS, "assumed"
    cap = profile.max_epochs("final", arch)
    return (cap, "the maximum") if epochs > cap else (epochs, source)


def search_until_early_stopping(profile: Profile, arch: str) -> bool:
    """Whether the profile's search trials of ``arch`` end only by early stopping, as
    final runs do (their maximum is no shorter than the final runs'): then they are
    expected to be as long as a final run."""
    return profile.max_epochs("search", arch) >= profile.max_epochs("final", arch)


def pair_costs(
    profile: Profile,
    pairs: list[tuple[str, str]] | None = None,
    results_dir: str | Path | None = None,
) -> list[PairCost]:
    """Runs and core-hours of each (task, architecture) pair of the profile (or of
    ``pairs``, a subset); with ``results_dir``, also what its records say is left.
    Final runs' lengths come from the records of all the profile's pairs, whichever
    ``pairs`` are costed."""
    states = run_states(profile, results_dir) if results_dir is not None else []
    reusable = []
    if results_dir is not None and profile.reuse:
        data_dir = Path("data") / profile.name  # only named: the settings compared omit it
        reusable = reusable_runs(profile, results_dir, data_dir, pairs)
    costs = []
    for task, arch in pairs or profile.pairs:
        epoch = epoch_seconds(profile, task, arch)  # core-seconds
        evaluation = (
            sum(profile.sizes[s] for s in ("dev", "test", "gen"))
            * tokens_per_example(task)
            / tokens_per_second(arch)
            * EVALUATION_TOKEN_COST
        )
        final_epochs, source = final_length(profile, task, arch, states)
        until_stopping = search_until_early_stopping(profile, arch)
        search_epochs = final_epochs if until_stopping else profile.max_epochs("search", arch)
        length = {"search": search_epochs, "final": final_epochs}
        whole = profile.search_trials * (
            search_epochs * epoch + evaluation
        ) + profile.final_runs * (final_epochs * epoch + evaluation)
        mine = [r for r in states if (r.task, r.architecture) == (task, arch)]
        left = None
        if results_dir is not None:
            # a search trial's length is exact (unless early stopping ends it); a run
            # that has passed the expected length is still training: one more epoch at least
            floor = {"search": 1.0 if until_stopping else 0.0, "final": 1.0}
            left = sum(
                max(length[r.phase] - r.epochs, floor[r.phase]) * epoch + evaluation
                for r in mine
                if not r.finished
            )
        # runs to take over: none of a finished one is left, a paused one goes on
        ours = [r for r in reusable if r.spec.pair == (task, arch)]
        for r in ours:
            if left is None:
                break
            if r.finished:
                left -= max(length[r.spec.phase], floor[r.spec.phase]) * epoch + evaluation
            else:
                trained = epochs_so_far(r.source, profile.sizes["train"])
                left -= min(trained, max(length[r.spec.phase] - floor[r.spec.phase], 0)) * epoch
        done = [r for r in mine if r.finished]
        costs.append(
            PairCost(
                task,
                arch,
                profile.search_trials + profile.final_runs,
                whole / 3600,
                final_epochs,
                source,
                recorded=len(done),
                left_core_hours=None if left is None else left / 3600,
                recorded_train_hours=sum(r.train_seconds for r in done) / 3600,
                recorded_estimate_hours=sum(r.epochs * epoch for r in done) / 3600,
                taken_over=tuple(
                    f"{r.source_name} ({'finished' if r.finished else 'paused'})" for r in ours
                ),
                tokens=whole * tokens_per_second(arch),
            )
        )
    return costs


def describe(
    profile: Profile,
    workers: int = 2,
    pairs: list[tuple[str, str]] | None = None,
    results_dir: str | Path | None = None,
    gpu_cards: list[str] = (),
    runs_per_gpu: int | None = None,
    where: str | None = None,
    gpus: int = 0,
) -> str:
    """The estimate as text: one line per pair, then the total and the wall-clock time
    with ``workers`` runs at once (``where``: those runs in words, e.g. the jobs of
    ``fruit run --cluster``; default "one-thread workers"); with ``results_dir``, what is
    left of it; for each of ``gpu_cards`` (fruit.experiments.planning.gpu_rates), the GPU-hours on
    that card, with ``runs_per_gpu`` runs sharing a GPU, and on ``gpus`` GPUs. With
    ``gpus`` (those of the jobs of ``fruit run --cluster ... --gpus``) the ``workers`` runs
    at once share them as that cluster lays them out, ``workers / gpus`` to a GPU, unless
    ``runs_per_gpu`` is given."""
    from fruit.experiments.planning.gpu_rates import check_card, describe_gpu, gpu_hours, on_gpus

    on = f"{workers} one-thread workers" if where is None else f"{workers} runs at once ({where})"

    costs = pair_costs(profile, pairs, results_dir)
    lines = [
        "compute estimate (1 thread per run, reference 2-core CPU; search trials at their "
        f"maximum epochs, final runs at {FINAL_EPOCHS} epochs unless recorded runs say "
        "otherwise, and so are search trials that early stopping ends):"
    ]
    for c in costs:
        line = f"  {c.task}/{c.architecture}: {c.runs} runs, {c.core_hours:.1f} core-hours"
        if c.final_epochs_from != "assumed":
            line += f" (final runs at {c.final_epochs:.1f} epochs, {c.final_epochs_from})"
        if c.left_core_hours is not None:
            line += f"; {c.recorded} recorded, {c.left_core_hours:.1f} core-hours left"
        if c.taken_over:
            line += f"; the same runs, to take over: {', '.join(c.taken_over)}"
        if c.architecture not in TOKENS_PER_SECOND:  # as the GPU lines say it
            line += (
                f"; throughput modelled, not measured ({tokens_per_second(c.architecture):,.0f} "
                "tokens/s from its description: fruit.experiments.planning.cost.tokens_per_second)"
            )
        lines.append(line)
    total = sum(c.core_hours for c in costs)
    runs = sum(c.runs for c in costs)
    lines.append(
        f"total: {runs} runs, {total:.1f} core-hours; about {total / workers:.1f} h of wall-clock "
        f"time on {on}"
    )
    if results_dir is not None:
        recorded = sum(c.recorded for c in costs)
        taken = sum(t.endswith("(finished)") for c in costs for t in c.taken_over)
        left = sum(c.left_core_hours for c in costs)
        lines.append(
            f"left: {runs - recorded - taken} runs, {left:.1f} core-hours; about {left / workers:.1f} h "
            f"on {on}"
        )
        spent = sum(c.recorded_train_hours for c in costs)
        predicted = sum(c.recorded_estimate_hours for c in costs)
        if recorded and predicted > 0:
            ratio = spent / predicted
            lines.append(
                f"the {recorded} recorded runs trained for {spent:.1f} core-hours, against "
                f"{predicted:.1f} predicted for their epochs ({ratio:.1f}x; the throughputs "
                "were measured on a quiet machine: scale the estimate by this ratio where runs "
                "share the machine as they did)"
            )
    if gpus and not runs_per_gpu:
        runs_per_gpu = max(1, workers // gpus)
    for card in gpu_cards:
        record = check_card(card)
        lines += describe_gpu(costs, record, runs_per_gpu)
        if gpus:
            hours = sum(h or 0.0 for _, h, _, _ in gpu_hours(costs, record).values())
            lines.append(on_gpus(record, hours, gpus, runs_per_gpu, where))
    return "\n".join(lines)
