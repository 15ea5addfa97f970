"""The points runner: simulate every point of a job (in this process, worker processes or on
Ray), each independently from the same inputs and seed, writing each finished point at once to
``<out>/points/<point_id>.json`` under a key of everything the engine received
(:mod:`ddpsim.pipeline.fingerprint`), which a rerun reuses. A sweep is its one-scenario case, a
design space (:mod:`ddpsim.pipeline.explore`) its many-scenario one; :func:`point_metrics` gives
each point's figures.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import math
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
from ddpsim.engine.result import (BucketTiming, IterationStats, LazyTuple, SimResult, Span,
                                  compute_s_by_kind)
from ddpsim.pipeline.fingerprint import digest, engine_runs_key
from ddpsim.pipeline.inputs import build_point_inputs, run_engine
from ddpsim.pipeline.resampling import sample_runs, samples_for, simulate_sample, summarize
from ddpsim.pipeline.scenario import Scenario
from ddpsim.pipeline.specs import Point
from ddpsim.formats import quantile

log = logging.getLogger(__name__)

POINT_FORMAT = "ddpsim-point"
POINT_VERSION = 4


# ---- SimResult <-> JSON (here, beside the point files that hold it) ------------------------

def result_to_dict(result: SimResult) -> dict[str, Any]:
    """The result in columns: per record type its field names once and one row of values per
    record (no dict per span)."""
    return {"world_size": result.world_size, "ranks": list(result.ranks),
            "spans": _columns(Span, result.spans), "buckets": _columns(BucketTiming, result.buckets),
            "iterations": _columns(IterationStats, result.iterations), "meta": jsonable(result.meta)}


def result_from_dict(d: dict[str, Any]) -> SimResult:
    """:func:`result_to_dict`'s inverse; spans and bucket timings are built into objects when
    first read (:class:`~ddpsim.engine.result.LazyTuple`)."""
    return SimResult(world_size=d["world_size"], ranks=tuple(d["ranks"]),
                     spans=LazyTuple(_records, Span, _checked(Span, d["spans"])),
                     buckets=LazyTuple(_records, BucketTiming, _checked(BucketTiming, d["buckets"])),
                     iterations=tuple(_records(IterationStats, d["iterations"])), meta=d.get("meta", {}))


def _columns(cls: type, items: Sequence[Any]) -> dict[str, Any]:
    names = [f.name for f in fields(cls)]
    get = attrgetter(*names)
    return {"columns": names, "rows": [get(x) for x in items]}


def _checked(cls: type, d: Any) -> Any:
    """``d`` if it is a :func:`_columns` table of ``cls``; else KeyError: a stale file."""
    if not isinstance(d, dict) or not isinstance(d.get("columns"), list) or \
            set(d["columns"]) != {f.name for f in fields(cls)} or not isinstance(d.get("rows"), list):
        raise KeyError(f"{cls.__name__} columns")
    return d


def _records(cls: type, d: Any) -> list[Any]:
    """The records of one :func:`_columns` table."""
    cols = _checked(cls, d)["columns"]
    new, setattr_ = object.__new__, object.__setattr__
    out = []
    for row in d["rows"]:
        # NOTE: what cls(**row) builds, without the frozen dataclass __init__ (no __post_init__)
        x = new(cls)
        setattr_(x, "__dict__", dict(zip(cols, row)))
        out.append(x)
    return out


def jsonable(x: Any) -> Any:
    """``x`` as JSON reads it back (tuples as lists, other objects as their str)."""
    try:
        return json.loads(json.dumps(x, default=str))
    except (TypeError, ValueError):
        return str(x)


# ---- per-point figures -----------------------------------------------------------------------

def point_metrics(result: SimResult, plan: Any = None) -> dict[str, Any]:
    """The figures of one point (seconds): the engine's summary, the exposed-communication p95
    over steady iterations (worst rank each), the first and rebuild iterations, compute by span
    kind and the bucket counts."""
    s = result.summary()
    steady = result.steady_iterations() or list(result.iterations)

    def slowest(k: int | None) -> IterationStats | None:
        """The slowest rank's stats of iteration ``k`` (None: no such iteration)."""
        its = [it for it in result.iterations if it.iteration == k]
        return max(its, key=lambda it: (it.iteration_s, -it.rank)) if its else None

    steady_iters = sorted({it.iteration for it in steady})
    # the tail of exposed communication: per steady iteration the worst rank, then p95
    exposed = [result.exposed_comm_s(k) for k in steady_iters]
    steady_keys = {(it.rank, it.iteration) for it in steady}
    by_kind = compute_s_by_kind(result.spans, steady_keys)
    first = slowest(min((it.iteration for it in result.iterations), default=None))
    rebuild_it = getattr(plan, "rebuild_iteration", None)
    rebuild = slowest(rebuild_it)
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
    """One finished point: its values, figures and, where the job keeps it, the simulation result."""

    point: Point
    #: the point's name in its files and tables (a sweep's: ``point.point_id``)
    point_id: str
    key: str
    world_size: int
    backend: str
    metrics: dict[str, Any]
    comm: dict[str, Any]
    #: the engine's result (None: a job that keeps figures only, :attr:`Job.detail`)
    result: SimResult | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"format": POINT_FORMAT, "version": POINT_VERSION, "id": self.point_id, "key": self.key,
                "point": self.point.as_dict(), "named": [list(x) for x in self.point.named], "world_size": self.world_size,
                "backend": self.backend, "metrics": jsonable(self.metrics), "comm": jsonable(self.comm),
                # no spans: only the timeline points need them, simulated again with them
                # (ddpsim.pipeline.scenario_run._with_timeline_spans)
                "result": None if self.result is None else result_to_dict(replace(self.result, spans=()))}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PointRecord":
        return cls(point=Point.from_dict(d["point"], d["named"]), point_id=d["id"], key=d["key"],
                   world_size=d["world_size"], backend=d["backend"], metrics=d["metrics"], comm=d["comm"],
                   result=None if d["result"] is None else result_from_dict(d["result"]))


