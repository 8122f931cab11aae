"""The ``fruit`` command line: one entry point, one subcommand per job.

Each subcommand lives in ``fruit.commands.<name>`` and provides two functions:
``add_arguments(parser)`` and ``main(args) -> int``. Modules are imported only
when their subcommand runs, so ``fruit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

import fruit
from fruit.errors import STORAGE_ERRNOS, FruitError

# name -> one-line help. The module is fruit.commands.<name with - as _>.
COMMANDS = {
    "data": "generate the seven tasks' splits, or take the published files",
    "sizes": "print d and the parameter count of every architecture",
    "train": "train and evaluate one run into a run folder",
    "run": "run an experiment profile (search, final runs, tables, figures) on Dask",
    "report": "aggregate run folders into the paper's tables and figures",
}


def _load(name: str):
    return importlib.import_module(f"fruit.commands.{name.replace('-', '_')}")


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad option in one line (with where to look), not after
    its usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="fruit",
        description="Reproduce 'Bearing Syntactic Fruit with Stack-Augmented Neural Networks'.",
    )
    parser.add_argument("--version", action="version", version=f"fruit {fruit.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    # Only import the module of the subcommand actually asked for (plus none for --help).
    wanted = next((a for a in (argv or []) if not a.startswith("-")), None)
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:
            _load(name).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = _glue_dashed_values(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    for i, arg in enumerate(argv):  # "" (an unset shell variable) would mean "here" or "off"
        if arg == "" or (arg.startswith("--") and arg.endswith("=")):
            option = arg[:-1] if arg else (argv[i - 1] if i else "an argument")
            prog = f"{parser.prog} {args.command}"
            parser.exit(2, f"{prog}: error: {option} is empty (see {prog} --help)\n")
    try:
        return int(_load(args.command).main(args) or 0)
    except FruitError as e:
        print(f"fruit: error: {e}", file=sys.stderr)
        return getattr(e, "exit_code", 2)
    except BrokenPipeError:  # e.g. `fruit sizes | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # as the Python docs advise
        return 0
    except OSError as e:
        if not (e.filename or e.errno in STORAGE_ERRNOS):
            raise  # not about a path: a bug worth its traceback
        # a path that cannot be read or written (read-only, no permission, disk full,
        # not a folder, ...): one line naming it, never the library's traceback
        print(f"fruit: error: {os_error_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fruit: interrupted", file=sys.stderr)
        return 130


# Options whose value may start with "-" (a negative duration or number): argparse would
# take "-5m" for an option and say only "expected one argument". Glued to the option
# ("--time-limit=-5m"), the value reaches the option's own check, which names it.
_VALUE_OPTIONS = ("--time-limit", "--seed", "--target", "--expected-runs", "--workers",
                  "--threads", "--jobs", "--cores", "--runs-per-gpu", "--gpus")  # fmt: skip


def _glue_dashed_values(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] in _VALUE_OPTIONS and i + 1 < len(argv) and argv[i + 1][:2] not in ("--", "-h"):
            if argv[i + 1].startswith("-") and len(argv[i + 1]) > 1:
                out.append(f"{argv[i]}={argv[i + 1]}")
                i += 2
                continue
        out.append(argv[i])
        i += 1
    return out


def os_error_line(e: OSError) -> str:
    """``PATH: reason`` (``PATH -> OTHER: reason`` for a rename) of an OSError."""
    reason = e.strerror or str(e) or type(e).__name__
    if not e.filename:
        return f"a file could not be written: {reason}"
    where = str(e.filename) + (f" -> {e.filename2}" if e.filename2 else "")
    return f"{where}: {reason}"


if __name__ == "__main__":
    raise SystemExit(main())
