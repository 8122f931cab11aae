"""The sweep that carries a profile's plan out on a cluster: ``sweep`` (``Sweep``: data,
search, selection, final runs, reports), the bookkeeping of one call (``schedule``,
``dispatch``, ``sweeper``, ``outcome``), its clock (``deadlines``), its display
(``progress``), the watch on its workers (``watch``), and what a Dask worker executes
(``worker``, ``attempts``, ``reports``). Uses ``planning`` and ``clusters``."""
