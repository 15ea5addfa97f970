"""What a profiled DDP run measured, per step, on its critical path: every phase boundary is
``max(CPU time, end of the device work launched before it)``, and the step splits into
:data:`TERMS` (pre-forward, forward, backward, DDP's gradient copy-back, exposed communication,
optimizer, zero_grad, slower rank, other); per bucket the ``c10d::allreduce_`` launch and the
NCCL kernel's start and end; the overlap as HolisticTraceAnalysis computes it
(``get_comm_comp_overlap``, ``hta/analyzers/communication_analysis.py``). docs/MODEL.md,
"Comparing with a profile"."""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ddpsim.errors import InputError
from ddpsim.network.host_costs import HostCosts
from ddpsim.trace.records import IterationSample, Trace
from ddpsim.trace.intervals import merge_intervals, overlap_ratio
from ddpsim.trace.profile.result import ProfileIteration

#: the phases a step is split into, in step order (module docstring)
TERMS = ("pre_forward_s", "forward_s", "backward_s", "grad_copies_s", "exposed_comm_s", "optimizer_s", "zero_grad_s",
         "slower_rank_s", "other_s")


def hta_overlap_ratio(intervals: Sequence[tuple[float, float, str]]) -> float | None:
    """HTA's computation-communication overlap of ``(start, end, kind)`` device intervals: the time both
    merged kinds run over the merged communication time (copies count as neither); None without any."""
    return overlap_ratio([(a, b) for a, b, k in intervals if k == "comm"], [(a, b) for a, b, k in intervals if k == "comp"])


@dataclass(frozen=True)
class Boundaries:
    """A step's phase boundaries on its critical path (seconds from the step's ProfilerStep start)."""

    start_s: float
    module_s: float
    backward_s: float
    model_backward_end_s: float
    backward_end_s: float
    optimizer_end_s: float


def _later(cpu: float, gpu: float | None) -> float:
    return cpu if gpu is None else max(cpu, gpu)


def _cpu_reaches(st: ProfileIteration) -> dict[str, float]:
    """When the CPU reaches each boundary, by its ``gpu_done`` key, in :class:`Boundaries`' order."""
    return {"forward": st.forward.cpu_start_s, "module": st.module_start_s, "backward": st.backward.cpu_start_s,
            "model_backward_end": st.model_backward_cpu_end_s, "backward_end": st.backward.cpu_end_s,
            "optimizer_end": st.optimizer_cpu_end_s}


def boundaries(st: ProfileIteration) -> Boundaries:
    """The phase boundaries of ``st``: each the later of the CPU reaching it and the device finishing
    the (non-communication) work launched before it, and never before the previous one."""
    return Boundaries(*itertools.accumulate((_later(t, st.gpu_done[k]) for k, t in _cpu_reaches(st).items()), max))


def _tail(st: ProfileIteration, b: Boundaries) -> tuple[float, float, float, float]:
    """After the model's backward (``t1``) the CPU runs DDP's finalize to ``h``; the last all-reduce's
    end past ``h`` is exposed (``t2``); the copy-back's device work ends at DDP's effective end (``t3``).
    Returns the copy-back on the host (``h - t1``) and on the device (``t3 - t2``), the exposed
    communication and ``t3``."""
    last_end = max((k.end_s for k in st.allreduces), default=-math.inf)
    t1 = b.model_backward_end_s
    h = max(t1, st.backward.cpu_end_s)
    t2 = max(h, last_end)
    t3 = max(t2, b.backward_end_s)
    return h - t1, t3 - t2, t2 - h, t3


def paced(st: ProfileIteration, f: dict[str, Any]) -> dict[str, float]:
    """The step's critical path by what paced it: ``host_s`` the phases whose end the CPU reached last
    (with DDP's host copy-back, zero_grad and the time outside the phases), ``device_s`` those the device
    reached last (with the copy-back kernels), ``comm_s`` the exposed communication."""
    cpu, ends = _cpu_reaches(st), {"pre_forward_s": "module", "forward_s": "backward", "backward_s": "model_backward_end",
                                   "optimizer_s": "optimizer_end"}
    cpu_last = {term: cpu[k] >= (st.gpu_done[k] or -math.inf) for term, k in ends.items()}
    host = sum(f[k] for k, c in cpu_last.items() if c) + f["copy_back_host_s"] + f["zero_grad_s"] + max(0.0, f["other_s"])
    device = sum(f[k] for k, c in cpu_last.items() if not c) + f["copy_back_device_s"]
    return {"host_s": host, "device_s": device, "comm_s": f["exposed_comm_s"]}


#: the labels of what paced a step, by the largest share of its critical path (:func:`paced`)
BOUND = {"host_s": "host-bound", "device_s": "device-bound", "comm_s": "communication-bound"}


def bound_of(shares: dict[str, float]) -> str:
    """The label of the largest of :func:`paced`'s shares (ties to the first)."""
    return BOUND[max(BOUND, key=lambda k: shares[k])]


