"""Collective cost models over a topology graph.

:func:`build_comm_model` binds a topology (see :mod:`ddpsim.network.topology`) and a number of
ranks to a :class:`~ddpsim.network.comm_model.CommModel`:

* ``backend == "nccl"``: :class:`NcclCommModel`. The graph search of NCCL
  (``src/graph/search.cc``) is reproduced on the networkx graph: each channel is a ring
  through the ranks' devices (and, across hosts, through NIC ``c mod num_nics`` of every
  host on its rail: in at the device nearest the NIC, out from the next-nearest); the load a channel puts on every directed link comes from
  equal-cost shortest paths (ECMP split, :func:`networkx.all_shortest_paths`); the search
  then tries NCCL's per-channel speeds, highest first, keeps as many channels as every
  link can carry (a NIC or an oversubscribed spine shared by several rings lowers it), and
  duplicates channels as ``ncclTopoDupChannels`` does. The resulting ``nChannels x bw``
  feeds NCCL's tuning model (:mod:`ddpsim.network.nccl`, v2.30.7), which also picks algorithm and
  protocol. The tree is searched on its own (``search.cc`` BALANCED_TREE with the ring's
  channel count: a chain through each host's GPUs, in from the NIC, back to it half from
  each of the first two GPUs; on Hopper and newer the plain TREE when the balanced one does
  not fit, with tuning.cc's 0.85; pass 2 raising ``bwIntra`` up to 2 x ``bwInter``). NVLS needs an NVLS-capable NVSwitch and compute
  capability >= 90; across hosts it is NVLSTree.
* ``backend == "gloo"``: :class:`GlooCommModel`, gloo's ring (:mod:`ddpsim.network.gloo`) with the
  ring hop's latency (sum of link latencies on the path) and bandwidth (bottleneck of all
  ring hops sharing the links), and the CPU's reduction bandwidth.
* ``calibration=``: :class:`CalibratedCommModel` (:mod:`ddpsim.calibration.loader`), measured
  curves replacing the analytical constants.

DDP's used-parameter map all-reduce (``find_unused_parameters``) is an all-reduce of a
few bytes per parameter: ``allreduce_s(small)``, latency-bound.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import networkx as nx

from ddpsim.network import gloo

from ddpsim.network import nccl
from ddpsim.network.comm_model import GBPS, CollectiveEstimate, make_estimate  # noqa: F401  (re-exported)
from ddpsim.errors import InputError
from ddpsim.network.topology import (BANDWIDTH, COMPUTE_CAPABILITY, HOST, KIND, LATENCY, LINK_TYPE, NVLS,
                             RAIL, REDUCE_BANDWIDTH, edge_weight, max_ranks, rank_nodes)

ALGORITHM_CHOICES = nccl.FORCEABLE_ALGORITHMS
PROTOCOL_CHOICES = nccl.PROTOCOLS


def _check_size(size_bytes: int) -> None:
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int) or size_bytes < 0:
        raise InputError(f"size_bytes: {size_bytes!r} is not accepted; expected an integer >= 0")


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


class _Router:
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


def _nic_devices(router: _Router, nics: list, devs: tuple) -> list[tuple[Any, Any]]:
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


def _capacities(graph: nx.Graph) -> dict[tuple, float]:
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


def search_graphs(graph: nx.Graph, placement: Placement) -> GraphInfo:
    """Run the ring (and NVLS) channel search for the ranks of ``placement``."""
    router = _Router(graph)
    cap = _capacities(graph)
    hosts = placement.hosts
    all_devs = [d for h in hosts for d in h]
    cc = min(graph.nodes[d][COMPUTE_CAPABILITY] for d in all_devs)
    multi = placement.num_nodes > 1
    nics = _host_nics(graph, placement) if multi else []
    if multi and any(not n for n in nics):
        raise InputError(f"topology {graph.graph.get('name')!r}: a host has no NIC; expected kind nic nodes on every "
                         "host for a multi-node communicator")
    entry = [_nic_devices(router, hn, h) for h, hn in zip(hosts, nics)] if multi else []

    ring_cache: dict[tuple, dict[tuple, float]] = {}

    def ring_loads(c: int) -> dict[tuple, float]:
        # a channel's loads depend only on which NIC it uses on each host
        key = tuple(c % len(n) for n in nics) if multi else ()
        if key not in ring_cache:
            ring_cache[key] = _ring_loads(c)
        return ring_cache[key]

    def _ring_loads(c: int) -> dict[tuple, float]:
        loads: dict[tuple, float] = {}
        for hi, devs in enumerate(hosts):
            if not multi:
                for a, b in zip(devs, devs[1:] + devs[:1]):
                    if a != b:
                        router.add_load(loads, a, b)
                continue
            j = c % len(nics[hi])
            order = _ring_order(devs, *entry[hi][j])
            for a, b in zip(order, order[1:]):
                router.add_load(loads, a, b)
            nxt = (hi + 1) % len(hosts)
            j2 = c % len(nics[nxt])
            # the last device sends to the NIC (through the switch, or PXN over NVLink if nearer)
            router.add_load(loads, order[-1], nics[hi][j])
            router.add_load(loads, nics[hi][j], nics[nxt][j2])
            router.add_load(loads, nics[nxt][j2], entry[nxt][j2][0])
        return loads

    if multi:
        max_bw = max(router.bottleneck(entry[h][j][0], nics[h][j]) for h in range(len(hosts))
                     for j in range(len(nics[h]))) / GBPS
    elif len(all_devs) > 1:
        max_bw = max(router.bottleneck(a, b) for a in all_devs[:1] for b in all_devs[1:]) / GBPS
    else:
        max_bw = _total_bw(graph, all_devs)
    total_bw = _total_bw(graph, all_devs)
    speeds = nccl.speed_array(cc, multi)
    if len(all_devs) == 1:
        ring = ChannelSearch(num_channels=1, bw_gbps=max_bw, max_bw_gbps=max_bw, total_bw_gbps=total_bw, bottleneck="")
    else:
        ring = _search(ring_loads, cap, speeds, max_bw=max_bw, total_bw=total_bw, max_channels=nccl.MAXCHANNELS // 2,
                       min_channels=1, cc=cc, allow_dup=True)
    tree, simple_tree = None, False
    if len(all_devs) > 1 and ring.num_channels:
        # the chain of channel c on each host: the NIC's nearest GPU, the next-nearest, then the
        # others, ending at the GPU that has ended the fewest chains so far (the search spreads
        # the chain ends, the GPUs that send nothing intra-node, over the channels)
        chains: list[list[list]] = []
        for hi, devs in enumerate(hosts):
            ends = {d: 0 for d in devs}
            per: list[list] = []
            for c in range(ring.num_channels):
                if not multi:
                    per.append(list(devs))
                    continue
                first, second = entry[hi][c % len(nics[hi])]
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
        tree_cache: dict[tuple, tuple[dict[tuple, float], dict[tuple, float]]] = {}

        def tree_loads(c: int, balanced: bool) -> tuple[dict[tuple, float], dict[tuple, float]]:
            key = (c, balanced)
            if key not in tree_cache:
                tree_cache[key] = _tree_loads(c, balanced)
            return tree_cache[key]

        def _tree_loads(c: int, balanced: bool) -> tuple[dict[tuple, float], dict[tuple, float]]:
            # search.cc, tree patterns: a chain through the host's GPUs at bwIntra, forward
            # direction only (followPath counts the forward path); with NICs the chain starts
            # at the NIC's nearest GPU, the next-nearest second, the data comes in from the NIC
            # at bwInter and leaves "back to net" at step 0: half from each of the first two
            # GPUs for BALANCED_TREE, all from the first for TREE
            intra: dict[tuple, float] = {}
            inter: dict[tuple, float] = {}
            for hi, devs in enumerate(hosts):
                order = chains[hi][c]
                if not multi:
                    for a, b in zip(order, order[1:]):
                        router.add_load(intra, a, b)
                    continue
                j = c % len(nics[hi])
                first, second = entry[hi][j]
                for a, b in zip(order, order[1:]):
                    router.add_load(intra, a, b)
                router.add_load(inter, nics[hi][j], first)
                if balanced and second != first:
                    router.add_load(inter, first, nics[hi][j], 0.5)
                    router.add_load(inter, second, nics[hi][j], 0.5)
                else:
                    router.add_load(inter, first, nics[hi][j])
                nxt = (hi + 1) % len(hosts)
                router.add_load(inter, nics[hi][j], nics[nxt][c % len(nics[nxt])])
            return intra, inter

        ndevs = placement.ppn
        search_total = total_bw * ndevs / (ndevs - 1) if ndevs > 1 else total_bw
        tree, simple_tree = _tree_search(tree_loads, cap, speeds, channels=ring.num_channels, max_bw=max_bw,
                                         total_bw=total_bw, search_total_bw=search_total, cc=cc)
    # path types: NVLink between GPUs of a host (typeIntra == NVL), GPU->NIC without the CPU (PIX/PXB)
    pairs = [(a, b) for h in hosts for a, b in zip(h, h[1:])]
    nvlink_intra = bool(pairs) and all(router.only_link_type(a, b, "nvlink") for a, b in pairs)
    intra_ok = nvlink_intra or placement.ppn == 1
    inter_ok = (not multi) or cc >= 90 or all(router.avoids_kind(entry[h][j][0], nics[h][j], "host_bridge")
                                               for h in range(len(hosts)) for j in range(len(nics[h])))
    ll128 = intra_ok and inter_ok
    nvls = None
    switches = {n for d in all_devs for n in graph.neighbors(d) if graph.nodes[n][KIND] == "nvswitch"}
    if cc >= 90 and switches and all(graph.nodes[s].get(NVLS, False) for s in switches) and placement.ppn > 1:
        max_ch = min(nccl.NCCL_MAX_NVLS_ARITY, placement.ppn)

        nvls_cache: dict[tuple, dict[tuple, float]] = {}

        def nvls_loads(c: int) -> dict[tuple, float]:
            key = tuple(c % len(n) for n in nics) if multi else ()
            if key not in nvls_cache:
                nvls_cache[key] = _nvls_loads(c)
            return nvls_cache[key]

        def _nvls_loads(c: int) -> dict[tuple, float]:
            loads: dict[tuple, float] = {}
            for hi, devs in enumerate(hosts):
                for d in devs:  # every GPU pushes to and pulls from the switch on every channel
                    for s in graph.neighbors(d):
                        if graph.nodes[s][KIND] == "nvswitch":
                            loads[(d, s)] = loads.get((d, s), 0.0) + 1.0
                            loads[(s, d)] = loads.get((s, d), 0.0) + 1.0
                if multi:
                    j = c % len(nics[hi])
                    nxt = (hi + 1) % len(hosts)
                    j2 = c % len(nics[nxt])
                    router.add_load(loads, entry[hi][j][1], nics[hi][j])
                    router.add_load(loads, nics[hi][j], nics[nxt][j2])
                    router.add_load(loads, nics[nxt][j2], entry[nxt][j2][0])
            return loads

        nvls = _search(nvls_loads, cap, speeds, max_bw=max_bw, total_bw=total_bw, max_channels=max_ch,
                       min_channels=1 if multi else max_ch, cc=cc, allow_dup=False)
        if not multi and nvls.num_channels:
            # search.cc pass 2 for NVLS: raise bwInter one speed at a time while it is below
            # 2 x bwIntra (nothing limits it without a NIC)
            i = speeds.index(nvls.bw_gbps) if nvls.bw_gbps in speeds else 0
            inter = nvls.bw_gbps
            while i > 0 and inter < 2 * nvls.bw_gbps:
                i -= 1
                inter = speeds[i]
            nvls = dataclasses.replace(nvls, bw_inter_gbps=inter)
    return GraphInfo(ring=ring, nvls=nvls, nvlink_intra=nvlink_intra, ll128_enabled=ll128, compute_capability=cc,
                     tree=tree, simple_tree=simple_tree)


# ---- NCCL ----------------------------------------------------------------------------

def _system(graph: nx.Graph, placement: Placement, info: GraphInfo, num_ranks: int) -> nccl.NcclSystem:
    ring = nccl.NcclGraph(num_channels=info.ring.num_channels, bw_intra_gbps=info.ring.bw_gbps,
                          bw_inter_gbps=info.ring.bw_gbps, nvlink_intra=info.nvlink_intra)
    tree = ring
    if info.tree is not None:
        # init.cc: comm->nChannels = treeGraph->nChannels = ringGraph->nChannels = min of both
        tree = nccl.NcclGraph(num_channels=min(info.tree.num_channels, info.ring.num_channels),
                              bw_intra_gbps=info.tree.bw_gbps, bw_inter_gbps=info.tree.inter_gbps,
                              nvlink_intra=info.nvlink_intra, simple_tree=info.simple_tree)
    nv = None
    if info.nvls is not None and info.nvls.num_channels > 0:
        nv = nccl.NcclGraph(num_channels=info.nvls.num_channels, bw_intra_gbps=info.nvls.bw_gbps,
                            bw_inter_gbps=info.nvls.inter_gbps, nvlink_intra=True)
    return nccl.NcclSystem(num_ranks=num_ranks, num_nodes=placement.num_nodes,
                           compute_capability=info.compute_capability,
                           cpu_vendor=graph.graph.get("cpu_vendor", "intel"), ring=ring, tree=tree, nvls=nv,
                           ll128_enabled=info.ll128_enabled)


@dataclass(frozen=True, kw_only=True)
class NcclCommModel:
    """NCCL on a topology: NCCL's tuning model over the searched graph (module docstring).

    ``algorithm`` / ``protocol`` force a choice like ``NCCL_ALGO`` / ``NCCL_PROTO``
    (``hierarchical`` is ddpsim's own: intra-node reduce-scatter, inter-node all-reduce,
    intra-node all-gather).
    """

    system: nccl.NcclSystem
    graph_info: GraphInfo
    intra_system: nccl.NcclSystem | None  # one host's GPUs (hierarchical)
    inter_system: nccl.NcclSystem | None  # one GPU per host (hierarchical)
    topology_name: str
    algorithm: str | None = None
    protocol: str | None = None
    backend: str = "nccl"

    @property
    def num_ranks(self) -> int:
        return self.system.num_ranks

    def _pick(self, sys: nccl.NcclSystem, size: int, coll: str, algorithm: str | None) -> tuple[str, str, float]:
        a, p, t = nccl.choose(sys, size, coll, algorithm=algorithm, protocol=self.protocol)
        if a == "none" and self.protocol is not None:
            raise InputError(f"protocol: {self.protocol!r} is not available for {algorithm or 'any algorithm'} on "
                             f"{self.topology_name} ({sys.num_ranks} ranks); expected one NCCL enables here "
                             f"({', '.join(sorted({pp for aa, pp in nccl.candidates(sys, coll) if algorithm in (None, aa)}))})")
        return a, p, t

    def estimate_allreduce(self, size_bytes: int) -> CollectiveEstimate:
        _check_size(size_bytes)
        n = self.num_ranks
        if n == 1 or size_bytes == 0:
            return make_estimate(size_bytes, 0.0, n, "none", "none")
        if self.algorithm == "hierarchical":
            return self._hierarchical(size_bytes)
        a, p, t = self._pick(self.system, size_bytes, "allreduce", self.algorithm)
        if a == "none":
            raise InputError(f"algorithm: {self.algorithm!r} is not available on {self.topology_name} with {n} ranks; "
                             f"expected one of {', '.join(sorted({aa for aa, _ in nccl.candidates(self.system)}))}"
                             " or hierarchical")
        return make_estimate(size_bytes, t * 1e-6, n, a, p)

    def _hierarchical(self, size: int) -> CollectiveEstimate:
        n = self.num_ranks
        ppn, nn = self.system.ppn, self.system.num_nodes
        t_us, stages = 0.0, []
        if self.intra_system is not None and ppn > 1:
            for coll in ("reducescatter", "allgather"):
                a, p, t = self._pick(self.intra_system, size, coll, "ring")
                t_us += t
                stages.append((t, p))
        if self.inter_system is not None and nn > 1:
            a, p, t = self._pick(self.inter_system, max(1, size // ppn), "allreduce", None)
            t_us += t
            stages.append((t, p))
        proto = max(stages)[1] if stages else "none"
        return make_estimate(size, t_us * 1e-6, n, "hierarchical", proto)

    def estimate_broadcast(self, size_bytes: int) -> CollectiveEstimate:
        _check_size(size_bytes)
        n = self.num_ranks
        if n == 1 or size_bytes == 0:
            return make_estimate(size_bytes, 0.0, n, "none", "none", coll="broadcast")
        a, p, t = nccl.choose(self.system, size_bytes, "broadcast", protocol=self.protocol)
        if a == "none":
            a, p, t = nccl.choose(self.system, size_bytes, "broadcast")
        return make_estimate(size_bytes, t * 1e-6, n, a, p, coll="broadcast")

    def allreduce_s(self, size_bytes: int) -> float:
        return self.estimate_allreduce(size_bytes).time_s

    def broadcast_s(self, size_bytes: int) -> float:
        return self.estimate_broadcast(size_bytes).time_s

    def describe(self) -> dict[str, Any]:
        s, gi = self.system, self.graph_info
        return {
            "model": "nccl", "nccl_version": nccl.NCCL_VERSION, "topology": self.topology_name,
            "num_ranks": s.num_ranks, "num_nodes": s.num_nodes, "compute_capability": s.compute_capability,
            "ring_channels": gi.ring.num_channels, "ring_bw_per_channel_gbps": gi.ring.bw_gbps,
            "tree_channels": s.tree.num_channels, "tree_bw_intra_gbps": s.tree.bw_intra_gbps,
            "tree_bw_inter_gbps": s.tree.bw_inter_gbps, "tree_pattern": "tree" if s.tree.simple_tree else "balanced_tree",
            "ring_bus_bw_gbps": gi.ring.num_channels * gi.ring.bw_gbps, "ring_bottleneck_link": gi.ring.bottleneck,
            "nvls_channels": gi.nvls.num_channels if gi.nvls else 0,
            "nvls_bw_per_channel_gbps": gi.nvls.bw_gbps if gi.nvls else 0.0,
            "nvls_bw_inter_gbps": gi.nvls.inter_gbps if gi.nvls else 0.0,
            "nvlink_intra": gi.nvlink_intra, "ll128_enabled": gi.ll128_enabled,
            "forced_algorithm": self.algorithm, "forced_protocol": self.protocol,
        }


def _nccl_model(graph: nx.Graph, num_ranks: int, algorithm: str | None, protocol: str | None) -> NcclCommModel:
    placement = place_ranks(graph, num_ranks)
    info = search_graphs(graph, placement)
    system = _system(graph, placement, info, num_ranks)
    intra = inter = None
    if algorithm == "hierarchical":
        if placement.ppn > 1:
            one = Placement(hosts=(placement.hosts[0],))
            intra = _system(graph, one, search_graphs(graph, one), len(placement.hosts[0]))
        if placement.num_nodes > 1:
            # one ring per local rank, all at once: each gets 1/ppn of the multi-node graph
            total = info.ring.num_channels * info.ring.bw_gbps
            ch = max(1, info.ring.num_channels // placement.ppn)
            g1 = nccl.NcclGraph(num_channels=ch, bw_intra_gbps=total / placement.ppn / ch,
                                bw_inter_gbps=total / placement.ppn / ch, nvlink_intra=False)
            inter = nccl.NcclSystem(num_ranks=placement.num_nodes, num_nodes=placement.num_nodes,
                                    compute_capability=info.compute_capability,
                                    cpu_vendor=system.cpu_vendor, ring=g1, tree=g1, nvls=None,
                                    ll128_enabled=info.ll128_enabled)
    return NcclCommModel(system=system, graph_info=info, intra_system=intra, inter_system=inter,
                         topology_name=str(graph.graph.get("name")), algorithm=algorithm, protocol=protocol)


# ---- gloo ----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class GlooCommModel:
    """gloo's ring all-reduce over TCP (see :mod:`ddpsim.network.gloo`)."""

    num_ranks: int
    hop_latency_s: float
    hop_bandwidth_bytes_per_s: float
    reduce_bandwidth_bytes_per_s: float
    topology_name: str = ""
    element_size_bytes: int = 4
    backend: str = "gloo"

    def estimate_allreduce(self, size_bytes: int) -> CollectiveEstimate:
        _check_size(size_bytes)
        t = gloo.ring_allreduce_s(size_bytes, self.num_ranks, hop_latency_s=self.hop_latency_s,
                                  hop_bandwidth_bytes_per_s=self.hop_bandwidth_bytes_per_s,
                                  reduce_bandwidth_bytes_per_s=self.reduce_bandwidth_bytes_per_s,
                                  element_size_bytes=self.element_size_bytes)
        algo = "ring" if t > 0 else "none"
        return make_estimate(size_bytes, t, self.num_ranks, algo, "tcp" if t > 0 else "none")

    def estimate_broadcast(self, size_bytes: int) -> CollectiveEstimate:
        _check_size(size_bytes)
        t = gloo.broadcast_s(size_bytes, self.num_ranks, hop_latency_s=self.hop_latency_s,
                             hop_bandwidth_bytes_per_s=self.hop_bandwidth_bytes_per_s)
        return make_estimate(size_bytes, t, self.num_ranks, "tree" if t > 0 else "none",
                             "tcp" if t > 0 else "none", coll="broadcast")

    def allreduce_s(self, size_bytes: int) -> float:
        return self.estimate_allreduce(size_bytes).time_s

    def broadcast_s(self, size_bytes: int) -> float:
        return self.estimate_broadcast(size_bytes).time_s

    def describe(self) -> dict[str, Any]:
        return {"model": "gloo-ring", "topology": self.topology_name, "num_ranks": self.num_ranks,
                "hop_latency_s": self.hop_latency_s, "hop_bandwidth_bytes_per_s": self.hop_bandwidth_bytes_per_s,
                "reduce_bandwidth_bytes_per_s": self.reduce_bandwidth_bytes_per_s,
                "segment_bytes_max": gloo.K_MAX_SEGMENT_BYTES}


