"""What a profile will cost: runs, and CPU core-hours, before anything is trained.

``fruit run --dry-run`` prints ``estimate(profile)``, so that a user can plan a campaign
in steps (``--time-limit``) or a cluster allocation. The estimate is

    core-seconds of a run = epochs x (predicted tokens of one epoch) / (tokens per second)

with the training throughput of each architecture measured at one thread on the
reference CPU (``TOKENS_PER_SECOND``, from ``benchmarks/models.py --threads 1``), the
tokens of an epoch from a sample of the task's generated data (source + target + EOS per
string, as the benchmark counts them), search trials at their maximum epochs, and final
runs at ``FINAL_EPOCHS`` (early stopping decides: the paper's protocol gives no fixed
length) plus one evaluation of dev/test/gen (forward passes only, counted as a third of a
training token each). It is a planning number, not a promise: throughput changes with
string length (the nondeterministic stack's cost grows faster than linearly with it) and
with the batch-token budget.
"""

from __future__ import annotations

import dataclasses
import functools

from fruit.experiments.plan import groups
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
# Epochs assumed for a final run that early stopping ends (the paper-protocol runs we
# have seen stopped after 5-12 epochs); a profile's smaller max_epochs wins.
FINAL_EPOCHS = 10
EVALUATION_TOKEN_COST = 1 / 3  # a forward-only token, in training tokens


@dataclasses.dataclass(frozen=True)
class PairCost:
    task: str
    architecture: str
    runs: int
    core_hours: float


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


def pair_costs(profile: Profile, pairs=None) -> list[PairCost]:
    """Runs and core-hours of each (task, architecture) pair of the profile (or of
    ``pairs``, a subset)."""
    costs = []
    for task, arch in pairs or groups(profile):
        per_token = 1 / TOKENS_PER_SECOND[arch]
        epoch = profile.sizes["train"] * tokens_per_example(task) * per_token
        evaluation = (
            sum(profile.sizes[s] for s in ("dev", "test", "gen"))
            * tokens_per_example(task)
            * per_token
            * EVALUATION_TOKEN_COST
        )
        search = profile.search_trials * (profile.max_epochs("search", arch) * epoch + evaluation)
        final_epochs = min(FINAL_EPOCHS, profile.max_epochs("final", arch))
        final = profile.final_runs * (final_epochs * epoch + evaluation)
        costs.append(
            PairCost(
                task, arch, profile.search_trials + profile.final_runs, (search + final) / 3600
            )
        )
    return costs


def describe(profile: Profile, workers: int = 2, pairs=None) -> str:
    """The estimate as text: one line per pair, then the total and the wall-clock time
    on ``workers`` one-thread workers."""
    costs = pair_costs(profile, pairs)
    lines = [
        f"compute estimate (1 thread per run, reference 2-core CPU; final runs at "
        f"<= {FINAL_EPOCHS} epochs, search trials at their maximum):"
    ]
    for c in costs:
        lines.append(f"  {c.task}/{c.architecture}: {c.runs} runs, {c.core_hours:.1f} core-hours")
    total = sum(c.core_hours for c in costs)
    runs = sum(c.runs for c in costs)
    lines.append(
        f"total: {runs} runs, {total:.1f} core-hours; about {total / workers:.1f} h of wall-clock "
        f"time on {workers} one-thread workers"
    )
    return "\n".join(lines)
