"""One rank's torch.profiler steps as the two timelines ``ddpsim compare`` scores a prediction on.

A Kineto trace (what ``torch.profiler``'s ``export_chrome_trace`` or ``tensorboard_trace_handler``
writes) holds the host's CPU ops (``cat`` ``cpu_op`` / ``user_annotation``), the CUDA runtime
calls (``cuda_runtime``) and the device's kernels, copies and sets (``kernel``, ``gpu_memcpy``,
``gpu_memset``) on one clock (microseconds); a kernel is tied to the runtime call that launched
it by ``args.correlation``. Per ``ProfilerStep#N`` this module takes:

* the phases on both timelines, cut as the profile import cuts them
  (:func:`ddpsim.trace.profile.steps.phase_windows`: one definition of a step's forward,
  backward and optimizer), and the module's first kernel-launching op after DDP's pre-forward
  work (its buffer broadcast: ``_sync_buffers``);
* per ``AccumulateGrad``, in ready order, when the op ended on the CPU (DDP's hook runs next,
  ``Reducer::autograd_hook``) and the span of its ``evaluate_function`` (the op, DDP's hook and,
  for a bucket's last gradient, the bucket's launch);
* DDP's bucket launches: ``c10d::allreduce_`` in the backward, with the
  ``record_param_comms`` it holds (``ProcessGroupNCCL::collective``: stream sync, ``ncclAllReduce``);
* every device interval, classified as HolisticTraceAnalysis classifies kernels
  (:func:`~ddpsim.trace.profile.kernel_kinds.kernel_kind`, the one classifier);
* the NCCL (or RCCL) all-reduce kernels launched in the backward -- the collective as the
  launch's ``record_param_comms`` names it (:func:`~ddpsim.trace.profile.nccl_kernels.collective_of`) (DDP's buckets, and its used-map
  all-reduce with ``find_unused_parameters``; start, duration, ``In msg nelems``) in launch order;
* the calls that launch device work (:data:`~ddpsim.trace.profile.steps.KERNEL_LAUNCHES`; count and CPU time).

Times in :class:`StepTimeline` are seconds from the step's ``ProfilerStep`` start.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ddpsim.errors import InputError
from ddpsim.trace.profile import nccl_kernels
from ddpsim.trace.profile.kernel_kinds import kernel_kind
from ddpsim.trace.profile.kineto import CpuOp, GpuOp, KinetoProfile, read_profile
from ddpsim.trace.profile.steps import (ACCUMULATE_GRAD, BACKWARD_OP, COMMS_OP, KERNEL_LAUNCHES, Launched, StepOps, Timeline,
                                        phase_windows, profiler_steps)

_EVALUATE_ACCUMULATE = "autograd::engine::evaluate_function: " + ACCUMULATE_GRAD


@dataclass(frozen=True, kw_only=True)
class HookSpan:
    """One ``AccumulateGrad`` of the backward and DDP's hook after it (seconds from the step start)."""

    op_end_s: float          # the AccumulateGrad op ended: the gradient exists, DDP's hook runs next
    start_s: float           # its evaluate_function began
    end_s: float             # ... and ended (hook and any bucket launch included)
    op_s: float              # the AccumulateGrad op's own time
    launches: int            # bucket all-reduces launched inside it
    gpu_ready_s: float | None  # the device finished what the autograd thread launched before the op ended


@dataclass(frozen=True, kw_only=True)
class BucketLaunch:
    """One ``c10d::allreduce_`` of the backward: a bucket launched by DDP's reducer."""

    start_s: float
    op_s: float              # the c10d::allreduce_ op
    enqueue_s: float         # the record_param_comms inside it (ProcessGroupNCCL's collective path)


@dataclass(frozen=True, kw_only=True)
class CommKernel:
    """One NCCL all-reduce kernel of the step (seconds from the step start), with the algorithm
    and protocol it ran where its name and block size say them
    (:func:`ddpsim.trace.profile.nccl_kernels.ran`)."""

    start_s: float
    duration_s: float
    numel: int | None
    name: str
    algorithm: str | None = None
    protocol: str | None = None
    ran: str = "?"

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True, kw_only=True)
class StepTimeline:
    """One ``ProfilerStep#N`` on the CPU and GPU timelines (seconds from the step's start).

    ``module_start_s``: the module's forward began on the CPU (DDP's pre-forward, buffer
    broadcast included, is ``forward_start_s`` to it). ``gpu_done`` maps each CPU time of
    ``forward``, ``module``, ``backward``, ``model_backward_end``, ``backward_end`` and ``optimizer_end`` to when the
    device finished the non-communication work launched before it (None: nothing launched).
    ``intervals``: every device interval launched in the step, ``(start_s, end_s, kind)``.
    """

    step: int
    start_us: float          # the step's start on the profile's clock (microseconds, as in the file)
    step_s: float
    forward_start_s: float
    module_start_s: float
    zero_grad_s: float
    backward_cpu_start_s: float
    backward_cpu_end_s: float
    model_backward_cpu_end_s: float  # the model's last autograd op ended (DDP's finalize, its copy-back, follow)
    optimizer_cpu_start_s: float
    optimizer_cpu_end_s: float
    gpu_done: dict[str, float | None]
    hooks: tuple[HookSpan, ...]
    launches: tuple[BucketLaunch, ...]
    allreduces: tuple[CommKernel, ...]
    intervals: tuple[tuple[float, float, str], ...]
    kernel_launches: int
    kernel_launch_s: float
    #: device work the step inherited from before the profile (its first op waited for it), seconds
    inherited_s: float = 0.0


