"""One rank's torch.profiler steps as the two timelines ``ddpsim compare`` scores a prediction on.

A Kineto trace (what ``torch.profiler``'s ``export_chrome_trace`` or ``tensorboard_trace_handler``
writes) holds the host's CPU ops (``cat`` ``cpu_op`` / ``user_annotation``), the CUDA runtime
calls (``cuda_runtime``) and the device's kernels, copies and sets (``kernel``, ``gpu_memcpy``,
``gpu_memset``) on one clock (microseconds); a kernel is tied to the runtime call that launched
it by ``args.correlation``. Per ``ProfilerStep#N`` this module takes:

* the phases on both timelines: DDP's forward (``DistributedDataParallel.forward``) and the
  module's first kernel-launching op after DDP's pre-forward work (its buffer broadcast:
  ``_sync_buffers``); the backward on the autograd thread (the thread running the
  ``torch::autograd::AccumulateGrad`` ops; first to last op) and the kernels it launched; the
  optimizer (``Optimizer.step#``) and its kernels; ``Optimizer.zero_grad#``;
* per ``AccumulateGrad``, in ready order, when the op ended on the CPU (DDP's hook runs next,
  ``Reducer::autograd_hook``) and the span of its ``evaluate_function`` (the op, DDP's hook and,
  for a bucket's last gradient, the bucket's launch);
* DDP's bucket launches: ``c10d::allreduce_`` on the autograd thread, with the
  ``record_param_comms`` it holds (``ProcessGroupNCCL::collective``: stream sync, ``ncclAllReduce``);
* every device interval, classified as HolisticTraceAnalysis classifies kernels
  (``hta/utils/utils.py`` ``get_kernel_type``: a name starting ``nccl`` (or holding ``gloo``) is
  communication, one holding ``Memcpy``/``Memset`` memory, anything else computation);
* the NCCL all-reduce kernels the autograd thread launched (DDP's buckets, and its used-map
  all-reduce with ``find_unused_parameters``; start, duration, ``In msg nelems``) in launch order;
* the ``cudaLaunchKernel`` family's calls (count and CPU time).

Times in :class:`StepTimeline` are seconds from the step's ``ProfilerStep`` start.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ddpsim.errors import InputError

_STEP = re.compile(r"ProfilerStep#(\d+)$")
_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaLaunchCooperativeKernel")
_ACCUMULATE = "torch::autograd::AccumulateGrad"
_EVALUATE_ACCUMULATE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def kernel_kind(name: str) -> str:
    """``comm``, ``memory`` or ``comp``: HolisticTraceAnalysis's kernel types
    (``get_kernel_type``: ``is_comm_kernel`` -- a name starting with ``nccl`` or holding ``gloo`` --,
    ``is_memory_kernel`` -- ``Memcpy`` or ``Memset`` in the name --, else computation)."""
    if name.startswith("nccl") or "gloo" in name.lower():
        return "comm"
    if "Memcpy" in name or "Memset" in name:
        return "memory"
    return "comp"


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
    ``forward``, ``module``, ``backward``, ``backward_end`` and ``optimizer_end`` to when the
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
    optimizer_cpu_start_s: float
    optimizer_cpu_end_s: float
    gpu_done: dict[str, float | None]
    hooks: tuple[HookSpan, ...]
    launches: tuple[BucketLaunch, ...]
    allreduces: tuple[CommKernel, ...]
    intervals: tuple[tuple[float, float, str], ...]
    kernel_launches: int
    kernel_launch_s: float


def read_events(path: str | Path | Any) -> list[dict[str, Any]]:
    """The events of a Kineto JSON (``.json`` or ``.json.gz``) this module reads, as Chrome
    trace records, from the profile import's streaming reader
    (:func:`ddpsim.trace.profile.kineto.read_profile`: only the kept fields of each event), or
    from a :class:`~ddpsim.trace.profile.kineto.KinetoProfile` that reader already returned.

    Raises:
        InputError: an unreadable file, not JSON, truncated, or no ``traceEvents`` list."""
    from ddpsim.trace.profile import nccl_kernels
    from ddpsim.trace.profile.kineto import KinetoProfile, read_profile

    prof = path if isinstance(path, KinetoProfile) else read_profile(path)
    version = nccl_kernels.profile_version(prof.distributed_info)
    out: list[dict[str, Any]] = [{"cat": o.cat, "name": o.name, "ts": o.ts, "dur": o.dur, "tid": o.tid} for o in prof.cpu_ops]
    out += [{"cat": "cuda_runtime", "name": r.name, "ts": r.ts, "dur": r.dur, "tid": r.tid, "args": {"correlation": r.correlation}}
            for r in prof.runtime]
    for g in prof.gpu:
        args = {"correlation": g.correlation, "In msg nelems": (g.args or {}).get("In msg nelems")}
        if g.is_nccl:
            args["algorithm"], args["protocol"], args["ran"] = nccl_kernels.ran(
                g.name, nccl_kernels.block_of(g.block, prof.device_properties), version)
        out.append({"cat": g.cat, "name": g.name, "ts": g.ts, "dur": g.dur, "args": args})
    return out


def step_timelines(events: list[dict[str, Any]], source: str = "profile") -> tuple[StepTimeline, ...]:
    """Every ``ProfilerStep#N`` of ``events`` (:func:`read_events`) that has a backward.

    Raises:
        InputError: no ProfilerStep, or no step with AccumulateGrad ops (no backward)."""
    steps = sorted((e for e in events if e.get("cat") == "user_annotation" and _STEP.match(str(e.get("name")))),
                   key=lambda e: e["ts"])
    if not steps:
        raise InputError(f"{source}: no ProfilerStep#N span; expected a trace recorded with profiler.step() per iteration")
    index = _Index(events)
    out = [s for s in (_step(index, e) for e in steps) if s is not None]
    if not out:
        raise InputError(f"{source}: no step has a backward (no {_ACCUMULATE} op); expected a training step's profile")
    return tuple(out)


class _Index:
    """The events by kind: CPU ops per thread (sorted), runtime calls by correlation, device intervals."""

    def __init__(self, events: Iterable[dict[str, Any]]) -> None:
        self.cpu: list[dict[str, Any]] = []
        self.runtime: dict[Any, dict[str, Any]] = {}
        self.device: list[dict[str, Any]] = []
        for e in events:
            cat = e.get("cat")
            if cat in ("cpu_op", "user_annotation"):
                self.cpu.append(e)
            elif cat == "cuda_runtime":
                corr = (e.get("args") or {}).get("correlation")
                if corr is not None:
                    self.runtime[corr] = e
            elif cat in _DEVICE_CATS:
                self.device.append(e)
        self.cpu.sort(key=lambda e: (e["ts"], -e["dur"]))
        self.device.sort(key=lambda e: e["ts"])
        self.launch_calls = sorted((e for e in self.runtime.values() if e.get("name") in _LAUNCHES), key=lambda e: e["ts"])
        work = sorted((self.runtime[c]["ts"], _end(k)) for k in self.device if kernel_kind(k["name"]) != "comm"
                      and (c := (k.get("args") or {}).get("correlation")) in self.runtime)
        self._launch_ts = [t for t, _ in work]
        self._done: list[float] = []
        for _, end in work:
            self._done.append(max(end, self._done[-1]) if self._done else end)

    def done_before(self, t: float) -> float | None:
        """When the device finished every non-communication event launched before ``t`` (None: none was)."""
        k = bisect_right(self._launch_ts, t)
        return self._done[k - 1] if k else None

    def cpu_in(self, t0: float, t1: float) -> list[dict[str, Any]]:
        return [e for e in self.cpu if t0 <= e["ts"] < t1]

    def launched_in(self, t0: float, t1: float, tid: Any = None) -> list[dict[str, Any]]:
        """Device events whose launching runtime call began in ``[t0, t1)`` (on thread ``tid``)."""
        out = []
        for k in self.device:
            r = self.runtime.get((k.get("args") or {}).get("correlation"))
            if r is not None and t0 <= r["ts"] < t1 and (tid is None or r.get("tid") == tid):
                out.append(k)
        return out


def _first(ops: list[dict[str, Any]], prefix: str) -> dict[str, Any] | None:
    return next((e for e in ops if str(e.get("name", "")).startswith(prefix)), None)


def _end(e: dict[str, Any]) -> float:
    return e["ts"] + e["dur"]


def _step(ix: _Index, span: dict[str, Any]) -> StepTimeline | None:
    t0, t1 = span["ts"], _end(span)
    ops = ix.cpu_in(t0, t1)
    acc = [e for e in ops if e.get("name") == _ACCUMULATE]
    if not acc:
        return None
    autograd_tid = acc[0].get("tid")
    bwd_ops = [e for e in ops if e.get("tid") == autograd_tid]
    if autograd_tid == span.get("tid"):  # the backward ran on the calling thread: from its first autograd op
        first = min(e["ts"] for e in bwd_ops if str(e.get("name", "")).startswith("autograd::engine::evaluate_function"))
        until = next((e["ts"] for e in bwd_ops if str(e.get("name", "")).startswith("Optimizer.step#")), t1)
        bwd_ops = [e for e in bwd_ops if first <= e["ts"] < until]
    main = [e for e in ops if e.get("tid") == span.get("tid")]
    ddp = _first(main, "DistributedDataParallel.forward")
    opt = _first(main, "Optimizer.step#")
    zero = _first(main, "Optimizer.zero_grad#")
    fwd_start = ddp["ts"] if ddp is not None else t0
    bwd_start, bwd_end = bwd_ops[0]["ts"], max(_end(e) for e in bwd_ops)
    s = lambda t: (t - t0) * 1e-6  # noqa: E731 - microseconds on the profile's clock -> seconds from the step start
    launches = _launches(bwd_ops)
    module = _module_start(ix, main, ddp) if ddp is not None else fwd_start
    dev = ix.launched_in(t0, t1)
    bwd_comm = ix.launched_in(t0, t1, autograd_tid)  # DDP launches its buckets from the autograd hooks
    calls = [c for c in ix.launch_calls if t0 <= c["ts"] < t1]
    return StepTimeline(
        step=int(_STEP.match(span["name"]).group(1)), start_us=t0, step_s=span["dur"] * 1e-6, forward_start_s=s(fwd_start),
        module_start_s=s(module),
        zero_grad_s=zero["dur"] * 1e-6 if zero is not None else 0.0,
        backward_cpu_start_s=s(bwd_start), backward_cpu_end_s=s(bwd_end),
        optimizer_cpu_start_s=s(opt["ts"]) if opt is not None else s(bwd_end),
        optimizer_cpu_end_s=s(_end(opt)) if opt is not None else s(bwd_end),
        gpu_done={k: _opt(ix.done_before(t), s) for k, t in (
            ("forward", fwd_start), ("module", module), ("backward", bwd_start), ("backward_end", bwd_end),
            ("optimizer_end", _end(opt) if opt is not None else bwd_end))},
        hooks=_hooks(_with_other_threads_grads(bwd_ops, ops, autograd_tid), ix, s), launches=tuple(BucketLaunch(start_s=s(a["ts"]), op_s=a["dur"] * 1e-6, enqueue_s=q)
                                                 for a, q in launches),
        allreduces=tuple(_comm_kernel(k, s) for k in bwd_comm if kernel_kind(k["name"]) == "comm" and "AllReduce" in k["name"]),
        intervals=tuple((s(k["ts"]), s(_end(k)), kernel_kind(k["name"])) for k in dev),
        kernel_launches=len(calls), kernel_launch_s=sum(c["dur"] for c in calls) * 1e-6)


def _comm_kernel(k: dict[str, Any], s: Any) -> CommKernel:
    args = k.get("args") or {}
    return CommKernel(start_s=s(k["ts"]), duration_s=k["dur"] * 1e-6, numel=args.get("In msg nelems"), name=k["name"],
                      algorithm=args.get("algorithm"), protocol=args.get("protocol"), ran=args.get("ran", "?"))


def _module_start(ix: _Index, main: list[dict[str, Any]], ddp: dict[str, Any]) -> float:
    """Where the module's forward begins inside DDP's forward: the first direct child op after
    the last buffer broadcast (``c10d::broadcast_``; the start of DDP's forward when none) that
    launches a compute kernel (copies and the broadcast's flatten do not count)."""
    d0, d1 = ddp["ts"], _end(ddp)
    inside = [e for e in main if d0 < e["ts"] < d1 and e is not ddp]
    bcasts = [e for e in inside if e.get("name") == "c10d::broadcast_"]
    after = _end(bcasts[-1]) if bcasts else d0
    comp = [k for k in ix.launched_in(after, d1, ddp.get("tid")) if kernel_kind(k["name"]) == "comp"]
    if not comp:
        return after
    first_launch = min(ix.runtime[k["args"]["correlation"]]["ts"] for k in comp)
    tops = [e for e in inside if e["ts"] >= after and e["ts"] <= first_launch]
    # the outermost op holding the first launch: the latest-starting op among those that contain it at the top level
    holders = [e for e in tops if _end(e) >= first_launch]
    return min(e["ts"] for e in holders) if holders else first_launch


def _opt(t: float | None, s: Any) -> float | None:
    return None if t is None else s(t)


def _with_other_threads_grads(bwd_ops: list[dict[str, Any]], ops: list[dict[str, Any]], tid: Any) -> list[dict[str, Any]]:
    """``bwd_ops`` with the AccumulateGrad ops other threads ran inside the backward (the
    autograd engine runs a CPU-side node on the thread that called backward), in time order, as
    the import counts them."""
    t0, t1 = bwd_ops[0]["ts"], max(_end(e) for e in bwd_ops)
    other = [e for e in ops if e.get("tid") != tid and e.get("name") in (_ACCUMULATE, _EVALUATE_ACCUMULATE)
             and t0 <= e["ts"] <= t1]
    return sorted(bwd_ops + other, key=lambda e: e["ts"]) if other else bwd_ops


def _hooks(bwd_ops: list[dict[str, Any]], ix: _Index, s: Any) -> tuple[HookSpan, ...]:
    """Per AccumulateGrad (ready order): its op end, its evaluate_function's span, and when the
    device finished the work launched before the op ended."""
    evals = [e for e in bwd_ops if e.get("name") == _EVALUATE_ACCUMULATE]
    accs = [e for e in bwd_ops if e.get("name") == _ACCUMULATE]
    ar = [e["ts"] for e in bwd_ops if e.get("name") == "c10d::allreduce_"]
    out = []
    for a in accs:
        ev = next((e for e in evals if e["ts"] <= a["ts"] and _end(a) <= _end(e)), a)
        n = bisect_right(ar, _end(ev)) - bisect_right(ar, ev["ts"])
        out.append(HookSpan(op_end_s=s(_end(a)), start_s=s(ev["ts"]), end_s=s(_end(ev)), op_s=a["dur"] * 1e-6, launches=n,
                            gpu_ready_s=_opt(ix.done_before(_end(a)), s)))
    return tuple(out)


def _launches(bwd_ops: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """Each ``c10d::allreduce_`` of the backward with its ``record_param_comms``'s seconds."""
    out = []
    comms = [e for e in bwd_ops if e.get("name") == "record_param_comms"]
    for a in (e for e in bwd_ops if e.get("name") == "c10d::allreduce_"):
        inner = [c["dur"] for c in comms if a["ts"] <= c["ts"] and _end(c) <= _end(a)]
        out.append((a, (max(inner) if inner else a["dur"]) * 1e-6))
    return out
