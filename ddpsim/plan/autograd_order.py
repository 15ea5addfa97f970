"""The order DDP's hooks fire in under compiled DDP: the autograd engine's ready queue.

Each DDPOptimizer subgraph is one autograd function (aot_autograd's ``CompiledFunction``,
``torch/_functorch/_aot_autograd/runtime_wrappers.py``) whose next edges follow its placeholders
in the order ``split_module`` first meets them (``torch/fx/passes/split_module.py``). When its
backward returns, ``Engine::evaluate_function`` (``torch/csrc/autograd/engine.cpp``) pushes the
next nodes that become ready into a priority queue ordered by ``CompareNodeTaskTime``; every
AccumulateGrad node has ``sequence_nr`` ``UINT64_MAX`` (``accumulate_grad.cpp``), so they tie and
leave the heap in the order libstdc++'s ``push_heap``/``__adjust_heap`` give, the rules of
Python's ``heapq`` used here; subgraphs rank by when the split graph calls them
(:func:`run_order`). A view output is regenerated outside the compiled function
(``collect_metadata_analysis.py``: ``alias_of_input``, ``alias_of_intermediate*``), a node of its
own leading to its base's subgraph. Per Dynamo graph, in reverse compile order; parameters the
recorded inputs do not reach keep the eager order after them."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from ddpsim.trace.compiled_graph import OUTPUT_USER, GraphWalk


@dataclass(order=True, slots=True)
class _Task:
    """A ready-queue entry, ordered as ``CompareNodeTaskTime`` orders them (a max-heap: ``key`` is -rank)."""

    key: float
    target: tuple[str, int] = field(compare=False)


def _regenerated_base(walk: GraphWalk, v: int, part_of: dict[int, int], ranges: Sequence[tuple[int, int]]) -> int | None:
    """The subgraph whose output a regenerated view of node ``v`` is taken from; None when
    aot_autograd returns ``v`` from its subgraph directly."""
    b = walk.alias_of[v] if walk.alias_of is not None else None
    if b is None or b not in part_of:
        return None
    p = part_of[v]
    if part_of[b] != p:  # the view aliases the subgraph's input
        return part_of[b]
    user = walk.users[b]
    return p if user is not None and user < ranges[p][0] else None  # its base is an output too


def subgraph_edges(walk: GraphWalk, ranges: Sequence[tuple[int, int]]) -> list[list[tuple[str, int]]]:
    """Per subgraph (forward order, each a ``[start, stop)`` range of walk indices), its backward's
    next edges: ``("param", k)``, ``("sub", j)`` or ``("view", node)`` (a regenerated view), one
    per placeholder needing a gradient."""
    part_of = {i: k for k, (start, stop) in enumerate(ranges) for i in range(start, stop)}
    edges: list[list[tuple[str, int]]] = []
    for k, (start, stop) in enumerate(ranges):
        seen: dict[tuple[str, int], tuple[str, int]] = {}
        for i in reversed(range(start, stop)):  # forward order
            for kind, v in walk.inputs[i]:
                if kind == "param":
                    seen.setdefault((kind, v), ("param", v))
                elif kind == "node" and part_of.get(v, k) != k:
                    regenerated = _regenerated_base(walk, v, part_of, ranges)
                    seen.setdefault((kind, v), ("sub", part_of[v]) if regenerated is None else ("view", v))
        edges.append(list(seen.values()))
    return edges


def run_order(walk: GraphWalk, ranges: Sequence[tuple[int, int]]) -> list[int]:
    """The subgraphs (forward indices) in the order the split graph calls them:
    ``split_module``'s topological sort (a stack of the partitions whose inputs are all made,
    each one's dependents in the order of their first use), which puts independent subgraphs
    (q, k and v projections) out of forward order. Every input made by another subgraph counts,
    with or without a gradient (a mask or an index is a ``data`` input)."""
    part_of = {i: k for k, (start, stop) in enumerate(ranges) for i in range(start, stop)}
    needs: list[set[int]] = [set() for _ in ranges]
    dependents: list[dict[int, None]] = [{} for _ in ranges]
    for k, (start, stop) in enumerate(ranges):
        for i in reversed(range(start, stop)):
            for kind, v in walk.inputs[i]:
                if kind != "param" and part_of.get(v, k) != k:
                    needs[k].add(part_of[v])
                    dependents[part_of[v]].setdefault(k)
    roots = [k for k in range(len(ranges)) if not needs[k]]
    order: list[int] = []
    while roots:
        done = roots.pop()
        order.append(done)
        for k in dependents[done]:
            needs[k].discard(done)
            if not needs[k]:
                roots.append(k)
    return order


def graph_hook_order(walk: GraphWalk, ranges: Sequence[tuple[int, int]]) -> list[int]:
    """The parameters of one Dynamo graph in the order the engine runs their AccumulateGrad nodes."""
    edges = subgraph_edges(walk, ranges)
    part_of = {i: k for k, (start, stop) in enumerate(ranges) for i in range(start, stop)}
    views = {v: ("sub", _regenerated_base(walk, v, part_of, ranges))
             for row in edges for kind, v in row if kind == "view"}
    seeds = [("sub", part_of[i]) for i, u in enumerate(walk.users) if u == OUTPUT_USER and i in part_of]
    called = {k: n for n, k in enumerate(run_order(walk, ranges))}
    pending = Counter(seeds + [e for row in edges for e in row] + list(views.values()))
    queue: list[_Task] = []
    order: list[int] = []

    def arrive(target: tuple[str, int]) -> None:
        pending[target] -= 1
        if pending[target] == 0:  # AccumulateGrad first, then by creation in forward (the split graph's
            # call order; a regenerated view just after the subgraph that returned its node)
            kind, v = target
            rank = math.inf if kind == "param" else called[v] if kind == "sub" else called[part_of[v]] + 0.5
            heapq.heappush(queue, _Task(-rank, target))

    for target in seeds:
        arrive(target)
    while queue:
        kind, v = heapq.heappop(queue).target
        if kind == "param":
            order.append(v)
            continue
        for target in (edges[v] if kind == "sub" else [views[v]]):
            arrive(target)
    return order
