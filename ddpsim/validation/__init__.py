"""``ddpsim validate`` and ``ddpsim compare``: predictions against real DDP runs. Measuring
(:mod:`~ddpsim.validation.measure`: calibrate once, run every point under real DDP on local gloo
ranks ``--repeats`` times round-robin, capturing the trace every round), comparing
(:mod:`~ddpsim.validation.compare`: a point's measured figure is the mean of its runs' pooled
steady steps, its prediction the simulated steady steps' mean) and writing
(:mod:`~ddpsim.validation.writer`); the ``profile_*`` modules do the same against a run's
torch.profiler profiles. How each figure is made and read: docs/VALIDATION.md."""
