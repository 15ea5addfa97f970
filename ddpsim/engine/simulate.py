"""The SimPy engine's entry point: ``simulate(trace, plan, comm, config) -> SimResult``.

It checks the inputs, runs one process per explicit rank (:mod:`ddpsim.engine.reducer`), one
for the folded ranks (:mod:`ddpsim.engine.rest`) and the process group's stream, and assembles
spans, per-bucket and per-iteration figures. A rank is torch 2.13's ``Reducer``
(``torch/csrc/distributed/c10d/reducer.cpp``) and ``DistributedDataParallel``
(``torch/nn/parallel/distributed.py``), docs/MODEL.md, "The engine". One
``numpy.random.default_rng(config.seed)``, no set or dict order: the same inputs and seed give
an identical :class:`SimResult`."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import fields, is_dataclass, replace
from typing import Any, Sequence

import numpy as np
import simpy

from ddpsim.engine import jitter as jitter_mod
from ddpsim.engine.config import SimConfig, checked_s
from ddpsim.engine.join import JoinProgram, JoinSchedule, add_even_baseline
from ddpsim.engine.process_groups import GroupStreams
from ddpsim.engine.reducer import Rank
from ddpsim.engine.rest import RestRanks
from ddpsim.engine.result import BucketTiming, IterationStats, LazyTuple, SimResult, merged_spans
from ddpsim.engine.streams import Engine
from ddpsim.errors import InputError
from ddpsim.network.comm_model import CAPABILITIES, CommModel
from ddpsim.network.topology import gc_paused
from ddpsim.plan.planner import BucketPlan, check_buckets, reducer_param_indices
from ddpsim.trace.intervals import intersection_s
from ddpsim.trace.records import Trace

__all__ = ["simulate"]

#: what a comm model answers (ddpsim.network.comm_model.CommModel), required and optional
_COMM_MEMBERS = ("backend", "num_ranks", "allreduce_s", "broadcast_s", "describe") + CAPABILITIES


# ---- validation -------------------------------------------------------------------------

def _validate(trace: Trace, plan: BucketPlan, comm: CommModel, config: SimConfig) -> None:
    if not isinstance(config, SimConfig):
        raise InputError(f"config: {type(config).__name__} is not accepted; expected a ddpsim.engine.config.SimConfig")
    if not isinstance(comm, CommModel):
        missing = [m for m in _COMM_MEMBERS if not hasattr(comm, m)]
        raise InputError(f"comm: {type(comm).__name__} is not accepted: it lacks {', '.join(missing)}; expected a "
                         "ddpsim.network.comm_model.CommModel (subclass it for the capabilities' defaults)")
    num_ranks = comm.num_ranks
    if not isinstance(num_ranks, int) or isinstance(num_ranks, bool) or num_ranks < 1:
        raise InputError(f"comm.num_ranks: {num_ranks!r} is not accepted; expected an integer >= 1")
    if config.world_size > num_ranks:
        raise InputError(f"world_size: {config.world_size} is not accepted; expected at most {num_ranks}, the ranks the comm model "
                         f"({comm.describe().get('model', type(comm).__name__)}) holds")
    opts = plan.options
    reducer = set(reducer_param_indices(trace, opts))
    for label, buckets in (("plan.initial", plan.initial), ("plan.steady", plan.steady)):
        check_buckets(trace, [b.param_indices for b in buckets], opts, label)
        for k, b in enumerate(buckets):
            if b.index != k:
                raise InputError(f"{label}[{k}].index: {b.index} is out of order; expected {k}")
    for name in ("forward", "backward", "optimizer", "zero_grad"):
        checked_s(trace.phase(name).median_s, f"trace.iterations[].{name}_s: median")
    if opts.mixed_precision is not None and config.comm_hook != "none":
        raise InputError(f"comm_hook: {config.comm_hook!r} is not accepted with mixed_precision; expected none (DDP "
                         "registers its own hook for mixed precision, and a second register_comm_hook raises)")
    if any(not p.has_grad and p.index in reducer for p in trace.params) and not (opts.find_unused_parameters or opts.static_graph):
        unused = [p.name for p in trace.params if not p.has_grad and p.index in reducer]
        raise InputError(f"find_unused_parameters: False is not accepted for this trace: parameters {unused[:3]} get no gradient, "
                         "which real DDP rejects; expected find_unused_parameters=True or static_graph=True")
    checked_s(comm.allreduce_s(0), "comm.allreduce_s(0):")
    checked_s(comm.broadcast_s(0), "comm.broadcast_s(0):")


# ---- results -------------------------------------------------------------------------------

def _as_dict(obj: Any) -> Any:
    """``dataclasses.asdict`` without deep copies (a table of interference weights is long)."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _as_dict(getattr(obj, f.name)) for f in fields(obj)}
    return obj