# ---- the points runner ----------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class PointTask:
    """One point of a :class:`Job`: its id, its values, the scenario and trace it is built from."""

    point_id: str
    point: Point
    group: int = 0       # index into Job.scenarios
    trace: str = ""      # key into Job.traces
    #: the key of this point's file from an earlier run (None: none kept): the worker reuses
    #: the file when the key of the inputs it builds is the same (:func:`evaluate`)
    kept_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class Job:
    """What a worker needs to simulate any point: the scenario of each group of points, the
    traces (loaded: a remote worker needs no file of the trace), the points, and how to run them."""

    scenarios: tuple[Any, ...]
    traces: dict[str, Any]
    #: per trace key, the hash of the trace's content (:func:`ddpsim.pipeline.fingerprint.digest`)
    trace_hashes: dict[str, str]
    points: tuple[PointTask, ...]
    #: True: the result is kept (simulated with spans, stored without) and the uncertainty
    #: samples are simulated; False: figures only, simulated without spans
    detail: bool = True
    #: True: each point is simulated alone ('ddpsim simulate'): no uncertainty or cost-term
    #: re-simulations, and a point with no buckets is modelled rather than refused
    alone: bool = False
    #: ``simulate(trace, plan, comm, config) -> SimResult`` (default: the engine) and
    #: ``build(scenario, point, trace) -> PointInputs`` (default: :func:`build_point_inputs`);
    #: replaceable for tests, picklable (module-level functions)
    simulate: Callable | None = None
    build: Callable = build_point_inputs


def evaluate(job: Job, units: Sequence[tuple[int, int | None]]) -> list[tuple[int, int | None, Any]]:
    """Each unit ``(i, None)``: point ``i``'s ``(record, samples)``, or None when its ``kept_key`` is
    the key of the inputs built here; ``(i, k)``: sample ``k``'s p50 step of point ``i``."""
    hashed = {id(t): (t, job.trace_hashes[k]) for k, t in job.traces.items() if k in job.trace_hashes}
    return [(i, k, _evaluate_one(job, i, k, hashed)) for i, k in units]


