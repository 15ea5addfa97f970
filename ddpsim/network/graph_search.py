"""Rank placement, routing over a topology graph, and NCCL's channel search on it.

The graph search of NCCL (``src/graph/search.cc``, ``ncclTopoCompute``) is reproduced on the
networkx graph: each ring channel goes through the ranks' devices (and, across hosts, through
NIC ``c mod num_nics`` of every host on its rail: in at the device nearest the NIC, out from
the next-nearest); the load a channel puts on every directed link comes from equal-cost
shortest paths (ECMP split, :func:`networkx.all_shortest_paths`); the search tries NCCL's
per-channel speeds (``src/graph/search.cc`` speed arrays), highest first, keeps as many channels
as every link can carry (a NIC or an oversubscribed spine shared by several rings lowers it), and
duplicates channels as ``ncclTopoDupChannels`` does. The tree is searched on its own
(BALANCED_TREE with the ring's channel count, ``src/init.cc``: a chain through each host's GPUs,
in from the NIC, back to it half from each of the first two GPUs; on Hopper and newer the plain
TREE when the balanced one does not fit; pass 2 raising ``bwIntra`` up to 2 x ``bwInter``).
NVLS needs an NVLS-capable NVSwitch and compute capability >= 90. The result,
:class:`GraphInfo`, feeds NCCL's tuning model (:mod:`ddpsim.network.nccl`) in
:mod:`ddpsim.network.collective_cost`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import networkx as nx

from ddpsim.errors import InputError
from ddpsim.network import nccl
from ddpsim.network.comm_model import GBPS
from ddpsim.network.topology import (BANDWIDTH, COMPUTE_CAPABILITY, HOST, KIND, LATENCY, LINK_TYPE, NVLS, RAIL,
                                     edge_weight, max_ranks, rank_nodes)


# ---- placement and routing -----------------------------------------------------------

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
    limit = max_ranks(graph)
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or not 1 <= num_ranks <= limit:
        raise InputError(f"num_ranks: {num_ranks!r} is not accepted; expected an integer in [1, {limit}] "
                         f"(topology {graph.graph.get('name')!r} holds {limit} devices)")
    devs = rank_nodes(graph)[:num_ranks]
    hosts: dict[int, list] = {}
    for d in devs:
        hosts.setdefault(graph.nodes[d][HOST], []).append(d)
    return Placement(hosts=tuple(tuple(v) for _, v in sorted(hosts.items())))


class Router:
    """Equal-cost shortest paths (weights :func:`ddpsim.network.topology.edge_weight`), cached.

    Paths between two elements of one host are searched on that host's subgraph, paths
    between two NICs on the fabric's (NICs, leaves, spines), others on the whole graph:
    the same paths (a host is only entered through its NICs), much less work."""

    _W = "_route_weight"

    def __init__(self, graph: nx.Graph) -> None:
        self.g = graph
        self._cache: dict[tuple, list[list]] = {}
        self._sub: dict[Any, nx.Graph] = {}

    def _weighted(self, nodes: Any) -> nx.Graph:
        sub = nx.Graph()
        sub.add_nodes_from(nodes)
        sub.add_edges_from((u, v, {self._W: edge_weight(u, v, d)}) for u, v, d in self.g.subgraph(nodes).edges(data=True))
        return sub

    def _graph_for(self, src: Any, dst: Any) -> nx.Graph:
        a, b = self.g.nodes[src], self.g.nodes[dst]
        if a[HOST] == b[HOST] and a[HOST] >= 0:
            key: Any = ("host", a[HOST])
            if key not in self._sub:
                self._sub[key] = self._weighted([n for n, d in self.g.nodes(data=True) if d[HOST] == a[HOST]])
        elif a[KIND] == "nic" and b[KIND] == "nic":
            key = "fabric"
            if key not in self._sub:
                self._sub[key] = self._weighted([n for n, d in self.g.nodes(data=True)
                                                 if d[HOST] < 0 or d[KIND] == "nic"])
        else:
            key = "all"
            if key not in self._sub:
                self._sub[key] = self._weighted(list(self.g.nodes))
        return self._sub[key]

    def _uplink(self, nic: Any) -> Any:
        """The one fabric switch a NIC hangs from, or None."""
        ups = [n for n in self.g.neighbors(nic) if self.g.nodes[n][HOST] < 0]
        return ups[0] if len(ups) == 1 else None

    def paths(self, src: Any, dst: Any) -> list[list]:
        key = (src, dst)
        if key in self._cache:
            return self._cache[key]
        a, b = self.g.nodes[src], self.g.nodes[dst]
        if a[KIND] == "nic" and b[KIND] == "nic" and a[HOST] != b[HOST]:
            la, lb = self._uplink(src), self._uplink(dst)
            if la is not None and lb is not None:  # NIC - leaf ... leaf - NIC: route between the switches
                if la == lb:
                    mid = [[la]]
                else:
                    if "switches" not in self._sub:
                        self._sub["switches"] = self._weighted([n for n, d in self.g.nodes(data=True) if d[HOST] < 0])
                    sk = (la, lb)
                    if sk not in self._cache:
                        self._cache[sk] = list(nx.all_shortest_paths(self._sub["switches"], la, lb, weight=self._W))
                    mid = self._cache[sk]
                self._cache[key] = [[src, *m, dst] for m in mid]
                return self._cache[key]
        if key not in self._cache:
            sub = self._graph_for(src, dst)
            try:
                self._cache[key] = list(nx.all_shortest_paths(sub, src, dst, weight=self._W))
            except nx.NetworkXNoPath:  # e.g. a custom fabric that re-enters a host
                self._cache[key] = list(nx.all_shortest_paths(self._graph_for_all(), src, dst, weight=self._W))
        return self._cache[key]

    def _graph_for_all(self) -> nx.Graph:
        if "all" not in self._sub:
            self._sub["all"] = self._weighted(list(self.g.nodes))
        return self._sub["all"]

    def add_load(self, loads: dict[tuple, float], src: Any, dst: Any, amount: float = 1.0) -> None:
        ps = self.paths(src, dst)
        share = amount / len(ps)
        for p in ps:
            for u, v in zip(p, p[1:]):
                loads[(u, v)] = loads.get((u, v), 0.0) + share

    def bottleneck(self, src: Any, dst: Any) -> float:
        """Widest of the shortest paths' narrowest link, bytes/s."""
        return max(min(self.g.edges[u, v][BANDWIDTH] for u, v in zip(p, p[1:])) for p in self.paths(src, dst))

    def latency(self, src: Any, dst: Any) -> float:
        p = self.paths(src, dst)[0]
        return sum(self.g.edges[u, v][LATENCY] for u, v in zip(p, p[1:]))

    def only_link_type(self, src: Any, dst: Any, link_type: str) -> bool:
        return all(self.g.edges[u, v][LINK_TYPE] == link_type for p in self.paths(src, dst) for u, v in zip(p, p[1:]))

    def avoids_kind(self, src: Any, dst: Any, kind: str) -> bool:
        return all(self.g.nodes[n][KIND] != kind for p in self.paths(src, dst) for n in p)


