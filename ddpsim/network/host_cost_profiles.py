"""DDP's per-bucket host costs measured on torch.profiler traces, and the defaults derived from them.
From one rank's Kineto trace (:func:`ddpsim.trace.profile.kineto.read_profile`,
:func:`ddpsim.trace.profile.steps.profiler_steps`), what a bucket costs the CPU as the Reducer pays it
(``reducer.cpp``, ``ProcessGroupNCCL.cpp``): the **hook** (an ``AccumulateGrad`` evaluate-function span
minus its ``AccumulateGrad`` op, for a gradient launching no bucket), the **enqueue**
(``record_param_comms`` inside ``c10d::allreduce_``), the **bucket launch** (what the gradient making a
bucket ready pays beyond both) and the **copy back** (``copy_bucket_to_grad`` per parameter at
finalize); a bucket of ``n`` gradients costs ``n * hook + bucket launch + enqueue``
(:func:`model_bucket_s`, as :mod:`ddpsim.engine.reducer` charges it). Each span is corrected by the
profiler's own cost per nested event (the median span of ``aten::as_strided``, a lower bound, so the
terms stay upper bounds) and by a CUDA call's excess over its name's median (a full launch queue, not
host work). A host's speed is its probe op's median over the profiles' (:func:`host_bound`); a profile
past :data:`HOST_BOUND_FACTOR` is host-bound, reported but left out of :func:`derive_defaults`.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ddpsim.network.host_costs import HostCosts
from ddpsim.trace.profile.kineto import CpuOp, KinetoProfile, read_profile
from ddpsim.trace.profile.steps import ACCUMULATE_GRAD, BACKWARD_OP, COMMS_OP, COPY_BUCKET_TO_GRAD, profiler_steps

ALLREDUCE_OP = "c10d::allreduce_"
EVALUATE_ACCUMULATE = f"{BACKWARD_OP} {ACCUMULATE_GRAD}"
#: the cheapest profiled op: its median span estimates the profiler's cost per nested event
PROBE_OP = "aten::as_strided"
#: a profile whose probe op runs this many times slower than the profiles' median is host-bound
HOST_BOUND_FACTOR = 4.0
#: the defaults' stated uncertainty: a bucket's measured host time is within this factor of the model
BAND = 2.0


@dataclass(frozen=True, kw_only=True)
class BucketHost:
    """One bucket of one profiled step: its gradients and what the host paid for them (seconds,
    profiler overhead removed)."""

    step: int
    index: int
    num_params: int
    hooks_s: tuple[float, ...]   # per gradient of the bucket, ready order: span minus AccumulateGrad
    enqueue_s: float             # record_param_comms inside the bucket's c10d::allreduce_

    @property
    def host_s(self) -> float:
        """Everything the bucket cost the host: its gradients' hooks, the launch inside the last."""
        return sum(self.hooks_s)


@dataclass(frozen=True, kw_only=True)
class ProfileHostCosts:
    """One profile's host costs: per bucket, and the per-term medians (seconds)."""

    source: str
    probe_op_s: float            # median span of PROBE_OP: the profiler's cost per nested event
    buckets: tuple[BucketHost, ...]
    hook_s_per_param: float      # median hook of the gradients that launch no bucket
    bucket_launch_s: float       # median of (closing hook - enqueue - hook_s_per_param)
    enqueue_s: float             # median enqueue
    copy_back_s_per_param: float  # median copy_bucket_to_grad


class _Nested:
    """The profiled events (CPU ops and CUDA calls) inside a span on its thread: their count, and
    the CUDA calls' time beyond their name's median over the profile (the CPU blocked on a full
    launch queue: the device is behind, which is not host work)."""

    def __init__(self, prof: KinetoProfile) -> None:
        def grouped(events: Iterable, key: str, value: Callable) -> dict[object, list]:
            """``value`` of each event, by its ``key`` attribute, each group sorted."""
            out: dict[object, list] = {}
            for e in events:
                out.setdefault(getattr(e, key), []).append(value(e))
            return {k: sorted(v) for k, v in out.items()}
        self.starts = grouped([*prof.cpu_ops, *prof.runtime], "tid", lambda e: e.ts)
        durs = grouped(prof.runtime, "name", lambda r: r.dur)
        typical = {k: statistics.median(v) for k, v in durs.items()}
        self.calls = grouped(prof.runtime, "tid",
                             lambda r: (r.ts, max(0.0, r.dur - typical[r.name])))
        self.call_ts = {t: [c[0] for c in v] for t, v in self.calls.items()}

    def count(self, op: CpuOp) -> int:
        ts = self.starts.get(op.tid, [])
        return bisect_right(ts, op.ts + op.dur) - bisect_left(ts, op.ts) - 1  # the op itself excluded

    def host_us(self, op: CpuOp, o_us: float) -> float:
        """``op``'s span less the profiler's ``o_us`` per nested event and its blocked CUDA calls."""
        ts = self.call_ts.get(op.tid, [])
        lo, hi = bisect_left(ts, op.ts), bisect_right(ts, op.ts + op.dur)
        return op.dur - self.count(op) * o_us - sum(c[1] for c in self.calls.get(op.tid, [])[lo:hi])


