"""The import: one profile's events -> :class:`~ddpsim.trace.profile.result.ProfileImport`; steps
cut by :mod:`~ddpsim.trace.profile.steps`, gradients named by :mod:`~ddpsim.trace.profile.mapping`,
the trace built from the GPU timeline (CPU spans in ``environment.cpu_span_phase_s``).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any, Sequence

from ddpsim.errors import InputError, require
from ddpsim.trace.intervals import merge_intervals
from ddpsim.trace.profile import nccl_kernels, steps as st
from ddpsim.trace.profile.critical import DeviceDone, critical_fields
from ddpsim.trace.profile.kineto import KinetoProfile, int_dims, int_or_none, read_profile
from ddpsim.trace.profile.mapping import GradInfo, map_params
from ddpsim.trace.profile.result import (CollectiveKernel, StepHostTimes, PhaseTimes, ProfileEnvironment,
                                         ProfileImport, ProfileIteration, RecordedBucket)
from ddpsim.trace.records import IterationSample, Trace
from ddpsim.units import DTYPE_SIZE_BYTES

US = st.US
#: the profile's dtype names (c10's ``ScalarType`` names, as ``record_param_comms`` writes them) as ddpsim's
_DTYPES = {"Float": "float32", "Half": "float16", "BFloat16": "bfloat16", "Double": "float64", "Long": "int64",
           "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
           "ComplexFloat": "complex64", "ComplexDouble": "complex128"}


def import_profile(path: str | Path | KinetoProfile, model: str | None = None, *, seed: int = 0,
                   command: str | None = None) -> ProfileImport:
    """Import one rank's torch.profiler trace (a ``.json[.gz]`` path or :func:`read_profile`'s events);
    ``model`` (built with ``seed``) names its gradients (:mod:`~ddpsim.trace.profile.mapping`).
    InputError: one line naming what the profile lacks, or a model that does not match it."""
    prof = path if isinstance(path, KinetoProfile) else read_profile(path)
    built = _Steps(prof)
    dims = _batch_input(built)
    iterations = tuple(built.iterations)
    counts = {len(it.grad_ready_s) for it in iterations}
    if len(counts) > 1:
        built.notes.append(f"the number of gradients differs between steps ({sorted(counts)}); the last step's order names them")
    grads = GradInfo(num_grads=len(iterations[-1].grad_ready_s), buckets=iterations[-1].buckets,
                     shapes=tuple(built.grad_shapes[-1]), work=tuple(built.grad_work[-1]),
                     input_shape=dims[1:] if dims is not None else None)
    mapping_out = map_params(grads, model=model, seed=seed, source=f"profile {prof.path}")
    device = min((g.device for g in prof.gpu if g.device is not None), default=0)
    props = next((d for d in prof.device_properties if d.get("id") == device),
                 prof.device_properties[0] if prof.device_properties else {})
    info = prof.distributed_info
    name, sms = props.get("name"), props.get("numSms")
    env = ProfileEnvironment(gpu_name=name if isinstance(name, str) else None, num_sms=sms if isinstance(sms, int) else None,
                             world_size=_ranks(info, prof.path), rank=int_or_none(info.get("rank")),
                             backend=info.get("backend") if isinstance(info.get("backend"), str) else None,
                             nccl_version=nccl_kernels.profile_version(info),
                             batch_size=dims[0] if dims is not None else None)
    trace = _trace(prof, iterations, mapping_out, env, model=model, command=command)
    return ProfileImport(trace=trace, source=prof.path, environment=env, iterations=iterations,
                         mapping=mapping_out.mapping,
                         model=model, notes=tuple(built.notes + list(mapping_out.notes)), ddp_modules=built.ddp_modules)


class _Steps:
    """Every step of a profile cut into phases, with its gradients, buckets, kernels and host costs."""

    def __init__(self, prof: KinetoProfile) -> None:
        self.prof = prof
        windows = st.profiler_steps(prof)
        timeline = st.Timeline(prof)
        self.done = DeviceDone(timeline.launched)
        self.notes: list[str] = []
        self.iterations: list[ProfileIteration] = []
        #: per iteration, per AccumulateGrad (ready order): (Input Dims of the op, hook-kernel work estimate)
        self.grad_shapes: list[list[tuple[int, ...] | None]] = []
        self.grad_work: list[list[float]] = []
        cut = [timeline.step(number, window) for number, window in windows]
        partial = [ops for ops in cut if not any(o.name == st.ACCUMULATE_GRAD for o in ops.cpu)]
        if len(partial) < len(cut):  # a step cut short by the profile's end (or before its backward) is left out
            cut = [ops for ops in cut if ops not in partial]
            if partial:
                self.notes.append(f"{', '.join(f'ProfilerStep#{ops.step}' for ops in partial)}: no backward "
                                  f"(no {st.ACCUMULATE_GRAD} op; the profile ends or starts inside it): left out")
        for ops in cut:
            self._add(ops)
        self.ddp_modules = max(1, sum(1 for o in cut[-1].cpu if o.name == "DistributedDataParallel.forward")) if cut else 1
        if self.ddp_modules > 1:
            self.notes.append(f"{self.ddp_modules} DDP modules (DistributedDataParallel.forward calls per step), each with its "
                              "own buckets: their all-reduces are imported together, and a plan is checked against them only "
                              "where each module planned on its own gives its buckets")
        # NCCL kernels that are neither a bucket's all-reduce nor a broadcast (all_to_all, reduce_scatter,
        # all_gather, a logged loss's all-reduce) stay inside the phases as measured; ddpsim does not model them
        other = Counter(c.collective for it in self.iterations for c in it.collectives if c.bucket_index is None and c.collective != "broadcast")
        if other:
            per = ", ".join(f"{n} {name}" for name, n in sorted(other.items()))
            self.notes.append(f"besides DDP's bucket all-reduces the profiled steps ran {per} NCCL kernels; they stay inside "
                              "the measured phases as they ran, and ddpsim does not model them when a simulation changes the "
                              "cluster or the scale")
        layouts = {tuple(b.numel for b in it.buckets) for it in self.iterations}
        if len(layouts) > 1:
            self.notes.append(f"the buckets differ between steps ({len(layouts)} layouts: DDP rebuilds them after its first "
                              "iteration); the last step's are taken as the run's")
        if not any(it.forward.num_kernels + it.backward.num_kernels for it in self.iterations):
            raise InputError(f"profile {prof.path}: no GPU kernel was launched inside a ProfilerStep; expected GPU work "
                             "in the profiled steps (activities=[CPU, CUDA])")

    def _add(self, s: st.StepOps) -> None:
        path = self.prof.path
        w = st.phase_windows(s, path)
        reducer = st.SpanIndex([(o.ts, o.end, o.tid) for o in s.cpu if o.name in st.REDUCER_OPS])
        accumulate = st.ddp_gradients(s, w)
        t0 = s.window.start
        fwd = _phase([lz for lz in s.launched if w.forward.start <= lz.launch_us < w.backward.start], w.forward, t0)
        model_bwd = [lz for lz in s.launched if w.backward.holds(lz.launch_us) and not reducer.holds(lz.launch_us, lz.tid)]
        bwd = _phase(model_bwd, w.backward, t0)
        opt = _phase([lz for lz in s.launched if w.optimizer.holds(lz.launch_us)], w.optimizer, t0)
        bwd_gpu0 = t0 + (bwd.gpu_start_s or 0.0) / US
        step_done = DeviceDone(s.launched)  # a gradient is ready when the work launched before it is done
        ready = tuple(0.0 if r is None else min(max(0.0, (r - bwd_gpu0) * US), bwd.gpu_s)
                      for r in (step_done.before(a.ts, strict=True) for a in accumulate))
        index = len(self.iterations)
        buckets = _buckets(s, w, accumulate, path)
        self.grad_shapes.append([(_input_dims(o.args) or [None])[0] for o in accumulate])
        self.grad_work.append(_hook_work(s, accumulate))
        gpu = [lz.op for lz in s.launched]
        gpu_step = (max(g.end for g in gpu) - min(g.ts for g in gpu)) * US if gpu else 0.0
        span = min((o for o in s.cpu if o.name == f"ProfilerStep#{s.step}"), key=lambda o: (o.ts, -o.dur))  # the window's own
        zero = min((o for o in s.cpu if o.name.startswith("Optimizer.zero_grad")), key=lambda o: (o.ts, -o.dur), default=None)
        self.iterations.append(ProfileIteration(
            step=s.step, start_us=t0, step_s=span.dur * US, gpu_step_s=gpu_step, forward=fwd, backward=bwd,
            optimizer=opt, grad_ready_s=ready, buckets=tuple(b for b, _ in buckets), host=_host(s, w, len(accumulate)),
            collectives=_kernels(s, index, buckets, w, self.prof), zero_grad_s=zero.dur * US if zero is not None else 0.0,
            optimizer_annotated=w.optimizer_annotated, **critical_fields(self.done, s, w, accumulate)))
        if not w.optimizer_annotated:
            self.notes.append(f"ProfilerStep#{s.step}: no Optimizer.step annotation; the optimizer is taken as the time from "
                              "the backward's end to the step's end")


def _phase(launched: Sequence[st.Launched], window: st.Window, t0: float) -> PhaseTimes:
    ops = [lz.op for lz in launched if not lz.op.is_nccl]
    first = min((g.ts for g in ops), default=None)
    busy = sum(b - a for a, b in merge_intervals((g.ts, g.end) for g in ops))
    return PhaseTimes(cpu_start_s=(window.start - t0) * US, cpu_s=(window.end - window.start) * US,
                      cpu_end_s=(window.end - t0) * US, gpu_start_s=None if first is None else (first - t0) * US,
                      gpu_s=(max(g.end for g in ops) - first) * US if ops else 0.0, gpu_busy_s=busy * US,
                      num_kernels=len(ops))


def _hook_work(s: st.StepOps, accumulate: Sequence[Any]) -> list[float]:
    """Per gradient, ``grid x block`` threads of the kernels DDP's hook launched for it (its
    gradient copy into the bucket): proportional to the gradient's elements."""
    hooks = [o for o in s.cpu if o.name == st.HOOK_OP]
    hook_starts = [h.ts for h in hooks]
    launch_starts = [lz.launch_us for lz in s.launched]
    out = []
    for k, acc in enumerate(accumulate):
        nxt = accumulate[k + 1].ts if k + 1 < len(accumulate) else float("inf")
        # the first hook op on the gradient's thread starting before the next gradient
        hook = next((h for h in islice(hooks, bisect.bisect_left(hook_starts, acc.ts), None)
                     if h.ts >= nxt or h.tid == acc.tid), None)
        work = 0.0
        if hook is not None and hook.ts < nxt:
            launched = s.launched[bisect.bisect_left(launch_starts, hook.ts):bisect.bisect_right(launch_starts, hook.end)]
            for lz in launched:
                if lz.tid == hook.tid and lz.op.grid and lz.op.block:
                    work += math.prod(lz.op.grid) * math.prod(lz.op.block)
        out.append(work)
    return out


