"""When each boundary of a step was reached on the CPU and on the device: what ``ddpsim compare``
scores a step's critical path on. Per ``ProfilerStep#N`` (kernels tied to their launches by
``args.correlation``, each stream in launch order): the module's first kernel-launching op after
DDP's ``_sync_buffers``, per boundary when the device finished the non-communication work
launched before it, per ``AccumulateGrad`` (``Reducer::autograd_hook``,
``torch/csrc/distributed/c10d/reducer.cpp``) its ends, every device interval as HTA classifies
it, and the work inherited from before the profile. docs/MODEL.md, "Comparing with a profile"."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Any, Callable, Sequence

from ddpsim.trace.profile.kernel_kinds import COMM, COMP, kernel_kind
from ddpsim.trace.profile.kineto import CpuOp
from ddpsim.trace.profile.result import HookSpan
from ddpsim.trace.profile.steps import ACCUMULATE_GRAD, BACKWARD_OP, Launched, PhaseWindows, StepOps

_EVALUATE_ACCUMULATE = "autograd::engine::evaluate_function: " + ACCUMULATE_GRAD


class DeviceDone:
    """When the device finished the non-communication work launched up to a time, over the
    whole profile (its launched ops in launch order)."""

    def __init__(self, launched: Sequence[Launched]) -> None:
        work = [lz for lz in launched if kernel_kind(lz.op.name) != COMM]
        self._launch_ts = [lz.launch_us for lz in work]
        self._done = list(accumulate((lz.op.end for lz in work), max))  # running max of the ends
        #: the longest launch-to-start time of an op that found the device idle (all the profiled work
        #: launched before it done), the profile's first op aside: the device's launch latency, at worst
        self.latency_us = max((lz.op.ts - lz.launch_us for k, lz in enumerate(work[1:], 1)
                               if self._done[k - 1] < lz.launch_us), default=0.0)

    def before(self, t: float, strict: bool = False) -> float | None:
        """When the device finished every non-communication op launched at or (``strict``) before ``t``
        (None: none was)."""
        k = (bisect_left if strict else bisect_right)(self._launch_ts, t)
        return self._done[k - 1] if k else None


def critical_fields(done: DeviceDone, s: StepOps, w: PhaseWindows, grads: Sequence[CpuOp]) -> dict[str, Any]:
    """The step's fields of :class:`~ddpsim.trace.profile.result.ProfileIteration` that place its
    boundaries on both timelines (module docstring): ``module_start_s``,
    ``model_backward_cpu_end_s``, ``gpu_done``, ``hooks`` (of ``grads``, DDP's gradients:
    :func:`~ddpsim.trace.profile.steps.ddp_gradients`), ``intervals``, ``inherited_s``."""
    t0 = s.window.start
    # microseconds on the profile's clock -> seconds from the step start (None stays None)
    s_of: Callable[[Any], Any] = lambda t: None if t is None else (t - t0) * 1e-6  # noqa: E731
    ops = sorted(s.cpu, key=lambda o: (o.ts, -o.dur))
    bwd_ops = [o for o in ops if w.backward.holds(o.ts)]
    span = next(o for o in ops if o.name == f"ProfilerStep#{s.step}")
    ddp = next((o for o in ops if o.tid == span.tid and o.name == "DistributedDataParallel.forward"), None)
    module = module_start(s, ops, ddp) if ddp is not None else w.forward.start
    model_end = max(o.end for o in bwd_ops if o.name.startswith(BACKWARD_OP))
    opt_end = w.optimizer.end if w.optimizer_annotated else w.backward.end
    # where the step's first device op (launch order) started later than its launch, the device's launch
    # latency and the profiled work before it allow, the device ran work launched before profiling began
    first = next((lz for lz in s.launched if kernel_kind(lz.op.name) != COMM), None)
    prior = None if first is None else done.before(first.launch_us, strict=True)
    inherited = None if first is None else first.op.ts - done.latency_us
    if inherited is not None and inherited <= max(first.launch_us, -math.inf if prior is None else prior):
        inherited = None
    done_fwd = done.before(w.forward.start)
    inherited_s = 0.0
    if inherited is not None:
        inherited_s = (inherited - max(w.forward.start, done_fwd if done_fwd is not None else -math.inf)) * 1e-6
        done_fwd = max(done_fwd or inherited, inherited)
    gpu_done = {"forward": s_of(done_fwd), **{k: s_of(done.before(t)) for k, t in (
        ("module", module), ("backward", w.backward.start), ("model_backward_end", model_end),
        ("backward_end", w.backward.end), ("optimizer_end", opt_end))}}
    return {"module_start_s": s_of(module), "model_backward_cpu_end_s": s_of(model_end), "gpu_done": gpu_done,
            "hooks": _hooks(bwd_ops, grads, done, s_of), "inherited_s": inherited_s,
            "intervals": tuple((s_of(lz.op.ts), s_of(lz.op.end), kernel_kind(lz.op.name))
                               for lz in sorted(s.launched, key=lambda lz: lz.op.ts))}


def module_start(s: StepOps, ops: Sequence[CpuOp], ddp: CpuOp) -> float:
    """Where the module's forward begins inside DDP's forward: the first direct child op after
    the last buffer broadcast (``c10d::broadcast_``; the start of DDP's forward when none) that
    launches a compute kernel (copies and the broadcast's flatten do not count)."""
    d0, d1 = ddp.ts, ddp.end
    inside = [o for o in ops if o.tid == ddp.tid and d0 < o.ts < d1 and o is not ddp]
    bcasts = [o for o in inside if o.name == "c10d::broadcast_"]
    after = bcasts[-1].end if bcasts else d0
    comp = [lz.launch_us for lz in s.launched
            if after <= lz.launch_us < d1 and lz.tid == ddp.tid and kernel_kind(lz.op.name) == COMP]
    if not comp:
        return after
    first_launch = min(comp)
    # the outermost op holding the first launch
    holders = [o for o in inside if after <= o.ts <= first_launch and o.end >= first_launch]
    return min(o.ts for o in holders) if holders else first_launch


def _holder(ops: Sequence[CpuOp], starts: Sequence[float], a: CpuOp) -> CpuOp | None:
    """The last of ``ops`` (start order, ``starts`` their starts) to start at or before ``a``,
    where it holds ``a`` (an AccumulateGrad's evaluate_function: they do not nest)."""
    k = bisect_right(starts, a.ts) - 1
    return ops[k] if k >= 0 and a.end <= ops[k].end else None


def _hooks(bwd_ops: Sequence[CpuOp], grads: Sequence[CpuOp], done: DeviceDone,
           s_of: Callable[[Any], Any]) -> tuple[HookSpan, ...]:
    """Per DDP gradient's AccumulateGrad (ready order, on whichever thread ran it): its op end, its evaluate_function's span, and when the device
    finished the work launched before the op ended."""
    evals = [o for o in bwd_ops if o.name == _EVALUATE_ACCUMULATE]  # start order
    starts = [e.ts for e in evals]
    by_tid: dict[object, list[CpuOp]] = {}
    for e in evals:
        by_tid.setdefault(e.tid, []).append(e)
    tid_starts = {tid: [e.ts for e in es] for tid, es in by_tid.items()}
    ar = [o.ts for o in bwd_ops if o.name == "c10d::allreduce_"]
    out = []
    for a in grads:
        ev = _holder(by_tid.get(a.tid, []), tid_starts.get(a.tid, []), a) or _holder(evals, starts, a) or a
        n = bisect_right(ar, ev.end) - bisect_right(ar, ev.ts)
        out.append(HookSpan(op_end_s=s_of(a.end), start_s=s_of(ev.ts), end_s=s_of(ev.end), op_s=a.dur * 1e-6,
                            launches=n, gpu_ready_s=s_of(done.before(a.end))))
    return tuple(out)
