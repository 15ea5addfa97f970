"""DDP under ``torch.compile``: Dynamo's graph split and when the gradients become ready.

Three modes, by ``torch._dynamo.config.optimize_ddp`` (``torch/_dynamo/config.py``,
``get_optimize_ddp_mode`` in ``torch/_dynamo/utils.py``). ``ddp_optimizer`` (the default):
``DDPOptimizer.compile_fn`` (``torch/_dynamo/backends/distributed.py``) splits each Dynamo graph
at bucket boundaries (:func:`ddp_optimizer_buckets`); each subgraph's backward is one compiled
function, so :func:`compiled_ready_trace` makes each parameter ready when the last one of its
subgraph is in the eager trace, and DDP's Reducer then plans as in eager mode. ``no_optimization``:
every gradient ready when its graph's compiled backward returns. ``python_reducer`` (compiled
autograd): DDP's per-parameter hooks (``_register_accum_grad_hook``) fused by inductor's
``fuse_ddp_communication`` (``torch/_inductor/fx_passes/ddp_fusion.py``; :func:`python_reducer_plan`).
Approximate: a subgraph ends at its last parameter's eager time, and within it the hooks follow
:mod:`ddpsim.plan.autograd_order`. Details: docs/MODEL.md, "Compiled DDP"."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from pydantic import Field

from ddpsim.errors import InputError
from ddpsim.plan.autograd_order import graph_hook_order, run_order
from ddpsim.schema import record
from ddpsim.plan.planner import (BucketPlan, DDPOptions, _make_buckets, compute_bucket_assignment_by_size,
                                 plan_ddp)
from ddpsim.trace.compiled_graph import GraphWalk
from ddpsim.trace.records import IterationSample, Trace
from ddpsim.units import DEFAULT_FIRST_BUCKET_BYTES, MIB
from ddpsim.value_types import Bool


@record("compile.")
class CompileOptions:
    """A scenario's ``compile`` block: ``torch.compile(DDP(model))`` and how Dynamo treats DDP
    (:class:`ddpsim.pipeline.scenario_schema.CompileSection` checks the two switches together)."""

    ddp_optimizer: Bool = Field(True, description=(
        "torch._dynamo.config.optimize_ddp=True: DDPOptimizer splits the graph at bucket boundaries (the "
        "trace needs its compiled_graph: ddpsim trace --compiled-graph); false: one compiled backward, every "
        "gradient ready at its end; not given: true unless compiled_autograd"))
    compiled_autograd: Bool = Field(False, description=(
        "compiled autograd with optimize_ddp='python_reducer': inductor fuses per-parameter all-reduces into "
        "buckets (DDPOptimizer off)"))

    @property
    def mode(self) -> str:
        """``torch._dynamo.config.optimize_ddp``'s mode (a key of ``report.summary.MODE_TEXT``)."""
        if self.compiled_autograd:
            return "python_reducer"
        return "ddp_optimizer" if self.ddp_optimizer else "no_optimization"


@dataclass(frozen=True, kw_only=True)
class Subgraph:
    """One of DDPOptimizer's buckets: its parameters as it counts them, and their bytes."""

    param_indices: tuple[int, ...]
    size_bytes: int
    #: the Dynamo graph (compile order) and its walk indices ``[start, stop)`` the subgraph holds
    graph: int = 0
    nodes: tuple[int, int] = (0, 0)


