"""Training throughput on named GPUs: what ``fruit run --dry-run`` turns into GPU-hours.

Only figures measured and recorded in this repository are in ``CARDS``, each card with
where its figures come from (script, settings, date, commit). An architecture without a
measured figure on a card is *modelled* from the measured ones, and the model is printed
beside it (``rate``): seconds per token add up as in ``fruit.experiments.planning.cost``'s
model for unregistered architectures (the plain network, plus what one stack of a kind
adds to it as measured), an RNN is taken as fast as the LSTM on the same card (both
bases run as one fused kernel on CUDA), and ``+R`` (the stack reading connected to the
output) as fast as without it. Where not even that is possible the architecture is
"not measured" and no GPU-hours are given for it.

Several runs sharing a GPU (fruit.experiments.planning.gpu_sharing) have an aggregate throughput
that only a measurement can tell; ``CardRecord.sharing`` holds it where measured
(``benchmarks/gpu.py``: aggregate over alone at K runs, the smallest over the
architectures measured), and without it the dry-run gives the two bounds: no gain (the
one-run time) and a perfect one (K times faster). ``CardRecord.sharing_mps`` is the same
with NVIDIA's Multi-Process Service running (docs/cluster.md): without it the processes'
kernels take turns on the GPU, with it they run side by side.
"""

from __future__ import annotations

import dataclasses
import os

from fruit.errors import FruitError
from fruit.names import ARCHITECTURES, split_description


@dataclasses.dataclass(frozen=True)
class CardRecord:
    card: str  # the name --gpu-card takes
    name: str  # as torch.cuda.get_device_name reports it
    tokens_per_second: dict[str, float]  # one run alone on the card, measured
    source: str  # how, when and at which commit the figures were measured
    sharing: dict[int, float] = dataclasses.field(default_factory=dict)  # K: aggregate / alone
    sharing_mps: dict[int, float] = dataclasses.field(default_factory=dict)  # the same, MPS on
    step: str = "plain"  # the training step measured (FRUIT_STEP; fruit.training.steps)


CARDS = {
    "h100": CardRecord(
        card="h100",
        name="NVIDIA H100",
        # rounded to thousands as docs/cluster.md records them
        tokens_per_second={
            "Tf": 51_000,
            "Tf+Sup": 41_000,
            "Tf+Nd": 13_000,
            "LSTM": 358_000,
            "LSTM+Sup": 46_000,
            "LSTM+Nd": 11_000,
        },
        source=(
            "benchmarks/models.py --device cuda --threads 4, one run alone, question-formation "
            "batches of <= 2048 tokens, PyTorch 2.11.0+cu130, 2026-11-26, recorded in commit "
            "9f3a099 (docs/cluster.md)"
        ),
    ),
    "h200": CardRecord(
        card="h200",
        name="NVIDIA H200",
        # benchmarks/gpu.py's K = 1 fill, all fifteen measured, rounded to 3 significant figures
        tokens_per_second={
            "Tf": 101_000,
            "Tf+Sup": 52_800,
            "Tf+Sup+Sup": 37_000,
            "Tf+Nd": 12_900,
            "Tf+Nd+Nd": 5_580,
            "RNN": 373_000,
            "RNN+Sup": 39_300,
            "RNN+Sup+R": 39_800,
            "RNN+Nd": 10_000,
            "RNN+Nd+R": 9_700,
            "LSTM": 296_000,
            "LSTM+Sup": 28_800,
            "LSTM+Sup+R": 27_500,
            "LSTM+Nd": 8_830,
            "LSTM+Nd+R": 8_460,
        },
        source=(
            "benchmarks/gpu.py (scripts/gpu-check.sh), one run alone, one torch thread, "
            "question-formation batches of 512-2048 tokens, PyTorch 2.11.0+cu130, 2026-11-28, "
            "commit ad28620 (docs/cluster.md)"
        ),
        # aggregate / alone, the smallest of Tf, Tf+Sup, Tf+Nd, LSTM and LSTM+Nd (LSTM's)
        sharing={8: 4.19, 16: 4.35},
        # the smallest of Tf, Tf+Nd and LSTM (Tf's), commit e431258
        sharing_mps={8: 6.68, 16: 11.38, 24: 12.32, 32: 12.16},
    ),
}