def _host_nics(graph: nx.Graph, placement: Placement) -> list[list]:
    out = []
    for devs in placement.hosts:
        h = graph.nodes[devs[0]][HOST]
        nics = sorted((n for n, d in graph.nodes(data=True) if d[KIND] == "nic" and d[HOST] == h),
                      key=lambda n: (graph.nodes[n].get(RAIL, 0), str(n)))
        out.append(nics)
    return out


def _nic_devices(router: Router, nics: list, devs: tuple) -> list[tuple[Any, Any]]:
    """(entry, exit) devices of each NIC's channels on one host, as NCCL's search lays a ring
    out: data from the NIC lands on the device nearest to it (GPUDirect RDMA), and leaves
    from the next-nearest, so that a ring uses the NIC's PCIe switch once in and once out.
    NICs in rail order each take the nearest device not taken yet as entry (all taken: the
    nearest). One device on the host: it is both."""
    local = router._graph_for(devs[0], devs[0])
    out, taken = [], set()
    for nic in nics:
        dist = nx.single_source_dijkstra_path_length(local, nic, weight=router._W)
        by_dist = sorted(devs, key=lambda d: (dist.get(d, math.inf), devs.index(d)))
        entry = next((d for d in by_dist if d not in taken), by_dist[0])
        taken.add(entry)
        exit_ = next((d for d in by_dist if d != entry), entry)
        out.append((entry, exit_))
    return out