def ddp_optimizer_buckets(walk: GraphWalk, bucket_bytes_cap: int,
                          first_bucket_cap: int = DEFAULT_FIRST_BUCKET_BYTES) -> list[Subgraph]:
    """``DDPOptimizer.compile_fn``'s buckets for one graph, in forward order (its ``buckets``): it
    walks the graph in reverse, the first bucket closed at ``first_bucket_cap``
    (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``: ``convert_frame.py`` never passes one),
    each bucket's parameter indices in the order it adds them (reverse graph order)."""
    by_node: dict[int, list[tuple[int, int]]] = {}
    for node, index, nbytes in walk.uses:
        by_node.setdefault(node, []).append((index, nbytes))
    built: list[dict] = [{"start": 0, "size": 0, "params": [], "external": False}]
    for i, first_user in enumerate(walk.users):
        cur = built[-1]
        full = cur["size"] >= bucket_bytes_cap or (len(built) == 1 and cur["size"] >= first_bucket_cap)
        if full and cur["external"]:
            cur = {"start": i, "size": 0, "params": [], "external": False}
            built.append(cur)
        for index, nbytes in by_node.get(i, ()):
            cur["size"] += nbytes
            cur["params"].append(index)
        if first_user is not None and first_user < cur["start"]:  # the output (-1) or a node of a later bucket
            cur["external"] = True
    if len(built) > 1 and built[-1]["size"] == 0:  # a preamble without parameters joins the next bucket
        built[-2]["params"].extend(built.pop()["params"])
    stops = [b["start"] for b in built[1:]] + [len(walk.users)]
    return [Subgraph(param_indices=tuple(b["params"]), size_bytes=b["size"], nodes=(b["start"], stop))
            for b, stop in reversed(list(zip(built, stops)))]


def compiled_subgraphs(trace: Trace, options: DDPOptions, compile: CompileOptions) -> list[Subgraph]:
    """The compiled backward's units in forward order: DDPOptimizer's buckets of every Dynamo
    graph, or one per graph without DDPOptimizer (a trace without a compiled graph: one graph)."""
    graph = trace.compiled_graph
    if not compile.ddp_optimizer:
        if graph is None:
            used = tuple(i for i in range(trace.num_params) if trace.params[i].has_grad)
            return [Subgraph(param_indices=used, size_bytes=sum(trace.params[i].size_bytes for i in used))]
        return [Subgraph(param_indices=tuple(u[1] for u in g.uses), size_bytes=sum(u[2] for u in g.uses), graph=k,
                         nodes=(0, len(g.users))) for k, g in enumerate(graph.graphs)]
    if graph is None:
        raise InputError(f"trace {trace.model!r}: compile.ddp_optimizer: true needs the trace's compiled_graph; expected "
                         "a trace captured with 'ddpsim trace --compiled-graph' (or compile.ddp_optimizer: false)")
    if options.bucket_bytes_cap < DEFAULT_FIRST_BUCKET_BYTES:  # where DDPOptimizer.__init__ asserts
        cap = max(options.bucket_cap_mb_list) if options.bucket_cap_mb_list else options.bucket_cap_mb
        raise InputError(f"bucket_cap_mb: {cap:g} is not accepted with compile.ddp_optimizer: true; expected >= 1 MiB "
                         "(DDPOptimizer's first bucket is 1 MiB and torch asserts the cap is not smaller)")
    return [replace(s, graph=k) for k, g in enumerate(graph.graphs) for s in ddp_optimizer_buckets(g, options.bucket_bytes_cap)]


def _grouped_iteration(it: IterationSample, finish: Sequence[int | None], called: Sequence[int]) -> IterationSample:
    """``it`` with each parameter ready when its subgraph ``finish[i]`` ends: backward runs the subgraphs
    in reverse call order, each ending after its own parameters' eager ready times and the one before."""
    own: dict[int, float] = {}
    for t, k in zip(it.grad_ready_s, finish):
        if k is not None and t is not None:
            own[k] = max(own.get(k, t), t)
    end: dict[int, float | None] = {}
    running: float | None = None
    for k in reversed(called):
        if k in own:
            running = own[k] if running is None else max(running, own[k])
        end[k] = running
    ready = tuple(t if k is None or t is None else end[k] for t, k in zip(it.grad_ready_s, finish))
    return replace(it, grad_ready_s=ready)


def engine_hook_order(trace: Trace, subgraphs: Sequence[Subgraph]) -> list[int]:
    """The parameters in the order the autograd engine runs their AccumulateGrad nodes
    (:func:`ddpsim.plan.autograd_order.graph_hook_order`, graphs in reverse compile order); empty
    without the compiled graph's recorded inputs."""
    graph = trace.compiled_graph
    if graph is None or any(g.inputs is None for g in graph.graphs):
        return []
    hooks = (graph_hook_order(g, [s.nodes for s in subgraphs if s.graph == k])
             for k, g in reversed(list(enumerate(graph.graphs))))
    return list(dict.fromkeys(i for order in hooks for i in order))  # each parameter at its first


