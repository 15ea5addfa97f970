"""A topology's consistency check, with one line naming the first problem: a topology must be
connected and hold at least one device, every device a local rank unique on its host, and the backend
must match the device kinds (links' bandwidths and latencies are checked where they are read: the
YAML file's schema, the catalogue's). A graph whose hosts are copies of host 0
(:func:`ddpsim.network.graph_build.host_copies`: host 0's block renamed, reaching the rest only from
its NICs) is checked outside the copies, each copy one element; anything found wrong there is named
by the check of every element.
"""

from __future__ import annotations

from typing import Callable

import networkx as nx

from ddpsim.errors import InputError
from ddpsim.network.graph_attrs import BACKENDS, DEVICE_KINDS, HOST, KIND, LOCAL_RANK
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
    backend, kinds = g.graph.get("backend"), sorted({attr[n][KIND] for n in devs})
    if backend not in BACKENDS:
        return f"{source}: backend {backend!r} is not accepted; expected one of {', '.join(BACKENDS)}"
    if backend == "nccl" and kinds != ["gpu"]:
        return (f"{source}: backend 'nccl' needs GPU devices only, found kinds {kinds}; "
                "expected kind gpu (or backend gloo for CPU ranks)")
    if backend == "gloo" and kinds != ["cpu"]:
        return (f"{source}: backend 'gloo' models CPU ranks only, found kinds {kinds}; "
                "expected kind cpu (or backend nccl for GPUs)")
    return ""


def _connected_apart_from_copies(g: nx.Graph, kept: list, hosts: frozenset[int]) -> bool:
    """Whether the elements ``kept`` and the copies, each copy one element, form one component."""
    attr, adj, keep = g._node, g._adj, set(kept)
    joined = nx.Graph()
    joined.add_nodes_from(kept)
    joined.add_nodes_from(("copy", h) for h in hosts)
    joined.add_edges_from((n, m if m in keep else ("copy", attr[m][HOST])) for n in kept for m in adj[n])
    return nx.is_connected(joined)
