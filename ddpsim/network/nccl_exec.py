"""The time of an NCCL all-reduce from how NCCL executes the configuration it chose
(:mod:`ddpsim.network.nccl`: ``tuning.cc``, ``enqueue.cc topoGetAlgoInfo``, whose
``ncclTopoGetAlgoTime`` is a ranking key): the run-time channels and threads (``connect.cc
ncclTopoPostset``, ``topoGetAlgoInfo``), chunks and slices of ``NCCL_STEPS`` = 8 slots
(``calcCollChunking``, ``device.h``, ``collectives.h``), the pipeline steps of ``device/all_reduce.h``
(``runRing``, ``runTreeSplit``, ``runNvls``, with their fill), each step's hop latency (``tuning.cc``
``hwLat``, ``getNetOverhead``), a synchronisation per slice for LL128, Simple and NVLS, LL's round trips
(``prims_ll.h``), NCCL's per-channel bandwidth (a tree's message, and on Blackwell with x86 CPUs
NVLSTree's, moved at the size's ``treeCorrectionFactor`` share of it, as ``ncclTopoGetAlgoTime``
applies it; the fill at the full per-channel rate) and ``baseLat`` for the launch::

    time = launch + hops x hop latency + serial slices x step overhead x (1 - slice / full slice)
         + bytes / (bandwidth x tree correction) + LL's extra round trips + fill

(serial slices: a ring's and NVLS's every slice; a tree's levels, then its chunks behind the first).

A slice's wait, barrier and post run on the threads that copy it, one slice after the other
(``prims_simple.h`` ``genericOp``: waitPeer, subBarrier, reduceCopy, barrier, postPeer;
``prims_ll128.h`` likewise): serial with the copy. NCCL's per-channel bandwidth is what full
slices deliver, overhead included, so a slice pays the overhead only for the share of a full
slice it lacks: nothing for large messages, the whole overhead for a slice of a few bytes.

:data:`LL_ROUND_TRIP_US` and :data:`STEP_OVERHEAD_US` are fitted, one value for every GPU
generation and transport, on the ``normal`` public curves, among the values that keep the published
large-message checks within 10 % (``curve_score.fit_overheads``; ``bench_collective_score.py --loso``);
:data:`GENERATION_US` sets a generation's own where its curves alone set it apart (Hopper's LL128
step and LL round trip: 0 µs, its NCCL tables already hold them; Blackwell's LL round trip: 0 µs).
Details: docs/MODEL.md, "Collective time". Units as :mod:`ddpsim.network.nccl`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ddpsim.network import nccl

# ---- NCCL's execution constants (v2.30.7) ----
NCCL_STEPS = 8  # device.h
#: data bytes one step carries (device.h buffer sizes / NCCL_STEPS; enqueue.cc calcCollChunking)
STEP_DATA_BYTES = {"ll": 8 * 512 * 8, "ll128": 120 * 640 * 8 // 16 * 15, "simple": (1 << 22) // NCCL_STEPS}
ALLREDUCE_CHUNKSTEPS = NCCL_STEPS // 2  # collectives.h
ALLREDUCE_SLICESTEPS = NCCL_STEPS // 4
NVLS_CHUNK_BYTES = 128 * 1024  # transport/nvls.cc NCCL_NVLS_CHUNKSIZE
NVLS_TREE_MAX_CHUNK_BYTES = 256 * 1024
#: enqueue.cc topoGetAlgoInfo: threads per channel (device.h NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS) and
#: bytes per thread before adding channels (comm.h NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD)
MAX_THREADS = {"ll": 512, "ll128": 640, "simple": 512}
THREAD_THRESHOLD = {"ll": 8, "ll128": 8, "simple": 64}
PCI_BW_GBPS = 24.0  # topo.h PCI_BW: a ring at most this fast runs Simple with 256 threads

#: µs of a slice's synchronisation, paid for the share of a full slice it lacks; fitted (module
#: docstring); LL has none
STEP_OVERHEAD_US = {"ll": 0.0, "ll128": 4.0, "simple": 0.5}
#: µs per LL round trip of threads x 8 data bytes, fitted (module docstring)
LL_ROUND_TRIP_US = 2.0
#: (generation: :func:`nccl.arch_index`'s row, protocol or "ll_round_trip") -> its own µs, fitted on
#: that generation's ``normal`` curves alone: Hopper's LL128 step and LL round trip (two 4-GPU NVLink4
#: systems, one also over InfiniBand; ``bench_collective_score.py --loso``), Blackwell's LL round trip
#: (one 8-GPU node's LL sizes; the forced-ring GB200 tray, which sets nothing, agrees); the AMD GPUs
#: share row 2, as the SM90 tables
GENERATION_US = {(2, "ll128"): 0.0, (2, "ll_round_trip"): 0.0, (3, "ll_round_trip"): 0.0}
#: how far measured all-reduces fall from this model: measured / model time at the 10th and
#: 90th percentiles over 196 sizes from 64 KiB to 64 MiB of 20 ``normal`` / ``forced_algo``
#: public curves of InfiniBand / RoCE / NVLink / PCIe systems (``bench_collective_score.py
#: --quantiles``; not centred on 1): the collective term of the recommendation's uncertainty band
MID_LO_BYTES = 64 * 1024
MID_HI_BYTES = 64 * 2 ** 20
MID_SIZE_RATIOS = (0.794, 1.689)


@dataclass(frozen=True, kw_only=True)
class Execution:

    num_channels: int
    thread_fraction: float
    chunk_bytes: int
    syncs: int  # synchronised steps of the first pass (one loop, or the tree's levels)
    full_chunk_bytes: int  # the chunk of a message large enough for whole ones
    slices: int  # slices one channel moves in all
    hops_intra: int  # hops on the critical path inside a node
    hops_inter: int  # hops across the network
    fill_bytes: int  # bytes carried before the pipeline is full


def comm_channels(sys: nccl.NcclSystem) -> int:
    """``comm->nChannels``: the fewer of the ring's and tree's search channels (``init.cc``), doubled by
    ``connect.cc ncclTopoPostset``, again on Hopper+ across nodes when the ring's per-channel NVLink
    bandwidth is over 45 GB/s with fewer than 16 channels (the duplicates share ``tuning.cc``'s bandwidth)."""
    nc = min(nccl.MAXCHANNELS, 2 * min(sys.ring.num_channels, sys.tree.num_channels))
    if sys.compute_capability >= 90 and sys.num_nodes > 1 and sys.ring.bw_intra_gbps > 45.0 and nc < 16:
        nc = min(nccl.MAXCHANNELS, 2 * nc)
    return max(1, nc)


def runtime_channels(sys: nccl.NcclSystem, algo: str, proto: str, size_bytes: int) -> tuple[int, float]:
    """(channels, fraction of the maximum threads) NCCL launches (``enqueue.cc topoGetAlgoInfo``)."""
    g = sys.graph(algo)
    if algo in ("nvls", "nvls_tree"):
        return g.num_channels, 1.0
    nc = comm_channels(sys)
    nt = MAX_THREADS[proto]
    if proto == "simple" and algo == "ring" and g.bw_intra_gbps * g.num_channels <= PCI_BW_GBPS:
        nt = 256
    nt0 = nt
    thr = THREAD_THRESHOLD[proto] * (sys.num_ranks if (algo == "ring" and proto == "ll") else 1)
    while size_bytes < nc * nt * thr and nc >= 2:
        nc -= 1
    if algo == "tree":
        return nc, 1.0  # "Tree now uses all threads always"
    while size_bytes < nc * nt * thr and nt % 128 == 0:
        nt //= 2
    return nc, nt / nt0


def _levels(sys: nccl.NcclSystem) -> tuple[int, int]:
    """(intra-node, inter-node) levels of NCCL's tree: a chain of ppn ranks, log2 of the nodes."""
    nn = sys.num_nodes
    return sys.ppn - 1, (math.ceil(math.log2(nn)) if nn > 1 else 0)


def plan(sys: nccl.NcclSystem, algo: str, proto: str, size_bytes: int) -> Execution:
    """The execution of ``size_bytes`` with (algo, proto) on ``sys`` (module docstring)."""
    n, nn = sys.num_ranks, sys.num_nodes
    nc, frac = runtime_channels(sys, algo, proto, size_bytes)
    per_channel = math.ceil(size_bytes / nc)
    step = STEP_DATA_BYTES[proto]
    run = {"num_channels": nc, "thread_fraction": frac}
    if algo == "ring":  # runRing: a loop of nRanks chunks, 2(n-1) steps each
        chunk = step * (ALLREDUCE_CHUNKSTEPS if proto == "simple" else 1)
        slices = ALLREDUCE_CHUNKSTEPS // ALLREDUCE_SLICESTEPS if proto == "simple" else 1
        loops = max(1, math.ceil(per_channel / (n * chunk)))
        inter = 2 * (nn - 1) if nn > 1 else 0
        return Execution(**run, chunk_bytes=min(chunk, math.ceil(per_channel / n)), syncs=2 * (n - 1) * slices,
                         full_chunk_bytes=chunk,
                         slices=2 * (n - 1) * slices * loops, hops_intra=2 * (n - 1) - inter, hops_inter=inter,
                         fill_bytes=0)
    if algo == "tree":  # runTreeSplit: each chunk up the levels then down, the chunks pipelined
        intra, inter = _levels(sys)
        chunk = step
        if proto == "ll128":  # enqueue.cc calcCollChunking: NCCL_ALGO_TREE with LL128 (log2i: floor)
            steps_ll128 = 1 + nccl.log2i(nn) + 0.1 * sys.ppn
            while size_bytes // (nc * chunk) < steps_ll128 * 64 / sys.ppn and chunk > 131072:
                chunk //= 2
            while size_bytes // (nc * chunk) < steps_ll128 * 16 / sys.ppn and chunk > 32768:
                chunk //= 2
        chunk = min(chunk, per_channel)
        return Execution(**run, chunk_bytes=chunk, syncs=2 * (intra + inter), full_chunk_bytes=step,
                         slices=max(1, math.ceil(per_channel / chunk)), hops_intra=2 * intra, hops_inter=2 * inter,
                         fill_bytes=max(0, 2 * inter - 1) * chunk)
    if algo == "nvls":  # runNvls: nHeads chunks per loop, reduced through the switch, broadcast back
        chunk = NVLS_CHUNK_BYTES
        for factor, cut in ((64, 65536), (8, 32768), (2, 16384)):
            if size_bytes < factor * nc * n * chunk and chunk > cut:
                chunk = cut
        return Execution(**run, chunk_bytes=chunk, syncs=0, full_chunk_bytes=NVLS_CHUNK_BYTES,
                         slices=2 * max(1, math.ceil(per_channel / (n * chunk))),
                         hops_intra=1, hops_inter=0, fill_bytes=2 * n * min(chunk, math.ceil(per_channel / n)))
    if algo == "nvls_tree":  # NVLS inside each node, the tree's levels between nodes
        _, inter = _levels(sys)
        chunk = NVLS_TREE_MAX_CHUNK_BYTES
        for factor, cut in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
            if size_bytes < factor * nc * sys.ppn * chunk and chunk > cut:
                chunk = cut
        return Execution(**run, chunk_bytes=chunk, syncs=2 * inter, full_chunk_bytes=NVLS_TREE_MAX_CHUNK_BYTES,
                         slices=max(1, math.ceil(per_channel / chunk)),
                         hops_intra=1, hops_inter=2 * inter,
                         fill_bytes=2 * inter * min(chunk, per_channel))
    raise AssertionError(algo)


def bandwidth_gbps(sys: nccl.NcclSystem, algo: str, proto: str, ex: Execution) -> float:
    """Algorithm bandwidth of the channels in use, each at most NCCL's per-channel figure (``tuning.cc``)."""
    full = nccl.bandwidth_gbps(sys, algo, proto)
    return full * min(1.0, ex.num_channels / sys.graph(algo).num_channels) * ex.thread_fraction


def step_overhead_us(sys: nccl.NcclSystem, proto: str) -> float:
    """µs per synchronised step of ``proto`` on ``sys``'s GPU generation."""
    return GENERATION_US.get((nccl.arch_index(sys.compute_capability), proto), STEP_OVERHEAD_US[proto])


def ll_round_trip_us(sys: nccl.NcclSystem) -> float:
    """µs per LL round trip on ``sys``'s GPU generation."""
    return GENERATION_US.get((nccl.arch_index(sys.compute_capability), "ll_round_trip"), LL_ROUND_TRIP_US)


def time_us(sys: nccl.NcclSystem, algo: str, proto: str, size_bytes: int) -> float:
    """The all-reduce's time in µs, executed as :func:`plan` says; inf when (algo, proto) is disabled."""
    if nccl.bandwidth_gbps(sys, algo, proto) <= 0:
        return math.inf
    ex = plan(sys, algo, proto, size_bytes)
    bw = bandwidth_gbps(sys, algo, proto, ex)
    lat_intra, lat_inter = nccl.hop_latency_us(sys, algo, proto)
    launch = nccl.BASE_LAT_US[algo][nccl.PROTOCOLS.index(proto)]
    per_channel_bw = bw / ex.num_channels
    transfer = size_bytes / (1000.0 * bw * nccl.tree_correction(sys, algo, proto, size_bytes))
    fill = ex.fill_bytes / (1000.0 * per_channel_bw)
    return (launch + ex.hops_intra * lat_intra + ex.hops_inter * lat_inter + sync_us(sys, algo, proto, ex)
            + transfer + ll_rounds_us(sys, algo, proto, size_bytes, ex) + fill)


def serial_steps(algo: str, ex: Execution) -> int:
    """The slices one channel moves one after the other: a ring's and NVLS's every slice, a tree's
    (and NVLSTree's) levels, then its pipelined chunks behind the first."""
    return ex.slices if algo in ("ring", "nvls") else ex.syncs + ex.slices - 1


def sync_us(sys: nccl.NcclSystem, algo: str, proto: str, ex: Execution) -> float:
    """The slices' synchronisations: each pays the step overhead for the share of a full slice it lacks
    (a chunk's slices are cut alike, so a slice's share of a full one is its chunk's)."""
    return serial_steps(algo, ex) * step_overhead_us(sys, proto) * (1.0 - min(1.0, ex.chunk_bytes / ex.full_chunk_bytes))


def ll_rounds_us(sys: nccl.NcclSystem, algo: str, proto: str, size_bytes: int, ex: Execution) -> float:
    """LL's round trips beyond the first of each step (``prims_ll.h``; module docstring)."""
    if proto != "ll":
        return 0.0
    per_round = MAX_THREADS["ll"] * ex.thread_fraction * 8
    rounds = wire_bytes_per_channel(sys, algo, size_bytes, ex.num_channels) / per_round
    return max(0.0, rounds - serial_steps(algo, ex)) * ll_round_trip_us(sys)


def wire_bytes_per_channel(sys: nccl.NcclSystem, algo: str, size_bytes: int, num_channels: int) -> float:
    """Bytes one channel of one rank sends: a ring 2(n-1)/n of its share, a tree its share up and down."""
    n = sys.num_ranks
    share = size_bytes / num_channels
    return share * 2 * (n - 1) / n if algo == "ring" else 2 * share
