"""Rank placement and routing over a topology graph: ranks take the first devices in rank order
(torchrun's: by host, then local rank); a route between two elements is the set of equal-cost shortest
paths (weights :func:`ddpsim.network.topology.edge_weight`, picoseconds per byte: wide links preferred,
ties exact), over which a transfer splits evenly (ECMP), as :func:`networkx.all_shortest_paths`
enumerates them, searched on one host's subgraph or on the fabric's (a host is entered only through
its NICs: the same paths, for much less work).
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import networkx as nx

from ddpsim.errors import InputError
from ddpsim.network.topology import BANDWIDTH, HOST, KIND, LATENCY, edge_weight, rank_nodes


def memo(method: Callable) -> Callable:
    """``method`` computed once per instance and arguments, the results kept in the instance
    (``functools.cache`` on a method would keep every instance alive)."""
    name = f"_memo_{method.__name__}"

    @functools.wraps(method)
    def cached(self: Any, *args: Any) -> Any:
        results = self.__dict__.setdefault(name, {})
        if args not in results:
            results[args] = method(self, *args)
        return results[args]
    return cached


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Which devices the ranks use: ``hosts[i]`` lists host i's devices in rank order."""

    hosts: tuple[tuple[Any, ...], ...]

    @property
    def num_nodes(self) -> int:
        return len(self.hosts)

    @property
    def ppn(self) -> int:
        return max(len(h) for h in self.hosts)


def place_ranks(graph: nx.Graph, num_ranks: int) -> Placement:
    """First ``num_ranks`` devices in rank order, grouped by host."""
    devs = rank_nodes(graph)
    limit = len(devs)
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or not 1 <= num_ranks <= limit:
        raise InputError(f"num_ranks: {num_ranks!r} is not accepted; expected an integer in [1, {limit}] "
                         f"(topology {graph.graph.get('name')!r} holds {limit} devices)")
    domain = nvlink_domains(graph)
    hosts: dict[int, list] = {}
    for d in devs[:num_ranks]:
        h = graph._node[d][HOST]
        hosts.setdefault(domain.get(h, h), []).append(d)
    return Placement(hosts=tuple(tuple(v) for _, v in sorted(hosts.items())))


def nvlink_domains(graph: nx.Graph) -> dict[int, int]:
    """Hosts whose GPUs share an NVSwitch outside any host (a GB200 NVL72 rack) -> the first of them:
    one NVLink domain, one node for NCCL's multi-node NVLink (``src/graph/topo.cc`` fuses the clique)."""
    if graph in _DOMAINS:
        return _DOMAINS[graph]
    attr, adj = graph._node, graph._adj
    out: dict[int, int] = {}
    for n, d in attr.items():
        if d.get(KIND) == "nvswitch" and d.get(HOST, 0) < 0:
            hosts = sorted({attr[m][HOST] for m in adj[n] if attr[m].get(HOST, -1) >= 0})
            for h in hosts:
                out[h] = min(out.get(h, hosts[0]), hosts[0])
    _DOMAINS[graph] = out
    return out


#: per topology graph (treated as immutable once built, like the comm-model cache)
_DOMAINS: "weakref.WeakKeyDictionary[nx.Graph, dict[int, int]]" = weakref.WeakKeyDictionary()