def _ring_order(devs: tuple, entry: Any, exit_: Any) -> list:
    """``entry``, the other devices in rank order from after ``entry``, then ``exit_``."""
    i = devs.index(entry)
    middle = [d for d in devs[i + 1:] + devs[:i] if d != exit_]
    return [entry, *middle] + ([exit_] if exit_ != entry else [])


@dataclass(frozen=True, kw_only=True)
class ChannelSearch:
    """Result of the graph search for one pattern, plus what explains it."""

    num_channels: int
    bw_gbps: float  # graph.bwIntra
    max_bw_gbps: float
    total_bw_gbps: float
    bottleneck: str  # the most loaded link at the chosen rate
    bw_inter_gbps: float | None = None  # graph.bwInter when it differs from bwIntra (NVLS)

    @property
    def inter_gbps(self) -> float:
        return self.bw_gbps if self.bw_inter_gbps is None else self.bw_inter_gbps


def _search(channel_loads: Callable[[int], dict[tuple, float]], cap: dict[tuple, float], speeds: tuple[float, ...],
            *, max_bw: float, total_bw: float, max_channels: int, min_channels: int, cc: int,
            allow_dup: bool) -> ChannelSearch:
    """ncclTopoCompute, reduced to link loads: try speeds highest first (skipping those above
    the widest single path ``max_bw`` or with ``speed * min_channels > total_bw``), keep the
    most channels every link carries, stop at ``nChannels * bw >= total_bw`` or when the next
    speed is <= 0.49 of the best found; then ncclTopoDupChannels."""
    util = [0.0]  # util[c] = max over links of load(c channels) / capacity (GB/s per GB/s)
    worst = [""]
    acc: dict[tuple, float] = {}
    for c in range(max_channels):
        for e, load in channel_loads(c).items():
            acc[e] = acc.get(e, 0.0) + load
        e_max = max(acc, key=lambda e: acc[e] / cap[e])
        util.append(acc[e_max] / cap[e_max])
        worst.append(f"{e_max[0]} -> {e_max[1]}")
    idx = 0
    while idx < len(speeds) - 1 and (speeds[idx] > max_bw + 1e-9 or speeds[idx] * min_channels > total_bw + 1e-9):
        idx += 1
    best_c, best_s = 0, 0.0
    while True:
        s = speeds[idx]
        c = 0
        for k in range(min_channels, max_channels + 1):
            if util[k] * s <= 1.0 + 1e-9:
                c = k
        if c * s > best_c * best_s + 1e-9:
            best_c, best_s = c, s
        if best_c and best_c * best_s >= total_bw - 1e-9:
            break
        if idx < len(speeds) - 1 and (best_c == 0 or speeds[idx + 1] / best_s > 0.49):
            idx += 1
            continue
        break
    bneck = worst[best_c] if best_c else ""
    if allow_dup and best_c and best_s >= 25.0 and not (cc > 80 and best_s < 50.0 and best_c > 4):
        dup = min(2 * best_c, max_channels)
        best_s /= math.ceil(dup / best_c)
        best_c = dup
    return ChannelSearch(num_channels=best_c, bw_gbps=best_s, max_bw_gbps=max_bw, total_bw_gbps=total_bw,
                         bottleneck=bneck)


def link_capacities_gbps(graph: nx.Graph) -> dict[tuple, float]:
    cap = {}
    for u, v, d in graph.edges(data=True):
        cap[(u, v)] = cap[(v, u)] = d[BANDWIDTH] / GBPS
    return cap


def _total_bw(graph: nx.Graph, devs: list) -> float:
    """NCCL's system totalBw: a GPU's NVLink total, or its PCIe width with no NVLink (GB/s)."""
    best = 0.0
    for d in devs:
        nvl = sum(e[BANDWIDTH] for _, _, e in graph.edges(d, data=True) if e[LINK_TYPE] == "nvlink")
        other = max((e[BANDWIDTH] for _, _, e in graph.edges(d, data=True)), default=0.0)
        best = max(best, nvl if nvl > 0 else other)
    return best / GBPS


