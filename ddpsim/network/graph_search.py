"""NCCL's channel search (NCCL v2.30.7 ``src/graph/search.cc``, ``ncclTopoCompute``) on a topology
graph. A ring channel goes through the ranks' devices and, across hosts, NIC ``c mod num_nics`` of every
host; its load on each directed link comes from ECMP shortest paths
(:class:`ddpsim.network.routing.Router`). The search tries NCCL's per-channel speeds (speed arrays),
highest first, keeps as many channels as every link carries, and duplicates them as
``ncclTopoDupChannels`` does. The tree is searched on its own (BALANCED_TREE, ``src/init.cc``; the plain
TREE on Hopper+ when it does not fit; pass 2 raising ``bwIntra`` up to 2 x ``bwInter``); NVLS as
``ncclTopoSearchTryNvls``. The result is :mod:`ddpsim.network.nccl`'s ``NcclSystem``. Identical hosts
share their part (:mod:`ddpsim.network.host_classes`, :mod:`ddpsim.network.link_loads`), with the same
result as walking every host. Details: docs/MODEL.md, "NCCL's channel search".
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any, Callable

import networkx as nx

from ddpsim.network import nccl
from ddpsim.network.nccl import NcclGraph
from ddpsim.network.comm_model import GBPS
from ddpsim.network.host_classes import Hosts
from ddpsim.network.link_loads import ChannelLoads, Totals, prefix_utilisation
from ddpsim.network.mesh_search import MeshTree, find_channels, mesh_path, nvlink_mesh, tightest
from ddpsim.network.routing import Placement
from ddpsim.network.topology import BANDWIDTH, COMPUTE_CAPABILITY, KIND, LINK_TYPE, NVLS, gc_paused

Loads = dict[tuple, float]
#: an emitter adds one part of a channel's loads for host i, channel c
Emitter = Callable[[Loads, int, int], None]


def _start_index(speeds: tuple[float, ...], max_bw: float, channels: int, total_bw: float) -> int:
    """ncclTopoCompute's first speed: the highest neither above the widest single path ``max_bw``
    nor with ``speed * channels`` above ``total_bw`` (else the slowest)."""
    idx = 0
    while idx < len(speeds) - 1 and (speeds[idx] > max_bw + 1e-9 or speeds[idx] * channels > total_bw + 1e-9):
        idx += 1
    return idx


def _first_pass(speeds: tuple[float, ...], idx: int, channels_at: Callable[[float], int], total_bw: float, *,
                better: Callable[[int, float, int, float], bool],
                done: Callable[[int], bool] = lambda c: False) -> tuple[int, float]:
    """ncclTopoCompute's first pass from ``speeds[idx]`` down: the best (channels, speed) by ``better``,
    until ``done``, ``nChannels * bw >= total_bw`` or a next speed <= 0.49 of the best."""
    best_c, best_s = 0, 0.0
    while True:
        c = channels_at(speeds[idx])
        if better(c, speeds[idx], best_c, best_s):
            best_c, best_s = c, speeds[idx]
        if done(best_c) or (best_c and best_c * best_s >= total_bw - 1e-9):
            return best_c, best_s
        if not (idx < len(speeds) - 1 and (best_c == 0 or speeds[idx + 1] / best_s > 0.49)):
            return best_c, best_s
        idx += 1


def _search(channels_at: Callable[[float], int], worst_at: Callable[[int, float], str], speeds: tuple[float, ...], *,
            max_bw: float, total_bw: float, min_channels: int, cc: int, allow_dup: bool, max_channels: int) -> NcclGraph:
    """ncclTopoCompute over how many channels fit at a speed (``channels_at(s)``, at least ``min_channels``
    else 0; ``worst_at(c, s)``: the link bounding c channels): the first pass, then ncclTopoDupChannels."""
    best_c, best_s = _first_pass(speeds, _start_index(speeds, max_bw, min_channels, total_bw), channels_at, total_bw,
                                 better=lambda c, s, bc, bs: c * s > bc * bs + 1e-9)
    bneck = worst_at(best_c, best_s) if best_c else ""
    if allow_dup and best_c and best_s >= 25.0 and not (cc > 80 and best_s < 50.0 and best_c > 4):
        dup = min(2 * best_c, max_channels)
        best_s /= math.ceil(dup / best_c)
        best_c = dup
    return NcclGraph(num_channels=best_c, bw_intra_gbps=best_s, bw_inter_gbps=best_s, bottleneck=bneck)


def _total_bw(graph: nx.Graph, devs: list) -> float:
    """NCCL's system totalBw: a GPU's NVLink total, or its PCIe width with no NVLink (GB/s)."""
    def total(d: Any) -> float:
        links = graph.adj[d].values()
        nvl = sum(e[BANDWIDTH] for e in links if e[LINK_TYPE] == "nvlink")
        return nvl or max((e[BANDWIDTH] for e in links), default=0.0)
    return max(map(total, devs), default=0.0) / GBPS


def _tree_search(totals: dict[bool, Totals], speeds: tuple[float, ...], *, channels: int, max_bw: float,
                 search_total_bw: float, cc: int) -> NcclGraph:
    """ncclTopoCompute for NCCL_TOPO_PATTERN_BALANCED_TREE over ``totals[balanced]``, exactly ``channels``
    channels (init.cc ``treeGraph->minChannels = maxChannels = ringGraph->nChannels``): pass 1 keeps the
    first speed that fits, on cc >= 90 retrying as the plain TREE ("Try a simpler tree": ``simple_tree``);
    pass 2 raises ``bwIntra`` while it fits and is below 2 x ``bwInter``."""
    for idx in range(_start_index(speeds, max_bw, channels, search_total_bw), len(speeds)):
        s = speeds[idx]
        balanced = totals[True].fits(s, s)
        if balanced or (cc >= 90 and totals[False].fits(s, s)):
            break
    else:  # search.cc: "falling back to simple order", bwIntra 0.1
        return NcclGraph(num_channels=channels, bw_intra_gbps=0.1, bw_inter_gbps=speeds[-1],
                         bottleneck=totals[True].worst(0.1, 0.1))
    s_intra = _raised(speeds, idx, s, lambda x: totals[balanced].fits(x, s))
    return NcclGraph(num_channels=channels, bw_intra_gbps=s_intra, bw_inter_gbps=s, simple_tree=not balanced,
                     bottleneck=totals[balanced].worst(s_intra, s))


def _raised(speeds: tuple[float, ...], idx: int, other: float, fits: Callable[[float], bool]) -> float:
    """ncclTopoCompute's pass 2: ``speeds[idx]`` raised while the next speed fits and it is below 2 x ``other``."""
    while idx > 0 and speeds[idx] < 2 * other and fits(speeds[idx - 1]):
        idx -= 1
    return speeds[idx]


