"""Design spaces: a scenario's ``explore`` block as points, each simulated once, resumably, and
their table. The points are the product of ``explore.axes`` (short names of
:data:`~ddpsim.pipeline.scenario_schema.EXPLORE_ALIASES` or dotted scenario keys; the caps one
dimension) or a seeded sample of it, each the scenario with its values set, validated like a file,
and one point of a figures-only :class:`~ddpsim.pipeline.sweep.Job`; with ``explore.retime`` each
system's trace is re-timed for its GPU and batch size
(:func:`ddpsim.trace.retime.retime_trace_file`), kept in ``<out>/traces/``. The table
(:func:`explore_table`) gives each point's throughput (samples per second,
``batch per rank x world size / p50 step``), its scaling efficiency (that over ``world size x``
one GPU's throughput without DDP: a step of the trace's forward, backward, optimizer and zero_grad
medians), its GPU-hours per 1,000 samples (``world size x step / 3600 / samples x 1,000``) and,
with ``explore.prices`` (a prices YAML: one GPU-hour's price per system, with its source), their
cost; and the Pareto front of throughput against cost (:func:`pareto_front`; the cost is GPU-hours
without prices).
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Iterable, Sequence

from pydantic import Field

from ddpsim.errors import InputError, shorten
from ddpsim.io import ensure_dir, read_yaml
from ddpsim.pipeline.scenario import (Scenario, load_scenario, resolve_file, scenario_from_dict,
                                     set_dotted)
from ddpsim.pipeline.scenario_schema import EXPLORE_ALIASES, MAX_EXPLORE_POINTS, ExploreSection, ScenarioFile
from ddpsim.pipeline.fingerprint import code_fingerprint, digest
from ddpsim.pipeline.specs import Point, crossed
from ddpsim.pipeline.sweep import Job, PointRecord, PointTask, run_points
from ddpsim.plan.planner import cap_point_id
from ddpsim.schema import Schema, validate
from ddpsim.units import MAX_BATCH_SIZE
from ddpsim.value_types import Int

log = logging.getLogger(__name__)
#: an ``explore.axes.batch_size`` value (one type: the schema keeps an adapter per type)
BATCH_SIZE = Int(1, MAX_BATCH_SIZE)

# ---- the design space ----------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ExploreSpace:
    """A validated design space: the scenario mapping it varies and its ``explore`` block."""

    name: str
    source: str
    path: Path | None
    data: dict[str, Any]
    section: ExploreSection

    @property
    def axes(self) -> list[tuple[str, str, list[Any]]]:
        """(axis as written, scenario key it sets, values deduplicated: they need not hash), in the
        order written."""
        return [(k, EXPLORE_ALIASES.get(k, k), [v for i, v in enumerate(vs) if v not in vs[:i]])
                for k, vs in self.section.axes.items()]

    def dimensions(self) -> list[tuple[str, list[Any]]]:
        """The product's dimensions: each axis, the cap axes merged into one ``cap`` dimension of
        (bucket_cap_mb, bucket_cap_mb_list) pairs at the place of the first of them."""
        dims: list[tuple[str, list[Any]]] = []
        caps: list[tuple[Any, Any]] = []
        for name, key, vals in self.axes:
            if key in ("ddp.bucket_cap_mb", "ddp.bucket_cap_mb_list"):
                if not caps:
                    dims.append(("cap", caps))
                caps.extend((v, None) if key == "ddp.bucket_cap_mb" else (None, tuple(v)) for v in vals)
            else:
                dims.append((name, vals))
        return dims

    def size(self) -> int:
        return math.prod(len(v) for _, v in self.dimensions())

    @property
    def base(self) -> Path | None:
        """The folder relative file keys are resolved from (:func:`~ddpsim.pipeline.scenario.resolve_file`)."""
        return Path(self.path).resolve().parent if self.path is not None else None


def load_space(spec: str | Path, overrides: Sequence[str] = ()) -> ExploreSpace:
    """A scenario with an ``explore`` block (a path or a bundled name) with ``overrides``
    (:func:`ddpsim.pipeline.scenario.apply_overrides`), validated (:func:`space_from_dict`)."""
    return load_scenario(spec, overrides, space_from_dict)


def space_from_dict(data: Any, *, source: str = "scenario", path: Path | None = None) -> ExploreSpace:
    """A decoded scenario mapping as a design space; InputError on a bad scenario key, no
    ``explore`` block, an axis value the scenario refuses (``explore.axes.<axis>[i]``), over
    :data:`MAX_EXPLORE_POINTS` points or a sample larger than the space."""
    base = scenario_from_dict(data, source=source, path=path)  # every key checked
    section = base.doc.explore
    if section is None:
        raise InputError(f"{source}: explore: no design space given; expected an 'explore' block with 'axes' "
                         "(scenarios/gpt2-1.5b-design-space.yaml shows one)")
    space = ExploreSpace(name=base.name, source=source, path=path, data=dict(data), section=section)
    n = space.size()
    if n > MAX_EXPLORE_POINTS:
        raise InputError(f"{source}: explore.axes: {n} points is not accepted; expected at most {MAX_EXPLORE_POINTS} "
                         "(use explore.sample)")
    if section.sample is not None and section.sample.points > n:
        raise InputError(f"{source}: explore.sample.points: {section.sample.points} is not accepted; expected at most "
                         f"{n}, the points of the crossed space")
    if "batch_size" in section.axes and not section.retime:
        raise InputError(f"{source}: explore.axes.batch_size: {shorten(section.axes['batch_size'])} is not accepted "
                         "without explore.retime: true; expected retime: true (the trace is re-timed per batch size)")
    # each axis value set alone into the scenario, validated: its error names the axis
    for name, key, vals in space.axes:
        for i, value in enumerate(vals):
            if key == "batch_size":
                validate(BATCH_SIZE, value, f"{source}: explore.axes.batch_size[{i}]")
                continue
            try:
                validate(ScenarioFile, point_mapping(space, ((name, value),)), "point")
            except InputError as exc:
                expected = (str(exc).partition("; expected ")[2]
                            or f"a value {key} accepts ({str(exc).partition(': ')[2]})")
                raise InputError(f"{source}: explore.axes.{name}[{i}]: {shorten(value)} is not accepted; "
                                 f"expected {expected if len(expected) <= 300 else expected[:297] + '...'}") from None
    return space


def space_points(space: ExploreSpace) -> list[Point]:
    """The points: the crossed product (first dimension outermost) or its seeded sample, in
    product order either way, each naming every axis by its last dotted part."""
    dims = space.dimensions()
    total = space.size()
    sample = space.section.sample
    indices: Iterable[int] | None = None
    if sample is not None:
        import numpy as np

        rng = np.random.default_rng(sample.seed)
        if sample.points * 2 >= total:
            indices = sorted(int(x) for x in rng.permutation(total)[:sample.points])
        else:
            picked: set[int] = set()
            while len(picked) < sample.points:
                picked.update(int(x) for x in rng.integers(0, total, size=sample.points - len(picked)))
            indices = sorted(picked)
    named = tuple((name, name.rpartition(".")[2]) for name, _ in dims)
    return [Point(values=vals, named=named) for vals in crossed(dims, indices)]


def point_mapping(space: ExploreSpace, values: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """The scenario mapping of a point: the explore scenario with its values set (the caps
    into ``ddp``), its own ``sweep``, ``timelines``, ``explore`` and ``validation`` left out."""
    doc = copy.deepcopy({k: v for k, v in space.data.items() if k not in ("explore", "sweep", "timelines", "validation")})
    for name, v in values:
        if name == "cap":
            set_dotted(doc, ["ddp", "bucket_cap_mb"], v[0])
            set_dotted(doc, ["ddp", "bucket_cap_mb_list"], None if v[1] is None else list(v[1]))
        elif name != "batch_size":
            set_dotted(doc, EXPLORE_ALIASES.get(name, name).split("."), v)
    return doc


# ---- preparing the job: scenarios, traces, keys ---------------------------------------------

def prepare(space: ExploreSpace, points: Sequence[Point], *, out_dir: Path | None = None) -> tuple[Job, dict[str, Any]]:
    """The job of ``points`` (:class:`~ddpsim.pipeline.sweep.Job`, figures only) and, per trace
    key, the trace's batch size and one-GPU step (for the table). Traces are read (or re-timed)
    here, once each."""
    groups: dict[str, int] = {}
    scenarios: list[Scenario] = []
    traces: dict[str, Any] = {}
    trace_info: dict[str, Any] = {}
    jps = []
    for p in points:
        others = tuple((n, v) for n, v in p.values if n != "cap")
        gkey = json.dumps(others, default=str)
        if gkey not in groups:
            groups[gkey] = len(scenarios)
            scenarios.append(scenario_from_dict(point_mapping(space, others), path=space.path,
                                                source=f"{space.source}: explore point {p.point_id}"))
        sc = scenarios[groups[gkey]]
        tkey = _trace_for(space, sc, p.value("batch_size"), traces, trace_info, out_dir)
        cap = p.value("cap", (sc.ddp.bucket_cap_mb, sc.ddp.bucket_cap_mb_list))
        jps.append(PointTask(point_id=p.point_id, group=groups[gkey], trace=tkey, point=sc.point_at(*cap)))
    hashes = {k: digest(t) for k, t in traces.items()}
    return Job(scenarios=tuple(scenarios), traces=traces, trace_hashes=hashes, points=tuple(jps), detail=False), trace_info


def _trace_for(space: ExploreSpace, sc: Scenario, batch: int | None, traces: dict[str, Any], info: dict[str, Any],
               out_dir: Path | None) -> str:
    """The key of the trace of a point of scenario ``sc`` (loaded or re-timed into ``traces``)."""
    system = sc.cluster.topology
    own = space.section.traces.get(system) if system is not None else None
    src = resolve_file(own, space.base, f"{space.source}: explore.traces.{system}", "a trace JSON") or sc.trace_path
    if not space.section.retime:
        from ddpsim.trace.records import load_trace

        key = str(src) if src is not None else f"model:{sc.model.name}"
        load = partial(load_trace, src) if src is not None else sc.load_trace
    elif src is None:
        raise InputError(f"{space.source}: explore.retime: true is not accepted with 'model'; expected a trace JSON "
                         "in 'trace' (or explore.traces) to re-time")
    else:
        gpu = system_gpu(sc, space.source)
        key = f"{Path(src).name}@{gpu}" + (f",batch={batch}" if batch is not None else "")
        load = partial(_retimed, Path(src), gpu, batch, out_dir)
    if key not in traces:
        # the trace's samples per rank and step (its batch_size) and one GPU's step without DDP:
        # the medians of forward, backward, optimizer and zero_grad
        trace = traces[key] = load()
        size = trace.environment.get("batch_size")
        one = 0.0
        for name in ("forward", "backward", "optimizer", "zero_grad"):
            try:
                one += trace.phase(name).median_s
            except (KeyError, InputError):
                pass
        size = size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None
        info[key] = {"model": trace.model, "batch_size": size, "one_gpu_step_s": one}
    return key


def _retimed(src: Path, gpu: str, batch: int | None, out_dir: Path | None) -> Any:
    """``src`` re-timed for ``gpu`` at ``batch`` (None: its own), read back from ``out_dir/traces``
    when an earlier run wrote it from the same source bytes."""
    from ddpsim.trace.records import load_trace, save_trace
    from ddpsim.trace.retime import get_gpu, modelled_name

    source = load_trace(src)
    env = source.environment
    if env.get("device_name") == modelled_name(get_gpu(gpu)) and batch in (None, env.get("batch_size")):
        return source  # already this GPU's roofline trace at this batch
    stamp = hashlib.sha256(src.read_bytes() + code_fingerprint().encode()).hexdigest()[:12]
    cached = None
    if out_dir is not None:
        cached = Path(out_dir) / "traces" / f"{src.stem}.{gpu}.b{batch if batch is not None else 'same'}.{stamp}.json"
        if cached.is_file():
            return load_trace(cached)
    from ddpsim.trace.retime import retime_trace_file

    log.info("explore: re-timing %s for %s%s (roofline model on the meta device)", src.name, gpu,
             f" at batch {batch}" if batch is not None else "")
    trace = retime_trace_file(src, gpu=gpu, batch_size=batch, command=f"ddpsim explore (retime {src.name} for {gpu})")
    if cached is not None:
        ensure_dir(cached.parent, "--out-dir")
        save_trace(trace, cached)
    return trace


def system_gpu(sc: Scenario, source: str) -> str:
    """The roofline GPU (a GPU of the bundled hardware catalogue) of the cluster's devices, by
    their device model (``H100-SXM5-80GB`` -> ``h100``)."""
    from ddpsim.hardware.catalogue import bundled
    from ddpsim.network.topology import DEVICE_MODEL, KIND

    gpus = bundled().gpus
    graph = sc.graph(1)
    models = sorted({str(d.get(DEVICE_MODEL, "")) for _, d in graph.nodes(data=True) if d.get(KIND) == "gpu"})
    for m in models:
        for name in sorted(gpus, key=len, reverse=True):
            if name in m.lower():
                return name
    raise InputError(f"{source}: explore.retime: system {sc.cluster.topology!r} (devices {', '.join(models) or 'none'}) "
                     f"is not accepted; expected a system whose GPU has roofline figures ({', '.join(sorted(gpus))}), or "
                     f"its own trace in explore.traces")


# ---- simulating points ------------------------------------------------------------------------

def run_explore(space: ExploreSpace, *, out_dir: str | Path | None = None, jobs: int = 1, ray: Any = None,
                progress: bool = True) -> tuple[list[PointRecord], dict[str, Any], Job]:
    """Simulate every point of ``space`` not already kept in ``out_dir/points/``
    (:func:`ddpsim.pipeline.sweep.run_points`): the records in point order, the trace figures
    per trace key and the job."""
    points = space_points(space)
    out = Path(out_dir) if out_dir is not None else None
    job, trace_info = prepare(space, points, out_dir=out)
    if len({p.point_id for p in job.points}) != len(job.points):
        raise InputError(f"{space.source}: explore.axes: two points share an id; expected values that differ in "
                         "their labels")
    records = run_points(job, out_dir=out, jobs=jobs, ray=ray, progress=progress, label=f"{space.name}: exploring")
    return records, trace_info, job


# ---- the table -------------------------------------------------------------------------------

#: the figures of each point in the table (seconds; the engine's summary over steady iterations)
FIGURES = ("iteration_p50_s", "iteration_p95_s", "forward_s", "backward_compute_s", "exposed_comm_s", "comm_s", "overlap_ratio",
           "optimizer_s")


def explore_table(space: ExploreSpace, records: Sequence[PointRecord], job: Job, trace_info: dict[str, Any],
                  prices: dict[str, float] | None = None):
    """One row per point (pandas DataFrame, point order): its values, the figures, throughput,
    scaling efficiency, GPU-hours, with ``prices`` (per system) the cost, and whether it is on the front."""
    import pandas as pd

    pts = space_points(space)
    rows = []
    for p, jp, rec in zip(pts, job.points, records):
        sc = job.scenarios[jp.group]
        info = trace_info[jp.trace]
        f = rec.metrics
        world = rec.world_size
        batch = info["batch_size"]
        step = f["iteration_p50_s"]
        thr = batch * world / step if batch and step > 0 else None
        one = batch / info["one_gpu_step_s"] if batch and info["one_gpu_step_s"] > 0 else None
        gpu_h = world * step / 3600 / (batch * world) * 1000 if batch else None
        system = sc.cluster.label
        price = None if prices is None else prices.get(system)
        row: dict[str, Any] = {"point": jp.point_id}
        for name, v in p.values:
            if name == "cap":
                label = cap_point_id(v[0], v[1])
                row["bucket_cap_mb"] = label.partition("=")[2] if v[1] is None else label
            else:
                row[name] = v if isinstance(v, (int, float, str, bool)) or v is None else json.dumps(v)
        row.update({"system": system, "nodes": sc.cluster.nodes, "world_size": world, "backend": rec.backend,
                    "trace": info["model"], "batch_size_per_rank": batch, "num_buckets": f["num_buckets"],
                    **{k: f.get(k) for k in FIGURES},
                    "throughput_samples_per_s": thr,
                    "scaling_efficiency": thr / (world * one) if thr is not None and one else None,
                    "gpu_hours_per_1k_samples": gpu_h,
                    "cost_per_1k_samples": gpu_h * price if gpu_h is not None and price is not None else None})
        rows.append(row)
    df = pd.DataFrame(rows)
    cost_col = "cost_per_1k_samples" if prices is not None else "gpu_hours_per_1k_samples"
    df["on_front"] = pareto_front(df["throughput_samples_per_s"].tolist(), df[cost_col].tolist())
    return df


def pareto_front(throughput: Sequence[float | None], cost: Sequence[float | None]) -> list[bool]:
    """Which points no other point beats: none has throughput >= and cost <=, one of them
    strictly (points without both figures are never on it)."""
    idx = [i for i in range(len(throughput)) if throughput[i] is not None and cost[i] is not None
           and not (isinstance(throughput[i], float) and math.isnan(throughput[i]))
           and not (isinstance(cost[i], float) and math.isnan(cost[i]))]
    idx.sort(key=lambda i: (cost[i], -throughput[i], i))
    front = [False] * len(throughput)
    best_thr, best_cost = -math.inf, None
    for i in idx:
        if throughput[i] > best_thr:
            front[i] = True
            best_thr, best_cost = throughput[i], cost[i]
        elif throughput[i] == best_thr and cost[i] == best_cost:
            front[i] = True  # the same figures as a point on the front: neither beats the other
    return front


# ---- prices ------------------------------------------------------------------------------------

class PricesFile(Schema):
    """A prices YAML: what one GPU-hour costs on each system (``explore.prices``)."""

    currency: Annotated[str, Field(min_length=1, max_length=16)] = Field("USD", description="the currency's name")
    gpu_hour: Annotated[dict[str, Annotated[float, Field(gt=0, le=1e6)]], Field(min_length=1)] = Field(
        description="system (cluster.topology as written) -> the price of one GPU-hour, > 0")
    source: str = Field("", description="where the prices come from")


def load_prices(space: ExploreSpace) -> PricesFile | None:
    """``explore.prices`` read and validated (None without one)."""
    what = "a prices YAML ({currency, gpu_hour: {system: price}})"
    path = resolve_file(space.section.prices, space.base, f"{space.source}: explore.prices", what)
    if path is None:
        return None
    return validate(PricesFile, read_yaml(path, "explore.prices", what), str(path))