def _tree_search(loads: Callable[[int, bool], tuple[dict[tuple, float], dict[tuple, float]]], cap: dict[tuple, float],
                 speeds: tuple[float, ...], *, channels: int, max_bw: float, total_bw: float, search_total_bw: float,
                 cc: int) -> tuple[ChannelSearch, bool]:
    """ncclTopoCompute for NCCL_TOPO_PATTERN_BALANCED_TREE, reduced to link loads: exactly
    ``channels`` channels (``treeGraph->minChannels = maxChannels = ringGraph->nChannels``,
    init.cc); pass 1 tries speeds highest first (skipping those above ``max_bw`` or with
    ``speed * channels > search_total_bw``, the system total x ndevs/(ndevs-1) for non-ring
    patterns) and keeps the first that every link carries; on compute capability >= 90 a
    speed where the balanced tree does not fit is tried again as the plain TREE ("Try a
    simpler tree"), which then stays the pattern. Pass 2 raises ``bwIntra`` one speed at a
    time while it fits and stays below 2 x ``bwInter`` ("increase bwIntra for trees").
    ``loads(c, balanced)`` gives channel c's (intra, inter) loads per directed link.
    Returns the search and whether the pattern fell back to TREE."""
    acc = {}
    for balanced in (True, False):
        li: dict[tuple, float] = {}
        le: dict[tuple, float] = {}
        for c in range(channels):
            a, b = loads(c, balanced)
            for e, v in a.items():
                li[e] = li.get(e, 0.0) + v
            for e, v in b.items():
                le[e] = le.get(e, 0.0) + v
        acc[balanced] = (li, le)

    def fits(balanced: bool, s_intra: float, s_inter: float) -> bool:
        li, le = acc[balanced]
        return all(li.get(e, 0.0) * s_intra + le.get(e, 0.0) * s_inter <= cap[e] * (1 + 1e-9) for e in set(li) | set(le))

    def worst(balanced: bool, s_intra: float, s_inter: float) -> str:
        li, le = acc[balanced]
        es = sorted(set(li) | set(le), key=str)
        if not es:
            return ""
        e = max(es, key=lambda e: (li.get(e, 0.0) * s_intra + le.get(e, 0.0) * s_inter) / cap[e])
        return f"{e[0]} -> {e[1]}"

    idx = 0
    while idx < len(speeds) - 1 and (speeds[idx] > max_bw + 1e-9 or speeds[idx] * channels > search_total_bw + 1e-9):
        idx += 1
    balanced, found = True, False
    while True:
        s = speeds[idx]
        if fits(balanced, s, s):
            found = True
            break
        if balanced and cc >= 90 and fits(False, s, s):
            balanced, found = False, True
            break
        if idx == len(speeds) - 1:
            break
        idx += 1
    if not found:  # search.cc: "falling back to simple order", bwIntra 0.1
        return ChannelSearch(num_channels=channels, bw_gbps=0.1, max_bw_gbps=max_bw, total_bw_gbps=total_bw,
                             bottleneck=worst(balanced, 0.1, 0.1), bw_inter_gbps=speeds[idx]), not balanced
    s_inter = s_intra = speeds[idx]
    i = idx
    while i > 0 and s_intra < 2 * s_inter and fits(balanced, speeds[i - 1], s_inter):
        i -= 1
        s_intra = speeds[i]
    return ChannelSearch(num_channels=channels, bw_gbps=s_intra, max_bw_gbps=max_bw, total_bw_gbps=total_bw,
                         bottleneck=worst(balanced, s_intra, s_inter),
                         bw_inter_gbps=s_inter if s_inter != s_intra else None), not balanced


@dataclass(frozen=True, kw_only=True)
class GraphInfo:
    ring: ChannelSearch
    nvls: ChannelSearch | None
    nvlink_intra: bool
    ll128_enabled: bool
    compute_capability: int
    tree: ChannelSearch | None = None  # None: the ring's graph (one device)
    simple_tree: bool = False          # the tree search fell back to the plain TREE pattern