def _gloo_model(graph: nx.Graph, num_ranks: int) -> GlooCommModel:
    placement = place_ranks(graph, num_ranks)
    devs = [d for h in placement.hosts for d in h]
    router = _Router(graph)
    if len(devs) == 1:
        lat, bw = 0.0, math.inf
    else:
        hops = list(zip(devs, devs[1:] + devs[:1]))
        loads: dict[tuple, float] = {}
        for a, b in hops:
            router.add_load(loads, a, b)
        cap = {k: v * GBPS for k, v in _capacities(graph).items()}
        bw = min(cap[e] / load for e, load in loads.items())  # every hop at once: the ring's rate
        lat = max(router.latency(a, b) for a, b in hops)
    reduce_bw = min(graph.nodes[d].get(REDUCE_BANDWIDTH, 4e9) for d in devs)
    return GlooCommModel(num_ranks=num_ranks, hop_latency_s=lat, hop_bandwidth_bytes_per_s=bw,
                         reduce_bandwidth_bytes_per_s=reduce_bw, topology_name=str(graph.graph.get("name")))


# ---- entry point -----------------------------------------------------------------------

_MODEL_CACHE: "weakref.WeakKeyDictionary[nx.Graph, dict[tuple, Any]]" = weakref.WeakKeyDictionary()


