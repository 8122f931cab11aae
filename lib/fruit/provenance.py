"""Where a result came from: the code's git commit, the packages, the machine.

Every run's ``config.json`` records ``provenance()`` so that a table can be traced to the
code and the environment that made it. Nothing here raises: what cannot be found is None.
"""

from __future__ import annotations

import platform
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

# The packages whose versions can change a result.
PACKAGES = ("torch", "numpy", "sympy", "pandas", "papermill", "dask", "distributed")
_REPOSITORY = Path(__file__).resolve().parents[2]  # lib/fruit -> the checkout


def git_state(repository: Path = _REPOSITORY) -> dict[str, object]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the checkout the code runs
    from; dirty means a tracked file differs from the commit (untracked files do not
    count). Both None outside a git checkout or without git."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(repository), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("fruit", *PACKAGES):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


@cache
def cpu_model() -> str | None:
    """The CPU's model name (from /proc/cpuinfo on Linux, else the platform's word)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def cpu_capability() -> str | None:
    """The vector instructions PyTorch's CPU kernels use here ("AVX2", "AVX512", ...).
    Two CPUs of one model name may differ in it, and float32 kernels round differently
    with different vector widths: the same commit, seed and data trained on an AVX2 and
    an AVX-512 machine part at the first validation (the fourth decimal) and end with
    other numbers."""
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError, RuntimeError):
        return None


def gpu_name(device) -> str | None:
    """The CUDA device's name, when the run uses one."""
    import torch

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(device)


def provenance(device="cpu") -> dict[str, object]:
    """Everything above, as one JSON-ready record."""
    return {
        "git": git_state(),
        "versions": package_versions(),
        "cpu": cpu_model(),
        "cpu_capability": cpu_capability(),
        "gpu": gpu_name(device),
        "host": platform.node(),
    }


# --- a run resumed elsewhere ------------------------------------------------------------
# A run that pauses and resumes under another commit, on another kind of CPU or on another
# device may end otherwise than an uninterrupted run (other code; other rounding). Its
# warnings.log (and so metrics.json's "warnings") says so in one of these lines, which
# ``resumed_elsewhere`` reads back for the tables' captions.
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
