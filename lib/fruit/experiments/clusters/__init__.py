"""Where the runs execute: the Dask cluster (``cluster``: a LocalCluster, a scheduler, or
Slurm/PBS/SGE batch jobs), the batch jobs themselves (``jobs``: walltimes, submissions,
why they wait), how many runs at once a cluster gives (``capacity``), and the command
line's options checked before any cluster starts (``checks``). Uses ``planning``, never
``execution``."""