class Router:
    """Equal-cost shortest paths (module docstring), cached per pair of elements."""

    _W = "_route_weight"

    def __init__(self, graph: nx.Graph) -> None:
        self.g = graph
        self._sub: dict[Any, nx.Graph] = {}
        self._links: dict[tuple, tuple[list[tuple], int]] = {}
        #: True once a path was searched on the whole graph (it may cross a host)
        self.left_subgraph = False

    @functools.cached_property
    def host_nodes(self) -> dict[int, list]:
        """Every host's elements in graph order (the fabric's switches under host -1)."""
        by_host: dict[int, list] = {}
        for n, d in self.g._node.items():
            by_host.setdefault(d[HOST], []).append(n)
        return by_host

    def _weighted(self, nodes: list) -> nx.Graph:
        """The subgraph on ``nodes`` with routing weights, links in the graph's order (the same paths)."""
        keep = set(nodes)
        adj = self.g._adj
        sub = nx.Graph()
        sub.add_nodes_from(nodes)
        sub.add_edges_from((u, v, {self._W: edge_weight(u, v, d)}) for u in nodes for v, d in adj[u].items() if v in keep)
        return sub

    def _cached(self, key: Any, nodes: Callable[[], list]) -> nx.Graph:
        """The weighted subgraph on ``nodes()`` (a host, an NVLink domain, the fabric, all), cached under ``key``."""
        if key not in self._sub:
            self._sub[key] = self._weighted(nodes())
        return self._sub[key]

    def domain_nodes(self, domain: int) -> list:
        """An NVLink domain's elements: its hosts' (in host order), then the NVSwitches they share."""
        domains, by_host = nvlink_domains(self.g), self.host_nodes
        nodes = [n for h in sorted(by_host) if h >= 0 and domains.get(h) == domain for n in by_host[h]]
        shared = {m for n in nodes for m in self.g._adj[n]
                  if self.g._node[m][HOST] < 0 and self.g._node[m][KIND] == "nvswitch"}
        return nodes + sorted(shared, key=str)

    def _graph_for(self, src: Any, dst: Any) -> nx.Graph:
        a, b = self.g.nodes[src], self.g.nodes[dst]
        dom = nvlink_domains(self.g).get(a[HOST])  # hosts >= 0 only
        if dom is not None and dom == nvlink_domains(self.g).get(b[HOST]) and a[KIND] != "nic" and b[KIND] != "nic":
            return self._cached(("domain", dom), lambda: self.domain_nodes(dom))
        if a[HOST] == b[HOST] and a[HOST] >= 0:
            return self._cached(("host", a[HOST]), lambda: self.host_nodes[a[HOST]])
        if a[KIND] == "nic" and b[KIND] == "nic":
            return self._cached("fabric", lambda: [n for n, d in self.g._node.items() if d[HOST] < 0 or d[KIND] == "nic"])
        return self._cached("all", lambda: list(self.g.nodes))

    @functools.cached_property
    def _switches(self) -> _SwitchRoutes:
        return _SwitchRoutes(self._weighted([n for n, d in self.g._node.items() if d[HOST] < 0]), self._W)

    @memo
    def uplink(self, nic: Any) -> Any:
        """The one fabric switch a NIC hangs from, or None."""
        ups = [n for n in self.g._adj[nic] if self.g._node[n][HOST] < 0]
        return ups[0] if len(ups) == 1 else None

    @memo
    def paths(self, src: Any, dst: Any) -> list[list]:
        a, b = self.g._node[src], self.g._node[dst]
        if a[KIND] == "nic" and b[KIND] == "nic" and a[HOST] != b[HOST]:
            la, lb = self.uplink(src), self.uplink(dst)
            if la is not None and lb is not None:  # NIC - leaf ... leaf - NIC: route between the switches
                mid = [[la]] if la == lb else self._switches.paths(la, lb)
                return [[src, *m, dst] for m in mid]
        sub = self._graph_for(src, dst)
        if sub is self._sub.get("all"):
            self.left_subgraph = True
        try:
            return list(nx.all_shortest_paths(sub, src, dst, weight=self._W))
        except nx.NetworkXNoPath:  # e.g. a custom fabric that re-enters a host
            self.left_subgraph = True
            everything = self._cached("all", lambda: list(self.g.nodes))
            return list(nx.all_shortest_paths(everything, src, dst, weight=self._W))

    def add_load(self, loads: dict[tuple, float], src: Any, dst: Any, amount: float = 1.0) -> None:
        """Add ``amount`` from ``src`` to ``dst`` to ``loads`` (per directed link), split over the paths
        (their links, path by path, and their number cached per pair)."""
        got = self._links.get((src, dst))
        if got is None:
            ps = self.paths(src, dst)
            got = self._links[src, dst] = [(u, v) for p in ps for u, v in zip(p, p[1:])], len(ps)
        links, n = got
        share = amount / n
        get = loads.get
        for e in links:
            loads[e] = get(e, 0.0) + share

    def bottleneck(self, src: Any, dst: Any) -> float:
        """Widest of the shortest paths' narrowest link, bytes/s."""
        return max(min(self.g.edges[u, v][BANDWIDTH] for u, v in zip(p, p[1:])) for p in self.paths(src, dst))

    def latency(self, src: Any, dst: Any) -> float:
        p = self.paths(src, dst)[0]
        return sum(self.g.edges[u, v][LATENCY] for u, v in zip(p, p[1:]))

    def distances(self, src: Any) -> dict[Any, float]:
        """Routing distance from ``src`` to every element of its host (Dijkstra on the host's subgraph)."""
        h = self.g._node[src][HOST]
        sub = self._cached(("host", h), lambda: self.host_nodes[h])
        return nx.single_source_dijkstra_path_length(sub, src, weight=self._W)


def nearest_first(router: Router, nics: list, devs: tuple) -> list[tuple[Any, Any]]:
    """(entry, exit) devices of each NIC's channels on one host, as NCCL's search lays a ring out: in
    at the device nearest the NIC (routing distance on the NIC's host; GPUDirect RDMA) not taken yet by
    an earlier NIC, out from the next-nearest (the NIC's PCIe switch once each way)."""
    out, taken = [], set()
    for nic in nics:
        dist = router.distances(nic)
        by_dist = sorted(devs, key=lambda d: (dist.get(d, math.inf), devs.index(d)))
        entry = next((d for d in by_dist if d not in taken), by_dist[0])
        taken.add(entry)
        exit_ = next((d for d in by_dist if d != entry), entry)
        out.append((entry, exit_))
    return out


class _SwitchRoutes:
    """Equal-cost shortest paths between the fabric's switches, :func:`networkx.all_shortest_paths`'s:
    of one or two links, in link order, when the best weighs under three lightest links (a path of k
    links weighs at least k of them: none longer ties), else networkx's search."""

    def __init__(self, graph: nx.Graph, weight: str) -> None:
        self.g, self.w = graph, weight
        self.lightest = min((d[weight] for _, _, d in graph.edges(data=True)), default=math.inf)
        self._paths: dict[tuple, list[list]] = {}

    def paths(self, a: Any, b: Any) -> list[list]:
        if (a, b) not in self._paths:
            adj, w = self.g._adj, self.w
            to_b = adj[b]
            cands = [(d[w], [a, b]) if y == b else (d[w] + to_b[y][w], [a, y, b])
                     for y, d in adj[a].items() if y == b or y in to_b]
            best = min((c[0] for c in cands), default=math.inf)
            self._paths[a, b] = ([p for c, p in cands if c == best] if best < 3 * self.lightest
                                 else list(nx.all_shortest_paths(self.g, a, b, weight=w)))
        return self._paths[a, b]
