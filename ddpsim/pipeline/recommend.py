"""Recommendations: an explicit bucket plan better than the sweep's best ``bucket_cap_mb``. DDP's
single cap can only cut the gradient-ready order every ``cap`` bytes; an explicit plan may cut it
anywhere: small buckets early (communication starts soon after backward begins), large ones late
(fewer latencies). :func:`optimal_boundaries` finds the cuts that minimise the end of the last
collective by dynamic programming over the ready order under an analytical model: one
representative rank, median trace times, no jitter, no interference; parameter ``i``'s gradient is
ready at ``backward_start + median grad_ready_s[i]``, a bucket when its last gradient is; DDP
launches buckets strictly in order, ``launch_k = max(ready_k, launch_{k-1})``, on one communication
stream: ``start_k = max(launch_k, end_{k-1})``,
``end_k = start_k + comm.allreduce_s(size_k * bytes_factor)`` (``bytes_factor`` 0.5 for the
fp16/bf16 compression hooks, else 1); backward ends at
``max(backward compute end, end of the last collective)``, then the optimizer runs. The end of the
last collective is non-decreasing in every earlier end time, so the DP over "first j gradients
bucketed" is exact: ``F(j) = min_i max(F(i), ready(j-1)) + allreduce(bytes(i..j-1))``, O(n^2) for n
gradients. The engine verifies the plan, recommended only with the gain it predicts over the best
cap.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from typing import Any, Sequence

from ddpsim.errors import InputError
from ddpsim.plan.planner import BucketPlan, DDPOptions, approximate_cap_list, cap_list_for_buckets, explicit_plan, mb_text
from ddpsim.network.comm_model import WrappedCommModel
from ddpsim.trace.records import Trace

#: bytes on the wire per gradient byte, per comm hook
HOOK_BYTES_FACTOR = {"none": 1.0, "allreduce": 1.0, "fp16": 0.5, "bf16": 0.5, "powersgd": 1.0}


def optimal_boundaries(ready_s: Sequence[float], sizes_bytes: Sequence[int], comm: Any, *,
                       groups: Sequence[Any] | None = None, bytes_factor: float = 1.0,
                       max_bucket_params: int | None = None) -> tuple[list[tuple[int, int]], float]:
    """Cut a sequence of gradients (in ready order) into contiguous buckets, minimising the
    end of the last collective (relative to backward start): ``([(start, stop), ...], end_s)``,
    half-open index ranges. ``groups[i]`` (e.g. the dtype) must be equal within a bucket."""
    n = len(ready_s)
    assert n == len(sizes_bytes) and n > 0
    prefix = list(itertools.accumulate(sizes_bytes, initial=0))
    # ready of a bucket = max ready of its members: prefix max over a range needs a scan;
    # ready times are non-decreasing along the ready order, but take the max to be safe.
    INF = float("inf")
    best = [INF] * (n + 1)
    back = [0] * (n + 1)
    best[0] = 0.0
    for j in range(1, n + 1):
        r = -INF
        lo = 0 if max_bucket_params is None else max(0, j - max_bucket_params)
        for i in range(j - 1, lo - 1, -1):
            if groups is not None and groups[i] != groups[j - 1]:
                break
            r = max(r, ready_s[i])
            if best[i] == INF:
                continue
            end = max(best[i], r) + comm.allreduce_s(int((prefix[j] - prefix[i]) * bytes_factor))
            if end < best[j] - 1e-15:
                best[j], back[j] = end, i
    cuts = []
    j = n
    while j > 0:
        cuts.append((back[j], j))
        j = back[j]
    return cuts[::-1], best[n]


def recommend_plan(trace: Trace, comm: Any, *, comm_hook: str = "none", options: DDPOptions | None = None,
                   max_bucket_params: int | None = None) -> tuple[BucketPlan, float]:
    """An explicit plan cutting the gradient-ready order optimally under the analytical model, and
    the model's end of its last collective (after backward start); parameters that never get a
    gradient go into a last bucket of their own dtype(s)."""
    ready = list(trace.grad_ready_stat_s("median"))
    order = [i for i in trace.grad_ready_order if ready[i] is not None]
    if not order:
        raise InputError("trace.grad_ready_order: [] is empty; expected gradients to bucket")
    r = [ready[i] for i in order]
    sizes = [trace.params[i].size_bytes for i in order]
    dtypes = [trace.params[i].dtype for i in order]
    cuts, end = optimal_boundaries(r, sizes, comm, groups=dtypes, bytes_factor=HOOK_BYTES_FACTOR.get(comm_hook, 1.0),
                                   max_bucket_params=max_bucket_params)
    groups = [[order[k] for k in range(a, b)] for a, b in cuts]
    seen = set(order)
    rest: dict[str, list[int]] = {}
    for p in trace.params:
        if p.index not in seen:
            rest.setdefault(p.dtype, []).append(p.index)
    groups += list(rest.values())
    return explicit_plan(trace, groups, options=options, source="ddpsim-recommend"), end


@dataclass(frozen=True)
class ScaledComm(WrappedCommModel):
    """``base`` with every all-reduce of ``lo_bytes`` to ``hi_bytes`` ``factor`` times longer plus
    ``extra_latency_s``; broadcasts and every capability of ``wrapped`` come through unchanged. The
    plan search's pessimistic variants scale every size (fewer, larger buckets: the engine's
    per-bucket costs - copies, launches, interference - are not in the analytical model); the
    uncertainty samples scale NCCL's mid sizes (:mod:`ddpsim.pipeline.resampling`)."""

    wrapped: Any
    factor: float = 1.0
    extra_latency_s: float = 0.0
    lo_bytes: int = 0
    hi_bytes: float = math.inf

    def allreduce_s(self, size_bytes: int) -> float:
        t = self.wrapped.allreduce_s(size_bytes)
        return t * self.factor + self.extra_latency_s if self.lo_bytes <= size_bytes <= self.hi_bytes else t

    def describe(self) -> dict[str, Any]:
        return {**self.wrapped.describe(), "allreduce_factor": self.factor,
                "extra_latency_s": self.extra_latency_s, "allreduce_bytes": [self.lo_bytes, self.hi_bytes]}