# ---- what one channel loads: a host's own links, the route to the next host, the next host's inbound hop ----

def _inbound(hosts: Hosts, loads: Loads, i: int, c: int) -> None:
    """Channel c into host i: from its NIC to the NIC's entry device."""
    j = c % len(hosts.nics[i])
    hosts.router.add_load(loads, hosts.nics[i][j], hosts.entry(i)[j][0])


def _ring_own(hosts: Hosts) -> Emitter:
    """Ring channel c on host i: entry device, the others in rank order, exit device, out to the NIC
    (through the switch, or PXN over NVLink if nearer); on one host, a cycle."""
    def add(loads: Loads, i: int, c: int) -> None:
        devs, router = hosts.devs[i], hosts.router
        if not hosts.multi:
            for a, b in zip(devs, devs[1:] + devs[:1]):
                if a != b:
                    router.add_load(loads, a, b)
            return
        j = c % len(hosts.nics[i])
        entry, exit_ = hosts.entry(i)[j]
        mesh = hosts.mesh(i)
        last = [exit_] if exit_ != entry else []
        order = mesh_path(devs, mesh, entry, exit_ if last else None) if mesh else None
        if order is None:  # entry, the others in rank order from after it, then exit
            k = devs.index(entry)
            order = [entry, *(d for d in devs[k + 1:] + devs[:k] if d != exit_), *last]
        for a, b in zip(order, order[1:]):
            router.add_load(loads, a, b)
        router.add_load(loads, order[-1], hosts.nics[i][j])
    return add


