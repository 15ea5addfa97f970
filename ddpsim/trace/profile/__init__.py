"""One rank's torch.profiler trace (Kineto / Chrome JSON) as a ddpsim trace: ``import_profile(path,
model=None)`` streams it (:mod:`~ddpsim.trace.profile.kineto`) into a
:class:`~ddpsim.trace.profile.result.ProfileImport`, one ``ProfileIteration`` per ``ProfilerStep#N``.
docs/MODEL.md, "How a profile becomes a trace"."""

from ddpsim.trace.profile.importer import import_profile

__all__ = ["import_profile"]
