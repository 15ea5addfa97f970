"""NCCL's own cost model (``src/graph/tuning.cc``), pinned to **NCCL v2.30.7**. Pure functions of the
graph search's result (``nChannels``, ``bwIntra``/``bwInter``, NVLink or not), the ranks and the nodes:
NCCL's latency (µs), algorithm bandwidth (GB/s) and time of every (algorithm, protocol), and NCCL's
choice, the fastest (``enqueue.cc topoGetAlgoInfo``). Formulas and constants: ``tuning.cc``
``ncclTopoTuneModel``, ``search.cc`` (speed arrays), ``topo.h`` (link bandwidths); the plain TREE
pattern's 0.85 (``maxTreePattern == NCCL_TOPO_PATTERN_TREE``) applies when the graph says so
(``NcclGraph.simple_tree``). Units follow NCCL (µs, GB/s = 1000 bytes/µs);
:mod:`ddpsim.network.collective_cost` converts. Not modelled: CollNet/SHARP, PAT, tuner plugins, grouped
operations (``latCount`` = 1), forced channel counts. Added, never chosen by itself: ``hierarchical``
(intra-node reduce-scatter, inter-node all-reduce, intra-node all-gather).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NCCL_VERSION = "2.30.7"

PROTOCOLS = ("ll", "ll128", "simple")
#: user-facing algorithm names -> internal ("nvls" covers NVLSTree on several nodes)
FORCEABLE_ALGORITHMS = ("ring", "tree", "nvls", "hierarchical")

# ---- the constant table (tuning.cc v2.30.7, ncclTunerConstantsDefaults) ------------------
#: baseLatencies [algo][proto] in µs (LL, LL128, Simple)
BASE_LAT_US = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "nvls": (0.0, 0.0, 0.0),
    "nvls_tree": (0.0, 0.0, 0.0),
}
#: hwLatencies [hw][algo][proto] in µs
HW_LAT_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "nvls": (0.0, 0.0, 25.0), "nvls_tree": (0.0, 0.0, 25.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 20.9)},
}
#: llMaxBws [row][N1, N2, N4]; the tables' rows: Volta 0, Ampere 1, Hopper 2, Blackwell 3
LL_MAX_BWS = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
PER_CH_MAX_RING_LL128_BWS = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (40.0,) * 3)
PER_CH_MAX_TREE_LL128_BWS = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_MAX_TREE_BWS = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
PER_CH_MAX_NVLS_TREE_BWS = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
#: getNetOverhead (µs): Intel x86 1.0, AMD x86 2.0, any other CPU (Arm: Grace) 1.0
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "arm": 1.0}
#: CPU vendors on x86 (NCCL_TOPO_CPU_ARCH_X86): NVLSTree's size correction on Blackwell applies there
X86_VENDORS = ("intel", "amd")
#: treeCorrectionFactor [proto][log2(nBytes>>6)], 64 B ... 256 MiB
TREE_CORRECTION = (
    (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1, 1),
    (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1, 1),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
MAXCHANNELS = 64
#: graph search speed arrays (search.cc), GB/s per channel: (intra-node, inter-node) from a compute capability up
SPEED_ARRAYS = {
    100: ((90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
          (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
           0.24, 0.12)),
    90: ((60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
         (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)),
    0: ((40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
        (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12)),
}
NCCL_MAX_NVLS_ARITY = 32


def arch_index(compute_capability: int) -> int:
    """The tables' row: Volta 0, Ampere 1, Hopper 2, Blackwell 3."""
    return sum(compute_capability >= cc for cc in (80, 90, 100))


@dataclass(frozen=True, kw_only=True)
class NcclGraph:
    """What NCCL's topology search (:mod:`ddpsim.network.graph_search`) hands to the tuning model, one
    per pattern: ``num_channels`` x ``bw_intra_gbps`` is the bus bandwidth the ring/tree can sustain."""

    num_channels: int
    bw_intra_gbps: float
    bw_inter_gbps: float
    nvlink_intra: bool = False  # graph.typeIntra == LINK_NVL (else PCI hardware latencies)
    simple_tree: bool = False  # the tree search fell back to NCCL_TOPO_PATTERN_TREE (Hopper+)
    bottleneck: str = ""  # the most loaded link at the chosen speeds, "u -> v"