def _nvls_emitters(hosts: Hosts) -> tuple[Emitter, Emitter]:
    """NVLS channel c's (intra, inter) loads on host i's own links (search.cc ``ncclTopoSearchTryNvls``):
    every GPU to and from its NVSwitches at bwIntra, the head (NIC ``c mod num_nics``'s GPU; on one
    host the c-th GPU) twice, and the head with that NIC at bwInter ("back to net" at step 0)."""
    graph = hosts.graph

    def head(i: int, c: int) -> Any:
        return hosts.entry(i)[c % len(hosts.nics[i])][0] if hosts.multi else hosts.devs[i][c]

    def intra(loads: Loads, i: int, c: int) -> None:
        h = head(i, c)
        for d in hosts.devs[i]:
            share = 2.0 if d == h else 1.0
            for s in graph.neighbors(d):
                if graph.nodes[s][KIND] == "nvswitch":
                    loads[(d, s)] = loads.get((d, s), 0.0) + share
                    loads[(s, d)] = loads.get((s, d), 0.0) + share

    def inter(loads: Loads, i: int, c: int) -> None:
        hosts.router.add_load(loads, head(i, c), hosts.nics[i][c % len(hosts.nics[i])])
    return intra, inter


def _tree_chains(hosts: Hosts, i: int, num_channels: int) -> list[list]:
    """Host i's chain of each tree channel: the NIC's nearest GPU, the next-nearest, then the others,
    ending at the GPU that has ended the fewest chains so far (the search spreads the chain ends)."""
    devs = hosts.devs[i]
    if not hosts.multi:
        return [list(devs) for _ in range(num_channels)]
    ends = {d: 0 for d in devs}
    per: list[list] = []
    for c in range(num_channels):
        first, second = hosts.entry(i)[c % len(hosts.nics[i])]
        mesh = hosts.mesh(i)
        chain = mesh_path(devs, mesh, first, second=second) if mesh else None
        if chain:  # GPUs linked directly: a chain along NVLink
            per.append(chain)
            continue
        head = [first] + ([second] if second != first else [])
        rest = [d for d in devs if d not in head]
        if rest:
            k0 = devs.index(first)
            cyc = [d for d in devs[k0 + 1:] + devs[:k0] if d in rest]
            last = min(cyc, key=lambda d: (ends[d], cyc.index(d)))
            k = cyc.index(last)
            rest = cyc[k + 1:] + cyc[:k + 1]
            ends[last] += 1
        per.append(head + rest)
    return per


def _tree_emitters(hosts: Hosts, num_channels: int, balanced: bool) -> tuple[Emitter, Emitter]:
    """Tree channel c's (intra, inter) loads on host i's own links (search.cc, tree patterns): a chain
    through the host's GPUs at bwIntra, forward only (followPath); from the NIC at bwInter and "back to
    net" at step 0, half from each of the first two GPUs for BALANCED_TREE, all from the first for TREE."""
    chains = functools.cache(lambda i: _tree_chains(hosts, i, num_channels))
    router = hosts.router

    def intra(loads: Loads, i: int, c: int) -> None:
        order = chains(i)[c]
        for a, b in zip(order, order[1:]):
            router.add_load(loads, a, b)

    def inter(loads: Loads, i: int, c: int) -> None:
        j = c % len(hosts.nics[i])
        nic = hosts.nics[i][j]
        first, second = hosts.entry(i)[j]
        router.add_load(loads, nic, first)
        if balanced and second != first:
            router.add_load(loads, first, nic, 0.5)
            router.add_load(loads, second, nic, 0.5)
        else:
            router.add_load(loads, first, nic)
    return intra, inter


