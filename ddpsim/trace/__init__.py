"""A model's trace: per-parameter gradient-ready times, forward, backward and optimizer times,
sizes and dtypes in DDP's parameter order (:mod:`~ddpsim.trace.records`), captured from a real
torch model (:mod:`~ddpsim.trace.capture`, the bundled :mod:`~ddpsim.trace.models`), re-timed
for a GPU (:mod:`~ddpsim.trace.retime`) or imported from a real run's torch.profiler trace
(:mod:`~ddpsim.trace.profile`)."""