def _median_s(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def _within(inner: CpuOp, outer: CpuOp) -> bool:
    return inner.tid == outer.tid and outer.ts <= inner.ts and inner.ts + inner.dur <= outer.ts + outer.dur


def _step_buckets(ops: Sequence[CpuOp], step: int, nested: _Nested, o_us: float) -> list[BucketHost]:
    """The buckets of one step: gradients' hooks in ready order, cut after each one that launches."""
    cost = lambda op: nested.host_us(op, o_us)  # noqa: E731
    accs = [o for o in ops if o.name == ACCUMULATE_GRAD]
    launches = [o for o in ops if o.name == ALLREDUCE_OP]
    comms = [o for o in ops if o.name == COMMS_OP]
    out: list[BucketHost] = []
    hooks: list[float] = []
    for ev in (o for o in ops if o.name == EVALUATE_ACCUMULATE):
        acc = next((a for a in accs if _within(a, ev)), None)
        if acc is None:
            continue
        hooks.append((cost(ev) - cost(acc)) * 1e-6)
        ar = next((a for a in launches if _within(a, ev)), None)
        if ar is not None:
            enq = [cost(c) for c in comms if _within(c, ar)]
            out.append(BucketHost(step=step, index=len(out), num_params=len(hooks), hooks_s=tuple(hooks),
                                  enqueue_s=(max(enq) if enq else cost(ar)) * 1e-6))
            hooks = []
    return out


def probe_op_us(prof: KinetoProfile) -> float:
    """The median span of :data:`PROBE_OP` in ``prof`` (microseconds; 0 when it has none)."""
    return _median_s([o.dur for o in prof.cpu_ops if o.name == PROBE_OP])


def measure(profile: KinetoProfile | str | Path, *, correct: bool = True) -> ProfileHostCosts:
    """Per bucket and per term, the host costs in ``profile``'s steps (see the module docstring);
    ``correct=False`` keeps the profiler's cost per nested event in (a host-bound profile: there the
    probe op's span is the host's slowness, not the profiler's)."""
    prof = profile if isinstance(profile, KinetoProfile) else read_profile(profile)
    o_us = probe_op_us(prof) if correct else 0.0
    nested = _Nested(prof)
    ops = sorted(prof.cpu_ops, key=lambda o: o.ts)
    buckets: list[BucketHost] = []
    for n, w in profiler_steps(prof):
        buckets += _step_buckets([o for o in ops if w.start <= o.ts < w.end], n, nested, o_us)
    hook = _median_s([h for b in buckets for h in b.hooks_s[:-1]])  # gradients launching no bucket
    copy_back = [nested.host_us(o, o_us) * 1e-6 for o in prof.cpu_ops if o.name == COPY_BUCKET_TO_GRAD]
    return ProfileHostCosts(source=str(prof.path), probe_op_s=probe_op_us(prof) * 1e-6, buckets=tuple(buckets),
                            hook_s_per_param=hook,
                            bucket_launch_s=max(0.0, _median_s([b.hooks_s[-1] - b.enqueue_s - hook for b in buckets])),
                            enqueue_s=_median_s([b.enqueue_s for b in buckets]),
                            copy_back_s_per_param=_median_s(copy_back))


def host_bound(probe_s: Sequence[float]) -> list[bool]:
    """Per profile's probe op median, whether its host runs over :data:`HOST_BOUND_FACTOR` times slower
    than the profiles' median host (its probe op's median span over the median of them)."""
    ref = statistics.median(probe_s)
    return [p / ref > HOST_BOUND_FACTOR for p in probe_s]


def derive_defaults(measured: Sequence[ProfileHostCosts], pre_forward_s: float) -> HostCosts:
    """The per-bucket defaults: each term's median over the profiles that are not host-bound
    (one constant for every GPU: the host's code path does not depend on the device)."""
    kept = [m for m, bound in zip(measured, host_bound([m.probe_op_s for m in measured])) if not bound]
    med = lambda f: statistics.median(getattr(m, f) for m in kept)  # noqa: E731
    return HostCosts(pre_forward_s=pre_forward_s, hook_s_per_param=med("hook_s_per_param"),
                     bucket_launch_s=med("bucket_launch_s"), enqueue_s=med("enqueue_s"),
                    copy_back_s_per_param=med("copy_back_s_per_param"))


def model_bucket_s(host: HostCosts | ProfileHostCosts, num_params: int) -> float:
    """The engine's host charge for a bucket of ``num_params`` gradients (``host``: the defaults or one profile's)."""
    return num_params * host.hook_s_per_param + host.bucket_launch_s + host.enqueue_s


def measure_all(paths: Iterable[str | Path]) -> list[ProfileHostCosts]:
    """:func:`measure` of each profile, the profiler's cost removed except from host-bound ones."""
    profs = [read_profile(p) for p in paths]
    bound = host_bound([probe_op_us(p) for p in profs])
    return [measure(p, correct=not b) for p, b in zip(profs, bound)]