def _config_summary(config: SimConfig) -> dict[str, Any]:
    d = _as_dict(config)
    d["stragglers"] = {str(k): v for k, v in sorted(config.stragglers.items())}
    if not config.interference.size_weights:  # only the "table" weighting has one
        del d["interference"]["size_weights"]
    for key in ("host_costs", "copy_kernel_floor_s", "comm_hook_call_s", "join_batches"):  # left out when off
        if not d[key]:
            del d[key]
    if config.process_groups == 1:
        del d["process_groups"]
    if config.join_batches is not None:
        d["join_batches"] = list(config.join_batches)
    return d


# ---- public API ----------------------------------------------------------------------------

def simulate(trace: Trace, plan: BucketPlan, comm: CommModel, config: SimConfig, *, spans: bool = True,
             steps_only: bool = False) -> SimResult:
    """Simulate ``config.num_iterations`` iterations of DDP training of ``trace`` under ``plan``
    (its ``options`` shape the simulated reducer) on ``comm`` (collective durations and declared
    capabilities, ``comm.num_ranks >= world_size``). ``spans=False`` leaves ``SimResult.spans``
    empty, every other figure the same. ``steps_only``: only step times are read (no spans or
    bucket timings; of each iteration its start and end, the rest 0; ``meta["steps_only"]``):
    ranks record nothing, and with interference their works between two interactions run as one
    and their launches arrive where the work clock reaches them (the same steps to rounding).
    Points that differ only in what the engine does not read (caps that give the same buckets)
    share one simulation: the last :data:`MEMO_SIZE` results are kept (:func:`_memo_key`), a hit
    returned with this plan's ``meta["plan"]``. An "iteration" is one no_sync cycle
    (``no_sync_steps`` micro-steps plus the synchronised step)."""
    spans = spans and not steps_only
    key = _memo_key(trace, plan, comm, config, spans, steps_only)
    kept = _MEMO.get(key) if key is not None else None
    if kept is not None:  # the entry holds the trace (and comm) it was keyed on by identity
        _MEMO.move_to_end(key)
        return replace(kept[2], meta={**kept[2].meta, "plan": _plan_meta(plan)})
    with gc_paused():  # a simulation's events and generators all live until it ends
        result = _simulate(trace, plan, comm, config, spans, steps_only)
    if key is not None:
        _MEMO[key] = (trace, comm, result)
        if len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return result


#: simulations kept for points that share their engine inputs (:func:`simulate`)
MEMO_SIZE = 16
_MEMO: "OrderedDict[tuple, tuple[Trace, CommModel, SimResult]]" = OrderedDict()


def _memo_key(trace: Trace, plan: BucketPlan, comm: CommModel, config: SimConfig, spans: bool,
              steps_only: bool = False) -> tuple | None:
    """What the engine reads of the inputs: the trace and comm model by identity (the kept entry
    holds them; a hashable comm model by value), the buckets without size limits, the options
    without caps, the config by its repr. None: not kept."""
    try:
        comm_key = ("value", type(comm), hash(comm), comm)
    except TypeError:
        comm_key = ("id", id(comm))
    opts = replace(plan.options, bucket_cap_mb=None, bucket_cap_mb_list=None)

    def layout(buckets: tuple) -> tuple:
        return tuple((b.param_indices, b.size_bytes, b.dtype) for b in buckets)

    try:
        return (id(trace), comm_key, layout(plan.initial), layout(plan.steady), plan.rebuild_iteration, opts,
                repr(config), bool(spans), bool(steps_only))
    except TypeError:  # an option that does not hash
        return None


def _plan_meta(plan: BucketPlan) -> dict[str, Any]:
    return {"label": plan.options.label(), "source": plan.source, "rebuild_iteration": plan.rebuild_iteration,
            "num_buckets_initial": len(plan.initial), "num_buckets_steady": len(plan.steady)}