def _channel(hosts: Hosts, c: int, own: Emitter, *, routes: bool = False, inbound: bool = False) -> ChannelLoads:
    """Channel c's loads: each class's representative (``inbound`` hop first), then per host in order a
    walked host's own links, across hosts the ``routes`` to the next host and its inbound hop if walked."""
    ch, routes, inbound = ChannelLoads(), routes and hosts.multi, inbound and hosts.multi
    for rep, *_ in hosts.classes:
        d: Loads = {}
        if inbound:
            _inbound(hosts, d, rep, c)
        ch.inbound_len.append(len(d))
        own(d, rep, c)
        ch.by_class.append(d)
    if routes and hosts.walked == [0] and hosts.fabric_apart:
        _walk_host0(hosts, ch, c, own, inbound)
        return ch
    walked, d = set(hosts.walked), {}
    for i in range(hosts.count):
        if i in walked:
            ch.bounds.append((len(d), i, 0))
            own(d, i, c)
        if routes:
            ch.bounds.append((len(d), i, 1))
            hosts.add_route(d, i, c)
            nxt = (i + 1) % hosts.count
            if inbound and nxt in walked:
                ch.bounds.append((len(d), i, 2))
                _inbound(hosts, d, nxt, c)
    ch.blocks.append(d)
    return ch


def _walk_host0(hosts: Hosts, ch: ChannelLoads, c: int, own: Emitter, inbound: bool) -> None:
    """The walk when only host 0 is walked: its own links, the routes between all hosts (one block per
    NIC assignment, shared by every pattern), then the links host 0's inbound hop reaches first."""
    d: Loads = {}
    own(d, 0, c)
    n_own = len(d)
    if inbound:
        _inbound(hosts, d, 0, c)
    items = list(d.items())
    first, last = dict(items[:n_own]), dict(items[n_own:])
    routes, route_bounds = hosts.routes(c)
    ch.blocks = [first, routes, last]
    ch.bounds = [(0, 0, 0)] + [(n_own + r, i, 1) for r, i in route_bounds] + [(n_own + len(routes), hosts.count - 1, 2)]


def _by_nic(hosts: Hosts, num_channels: int, make: Callable[[int], ChannelLoads]) -> list[ChannelLoads]:
    """Channels 0..num_channels-1, each computed once per NIC assignment (same NICs: same links)."""
    once = functools.cache(make)  # assignment k first comes at channel k: made from that one
    return [once(hosts.nic_assignment(c)) for c in range(num_channels)]


def _pattern_search(hosts: Hosts, own: Emitter, speeds: tuple[float, ...], **kw: Any) -> NcclGraph:
    channels = _by_nic(hosts, kw["max_channels"], lambda c: _channel(hosts, c, own, routes=True, inbound=True))
    util, worst = prefix_utilisation(channels, hosts.links, [rep for rep, *_ in hosts.classes])
    fitting = range(kw["min_channels"], kw["max_channels"] + 1)  # util[k]: the largest load per capacity of k

    def channels_at(s: float) -> int:
        return max((k for k in fitting if util[k] * s <= 1.0 + 1e-9), default=0)
    return _search(channels_at, lambda c, s: worst[c], speeds, **kw)


def _mesh_ring(devs: tuple, mesh: dict[tuple, float], speeds: tuple[float, ...], **kw: Any) -> NcclGraph | None:
    """The ring over a direct NVLink mesh on one host; None when no NVLink cycle goes through every GPU."""
    def channels_at(s: float) -> int:
        c = len(find_channels(devs, mesh, s, kw["max_channels"], cycle=True)[0])
        return c if c >= kw["min_channels"] else 0

    def worst_at(c: int, s: float) -> str:
        return tightest(mesh, find_channels(devs, mesh, s, c, cycle=True)[1])
    ring = _search(channels_at, worst_at, speeds, **kw)
    return ring if ring.num_channels else None


def _tree_totals(hosts: Hosts, num_channels: int, balanced: bool) -> Totals:
    intra, inter = _tree_emitters(hosts, num_channels, balanced)
    li = [_channel(hosts, c, intra) for c in range(num_channels)]
    le = [_channel(hosts, c, inter, routes=True) for c in range(num_channels)] if hosts.multi else []
    return Totals(li, le, hosts.links, hosts.member_names, len(hosts.classes))


