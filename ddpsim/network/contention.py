"""Compute-communication contention on one GPU: the prior :class:`~ddpsim.engine.config.Interference`.

Without a calibration, a GPU preset's backward and its all-reduces would otherwise share
nothing; in reality an NCCL kernel takes SMs and HBM bandwidth away from the backward
kernels running beside it, and the backward's memory traffic slows the collective. This
module derives that mutual slowdown from the preset's SM count and HBM bandwidth and from
what NCCL runs for each collective. Pure functions; the engine applies the result through
the ordinary ``Interference`` path (``weighting="table"``: a per-size share of
``compute_slowdown``). A calibration's measured interference, or ``simulation.interference``
in the scenario, replaces the prior.

Derivation, per all-reduce of ``S`` bytes (NCCL v2.30.7):

1. **Algorithm and protocol**: NCCL's own choice (:func:`ddpsim.network.nccl.choose`,
   ``enqueue.cc topoGetAlgoInfo``) and its time ``t`` on the searched graph.
2. **Blocks = SMs held for the whole collective**: one thread block per channel.
   Ring and tree run on ``comm->nChannels = min(MAXCHANNELS, 2 x searched channels)``
   (``src/graph/connect.cc ncclTopoPostset``: "Duplication should be complete now"),
   reduced for small sizes by ``enqueue.cc topoGetAlgoInfo``'s channel tuning: ``while
   (nBytes < nc * nt * threadThreshold) nc--`` with ``nt = maxThreads[algo][proto]``
   (``tuning.cc``: Simple 512, LL 512, LL128 640; ``device.h``) and ``threadThresholds``
   (``comm.h``: LL 8, LL128 8, Simple 64; ring LL x nRanks, ``tuning.cc``). NVLS and
   NVLSTree run on ``comm->nvlsChannels`` = 16 on sm90, 24/32 on sm100
   (``src/transport/nvls.cc ncclNvlsTuning``, ``NVLS_NCHANNELS_SM90``). An NCCL block uses
   512-640 threads and most of the SM's shared memory (``NCCL_LL128_SHMEM_SIZE``,
   ``ncclShmemScratchWarpSize``), so a GEMM block does not fit beside it: the SM share taken
   is ``s = nc / num_sms``.
3. **HBM streamed by the collective**, bytes per GPU per collective: a ring/tree all-reduce
   writes every received chunk into its FIFO (``(n-1)/n x S`` in each of the reduce-scatter
   and all-gather halves), reads it back (same), reads its own input in the reduce-scatter
   half (``(n-1)/n x S``) and writes the result (``S``, counted once): about
   ``(5(n-1)+1)/n x S`` (``src/device/prims_simple.h`` / ``all_reduce.h runRing``). NVLS
   reduces in the switch: each GPU's buffer is read once (``multimem.ld_reduce``) and
   written once (``multimem.st``): ``2 S``. Line overhead per protocol: LL sends a flag with
   every 8 data bytes (x2), LL128 120 of 128 bytes (x128/120), Simple x1. Rate:
   ``h = bytes / t / hbm_bytes_per_s``.
4. **Compute slowdown while the collective runs**: the backward's time splits into a
   compute-bound share ``1 - phi`` that loses ``s`` of the SMs (``1 / (1 - s)``) and a
   memory-bound share ``phi`` whose kernels ask ``m`` of the HBM bandwidth (``m`` =
   ``memory_efficiency``, 0.75, the retime assumption); with the collective's ``h`` beside
   it HBM is shared in proportion to demand, so those kernels slow by ``max(1, m + h)``::

       compute_slowdown(S) = (1 - phi) / (1 - s) + phi * max(1, m + h)

   ``phi`` (``memory_bound_fraction``, default 0.5) is the one input not taken from a source:
   the uncertainty pass varies it.
5. **Communication slowdown while compute runs**: during the memory-bound share the
   collective gets ``h / (m + h)`` of what it asks, ``comm_slowdown = 1 + phi * (max(1, m +
   h_max) - 1)`` with ``h_max`` the largest ``h`` over sizes (the bandwidth-bound buckets).

The prior's ``compute_slowdown`` is the largest ``compute_slowdown(S)`` over sizes
``2^(k/4)`` bytes up to 4 GiB, and its table gives each size its share
``(compute_slowdown(S) - 1) / (compute_slowdown - 1)``: a 64 KiB LL all-reduce on two
channels barely slows the backward, a 25 MiB one takes its full share.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from ddpsim.network import nccl
from ddpsim.errors import InputError
from ddpsim.network.interference import Interference

#: device.h v2.30.7: NCCL_SIMPLE_MAX_NTHREADS, NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS
MAX_THREADS = {"simple": 512, "ll": 512, "ll128": 640}
#: comm.h: NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD
THREAD_THRESHOLD = {"ll": 8, "ll128": 8, "simple": 64}
#: nvls.cc: NVLS_NCHANNELS_SM90, NVLS_NCHANNELS_SM100 (several nodes), NVLS_NCHANNELS_SM100_NVL
NVLS_CHANNELS_SM90 = 16
NVLS_CHANNELS_SM100 = 32
NVLS_CHANNELS_SM100_NVL = 24
#: bytes on the wire per data byte: LL's 8-byte flag per 8 bytes, LL128's 8 of 128 bytes
LINE_OVERHEAD = {"ll": 2.0, "ll128": 128.0 / 120.0, "simple": 1.0}
#: retime's RooflineAssumptions.memory_efficiency: the HBM share a memory-bound kernel reaches
MEMORY_EFFICIENCY = 0.75
#: share of backward time in memory-bound kernels (prior; varied by the uncertainty pass)
MEMORY_BOUND_FRACTION = 0.5
#: sizes the prior's table is built on: 2^(k/4) bytes, k = 0 .. 4*32
GRID_PER_OCTAVE = 4
GRID_MAX_LOG2 = 32
#: the all-reduce the explanation describes: DDP's default bucket_cap_mb (25 MiB)
REFERENCE_BYTES = 25 * 2 ** 20


def check_fraction(v: Any, key: str) -> None:
    """``v`` must be a number in [0, 1]; else one line naming ``key``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1:
        raise InputError(f"{key}: {v!r} is not accepted; expected a number in [0, 1]")


