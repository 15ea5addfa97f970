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
from typing import Any, Iterable

import networkx as nx

from ddpsim.errors import InputError
from ddpsim.network.graph_attrs import BACKENDS, BANDWIDTH, DEVICE_KINDS, HOST, KIND, LATENCY, LOCAL_RANK
from ddpsim.network.graph_build import host_copies


def validate_topology(g: nx.Graph, *, source: str = "topology") -> None:
    """Check a topology (module docstring). Raises InputError naming the first problem."""
    copies = host_copies(g)
    if copies is not None and copies.connected and _valid_apart_from_copies(g, copies.hosts):
        return
    _check(g, source)


def _is_pos(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _is_latency(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v >= 0


def _check(g: nx.Graph, source: str) -> None:
    devs = [n for n, d in g._node.items() if d.get(KIND) in DEVICE_KINDS]
    if not devs:
        raise InputError(f"{source}: has no device; expected at least one node of kind gpu or cpu")
    if not nx.is_connected(g):
        parts = sorted((sorted(map(str, c)) for c in nx.connected_components(g)), key=len)
        raise InputError(f"{source}: is disconnected ({len(parts)} parts; e.g. {parts[0][:3]} is cut off); "
                         "expected every node reachable through links")
    seen: dict[tuple[int, int], str] = {}
    kinds = set()
    for n in devs:
        d = g._node[n]
        key = (d.get(HOST), d.get(LOCAL_RANK))
        if key in seen:
            raise InputError(f"{source}: devices {seen[key]!r} and {n!r} share host {key[0]} local_rank {key[1]}; "
                             "expected a unique local_rank per host")
        seen[key] = n
        kinds.add(d[KIND])
    if not _links_valid(g._adj.values()):
        _raise_bad_link(g, source)
    problem = _backend_problem(g.graph.get("backend"), kinds)
    if problem:
        raise InputError(f"{source}: {problem}")


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


def _valid_apart_from_copies(g: nx.Graph, hosts: frozenset[int]) -> bool:
    attr, adj = g._node, g._adj
    kept = [n for n, d in attr.items() if d.get(HOST) not in hosts]
    devs = [attr[n] for n in kept if attr[n].get(KIND) in DEVICE_KINDS]
    keys = {(d.get(HOST), d.get(LOCAL_RANK)) for d in devs}
    if not devs or len(keys) != len(devs) or _backend_problem(g.graph.get("backend"), {d[KIND] for d in devs}):
        return False
    return _links_valid(adj[n] for n in kept) and _connected_apart_from_copies(g, kept, hosts)


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


def _raise_bad_link(g: nx.Graph, source: str) -> None:
    """The InputError naming the first bad link in the graph's link order."""
    for u, v, d in g.edges(data=True):
        bw = d.get(BANDWIDTH)
        if not _is_pos(bw):
            raise InputError(f"{source}: link {u}-{v} bandwidth {bw!r} is not accepted; expected > 0")
        lat = d.get(LATENCY)
        if not _is_latency(lat):
            raise InputError(f"{source}: link {u}-{v} latency {lat!r} is not accepted; expected >= 0")