@dataclass(frozen=True, kw_only=True)
class _Ranks:
    """The ranks' devices on a topology, as the channel searches lay channels over them:
    ``hosts[i]`` host i's devices in rank order; across hosts (``multi``), ``nics[i]`` host i's
    NICs in rail order and ``entry[i][j]`` the (entry, exit) devices of NIC j's channels."""

    graph: nx.Graph
    router: Router
    hosts: tuple[tuple[Any, ...], ...]
    multi: bool
    nics: list[list]
    entry: list[list[tuple[Any, Any]]]

    def nic_key(self, c: int) -> tuple:
        """Which NIC channel ``c`` uses on each host: what a ring or NVLS channel's loads depend on."""
        return tuple(c % len(n) for n in self.nics) if self.multi else ()

    def add_net_hop(self, loads: dict[tuple, float], hi: int, c: int, src: Any) -> None:
        """Channel ``c`` leaving host ``hi`` from device ``src``: to its NIC, across the fabric to
        the next host's NIC, into that host's entry device."""
        j = c % len(self.nics[hi])
        nxt = (hi + 1) % len(self.hosts)
        j2 = c % len(self.nics[nxt])
        self.router.add_load(loads, src, self.nics[hi][j])
        self.router.add_load(loads, self.nics[hi][j], self.nics[nxt][j2])
        self.router.add_load(loads, self.nics[nxt][j2], self.entry[nxt][j2][0])


def _ranks(graph: nx.Graph, placement: Placement) -> _Ranks:
    router = Router(graph)
    multi = placement.num_nodes > 1
    nics = _host_nics(graph, placement) if multi else []
    if multi and any(not n for n in nics):
        raise InputError(f"topology {graph.graph.get('name')!r}: a host has no NIC; expected kind nic nodes on every "
                         "host for a multi-node communicator")
    entry = [_nic_devices(router, hn, h) for h, hn in zip(placement.hosts, nics)] if multi else []
    return _Ranks(graph=graph, router=router, hosts=placement.hosts, multi=multi, nics=nics, entry=entry)


def _cached_by_nic(ranks: _Ranks, loads: Callable[[int], dict[tuple, float]]) -> Callable[[int], dict[tuple, float]]:
    """``loads`` computed once per NIC assignment (:meth:`_Ranks.nic_key`)."""
    cache: dict[tuple, dict[tuple, float]] = {}

    def cached(c: int) -> dict[tuple, float]:
        key = ranks.nic_key(c)
        if key not in cache:
            cache[key] = loads(c)
        return cache[key]
    return cached


def _ring_loads(ranks: _Ranks, c: int) -> dict[tuple, float]:
    """Ring channel ``c``'s load per directed link: within a host, entry device, the others in
    rank order, exit device; then on to the next host through the NICs (module docstring)."""
    loads: dict[tuple, float] = {}
    router = ranks.router
    for hi, devs in enumerate(ranks.hosts):
        if not ranks.multi:
            for a, b in zip(devs, devs[1:] + devs[:1]):
                if a != b:
                    router.add_load(loads, a, b)
            continue
        j = c % len(ranks.nics[hi])
        order = _ring_order(devs, *ranks.entry[hi][j])
        for a, b in zip(order, order[1:]):
            router.add_load(loads, a, b)
        # the last device sends to the NIC (through the switch, or PXN over NVLink if nearer)
        ranks.add_net_hop(loads, hi, c, order[-1])
    return loads


def _tree_chains(ranks: _Ranks, num_channels: int) -> list[list[list]]:
    """``chains[host][channel]``: the chain of channel c on each host: the NIC's nearest GPU, the
    next-nearest, then the others, ending at the GPU that has ended the fewest chains so far (the
    search spreads the chain ends, the GPUs that send nothing intra-node, over the channels)."""
    chains: list[list[list]] = []
    for hi, devs in enumerate(ranks.hosts):
        ends = {d: 0 for d in devs}
        per: list[list] = []
        for c in range(num_channels):
            if not ranks.multi:
                per.append(list(devs))
                continue
            first, second = ranks.entry[hi][c % len(ranks.nics[hi])]
            head = [first] + ([second] if second != first else [])
            rest = [d for d in devs if d not in head]
            if rest:
                i = devs.index(first)
                cyc = [d for d in devs[i + 1:] + devs[:i] if d in rest]
                last = min(cyc, key=lambda d: (ends[d], cyc.index(d)))
                k = cyc.index(last)
                rest = cyc[k + 1:] + cyc[:k + 1]
                ends[last] += 1
            per.append(head + rest)
        chains.append(per)
    return chains