def build_comm_model(graph: nx.Graph, num_ranks: int, *, calibration=None, algorithm: str | None = None,
                     protocol: str | None = None):
    """The :class:`~ddpsim.network.comm_model.CommModel` of ``num_ranks`` ranks on ``graph``.

    Args:
        graph: a topology (:mod:`ddpsim.network.topology`).
        num_ranks: ranks in the process group, placed on the first devices in rank order.
        calibration: a :class:`ddpsim.calibration.loader.Calibration` (or None): its measured
            curves replace the analytical model (same backend required), through its
            ``comm_model(base)`` (this module does not import the calibration layer above it).
        algorithm: force an NCCL algorithm (ring, tree, nvls, hierarchical); None = NCCL's choice.
        protocol: force an NCCL protocol (ll, ll128, simple); None = NCCL's choice.

    Raises:
        InputError: num_ranks outside [1, max_ranks(graph)], an unknown algorithm or protocol,
            forcing one on gloo, or a calibration of another backend.
    """
    backend = graph.graph.get("backend")
    if algorithm is not None and algorithm not in ALGORITHM_CHOICES:
        raise InputError(f"algorithm: {algorithm!r} is not accepted; expected one of {', '.join(ALGORITHM_CHOICES)}")
    if protocol is not None and protocol not in PROTOCOL_CHOICES:
        raise InputError(f"protocol: {protocol!r} is not accepted; expected one of {', '.join(PROTOCOL_CHOICES)}")
    if backend == "gloo" and (algorithm not in (None, "ring") or protocol is not None):
        raise InputError(f"algorithm/protocol: {algorithm or protocol!r} is not accepted with backend gloo; "
                         "expected none (gloo always runs its ring)")
    # NOTE: models are immutable and topologies are treated as immutable once built, so the
    # (graph search) work is done once per graph object and arguments, e.g. across a sweep.
    place_ranks(graph, num_ranks)  # validates num_ranks before it is used as a cache key
    per_graph = _MODEL_CACHE.setdefault(graph, {})
    key = (num_ranks, algorithm, protocol)
    model: Any = per_graph.get(key)
    if model is None:
        model = _gloo_model(graph, num_ranks) if backend == "gloo" else _nccl_model(graph, num_ranks, algorithm, protocol)
        per_graph[key] = model
    if calibration is not None:
        model = calibration.comm_model(model)  # measured curves over this model (ddpsim.calibration.loader, a layer above)
    return model