def _simulate(trace: Trace, plan: BucketPlan, comm: CommModel, config: SimConfig, spans: bool,
              steps_only: bool = False) -> SimResult:
    """One simulation (:func:`simulate` without its memo)."""
    _validate(trace, plan, comm, config)
    asked, schedule = config, None
    if config.join_batches is not None:  # the epoch's phases as extra iterations (engine.join)
        schedule = JoinSchedule.of(config.join_batches, config.num_iterations,
                                   min(_warmup(config, plan), config.num_iterations - 1))
        config = replace(config, num_iterations=schedule.num_iterations,
                         num_warmup_iterations=schedule.warmup)
    env = simpy.Environment()
    eng = Engine(env, trace, plan, comm, config)
    eng.keep_spans = bool(spans)
    eng.steps_only = steps_only
    rng = np.random.default_rng(config.seed)
    sigma = jitter_mod.jitter_sigma(trace, config.jitter)
    factors = jitter_mod.draw_factors(rng, sigma, config.num_iterations, config.world_size, config.stragglers)
    if schedule is not None:  # a joined rank has no compute: it only shadows the collectives
        eng.join = JoinProgram(schedule, eng)
        factors = factors * schedule.mask(config.world_size)
    explicit, need_rest = jitter_mod.choose_explicit_ranks(config.world_size, config.stragglers, sigma, config.rank_group_size)
    # under Join the folded ranks differ from rank 0 (who is active): always simulate them
    need_rest = need_rest or (schedule is not None and len(explicit) < config.world_size)
    ranks, rest_f = _make_ranks(eng, factors, explicit, need_rest, record=not steps_only)
    eng.num_participants = len(ranks)
    for r in ranks:
        env.process(r.run())
    if config.process_groups > 1:  # round-robin communicators' streams
        streams = GroupStreams(eng, config.process_groups)
        for g in range(streams.n):
            env.process(streams.stream(g))
    else:  # the process group's stream (or lanes)
        env.process(eng.comm_stream() if eng.lanes == 1 else eng.comm_lanes())
    env.run()
    assert all(r.finished for r in ranks), "simulation deadlocked: a rank waits for a collective that never completes"

    warmup = _warmup(config, plan)
    colls = [c for c in eng.colls if c.kind is not None]
    assert all(math.isfinite(c.end_s) for c in colls), "a collective never ran"
    if steps_only:  # no spans, no comm figures
        comm_rows: list[tuple] = []
        buckets = ()  # each explicit rank's iterations with their start and end only
        iters = [IterationStats(rank=rk.rank, iteration=k, start_s=acc.start_s, end_s=acc.end_s, forward_s=0.0,
                                backward_compute_s=0.0, exposed_comm_s=0.0, comm_s=0.0, overlap_ratio=0.0,
                                optimizer_s=0.0, warmup=k <= warmup)
                 for rk in ranks[:len(explicit)] for k, acc in enumerate(rk.accs, start=1)]
    else:
        comm_rows, buckets, iters = _rank_figures(eng, ranks, colls, warmup)
    if schedule is not None:  # a joined rank's iterations are left out of the steady breakdown
        mask = schedule.mask(config.world_size)
        iters = [replace(it, warmup=True) if mask[it.iteration - 1, it.rank] == 0 else it for it in iters]
    meta: dict[str, Any] = {
        "engine": "ddpsim.engine.simulate",
        "config": _config_summary(config),
        "plan": _plan_meta(plan),
        "comm": comm.describe(),
        "trace": {"model": trace.model, "num_params": trace.num_params, "total_param_bytes": trace.total_param_bytes},
        "iteration_unit": ("one no_sync cycle: no_sync_steps accumulation micro-steps + 1 synchronised step"
                           if config.no_sync_steps else "one synchronised step"),
        "num_warmup_iterations": warmup,
        "jitter_sigma": sigma,
        "explicit_ranks": list(explicit),
        "rest_representative": bool(need_rest),
        "rest_factor_by_iteration": [float(x) for x in rest_f] if rest_f is not None else None,
        "num_collectives": len(colls),
    }
    if steps_only:
        meta["steps_only"] = True
    if eng.skip_unused:  # per iteration: the buckets skip_all_reduce_unused_params leaves out
        skipped = {str(k): [b for b in range(len(lay.buckets))
                            if eng.skips_bucket(b, lay, eng.static_graph and k == 1)]
                   for k, lay in eng.layouts.items()}
        meta["skipped_buckets"] = {k: bs for k, bs in skipped.items() if bs}
    if schedule is not None:  # the same samples dealt evenly, without Join: the baseline of the cost
        even = simulate(trace, plan, comm, replace(asked, join_batches=None), spans=False)
        meta["join"] = add_even_baseline(eng.join.figures(colls), even.summary()["iteration_mean_s"], config.world_size)
    kept = [(rk.rank, rk.spans) for rk in ranks if rk.keep_spans]
    return SimResult(world_size=config.world_size, ranks=tuple(explicit),
                     spans=LazyTuple(merged_spans, kept, comm_rows) if kept else (),
                     buckets=buckets, iterations=tuple(iters), meta=meta)


