"""Experiments: a profile's runs planned, executed on Dask, selected and reported
(docs/paper.md §12, docs/architecture.md §4, §7).

* ``plan``    -- a profile -> run specifications (``RunSpec``: seeds, search draws), the
  plan record, the check of a finished folder, the selection of the best trial;
* ``sweep``   -- ``Sweep``: data, search, selection, final runs and reports on a cluster;
* ``deadlines`` -- ``Deadlines``: when runs pause and the sweep ends under a time limit;
* ``schedule`` -- ``Schedule``: what each finished or failed run of one sweep unlocks
  (a pair's closed search starts its final runs; retries);
* ``dispatch`` -- ``Dispatcher``: runs waiting for a worker, their order, pending futures;
* ``sweeper`` -- ``Sweeper``: the narrow view of the sweep that those two get;
* ``outcome`` -- ``SweepResult``: what one sweep did;
* ``reuse``   -- runs a profile takes over from another profile's records;
* ``progress`` -- ``Progress``: the sweep's one-line display and its time estimate;
* ``reports`` -- the report notebooks a finished sweep executes;
* ``worker``  -- what a Dask worker executes: one run's train notebook, one report notebook;
* ``cluster`` -- where the runs execute: ``local_cluster``, ``attach``, ``jobqueue_cluster``;
* ``cost``    -- ``fruit run --dry-run``'s estimate of runs and core-hours;
* ``run_state`` -- where each planned run stands, read from its folder (for the estimates).

Model and training code runs inside the train notebook that each run executes, never in
the sweep's process; from ``fruit.training`` the sweep takes only ``prepare_data``.
"""
