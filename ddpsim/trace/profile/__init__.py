"""One rank's torch.profiler trace (Kineto / Chrome JSON) as a ddpsim trace: ``import_profile(path,
model=None)`` streams it (:mod:`~ddpsim.trace.profile.kineto`) into a :class:`ProfileImport`, one
:class:`ProfileIteration` per ``ProfilerStep#N``. docs/MODEL.md, "How a profile becomes a trace"."""

from ddpsim.trace.profile.importer import import_profile
from ddpsim.trace.profile.result import (CollectiveKernel, HookSpan, StepHostTimes, ParamMapping, PhaseTimes,
                                         ProfileEnvironment, ProfileImport, ProfileIteration, RecordedBucket)

__all__ = ["import_profile", "ProfileImport", "ProfileIteration", "ProfileEnvironment", "PhaseTimes",
           "RecordedBucket", "CollectiveKernel", "StepHostTimes", "ParamMapping", "HookSpan"]
