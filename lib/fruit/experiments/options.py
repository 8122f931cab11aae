"""``fruit run``'s options as one typed value, resolved once from the command line
(``RunOptions.from_args``) and read by everything that acts on them before and while the
sweep runs: the checks before any cluster starts (``clusters.checks``,
``planning.gpu_sharing``), the dry-run's capacity (``clusters.capacity``) and the cluster
``fruit run`` starts. The options themselves and their help are in
``fruit.commands.run``; the names here are theirs (``--runs-per-gpu`` is
``runs_per_gpu``)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class RunOptions:
    profile: str = "quick"  # a shipped profile's name, or the path of a .toml
    results: str = "results"
    figures: str = "figures"  # from_args: beside the results (default_figures)
    data_dir: str | None = None  # None: data/<profile>
    notebook: str | None = None  # None: notebooks/train.ipynb
    device: str = "auto"
    retries: int = 2
    skip_reports: bool = False
    time_limit: str | None = None  # as given, e.g. "1h30m" (fruit.commands.run.parse_duration)
    task: tuple[str, ...] = ()  # train only these tasks' pairs (empty: all)
    architecture: tuple[str, ...] = ()  # and only these architectures' pairs
    published: str | None = None  # DIR/<task>/{dev,test,gen}.tsv
    dry_run: bool = False
    # where the runs execute: a LocalCluster, an existing scheduler or dask-jobqueue jobs
    workers: int | None = None
    threads: int | None = None
    scheduler: str | None = None
    dashboard: bool = True
    cluster: str | None = None  # slurm | pbs | sge
    jobs: int | None = None
    cores: int | None = None
    memory: str | None = None
    walltime: str | None = None
    gpus: int | None = None
    runs_per_gpu: int | None = None
    gpu_card: str | None = None
    queue: str | None = None
    account: str | None = None

    @property
    def local(self) -> bool:
        """Whether the runs execute on this machine (a LocalCluster fruit starts)."""
        return not (self.scheduler or self.cluster)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        """The options ``fruit run``'s parser gave, defaults resolved (the figures folder)."""
        given = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}
        given["task"] = tuple(given["task"] or ())
        given["architecture"] = tuple(given["architecture"] or ())
        if given["figures"] is None:
            given["figures"] = default_figures(given["results"])
        return cls(**given)


def default_figures(results: str) -> str:
    """The figures folder beside ``results`` (``figures`` for ``results``, ``x/figures`` for
    ``x/results``), or inside it where beside it is this folder's ``figures`` and
    ``results`` is not ``results``: another results folder never overwrites ./figures."""
    beside = Path(results).parent / "figures"
    here = Path("figures").resolve()
    if beside.resolve() == here and Path(results).resolve() != Path("results").resolve():
        return str(Path(results) / "figures")
    return str(beside)