def compiled_ready_trace(trace: Trace, subgraphs: Sequence[Subgraph]) -> Trace:
    """``trace`` with every parameter ready when its subgraph's compiled backward returns; the
    hooks' order is the new ready times', ties in the autograd engine's order
    (:func:`engine_hook_order`), then the eager order."""
    # the subgraphs in the order they run forward: graph by graph, each graph's in split_module's
    # call order where the trace records the graph's inputs (autograd_order.run_order), else forward
    graph, called = trace.compiled_graph, []
    for g in sorted({s.graph for s in subgraphs}):
        mine = [k for k, s in enumerate(subgraphs) if s.graph == g]
        walk = graph.graphs[g] if graph is not None else None
        if walk is None or walk.inputs is None:
            called.extend(mine)
        else:
            called.extend(mine[k] for k in run_order(walk, [subgraphs[k].nodes for k in mine]))
    finish: list[int | None] = [None] * trace.num_params  # per parameter, the earliest called subgraph using it
    for k in reversed(called):
        for i in subgraphs[k].param_indices:
            finish[i] = k
    iterations = tuple(_grouped_iteration(it, finish, called) for it in trace.iterations)
    grouped = replace(trace, iterations=iterations)
    median = grouped.grad_ready_stat_s("median")
    engine = {i: k for k, i in enumerate(engine_hook_order(trace, subgraphs))}
    position = {i: k for k, i in enumerate(trace.grad_ready_order)}
    order = tuple(sorted(trace.grad_ready_order, key=lambda i: (median[i] if median[i] is not None else float("inf"),
                                                                engine.get(i, len(engine)), position[i])))
    return replace(grouped, grad_ready_order=order)


def python_reducer_plan(trace: Trace, options: DDPOptions) -> BucketPlan:
    """Inductor's fused all-reduces under compiled autograd (``_bucket_size_fusion``): the
    gradients in ready order, the first bucket closed at >= 1 MiB, the others at >= the whole
    MiB of ``bucket_cap_mb``; the same in every iteration."""
    if options.bucket_cap_mb_list:
        raise InputError(f"ddp.bucket_cap_mb_list: {list(options.bucket_cap_mb_list)} is not accepted with "
                         "compile.compiled_autograd: true; expected null (torch asserts the python reducer takes none)")
    order = list(trace.grad_ready_order)
    dtypes = [trace.params[i].dtype for i in order]
    if len(set(dtypes)) > 1:
        raise InputError(f"trace {trace.model!r}: parameters of dtypes {sorted(set(dtypes))} are not accepted with "
                         "compile.compiled_autograd: true; expected one dtype (inductor's DDP fusion takes one)")
    limits = [DEFAULT_FIRST_BUCKET_BYTES, (options.bucket_bytes_cap // MIB) * MIB]
    sizes = [trace.params[i].size_bytes for i in order]
    groups, _ = compute_bucket_assignment_by_size(sizes, dtypes, limits, (), order)
    buckets = _make_buckets(trace, groups, None)
    return BucketPlan(initial=buckets, steady=buckets, rebuild_iteration=None, source="python_reducer", options=options)


def compiled_point(trace: Trace, options: DDPOptions, compile: CompileOptions,
                   plan: BucketPlan | None = None) -> tuple[Trace, BucketPlan]:
    """The (trace, plan) the engine simulates for DDP under ``compile``: the ready times of the
    compiled backward and DDP's buckets over them (``plan``: an explicit plan to use instead),
    or the python reducer's fused buckets over the eager ready times."""
    if compile.compiled_autograd:
        return trace, python_reducer_plan(trace, options)
    grouped = compiled_ready_trace(trace, compiled_subgraphs(trace, options, compile))
    return grouped, plan if plan is not None else plan_ddp(grouped, options)