def _buckets(s: st.StepOps, w: st.PhaseWindows, accumulate: Sequence[Any], path: str) -> list[tuple[RecordedBucket, int | None]]:
    """The all-reduces DDP launched in the backward (``record_param_comms``), with their External id."""
    comms = [o for o in s.cpu if o.name == st.COMMS_OP and w.backward.holds(o.ts) and o.args
             and o.args.get("Collective name", "allreduce") == "allreduce" and "In msg nelems" in o.args]
    holders = [o for o in s.cpu if o.name == "c10d::allreduce_" and w.backward.holds(o.ts)]
    acc_ts = sorted(a.ts for a in accumulate)
    out = []
    prev = float("-inf")
    for k, op in enumerate(comms):
        args = op.args or {}
        where = f"profile {path}: ProfilerStep#{s.step}: record_param_comms"
        numel, dtype = args.get("In msg nelems"), args.get("dtype")
        require(int_or_none(numel) is not None and numel >= 0, f"{where} 'In msg nelems'", numel,
                "an integer >= 0")
        require(isinstance(dtype, str) and dtype in _DTYPES, f"{where} 'dtype'", dtype,
                f"one of {', '.join(_DTYPES)}")
        dtype = _DTYPES[dtype]
        n_grads = bisect.bisect_right(acc_ts, op.ts) - bisect.bisect_right(acc_ts, prev)
        holder = next((a for a in holders if a.tid == op.tid and a.ts <= op.ts and op.end <= a.end), op)
        group = args.get("Process Group Name")  # an integer in some torch versions
        group = str(group) if isinstance(group, str) or int_or_none(group) is not None else None
        out.append((RecordedBucket(index=k, numel=numel, dtype=dtype, size_bytes=numel * DTYPE_SIZE_BYTES[dtype],
                                   launch_cpu_s=(op.ts - s.window.start) * US,
                                   num_grads=n_grads, op_start_s=(holder.ts - s.window.start) * US, op_s=holder.dur * US,
                                   enqueue_s=op.dur * US, process_group=group), op.ext_id))
        prev = op.ts
    return out


