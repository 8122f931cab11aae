"""A Slurm of shell scripts for the default suite: ``sbatch``, ``scancel`` and ``squeue`` in
a folder put first on PATH, so that fruit's jobqueue clusters meet a batch system that
refuses, fails, accepts or runs their jobs, without a Slurm (tests/test_slurm.py uses a
real one). Each call is logged in the folder: ``tries`` (one line per sbatch call),
``cancelled`` (the job IDs scancel was given)."""

from __future__ import annotations

import os
from pathlib import Path

UNREACHABLE = (
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
    "(connect failure)"
)
NO_PARTITION = (
    "sbatch: error: invalid partition specified: nosuch\n"
    "sbatch: error: Batch job submission failed: Invalid partition name specified"
)
TOO_MUCH_MEMORY = (
    "sbatch: error: Memory specification can not be satisfied\n"
    "sbatch: error: Batch job submission failed: Requested node configuration is not available"
)


def fake_slurm(
    folder: Path,
    *,
    failing: tuple[int, ...] = (),
    refusal: str | None = None,
    run_jobs: bool = False,
    reason: str = "Resources",
) -> dict[str, str]:
    """Write the three commands into ``folder``; return an environment with them first on
    PATH. sbatch fails its tries numbered in ``failing`` (1 first) as with the controller
    unreachable, refuses every job with ``refusal`` (sbatch's own lines), and otherwise
    accepts it: job ``100 + try``, which never runs, or, with ``run_jobs``, runs the job
    script here at once in a session of its own, its job ID its process ID (and process
    group), its output in ``job-N.out`` (N: the try). squeue says each job is PENDING for ``reason``."""
    folder.mkdir(parents=True, exist_ok=True)
    fails = " ".join(str(n) for n in failing)
    if refusal is not None:
        accept = f"cat >&2 <<'EOF'\n{refusal}\nEOF\nexit 1"
    elif run_jobs:  # the script is copied first: dask-jobqueue deletes it once sbatch returns
        accept = (
            'cp "$1" "$here/job-$n.sh"\n'
            'setsid /bin/bash "$here/job-$n.sh" >"$here/job-$n.out" 2>&1 </dev/null &\n'
            'echo "Submitted batch job $!"'
        )
    else:
        accept = 'echo "Submitted batch job $((100 + n))"'
    scripts = {
        "sbatch": f"""#!/bin/sh
here=$(dirname "$0")
exec 9>>"$here/tries.lock"
flock 9  # two jobs submitted at once get two numbers
echo "$*" >>"$here/tries"
n=$(wc -l <"$here/tries")
flock -u 9
case " {fails} " in *" $n "*) echo "{UNREACHABLE}" >&2; exit 1 ;; esac
{accept}
""",
        "scancel": f"""#!/bin/sh
here=$(dirname "$0")
echo "$1" >>"$here/cancelled"
{'kill -TERM -- "-$1" 2>/dev/null' if run_jobs else ":"}
exit 0
""",
        "squeue": f"""#!/bin/sh
# squeue -h -j ID,ID -o FORMAT: each job pending
for id in $(echo "$3" | tr , ' '); do echo "$id PENDING {reason}"; done
""",
    }
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def tries(folder: Path) -> int:
    """How many times sbatch was called."""
    path = folder / "tries"
    return len(path.read_text().splitlines()) if path.exists() else 0


def cancelled(folder: Path) -> list[str]:
    path = folder / "cancelled"
    return path.read_text().split() if path.exists() else []