class GridComm(WrappedCommModel):
    """``comm.allreduce_s`` tabulated on a log-spaced size grid and interpolated linearly
    in between (exact at grid points). NCCL's cost model is piecewise linear in the size
    (latency + bytes / bandwidth, minimised over algorithms and protocols), so a dense grid
    is close; the DP calls this O(n^2) times, the real model only ``num_points`` times.
    Broadcasts and every capability of ``comm`` come through unchanged."""

    def __init__(self, comm: Any, max_bytes: int, num_points: int = 1024) -> None:
        hi = max(2, int(max_bytes))
        sizes = sorted({0, 1} | {int(round(math.exp(math.log(hi) * k / (num_points - 1)))) for k in range(num_points)} | {hi})
        self.sizes = sizes
        self.times = [comm.allreduce_s(x) for x in sizes]
        self.wrapped = comm

    def allreduce_s(self, size_bytes: int) -> float:
        if size_bytes >= self.sizes[-1]:
            return self.wrapped.allreduce_s(size_bytes)
        k = bisect.bisect_left(self.sizes, size_bytes)
        if self.sizes[k] == size_bytes:
            return self.times[k]
        x0, x1 = self.sizes[k - 1], self.sizes[k]
        t0, t1 = self.times[k - 1], self.times[k]
        return t0 + (t1 - t0) * (size_bytes - x0) / (x1 - x0)

    def describe(self) -> dict[str, Any]:
        return {**self.wrapped.describe(), "allreduce_grid_points": len(self.sizes)}


#: (label, factor, extra latency as a multiple of a zero-byte all-reduce)
SEARCH_VARIANTS = (("as modelled", 1.0, 0.0), ("latency x4", 1.0, 3.0), ("comm x1.25, latency x4", 1.25, 3.0))


def candidate_plans(trace: Trace, comm: Any, *, comm_hook: str = "none",
                    options: DDPOptions | None = None) -> list[tuple[str, BucketPlan]]:
    """Distinct DP plans under :data:`SEARCH_VARIANTS` of the cost model; the engine picks."""
    out: list[tuple[str, BucketPlan]] = []
    seen: set[tuple] = set()
    base_latency = comm.allreduce_s(0) if hasattr(comm, "allreduce_s") else 0.0
    if trace.num_params > 64:  # NOTE: tabulate slow cost models; the engine verifies the result
        comm = GridComm(comm, trace.total_param_bytes)
    for label, factor, extra in SEARCH_VARIANTS:
        c = comm if (factor, extra) == (1.0, 0.0) else ScaledComm(comm, factor, extra * base_latency)
        plan, _ = recommend_plan(trace, c, comm_hook=comm_hook, options=options)
        key = tuple(b.param_indices for b in plan.steady)
        if key not in seen:
            seen.add(key)
            out.append((label, plan))
    return out


@dataclass(frozen=True, kw_only=True)
class CapListCandidate:
    """A ``bucket_cap_mb_list`` for one candidate plan: ``exact`` when real DDP's rebuilt
    layout under it is that plan (else ``reason`` says why no list is, and ``caps`` is
    :func:`ddpsim.plan.planner.approximate_cap_list`'s starting point)."""

    caps: tuple[float, ...]
    exact: bool
    reason: str
    plan: BucketPlan

    @property
    def paste(self) -> str:
        """The line a user pastes: ``DDP(model, bucket_cap_mb_list=[2, 8, 25])``."""
        return f"DDP(model, bucket_cap_mb_list=[{', '.join(mb_text(c) for c in self.caps)}])"


def cap_list_candidates(trace: Trace, plans: Sequence[BucketPlan], options: DDPOptions | None = None) -> list[CapListCandidate]:
    """One distinct ``bucket_cap_mb_list`` per plan, in the order given (the engine picks)."""
    out: list[CapListCandidate] = []
    for plan in plans:
        caps, reason = cap_list_for_buckets(trace, plan.steady, options)
        cand = CapListCandidate(caps=caps if caps is not None else approximate_cap_list(trace, plan.steady),
                                exact=caps is not None, reason=reason, plan=plan)
        if all(c.caps != cand.caps for c in out):
            out.append(cand)
    return out