def _tree_loads(ranks: _Ranks, chains: list[list[list]], c: int,
                balanced: bool) -> tuple[dict[tuple, float], dict[tuple, float]]:
    """Tree channel ``c``'s (intra, inter) load per directed link. search.cc, tree patterns: a
    chain through the host's GPUs at bwIntra, forward direction only (followPath counts the
    forward path); with NICs the chain starts at the NIC's nearest GPU, the next-nearest second,
    the data comes in from the NIC at bwInter and leaves "back to net" at step 0: half from each
    of the first two GPUs for BALANCED_TREE, all from the first for TREE."""
    intra: dict[tuple, float] = {}
    inter: dict[tuple, float] = {}
    router, nics = ranks.router, ranks.nics
    for hi, devs in enumerate(ranks.hosts):
        order = chains[hi][c]
        if not ranks.multi:
            for a, b in zip(order, order[1:]):
                router.add_load(intra, a, b)
            continue
        j = c % len(nics[hi])
        first, second = ranks.entry[hi][j]
        for a, b in zip(order, order[1:]):
            router.add_load(intra, a, b)
        router.add_load(inter, nics[hi][j], first)
        if balanced and second != first:
            router.add_load(inter, first, nics[hi][j], 0.5)
            router.add_load(inter, second, nics[hi][j], 0.5)
        else:
            router.add_load(inter, first, nics[hi][j])
        nxt = (hi + 1) % len(ranks.hosts)
        router.add_load(inter, nics[hi][j], nics[nxt][c % len(nics[nxt])])
    return intra, inter


def _nvls_loads(ranks: _Ranks, c: int) -> dict[tuple, float]:
    """NVLS channel ``c``'s load per directed link: every GPU pushes to and pulls from its
    NVSwitches; across hosts, the channel's exit device on to the next host through the NICs."""
    loads: dict[tuple, float] = {}
    graph = ranks.graph
    for hi, devs in enumerate(ranks.hosts):
        for d in devs:  # every GPU pushes to and pulls from the switch on every channel
            for s in graph.neighbors(d):
                if graph.nodes[s][KIND] == "nvswitch":
                    loads[(d, s)] = loads.get((d, s), 0.0) + 1.0
                    loads[(s, d)] = loads.get((s, d), 0.0) + 1.0
        if ranks.multi:
            j = c % len(ranks.nics[hi])
            ranks.add_net_hop(loads, hi, c, ranks.entry[hi][j][1])
    return loads


def _max_bw_gbps(ranks: _Ranks, all_devs: list) -> float:
    """The widest single path the search may use (GB/s): device to NIC across hosts, device to
    device on one host, the system total with one device."""
    router, nics, entry = ranks.router, ranks.nics, ranks.entry
    if ranks.multi:
        return max(router.bottleneck(entry[h][j][0], nics[h][j]) for h in range(len(ranks.hosts))
                   for j in range(len(nics[h]))) / GBPS
    if len(all_devs) > 1:
        return max(router.bottleneck(a, b) for a in all_devs[:1] for b in all_devs[1:]) / GBPS
    return _total_bw(ranks.graph, all_devs)


def _ll128_enabled(ranks: _Ranks, placement: Placement, cc: int) -> tuple[bool, bool]:
    """``(nvlink_intra, ll128)`` from the path types: NVLink between GPUs of a host (typeIntra ==
    NVL), GPU->NIC without the CPU (PIX/PXB); LL128 needs both (or one GPU per host / Hopper+)."""
    router = ranks.router
    pairs = [(a, b) for h in ranks.hosts for a, b in zip(h, h[1:])]
    nvlink_intra = bool(pairs) and all(router.only_link_type(a, b, "nvlink") for a, b in pairs)
    intra_ok = nvlink_intra or placement.ppn == 1
    inter_ok = (not ranks.multi) or cc >= 90 or all(
        router.avoids_kind(ranks.entry[h][j][0], ranks.nics[h][j], "host_bridge")
        for h in range(len(ranks.hosts)) for j in range(len(ranks.nics[h])))
    return nvlink_intra, intra_ok and inter_ok