def _kernels(s: st.StepOps, index: int, buckets: Sequence[tuple[RecordedBucket, int | None]],
             w: st.PhaseWindows, prof: KinetoProfile) -> tuple[CollectiveKernel, ...]:
    by_ext = {ext: b.index for b, ext in buckets if ext is not None}
    t0 = s.window.start
    nccl = [lz for lz in s.launched if lz.op.is_nccl]
    backward_allreduce = [lz for lz in nccl if w.backward.holds(lz.launch_us)
                          and nccl_kernels.collective_of(lz.op) == "allreduce"]
    by_order = {} if by_ext else _by_order(backward_allreduce, [b for b, _ in buckets], prof)
    out = []
    for lz in nccl:
        g, args = lz.op, lz.op.args or {}
        dtype_name = args.get("dtype")
        dtype = _DTYPES.get(dtype_name, "float32") if isinstance(dtype_name, str) else "float32"
        bucket = by_ext.get(g.ext_id) if by_ext else by_order.get(id(lz))
        numel, algorithm, protocol, ran = nccl_kernels.launch(g, prof)
        out.append(CollectiveKernel(
            iteration=index, collective=nccl_kernels.collective_of(g) or "unknown",
            bucket_index=bucket, numel=numel, dtype=dtype, start_s=(g.ts - t0) * US,
            duration_s=g.dur * US, algorithm=algorithm, protocol=protocol, ran=ran,
            channels=g.grid[0] if g.grid else None, launch_cpu_s=(lz.launch_us - t0) * US, name=g.name,
            phase=_phase_of(w, lz.launch_us)))
    return tuple(sorted(out, key=lambda c: c.start_s))


