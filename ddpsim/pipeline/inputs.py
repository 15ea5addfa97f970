"""The one path from a scenario and a sweep point to the engine's inputs: :func:`build_point_inputs`
makes the trace, DDP's bucket plan (:func:`ddpsim.plan.planner.plan_ddp`, or the scenario's explicit
``plan``), the comm model (NCCL or gloo over the topology,
:func:`ddpsim.network.collective_cost.build_comm_model`, a calibration's measured curves, or a plain
latency + bandwidth model) and the :class:`~ddpsim.engine.config.SimConfig` with the cost terms in
force (:func:`ddpsim.network.cost_terms.terms_in_force`). Every command and :mod:`ddpsim.api`
simulate what it builds.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable

from ddpsim.engine.config import PowerSGDState, SimConfig
from ddpsim.errors import InputError
from ddpsim.network.contention import contention_prior as cost_prior
from ddpsim.network.cost_terms import terms_in_force
from ddpsim.pipeline.specs import Point


@dataclass(frozen=True, kw_only=True)
class PointInputs:
    """Everything :func:`ddpsim.engine.simulate.simulate` needs for one sweep point."""

    point: Point
    trace: Any      # ddpsim.trace.records.Trace
    plan: Any       # ddpsim.plan.planner.BucketPlan
    comm: Any       # ddpsim.network.comm_model.CommModel
    config: SimConfig
    backend: str


def build_point_inputs(scenario: Any, point: Point, trace: Any = None, *, calibration: Any = None,
                       graph: Any = None) -> PointInputs:
    """The (trace, plan, comm model, SimConfig) of one point of ``scenario``; ``trace``,
    ``calibration``, ``graph``: already loaded ones (default: the scenario's)."""
    calibration = scenario.calibration if calibration is None else calibration
    if trace is not None and graph is None:
        # a point's re-simulations (its uncertainty samples, its runs with cost terms off) build it again
        cluster = _cluster_key(scenario, point.nodes) if scenario.cluster.topology is not None else None
        return _KEPT.get(("inputs", id(scenario), id(trace), id(calibration), cluster, point),
                         (scenario, trace, calibration), lambda: _build(scenario, point, trace, calibration, None))
    return _build(scenario, point, scenario.load_trace() if trace is None else trace, calibration, graph)


def run_engine(sim: Callable | None, inputs: Any, comm: Any = None, config: Any = None, **engine_kw: Any) -> Any:
    """``sim(trace, plan, comm, config)`` of ``inputs`` (``comm``, ``config``: in place of theirs);
    None or the engine: the engine, given ``engine_kw`` (``spans``, ``steps_only``), which a stand-in
    for tests does not take."""
    from ddpsim.engine.simulate import simulate

    args = (inputs.trace, inputs.plan, inputs.comm if comm is None else comm, inputs.config if config is None else config)
    return simulate(*args, **engine_kw) if sim is None or sim is simulate else sim(*args)


def p50_s(sim: Callable | None, inputs: Any, comm: Any = None, config: Any = None) -> float:
    """The p50 step time of :func:`run_engine`; the engine records the step times only."""
    return run_engine(sim, inputs, comm, config, steps_only=True).summary()["iteration_p50_s"]


def point_graph(scenario: Any, nodes: int) -> Any:
    """The topology graph of ``scenario`` at ``nodes`` nodes, built once for every point over it
    (None: no topology, a latency + bandwidth model)."""
    if scenario.cluster.topology is None:
        return None
    return _KEPT.get(("graph", *_cluster_key(scenario, nodes)), (), lambda: scenario.graph(nodes))


def _build(scenario: Any, point: Point, trace: Any, calibration: Any, graph: Any) -> PointInputs:
    """:func:`build_point_inputs` with the trace and calibration loaded."""
    if graph is None:
        graph = point_graph(scenario, point.nodes)
    world = scenario.world_size_for(graph)
    comm = (comm_model(scenario, graph, world, calibration) if graph is None else
            _KEPT.get(("comm", id(graph), world, id(calibration)), (graph, calibration),
                      lambda: comm_model(scenario, graph, world, calibration)))
    plan = _KEPT.get(("plan", id(trace), scenario.plan_path, scenario.where(), scenario.ddp_options(point)), (trace,),
                     lambda: bucket_plan(scenario, point, trace))
    if getattr(scenario, "compile", None) is not None:
        # DDP under torch.compile (ddpsim.plan.compiled.compiled_point): DDPOptimizer's subgraphs and
        # their grouped gradient-ready times with DDP's buckets over them, or compiled autograd's
        # python reducer; the eager plan is kept where the scenario gives an explicit plan file
        from ddpsim.plan.compiled import compiled_point

        try:
            trace, plan = compiled_point(trace, scenario.ddp_options(point), scenario.compile,
                                         plan=plan if scenario.plan_path is not None else None)
        except InputError as exc:
            raise InputError(f"{scenario.where()}{exc}") from None
    config = sim_config(scenario, point, world_size=world, graph=graph, calibration=calibration, comm=comm)
    return PointInputs(point=point, trace=trace, plan=plan, comm=comm, config=config,
                       backend=comm.backend)


def comm_model(scenario: Any, graph: Any, world_size: int, calibration: Any = None):
    """The collectives' cost model: over the topology ``graph`` (NCCL or gloo, or the
    calibration's curves), or the cluster's latency + bandwidth model when ``graph`` is None."""
    if graph is None:
        from ddpsim.network.comm_model import AlphaBetaModel

        c = scenario.cluster
        return AlphaBetaModel(latency_s=c.latency_us * 1e-6, bandwidth_bytes_per_s=c.bandwidth_gbps * 1e9,
                              num_ranks=world_size)
    from ddpsim.network.collective_cost import build_comm_model

    return build_comm_model(graph, world_size, calibration=calibration)


def bucket_plan(scenario: Any, point: Point, trace: Any):
    """DDP's buckets at ``point`` (:func:`ddpsim.plan.planner.plan_ddp`), or the scenario's
    explicit plan file with the point's DDP options."""
    from ddpsim.plan.planner import load_plan, plan_ddp

    options = scenario.ddp_options(point)
    if scenario.plan_path is not None:
        return replace(load_plan(scenario.plan_path, trace), options=options)
    try:
        return plan_ddp(trace, options)
    except InputError as exc:
        if str(exc).startswith(("delay_all_reduce_named_params", "param_to_hook_all_reduce")):
            raise InputError(f"{scenario.where()}ddp.{exc}") from None
        raise


def hook_call_s(calibration: Any, comm_hook: str) -> float:
    """The calibration's ``comm_hook_call_s`` where a Python comm hook runs (``comm_hook`` not
    none), else 0 (nothing charged, nothing in the config)."""
    if comm_hook == "none" or calibration is None:
        return 0.0
    return float(getattr(calibration, "comm_hook_call_s", None) or 0.0)


def sim_config(scenario: Any, point: Point, *, world_size: int, graph: Any = None, calibration: Any = None,
               comm: Any = None) -> SimConfig:
    """The SimConfig of ``point``: the scenario's ``simulation`` block, the point's comm hook,
    the cost terms in force (GPU terms only with an analytical NCCL ``comm``)."""
    sim, ddp = scenario.simulation, scenario.doc.ddp
    terms = terms_in_force(scenario.cost_model, graph=graph, comm=comm, calibration=calibration,
                           interference=sim.interference, prior_of=contention_prior,
                           copy_bandwidth_bytes_per_s=None if sim.copy_bandwidth_gbps is None else sim.copy_bandwidth_gbps * 1e9)
    for r in sim.stragglers:
        if r >= world_size:
            raise InputError(f"{scenario.where()}simulation.stragglers: rank {r} is not accepted; "
                             f"expected a rank in [0, {world_size})")
    return SimConfig(world_size=world_size, num_iterations=sim.iterations, num_warmup_iterations=sim.warmup,
                     seed=sim.seed, comm_hook=point.comm_hook, no_sync_steps=sim.no_sync_steps,
                     powersgd=PowerSGDState(**ddp.powersgd.model_dump()),
                     jitter=sim.jitter, stragglers=sim.stragglers, sync_batchnorm=ddp.sync_batchnorm,
                     compute_statistic=sim.compute_statistic, interference=terms.interference,
                     copy_bandwidth_bytes_per_s=terms.copy_bandwidth_bytes_per_s,
                     copy_kernel_floor_s=terms.copy_kernel_floor_s, host_costs=terms.host_costs,
                     **dict(point.settings),
                     comm_hook_call_s=hook_call_s(calibration, point.comm_hook),
                     join_batches=None if scenario.join is None else scenario.join.batches(world_size, sim.seed))


def contention_prior(spec: Any, graph: Any, comm: Any) -> Any:
    """:func:`ddpsim.network.contention.contention_prior` of ``comm`` on ``graph`` under the cost
    model ``spec``, derived once per network and ``memory_bound_fraction``/``memory_efficiency``
    (the points over one network and their uncertainty samples ask for it again)."""
    key = ("prior", id(graph), id(comm), spec.memory_bound_fraction, spec.memory_efficiency)
    return _KEPT.get(key, (graph, comm), lambda: cost_prior(spec, graph, comm))


# ---- work shared by points (exact: each is a pure function of its key) ---------------------

class _Kept:
    """The last :data:`KEPT_SIZE` graphs, comm models, contention priors, plans and points' inputs:
    points sharing a network or a plan, and a point's re-simulations, build it once. A key names an
    object by identity only with ``pins``, held by the entry, so that no identity is reused while kept."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: "OrderedDict[tuple, tuple[tuple, Any]]" = OrderedDict()

    def get(self, key: tuple, pins: tuple, build: Callable[[], Any]) -> Any:
        try:
            hit = self.entries.get(key)
        except TypeError:  # a key part that does not hash: build, keep nothing
            return build()
        if hit is not None:
            self.entries.move_to_end(key)
            return hit[1]
        value = build()
        self.entries[key] = (pins, value)
        if len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return value


KEPT_SIZE = 64
_KEPT = _Kept(KEPT_SIZE)


def _cluster_key(scenario: Any, nodes: int) -> tuple:
    """A topology as its inputs: the preset or YAML path and the user's catalogue (each with the
    file's size and modification time), the nodes and the preset's options."""
    topo, catalogue = scenario.cluster.topology, scenario.cluster.catalogue
    return (topo, _stamp(topo), catalogue, _stamp(catalogue), nodes,
            json.dumps(scenario.cluster.options, sort_keys=True, default=repr))


def _stamp(path: Any) -> tuple:
    """A file's size and modification time (empty: not a file, e.g. a preset's name)."""
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return ()
    return (st.st_size, st.st_mtime_ns)