def step_timelines(profile: KinetoProfile | str | Path, source: str | None = None) -> tuple[StepTimeline, ...]:
    """Every ``ProfilerStep#N`` of a profile (a path, or the
    :class:`~ddpsim.trace.profile.kineto.KinetoProfile` :func:`read_profile` returned) that has a
    backward.

    Raises:
        InputError: an unreadable profile, no ProfilerStep, no GPU work, or no step with
            AccumulateGrad ops (no backward)."""
    prof = profile if isinstance(profile, KinetoProfile) else read_profile(profile)
    source = source or prof.path
    steps = profiler_steps(prof)
    index = _Index(prof)
    out = [t for t in (_step(index, index.timeline.step(n, w), source) for n, w in steps) if t is not None]
    if not out:
        raise InputError(f"{source}: no step has a backward (no {ACCUMULATE_GRAD} op); expected a training step's profile")
    return tuple(out)


class _Index:
    """The profile, its timeline (:class:`~ddpsim.trace.profile.steps.Timeline`), and when the
    device finished the non-communication work launched up to a time."""

    def __init__(self, prof: KinetoProfile) -> None:
        self.prof = prof
        self.timeline = Timeline(prof)
        work = [(lz.launch_us, lz.op.end) for lz in self.timeline.launched if kernel_kind(lz.op.name) != "comm"]
        self._launch_ts = [t for t, _ in work]
        self._done: list[float] = []
        for _, end in work:
            self._done.append(max(end, self._done[-1]) if self._done else end)
        #: the longest launch-to-start time of an op that found the device idle (all the profiled work
        #: launched before it done), the profile's first op aside: the device's launch latency, at worst
        launched = [lz for lz in self.timeline.launched if kernel_kind(lz.op.name) != "comm"]
        self.latency_us = max((lz.op.ts - lz.launch_us for k, lz in enumerate(launched[1:], 1)
                               if self._done[k - 1] < lz.launch_us), default=0.0)

    def inherited_until(self, s: StepOps) -> float | None:
        """Where the step's first device op (launch order) started later than its launch, the
        device's launch latency (:attr:`latency_us`) and the profiled work before it allow, the
        device was running work the profile does not hold (launched before profiling began): the
        time it freed (its start minus the latency); None where the profile explains the start."""
        first = next((lz for lz in s.launched if kernel_kind(lz.op.name) != "comm"), None)
        if first is None:
            return None
        k = bisect_left(self._launch_ts, first.launch_us)
        prior = self._done[k - 1] if k else float("-inf")
        free = first.op.ts - self.latency_us
        return free if free > max(first.launch_us, prior) else None

    def done_before(self, t: float) -> float | None:
        """When the device finished every non-communication event launched before ``t`` (None: none was)."""
        k = bisect_right(self._launch_ts, t)
        return self._done[k - 1] if k else None


def _end(o: CpuOp | GpuOp) -> float:
    return o.ts + o.dur


def _step(ix: _Index, s: StepOps, source: str) -> StepTimeline | None:
    if not any(o.name == ACCUMULATE_GRAD for o in s.cpu):
        return None
    w = phase_windows(s, source)
    t0 = s.window.start
    ops = sorted(s.cpu, key=lambda o: (o.ts, -o.dur))
    bwd_ops = [o for o in ops if w.backward.holds(o.ts)]
    span = next(o for o in ops if o.name == f"ProfilerStep#{s.step}")  # the window's own op: it starts inside it
    zero = next((o for o in ops if o.name.startswith("Optimizer.zero_grad")), None)  # w.zero_grad's op: its own duration
    ddp = next((o for o in ops if o.tid == span.tid and o.name == "DistributedDataParallel.forward"), None)
    opt_end = w.optimizer.end if w.optimizer_annotated else w.backward.end
    s_of: Callable[[float], float] = lambda t: (t - t0) * 1e-6  # noqa: E731 - microseconds -> seconds from the step start
    module = _module_start(ix, s, ops, ddp) if ddp is not None else w.forward.start
    calls = [r for r in s.runtime if r.name in KERNEL_LAUNCHES]
    model_end = max(_end(o) for o in bwd_ops if o.name.startswith(BACKWARD_OP))
    inherited = ix.inherited_until(s)
    done_fwd = ix.done_before(w.forward.start)
    if inherited is not None:
        done_fwd = max(done_fwd or inherited, inherited)
    return StepTimeline(
        step=s.step, start_us=t0, step_s=span.dur * 1e-6, forward_start_s=s_of(w.forward.start),
        module_start_s=s_of(module), zero_grad_s=zero.dur * 1e-6 if zero is not None else 0.0,
        backward_cpu_start_s=s_of(w.backward.start), backward_cpu_end_s=s_of(w.backward.end),
        model_backward_cpu_end_s=s_of(model_end), optimizer_cpu_start_s=s_of(w.optimizer.start if w.optimizer_annotated else w.backward.end),
        optimizer_cpu_end_s=s_of(opt_end),
        inherited_s=(inherited - max(w.forward.start, ix.done_before(w.forward.start) or -math.inf)) * 1e-6
        if inherited is not None else 0.0,
        gpu_done={"forward": _opt(done_fwd, s_of), **{k: _opt(ix.done_before(t), s_of) for k, t in (
            ("module", module), ("backward", w.backward.start),
            ("model_backward_end", model_end), ("backward_end", w.backward.end), ("optimizer_end", opt_end))}},
        hooks=_hooks(bwd_ops, ix, s_of),
        launches=tuple(BucketLaunch(start_s=s_of(a.ts), op_s=a.dur * 1e-6, enqueue_s=q) for a, q in _launches(bwd_ops)),
        allreduces=tuple(_comm_kernel(ix, lz.op, s_of) for lz in _by_start(s.launched) if w.backward.holds(lz.launch_us)
                         and kernel_kind(lz.op.name) == "comm" and nccl_kernels.collective_of(lz.op) == "allreduce"),
        intervals=tuple((s_of(lz.op.ts), s_of(lz.op.end), kernel_kind(lz.op.name)) for lz in _by_start(s.launched)),
        kernel_launches=len(calls), kernel_launch_s=sum(c.dur for c in calls) * 1e-6)


