"""Build and load the package's C kernels (``fruit/stacks/fast/dvpda.c``,
``fruit/stacks/fast/superposition.c``, ``fruit/models/passes/sup_cells.c``,
``fruit/kernels/dropout.c``): the one build helper.

A source is compiled with the system's C compiler the first time it is needed, once
per source version, precision and machine, into a cache folder (``FRUIT_CACHE_DIR``,
else ``$XDG_CACHE_HOME/fruit``, else ``~/.cache/fruit``), and loaded with ctypes.
Nothing depends on it: without a compiler, or with the environment variable
``FRUIT_NATIVE=0``, `library` returns None (after one warning when a build failed)
and the caller runs the same computation as PyTorch operations.

Flags: ``-O3 -march=native -ffast-math`` to compile (without ``-march=native`` where
the compiler refuses it; ``-ffast-math`` is what lets GCC call glibc's vectorised exp,
libmvec; the tests hold every kernel to its PyTorch counterpart in float32 and
float64), and a separate link without it, so that loading the library leaves the
process's floating-point mode (denormals) alone.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from fruit.errors import FruitError

COMPILE = ["-O3", "-march=native", "-ffast-math", "-fPIC", "-std=c11"]
LINK = ["-shared"]
REALS = {torch.float32: "float", torch.float64: "double"}  # the precisions compiled


@dataclass(frozen=True)
class CSource:
    """A C file of the package: its name, its functions' ctypes signatures as
    (name, argument types, result type), what it is for (named in the warning when it
    cannot be built), and the folder it lies in (the defining module's,
    ``Path(__file__).parent``: the C file lives next to the module that calls it)."""

    name: str
    signatures: tuple[tuple[str, tuple, object], ...]
    purpose: str
    folder: Path

    @property
    def path(self) -> Path:
        return self.folder / self.name

    def declare(self, lib: ctypes.CDLL) -> ctypes.CDLL:
        for name, argtypes, restype in self.signatures:
            function = getattr(lib, name)
            function.argtypes, function.restype = list(argtypes), restype
        return lib

    def warn(self, reason: str) -> None:
        warnings.warn(
            f"fruit: the C kernels of {self.purpose} are not available, so it runs on "
            f"PyTorch operations (same results, slower on the CPU): {reason}. "
            "Set FRUIT_NATIVE=0 to silence this.",
            RuntimeWarning,
            stacklevel=5,
        )


def enabled() -> bool:
    """False when the user turned the C kernels off with FRUIT_NATIVE=0."""
    return switch("FRUIT_NATIVE", "1") == "1"


def switch(variable: str, default: str) -> str:
    """The value of an on/off environment variable: "0", "1" or ``default`` when unset; any
    other value is an error (FRUIT_NATIVE=false would otherwise leave the kernels on)."""
    value = os.environ.get(variable, default)
    if value not in ("0", "1", default):
        raise FruitError(f"{variable}={value!r}: set it to 0 (off) or 1 (on), or unset it")
    return value


def library_for(source: CSource, x: torch.Tensor) -> ctypes.CDLL | None:
    """The kernels of ``source`` for CPU tensors of x's dtype (float32 or float64) when
    they are switched on and built; None otherwise (CUDA, other dtypes, FRUIT_NATIVE=0,
    no compiler)."""
    if x.device.type != "cpu" or x.dtype not in REALS or not enabled():
        return None
    return library(source, REALS[x.dtype])


@functools.cache
def library(source: CSource, real: str) -> ctypes.CDLL | None:
    """``source`` compiled with REAL = ``real`` ("float" or "double") and declared, or
    None when switched off or not built (remembered; `library.cache_clear()` forgets)."""
    return load(source.path, real, source.declare, source.warn)


def load(path: Path, real: str, declare, warn) -> ctypes.CDLL | None:
    """Build (once, into the cache) and load the C file ``path`` with REAL = ``real``;
    ``declare(lib)`` sets the argument types and returns the library; ``warn(reason)``
    is called when it cannot be built. None when switched off or not built."""
    if real not in REALS.values():
        raise ValueError(f"build.load: real must be one of {tuple(REALS.values())}, got {real!r}")
    if not enabled():
        return None
    cc = compiler()
    if cc is None:
        warn(f"no C compiler ({os.environ.get('CC', 'cc')}) found")
        return None
    target = library_path(path, real, cc)
    try:
        if not target.exists():
            _build(cc, real, target, path)
        try:
            lib = ctypes.CDLL(str(target))
        except OSError:  # a damaged library in the cache: build it again, once
            _build(cc, real, target, path)
            lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as error:
        reason = str(error)
        cache = cache_dir()
        if cache.exists() and not cache.is_dir():  # the cause to name, not the symptom
            reason = f"the kernels' cache folder {cache} is a file (FRUIT_CACHE_DIR?)"
        warn(reason)
        return None
    return declare(lib)


def cache_dir() -> Path:
    if os.environ.get("FRUIT_CACHE_DIR"):  # set and not empty ("" would mean: right here)
        return Path(os.environ["FRUIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fruit"


def compiler() -> list[str] | None:
    """The command of $CC (which may carry arguments, e.g. "ccache gcc"), or of cc."""
    cc = shlex.split(os.environ.get("CC", "cc"))
    found = shutil.which(cc[0]) if cc else None
    return None if found is None else [found, *cc[1:]]


def library_path(source: Path, real: str, cc: list[str]) -> Path:
    """Where the library lives in the cache: one file per source version, flags,
    precision, compiler and CPU."""
    identity = [source.read_bytes(), " ".join(COMPILE + LINK).encode(), real.encode()]
    identity += [" ".join(cc).encode(), _machine().encode()]
    key = hashlib.sha256(b"\0".join(identity)).hexdigest()[:16]
    return cache_dir() / f"{source.stem}-{real}-{key}.so"


def _machine() -> str:
    """What -march=native compiles for: the architecture and the CPU's model and flags."""
    info = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags", "Features"))]
        info += "".join(sorted(set(lines)))
    except OSError:
        info += platform.processor()
    return info


def _build(cc: list[str], real: str, target: Path, source: Path) -> None:
    """Compile, then link, into temporary files beside ``target``, then rename the library
    into place (a concurrent build of the same file is harmless; no half-written library
    is left). Linking is a separate step without -ffast-math: linked with it, GCC < 13
    adds a start-up routine that turns on flush-to-zero for the whole process."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        obj, lib = Path(tmp) / f"{source.stem}.o", Path(tmp) / f"{source.stem}.so"
        compile_ = [*cc, f"-DREAL={real}", "-c", str(source), "-o", str(obj)]
        portable = [flag for flag in COMPILE if flag != "-march=native"]
        try:
            _run([*compile_, *COMPILE])
        except subprocess.SubprocessError:  # a compiler without -march=native
            _run([*compile_, *portable])
        _run([*cc, *LINK, str(obj), "-o", str(lib), "-lm"])
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(lib, 0o755 & ~umask)  # loadable by whoever shares the cache folder
        os.replace(lib, target)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise subprocess.SubprocessError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}"
        )