def _nvls_search(ranks: _Ranks, placement: Placement, cap: dict[tuple, float], speeds: tuple[float, ...], *,
                 cc: int, max_bw: float, total_bw: float) -> ChannelSearch | None:
    """NCCL_TOPO_PATTERN_NVLS: None without an NVLS-capable NVSwitch, compute capability >= 90
    and several GPUs per host; on one host, search.cc pass 2 then raises bwInter one speed at a
    time while it is below 2 x bwIntra (nothing limits it without a NIC)."""
    graph = ranks.graph
    all_devs = [d for h in ranks.hosts for d in h]
    switches = {n for d in all_devs for n in graph.neighbors(d) if graph.nodes[n][KIND] == "nvswitch"}
    if not (cc >= 90 and switches and all(graph.nodes[s].get(NVLS, False) for s in switches) and placement.ppn > 1):
        return None
    max_ch = min(nccl.NCCL_MAX_NVLS_ARITY, placement.ppn)
    nvls = _search(_cached_by_nic(ranks, lambda c: _nvls_loads(ranks, c)), cap, speeds, max_bw=max_bw,
                   total_bw=total_bw, max_channels=max_ch, min_channels=1 if ranks.multi else max_ch, cc=cc,
                   allow_dup=False)
    if not ranks.multi and nvls.num_channels:
        i = speeds.index(nvls.bw_gbps) if nvls.bw_gbps in speeds else 0
        inter = nvls.bw_gbps
        while i > 0 and inter < 2 * nvls.bw_gbps:
            i -= 1
            inter = speeds[i]
        nvls = dataclasses.replace(nvls, bw_inter_gbps=inter)
    return nvls


def search_graphs(graph: nx.Graph, placement: Placement) -> GraphInfo:
    """Run the ring, tree (and NVLS) channel searches for the ranks of ``placement``."""
    ranks = _ranks(graph, placement)
    cap = link_capacities_gbps(graph)
    all_devs = [d for h in placement.hosts for d in h]
    cc = min(graph.nodes[d][COMPUTE_CAPABILITY] for d in all_devs)
    max_bw = _max_bw_gbps(ranks, all_devs)
    total_bw = _total_bw(graph, all_devs)
    speeds = nccl.speed_array(cc, ranks.multi)
    if len(all_devs) == 1:
        ring = ChannelSearch(num_channels=1, bw_gbps=max_bw, max_bw_gbps=max_bw, total_bw_gbps=total_bw, bottleneck="")
    else:
        ring = _search(_cached_by_nic(ranks, lambda c: _ring_loads(ranks, c)), cap, speeds, max_bw=max_bw,
                       total_bw=total_bw, max_channels=nccl.MAXCHANNELS // 2, min_channels=1, cc=cc, allow_dup=True)
    tree, simple_tree = None, False
    if len(all_devs) > 1 and ring.num_channels:
        chains = _tree_chains(ranks, ring.num_channels)
        tree_cache: dict[tuple, tuple[dict[tuple, float], dict[tuple, float]]] = {}

        def tree_loads(c: int, balanced: bool) -> tuple[dict[tuple, float], dict[tuple, float]]:
            if (c, balanced) not in tree_cache:
                tree_cache[(c, balanced)] = _tree_loads(ranks, chains, c, balanced)
            return tree_cache[(c, balanced)]

        ndevs = placement.ppn
        search_total = total_bw * ndevs / (ndevs - 1) if ndevs > 1 else total_bw
        tree, simple_tree = _tree_search(tree_loads, cap, speeds, channels=ring.num_channels, max_bw=max_bw,
                                         total_bw=total_bw, search_total_bw=search_total, cc=cc)
    nvlink_intra, ll128 = _ll128_enabled(ranks, placement, cc)
    nvls = _nvls_search(ranks, placement, cap, speeds, cc=cc, max_bw=max_bw, total_bw=total_bw)
    return GraphInfo(ring=ring, nvls=nvls, nvlink_intra=nvlink_intra, ll128_enabled=ll128, compute_capability=cc,
                     tree=tree, simple_tree=simple_tree)
