"""One ``ProfilerStep#N`` of a profile: its phases on the CPU and GPU timelines, gradients, buckets.
GPU work belongs to the phase whose CPU window holds its launch (Kineto's ``correlation`` id);
backward runs from the first ``evaluate_function`` to DDP's last op on an ``AccumulateGrad``
thread, forward from ``DistributedDataParallel.forward`` to it, the optimizer is its
``Optimizer.step#`` annotation; a gradient is ready when the GPU has finished the work launched
before its ``AccumulateGrad``. Each rule and its reason: docs/MODEL.md, "How a profile becomes a
trace"."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Sequence

from ddpsim.errors import InputError
from ddpsim.trace.intervals import merge_intervals
from ddpsim.trace.profile.kineto import CpuOp, GpuOp, KinetoProfile, RuntimeCall

BACKWARD_OP = "autograd::engine::evaluate_function:"
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
COMMS_OP = "record_param_comms"
#: DDP's per-gradient hook op (``Reducer::mark_variable_ready_dense``, reducer.cpp: the gradient's
#: copy, divided by the world size, into its bucket)
HOOK_OP = "torch::distributed::reducer::mul_out"
COPY_BUCKET_TO_GRAD = "torch.distributed.ddp.reducer::copy_bucket_to_grad"
#: ops DDP's reducer runs in the backward: kernels launched inside them are DDP's, not the model's
REDUCER_OPS = (HOOK_OP, COPY_BUCKET_TO_GRAD, COMMS_OP, "c10d::allreduce_", "nccl:all_reduce")
#: the runtime and driver calls that launch device work: kernels (CUDA runtime and driver API,
#: cooperative), a CUDA graph, and their HIP counterparts in a ROCm profile
KERNEL_LAUNCHES = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel", "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel", "cudaGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel", "hipExtModuleLaunchKernel",
    "hipModuleLaunchKernel", "hipGraphLaunch"})
#: the calls that wait for the device (CUDA, and HIP in a ROCm profile)
SYNC_CALLS = frozenset({"cudaEventSynchronize", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy",
                        "hipEventSynchronize", "hipStreamSynchronize", "hipDeviceSynchronize", "hipMemcpy"})
US = 1e-6


@dataclass(frozen=True)
class Window:
    """A CPU window ``[start, end]`` in the profile's microseconds."""

    start: float
    end: float

    def holds(self, t: float) -> bool:
        return self.start <= t <= self.end


@dataclass(frozen=True)
class Launched:
    """A GPU op with the CPU time and thread of the runtime call that launched it."""

    op: GpuOp
    launch_us: float
    tid: object


@dataclass(frozen=True)
class StepOps:
    """The raw material of one step, in the profile's microseconds."""

    step: int
    window: Window
    cpu: tuple[CpuOp, ...]
    launched: tuple[Launched, ...]
    runtime: tuple[RuntimeCall, ...]


@dataclass(frozen=True)
class PhaseWindows:
    """The step's phases on the CPU."""

    forward: Window
    backward: Window
    optimizer: Window
    optimizer_annotated: bool


def profiler_steps(prof: KinetoProfile) -> list[tuple[int, Window]]:
    """The ``ProfilerStep#N`` spans, in time order; InputError: none in the profile."""
    steps = sorted(((int(n), Window(op.ts, op.end)) for op in prof.cpu_ops
                    if op.name.startswith("ProfilerStep#") and (n := op.name.removeprefix("ProfilerStep#")).isdigit()),
                   key=lambda s: s[1].start)
    if not steps:
        raise InputError(f"profile {prof.path}: no ProfilerStep#N span; expected a profile recorded with "
                         "torch.profiler.profile(schedule=...) and prof.step() once per iteration")
    return steps