def _max_bw_gbps(hosts: Hosts, all_devs: list) -> float:
    """The widest single path the search may use (GB/s): device to NIC, device to device, or the total."""
    router = hosts.router
    if hosts.multi:
        return max(router.bottleneck(hosts.entry(i)[j][0], hosts.nics[i][j]) for i in hosts.searched()
                   for j in range(len(hosts.nics[i]))) / GBPS
    if len(all_devs) > 1:
        return max(router.bottleneck(a, b) for a in all_devs[:1] for b in all_devs[1:]) / GBPS
    return _total_bw(hosts.graph, all_devs)


def _ll128_enabled(hosts: Hosts, placement: Placement, cc: int) -> tuple[bool, bool]:
    """``(nvlink_intra, ll128)`` from the path types: NVLink between GPUs of a host (typeIntra ==
    NVL), GPU->NIC without the CPU (PIX/PXB); LL128 needs both (or one GPU per host / Hopper+)."""
    g, paths, searched = hosts.graph, hosts.router.paths, hosts.searched()
    pairs = [(a, b) for i in searched for a, b in zip(hosts.devs[i], hosts.devs[i][1:])]
    nvlink_intra = bool(pairs) and all(g.edges[u, v][LINK_TYPE] == "nvlink" for a, b in pairs
                                       for p in paths(a, b) for u, v in zip(p, p[1:]))
    intra_ok = nvlink_intra or placement.ppn == 1
    inter_ok = (not hosts.multi) or cc >= 90 or all(
        g.nodes[n][KIND] != "host_bridge" for i in searched for j in range(len(hosts.nics[i]))
        for p in paths(hosts.entry(i)[j][0], hosts.nics[i][j]) for n in p)
    return nvlink_intra, intra_ok and inter_ok


def _nvls_totals(hosts: Hosts, max_channels: int) -> Callable[[int], Totals]:
    """The loads of the first k NVLS channels (:class:`Totals`, made on first use)."""
    intra, inter = _nvls_emitters(hosts)
    if hosts.multi:
        li = _by_nic(hosts, max_channels, lambda c: _channel(hosts, c, intra))
        le = _by_nic(hosts, max_channels, lambda c: _channel(hosts, c, inter, routes=True, inbound=True))
    else:
        li, le = [_channel(hosts, c, intra) for c in range(max_channels)], []
    return functools.cache(lambda k: Totals(li[:k], le[:k], hosts.links, hosts.member_names, len(hosts.classes)))


def _nvls_speeds(first: Callable[[int], Totals], speeds: tuple[float, ...], *, max_bw: float, total_bw: float,
                 search_total_bw: float, min_channels: int, max_channels: int) -> tuple[int, float, float]:
    """ncclTopoCompute for NCCL_TOPO_PATTERN_NVLS: (channels, bwIntra, bwInter), (0, 0, 0) if none. Pass 1
    (bwIntra = bwInter) keeps the most channels (``ncclTopoCompareGraphs``); pass 2 raises bwInter while
    the channels fit and it is below 2 x bwIntra."""
    def most(s_intra: float, s_inter: float) -> int:
        for k in range(max_channels, min_channels - 1, -1):
            if first(k).fits(s_intra, s_inter):
                return k
        return 0
    best_c, best_s = _first_pass(speeds, _start_index(speeds, max_bw, min_channels, search_total_bw),
                                 lambda s: most(s, s), total_bw, better=lambda c, s, bc, bs: c > bc,
                                 done=lambda c: c == max_channels)
    if not best_c:
        return 0, 0.0, 0.0
    idx = next((i for i, s in enumerate(speeds) if s <= best_s + 1e-9), len(speeds) - 1)
    return best_c, best_s, _raised(speeds, idx, best_s, lambda s: first(best_c).fits(best_s, s))