def _evaluate_one(job: Job, i: int, k: int | None, hashed: dict) -> Any:
    t = job.points[i]
    sc = job.scenarios[t.group]
    trace = job.traces[t.trace]
    inputs = job.build(sc, t.point, trace)
    if k is not None:
        return simulate_sample(sc, t.point, inputs, k, job.simulate)
    key = point_key(sc, t.point, inputs, hashed, detail=job.detail, alone=job.alone)
    if key == t.kept_key:
        return None
    if not job.alone:
        check_sweepable(sc, inputs, t.point_id)
    result = run_engine(job.simulate, inputs, spans=job.detail)
    describe = getattr(inputs.comm, "describe", None) if job.detail else None
    rec = PointRecord(point=t.point, point_id=t.point_id, key=key, world_size=inputs.config.world_size,
                      backend=inputs.backend, metrics=point_metrics(result, inputs.plan),
                      comm=describe() if describe else {}, result=result if job.detail else None)
    return rec, samples_for(sc, inputs) if job.detail and not job.alone else []


def point_key(scenario: Any, point: Point, inputs: Any, traces: dict | None = None, *, detail: bool = True,
              alone: bool = False) -> str:
    """The resume key of ``point``: everything the engine receives for it, whether it records
    spans and, with ``detail`` and not ``alone``, its uncertainty re-simulations
    (:func:`ddpsim.pipeline.fingerprint.engine_runs_key`). ``traces`` keeps each trace's hash
    for the points that share it."""
    runs = [(inputs.trace, inputs.plan, inputs.comm, inputs.config)]
    samples = sample_runs(scenario, point, inputs) if detail and not alone else []
    runs += [(inputs.trace, inputs.plan, comm, cfg) for _, comm, cfg in samples]
    return engine_runs_key({**point.as_dict(), "spans": detail}, runs, [s.label for s, _, _ in samples], traces)


def progress_bar(total: int, label: str, enabled: bool) -> Any:
    """A tqdm bar of ``total`` points on stderr; disabled (nothing drawn) unless ``enabled`` and
    stderr is a terminal, so logs never get its carriage returns."""
    from tqdm import tqdm

    on = enabled and total > 0 and sys.stderr.isatty()
    return tqdm(total=total, desc=label, unit="point", file=sys.stderr, disable=not on, leave=False)


def check_sweepable(scenario: Any, inputs: Any, point_id: str) -> None:
    """Refuse a point whose plan has no buckets (every parameter in
    ``delay_all_reduce_named_params``): DDP builds no reducer, so there is nothing to vary."""
    if not inputs.plan.steady:
        raise InputError(f"{scenario.where()}ddp.delay_all_reduce_named_params: every parameter of trace "
                         f"{inputs.trace.model!r} is delayed (point {point_id}), so DDP builds no reducer and there are "
                         "no buckets to vary; expected at least one parameter left to the reducer ('ddpsim simulate' "
                         "models the case)")