class Timeline:
    """The profile's CPU ops, runtime calls and launched GPU ops (those whose launching runtime call
    is in the profile), each sorted by CPU start; InputError: no launched GPU op."""

    def __init__(self, prof: KinetoProfile) -> None:
        if not prof.gpu:
            raise InputError(f"profile {prof.path}: no GPU kernels (a CPU-only profile); expected one recorded on a GPU with "
                             "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
        calls = {r.correlation: r for r in prof.runtime if r.correlation is not None}
        self.launched = sorted((Launched(op=g, launch_us=calls[g.correlation].ts, tid=calls[g.correlation].tid)
                                for g in prof.gpu if g.correlation in calls), key=lambda x: (x.launch_us, x.op.ts))
        if not self.launched:
            raise InputError(f"profile {prof.path}: no GPU kernel is tied to a CUDA runtime call (no correlation ids); "
                             "expected a Kineto trace with activities CPU and CUDA")
        self.cpu = sorted(prof.cpu_ops, key=lambda o: o.ts)
        self.runtime = sorted(prof.runtime, key=lambda r: r.ts)
        self._starts = ([o.ts for o in self.cpu], [r.ts for r in self.runtime], [lz.launch_us for lz in self.launched])

    def step(self, step: int, window: Window) -> StepOps:
        """The ops that start (CPU) or were launched (GPU) inside ``window``."""
        cut = [(bisect.bisect_left(xs, window.start), bisect.bisect_right(xs, window.end)) for xs in self._starts]
        return StepOps(step=step, window=window, cpu=tuple(self.cpu[slice(*cut[0])]),
                       runtime=tuple(self.runtime[slice(*cut[1])]), launched=tuple(self.launched[slice(*cut[2])]))


def phase_windows(s: StepOps, path: str) -> PhaseWindows:
    """Forward, backward and optimizer of one step on the CPU; InputError: the step has no backward."""
    bwd = [o for o in s.cpu if o.name.startswith(BACKWARD_OP)]
    if not bwd or not any(o.name == ACCUMULATE_GRAD for o in s.cpu):
        raise InputError(f"profile {path}: ProfilerStep#{s.step} has no backward (no {BACKWARD_OP} / {ACCUMULATE_GRAD} ops); "
                         "expected a training step with loss.backward() inside each profiled step")
    b_start = min(o.ts for o in bwd)
    opt = next((o for o in s.cpu if o.name.startswith("Optimizer.step") and o.ts >= b_start), None)
    # DDP's own ops end the backward: on a thread that ran its hooks, before the optimizer
    hook_tids = {o.tid for o in s.cpu if o.name == ACCUMULATE_GRAD}
    until = opt.ts if opt is not None else s.window.end
    ddp_end = [o.end for o in s.cpu if b_start <= o.ts < until and o.tid in hook_tids
               and o.name in (COPY_BUCKET_TO_GRAD, COMMS_OP)]
    b_end = max([o.end for o in bwd] + ddp_end)
    zero = next((o for o in s.cpu if o.name.startswith("Optimizer.zero_grad")), None)
    fwd_op = next((o for o in s.cpu if o.name == "DistributedDataParallel.forward" and o.ts < b_start), None)
    f_start = (fwd_op.ts if fwd_op is not None
               else zero.end if zero is not None and zero.end <= b_start else s.window.start)
    opt_w = Window(opt.ts, opt.end) if opt is not None else Window(b_end, s.window.end)
    return PhaseWindows(forward=Window(f_start, b_start), backward=Window(b_start, b_end), optimizer=opt_w,
                        optimizer_annotated=opt is not None)


class SpanIndex:
    """The union of some CPU spans, per thread, for fast "is this time inside one?" queries."""

    def __init__(self, spans: Sequence[tuple[float, float, object]]) -> None:
        per_tid: dict[object, list[tuple[float, float]]] = {}
        for a, b, tid in spans:
            per_tid.setdefault(tid, []).append((a, b))
        self._spans = {tid: merge_intervals(v) for tid, v in per_tid.items()}
        self._starts = {tid: [a for a, _ in m] for tid, m in self._spans.items()}

    def holds(self, t: float, tid: object) -> bool:
        k = bisect.bisect_right(self._starts.get(tid, ()), t) - 1
        return k >= 0 and t <= self._spans[tid][k][1]


def ddp_gradients(s: StepOps, w: PhaseWindows) -> list[CpuOp]:
    """The backward's ``AccumulateGrad`` ops that DDP's hook followed (time order): a parameter
    outside every DDP module, or one not requiring a gradient DDP skips, accumulates without a
    hook op (``mul_out`` starting before the next ``AccumulateGrad`` does) and is no DDP
    parameter. Every ``AccumulateGrad`` where the step shows no hook op at all (gradients as
    bucket views: DDP divides them in place, unrecorded)."""
    acc = sorted((o for o in s.cpu if o.name == ACCUMULATE_GRAD and w.backward.holds(o.ts)), key=lambda o: o.ts)
    hooks = sorted(o.ts for o in s.cpu if o.name == HOOK_OP and w.backward.holds(o.ts))
    if not hooks:
        return acc
    nxt = [a.ts for a in acc[1:]] + [float("inf")]  # each one's next AccumulateGrad start
    return [a for a, end in zip(acc, nxt) if (j := bisect.bisect_left(hooks, a.ts)) < len(hooks) and hooks[j] < end]

