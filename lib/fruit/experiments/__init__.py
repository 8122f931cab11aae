"""Experiments: a profile's runs planned, executed on Dask, selected and reported
(docs/paper.md §12, docs/architecture.md §4, §7), in three parts, each using only the
ones below it:

* ``execution`` -- the sweep that carries a plan out: ``Sweep`` (data, search, selection,
  final runs, reports), its bookkeeping (``schedule``, ``dispatch``, ``sweeper``,
  ``outcome``), its clock (``deadlines``), its display (``progress``), the watch on its
  workers (``watch``), and what a Dask worker executes (``worker``, ``attempts``,
  ``reports``);
* ``clusters``  -- where the runs execute: ``cluster`` (LocalCluster, a scheduler,
  Slurm/PBS/SGE jobs), ``jobs`` (batch jobs: walltimes, submissions, why they wait),
  ``capacity`` (the runs at once a cluster gives) and ``checks`` (the command line's
  options, before any cluster starts);
* ``planning``  -- what a profile plans and costs, before anything runs: ``plan``
  (``RunSpec``: seeds, search draws, selection), ``run_state`` (where each planned run
  stands, from its folder), ``reuse`` (runs taken over from another profile), ``cost``,
  ``gpu_rates`` and ``gpu_sharing`` (core- and GPU-hours, runs per GPU).

Beside them, ``options``: ``RunOptions``, ``fruit run``'s options as one typed value,
which all three parts may read.

Model and training code runs inside the train notebook that each run executes, never in
the sweep's process; from ``fruit.training`` the sweep takes ``prepare_data`` and the
run configuration (``fruit.training.config``: what a run folder records, for reuse).
"""
