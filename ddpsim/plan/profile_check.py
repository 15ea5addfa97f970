"""The run's own buckets against ddpsim's plan: a profile records the buckets DDP all-reduced
(``record_param_comms``: ``In msg nelems`` and ``dtype`` per launch, :mod:`ddpsim.trace.profile`);
from the second iteration they are ``Reducer::rebuild_buckets``'s (``reducer.cpp``), which
:func:`plan_ddp` reproduces. Compared bucket by bucket, every difference said, none hidden."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ddpsim.plan.planner import DDPOptions, plan_ddp
from ddpsim.trace.records import Trace
from ddpsim.units import DTYPE_SIZE_BYTES


@dataclass(frozen=True, kw_only=True)
class BucketCheck:
    """The buckets the run's DDP all-reduced in its last measured iteration beside the steady plan
    of :func:`plan_ddp` under ``options`` (elements, launch order); ``message``: one line saying
    whether they match, or where they first differ."""

    options: DDPOptions
    recorded_numels: tuple[int, ...]
    planned_numels: tuple[int, ...]
    matches: bool
    message: str


def run_cap_bound_mb(trace: Trace, recorded_numels: Sequence[int]) -> float | None:
    """The largest ``bucket_cap_mb`` the recorded buckets allow, in MiB: DDP closes a bucket once
    its bytes reach the limit (``_compute_bucket_assignment_by_size``), so every bucket but the last
    holds at least the run's cap, and at the smallest of them each still closes where it did. None
    unless every gradient has one dtype (the limit is in bytes) and two or more buckets were recorded."""
    dtypes = {p.dtype for p in trace.params}
    if len(dtypes) != 1 or len(recorded_numels) < 2:
        return None
    size = DTYPE_SIZE_BYTES[dtypes.pop()]
    return min(recorded_numels[:-1]) * size / 2**20


def _compare(trace: Trace, recorded: tuple[int, ...], options: DDPOptions) -> BucketCheck:
    plan = plan_ddp(trace, options)
    planned = tuple(b.size_bytes // DTYPE_SIZE_BYTES[b.dtype] for b in plan.steady)
    label = options.label()
    message = f"{len(recorded)} buckets match ddpsim's plan at {label}"
    if planned != recorded:
        first = next((k for k, (a, b) in enumerate(zip(recorded, planned)) if a != b), min(len(recorded), len(planned)))
        got = recorded[first] if first < len(recorded) else None
        want = planned[first] if first < len(planned) else None
        message = (f"buckets differ from ddpsim's plan at {label}: the run had {len(recorded)}, the plan "
                   f"{len(planned)}; first difference at bucket {first}: recorded {got} elements, planned {want}")
    return BucketCheck(options=options, recorded_numels=recorded, planned_numels=planned, matches=planned == recorded,
                       message=message)


def check_recorded_buckets(trace: Trace, recorded_numels: Sequence[int], options: DDPOptions | None = None) -> BucketCheck:
    """Compare the run's buckets (``recorded_numels``, launch order) with ddpsim's plan of ``trace``;
    without ``options`` (the run's cap not known) DDP's default is tried first, then the largest cap
    the recorded buckets allow (:func:`run_cap_bound_mb`), and the message names which matched."""
    recorded = tuple(int(n) for n in recorded_numels)
    check = _compare(trace, recorded, options or DDPOptions())
    bound = None if options is not None or check.matches else run_cap_bound_mb(trace, recorded)
    if bound is None:
        return check
    inferred = _compare(trace, recorded, DDPOptions(bucket_cap_mb=bound))
    if not inferred.matches:
        return check
    note = f" (the run's bucket_cap_mb, read off its buckets: at most {bound:.4g} MiB, its smallest closed bucket)"
    return replace(inferred, message=inferred.message + note)