def runtime_channels(system: nccl.NcclSystem, algo: str, proto: str, size_bytes: int) -> int:
    """Thread blocks (= SMs) NCCL launches for one all-reduce (module docstring, step 2)."""
    if algo in ("nvls", "nvls_tree"):
        cc = system.compute_capability
        if cc >= 100:
            return NVLS_CHANNELS_SM100 if system.num_nodes > 1 else NVLS_CHANNELS_SM100_NVL
        return NVLS_CHANNELS_SM90
    nc = min(nccl.MAXCHANNELS, 2 * system.ring.num_channels)
    nt = MAX_THREADS[proto]
    thr = THREAD_THRESHOLD[proto] * (system.num_ranks if (algo == "ring" and proto == "ll") else 1)
    while size_bytes < nc * nt * thr and nc >= 2:
        nc -= 1
    return max(1, nc)


def hbm_bytes(algo: str, proto: str, size_bytes: int, num_ranks: int) -> float:
    """HBM bytes one GPU reads and writes for one all-reduce (module docstring, step 3)."""
    n = num_ranks
    if algo in ("nvls", "nvls_tree"):
        base = 2.0 * size_bytes
    else:
        base = (5.0 * (n - 1) + 1.0) / n * size_bytes
    return base * LINE_OVERHEAD.get(proto, 1.0)


@dataclass(frozen=True, kw_only=True)
class CollectiveContention:
    """What one all-reduce takes from the compute beside it."""

    size_bytes: int
    algorithm: str
    protocol: str
    channels: int
    sm_share: float
    hbm_share: float
    compute_slowdown: float


