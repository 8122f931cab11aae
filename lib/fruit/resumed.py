"""A run resumed elsewhere: under another commit, on another kind of CPU or on another
device than it started (config.json records where it started; ``fruit.provenance``).

Such a run may end otherwise than an uninterrupted run (other code; other rounding). Its
warnings.log (and so metrics.json's "warnings") says so in one of the lines
``resume_warnings`` writes, which ``resumed_elsewhere`` reads back for the tables'
captions. Plain text only: reporting uses it without torch.
"""

from __future__ import annotations

# the warning line of each kind of change
_RESUMED = {
    "commit": "resumed by commit {now}, started by {then}: the code changed in between, so "
    "the result may differ from an uninterrupted run at either commit",
    "cpu": "resumed on CPU {now}, started on CPU {then}: another kind of CPU rounds "
    "differently, so the result may differ from an uninterrupted run on either",
    "device": "resumed on device {now}, started on device {then}: another device rounds "
    "differently, so the result may differ from an uninterrupted run on either",
}


def cpu_kind(record: dict | None) -> str | None:
    """The CPU a provenance record names, with its vector width: "Intel Xeon (AVX512)"."""
    record = record if isinstance(record, dict) else {}
    if not record.get("cpu"):
        return None
    capability = record.get("cpu_capability")
    return f"{record['cpu']} ({capability})" if capability else str(record["cpu"])


def device_kind(device: str | None, record: dict | None) -> str | None:
    """ "cpu", or a CUDA device with its card's name: "cuda (NVIDIA H200)"."""
    if not device:
        return None
    kind = str(device).split(":")[0]
    gpu = (record or {}).get("gpu") if isinstance(record, dict) else None
    return f"{kind} ({gpu})" if kind == "cuda" and gpu else kind


def resume_warnings(started: dict, now: dict) -> list[str]:
    """What a resume changes, as warning lines: ``started`` and ``now`` are config.json
    records ({"device": ..., "provenance": {...}}) of the run's first attempt and of this
    one. Nothing where either side is unrecorded (e.g. outside a git checkout)."""

    def commit(r):
        git = (r.get("provenance") or {}).get("git") or {}
        return str(git["commit"])[:7] if git.get("commit") else None

    kinds = {
        "commit": commit,
        "cpu": lambda r: cpu_kind(r.get("provenance")),
        "device": lambda r: device_kind(r.get("device"), r.get("provenance")),
    }
    lines = []
    for name, read in kinds.items():
        then, later = read(started), read(now)
        if then and later and then != later:
            lines.append(_RESUMED[name].format(now=later, then=then))
    return lines


def resumed_elsewhere(warnings) -> dict[str, list[str]]:
    """The commits, CPUs and devices a run was resumed under, from its warning lines
    (``resume_warnings``'s, with or without the timestamp warnings.log puts first)."""
    found: dict[str, list[str]] = {name: [] for name in _RESUMED}
    for line in warnings or ():
        for name, template in _RESUMED.items():
            head = template.split("{now}")[0]
            at = str(line).find(head)
            if at < 0:
                continue
            rest = str(line)[at + len(head) :]
            middle = template.split("{now}")[1].split("{then}")[0]
            value = rest.split(middle)[0]
            if value and value not in found[name]:
                found[name].append(value)
    return found