@dataclass(frozen=True, kw_only=True)
class NcclSystem:

    num_ranks: int
    num_nodes: int
    compute_capability: int
    cpu_vendor: str
    ring: NcclGraph
    tree: NcclGraph
    nvls: NcclGraph | None  # None: no NVLS-capable NVSwitch or compute capability < 90
    ll128_enabled: bool

    @property
    def ppn(self) -> int:
        return self.num_ranks // self.num_nodes

    def graph(self, algo: str) -> NcclGraph:
        """The search's graph an algorithm runs on (NVLS and NVLSTree: the NVLS one)."""
        g = {"ring": self.ring, "tree": self.tree}.get(algo, self.nvls)
        assert g is not None
        return g


def log2i(x: int) -> int:
    """NCCL's ``log2i``: floor(log2(x)), 0 below 2."""
    return max(0, int(x).bit_length() - 1)


def bandwidth_gbps(sys: NcclSystem, algo: str, proto: str, coll: str = "allreduce") -> float:
    """Algorithm bandwidth NCCL models for (algo, proto), GB/s; 0 means disabled (``src/graph/tuning.cc``,
    ``ncclTopoTuneModel``: ``busBw`` per algorithm and protocol)."""
    n, nn = sys.num_ranks, sys.num_nodes
    cc = arch_index(sys.compute_capability)
    index2 = nn - 1 if nn <= 2 else 2
    index1 = cc if nn == 1 else (1 if sys.cpu_vendor == "amd" else 0)
    nsteps = 2 * (n - 1) if coll == "allreduce" else (n - 1 if coll in ("reducescatter", "allgather") else n)
    if algo in ("ring", "tree"):
        g = sys.graph(algo)
        disabled = (coll != "allreduce" and algo == "tree") or (proto == "ll128" and not sys.ll128_enabled)
        if disabled or g.num_channels == 0:
            return 0.0
        bw = g.bw_intra_gbps if nn <= 2 else g.bw_inter_gbps
        bus = g.num_channels * bw
        if algo == "ring":
            if proto == "ll":
                bus = min(LL_MAX_BWS[index1][index2], bus * 0.5)
            elif proto == "ll128":
                bus = min(bus * 0.92, g.num_channels * PER_CH_MAX_RING_LL128_BWS[cc][index2])
        else:
            bus = min(bus * 0.92, g.num_channels * PER_CH_MAX_TREE_BWS[cc][index2])
            if proto == "ll":
                bus = min(bus / 3.8, LL_MAX_BWS[index1][index2])
            elif proto == "ll128":
                bus = min(bus * (7.0 / 9.0 if nn == 1 else 120.0 / 128.0),
                          g.num_channels * PER_CH_MAX_TREE_LL128_BWS[cc][index2])
            if g.simple_tree:
                bus *= 0.85
        ratio = n / nsteps if algo == "ring" else 0.5
        return bus * ratio
    if algo in ("nvls", "nvls_tree"):
        g = sys.nvls
        if g is None or proto != "simple" or g.num_channels < 2 or coll != "allreduce":
            return 0.0
        if (algo == "nvls") == (nn > 1):
            return 0.0  # NVLS across nodes needs CollNet (SHARP), not modelled; NVLSTree is off on one node
        intra = g.bw_intra_gbps * NVLS_EFFICIENCY[cc] * (g.num_channels - 1) / g.num_channels * 2
        inter = g.bw_inter_gbps * (2 if (nn <= 2 and algo == "nvls_tree") else 1)
        cap = PER_CH_MAX_NVLS_TREE_BWS[cc][index2] if algo == "nvls_tree" else math.inf
        bw = min(intra, inter, cap)
        return g.num_channels * bw * n / nsteps
    raise AssertionError(algo)


def hop_latency_us(sys: NcclSystem, algo: str, proto: str) -> tuple[float, float]:
    """(intra-node, inter-node) latency of one hop (``tuning.cc`` ``hwLat``; a ring across nodes
    at least ``getNetOverhead``, three times it for Simple)."""
    p = PROTOCOLS.index(proto)
    intra = HW_LAT_US["nvlink" if sys.graph(algo).nvlink_intra else "pci"][algo][p]
    inter = HW_LAT_US["net"]["tree" if sys.ppn == 1 else algo][p]
    if algo == "ring" and sys.num_nodes > 1:
        intra = max(intra, NET_OVERHEAD_US[sys.cpu_vendor] * (3 if proto == "simple" else 1))
    return intra, inter