def _by_start(launched: Sequence[Launched]) -> list[Launched]:
    return sorted(launched, key=lambda lz: lz.op.ts)


def _comm_kernel(ix: _Index, g: GpuOp, s_of: Callable[[float], float]) -> CommKernel:
    numel, algorithm, protocol, ran = nccl_kernels.launch(g, ix.prof)
    return CommKernel(start_s=s_of(g.ts), duration_s=g.dur * 1e-6, numel=numel, name=g.name,
                      algorithm=algorithm, protocol=protocol, ran=ran)


def _module_start(ix: _Index, s: StepOps, ops: Sequence[CpuOp], ddp: CpuOp) -> float:
    """Where the module's forward begins inside DDP's forward: the first direct child op after
    the last buffer broadcast (``c10d::broadcast_``; the start of DDP's forward when none) that
    launches a compute kernel (copies and the broadcast's flatten do not count)."""
    d0, d1 = ddp.ts, _end(ddp)
    inside = [o for o in ops if o.tid == ddp.tid and d0 < o.ts < d1 and o is not ddp]
    bcasts = [o for o in inside if o.name == "c10d::broadcast_"]
    after = _end(bcasts[-1]) if bcasts else d0
    comp = [lz.launch_us for lz in s.launched
            if after <= lz.launch_us < d1 and lz.tid == ddp.tid and kernel_kind(lz.op.name) == "comp"]
    if not comp:
        return after
    first_launch = min(comp)
    # the outermost op holding the first launch
    holders = [o for o in inside if after <= o.ts <= first_launch and _end(o) >= first_launch]
    return min(o.ts for o in holders) if holders else first_launch


def _opt(t: float | None, s_of: Callable[[float], float]) -> float | None:
    return None if t is None else s_of(t)


def _hooks(bwd_ops: Sequence[CpuOp], ix: _Index, s_of: Callable[[float], float]) -> tuple[HookSpan, ...]:
    """Per AccumulateGrad of the backward (ready order, on whichever thread ran it, as the import
    counts them): its op end, its evaluate_function's span, and when the device finished the
    work launched before the op ended."""
    evals = [o for o in bwd_ops if o.name == _EVALUATE_ACCUMULATE]
    ar = [o.ts for o in bwd_ops if o.name == "c10d::allreduce_"]
    out = []
    for a in (o for o in bwd_ops if o.name == ACCUMULATE_GRAD):
        ev = next((e for e in evals if e.ts <= a.ts and _end(a) <= _end(e)), a)
        n = bisect_right(ar, _end(ev)) - bisect_right(ar, ev.ts)
        out.append(HookSpan(op_end_s=s_of(_end(a)), start_s=s_of(ev.ts), end_s=s_of(_end(ev)), op_s=a.dur * 1e-6,
                            launches=n, gpu_ready_s=_opt(ix.done_before(_end(a)), s_of)))
    return tuple(out)


def _launches(bwd_ops: Sequence[CpuOp]) -> list[tuple[CpuOp, float]]:
    """Each ``c10d::allreduce_`` of the backward with its ``record_param_comms``'s seconds."""
    out = []
    comms = [o for o in bwd_ops if o.name == COMMS_OP]
    for a in (o for o in bwd_ops if o.name == "c10d::allreduce_"):
        inner = [c.dur for c in comms if a.ts <= c.ts and _end(c) <= _end(a)]
        out.append((a, (max(inner) if inner else a.dur) * 1e-6))
    return out
