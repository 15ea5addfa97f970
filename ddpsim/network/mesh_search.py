"""NCCL's channel search over GPUs linked directly by NVLink, without an NVSwitch (a DGX-1's hybrid
cube-mesh, NVLink-bridged pairs of PCIe cards). NCCL (v2.30.7, ``src/graph/search.cc``
``ncclTopoSearchRec``) builds a ring channel as a cycle through every GPU along NVLink paths
(``PATH_NVL``), a tree channel as a chain, each taking its speed off the bandwidth left on the links it
uses (``followPath``: two NVLinks, ``SM70_NVLINK_BW`` each, carry two channels), adding channels until
none fits. Here each channel is a depth-first search preferring the neighbour with most bandwidth left
(then rank order), bounded as ``NCCL_SEARCH_TIMEOUT`` bounds NCCL's (:data:`MAX_STEPS` candidate cycles
per packing; a packing the greedy first leaf completes stops there). A complete mesh of equal links
with an odd number of GPUs, or too many to enumerate (AMD MI300X's 8), takes its ``2 x floor((n - 1) /
2)`` symmetric rings (Hamiltonian cycles taken both ways, on links no earlier one uses), found greedily
in rank order: every link for an odd n (Walecki's decomposition). With an even n they leave a link per
GPU idle, so a small one (4 or 6 GPUs; 4: an HGX 4-GPU board) is packed like any mesh, its directed cycles
sharing links as NCCL's search shares them (4 H100, 6 NVLinks a pair: six ring orders, 24 channels).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Iterator

import networkx as nx

from ddpsim.network.comm_model import GBPS
from ddpsim.network.topology import BANDWIDTH, KIND, LINK_TYPE

Link = tuple[Any, Any]


def nvlink_mesh(graph: nx.Graph, devs: tuple | list) -> dict[Link, float] | None:
    """Capacity (GB/s, each direction) of every NVLink between two of ``devs``; None when no
    two of them are linked directly or one of them reaches an NVSwitch (NVLink through a
    switch is searched as link loads, :mod:`ddpsim.network.graph_search`)."""
    keep = set(devs)
    node_attr, adj = graph._node, graph._adj
    cap: dict[Link, float] = {}
    for a in devs:
        for b, d in adj[a].items():
            if d[LINK_TYPE] != "nvlink":
                continue
            if node_attr[b][KIND] == "nvswitch":
                return None
            if b in keep:
                cap[(a, b)] = d[BANDWIDTH] / GBPS
    return cap or None


def _hops(order: list, cycle: bool) -> list[Link]:
    return list(zip(order, order[1:] + order[:1])) if cycle else list(zip(order, order[1:]))


#: at most this many candidate channels, and this many steps of each search for them and of
#: their packing (a step: one cycle or path extended, one candidate tried against the links
#: left; NCCL's search has timeouts too: NCCL_SEARCH_TIMEOUT)
MAX_CANDIDATES = 4000
MAX_STEPS = 200_000

def full_mesh(devs: tuple | list, cap: dict[Link, float]) -> bool:
    """Whether every GPU of ``devs`` (3 or more) is linked to every other, all links equal, and the
    symmetric rings use them best: an odd count, or too many orders to enumerate."""
    n = len(devs)
    if n < 3 or len(cap) != n * (n - 1) or (n % 2 == 0 and math.factorial(n - 1) <= MAX_CANDIDATES):
        return False
    return len({round(v, 9) for v in cap.values()}) == 1


def _orders(devs: tuple | list, nbrs: dict[Any, list], start: Any, steps: list[int],
            end: Any = None) -> Iterator[list]:
    """Orders of all ``devs`` from ``start`` (ending at ``end`` if given) along ``nbrs``, depth first in
    their order, every order extended a step counted in ``steps[0]``, at most :data:`MAX_STEPS`."""
    n, order, seen = len(devs), [start], {start}

    def walk() -> Iterator[list]:
        steps[0] += 1
        if steps[0] > MAX_STEPS:
            return
        if len(order) == n:
            yield list(order)
            return
        for y in nbrs[order[-1]]:
            if y not in seen and (end is None or y != end or len(order) == n - 1):
                seen.add(y)
                order.append(y)
                yield from walk()
                order.pop()
                seen.discard(y)
    return walk()


def symmetric_rings(devs: tuple | list, start: Any) -> list[list]:
    """A full mesh's rings: undirected Hamiltonian cycles through ``devs``, from ``start``, each
    on links no earlier one uses (a depth-first search in rank order on the links left, at most
    :data:`MAX_STEPS` steps in all), each followed by its reverse."""
    free = {a: [b for b in devs if b != a] for a in devs}
    out: list[list] = []
    steps = [0]
    while True:
        order = next((o for o in _orders(devs, free, start, steps) if start in free[o[-1]]), None)
        if order is None:
            return out
        for a, b in _hops(order, True):
            free[a].remove(b)
            free[b].remove(a)
        out += [order, [start, *reversed(order[1:])]]


def _candidates(devs: tuple | list, cap: dict[Link, float], speed: float, *, cycle: bool, start: Any, end: Any,
                second: Any) -> list[list]:
    """Every cycle (or path) through all ``devs`` from ``start`` along links that carry ``speed`` (at most
    :data:`MAX_CANDIDATES`), widest first (the sum of the capacities of its links), then in rank order."""
    rank = {d: i for i, d in enumerate(devs)}

    def carries(a: Any, b: Any) -> bool:
        return (a, b) in cap and cap[(a, b)] >= speed - 1e-9
    nbrs = {a: [b for b in devs if carries(a, b)] for a in devs}
    found = (o for o in _orders(devs, nbrs, start, [0], end)
             if (not cycle or carries(o[-1], start)) and (end is None or o[-1] == end))
    out = list(itertools.islice(found, MAX_CANDIDATES))
    out.sort(key=lambda o: (o[1] != second if second is not None and len(devs) > 1 else False,
                            -sum(cap[e] for e in _hops(o, cycle)), [rank[d] for d in o]))
    return out


def find_channels(devs: tuple | list, cap: dict[Link, float], speed: float, count: int, *, cycle: bool,
                  start: Any = None, end: Any = None, second: Any = None) -> tuple[list[list], dict[Link, float]]:
    """The most channels (up to ``count``, device orders) at ``speed`` GB/s that the links carry
    together, and the bandwidth left: a depth-first packing of the candidates, widest first, within
    the GPUs' outgoing links and :data:`MAX_STEPS` (disjoint ones greedily; a full mesh's are
    :func:`symmetric_rings`, a chain a ring less its closing link)."""
    first = devs[0] if start is None else start
    if end is None and second is None and full_mesh(devs, cap):
        cands = [o for o in symmetric_rings(devs, first) if all(cap[e] >= speed - 1e-9 for e in _hops(o, True))]
    else:
        cands = _candidates(devs, cap, speed, cycle=cycle, start=first, end=end, second=second)
    hops = [_hops(o, cycle) for o in cands]
    left = dict(cap)
    if len({e for h in hops for e in h}) == sum(len(h) for h in hops):  # disjoint: each as often as it fits
        found: list[list] = []
        for order, h in zip(cands, hops):
            while len(found) < count and all(left[e] >= speed - 1e-9 for e in h):
                for e in h:
                    left[e] -= speed
                found.append(order)
        return found, left
    out_units = {a: sum(int((v + 1e-9) // speed) for (x, _), v in cap.items() if x == a) for a in devs}
    bound = min(count, min(out_units.values()) if len(devs) > 1 else count)
    best: list[int] = []
    chosen: list[int] = []
    steps = [0]

    def pack(i: int) -> bool:
        if len(chosen) > len(best):
            best[:] = chosen
            if len(best) >= bound:
                return True
        for k in range(i, len(cands)):
            steps[0] += 1
            if steps[0] > MAX_STEPS:
                return True
            if all(left[e] >= speed - 1e-9 for e in hops[k]):
                for e in hops[k]:
                    left[e] -= speed
                chosen.append(k)
                done = pack(k)
                chosen.pop()
                for e in hops[k]:
                    left[e] += speed
                if done:
                    return True
        return False
    pack(0)
    found = [cands[k] for k in best]
    left = dict(cap)
    for k in best:
        for e in hops[k]:
            left[e] -= speed
    return found, left


def mesh_path(devs: tuple | list, cap: dict[Link, float], start: Any, end: Any = None, second: Any = None) -> list | None:
    """A path through every device along NVLink (from ``start``, through ``second`` next when it
    can, ending at ``end`` when given), the widest first; None when there is none."""
    cands = _candidates(devs, cap, 1e-9, cycle=False, start=start, end=end, second=second)
    return cands[0] if cands else None


def tightest(cap: dict[Link, float], left: dict[Link, float]) -> str:
    """The link with the least bandwidth left (per capacity), "u -> v" ("" with no link)."""
    if not cap:
        return ""
    e = min(cap, key=lambda e: (left[e] / cap[e], str(e)))
    return f"{e[0]} -> {e[1]}"


class MeshTree:
    """The tree search's view of a mesh on one host: ``channels`` chains at a speed fit when
    that many paths through every GPU are found (no NIC: one speed)."""

    def __init__(self, devs: tuple | list, cap: dict[Link, float], channels: int) -> None:
        self.devs, self.cap, self.channels = devs, cap, channels

    def fits(self, s_intra: float, s_inter: float) -> bool:
        return len(find_channels(self.devs, self.cap, s_intra, self.channels, cycle=False)[0]) == self.channels

    def worst(self, s_intra: float, s_inter: float) -> str:
        found, left = find_channels(self.devs, self.cap, s_intra, self.channels, cycle=False)
        return tightest(self.cap, left)