def default_jobs() -> int:
    """Worker processes by default: the CPUs this process may run on (its affinity mask where
    the platform has one, else every CPU of the machine)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def run_points(job: Job, *, out_dir: str | Path | None = None, jobs: int = 1, ray: Any = None, progress: bool = True,
               label: str = "simulating") -> list[PointRecord]:
    """Simulate every point of ``job`` not already kept in ``out_dir/points/`` (None: nothing kept), in
    ``jobs`` local processes or on ``ray`` (:func:`run_on_ray` given an address): the records in
    point order. Each uncertainty sample is a unit of work of its own, stored in sample order, so
    the bytes do not depend on who runs it."""
    pdir = ensure_dir(Path(out_dir) / "points", "--out-dir") if out_dir is not None else None
    stored = _stored_points(job, pdir)
    job = replace(job, points=tuple(replace(t, kept_key=stored[i].key) if i in stored else t
                                    for i, t in enumerate(job.points)))
    records: dict[int, PointRecord] = {}
    waiting: dict[int, tuple[Any, list[Any], list[Any]]] = {}
    kept: list[int] = []
    t0 = time.monotonic()
    with progress_bar(len(job.points), label, progress) as bar:

        def finish(row: tuple[int, int | None, Any]) -> list[tuple[int, int]]:
            i, k, value = row
            if k is None and value is None:
                records[i] = stored[i]
                kept.append(i)
                bar.update(1)
                return []
            if k is None:  # a worker process sends the record's to_dict()
                rec = PointRecord.from_dict(value[0]) if isinstance(value[0], dict) else value[0]
                waiting[i] = (rec, value[1], [None] * len(value[1]))
            else:
                waiting[i][2][k] = value
            rec, samples, p50 = waiting[i]
            if k is None and samples:
                return [(i, n) for n in range(len(samples))]
            if all(v is not None for v in p50):
                del waiting[i]
                if samples:
                    rec.metrics["uncertainty"] = jsonable({"labels": [s.label for s in samples],
                                                           "inputs": [s.input for s in samples],
                                                           "p50_s": p50})
                if pdir is not None:
                    write_kept(pdir / f"{file_id(rec.point_id)}.json", rec.to_dict())
                records[i] = rec
                bar.set_postfix_str(rec.point_id, refresh=False)
                bar.update(1)
            return []

        units = [(i, None) for i in range(len(job.points))]
        if ray is not None:
            ray(job, units, finish)
        elif jobs <= 1 or len(units) <= 1:
            drive(chunks(units, 1), lambda c: c, lambda p: (evaluate(job, p[0]), p[1:]), finish)
        else:
            run_in_pool(job, chunks(units, jobs), jobs, finish)
    if progress and len(kept) < len(job.points):
        log.info("%s: simulated %d point(s) in %.1f s (%d kept from an earlier run)", label, len(job.points) - len(kept),
                 time.monotonic() - t0, len(kept))
    return [records[i] for i in range(len(job.points))]


def _stored_points(job: Job, pdir: Path | None) -> dict[int, PointRecord]:
    """The readable point files of an earlier run in ``pdir``, by point index (their keys are
    checked where each point is built); an unreadable or stale one is simulated again."""
    def record(d: dict[str, Any]) -> PointRecord | None:
        fits = isinstance(d.get("key"), str) and (d["result"] is not None) == job.detail
        return PointRecord.from_dict(d) if fits else None

    found = {i: read_kept(pdir / f"{file_id(t.point_id)}.json", POINT_FORMAT, POINT_VERSION, record,
                          id=t.point_id) for i, t in enumerate(job.points)} if pdir is not None else {}
    return {i: r for i, r in found.items() if r is not None}


def read_kept(path: Path, fmt: str, version: int, build: Callable[[dict], Any] = lambda d: d,
              **expect: Any) -> Any:
    """``build`` of the JSON document kept at ``path`` (:func:`write_kept`) when it has this format
    and version and the values ``expect``; None where there is none, it is stale or unreadable."""
    try:
        d = json.loads(path.read_text())
        ok = isinstance(d, dict) and d.get("format") == fmt and d.get("version") == version
        return build(d) if ok and all(d.get(k) == v for k, v in expect.items()) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_kept(path: Path, doc: dict[str, Any]) -> None:
    """``doc`` written atomically as one line of compact JSON (a point's file, a run's kept answer)."""
    write_text_atomic(path, json.dumps(doc, separators=(",", ":")) + "\n")


def chunks(units: Sequence[Any], workers: int) -> list[list[Any]]:
    """``units`` in contiguous chunks (neighbours share a network): about four per worker,
    at most 64 units each."""
    if not units:
        return []
    size = max(1, min(64, math.ceil(len(units) / (4 * max(1, workers)))))
    return [list(units[i:i + size]) for i in range(0, len(units), size)]


_WORKER_JOB: list[Job] = []


def _init_worker(job: Job) -> None:
    _WORKER_JOB[:] = [job]


def worker_chunk(units: Sequence[tuple[int, int | None]], job: Job | None = None) -> list[tuple]:
    """:func:`evaluate` in a worker process (of this process's job, or ``job``), each record as its dict."""
    rows = evaluate(job if job is not None else _WORKER_JOB[0], units)
    return [(i, k, (v[0].to_dict(), v[1]) if k is None and v is not None else v) for i, k, v in rows]


def drive(tasks: Sequence[Any], submit: Callable[[Any], Any], wait: Callable[[list], tuple[list, list]],
          finish: Callable[[tuple], Sequence[tuple[int, int]]]) -> None:
    """The loop of every runner: ``submit`` each task (a chunk of units); ``wait`` for some to end
    (their rows, the tasks still pending); ``finish`` each row and submit the units it returns
    as tasks of their own."""
    pending = [submit(t) for t in tasks]
    while pending:
        rows, pending = wait(pending)
        for row in rows:
            pending += [submit([u]) for u in finish(row)]


def run_in_pool(job: Job, tasks: Sequence[Any], workers: int,
                finish: Callable[[tuple], Sequence[tuple[int, int]]]) -> None:
    """:func:`drive` over ``workers`` processes running :func:`worker_chunk`; an error or an
    interrupt cancels the tasks not yet started."""
    def wait(pending: list) -> tuple[list, list]:
        done, rest = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
        return [row for fut in done for row in fut.result()], list(rest)

    with cf.ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(job,)) as ex:
        try:
            drive(tasks, lambda t: ex.submit(worker_chunk, t), wait, finish)
        except BaseException:
            ex.shutdown(wait=False, cancel_futures=True)
            raise


