"""``fruit report``: run folders -> the paper's tables and bar charts, next to the paper's.

Calls ``fruit.reporting.report``, as ``notebooks/report.ipynb`` (the report stage of
``fruit run``) does: both write the same files for the same runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--results",
        default="results/runs",
        metavar="DIR",
        help="folder with one folder of run folders per profile, or the folder above it "
        "(default: results/runs)",
    )
    parser.add_argument("--profile", default="quick", help="profile to report (default: quick)")
    parser.add_argument(
        "--out",
        default="results/tables",
        metavar="DIR",
        help="tables go to DIR/<profile>/ and the paper's to DIR/paper-reported/ "
        "(default: results/tables)",
    )
    parser.add_argument(
        "--figures",
        default="figures",
        metavar="DIR",
        help="bar charts go to DIR/<profile>/ and DIR/paper-reported/ (default: figures)",
    )
    parser.add_argument(
        "--expected-runs",
        type=int,
        default=None,
        metavar="N",
        help="final runs each row should have (default: the profile's, else the most found)",
    )
    parser.add_argument("--no-figures", action="store_true", help="write the tables only")
    parser.add_argument(
        "--no-paper", action="store_true", help="skip the paper's own tables/figures"
    )


def main(args: argparse.Namespace) -> int:
    from fruit import reporting
    from fruit.errors import FruitError
    from fruit.experiments.clusters.checks import check_writable
    from fruit.io import check_folder, check_outside_records
    from fruit.reporting.runs import check_expected_runs

    check_expected_runs(args.expected_runs, "--expected-runs")
    if Path(args.results).exists() and not Path(args.results).is_dir():
        raise FruitError(f"--results {args.results} is a file, not a folder")
    outputs = (
        {"--out": args.out} if args.no_figures else {"--out": args.out, "--figures": args.figures}
    )
    for option, folder in outputs.items():  # both, before any table is written
        check_folder(folder, option)
        check_outside_records(folder, option, args.results)
        check_writable(Path(folder))

    tables, written = reporting.report(
        args.results,
        args.profile,
        tables_dir=args.out,
        figures_dir=args.figures,
        expected_runs=args.expected_runs,
        paper=not args.no_paper,
        figures=not args.no_figures,
    )
    print(
        reporting.summary(tables)
        or f"no final runs of profile {args.profile} yet: the tables are empty"
    )
    for kind, paths in written.items():
        folders = sorted({str(p.parent) for p in paths})
        print(f"{kind}: {len(paths)} files in {', '.join(folders) or '-'}")
    return 0
