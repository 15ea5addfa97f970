"""One rank's torch.profiler trace (Kineto / Chrome JSON) as a ddpsim trace.

``import_profile(path, model=None)`` streams the JSON of ``export_chrome_trace`` or
``tensorboard_trace_handler`` (:mod:`~ddpsim.trace.profile.kineto`) and returns a
:class:`ProfileImport`: one :class:`ProfileIteration` per ``ProfilerStep#N``, which ``ddpsim
compare`` measures as well. docs/MODEL.md, "How a profile becomes a trace", says how each figure
is taken.
"""

from ddpsim.trace.profile.importer import import_profile
from ddpsim.trace.profile.result import (CollectiveKernel, HookSpan, StepHostTimes, ParamMapping, PhaseTimes,
                                         ProfileEnvironment, ProfileImport, ProfileIteration, RecordedBucket)

__all__ = ["import_profile", "ProfileImport", "ProfileIteration", "ProfileEnvironment", "PhaseTimes",
           "RecordedBucket", "CollectiveKernel", "StepHostTimes", "ParamMapping", "HookSpan"]
