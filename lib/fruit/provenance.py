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