def _by_order(kernels: Sequence[st.Launched], buckets: Sequence[RecordedBucket], prof: KinetoProfile) -> dict[int, int]:
    """Without External ids: the backward's all-reduce kernels (launch order) tied to the buckets
    in order, a kernel whose ``In msg nelems`` differs from the next bucket's passed by (another
    all-reduce: a used map, a user's own); every kernel in order where no bucket was recorded."""
    if not buckets:
        return {id(lz): k for k, lz in enumerate(kernels)}
    out: dict[int, int] = {}
    for lz in kernels:
        k = len(out)
        numel = nccl_kernels.launch(lz.op, prof)[0]
        if k < len(buckets) and numel in (None, buckets[k].numel):
            out[id(lz)] = k
    return out


def _phase_of(w: st.PhaseWindows, t: float) -> str | None:
    """The phase whose CPU window holds ``t`` (the backward's first: the windows share their ends)."""
    if w.backward.holds(t):
        return "backward"
    if w.forward.start <= t < w.backward.start:
        return "forward"
    return "optimizer" if w.optimizer.holds(t) else None


def _host(s: st.StepOps, w: st.PhaseWindows, n_grads: int) -> StepHostTimes:
    def durations(names: Any, ops: Sequence[Any], backward: bool = True) -> list[float]:
        return [o.dur for o in ops if o.name in names and (not backward or w.backward.holds(o.ts))]

    launches = durations({"c10d::allreduce_"}, s.cpu)
    kl = durations(st.KERNEL_LAUNCHES, s.runtime, backward=False)
    return StepHostTimes(accumulate_grad_s=sum(durations({st.ACCUMULATE_GRAD}, s.cpu)) * US, num_accumulate_grad=n_grads,
                         reducer_hook_s=sum(durations({st.HOOK_OP}, s.cpu)) * US, bucket_launch_s=sum(launches) * US,
                         num_bucket_launches=len(launches),
                         copy_bucket_to_grad_s=sum(durations({st.COPY_BUCKET_TO_GRAD}, s.cpu)) * US,
                         kernel_launch_s=sum(kl) * US, num_kernel_launches=len(kl),
                         sync_wait_s=sum(durations(st.SYNC_CALLS, s.runtime, backward=False)) * US)


