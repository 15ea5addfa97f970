"""One rank's torch.profiler trace (Kineto / Chrome JSON) as a ddpsim trace.

``import_profile(path, model=None)`` reads the JSON that ``torch.profiler``'s
``export_chrome_trace`` or ``tensorboard_trace_handler`` writes (``.json`` or ``.json.gz``)
in one streaming pass (:mod:`~ddpsim.trace.profile.kineto`), finds the ``ProfilerStep#N``
iterations, splits each into forward, backward and optimizer on the CPU and GPU timelines
(kernels tied to the CPU ops that launched them by Kineto's correlation ids), takes the
gradient-ready times from the backward's ``AccumulateGrad`` ops, what the run's DDP launched
(``record_param_comms``) and its NCCL kernels, and returns a :class:`ProfileImport`: one
:class:`ProfileIteration` per step, which ``ddpsim compare`` measures as well.
docs/MODEL.md, "How a profile becomes a trace", says how each figure is taken.
"""

from ddpsim.trace.profile.importer import import_profile
from ddpsim.trace.profile.result import (BucketCollective, CollectiveKernel, HookSpan, StepHostTimes, ParamMapping, PhaseTimes,
                                         ProfileEnvironment, ProfileImport, ProfileIteration, RecordedBucket)

__all__ = ["import_profile", "ProfileImport", "ProfileIteration", "ProfileEnvironment", "PhaseTimes",
           "RecordedBucket", "CollectiveKernel", "BucketCollective", "StepHostTimes", "ParamMapping", "HookSpan"]