def check_card(card: str) -> CardRecord:
    """The record of ``card``; a one-line FruitError naming the recorded ones."""
    if card in CARDS:
        return CARDS[card]
    raise FruitError(
        f"--gpu-card {card!r}: no throughput is recorded for it; recorded cards: "
        f"{', '.join(CARDS)} (benchmarks/gpu.py measures a card, docs/cluster.md)"
    )


def card_of_this_machine() -> tuple[str | None, str | None]:
    """(the recorded card this machine's first CUDA GPU is, its name); (None, None)
    without CUDA, (None, name) for a GPU without a record."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None, None
        name = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - no torch/CUDA: no card
        return None, None
    for card in CARDS:
        if card.lower() in name.lower():
            return card, name
    return None, name


def rate(record: CardRecord, arch: str) -> tuple[float | None, str]:
    """(tokens/s of one run of ``arch`` alone on the card, its basis): measured, or
    modelled from the measured ones (module docstring), or (None, "not measured")."""
    measured = record.tokens_per_second
    if arch in measured:
        return measured[arch], "measured"
    split = split_description(ARCHITECTURES.get(arch, ""))
    if split is None:
        return None, "not measured"
    base, parts, _reading_to_output = split
    stand_in = base if base in measured else {"RNN": "LSTM"}.get(base)
    if stand_in not in measured:
        return None, "not measured"
    stacks = [p for p in parts if p != "-"]
    kinds = [f"{stand_in}+{k}" for k in stacks]
    if any(k not in measured for k in kinds):
        return None, "not measured"
    seconds = 1 / measured[stand_in] + sum(1 / measured[k] - 1 / measured[stand_in] for k in kinds)
    if len(stacks) > 1:  # each kind once, with how many layers of it: Tf + 2 x (Tf+Nd - Tf)
        counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
        terms = [f"{n} x ({k} - {stand_in})" if n > 1 else f"({k} - {stand_in})"
                 for k, n in counts.items()]  # fmt: skip
        words = f"{stand_in} + {' + '.join(terms)} in s/token"
    else:
        words = f"as {kinds[0] if kinds else stand_in}"
    return 1 / seconds, f"model: {words}"


def gpu_hours(costs, record: CardRecord) -> dict[str, tuple[int, float | None, float | None, str]]:
    """Per architecture of ``costs`` (``fruit.experiments.planning.cost.PairCost``, whose ``tokens``
    are training tokens with evaluation weighted as in the core-hours): (runs, GPU-hours
    of them all one run per GPU, tokens/s, basis); hours and rate None where not measured."""
    result = {}
    for arch in dict.fromkeys(c.architecture for c in costs):
        pairs = [c for c in costs if c.architecture == arch]
        tokens_per_second, basis = rate(record, arch)
        hours = None
        if tokens_per_second is not None:
            hours = sum(c.tokens for c in pairs) / tokens_per_second / 3600
        result[arch] = (sum(c.runs for c in pairs), hours, tokens_per_second, basis)
    return result


def describe_gpu(costs, record: CardRecord, runs_per_gpu: int | None = None) -> list[str]:
    """Lines of GPU-hours on ``record``'s card for the pairs ``costs`` (``gpu_hours``):
    per architecture, then the total and the time on 1 GPU and on a node of 8, one run
    per GPU; then what ``runs_per_gpu`` runs sharing a GPU give (measured, else bounds)."""
    lines = [f"GPU estimate on the {record.name} ({record.card}; {record.source}):"]
    measured_hours = modelled_hours = 0.0
    missing = []
    for arch, (runs, hours, tokens_per_second, basis) in gpu_hours(costs, record).items():
        if hours is None:
            missing.append(arch)
            lines.append(f"  {arch}: {runs} runs, not measured on {record.card}: no GPU-hours")
            continue
        if basis == "measured":
            measured_hours += hours
        else:
            modelled_hours += hours
        lines.append(
            f"  {arch}: {runs} runs, {hours:.1f} GPU-hours at {tokens_per_second:,.0f} tokens/s "
            f"({basis})"
        )
    if modelled_hours:
        lines.append(
            "  (model: an RNN as fast as the LSTM, +R as fast as without it, each stack layer "
            "adding what one adds as measured; fruit.experiments.planning.gpu_rates)"
        )
    total = measured_hours + modelled_hours
    left_out = f"; without {', '.join(missing)} (not measured)" if missing else ""
    lines.append(
        f"total: {total:.1f} GPU-hours one run per GPU ({measured_hours:.1f} from measured "
        f"rates, {modelled_hours:.1f} from modelled ones{left_out}); about {total:.1f} h on "
        f"1 GPU, {total / 8:.1f} h on a node of 8 GPUs"
    )
    lines += sharing_lines(record, total, runs_per_gpu)
    step = os.environ.get("FRUIT_STEP") or "plain"  # what runs started from here will take
    if step != record.step:
        lines.append(
            f"  (measured with the {record.step} training step; these runs would take the "
            f"{step} step (FRUIT_STEP), not measured on {record.card})"
        )
    return lines


def sharing_lines(record: CardRecord, total: float, k: int | None) -> list[str]:
    """What ``k`` runs per GPU make of ``total`` one-run GPU-hours on the card."""

    def factors(sharing: dict[int, float]) -> str:
        return ", ".join(f"{x:.2f}x at K = {n}" for n, x in sorted(sharing.items()))

    def time(factor: float) -> str:
        hours = total / factor
        return f"about {hours:.1f} h on 1 GPU, {hours / 8:.1f} h on a node of 8 GPUs"

    if k is None or k <= 1:
        if not record.sharing:
            return [
                f"runs sharing a GPU (--runs-per-gpu K): their aggregate throughput on "
                f"{record.card} is not measured yet (benchmarks/gpu.py); the times above are "
                f"K = 1"
            ]
        lines = [
            f"runs sharing a GPU, measured on {record.card} (x one run's throughput, the "
            f"smallest over the architectures measured): aggregate {factors(record.sharing)}"
        ]
        if record.sharing_mps:
            lines.append(f"  with MPS (docs/cluster.md): {factors(record.sharing_mps)}")
        return lines
    if k in record.sharing:
        lines = [
            f"with {k} runs per GPU (measured: {record.sharing[k]:.2f}x the aggregate of one "
            f"run): {time(record.sharing[k])}"
        ]
        if k in record.sharing_mps:
            lines.append(
                f"  with MPS running (docs/cluster.md; measured {record.sharing_mps[k]:.2f}x): "
                f"{time(record.sharing_mps[k])}"
            )
        return lines
    return [
        f"with {k} runs per GPU: not measured on {record.card} (benchmarks/gpu.py); between "
        f"{total / k:.1f} h (each run as fast as alone, a bound) and {total:.1f} h (no gain) "
        f"on 1 GPU, {total / k / 8:.1f} to {total / 8:.1f} h on a node of 8 GPUs"
    ]


def on_gpus(record: CardRecord, total: float, gpus: int, k: int, where: str | None) -> str:
    """The time ``total`` one-run GPU-hours take on ``gpus`` GPUs of the card with ``k``
    runs sharing each (``where``: those GPUs in words): measured where the card's sharing
    at K = ``k`` is, else the bounds (each run as fast as alone; no gain)."""
    head = f"  on the {gpus} GPU(s) of {where or 'the cluster'}"
    if k <= 1:
        return f"{head}: about {total / gpus:.1f} h"
    if k in record.sharing:
        x = record.sharing[k]
        line = f"{head}: about {total / x / gpus:.1f} h ({k} runs per GPU, measured {x:.2f}x"
        if k in record.sharing_mps:
            mps = record.sharing_mps[k]
            line += f"; with MPS running {total / mps / gpus:.1f} h, measured {mps:.2f}x"
        return line + ")"
    return (
        f"{head}: between {total / k / gpus:.1f} h (each of its {k} runs per GPU as fast as "
        f"alone, a bound) and {total / gpus:.1f} h (no gain); sharing at K = {k} is not "
        f"measured on {record.card}"
    )


def dry_run_cards(card: str | None) -> list[str]:
    """The cards ``fruit run --dry-run`` gives GPU-hours for: ``card`` (--gpu-card),
    else this machine's GPU when it has a record, else every recorded card."""
    if card:
        return [check_card(card).card]
    here, name = card_of_this_machine()
    if here:
        return [here]
    if name:
        print(f"this machine's GPU {name!r} has no recorded throughput; the recorded cards:")
    return list(CARDS)