def latency_us(sys: NcclSystem, algo: str, proto: str, coll: str = "allreduce") -> float:
    """NCCL's latency for (algo, proto), µs (``src/graph/tuning.cc``, ``ncclTopoTuneModel``:
    ``baseLat`` + ``hwLat`` per step)."""
    n, nn, ppn = sys.num_ranks, sys.num_nodes, sys.ppn
    lat = BASE_LAT_US[algo][PROTOCOLS.index(proto)]
    intra, inter = hop_latency_us(sys, algo, proto)
    if algo == "ring":
        nsteps = 2 * (n - 1) if coll == "allreduce" else n - 1  # a ring broadcast/RS/AG: n-1 hops
        n_inter = 0 if nn == 1 else (2 * (nn - 1) if coll == "allreduce" else nn - 1)
        return lat + (nsteps - n_inter) * intra + n_inter * inter
    if algo == "tree":
        return lat + 2 * ((ppn - 1) * intra + log2i(nn) * inter)
    if algo == "nvls":
        return intra + (inter if nn > 1 else 0.0)
    if algo == "nvls_tree":
        return lat + intra + 2 * log2i(nn) * inter
    raise AssertionError(algo)


def tree_correction(sys: NcclSystem, algo: str, proto: str, size_bytes: int, coll: str = "allreduce") -> float:
    """``treeCorrectionFactor``: the share of its bandwidth a tree all-reduce of ``size_bytes`` reaches,
    as ``ncclTopoGetAlgoTime`` applies it (NVLSTree only on Blackwell with x86 CPUs); 1 elsewhere."""
    log_size = log2i(size_bytes >> 6) if size_bytes >> 6 > 0 else -1
    applies = ((algo == "tree" and log_size < 23)
               or (algo == "nvls_tree" and log_size < 24 and sys.compute_capability >= 100
                   and sys.cpu_vendor in X86_VENDORS))
    if coll != "allreduce" or log_size < 0 or not applies:
        return 1.0
    return TREE_CORRECTION[PROTOCOLS.index(proto)][log_size]


def time_us(sys: NcclSystem, algo: str, proto: str, size_bytes: int, coll: str = "allreduce") -> float:
    """``ncclTopoGetAlgoTime``: lat + nBytes / (1000 * bw) µs with NCCL's corrections; inf if disabled."""
    bw = bandwidth_gbps(sys, algo, proto, coll)
    if bw <= 0:
        return math.inf
    lat = latency_us(sys, algo, proto, coll)
    bw *= tree_correction(sys, algo, proto, size_bytes, coll)
    if (algo == "ring" and proto == "simple" and coll == "allreduce" and sys.num_nodes > 1):
        runtime_channels = min(MAXCHANNELS, 2 * sys.ring.num_channels)
        if size_bytes / (runtime_channels * sys.num_ranks) >= 64:
            lat *= 1.9 if sys.compute_capability < 80 else 1.4  # "Plateau effect of ring"
    return lat + size_bytes / (1000.0 * bw)


def candidates(sys: NcclSystem, coll: str = "allreduce") -> list[tuple[str, str]]:
    """(algo, proto) pairs NCCL would consider (enabled ones), in NCCL's id order."""
    algos = ("tree", "ring", "nvls", "nvls_tree") if coll == "allreduce" else ("ring",)
    return [(a, p) for a in algos for p in PROTOCOLS if bandwidth_gbps(sys, a, p, coll) > 0]


def choose(sys: NcclSystem, size_bytes: int, coll: str = "allreduce", *, algorithm: str | None = None,
           protocol: str | None = None) -> tuple[str, str, float]:
    """NCCL's pick (algo, proto, time_us) of minimum time, filtered like ``NCCL_ALGO`` / ``NCCL_PROTO``;
    ("none", "none", inf) if nothing is enabled."""
    allowed = ("nvls", "nvls_tree") if algorithm == "nvls" else (algorithm,)
    timed = [(a, p, time_us(sys, a, p, size_bytes, coll)) for a, p in candidates(sys, coll)
             if (algorithm is None or a in allowed) and protocol in (None, p)]  # each finite: bandwidth > 0
    return min(timed, key=lambda x: x[2], default=("none", "none", math.inf))
