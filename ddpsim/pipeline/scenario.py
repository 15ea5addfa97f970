"""Scenarios: one YAML file in ``scenarios/`` says what to simulate and what to sweep.

``ddpsim run SCENARIO`` loads it with :func:`load_scenario`, which validates every key
(unknown keys and wrong types raise :class:`~ddpsim.errors.InputError` naming the file and
the key path, e.g. ``scenarios/x.yaml: ddp.bucket_cap_mb: 'abc' is not accepted; expected a
number > 0 or null``) and returns a frozen :class:`Scenario`. ``ddpsim validate`` reads the
same files (the ``validation`` block).

Schema (every key but ``trace``/``model`` and ``cluster.topology`` is optional)::

    name: cpu-gloo-mlp              # -> reports/<name>/ ; default: the file's stem
    description: free text
    trace: traces/mlp.cpu.json      # a trace JSON; relative to the cwd, else to the scenario's
                                    #   folder, else to its parent (the repo root)
    # OR, instead of trace:
    model: {name: mlp, batch_size: 32, device: cpu, iters: 5, warmup: 2, num_threads: 1, options: {}}
    cluster: {topology: cpu-gloo, nodes: 1, options: {}}   # preset name or topology YAML path
    world_size: 2                   # ranks; null = every device of the cluster
    ddp: {bucket_cap_mb: null, bucket_cap_mb_list: null, find_unused_parameters: false, static_graph: false,
          gradient_as_bucket_view: false, broadcast_buffers: true,
          # torch 2.13 (all optional): batched_grad_copy: false, skip_all_reduce_unused_params: false,
          # forward_sync_buffers: null (null: broadcast_buffers decides),
          # mixed_precision: {param_dtype: bfloat16, reduce_dtype: float32, buffer_dtype: null},
          # delay_all_reduce_named_params: [wte.weight], param_to_hook_all_reduce: h.0.ln_1.weight
          # sync_batchnorm: false   (true: the BatchNorm layers are nn.SyncBatchNorm)
          }
    comm_hook: none                 # none | allreduce | fp16 | bf16 | powersgd
    powersgd: {rank: 1, start_iter: 0}
    simulation: {iterations: 6, warmup: null, seed: 0, jitter: trace, stragglers: {3: 1.2},
                 no_sync_steps: 0, interference: null}   # interference: {compute_slowdown, comm_slowdown, weighting}
    calibration: null               # a calibration JSON written by the executor
    cost_model: {contention: true}  # GPU cost terms (ddpsim.network.cost_terms): on for analytical NCCL
    sweep:
      bucket_cap_mb: [null, 1, 5, 25, 100]   # or {min: 1, max: 200, points: 32, scale: log|linear}
      bucket_cap_mb_list: [[1, 4], [2, 8, 25]]  # optional: bucket_cap_mb_list points, after the caps
      find_unused_parameters: [false]        # optional lists; the sweep is their product
      gradient_as_bucket_view: [false]
      comm_hook: [none]
      nodes: [1]                             # needs world_size: null
    timelines: [null, 25, best]     # sweep points (by cap, 'best' or a point id) that get a timeline
    validation: {model: mlp, batch_size: 32, iterations: 20, warmup: 5}   # for 'ddpsim validate'

``null`` in ``bucket_cap_mb`` means "not given" (DDP's default: 25 MiB and a 1 MiB first
bucket at the rebuild); the report's "gain over the default" is measured against it, so a
sweep always contains the ``null`` point (it is added first when missing).
``bucket_cap_mb_list`` (torch >= 2.13) gives DDP per-bucket limits in MiB, the last reused;
torch ignores ``bucket_cap_mb`` when a list is given. Each list of ``sweep.bucket_cap_mb_list``
is one more cap point (``ddp.bucket_cap_mb_list`` is the default one); its point id spells it
``list=2+8+25``.

Sweep points are the product of the listed values in the order written, caps outermost.
Each :class:`SweepPoint` has a stable ``point_id`` (``cap=25``, ``cap=default,hook=fp16``, ...)
used for file names (``reports/<name>/points/<point_id>.json``).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from ddpsim.network.cost_terms import CostModelSpec, parse_cost_model
from ddpsim.errors import InputError
from ddpsim.plan.planner import DDPOptions, cap_point_id, check_cap_list
from ddpsim.engine.config import COMM_HOOKS, SimConfig
from ddpsim.network.interference import Interference
from ddpsim.trace.records import COMPUTE_STATISTICS

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_POINT_ID_RE = re.compile(r"[^A-Za-z0-9.=,_+-]")


# ---- small validated pieces ------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Capture a trace from a bundled model instead of reading a trace file."""

    name: str
    batch_size: int = 8
    device: str = "cpu"
    iters: int = 5
    warmup: int = 2
    num_threads: int | None = 1
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    topology: str
    nodes: int = 1
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))


@dataclass(frozen=True, kw_only=True)
class SimulationSpec:
    iterations: int = 6
    warmup: int | None = None
    seed: int = 0
    jitter: str | float = "trace"
    stragglers: Mapping[int, float] = field(default_factory=dict)
    no_sync_steps: int = 0
    interference: Interference | None = None
    compute_statistic: str = "median"

    def __post_init__(self) -> None:
        object.__setattr__(self, "stragglers", dict(self.stragglers))


