"""A topology's consistency check, with one line naming the first problem.

A topology must be connected and hold at least one device; every device needs a host and a
local rank unique on it; every link a positive bandwidth and a non-negative latency; the
backend must match the device kinds. A graph whose hosts are copies of host 0
(:func:`ddpsim.network.graph_build.host_copies`) is checked on everything outside the copies
and the links it reaches, with each copy as one element: a copy is host 0's block renamed
(connected when host 0's is) and reaches the rest only from its NICs, so that decides for the
whole graph. Anything found wrong there is named by the check of every element.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import networkx as nx

from ddpsim.errors import InputError
from ddpsim.network.graph_attrs import BACKENDS, BANDWIDTH, DEVICE_KINDS, HOST, KIND, LATENCY, LOCAL_RANK
from ddpsim.network.graph_build import host_copies


def validate_topology(g: nx.Graph, *, source: str = "topology") -> None:
    """Check a topology (module docstring). Raises InputError naming the first problem."""
    copies = host_copies(g)
    if copies is not None and copies.connected:
        kept = [n for n, d in g._node.items() if d.get(HOST) not in copies.hosts]
        if not _problem(g, kept, lambda: _connected_apart_from_copies(g, kept, copies.hosts), source):
            return
    _check(g, source)


def _check(g: nx.Graph, source: str) -> None:
    """The check of every element."""
    problem = _problem(g, list(g._node), lambda: nx.is_connected(g), source)
    if problem:
        raise InputError(problem)


def _is_pos(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _is_latency(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v >= 0


def _problem(g: nx.Graph, nodes: list, connected: Callable[[], bool], source: str) -> str:
    """The first problem of the elements ``nodes`` and their links (``connected()``: whether they
    form one component), as one line; "" when none."""
    attr = g._node
    devs = [n for n in nodes if attr[n].get(KIND) in DEVICE_KINDS]
    if not devs:
        return f"{source}: has no device; expected at least one node of kind gpu or cpu"
    if not connected():
        parts = sorted((sorted(map(str, c)) for c in nx.connected_components(g)), key=len)
        return (f"{source}: is disconnected ({len(parts)} parts; e.g. {parts[0][:3]} is cut off); "
                "expected every node reachable through links")
    seen: dict[tuple[int, int], str] = {}
    for n in devs:
        key = (attr[n].get(HOST), attr[n].get(LOCAL_RANK))
        if key in seen:
            return (f"{source}: devices {seen[key]!r} and {n!r} share host {key[0]} local_rank {key[1]}; "
                    "expected a unique local_rank per host")
        seen[key] = n
    if not _links_valid(g._adj[n] for n in nodes):
        return _bad_link(g, source)
    problem = _backend_problem(g.graph.get("backend"), {attr[n][KIND] for n in devs})
    return f"{source}: {problem}" if problem else ""


def _backend_problem(backend: Any, kinds: set[str]) -> str:
    if backend not in BACKENDS:
        return f"backend {backend!r} is not accepted; expected one of {', '.join(BACKENDS)}"
    if backend == "nccl" and kinds != {"gpu"}:
        return (f"backend 'nccl' needs GPU devices only, found kinds {sorted(kinds)}; "
                "expected kind gpu (or backend gloo for CPU ranks)")
    if backend == "gloo" and kinds != {"cpu"}:
        return (f"backend 'gloo' models CPU ranks only, found kinds {sorted(kinds)}; "
                "expected kind cpu (or backend nccl for GPUs)")
    return ""


def _connected_apart_from_copies(g: nx.Graph, kept: list, hosts: frozenset[int]) -> bool:
    """Whether the elements ``kept`` and the copies, each copy one element, form one component."""
    attr, adj = g._node, g._adj
    index = {n: i for i, n in enumerate(kept)}
    copy_index = {h: len(kept) + k for k, h in enumerate(sorted(hosts))}
    rows, cols = [], []
    for i, n in enumerate(kept):
        for m in adj[n]:
            j = index.get(m)
            rows.append(i)
            cols.append(copy_index[attr[m][HOST]] if j is None else j)
    return _components(len(kept) + len(hosts), zip(rows, cols)) == 1


def _components(size: int, links: Iterable[tuple[int, int]]) -> int:
    """The number of connected components of elements ``0 .. size - 1`` joined by ``links``
    (union-find with path halving)."""
    parent = list(range(size))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    count = size
    for i, j in links:
        a, b = root(i), root(j)
        if a != b:
            parent[b] = a
            count -= 1
    return count


def _links_valid(adjs: Iterable[dict[Any, dict[str, Any]]]) -> bool:
    """Whether every link has a positive bandwidth and a non-negative latency, checked once per
    distinct (type, value) pair: a large cluster's links take a few values."""
    try:
        pairs = {(type(bw), bw, type(lat), lat) for nbrs in adjs for d in nbrs.values()
                 for bw, lat in ((d.get(BANDWIDTH), d.get(LATENCY)),)}
    except TypeError:  # an unhashable value: not a number
        return False
    return all(_is_pos(bw) and _is_latency(lat) for _, bw, _, lat in pairs)


def _bad_link(g: nx.Graph, source: str) -> str:
    """The line naming the first bad link in the graph's link order."""
    for u, v, d in g.edges(data=True):
        bw = d.get(BANDWIDTH)
        if not _is_pos(bw):
            return f"{source}: link {u}-{v} bandwidth {bw!r} is not accepted; expected > 0"
        lat = d.get(LATENCY)
        if not _is_latency(lat):
            return f"{source}: link {u}-{v} latency {lat!r} is not accepted; expected >= 0"
    return f"{source}: a link's bandwidth or latency is not a number"