@dataclass(frozen=True, kw_only=True)
class GpuResources:
    """The device's SMs and HBM, and the backward's memory-bound share (``phi``)."""

    num_sms: int
    hbm_bytes_per_s: float
    memory_bound_fraction: float = MEMORY_BOUND_FRACTION
    memory_efficiency: float = MEMORY_EFFICIENCY

    def __post_init__(self) -> None:
        if isinstance(self.num_sms, bool) or not isinstance(self.num_sms, int) or self.num_sms < 1:
            raise InputError(f"sm_count: {self.num_sms!r} is not accepted; expected an integer >= 1")
        if not (isinstance(self.hbm_bytes_per_s, (int, float)) and self.hbm_bytes_per_s > 0):
            raise InputError(f"memory_bandwidth_bytes_per_s: {self.hbm_bytes_per_s!r} is not accepted; expected > 0")
        for k in ("memory_bound_fraction", "memory_efficiency"):
            check_fraction(getattr(self, k), f"cost_model.{k}")


@functools.lru_cache(maxsize=4096)
def nccl_choice(system: nccl.NcclSystem, size_bytes: int, algorithm: str | None,
                protocol: str | None) -> tuple[str, str, float, int]:
    """NCCL's (algorithm, protocol, time µs, channels) for one all-reduce: the part of the prior no
    GPU resource changes, kept per communicator and size (the uncertainty band re-derives the
    prior with other ``memory_bound_fraction`` values on the same communicators)."""
    algo, proto, t_us = nccl.choose(system, size_bytes, algorithm=algorithm, protocol=protocol)
    if algo == "none" or size_bytes <= 0:
        return algo, proto, t_us, 0
    return algo, proto, t_us, runtime_channels(system, algo, proto, size_bytes)


def collective_contention(system: nccl.NcclSystem, res: GpuResources, size_bytes: int, *,
                          algorithm: str | None = None, protocol: str | None = None) -> CollectiveContention:
    """Steps 1-4 of the module docstring for one all-reduce of ``size_bytes``."""
    algo, proto, t_us, nc = nccl_choice(system, size_bytes, algorithm, protocol)
    if algo == "none" or size_bytes <= 0 or system.num_ranks < 2 or not math.isfinite(t_us) or t_us <= 0:
        return CollectiveContention(size_bytes=size_bytes, algorithm="none", protocol="none", channels=0,
                                    sm_share=0.0, hbm_share=0.0, compute_slowdown=1.0)
    s = min(nc / res.num_sms, 0.95)
    h = hbm_bytes(algo, proto, size_bytes, system.num_ranks) / (t_us * 1e-6) / res.hbm_bytes_per_s
    phi, m = res.memory_bound_fraction, res.memory_efficiency
    slow = (1.0 - phi) / (1.0 - s) + phi * max(1.0, m + h)
    return CollectiveContention(size_bytes=size_bytes, algorithm=algo, protocol=proto, channels=nc, sm_share=s,
                                hbm_share=h, compute_slowdown=slow)


def grid_sizes() -> list[int]:
    """The sizes the prior's table is built on (bytes, increasing, distinct)."""
    out: list[int] = []
    for k in range(GRID_PER_OCTAVE * GRID_MAX_LOG2 + 1):
        s = int(round(2.0 ** (k / GRID_PER_OCTAVE)))
        if not out or s > out[-1]:
            out.append(s)
    return out