@dataclass(frozen=True, kw_only=True)
class ValidationSpec:
    """What ``ddpsim validate`` runs for real (read by the executor side).

    ``bucket_cap_mb``: caps to run for real (None: the sweep's caps); a tuple in it is a
    ``bucket_cap_mb_list`` point. ``model``: a bundled
    model name (default: the scenario's model or the trace's model).
    """

    model: str | None = None
    batch_size: int | None = None
    iterations: int = 20
    warmup: int = 5
    num_threads: int | None = None
    device: str | None = None
    bucket_cap_mb: tuple[float | None, ...] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))


@dataclass(frozen=True, kw_only=True, order=False)
class SweepPoint:
    """One point of a sweep: the values that differ from point to point."""

    bucket_cap_mb: float | None = None
    find_unused_parameters: bool = False
    gradient_as_bucket_view: bool = False
    comm_hook: str = "none"
    nodes: int = 1
    #: which of the fields above the sweep varies (they appear in the point id)
    varied: tuple[str, ...] = ("bucket_cap_mb",)
    #: a bucket_cap_mb_list point (bucket_cap_mb is then None); part of the cap dimension
    bucket_cap_mb_list: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.bucket_cap_mb_list is not None:
            object.__setattr__(self, "bucket_cap_mb_list", tuple(self.bucket_cap_mb_list))

    @property
    def is_default_cap(self) -> bool:
        """Neither bucket_cap_mb nor bucket_cap_mb_list given: DDP's default."""
        return self.bucket_cap_mb is None and not self.bucket_cap_mb_list

    @property
    def cap_label(self) -> str:
        return cap_point_id(self.bucket_cap_mb, self.bucket_cap_mb_list).partition("=")[2]

    @property
    def point_id(self) -> str:
        parts = [cap_point_id(self.bucket_cap_mb, self.bucket_cap_mb_list)]
        if "find_unused_parameters" in self.varied:
            parts.append(f"find_unused={str(self.find_unused_parameters).lower()}")
        if "gradient_as_bucket_view" in self.varied:
            parts.append(f"gabv={str(self.gradient_as_bucket_view).lower()}")
        if "comm_hook" in self.varied:
            parts.append(f"hook={self.comm_hook}")
        if "nodes" in self.varied:
            parts.append(f"nodes={self.nodes}")
        return _POINT_ID_RE.sub("_", ",".join(parts))

    def as_dict(self) -> dict[str, Any]:
        return {"point": self.point_id, "bucket_cap_mb": self.bucket_cap_mb,
                **({"bucket_cap_mb_list": list(self.bucket_cap_mb_list)} if self.bucket_cap_mb_list else {}),
                "find_unused_parameters": self.find_unused_parameters,
                "gradient_as_bucket_view": self.gradient_as_bucket_view,
                "comm_hook": self.comm_hook, "nodes": self.nodes}


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    bucket_cap_mb: tuple[float | None, ...] = (None,)
    bucket_cap_mb_list: tuple[tuple[float, ...], ...] = ()
    find_unused_parameters: tuple[bool, ...] | None = None
    gradient_as_bucket_view: tuple[bool, ...] | None = None
    comm_hook: tuple[str, ...] | None = None
    nodes: tuple[int, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class PointInputs:
    """Everything :func:`ddpsim.engine.simulate.simulate` needs for one sweep point."""

    point: SweepPoint
    trace: Any      # ddpsim.trace.records.Trace
    plan: Any       # ddpsim.plan.planner.BucketPlan
    comm: Any       # ddpsim.network.comm_model.CommModel
    config: SimConfig
    backend: str


# ---- the scenario ------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A validated scenario. Build one with :func:`load_scenario` or :func:`scenario_from_dict`."""

    name: str
    description: str = ""
    path: Path | None = None
    trace_path: Path | None = None
    model: ModelSpec | None = None
    cluster: ClusterSpec
    world_size: int | None = 2
    ddp: DDPOptions = field(default_factory=DDPOptions)
    comm_hook: str = "none"
    powersgd_rank: int = 1
    powersgd_start_iter: int = 0
    simulation: SimulationSpec = field(default_factory=SimulationSpec)
    calibration_path: Path | None = None
    sweep: SweepSpec = field(default_factory=SweepSpec)
    timelines: tuple[Any, ...] = (None,)
    validation: ValidationSpec | None = None
    cost_model: CostModelSpec = field(default_factory=CostModelSpec)
    #: ``ddp.sync_batchnorm``: the model's BatchNorm layers converted with ``convert_sync_batchnorm``
    sync_batchnorm: bool = False

    def __post_init__(self) -> None:
        assert (self.trace_path is None) != (self.model is None), "exactly one of trace_path / model"

    # -- sweep points ------------------------------------------------------------------------
    def points(self) -> list[SweepPoint]:
        """The sweep's points in a fixed order (caps outermost), deterministic."""
        s = self.sweep
        dims = {
            "bucket_cap_mb": [(c, None) for c in s.bucket_cap_mb] + [(None, lst) for lst in s.bucket_cap_mb_list],
            "find_unused_parameters": s.find_unused_parameters or (self.ddp.find_unused_parameters,),
            "gradient_as_bucket_view": s.gradient_as_bucket_view or (self.ddp.gradient_as_bucket_view,),
            "comm_hook": s.comm_hook or (self.comm_hook,),
            "nodes": s.nodes or (self.cluster.nodes,),
        }
        varied = ("bucket_cap_mb",) + tuple(k for k in list(dims)[1:] if getattr(s, k) is not None and len(getattr(s, k)) > 1)
        out = []
        for (cap, cap_list), *rest in itertools.product(*dims.values()):
            out.append(SweepPoint(bucket_cap_mb=cap, bucket_cap_mb_list=cap_list, **dict(zip(list(dims)[1:], rest)),
                                  varied=varied))
        return out

    def base_point(self) -> SweepPoint:
        """The point holding the scenario's own DDP options at the default cap."""
        pts = self.points()
        for p in pts:
            if (p.is_default_cap and p.find_unused_parameters == self.ddp.find_unused_parameters
                    and p.gradient_as_bucket_view == self.ddp.gradient_as_bucket_view
                    and p.comm_hook == self.comm_hook and p.nodes == self.cluster.nodes):
                return p
        return pts[0]

    def default_point_for(self, point: SweepPoint) -> SweepPoint:
        """The default-cap point with the same other values as ``point`` (gain baseline)."""
        return replace(point, bucket_cap_mb=None, bucket_cap_mb_list=None)

    def timeline_points(self, best: SweepPoint | None = None) -> list[SweepPoint]:
        """Sweep points that get a timeline (``timelines:``), deduplicated, in order."""
        pts = self.points()
        base = self.base_point()
        out: list[SweepPoint] = []
        for t in self.timelines:
            if t == "best":
                chosen = best
            elif isinstance(t, str):
                chosen = next((p for p in pts if p.point_id == t), None)
            else:
                caps = [p for p in pts if p.bucket_cap_mb == t and not p.bucket_cap_mb_list]
                chosen = next((p for p in caps if replace(p, bucket_cap_mb=None) == base), None)
                chosen = chosen or next(iter(caps), None)
            if chosen is not None and chosen not in out:
                out.append(chosen)
        return out

    # -- building the inputs of one point ----------------------------------------------------
    def ddp_options(self, point: SweepPoint) -> DDPOptions:
        return replace(self.ddp, bucket_cap_mb=point.bucket_cap_mb, bucket_cap_mb_list=point.bucket_cap_mb_list,
                       find_unused_parameters=point.find_unused_parameters,
                       gradient_as_bucket_view=point.gradient_as_bucket_view)

    def load_trace(self):
        """The scenario's trace: read from ``trace`` or captured from ``model`` (slow)."""
        if self.trace_path is not None:
            from ddpsim.trace.records import load_trace

            return load_trace(self.trace_path)
        from ddpsim.trace.capture import capture_trace
        from ddpsim.trace.models import build_model

        m = self.model
        assert m is not None
        spec = build_model(m.name, **m.options)
        return capture_trace(spec, device=m.device, batch_size=m.batch_size, num_iters=m.iters,
                             num_warmup=m.warmup, num_threads=m.num_threads,
                             command=f"ddpsim run {self.path or self.name} (model {m.name})")

    def load_calibration(self):
        """The scenario's calibration (None without one), read once per Scenario: loading fits
        the probe with the engine, and every point, the CLI's warning and the report ask for it."""
        return self._calibration

    @cached_property
    def _calibration(self):
        if self.calibration_path is None:
            return None
        from ddpsim.calibration.loader import load_calibration

        return load_calibration(self.calibration_path)

    def calibration_warning(self) -> str | None:
        """The calibration's one-line warning (:meth:`ddpsim.calibration.loader.Calibration.warning`),
        or None (no calibration, or nothing to warn about)."""
        cal = self.load_calibration()
        return None if cal is None else cal.warning()

    def graph(self, nodes: int | None = None):
        from ddpsim.network.topology import resolve_topology

        n = self.cluster.nodes if nodes is None else nodes
        return resolve_topology(self.cluster.topology, num_nodes=n, **self.cluster.options)

    def world_size_for(self, graph) -> int:
        from ddpsim.network.topology import max_ranks

        avail = max_ranks(graph)
        if self.world_size is None:
            return avail
        if self.world_size > avail:
            raise InputError(f"{self._where()}world_size: {self.world_size} is not accepted; expected at most "
                             f"{avail} (the devices of cluster {self.cluster.topology!r} x {self.cluster.nodes} node(s))")
        return self.world_size

    def build_point(self, point: SweepPoint, *, trace=None, calibration=None, graph=None) -> PointInputs:
        """The (trace, plan, comm model, SimConfig) of one sweep point."""
        from ddpsim.network.collective_cost import build_comm_model
        from ddpsim.plan.planner import plan_ddp

        trace = trace if trace is not None else self.load_trace()
        if calibration is None:
            calibration = self.load_calibration()
        graph = graph if graph is not None else self.graph(point.nodes)
        world = self.world_size_for(graph)
        comm = build_comm_model(graph, world, calibration=calibration)
        try:
            plan = plan_ddp(trace, self.ddp_options(point))
        except InputError as exc:
            if str(exc).startswith(("delay_all_reduce_named_params", "param_to_hook_all_reduce")):
                raise InputError(f"{self._where()}ddp.{exc}") from None
            raise
        if not plan.steady:
            raise InputError(f"{self._where()}ddp.delay_all_reduce_named_params: every parameter of trace {trace.model!r} "
                             "is delayed, so DDP builds no reducer and a sweep has no buckets to vary; expected at least "
                             "one parameter left to the reducer ('ddpsim simulate' models the case)")
        config = self.sim_config(point, world_size=world, graph=graph, calibration=calibration, comm=comm)
        return PointInputs(point=point, trace=trace, plan=plan, comm=comm, config=config,
                           backend=str(getattr(comm, "backend", "unknown")))

    def sim_config(self, point: SweepPoint, *, world_size: int, graph=None, calibration=None, comm=None) -> SimConfig:
        sim = self.simulation
        interference = sim.interference
        copy_bw = None
        if calibration is not None:
            interference = interference or getattr(calibration, "interference", None)
            copy_bw = getattr(calibration, "copy_bandwidth_bytes_per_s", None)
        elif interference is None and self.cost_model.contention and graph is not None and comm is not None:
            prior = self.contention_prior(graph, comm)
            interference = prior.interference if prior is not None else None
        host = self.host_costs(comm) if calibration is None else None
        if calibration is not None and self.cost_model.host:
            host = getattr(calibration, "host_costs", None)  # measured, when the file has them
        floor = 0.0
        if calibration is None and copy_bw is None and self._gpu_terms(comm) and self.cost_model.copy_kernels:
            # gradient copies as kernels (retime's assumptions): a share of HBM, a floor each
            mem = device_memory_bandwidth(graph) if graph is not None else None
            if mem is not None:
                copy_bw, floor = mem * self.cost_model.memory_efficiency, self.cost_model.min_kernel_s
        if copy_bw is None and graph is not None:
            copy_bw = device_memory_bandwidth(graph)
        for r in sim.stragglers:
            if r >= world_size:
                raise InputError(f"{self._where()}simulation.stragglers: rank {r} is not accepted; expected a rank in [0, {world_size})")
        return SimConfig(world_size=world_size, num_iterations=sim.iterations, num_warmup_iterations=sim.warmup,
                         seed=sim.seed, comm_hook=point.comm_hook, powersgd_rank=self.powersgd_rank,
                         powersgd_start_iter=self.powersgd_start_iter, no_sync_steps=sim.no_sync_steps,
                         jitter=sim.jitter, stragglers=sim.stragglers,
                         interference=interference or Interference(), copy_bandwidth_bytes_per_s=copy_bw,
                         copy_kernel_floor_s=floor, host_costs=host, sync_batchnorm=self.sync_batchnorm,
                         compute_statistic=sim.compute_statistic)

    def contention_prior(self, graph, comm):
        """The GPU contention prior (:mod:`ddpsim.network.contention`) of this comm model, or None
        (no SM count on the devices, a calibrated or gloo model, one rank)."""
        from ddpsim.network.contention import prior_for

        return prior_for(graph, comm, memory_bound_fraction=self.cost_model.memory_bound_fraction,
                         memory_efficiency=self.cost_model.memory_efficiency)

    def host_costs(self, comm):
        """DDP's host costs (:mod:`ddpsim.network.host_costs`) for an analytical NCCL model on GPUs, or
        None (gloo, a calibrated model, ``cost_model.host: false``)."""
        if not self.cost_model.host or not self._gpu_terms(comm):
            return None
        return self.cost_model.host_costs

    @staticmethod
    def _gpu_terms(comm) -> bool:
        """The GPU cost terms apply to the analytical NCCL model only."""
        from ddpsim.network.collective_cost import NcclCommModel

        return isinstance(comm, NcclCommModel)

    def _where(self) -> str:
        return f"{self.path}: " if self.path is not None else ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able echo of the scenario (written into the report)."""
        return {
            "name": self.name, "description": self.description,
            "trace": None if self.trace_path is None else str(self.trace_path),
            "model": None if self.model is None else {"name": self.model.name, "batch_size": self.model.batch_size,
                                                      "device": self.model.device},
            "cluster": {"topology": self.cluster.topology, "nodes": self.cluster.nodes, "options": dict(self.cluster.options)},
            "world_size": self.world_size, "comm_hook": self.comm_hook,
            "ddp": {"bucket_cap_mb": self.ddp.bucket_cap_mb,
                    **({"bucket_cap_mb_list": list(self.ddp.bucket_cap_mb_list)} if self.ddp.bucket_cap_mb_list else {}),
                    "find_unused_parameters": self.ddp.find_unused_parameters,
                    "static_graph": self.ddp.static_graph, "gradient_as_bucket_view": self.ddp.gradient_as_bucket_view,
                    "broadcast_buffers": self.ddp.broadcast_buffers, **_ddp_torch213_echo(self.ddp),
                    **({"sync_batchnorm": True} if self.sync_batchnorm else {})},
            "simulation": {"iterations": self.simulation.iterations, "warmup": self.simulation.warmup,
                           "seed": self.simulation.seed, "jitter": self.simulation.jitter,
                           "stragglers": {str(k): v for k, v in self.simulation.stragglers.items()},
                           "no_sync_steps": self.simulation.no_sync_steps,
                           **({"compute_statistic": self.simulation.compute_statistic}
                              if self.simulation.compute_statistic != "median" else {})},
            "calibration": None if self.calibration_path is None else str(self.calibration_path),
            "cost_model": self.cost_model.as_dict(),
            "points": [p.point_id for p in self.points()],
        }


def _ddp_torch213_echo(o: DDPOptions) -> dict[str, Any]:
    """The torch 2.13 options that differ from their defaults (a default scenario echoes as before)."""
    out: dict[str, Any] = {}
    for key in ("batched_grad_copy", "skip_all_reduce_unused_params"):
        if getattr(o, key):
            out[key] = True
    if o.forward_sync_buffers is not None:
        out["forward_sync_buffers"] = o.forward_sync_buffers
    if o.mixed_precision is not None:
        mp = o.mixed_precision
        out["mixed_precision"] = {"param_dtype": mp.param_dtype, "reduce_dtype": mp.reduce_dtype, "buffer_dtype": mp.buffer_dtype}
    if o.delay_all_reduce_named_params is not None:
        out["delay_all_reduce_named_params"] = list(o.delay_all_reduce_named_params)
        out["param_to_hook_all_reduce"] = o.param_to_hook_all_reduce
    return out


def device_memory_bandwidth(graph) -> float | None:
    """The smallest ``memory_bandwidth_bytes_per_s`` over the graph's rank devices (None if absent)."""
    try:
        from ddpsim.network.topology import rank_nodes

        nodes = list(rank_nodes(graph))
    except Exception:  # noqa: BLE001 - topology helpers optional here
        nodes = list(graph.nodes)
    vals = [graph.nodes[n].get("memory_bandwidth_bytes_per_s") for n in nodes]
    vals = [v for v in vals if isinstance(v, (int, float)) and v > 0]
    return float(min(vals)) if vals else None


# ---- parsing -------------------------------------------------------------------------------

class _Ctx:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, value: Any, accepted: str) -> InputError:
        return InputError(f"{self.source}: {key}: {value!r} is not accepted; expected {accepted}")

    def obj(self, d: Any, key: str, allowed: tuple[str, ...]) -> dict:
        if d is None:
            return {}
        if not isinstance(d, dict):
            raise self.fail(key, d, "a mapping")
        for k in d:
            if k not in allowed:
                where = f"{key}.{k}" if key else str(k)
                raise InputError(f"{self.source}: {where}: unknown key; expected one of {', '.join(allowed)}")
        return d

    def int_(self, v: Any, key: str, minimum: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self.fail(key, v, f"an integer >= {minimum}")
        return v

    def bool_(self, v: Any, key: str) -> bool:
        if not isinstance(v, bool):
            raise self.fail(key, v, "true or false")
        return v

    def str_(self, v: Any, key: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.fail(key, v, "a non-empty string")
        return v

    def cap(self, v: Any, key: str) -> float | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise self.fail(key, v, "a number > 0 or null")
        return float(v) if not float(v).is_integer() else int(v)

    def cap_list(self, v: Any, key: str) -> tuple[float, ...] | None:
        return check_cap_list(v, f"{self.source}: {key}")

    def hook(self, v: Any, key: str) -> str:
        if v not in COMM_HOOKS:
            raise self.fail(key, v, f"one of {', '.join(COMM_HOOKS)}")
        return v

    def list_(self, v: Any, key: str) -> list:
        if not isinstance(v, list) or not v:
            raise self.fail(key, v, "a non-empty list")
        return v


#: ``ddp.<key>`` of torch 2.13's DDP options (see :class:`ddpsim.plan.planner.DDPOptions`)
DDP_TORCH213_KEYS = ("batched_grad_copy", "skip_all_reduce_unused_params", "forward_sync_buffers", "mixed_precision",
                     "delay_all_reduce_named_params", "param_to_hook_all_reduce")


def _ddp_torch213_options(ctx: "_Ctx", dd: dict) -> dict[str, Any]:
    """The torch 2.13 keys of the ``ddp`` block as DDPOptions keyword arguments, validated."""
    from ddpsim.plan.planner import MIXED_PRECISION_DTYPES, MixedPrecision

    out: dict[str, Any] = {}
    for key in ("batched_grad_copy", "skip_all_reduce_unused_params"):
        if key in dd:
            out[key] = ctx.bool_(dd[key], f"ddp.{key}")
    if dd.get("forward_sync_buffers") is not None:
        out["forward_sync_buffers"] = ctx.bool_(dd["forward_sync_buffers"], "ddp.forward_sync_buffers")
    if dd.get("mixed_precision") is not None:
        md = ctx.obj(dd["mixed_precision"], "ddp.mixed_precision", ("param_dtype", "reduce_dtype", "buffer_dtype"))
        for k, v in md.items():
            if v is not None and v not in MIXED_PRECISION_DTYPES:
                raise ctx.fail(f"ddp.mixed_precision.{k}", v, f"one of {', '.join(MIXED_PRECISION_DTYPES)} or null")
        out["mixed_precision"] = MixedPrecision(**md)
    names, hook = dd.get("delay_all_reduce_named_params"), dd.get("param_to_hook_all_reduce")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ctx.fail("ddp.delay_all_reduce_named_params", names, "a list of parameter names")
        out["delay_all_reduce_named_params"] = tuple(names)
    if hook is not None:
        out["param_to_hook_all_reduce"] = ctx.str_(hook, "ddp.param_to_hook_all_reduce")
    if (names is None) != (hook is None):
        raise ctx.fail("ddp.param_to_hook_all_reduce", hook, "a parameter name together with ddp.delay_all_reduce_named_params "
                       "(both or neither)")
    return out


def _resolve_path(text: str, base: Path | None) -> Path:
    p = Path(text)
    if p.is_absolute() or base is None:
        return p
    for cand in (Path.cwd() / p, base / p, base.parent / p):
        if cand.exists():
            return cand
    return p


def _cap_range(ctx: _Ctx, d: dict) -> list[float]:
    d = ctx.obj(d, "sweep.bucket_cap_mb", ("min", "max", "points", "scale", "include_default"))
    for k in ("min", "max", "points"):
        if k not in d:
            raise InputError(f"{ctx.source}: sweep.bucket_cap_mb.{k}: missing; expected a number")
    lo = ctx.cap(d["min"], "sweep.bucket_cap_mb.min")
    hi = ctx.cap(d["max"], "sweep.bucket_cap_mb.max")
    n = ctx.int_(d["points"], "sweep.bucket_cap_mb.points", 1)
    if lo is None or hi is None or hi < lo:
        raise ctx.fail("sweep.bucket_cap_mb.max", d["max"], f"a number >= min ({d['min']!r})")
    scale = d.get("scale", "log")
    if scale not in ("log", "linear"):
        raise ctx.fail("sweep.bucket_cap_mb.scale", scale, "'log' or 'linear'")
    vals = []
    for i in range(n):
        f = i / (n - 1) if n > 1 else 0.0
        v = lo * (hi / lo) ** f if scale == "log" else lo + (hi - lo) * f
        v = float(f"{v:.3g}")  # 3 significant digits: readable point ids
        v = int(v) if v.is_integer() else v
        if v not in vals:
            vals.append(v)
    return vals


def scenario_from_dict(data: Any, *, source: str = "scenario", path: Path | None = None) -> Scenario:
    """Validate a decoded scenario mapping; ``source`` prefixes every error message."""
    ctx = _Ctx(source)
    top = ("name", "description", "trace", "model", "cluster", "world_size", "ddp", "comm_hook", "powersgd",
           "simulation", "calibration", "sweep", "timelines", "validation", "cost_model")
    if not isinstance(data, dict):
        raise InputError(f"{source}: top level is {type(data).__name__}; expected a mapping of scenario keys ({', '.join(top)})")
    ctx.obj(data, "", top)
    base = path.resolve().parent if path is not None else None

    name = data.get("name", path.stem if path is not None else "scenario")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ctx.fail("name", name, "a folder name of letters, digits, '.', '_' or '-'")
    desc = data.get("description", "") or ""
    if not isinstance(desc, str):
        raise ctx.fail("description", desc, "a string")

    trace_path = model = None
    if ("trace" in data) == ("model" in data):
        raise InputError(f"{source}: trace/model: {'both are' if 'trace' in data else 'neither is'} given; expected exactly one of 'trace' (a trace JSON path) or 'model' (a bundled model to capture)")
    if "trace" in data:
        t = ctx.str_(data["trace"], "trace")
        trace_path = _resolve_path(t, base)
        if not trace_path.is_file():
            raise InputError(f"{source}: trace: {t!r} does not exist or is not a file; expected a trace JSON (e.g. traces/mlp.cpu.json)")
    else:
        md = data["model"]
        if isinstance(md, str):
            md = {"name": md}
        md = ctx.obj(md, "model", ("name", "batch_size", "device", "iters", "warmup", "num_threads", "options"))
        if "name" not in md:
            raise InputError(f"{source}: model.name: missing; expected a bundled model name")
        nt = md.get("num_threads", 1)
        model = ModelSpec(
            name=ctx.str_(md["name"], "model.name"),
            batch_size=ctx.int_(md.get("batch_size", 8), "model.batch_size", 1),
            device=ctx.str_(md.get("device", "cpu"), "model.device"),
            iters=ctx.int_(md.get("iters", 5), "model.iters", 1),
            warmup=ctx.int_(md.get("warmup", 2), "model.warmup", 0),
            num_threads=None if nt is None else ctx.int_(nt, "model.num_threads", 1),
            options=ctx.obj(md.get("options", {}), "model.options", tuple(md.get("options", {}) or ())))

    cd = data.get("cluster")
    if cd is None:
        raise InputError(f"{source}: cluster: missing; expected {{topology: <preset or YAML path>, nodes: 1}}")
    if isinstance(cd, str):
        cd = {"topology": cd}
    cd = ctx.obj(cd, "cluster", ("topology", "nodes", "options"))
    if "topology" not in cd:
        raise InputError(f"{source}: cluster.topology: missing; expected a preset name (dgx-a100, dgx-h100, pcie, cpu-gloo) or a topology YAML path")
    topo = ctx.str_(cd["topology"], "cluster.topology")
    if topo.endswith((".yaml", ".yml")):
        tp = _resolve_path(topo, base)
        if not tp.is_file():
            raise InputError(f"{source}: cluster.topology: {topo!r} does not exist; expected a preset name or a topology YAML path")
        topo = str(tp)
    opts = cd.get("options", {}) or {}
    if not isinstance(opts, dict):
        raise ctx.fail("cluster.options", opts, "a mapping")
    cluster = ClusterSpec(topology=topo, nodes=ctx.int_(cd.get("nodes", 1), "cluster.nodes", 1), options=opts)

    ws = data.get("world_size", 2)
    world_size = None if ws in (None, "all") else ctx.int_(ws, "world_size", 1)

    dd = ctx.obj(data.get("ddp"), "ddp", ("bucket_cap_mb", "bucket_cap_mb_list", "find_unused_parameters", "static_graph",
                                          "gradient_as_bucket_view", "broadcast_buffers", "sync_batchnorm")
                 + DDP_TORCH213_KEYS)
    sync_batchnorm = ctx.bool_(dd.get("sync_batchnorm", False), "ddp.sync_batchnorm")
    ddp = DDPOptions(
        bucket_cap_mb=ctx.cap(dd.get("bucket_cap_mb"), "ddp.bucket_cap_mb"),
        bucket_cap_mb_list=ctx.cap_list(dd.get("bucket_cap_mb_list"), "ddp.bucket_cap_mb_list"),
        find_unused_parameters=ctx.bool_(dd.get("find_unused_parameters", False), "ddp.find_unused_parameters"),
        static_graph=ctx.bool_(dd.get("static_graph", False), "ddp.static_graph"),
        gradient_as_bucket_view=ctx.bool_(dd.get("gradient_as_bucket_view", False), "ddp.gradient_as_bucket_view"),
        broadcast_buffers=ctx.bool_(dd.get("broadcast_buffers", True), "ddp.broadcast_buffers"),
        **_ddp_torch213_options(ctx, dd))
    hook = ctx.hook(data.get("comm_hook", "none"), "comm_hook")
    pd_ = ctx.obj(data.get("powersgd"), "powersgd", ("rank", "start_iter"))
    ps_rank = ctx.int_(pd_.get("rank", 1), "powersgd.rank", 1)
    ps_start = ctx.int_(pd_.get("start_iter", 0), "powersgd.start_iter", 0)

    sd = ctx.obj(data.get("simulation"), "simulation",
                 ("iterations", "warmup", "seed", "jitter", "stragglers", "no_sync_steps", "interference", "compute_statistic"))
    iters = ctx.int_(sd.get("iterations", 6), "simulation.iterations", 1)
    warm = sd.get("warmup")
    if warm is not None:
        warm = ctx.int_(warm, "simulation.warmup", 0)
        if warm >= iters:
            raise ctx.fail("simulation.warmup", warm, f"fewer than simulation.iterations ({iters}) or null")
    jitter = sd.get("jitter", "trace")
    if not (jitter in ("trace", "none") or (isinstance(jitter, (int, float)) and not isinstance(jitter, bool)
                                             and math.isfinite(jitter) and jitter >= 0)):
        raise ctx.fail("simulation.jitter", jitter, "'trace', 'none' or a coefficient of variation >= 0")
    statistic = sd.get("compute_statistic", "median")
    if statistic not in COMPUTE_STATISTICS:
        raise ctx.fail("simulation.compute_statistic", statistic, " or ".join(COMPUTE_STATISTICS))
    strag_in = sd.get("stragglers", {}) or {}
    if not isinstance(strag_in, dict):
        raise ctx.fail("simulation.stragglers", strag_in, "a mapping rank -> slowdown factor >= 1")
    stragglers = {}
    for r, f in strag_in.items():
        rr = ctx.int_(int(r) if isinstance(r, str) and r.isdigit() else r, "simulation.stragglers", 0)
        if world_size is not None and rr >= world_size:
            raise ctx.fail("simulation.stragglers", r, f"a rank in [0, {world_size})")
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f < 1.0:
            raise ctx.fail(f"simulation.stragglers.{r}", f, "a slowdown factor >= 1.0")
        stragglers[rr] = float(f)
    interference = None
    if sd.get("interference") is not None:
        idd = ctx.obj(sd["interference"], "simulation.interference", ("compute_slowdown", "comm_slowdown", "weighting"))
        try:
            interference = Interference(**idd)
        except InputError as exc:
            raise InputError(f"{source}: simulation.{exc}") from None
    simulation = SimulationSpec(iterations=iters, warmup=warm, seed=ctx.int_(sd.get("seed", 0), "simulation.seed", 0),
                                jitter=jitter, stragglers=stragglers,
                                no_sync_steps=ctx.int_(sd.get("no_sync_steps", 0), "simulation.no_sync_steps", 0),
                                interference=interference, compute_statistic=statistic)

    calib = data.get("calibration")
    calibration_path = None
    if calib is not None:
        calibration_path = _resolve_path(ctx.str_(calib, "calibration"), base)
        if not calibration_path.is_file():
            raise InputError(f"{source}: calibration: {calib!r} does not exist or is not a file; expected a calibration JSON or null")

    swd = data.get("sweep")
    if swd is None:
        swd = {"bucket_cap_mb": [None]}
    swd = ctx.obj(swd, "sweep", ("bucket_cap_mb", "bucket_cap_mb_list", "find_unused_parameters", "gradient_as_bucket_view",
                                 "comm_hook", "nodes"))
    caps_in = swd.get("bucket_cap_mb", [ddp.bucket_cap_mb])
    if isinstance(caps_in, dict):
        caps = _cap_range(ctx, caps_in)
    else:
        if isinstance(caps_in, list) and not caps_in:
            raise ctx.fail("sweep.bucket_cap_mb", caps_in, "at least one point (a list of numbers > 0 or null, or {min, max, points})")
        caps_in = caps_in if isinstance(caps_in, list) else [caps_in]
        caps = []
        for i, c in enumerate(caps_in):
            v = ctx.cap(c, f"sweep.bucket_cap_mb[{i}]")
            if v not in caps:
                caps.append(v)
    if None not in caps:
        caps.insert(0, None)
    if "bucket_cap_mb_list" in swd:
        lists = [ctx.cap_list(v, f"sweep.bucket_cap_mb_list[{i}]")
                 for i, v in enumerate(ctx.list_(swd["bucket_cap_mb_list"], "sweep.bucket_cap_mb_list"))]
    else:
        lists = [ddp.bucket_cap_mb_list] if ddp.bucket_cap_mb_list else []
    lists = list(dict.fromkeys(lists))

    def bools(key: str) -> tuple[bool, ...] | None:
        if key not in swd:
            return None
        return tuple(dict.fromkeys(ctx.bool_(v, f"sweep.{key}[{i}]") for i, v in enumerate(ctx.list_(swd[key], f"sweep.{key}"))))

    hooks = None
    if "comm_hook" in swd:
        hooks = tuple(dict.fromkeys(ctx.hook(v, f"sweep.comm_hook[{i}]") for i, v in enumerate(ctx.list_(swd["comm_hook"], "sweep.comm_hook"))))
    nodes = None
    if "nodes" in swd:
        nodes = tuple(dict.fromkeys(ctx.int_(v, f"sweep.nodes[{i}]", 1) for i, v in enumerate(ctx.list_(swd["nodes"], "sweep.nodes"))))
        if world_size is not None and len(nodes) > 1:
            raise ctx.fail("world_size", world_size, "null (every device of the cluster) when sweep.nodes lists several node counts")
    sweep = SweepSpec(bucket_cap_mb=tuple(caps), bucket_cap_mb_list=tuple(lists), find_unused_parameters=bools("find_unused_parameters"),
                      gradient_as_bucket_view=bools("gradient_as_bucket_view"), comm_hook=hooks, nodes=nodes)

    tl_in = data.get("timelines", [None])
    if not isinstance(tl_in, list):
        tl_in = [tl_in]
    timelines = []
    for i, t in enumerate(tl_in):
        if isinstance(t, str):
            timelines.append(t)
        elif isinstance(t, list):
            v = ctx.cap_list(t, f"timelines[{i}]")
            if v not in lists:
                raise ctx.fail(f"timelines[{i}]", t, "a bucket_cap_mb_list of the sweep, a bucket_cap_mb, 'best' or a point id")
            timelines.append(cap_point_id(None, v))
        else:
            v = ctx.cap(t, f"timelines[{i}]")
            if v not in caps:
                raise ctx.fail(f"timelines[{i}]", t, f"a bucket_cap_mb of the sweep ({', '.join('null' if c is None else f'{c:g}' for c in caps)}), 'best' or a point id")
            timelines.append(v)

    validation = None
    if data.get("validation") is not None:
        vd = ctx.obj(data["validation"], "validation", ("model", "batch_size", "iterations", "warmup", "num_threads",
                                                        "device", "bucket_cap_mb", "options"))
        vcaps = None
        if "bucket_cap_mb" in vd:
            vcaps = tuple(ctx.cap_list(c, f"validation.bucket_cap_mb[{i}]") if isinstance(c, list)
                          else ctx.cap(c, f"validation.bucket_cap_mb[{i}]")
                          for i, c in enumerate(ctx.list_(vd["bucket_cap_mb"], "validation.bucket_cap_mb")))
        vopts = vd.get("options", {}) or {}
        if not isinstance(vopts, dict):
            raise ctx.fail("validation.options", vopts, "a mapping")
        validation = ValidationSpec(
            model=None if vd.get("model") is None else ctx.str_(vd["model"], "validation.model"),
            batch_size=None if vd.get("batch_size") is None else ctx.int_(vd["batch_size"], "validation.batch_size", 1),
            iterations=ctx.int_(vd.get("iterations", 20), "validation.iterations", 1),
            warmup=ctx.int_(vd.get("warmup", 5), "validation.warmup", 0),
            num_threads=None if vd.get("num_threads") is None else ctx.int_(vd["num_threads"], "validation.num_threads", 1),
            device=None if vd.get("device") is None else ctx.str_(vd["device"], "validation.device"),
            bucket_cap_mb=vcaps, options=vopts)

    return Scenario(name=name, description=desc.strip(), path=path, trace_path=trace_path, model=model, cluster=cluster,
                    world_size=world_size, ddp=ddp, comm_hook=hook, powersgd_rank=ps_rank, powersgd_start_iter=ps_start,
                    simulation=simulation, calibration_path=calibration_path, sweep=sweep, timelines=tuple(timelines),
                    validation=validation, cost_model=parse_cost_model(data.get("cost_model"), source),
                    sync_batchnorm=sync_batchnorm)


DEFAULT_SCENARIO = "default"


def find_scenario(spec: str | Path | None) -> Path:
    """A scenario path from a path or a bundled name (``default``, ``gpt2-1.5b-h100-8n``...)."""
    spec = DEFAULT_SCENARIO if spec is None else str(spec)
    p = Path(spec)
    if p.is_file():
        return p
    candidates = [Path("scenarios") / f"{spec}.yaml", Path(__file__).resolve().parents[2] / "scenarios" / f"{spec}.yaml",
                  Path(__file__).resolve().parents[2] / "scenarios" / spec]
    for c in candidates:
        if c.is_file():
            return c
    bundled = sorted(x.stem for x in (Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))
    raise InputError(f"scenario: {spec!r} does not exist; expected a scenario YAML path or a bundled name ({', '.join(bundled) or 'none found'})")


def load_scenario(spec: str | Path | None = None) -> Scenario:
    """Load and validate a scenario YAML (a path or a bundled name; None = the default).

    Raises:
        InputError: one line naming the file, the key path, the bad value and what is accepted.
    """
    import yaml

    path = find_scenario(spec)
    source = str(spec) if spec is not None and Path(str(spec)).is_file() else str(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{source}: not valid YAML{where} ({getattr(exc, 'problem', exc)}); expected a scenario mapping") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{source}: cannot be read ({exc}); expected a readable scenario YAML") from None
    return scenario_from_dict(data, source=source, path=path)
