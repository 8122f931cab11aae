"""What a profile plans and costs, before anything runs: the run specifications and their
seeds (``plan``), where each planned run stands (``run_state``), the runs taken over from
another profile (``reuse``), and the compute they need (``cost``, ``gpu_rates``,
``gpu_sharing``). Imports nothing of ``execution`` or ``clusters``."""