#: Ray re-runs a task this many times when its worker process or node dies
RAY_MAX_RETRIES = 3


def run_on_ray(address: str | None, job: Job, units: Sequence[Any],
               finish: Callable[[tuple], Sequence[tuple[int, int]]]) -> None:
    """:func:`drive` over Ray tasks running :func:`worker_chunk` on the job put once in Ray's
    object store: a local Ray (``address`` None, ``ddpsim explore --ray``) or the running cluster
    at ``address`` (``--cluster ray://HOST:10001`` or ``auto``), given this package as
    ``runtime_env.py_modules`` (its workers need ddpsim's dependencies:
    ``pip install ddpsim[ray]``). :func:`run_points` writes each point's file as its task ends, so
    a lost worker loses nothing kept (Ray re-runs its task). A Ray already initialised in this
    process (a notebook's, a test's) is used as it is and left running."""
    if not units:
        return
    try:
        import ray
    except ImportError:
        raise InputError("--ray: Ray is not installed; expected 'pip install ddpsim[ray]' "
                         "(or 'pip install ray')") from None
    started = not ray.is_initialized()
    if started:
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is not None:
            import ddpsim

            kwargs["address"] = address
            kwargs["runtime_env"] = {"py_modules": [str(Path(ddpsim.__file__).resolve().parent)]}
        try:
            ray.init(**kwargs)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            first = str(exc).splitlines()[0][:200]
            raise InputError(f"--cluster: {address!r} is not accepted ({first}); expected a "
                             "running Ray cluster's address (ray://HOST:10001 or auto)") from None
    try:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        task = ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(worker_chunk)
        job_ref = ray.put(job)
        log.info("%d point(s) on Ray (%d CPU(s))", len(units), workers)

        def wait(pending: list) -> tuple[list, list]:
            done, rest = ray.wait(pending, num_returns=1)
            try:
                return [row for ref in done for row in ray.get(ref)], rest
            except ray.exceptions.RayTaskError as exc:  # a task's input error, raised as it was
                if isinstance(getattr(exc, "cause", None), InputError):
                    raise InputError(str(exc.cause)) from None
                raise

        drive(chunks(list(units), workers), lambda c: task.remote(c, job_ref), wait, finish)
    finally:
        if started:
            ray.shutdown()


# ---- the sweep ------------------------------------------------------------------------------

def run_sweep(scenario: Scenario, *, out_dir: str | Path | None = None, jobs: int | None = None, trace: Any = None,
              progress: bool = True, points: Sequence[Point] | None = None, alone: bool = False,
              simulate: Callable | None = None, build: Callable | None = None) -> list[PointRecord]:
    """Simulate ``points`` of ``scenario`` (default: all) with :func:`run_points`; the records in
    sweep order. ``out_dir``: the report folder (``points/`` kept and reused); ``jobs``: default
    :func:`default_jobs`; ``trace``: already loaded; ``alone``, ``simulate``, ``build``: see :class:`Job`."""
    jobs = default_jobs() if jobs is None else jobs
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"--jobs: {jobs!r} is not accepted; expected an integer >= 1")
    pts = list(scenario.points() if points is None else points)
    if not pts:
        raise InputError(f"sweep: {scenario.name!r} has no points; expected at least one bucket_cap_mb")
    trace = trace if trace is not None else scenario.load_trace()
    # Fail fast, in this process, on input errors shared by every point (topology, world size).
    build = build or build_point_inputs
    first = build(scenario, pts[0], trace)
    if not alone:
        check_sweepable(scenario, first, pts[0].point_id)
    job = Job(scenarios=(scenario,), traces={"": trace}, trace_hashes={"": digest(trace)}, alone=alone,
              points=tuple(PointTask(point_id=p.point_id, point=p) for p in pts), simulate=simulate, build=build)
    tasks = len(pts) * (1 + (0 if alone else len(samples_for(scenario, first))))  # no more workers than tasks
    return run_points(job, out_dir=out_dir, jobs=min(jobs, tasks), progress=progress,
                      label=f"{scenario.name}: simulating")