def _warmup(config: SimConfig, plan: BucketPlan) -> int:
    """Iterations left out of the steady figures: the config's, else through the rebuild."""
    if config.num_warmup_iterations is not None:
        return config.num_warmup_iterations
    return plan.rebuild_iteration if plan.rebuild_iteration is not None else 1


def _make_ranks(eng: Engine, factors: np.ndarray, explicit: Sequence[int],
                need_rest: bool, record: bool = True) -> tuple[list[Rank], np.ndarray | None]:
    """One process per explicit rank (first, in order; ``record``: their figures), and one for
    the folded ranks when there are any."""
    ranks = [Rank(eng, r, factors[:, r], record=record) for r in explicit]
    rest_f = None
    if need_rest:
        rest = np.delete(factors, list(explicit), axis=1)
        rest_f = rest.max(axis=1)  # per iteration, the folded ranks' largest factor
        if eng.interfere or eng.host is not None:
            # rates depend on time (or a CPU clock gates the device): approximate the folded
            # ranks by their slowest in each iteration
            ranks.append(Rank(eng, -1, rest_f, record=False))
        else:
            ranks.append(RestRanks(eng, rest))
    return ranks, rest_f


def _bucket_timings(logs: list, shapes: dict, starts: list[float], ends: list[float]) -> list[BucketTiming]:
    """Per-bucket timings of every recording rank (:class:`~ddpsim.engine.result.LazyTuple`)."""
    new, setattr_ = object.__new__, object.__setattr__
    out: list[BucketTiming] = []
    for rank, log in logs:
        for (it, b, ready_s, launch_s, first_i, last_i) in log:
            sizes, counts = shapes[it]
            # NOTE: what BucketTiming(...) builds, without the frozen dataclass __init__ (no __post_init__)
            bt = new(BucketTiming)
            setattr_(bt, "__dict__", {"rank": rank, "iteration": it, "bucket": b, "size_bytes": sizes[b],
                                      "num_params": counts[b], "ready_s": ready_s, "launch_s": launch_s,
                                      "start_s": starts[first_i], "end_s": ends[last_i]})
            out.append(bt)
    return out


def _rank_figures(eng: Engine, ranks: list[Rank], colls: list,
                  warmup: int) -> tuple[list[tuple], LazyTuple, list[IterationStats]]:
    """Each collective as a sortable span row, then per-bucket timings (built when read) and
    per-iteration figures of every recording rank."""
    comm_by_iter: dict[int, list[tuple[float, float]]] = {}
    last_grad_end: dict[int, float] = {}  # per iteration, the end of its last gradient collective
    comm_rows: list[tuple] = []
    for c in colls:
        comm_by_iter.setdefault(c.iteration, []).append((c.start_s, c.end_s))
        if c.kind in ("allreduce", "used_map_allreduce"):
            last_grad_end[c.iteration] = max(last_grad_end.get(c.iteration, -math.inf), c.end_s)
        comm_rows.append((c.start_s, 1, c.index, c.end_s, c.kind, c.name, c.iteration, c.bucket, c.size_bytes))
    # what the bucket timings need of every recording rank's bucket log (not the engine: it holds
    # the whole simulation)
    logs = [(rk.rank, rk.bucket_log) for rk in ranks if rk.record]
    shapes = {it: (layout.sizes, layout.counts) for it, layout in eng.layouts.items()}
    starts, ends = [c.start_s for c in eng.colls], [c.end_s for c in eng.colls]
    buckets = LazyTuple(_bucket_timings, logs, shapes, starts, ends)
    iters: list[IterationStats] = []
    for rk in ranks:
        if not rk.record:
            continue
        for k, acc in enumerate(rk.accs, start=1):
            comm_iv = sorted(comm_by_iter.get(k, []))
            comm_s = sum(e - s for s, e in comm_iv)
            overlapped = intersection_s(acc.compute, comm_iv)  # compute intervals: sorted, disjoint
            exposed = max(0.0, last_grad_end.get(k, -math.inf) - acc.bwd_end_s)
            iters.append(IterationStats(
                rank=rk.rank, iteration=k, start_s=acc.start_s, end_s=acc.end_s, forward_s=acc.forward_s,
                backward_compute_s=acc.backward_s, exposed_comm_s=exposed, comm_s=comm_s,
                overlap_ratio=overlapped / comm_s if comm_s > 0 else 0.0, optimizer_s=acc.optimizer_s,
                warmup=k <= warmup))
    return comm_rows, buckets, iters
