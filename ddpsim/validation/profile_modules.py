"""A profiled run's DDP modules, each planned on its own parameters and matched to its own buckets.
Each ``DistributedDataParallel`` has its own ``Reducer`` (``torch/csrc/distributed/c10d/reducer.cpp``:
``rebuild_buckets`` over its own gradients), but a profile does not say whose a gradient is: the
recorded buckets are cut into modules (by ``Process Group Name``, else into consecutive runs,
depth first) until every module's own plan gives its buckets; where none does the plan is not
checked (``matches`` None)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Sequence

from ddpsim.plan.planner import Bucket, BucketPlan, assign_in_ready_order
from ddpsim.trace.profile.result import RecordedBucket
from ddpsim.trace.records import Trace


@dataclass(frozen=True)
class ModuleSplit:
    """The run's DDP modules: per module its recorded buckets (launch indices), its planned
    buckets (trace parameter indices, in launch order), and how the split was found."""

    buckets: tuple[tuple[int, ...], ...]
    planned: tuple[tuple[tuple[int, ...], ...], ...]
    #: per module, the process group name its recorded buckets carry (None: unnamed)
    groups: tuple[str | None, ...]
    method: str

    def plan(self, trace: Trace, options: Any) -> BucketPlan:
        """One plan holding every module's buckets, in launch order (what the simulation runs)."""
        launched = sorted((k, g) for ks, gs in zip(self.buckets, self.planned) for k, g in zip(ks, gs))
        out = tuple(Bucket(index=k, param_indices=g, size_bytes=sum(trace.params[i].size_bytes for i in g),
                           dtype=trace.params[g[0]].dtype) for k, (_, g) in enumerate(launched))
        return BucketPlan(initial=out, steady=out, rebuild_iteration=None, source="ddp-modules", options=options)


def split_modules(trace: Trace, buckets: Sequence[RecordedBucket], modules: int, options: Any) -> ModuleSplit | None:
    """The run's DDP modules (module docstring), or None where no split of the recorded buckets
    (``buckets``: the last step's, launch order) into ``modules`` modules has every module's plan
    give its buckets."""
    order = trace.grad_ready_order
    ends = list(itertools.accumulate(b.num_grads for b in buckets))
    if modules < 2 or (ends and ends[-1] > len(order)):  # more gradients than the trace has
        return None
    # per recorded bucket, the trace parameters of the gradients made ready since the previous launch
    params = [tuple(order[a:b]) for a, b in zip([0, *ends], ends)]
    numel = [p.numel for p in trace.params]

    def planned(launches: Sequence[int]) -> tuple[tuple[int, ...], ...] | None:
        """The launches' module's buckets as ``Reducer::rebuild_buckets`` builds them from its gradients
        in ready order, if they are its recorded ones."""
        ready = [i for k in launches for i in params[k]]
        plan = [tuple(g) for g in assign_in_ready_order(trace, ready, options)[0]] if ready else []
        return tuple(plan) if [sum(numel[i] for i in g) for g in plan] == [buckets[k].numel for k in launches] else None

    @functools.cache
    def cut(start: int, k: int) -> tuple[tuple[list[int], Any], ...] | None:
        """The first cut of launches ``start..`` into ``k`` consecutive runs, each its own plan,
        earliest ends first; each (start, k) tried once."""
        for end in [len(buckets)] if k == 1 else range(start + 1, len(buckets) - k + 2):
            plan = planned(range(start, end))
            rest = None if plan is None else () if k == 1 else cut(end, k - 1)
            if rest is not None:
                return ((list(range(start, end)), plan), *rest)
        return None

    groups = list(dict.fromkeys(b.process_group for b in buckets))
    if len(groups) > 1:
        cand = [[k for k, b in enumerate(buckets) if b.process_group == g] for g in groups]
        plans, method = [planned(c) for c in cand], "process group"
    else:
        found = cut(0, modules) or ()
        cand, plans, method = [c for c, _ in found], [p for _, p in found], "launch order"
    if not cand or any(p is None for p in plans):
        return None
    return ModuleSplit(buckets=tuple(tuple(c) for c in cand), planned=tuple(plans),
                       groups=tuple(buckets[c[0]].process_group for c in cand), method=method)
