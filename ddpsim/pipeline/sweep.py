"""Sweeps: simulate every point of a scenario, in parallel processes, resumably.

Each point is simulated independently from the same inputs and seed, so results do not
depend on the number of jobs or the order points finish in. A finished point is written at
once, atomically, to ``<out>/points/<point_id>.json`` together with a key (a hash of
everything the engine receives for the point and of ddpsim's source,
:mod:`ddpsim.pipeline.fingerprint`); a rerun whose key matches reuses the file instead of
simulating again, so an interrupted sweep loses nothing.

Per point, :func:`point_metrics` derives the figures the report uses from the
:class:`~ddpsim.engine.result.SimResult`: step-time p50/p95, the breakdown (forward, backward
compute, exposed communication, optimizer, other), the exposed-communication tail (p95 over
steady iterations of the slowest rank), overlap, the first iteration and the rebuild
iteration versus steady state, and the number of buckets.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, fields, replace
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.errors import InputError
from ddpsim.io import ensure_dir, file_id, write_text_atomic
from ddpsim.plan.planner import cap_list_label
from ddpsim.engine.result import BucketTiming, IterationStats, LazyBuckets, LazySpans, SimResult, Span
from ddpsim.pipeline.fingerprint import engine_runs_key
from ddpsim.pipeline.scenario import Scenario, SweepPoint
from ddpsim.formats import quantile

log = logging.getLogger(__name__)

POINT_FORMAT = "ddpsim-point"
POINT_VERSION = 2


# ---- SimResult <-> JSON (here, beside the point files that hold it) ------------------------

def result_to_dict(result: SimResult) -> dict[str, Any]:
    """The result in columns: per record type its field names once and one row of values per
    record (no dict per span)."""
    return {"world_size": result.world_size, "ranks": list(result.ranks),
            "spans": _columns(Span, result.spans), "buckets": _columns(BucketTiming, result.buckets),
            "iterations": _columns(IterationStats, result.iterations), "meta": _jsonable(result.meta)}


def result_from_dict(d: dict[str, Any]) -> SimResult:
    """:func:`result_to_dict`'s inverse (also of version 1's list of dicts); spans and bucket
    timings are built into objects when first read (:class:`~ddpsim.engine.result.LazyTuple`)."""
    return SimResult(world_size=d["world_size"], ranks=tuple(d["ranks"]),
                     spans=LazySpans(_records, Span, _checked(Span, d["spans"])),
                     buckets=LazyBuckets(_records, BucketTiming, _checked(BucketTiming, d["buckets"])),
                     iterations=tuple(_records(IterationStats, d["iterations"])), meta=d.get("meta", {}))


def _columns(cls: type, items: Sequence[Any]) -> dict[str, Any]:
    names = [f.name for f in fields(cls)]
    get = attrgetter(*names)
    return {"columns": names, "rows": [get(x) for x in items]}


def _checked(cls: type, d: Any) -> Any:
    """``d`` if it is a :func:`_columns` table of ``cls`` (or a list); else KeyError: a stale file."""
    if isinstance(d, dict) and (not isinstance(d.get("columns"), list) or set(d["columns"]) != {f.name for f in fields(cls)}
                                or not isinstance(d.get("rows"), list)):
        raise KeyError(f"{cls.__name__} columns")
    return d


def _records(cls: type, d: Any) -> list[Any]:
    """The records of one :func:`_columns` table (or of a list of dicts)."""
    if not isinstance(d, dict):
        return [cls(**x) for x in d]
    cols = _checked(cls, d)["columns"]
    new, setattr_ = object.__new__, object.__setattr__
    out = []
    for row in d["rows"]:
        # NOTE: what cls(**row) builds, without the frozen dataclass __init__ (no __post_init__)
        x = new(cls)
        setattr_(x, "__dict__", dict(zip(cols, row)))
        out.append(x)
    return out


def _jsonable(x: Any) -> Any:
    try:
        return json.loads(json.dumps(x, default=str))
    except (TypeError, ValueError):
        return str(x)


# ---- per-point figures -----------------------------------------------------------------------

def point_metrics(result: SimResult, plan: Any = None) -> dict[str, Any]:
    """The figures of one simulated point (seconds; see the module docstring)."""
    s = result.summary()
    steady = result.steady_iterations() or list(result.iterations)
    by_iter: dict[int, list[IterationStats]] = {}
    for it in result.iterations:
        by_iter.setdefault(it.iteration, []).append(it)

    def slowest(its: list[IterationStats]) -> IterationStats:
        return max(its, key=lambda it: (it.iteration_s, -it.rank))

    steady_iters = sorted({it.iteration for it in steady})
    # the tail of exposed communication: per steady iteration the worst rank, then p95
    exposed = [result.exposed_comm_s(k) for k in steady_iters]
    steady_keys = {(it.rank, it.iteration) for it in steady}
    by_kind: dict[str, float] = {}
    for sp in result.spans:
        if sp.stream == "compute" and (sp.rank, sp.iteration) in steady_keys:
            by_kind[sp.kind] = by_kind.get(sp.kind, 0.0) + sp.duration_s
    first = slowest(by_iter[min(by_iter)]) if by_iter else None
    rebuild_it = getattr(plan, "rebuild_iteration", None) if plan is not None else None
    rebuild = slowest(by_iter[rebuild_it]) if rebuild_it in by_iter else None
    other = s["iteration_mean_s"] - (s["forward_s"] + s["backward_compute_s"] + s["exposed_comm_s"] + s["optimizer_s"])
    out = dict(s)
    out.update({
        "exposed_comm_p95_s": quantile(exposed, 0.95) if exposed else 0.0,
        "other_s": max(other, 0.0),
        "first_iteration_s": first.iteration_s if first else None,
        "first_iteration_exposed_comm_s": first.exposed_comm_s if first else None,
        "rebuild_iteration": rebuild_it,
        "rebuild_iteration_s": rebuild.iteration_s if rebuild else None,
        "num_steady_iterations": len(steady_iters),
        # mean time per steady iteration and rank on the compute stream, by span kind
        "compute_by_kind_s": {k: v / max(1, len(steady_keys)) for k, v in sorted(by_kind.items())},
    })
    if "join" in result.meta:  # an epoch under Join: its phases and cost (ddpsim.engine.join)
        out["join"] = result.meta["join"]
    if plan is not None:
        out["num_buckets_initial"] = len(plan.initial)
        out["num_buckets"] = len(plan.steady)
        out["bucket_sizes_bytes"] = [b.size_bytes for b in plan.steady]
        out["first_bucket_sizes_bytes"] = [b.size_bytes for b in plan.initial]
    return out


# ---- one point ------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class PointRecord:
    """One finished sweep point: its values, figures, and the full simulation result."""

    point: SweepPoint
    key: str
    world_size: int
    backend: str
    metrics: dict[str, Any]
    comm: dict[str, Any]
    result: SimResult

    @property
    def point_id(self) -> str:
        return self.point.point_id

    def to_dict(self) -> dict[str, Any]:
        return {"format": POINT_FORMAT, "version": POINT_VERSION, "key": self.key, "point": self.point.as_dict(),
                "varied": list(self.point.varied), "world_size": self.world_size, "backend": self.backend,
                "metrics": _jsonable(self.metrics), "comm": _jsonable(self.comm),
                # no spans: only the timeline points need them, simulated again with them
                # (ddpsim.pipeline.scenario_run._with_timeline_spans)
                "result": result_to_dict(replace(self.result, spans=()))}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PointRecord":
        return cls(point=SweepPoint.from_dict(d["point"], tuple(d.get("varied", ("bucket_cap_mb",)))), key=d["key"],
                   world_size=d["world_size"], backend=d["backend"], metrics=d["metrics"], comm=d.get("comm", {}),
                   result=result_from_dict(d["result"]))


def simulate_point(scenario: Scenario, point: SweepPoint, trace: Any, key: str = "",
                   simulate: Callable | None = None, build: Callable | None = None,
                   samples: bool = True) -> PointRecord:
    """Simulate one point (in this process), its uncertainty samples too unless ``samples`` is
    False (the worker pool runs them as tasks of their own: :func:`_simulate_todo`).

    ``simulate(trace, plan, comm, config) -> SimResult`` defaults to :func:`ddpsim.engine.simulate.simulate`;
    ``build(scenario, point, trace) -> PointInputs`` to :meth:`Scenario.build_point`, i.e.
    :func:`ddpsim.pipeline.inputs.build_point_inputs` (both
    replaceable for tests; they must be picklable, i.e. module-level functions).
    """
    engine = simulate is None
    if simulate is None:
        from ddpsim.engine.simulate import simulate
    inputs = build(scenario, point, trace) if build is not None else scenario.build_point(point, trace=trace)
    result = simulate(inputs.trace, inputs.plan, inputs.comm, inputs.config)
    describe = getattr(inputs.comm, "describe", None)
    metrics = point_metrics(result, inputs.plan)
    if samples and isinstance(scenario, Scenario):
        from ddpsim.pipeline.resampling import simulate_samples

        band = simulate_samples(scenario, point, inputs, simulate, spans_kw=engine)
        if band:
            metrics["uncertainty"] = band
    return PointRecord(point=point, key=key, world_size=inputs.config.world_size, backend=inputs.backend,
                       metrics=metrics, comm=describe() if describe else {}, result=result)


def _worker(args: tuple) -> tuple[SweepPoint, int | None, Any]:
    """One task of the pool: ``(point, None, its record's dict without samples)`` or, for
    sample ``k`` of the point, ``(point, k, the sample's p50 step)``."""
    scenario, point, trace, key, simulate, build, k = args
    if k is None:
        return point, None, simulate_point(scenario, point, trace, key, simulate, build, samples=False).to_dict()
    from ddpsim.pipeline.resampling import simulate_sample

    inputs = build(scenario, point, trace) if build is not None else scenario.build_point(point, trace=trace)
    if simulate is None:
        from ddpsim.engine.simulate import simulate as engine_simulate

        return point, k, simulate_sample(scenario, point, inputs, k, engine_simulate, spans_kw=True)
    return point, k, simulate_sample(scenario, point, inputs, k, simulate, spans_kw=False)


# ---- the sweep ------------------------------------------------------------------------------

def point_key(scenario: Scenario, point: SweepPoint, inputs: Any, traces: dict | None = None) -> str:
    """The resume key of ``point``: everything the engine receives for it, its uncertainty
    re-simulations included (:func:`ddpsim.pipeline.fingerprint.engine_runs_key`). ``traces``
    keeps each trace's hash for the points that share it."""
    from ddpsim.pipeline.resampling import sample_runs

    runs = [(inputs.trace, inputs.plan, inputs.comm, inputs.config)]
    samples = sample_runs(scenario, point, inputs) if isinstance(scenario, Scenario) else []
    runs += [(inputs.trace, inputs.plan, comm, cfg) for _, comm, cfg in samples]
    return engine_runs_key(point.as_dict(), runs, [s.label for s, _, _ in samples], traces)


def progress_bar(total: int, label: str, enabled: bool) -> Any:
    """A tqdm bar of ``total`` points on stderr; disabled (nothing drawn) unless ``enabled`` and
    stderr is a terminal, so logs never get its carriage returns."""
    from tqdm import tqdm

    on = enabled and total > 0 and sys.stderr.isatty()
    return tqdm(total=total, desc=label, unit="point", file=sys.stderr, disable=not on, leave=False)


def check_sweepable(scenario: Scenario, inputs: Any) -> None:
    """Refuse a point whose plan has no buckets (every parameter in
    ``delay_all_reduce_named_params``): DDP builds no reducer, so the sweep has nothing to vary."""
    if not inputs.plan.steady:
        raise InputError(f"{scenario.where()}ddp.delay_all_reduce_named_params: every parameter of trace "
                         f"{inputs.trace.model!r} is delayed, so DDP builds no reducer and a sweep has no buckets to "
                         "vary; expected at least one parameter left to the reducer ('ddpsim simulate' models the case)")


def default_jobs() -> int:
    """Worker processes by default: the CPUs this process may run on (its affinity mask where
    the platform has one, else every CPU of the machine)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity on this platform
        cpus = os.cpu_count() or 1
    return max(1, cpus)


def run_sweep(scenario: Scenario, *, out_dir: str | Path | None = None, jobs: int | None = None, trace: Any = None,
              progress: bool = True, points: Sequence[SweepPoint] | None = None,
              simulate: Callable | None = None, build: Callable | None = None) -> list[PointRecord]:
    """Simulate every point of ``scenario`` and return the records in sweep order.

    Args:
        out_dir: the report folder; finished points go to ``out_dir/points/`` as they finish
            and matching ones found there are reused. None: nothing is written or reused.
        jobs: worker processes (default :func:`default_jobs`: the CPUs this process may use); 1 runs
            in this process.
        trace: the scenario's trace if already loaded.
        points: a subset of the scenario's points (default: all).
        progress: a tqdm bar of the points on stderr, drawn on a terminal only.
        simulate, build: see :func:`simulate_point`.

    Raises:
        InputError: bad jobs, an unwritable folder, or any input error of a point.
    """
    jobs = default_jobs() if jobs is None else jobs
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"--jobs: {jobs!r} is not accepted; expected an integer >= 1")
    pts = list(scenario.points() if points is None else points)
    if not pts:
        raise InputError(f"sweep: {scenario.name!r} has no points; expected at least one bucket_cap_mb")
    trace = trace if trace is not None else scenario.load_trace()
    built = {p: build(scenario, p, trace) if build is not None else scenario.build_point(p, trace=trace) for p in pts}
    hashed: dict = {}
    keys = {p: point_key(scenario, p, built[p], hashed) for p in pts}
    pdir = None
    if out_dir is not None:
        pdir = ensure_dir(Path(out_dir) / "points", "--out-dir")
    records: dict[SweepPoint, PointRecord] = {}
    todo = []
    for p in pts:
        f = pdir / f"{file_id(p.point_id)}.json" if pdir is not None else None
        if f is not None and f.is_file():
            try:
                d = json.loads(f.read_text())
                if d.get("format") == POINT_FORMAT and d.get("key") == keys[p]:
                    records[p] = PointRecord.from_dict(d)
                    continue
            except (ValueError, KeyError, TypeError):
                pass  # unreadable or stale: simulate again (the file is replaced atomically)
        todo.append(p)
    # Fail fast, in this process, on input errors shared by every point (topology, world size).
    if todo:
        check_sweepable(scenario, built[todo[0]])
    t0 = time.monotonic()
    with progress_bar(len(todo), f"{scenario.name}: simulating", progress) as bar:

        def finish(d: dict[str, Any]) -> None:
            rec = PointRecord.from_dict(d) if isinstance(d, dict) else d
            if pdir is not None:  # a worker's dict is the record's to_dict() already
                doc = d if isinstance(d, dict) else rec.to_dict()
                write_text_atomic(pdir / f"{file_id(rec.point_id)}.json", json.dumps(doc, separators=(",", ":")) + "\n")
            records[rec.point] = rec
            bar.set_postfix_str(rec.point_id, refresh=False)
            bar.update(1)

        _simulate_todo(scenario, todo, trace, keys, jobs, simulate, build, finish, built)
    if todo:
        log.info("%s: simulated %d point(s) in %.1f s (%d reused)", scenario.name, len(todo), time.monotonic() - t0,
                 len(pts) - len(todo))
    return [records[p] for p in pts]


def _simulate_todo(scenario: Scenario, todo: list[SweepPoint], trace: Any, keys: dict[SweepPoint, str], jobs: int,
                   simulate: Callable | None, build: Callable | None, finish: Callable[[Any], None],
                   built: dict[SweepPoint, Any]) -> None:
    """Simulate the points ``todo`` (in this process, or ``jobs`` worker processes), ``finish`` each.

    In the pool every uncertainty sample is a task of its own beside its point's, so a point's
    samples run on several workers at once. A point is finished when its
    record and all its samples are in, its samples stored in sample order (the same bytes as
    one process)."""
    if jobs == 1 or len(todo) <= 1:
        for p in todo:
            finish(simulate_point(scenario, p, trace, keys[p], simulate, build))
        return
    from ddpsim.pipeline.resampling import samples_for, samples_record

    samples = {p: samples_for(scenario, built[p]) if isinstance(scenario, Scenario) else [] for p in todo}
    tasks = [(scenario, p, trace, keys[p], simulate, build, k) for p in todo for k in (None, *range(len(samples[p])))]
    docs: dict[SweepPoint, dict[str, Any]] = {}
    p50: dict[SweepPoint, list] = {p: [None] * len(samples[p]) for p in todo}

    def take(got: tuple) -> None:
        p, k, value = got
        if k is None:
            docs[p] = value
        else:
            p50[p][k] = value
        if p in docs and all(v is not None for v in p50[p]):
            doc = docs.pop(p)
            if samples[p]:
                doc["metrics"]["uncertainty"] = _jsonable(samples_record(samples[p], p50[p]))
            finish(doc)

    run_in_pool(_worker, tasks, min(jobs, len(tasks)), take)


def run_in_pool(fn: Callable[[Any], Any], tasks: Sequence[Any], workers: int, finish: Callable[[Any], None],
                initializer: Callable | None = None, initargs: tuple = ()) -> None:
    """``fn(task)`` for every task in ``workers`` processes, ``finish`` called here with each
    result as it completes; an error or an interrupt cancels the tasks not yet started."""
    with cf.ProcessPoolExecutor(max_workers=workers, initializer=initializer, initargs=initargs) as ex:
        futs = [ex.submit(fn, t) for t in tasks]
        try:
            for fut in cf.as_completed(futs):
                finish(fut.result())
        except BaseException:
            ex.shutdown(wait=False, cancel_futures=True)
            raise


def sweep_table(records: Sequence[PointRecord]):
    """One row per point: its values and figures (a pandas DataFrame), in sweep order."""
    import pandas as pd

    rows = []
    for r in records:
        m = r.metrics
        rows.append({
            "point": r.point_id, "bucket_cap_mb": r.point.bucket_cap_mb,
            **({"bucket_cap_mb_list": None if not r.point.bucket_cap_mb_list else cap_list_label(r.point.bucket_cap_mb_list)}
               if any(x.point.bucket_cap_mb_list for x in records) else {}),
            **{k: r.point.value(k) for k in r.point.varied if k != "bucket_cap_mb"},
            "world_size": r.world_size, "num_buckets": m.get("num_buckets"),
            "iteration_p50_s": m["iteration_p50_s"], "iteration_p95_s": m["iteration_p95_s"],
            "forward_s": m["forward_s"], "backward_compute_s": m["backward_compute_s"],
            "exposed_comm_s": m["exposed_comm_s"], "exposed_comm_p95_s": m["exposed_comm_p95_s"],
            "optimizer_s": m["optimizer_s"], "other_s": m["other_s"], "comm_s": m["comm_s"],
            "overlap_ratio": m["overlap_ratio"], "first_iteration_s": m["first_iteration_s"],
            "rebuild_iteration_s": m["rebuild_iteration_s"],
        })
    band = uncertainty_summary(records)
    if band is not None:
        for row, b in zip(rows, band["points"]):
            row["iteration_p50_lo_s"], row["iteration_p50_hi_s"] = b["p50_lo_s"], b["p50_hi_s"]
            row["regret_max"] = b["regret_max"]
            row["robust"] = row["point"] in band["robust"]
    return pd.DataFrame(rows)


def uncertainty_summary(records: Sequence[PointRecord]) -> dict[str, Any] | None:
    """:func:`ddpsim.pipeline.resampling.summarize` over the records' stored samples (None without)."""
    from ddpsim.pipeline.resampling import summarize

    return summarize([r.point_id for r in records], [r.metrics["iteration_p50_s"] for r in records],
                     [r.metrics.get("uncertainty") or {} for r in records])


#: p50 step times within this relative distance of the lowest count as ties
TIE_RELATIVE = 1e-6


def best_record(records: Sequence[PointRecord]) -> PointRecord:
    """The point with the lowest p50 step time; points within :data:`TIE_RELATIVE` of it tie
    and the earliest in sweep order wins (the default point comes first)."""
    low = min(r.metrics["iteration_p50_s"] for r in records)
    return next(r for r in records if r.metrics["iteration_p50_s"] <= low * (1 + TIE_RELATIVE))


def default_record(records: Sequence[PointRecord], point: SweepPoint) -> PointRecord | None:
    """The default-cap record with ``point``'s other values."""
    for r in records:
        if r.point.is_default_cap and all(r.point.value(k) == point.value(k) for k in r.point.varied if k != "bucket_cap_mb"):
            return r
    return None


def fmt_pct(x: float | None) -> str:
    """A relative change as a signed percent ("-" for None); a change under 1e-12 is two equal
    step times to rounding, printed without a sign (+0.0%)."""
    return "-" if x is None else f"{0.0 if abs(x) < 1e-12 else 100 * x:+.1f}%"


def fmt_s(x: float | None) -> str:
    """Seconds to a short human string in ms or s."""
    if x is None:
        return "-"
    return f"{x * 1e3:.3f} ms" if abs(x) < 1 else f"{x:.3f} s"


def step_times(records: Sequence[PointRecord]) -> dict[str, list[float]]:
    return {r.point_id: r.result.step_times_s() for r in records}