def sweep_table(records: Sequence[PointRecord]):
    """:func:`sweep_rows` as a pandas DataFrame."""
    import pandas as pd

    return pd.DataFrame(sweep_rows(records))


#: a point's figures in its row, in ``sweep.csv``'s order
ROW_FIGURES = ("iteration_p50_s", "iteration_p95_s", "forward_s", "backward_compute_s", "exposed_comm_s",
               "exposed_comm_p95_s", "optimizer_s", "other_s", "comm_s", "overlap_ratio", "first_iteration_s",
               "rebuild_iteration_s")


def sweep_rows(records: Sequence[PointRecord]) -> list[dict[str, Any]]:
    """One row per point: its values and figures, in sweep order (``sweep.csv``), with its
    uncertainty band where the points have samples."""
    lists = any(x.point.bucket_cap_mb_list for x in records)
    band = uncertainty_summary(records)
    rows = []
    for i, r in enumerate(records):
        m, cap_list = r.metrics, r.point.bucket_cap_mb_list
        row = {"point": r.point_id, "bucket_cap_mb": r.point.bucket_cap_mb,
               **({"bucket_cap_mb_list": cap_list and cap_list_label(cap_list) or None} if lists else {}),
               **{k: r.point.value(k) for k, _ in r.point.named if k != "cap"},
               "world_size": r.world_size, "num_buckets": m.get("num_buckets"),
               **{k: m[k] for k in ROW_FIGURES}}
        if band is not None:
            b = band["points"][i]
            row.update(iteration_p50_lo_s=b["p50_lo_s"], iteration_p50_hi_s=b["p50_hi_s"],
                       regret_max=b["regret_max"], robust=r.point_id in band["robust"])
        rows.append(row)
    return rows


def uncertainty_summary(records: Sequence[PointRecord]) -> dict[str, Any] | None:
    """:func:`ddpsim.pipeline.resampling.summarize` over the records' stored samples (None without)."""
    return summarize([r.point_id for r in records], [r.metrics["iteration_p50_s"] for r in records],
                     [r.metrics.get("uncertainty") or {} for r in records])


#: p50 step times within this relative distance of the lowest count as ties
TIE_RELATIVE = 1e-6


def best_record(records: Sequence[Any],
                p50: Callable[[Any], float] = lambda r: r.metrics["iteration_p50_s"]) -> Any:
    """The point with the lowest ``p50`` step time; points within :data:`TIE_RELATIVE` of it tie
    and the earliest in sweep order wins (the default point comes first)."""
    low = min(map(p50, records))
    return next(r for r in records if p50(r) <= low * (1 + TIE_RELATIVE))


def default_record(records: Sequence[PointRecord], point: Point) -> PointRecord | None:
    """The default-cap record with ``point``'s other values."""
    for r in records:
        if r.point.is_default_cap and all(r.point.value(k) == point.value(k) for k, _ in r.point.named if k != "cap"):
            return r
    return None


def gain(base: float | None, new: float | None) -> float | None:
    """``(base - new) / base``, the share of the ``base`` step saved (None without both or base <= 0)."""
    if base is None or new is None or base <= 0:
        return None
    return (base - new) / base


def fmt_pct(x: float | None) -> str:
    """A relative change as a signed percent ("-" for None); a change under 1e-12 is two equal
    step times to rounding, printed without a sign (+0.0%)."""
    return "-" if x is None else f"{0.0 if abs(x) < 1e-12 else 100 * x:+.1f}%"


def fmt_s(x: float | None) -> str:
    """Seconds to a short human string in ms or s."""
    if x is None:
        return "-"
    return f"{x * 1e3:.3f} ms" if abs(x) < 1 else f"{x:.3f} s"