def _nvls_search(hosts: Hosts, placement: Placement, devs: list, speeds: tuple[float, ...], *, cc: int,
                 max_bw: float, total_bw: float, search_total_bw: float) -> NcclGraph | None:
    """NCCL_TOPO_PATTERN_NVLS over the searched hosts' ``devs`` (None without NVLS switches, cc >= 90,
    several GPUs per host and a channel that fits): at most ``NCCL_MAX_NVLS_ARITY`` channels, one per GPU (and NIC); on one host ``minChannels =
    maxChannels``."""
    graph = hosts.graph
    switches = {n for d in devs for n in graph.neighbors(d) if graph.nodes[n][KIND] == "nvswitch"}
    if not (cc >= 90 and switches and all(graph.nodes[s].get(NVLS, False) for s in switches) and placement.ppn > 1):
        return None
    nics = [len(hosts.nics[i]) for i in hosts.searched()] if hosts.multi else []
    max_ch = min(nccl.NCCL_MAX_NVLS_ARITY, placement.ppn, *nics)
    first = _nvls_totals(hosts, max_ch)
    c, s_intra, s_inter = _nvls_speeds(first, speeds, max_bw=max_bw, total_bw=total_bw,
                                       search_total_bw=search_total_bw, min_channels=1 if hosts.multi else max_ch,
                                       max_channels=max_ch)
    return NcclGraph(num_channels=c, bw_intra_gbps=s_intra, bw_inter_gbps=s_inter, nvlink_intra=True,
                     bottleneck=first(c).worst(s_intra, s_inter)) if c else None


def search_graphs(graph: nx.Graph, placement: Placement) -> nccl.NcclSystem:
    """The ring, tree (and NVLS) channel searches for the ranks of ``placement``: NCCL's system."""
    with gc_paused():
        return (_search_graphs(Hosts(graph, placement), placement)
                or _search_graphs(Hosts(graph, placement, share=False), placement))


def _search_graphs(hosts: Hosts, placement: Placement) -> nccl.NcclSystem | None:
    """NCCL's system; None when a route left its host (then every host is walked, none shared)."""
    graph = hosts.graph
    searched_devs = [d for i in hosts.searched() for d in hosts.devs[i]]
    all_devs = [d for h in placement.hosts for d in h]
    cc = min(graph.nodes[d][COMPUTE_CAPABILITY] for d in searched_devs)
    max_bw = _max_bw_gbps(hosts, all_devs)
    total_bw = _total_bw(graph, searched_devs)
    speeds = next(v for c, v in nccl.SPEED_ARRAYS.items() if cc >= c)[1 if hosts.multi else 0]  # highest first
    ring_kw = dict(max_bw=max_bw, total_bw=total_bw, max_channels=nccl.MAXCHANNELS // 2, min_channels=1, cc=cc,
                   allow_dup=True)
    mesh = nvlink_mesh(graph, all_devs) if not hosts.multi and len(all_devs) > 1 else None
    ring = _mesh_ring(all_devs, mesh, speeds, **ring_kw) if mesh else None
    if ring is None:
        mesh = None
        ring = (NcclGraph(num_channels=1, bw_intra_gbps=max_bw, bw_inter_gbps=max_bw) if len(all_devs) == 1
                else _pattern_search(hosts, _ring_own(hosts), speeds, **ring_kw))
    tree = None
    search_total = total_bw * placement.ppn / (placement.ppn - 1) if placement.ppn > 1 else total_bw
    if len(all_devs) > 1 and ring.num_channels:
        one = MeshTree(all_devs, mesh, ring.num_channels) if mesh else None  # on a mesh: one speed, no pattern
        totals: dict[bool, Any] = {b: one or _tree_totals(hosts, ring.num_channels, b) for b in (True, False)}
        tree = _tree_search(totals, speeds, channels=ring.num_channels, max_bw=max_bw,
                            search_total_bw=search_total, cc=cc)
    nvlink_intra, ll128 = _ll128_enabled(hosts, placement, cc)
    nvls = _nvls_search(hosts, placement, searched_devs, speeds, cc=cc, max_bw=max_bw, total_bw=total_bw,
                        search_total_bw=search_total)
    if hosts.classes and hosts.router.left_subgraph:
        return None
    ring = replace(ring, nvlink_intra=nvlink_intra)
    tree = ring if tree is None else replace(tree, nvlink_intra=nvlink_intra)  # None: one device
    return nccl.NcclSystem(num_ranks=len(all_devs), num_nodes=placement.num_nodes, compute_capability=cc,
                           cpu_vendor=graph.graph.get("cpu_vendor", "intel"), ring=ring, tree=tree, nvls=nvls,
                           ll128_enabled=ll128)