@dataclass(frozen=True, kw_only=True)
class ContentionPrior:
    """The derived :class:`Interference` and what explains it."""

    interference: Interference
    resources: GpuResources
    largest: CollectiveContention    # the size at which compute is slowed most
    reference: CollectiveContention  # a REFERENCE_BYTES all-reduce (DDP's default bucket_cap_mb)

    def explain(self) -> str:
        c, r, i = self.reference, self.resources, self.interference
        return (f"compute slowed {c.compute_slowdown:.2f}x while NCCL runs a {c.size_bytes / 2 ** 20:g} MiB all-reduce: "
                f"derived from {c.channels} of {r.num_sms} SMs ({c.algorithm}/{c.protocol}, one block per channel) and "
                f"{100 * c.hbm_share:.0f} % of HBM ({r.hbm_bytes_per_s / 1e12:.2f} TB/s), {100 * r.memory_bound_fraction:.0f} % "
                f"of backward memory-bound; at most {i.compute_slowdown:.2f}x ({self.largest.algorithm}/{self.largest.protocol}"
                f" on {self.largest.channels} channels), less for small all-reduces on fewer channels; NCCL slowed "
                f"{i.comm_slowdown:.2f}x by the backward's HBM traffic")

    def as_dict(self) -> dict[str, Any]:
        def row(c: CollectiveContention) -> dict[str, Any]:
            return {"size_bytes": c.size_bytes, "algorithm": c.algorithm, "protocol": c.protocol, "channels": c.channels,
                    "sm_share": c.sm_share, "hbm_share": c.hbm_share, "compute_slowdown": c.compute_slowdown}

        return {"compute_slowdown": self.interference.compute_slowdown, "comm_slowdown": self.interference.comm_slowdown,
                "num_sms": self.resources.num_sms, "hbm_bytes_per_s": self.resources.hbm_bytes_per_s,
                "memory_bound_fraction": self.resources.memory_bound_fraction,
                "memory_efficiency": self.resources.memory_efficiency,
                "largest": row(self.largest), "reference": row(self.reference), "explanation": self.explain()}


def contention_prior(system: nccl.NcclSystem, res: GpuResources, *, algorithm: str | None = None,
                     protocol: str | None = None) -> ContentionPrior | None:
    """The prior interference of one NCCL communicator on GPUs ``res`` (None: one rank)."""
    if system.num_ranks < 2:
        return None
    if algorithm == "hierarchical":
        algorithm = None  # its stages run NCCL's own choices; costed like them
    rows = [collective_contention(system, res, s, algorithm=algorithm, protocol=protocol) for s in grid_sizes()]
    top = max(rows, key=lambda c: (c.compute_slowdown, c.size_bytes))
    if top.compute_slowdown <= 1.0:
        return None
    h_max = max(c.hbm_share for c in rows)
    phi, m = res.memory_bound_fraction, res.memory_efficiency
    comm_slow = 1.0 + phi * (max(1.0, m + h_max) - 1.0)
    span = top.compute_slowdown - 1.0
    weights = tuple((c.size_bytes, round((c.compute_slowdown - 1.0) / span, 6)) for c in rows)
    inter = Interference(compute_slowdown=round(top.compute_slowdown, 6), comm_slowdown=round(comm_slow, 6),
                         weighting="table", size_weights=weights)
    ref = collective_contention(system, res, REFERENCE_BYTES, algorithm=algorithm, protocol=protocol)
    return ContentionPrior(interference=inter, resources=res, largest=top, reference=ref)


def prior_for(graph: Any, comm: Any, *, memory_bound_fraction: float = MEMORY_BOUND_FRACTION,
              memory_efficiency: float = MEMORY_EFFICIENCY) -> ContentionPrior | None:
    """The prior of a comm model on a topology: None unless ``comm`` is the analytical NCCL
    model on GPUs whose ``sm_count`` the topology gives (a calibrated or gloo model has none)."""
    from ddpsim.network.collective_cost import NcclCommModel
    from ddpsim.network.graph_search import place_ranks
    from ddpsim.network.topology import MEMORY_BANDWIDTH, SM_COUNT

    if not isinstance(comm, NcclCommModel):
        return None
    placement = place_ranks(graph, comm.num_ranks)
    devs = [d for h in placement.hosts for d in h]
    sms = [graph.nodes[d].get(SM_COUNT) for d in devs]
    bws = [graph.nodes[d].get(MEMORY_BANDWIDTH) for d in devs]
    if any(not isinstance(v, int) or v < 1 for v in sms) or any(not isinstance(v, (int, float)) or v <= 0 for v in bws):
        return None
    res = GpuResources(num_sms=min(sms), hbm_bytes_per_s=float(min(bws)), memory_bound_fraction=memory_bound_fraction,
                       memory_efficiency=memory_efficiency)
    return contention_prior(comm.system, res, algorithm=comm.algorithm, protocol=comm.protocol)