def _ranks(info: dict[str, Any], path: str) -> int | None:
    """``distributedInfo``'s world size (None: not said); InputError: not a positive integer, or a
    rank outside it."""
    world, rank = info.get("world_size"), info.get("rank")
    if world is None:
        return None
    field = f"profile {path}: distributedInfo"
    require(int_or_none(world) is not None and world >= 1, f"{field}.world_size", world,
            "a positive integer (the number of ranks)")
    in_range = rank is None or (int_or_none(rank) is not None and 0 <= rank < world)
    require(in_range, f"{field}.rank", rank, f"an integer from 0 to world_size - 1 = {world - 1}")
    return world


def _batch_input(built: _Steps) -> tuple[int, ...] | None:
    """The dims of the forward's first op input (``record_shapes``, 2 or more) not shaped like a
    parameter (an embedding's first input is its weight, the tokens come second); else the first input's."""
    it = built.iterations[-1]
    start = it.start_us + it.forward.cpu_start_s / US
    end = start + it.forward.cpu_s / US
    params = {tuple(d) for d in (built.grad_shapes[-1] if built.grad_shapes else []) if d}
    fallback = None
    for op in built.prof.cpu_ops:
        if not (start <= op.ts <= end and op.name.startswith("aten::")):
            continue
        for k, dims in enumerate(_input_dims(op.args)):
            if dims is None or len(dims) < 2:
                continue
            if dims not in params:
                return dims
            if fallback is None and k == 0:
                fallback = dims
    return fallback


def _input_dims(args: dict[str, Any] | None) -> list[tuple[int, ...] | None]:
    """Every input's dims (``record_shapes``): ``()`` for a scalar or non-tensor input, None
    where they are not a list of integers."""
    dims = (args or {}).get("Input Dims")
    return [int_dims(d) for d in dims] if isinstance(dims, list) else []


def _trace(prof: KinetoProfile, iterations: Sequence[ProfileIteration], mapped: Any,
           env: ProfileEnvironment, *, model: str | None, command: str | None) -> Trace:
    params = mapped.params
    order = mapped.ready_order  # parameter index of each gradient, in ready order
    samples = []
    for it in iterations:
        ready: list[float | None] = [None] * len(params)
        for pos, idx in enumerate(order):
            if pos < len(it.grad_ready_s):
                ready[idx] = it.grad_ready_s[pos]
        samples.append(IterationSample(forward_s=it.forward.gpu_s, backward_s=it.backward.gpu_s, optimizer_s=it.optimizer.gpu_s,
                                       zero_grad_s=it.zero_grad_s, grad_ready_s=tuple(ready)))
    environment = {
        "device": "cuda", "device_name": env.gpu_name, "source": "torch.profiler", "profile": Path(prof.path).name,
        "profile_steps": [it.step for it in iterations], "world_size": env.world_size, "rank": env.rank,
        "backend": env.backend, "nccl_version": env.nccl_version, "batch_size": env.batch_size,
        "phase_timeline": "gpu: first kernel start to last kernel end per phase (backward without DDP's own kernels)",
        "cpu_span_phase_s": [[round(it.forward.cpu_s, 9), round(it.backward.cpu_s, 9), round(it.optimizer.cpu_s, 9)] for it in iterations],
        "profiler_step_s": [round(it.step_s, 9) for it in iterations],
        "gpu_busy_phase_s": [[round(it.forward.gpu_busy_s, 9), round(it.backward.gpu_busy_s, 9), round(it.optimizer.gpu_busy_s, 9)]
                             for it in iterations],
        "param_mapping": {"method": mapped.mapping.method, "confidence": mapped.mapping.confidence, "detail": mapped.mapping.detail},
    }
    return Trace(model=model or f"profile:{Path(prof.path).name}", params=params, buffers=mapped.buffers,
                 grad_ready_order=tuple(order), iterations=tuple(samples), environment=environment,
                 hook_overhead_frac=None, synthetic=None, command=command)