def step_period_s(st: ProfileIteration, nxt: ProfileIteration | None) -> float:
    """The step's time on its critical path: its ``ProfilerStep`` span, or longer where the device paces
    the run (its CPU runs ahead): from its effective start to the next step's (the last step: to its
    optimizer's effective end plus the CPU's time before its forward)."""
    b = boundaries(st)
    if nxt is not None:
        until = (nxt.start_us - st.start_us) * 1e-6 + boundaries(nxt).start_s
    else:
        until = b.optimizer_end_s + st.forward.cpu_start_s
    return max(st.step_s, until - b.start_s)


def bucket_kernels(st: ProfileIteration, numels: Sequence[int] | None) -> list[int]:
    """Indices into ``st.allreduces`` of DDP's buckets: the first subsequence whose ``In msg nelems`` are
    ``numels`` (other all-reduces between them passed by); every all-reduce when it is not found."""
    if numels:
        out, i = [], 0
        for j, k in enumerate(st.allreduces):
            if i < len(numels) and k.numel == numels[i]:
                out.append(j)
                i += 1
        if i == len(numels):
            return out
    return list(range(len(st.allreduces)))


def step_figures(st: ProfileIteration, nxt: ProfileIteration | None = None, numels: Sequence[int] | None = None) -> dict[str, Any]:
    """One step's :data:`TERMS` (adding up to ``step_s``, :func:`step_period_s`), HTA's overlap and per
    bucket (:func:`bucket_kernels`) launch/start/end from the step's effective start."""
    b = boundaries(st)
    copy_host, copy_device, exposed, t3 = _tail(st, b)
    out: dict[str, Any] = {
        "step": st.step, "step_s": step_period_s(st, nxt), "pre_forward_s": b.module_s - b.start_s, "forward_s": b.backward_s - b.module_s,
        "backward_s": b.model_backward_end_s - b.backward_s, "grad_copies_s": copy_host + copy_device, "exposed_comm_s": exposed,
        "optimizer_s": max(0.0, b.optimizer_end_s - t3), "zero_grad_s": st.zero_grad_s,
        "slower_rank_s": 0.0}
    out["other_s"] = out["step_s"] - sum(out[k] for k in TERMS[:-1])
    out["copy_back_host_s"], out["copy_back_device_s"] = copy_host, copy_device
    out["inherited_s"] = st.inherited_s
    out["paced"] = paced(st, out)
    out["bound"] = bound_of(out["paced"])
    out["overlap_ratio"] = hta_overlap_ratio(st.intervals)
    picked = [(j, st.allreduces[j]) for j in bucket_kernels(st, numels)]
    out["buckets"] = [{"bucket": i, "numel": k.numel, "launch_s": _launch_s(st, k) - b.start_s,
                       "start_s": k.start_s - b.start_s, "end_s": k.end_s - b.start_s, "duration_s": k.duration_s,
                       "algorithm": k.algorithm, "protocol": k.protocol, "ran": k.ran}
                      for i, (j, k) in enumerate(picked)]
    return out


def _launch_s(st: ProfileIteration, k: Any) -> float:
    """When the CPU launched ``k``: its bucket's ``c10d::allreduce_``, else its launch call or start."""
    if k.bucket_index is not None and k.bucket_index < len(st.buckets):
        return st.buckets[k.bucket_index].op_start_s
    return k.launch_cpu_s if k.launch_cpu_s is not None else k.start_s


def effective_ready_s(st: ProfileIteration) -> list[float]:
    """Per AccumulateGrad in ready order, when its gradient was ready on the critical path (the later of
    the op's CPU end and its device work), from the backward's start."""
    b = boundaries(st)
    return [max(0.0, _later(h.op_end_s, h.gpu_ready_s) - b.backward_s) for h in st.hooks]


def effective_trace(trace: Trace, steps: Sequence[ProfileIteration], source: str) -> Trace:
    """``trace`` (the profile's import) with one iteration per step on the critical path
    (:func:`step_figures`, :func:`effective_ready_s`). InputError: a step of another AccumulateGrad count."""
    order = trace.grad_ready_order
    samples = []
    for st in steps:
        ready = effective_ready_s(st)
        if len(ready) != len(order):
            raise InputError(f"{source}: ProfilerStep#{st.step} has {len(ready)} AccumulateGrad ops; expected "
                             f"{len(order)} (one per parameter with a gradient, as the imported trace has)")
        by_param = dict(zip(order, ready))
        f = step_figures(st)
        # the host's copy-back stays in the simulated backward: the last all-reduce hides under it as it ran
        samples.append(IterationSample(forward_s=f["forward_s"], backward_s=max(f["backward_s"] + f["copy_back_host_s"], max(ready)),
                                       optimizer_s=f["optimizer_s"], zero_grad_s=f["zero_grad_s"],
                                       grad_ready_s=tuple(by_param.get(i) for i in range(trace.num_params))))
    synthetic = {"kind": "profile-critical-path", "source": source,
                 "method": "phases and gradient-ready times as max(CPU time, GPU time) on the profile's timelines "
                           "(ddpsim.validation.profile_compare)"}
    return replace(trace, iterations=tuple(samples), synthetic=synthetic, hook_overhead_frac=None)


