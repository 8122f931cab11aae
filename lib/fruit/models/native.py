"""Build and load the C kernels of the fused stack-RNN pass (``sup_cells.c``).

The source is compiled with the system's C compiler the first time it is needed, once
per source version, precision and machine, into a cache folder (``FRUIT_CACHE_DIR``,
else ``$XDG_CACHE_HOME/fruit``, else ``~/.cache/fruit``), and loaded with ctypes.
Nothing depends on it: without a compiler, or with the environment variable
``FRUIT_NATIVE=0``, `library` returns None (after one warning when a build failed)
and the pass runs the same computation as PyTorch operations. `load` builds and loads
any such C file the same way; the dVPDA kernels (fruit.stacks.dvpda_native) use it too.

Flags: ``-O3 -march=native -ffast-math`` to compile (without ``-march=native`` where
the compiler refuses it; ``-ffast-math`` is what lets
GCC call glibc's vectorised exp, libmvec; the kernels are elementwise and short sums,
and the tests hold them to the PyTorch reference in float32 and float64), and a
separate link without it, so that loading the library leaves the process's
floating-point mode (denormals) alone.
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
from pathlib import Path

SOURCE = Path(__file__).with_name("sup_cells.c")
COMPILE = ["-O3", "-march=native", "-ffast-math", "-fPIC", "-std=c11"]
LINK = ["-shared"]
REALS = ("float", "double")


def enabled() -> bool:
    """False when the user turned the C kernels off with FRUIT_NATIVE=0."""
    return os.environ.get("FRUIT_NATIVE", "1") != "0"


def cache_dir() -> Path:
    if "FRUIT_CACHE_DIR" in os.environ:
        return Path(os.environ["FRUIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fruit"


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


def _compiler() -> list[str] | None:
    """The command of $CC (which may carry arguments, e.g. "ccache gcc"), or of cc."""
    cc = shlex.split(os.environ.get("CC", "cc"))
    found = shutil.which(cc[0]) if cc else None
    return None if found is None else [found, *cc[1:]]


@functools.cache
def library(real: str) -> ctypes.CDLL | None:
    """The kernels compiled with REAL = ``real`` ("float" or "double"), or None."""
    return load(SOURCE, real, _declare, _warn)


def load(source: Path, real: str, declare, warn) -> ctypes.CDLL | None:
    """Build (once, into the cache) and load the C file ``source`` with REAL = ``real``;
    ``declare(lib)`` sets the argument types and returns the library; ``warn(reason)``
    is called when it cannot be built. None when switched off or not built. Also used
    for the dVPDA kernels (fruit.stacks.dvpda_native)."""
    if real not in REALS:
        raise ValueError(f"native.library: real must be one of {REALS}, got {real!r}")
    if not enabled():
        return None
    cc = _compiler()
    if cc is None:
        warn(f"no C compiler ({os.environ.get('CC', 'cc')}) found")
        return None
    path = library_path(real, cc, source)
    try:
        if not path.exists():
            _build(cc, real, path, source)
        try:
            lib = ctypes.CDLL(str(path))
        except OSError:  # a damaged library in the cache: build it again, once
            _build(cc, real, path, source)
            lib = ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError) as error:
        warn(str(error))
        return None
    return declare(lib)


def library_path(real: str, cc: list[str], source: Path = SOURCE) -> Path:
    """Where the library lives in the cache: one file per source version, flags,
    precision, compiler and CPU."""
    text = source.read_bytes()
    identity = [text, " ".join(COMPILE + LINK).encode(), real.encode(), " ".join(cc).encode()]
    key = hashlib.sha256(b"\0".join([*identity, _machine().encode()])).hexdigest()[:16]
    return cache_dir() / f"{source.stem}-{real}-{key}.so"


def _build(cc: list[str], real: str, path: Path, source: Path = SOURCE) -> None:
    """Compile, then link, into temporary files beside ``path``, then rename the library
    into place (a concurrent build of the same file is harmless; no half-written library
    is left). Linking is a separate step without -ffast-math: linked with it, GCC < 13
    adds a start-up routine that turns on flush-to-zero for the whole process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".build-") as tmp:
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
        os.replace(lib, path)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise subprocess.SubprocessError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}"
        )


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Argument types of the kernels: i = ptrdiff_t (sizes, row strides), p = pointer."""
    i, p = ctypes.c_ssize_t, ctypes.c_void_p
    signatures = {
        "lstm_forward": [i, i, p, p, p, p, p, p, i, p, p, i],
        "lstm_backward": [i, i, p, i, p, i, p, p, p, p, p, p],
        "rnn_forward": [i, i, p, p, i, p, p, i],
        "rnn_backward": [i, i, p, i, p, i, p, p, i, p],
        "stack_forward": [i, i, i, i, p, p, p, p, p, p, i],
        "stack_backward": [i, i, i, i, p, p, p, p, p, i, p, p, p],
    }
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, None
    return lib


def _warn(reason: str) -> None:
    warnings.warn(
        "fruit: the C kernels of the stack-RNN pass are not available, so RNN+Sup and "
        f"LSTM+Sup run on PyTorch operations (same results, slower on the CPU): {reason}. "
        "Set FRUIT_NATIVE=0 to silence this.",
        RuntimeWarning,
        stacklevel=4,
    )
