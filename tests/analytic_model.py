"""The analytical model of :mod:`ddpsim.pipeline.recommend` (its module docstring states it) as a
fast stand-in for the engine: :func:`analytic_simulate` has the engine's signature, so tests run
sweeps and reports in milliseconds; :func:`analytic_end_s` is the end of the last collective the
dynamic programme minimises."""

from __future__ import annotations

from typing import Any, Sequence

from ddpsim.engine.result import COMM_STREAM, COMPUTE_STREAM, BucketTiming, IterationStats, SimResult, Span
from ddpsim.pipeline.recommend import HOOK_BYTES_FACTOR
from ddpsim.plan.planner import BucketPlan
from ddpsim.trace.records import Trace


def bucket_schedule(ready_s: Sequence[float], sizes_bytes: Sequence[int], comm: Any,
                    bytes_factor: float = 1.0) -> list[tuple[float, float, float, float]]:
    """Per bucket ``(ready_s, launch_s, start_s, end_s)`` relative to backward start."""
    out = []
    launch_prev = end_prev = 0.0
    for r, size in zip(ready_s, sizes_bytes):
        launch = max(r, launch_prev)
        start = max(launch, end_prev)
        end = start + comm.allreduce_s(int(size * bytes_factor))
        out.append((r, launch, start, end))
        launch_prev, end_prev = launch, end
    return out


def analytic_simulate(trace: Trace, plan: BucketPlan, comm: Any, config: Any) -> SimResult:
    """A SimResult from the analytical model (see the module docstring); same signature as the engine."""
    ready = list(trace.grad_ready_stat_s("median"))
    fwd = trace.phase("forward").median_s
    bwd = trace.phase("backward").median_s
    opt = trace.phase("optimizer").median_s
    factor = HOOK_BYTES_FACTOR.get(getattr(config, "comm_hook", "none"), 1.0)
    warm = config.num_warmup_iterations
    if warm is None:
        warm = plan.rebuild_iteration or 1
    spans: list[Span] = []
    buckets: list[BucketTiming] = []
    iters: list[IterationStats] = []
    t = 0.0
    for k in range(1, config.num_iterations + 1):
        layout = plan.layout_for_iteration(k)
        b_ready = [max((ready[i] for i in b.param_indices if ready[i] is not None), default=bwd) for b in layout]
        sched = bucket_schedule(b_ready, [b.size_bytes for b in layout], comm, factor)
        t0 = t
        tb = t0 + fwd
        spans.append(Span(rank=0, stream=COMPUTE_STREAM, kind="forward", name="forward", iteration=k, start_s=t0, end_s=tb))
        spans.append(Span(rank=0, stream=COMPUTE_STREAM, kind="backward", name="backward", iteration=k, start_s=tb, end_s=tb + bwd))
        comm_s = overlapped = 0.0
        for b, (r, la, st, en) in zip(layout, sched):
            spans.append(Span(rank=0, stream=COMM_STREAM, kind="allreduce", name=f"allreduce bucket {b.index}",
                              iteration=k, start_s=tb + st, end_s=tb + en, bucket=b.index, size_bytes=b.size_bytes))
            buckets.append(BucketTiming(rank=0, iteration=k, bucket=b.index, size_bytes=b.size_bytes,
                                        num_params=len(b.param_indices), ready_s=tb + r, launch_s=tb + la,
                                        start_s=tb + st, end_s=tb + en))
            comm_s += en - st
            overlapped += max(0.0, min(en, bwd) - st)
        last = sched[-1][3] if sched else 0.0
        exposed = max(0.0, last - bwd)
        if exposed > 0:
            spans.append(Span(rank=0, stream=COMPUTE_STREAM, kind="wait", name="wait for allreduce", iteration=k,
                              start_s=tb + bwd, end_s=tb + bwd + exposed))
        to = tb + bwd + exposed
        spans.append(Span(rank=0, stream=COMPUTE_STREAM, kind="optimizer", name="optimizer", iteration=k, start_s=to, end_s=to + opt))
        t = to + opt
        iters.append(IterationStats(rank=0, iteration=k, start_s=t0, end_s=t, forward_s=fwd, backward_compute_s=bwd,
                                    exposed_comm_s=exposed, comm_s=comm_s, overlap_ratio=overlapped / comm_s if comm_s else 0.0,
                                    optimizer_s=opt, warmup=k <= warm))
    return SimResult(world_size=config.world_size, ranks=(0,), spans=tuple(spans), buckets=tuple(buckets),
                     iterations=tuple(iters), meta={"engine": "analytic"})


def analytic_end_s(trace: Trace, buckets: Sequence[Any], comm: Any, comm_hook: str = "none") -> float:
    """The analytical model's end of the last collective (after backward start) for ``buckets``."""
    ready = list(trace.grad_ready_stat_s("median"))
    bwd = trace.phase("backward").median_s
    b_ready = [max((ready[i] for i in b.param_indices if ready[i] is not None), default=bwd) for b in buckets]
    sched = bucket_schedule(b_ready, [b.size_bytes for b in buckets], comm, HOOK_BYTES_FACTOR.get(comm_hook, 1.0))
    return sched[-1][3] if sched else 0.0