def host_costs_from_steps(steps: Sequence[ProfileIteration]) -> tuple[HostCosts, dict[str, Any]]:
    """DDP's host costs measured on the CPU timeline, and the figures behind them: ``pre_forward_s`` (mean,
    DDP's forward to the module's first kernel launch); medians of ``hook_s_per_param`` (AccumulateGrad's
    ``evaluate_function`` minus the op, hooks launching no bucket: ``Reducer::autograd_hook``,
    ``mark_variable_ready``, ``mul_out``), ``enqueue_s`` (``record_param_comms`` in ``c10d::allreduce_``:
    ``ProcessGroupNCCL::collective``) and ``bucket_launch_s`` (the rest of ``c10d::allreduce_``)."""
    hooks = [h.end_s - h.start_s - h.op_s for st in steps for h in st.hooks if h.launches == 0]
    launches = [x for st in steps for x in st.buckets]
    pre = [boundaries(st).module_s - boundaries(st).start_s for st in steps]
    launch_calls = sum(st.host.num_kernel_launches for st in steps)
    host = HostCosts(pre_forward_s=statistics.fmean(pre),
                     hook_s_per_param=statistics.median(hooks) if hooks else HostCosts().hook_s_per_param,
                     bucket_launch_s=statistics.median(x.op_s - x.enqueue_s for x in launches) if launches else HostCosts().bucket_launch_s,
                     enqueue_s=statistics.median(x.enqueue_s for x in launches) if launches else HostCosts().enqueue_s)
    detail = {"num_hooks": len(hooks), "num_bucket_launches": len(launches),
              "kernel_launch_s_per_call": sum(st.host.kernel_launch_s for st in steps) / launch_calls if launch_calls else None,
              "kernel_launches_per_step": launch_calls / len(steps),
              "accumulate_grad_op_s": statistics.median(h.op_s for st in steps for h in st.hooks)}
    return host, detail


def median_or_none(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def measured_summary(steps: Sequence[ProfileIteration], numels: Sequence[int] | None = None) -> dict[str, Any]:
    """Per step :func:`step_figures`, their means, and HTA's overlap over all the steps at once (as
    ``get_comm_comp_overlap`` takes a whole trace)."""
    figs = [step_figures(st, nxt, numels) for st, nxt in zip(steps, list(steps[1:]) + [None])]
    mean = {k: statistics.fmean(f[k] for f in figs) for k in ("step_s", "copy_back_host_s", "copy_back_device_s") + TERMS}
    mean["overlap_ratio"] = hta_overlap_ratio([(st.start_us * 1e-6 + a, st.start_us * 1e-6 + b, k)
                                               for st in steps for a, b, k in st.intervals])
    shares = {k: statistics.fmean(f["paced"][k] for f in figs) for k in BOUND}
    mean["paced"], mean["bound"] = shares, bound_of(shares)
    buckets = []  # per bucket, medians over the steps; transfer_bound_s the shortest kernel (all wait for peers)
    for i, bs in enumerate(zip(*(f["buckets"] for f in figs))):
        durs = [b["duration_s"] for b in bs]
        buckets.append({"bucket": i, **{k: bs[0][k] for k in ("numel", "algorithm", "protocol", "ran")},
                        **{k: median_or_none([b[k] for b in bs]) for k in ("launch_s", "start_s", "end_s", "duration_s")},
                        "transfer_bound_s": min(durs), "wait_mean_s": statistics.fmean(d - min(durs) for d in durs)})
    return {"steps": [{k: v for k, v in f.items() if k != "buckets"} for f in figs], "mean": mean, "buckets": buckets}


def launch_delays(steps: Sequence[ProfileIteration]) -> list[dict[str, Any]]:
    """Per bucket, medians over the steps of the CPU time from its last AccumulateGrad's end to its
    ``c10d::allreduce_`` start, and of that launch op."""
    per: dict[int, list[tuple[float, float]]] = {}
    for st in steps:
        launching = [h for h in st.hooks for _ in range(h.launches)]
        for i, (h, x) in enumerate(zip(launching, st.buckets)):
            per.setdefault(i, []).append((x.op_start_s - h.op_end_s, x.op_s))
    return [{"bucket": i, "hook_to_launch_s": median_or_none([d for d, _ in v]),
             "launch_op_s": median_or_none([o for _, o in v])} for i, v in sorted(per.items())]


def gpu_busy_s(steps: Sequence[ProfileIteration]) -> float:
    """The mean over the steps of the GPU's busy time (kernels, copies, sets merged)."""
    return statistics.fmean(sum(b - a for a, b in merge_intervals([(a, b) for a, b, _ in st.intervals])) for st in steps)
