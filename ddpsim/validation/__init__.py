"""``ddpsim validate`` and ``ddpsim compare``: predictions against real DDP runs. Measuring
(:mod:`~ddpsim.validation.measure`: every point under real DDP on local gloo ranks, round-robin, the
trace captured every round), comparing (:mod:`~ddpsim.validation.compare`: the mean of the runs'
pooled steady steps against the simulated steady steps' mean) and writing (:mod:`~ddpsim.validation.writer`);
the ``profile_*`` modules against torch.profiler profiles. docs/VALIDATION.md."""
