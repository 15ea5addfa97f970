"""Compute-communication contention on one GPU, the prior :class:`~ddpsim.engine.config.Interference`:
an NCCL kernel takes SMs and HBM bandwidth from the backward kernels beside it, and the
backward's memory traffic slows the collective; this derives both from the preset's SM count
and HBM bandwidth and from what NCCL runs (v2.30.7), applied through ``Interference``
(``weighting="table"``); a calibration's or the scenario's interference replaces it. Per
all-reduce of ``S`` bytes: NCCL's algorithm, protocol and time ``t`` (:func:`ddpsim.network.nccl.choose`,
``enqueue.cc topoGetAlgoInfo``); one block per channel holds an SM (its threads and shared
memory, ``NCCL_LL128_SHMEM_SIZE``, leave no room for a GEMM block), ``s = nc / num_sms``, with
``nc`` twice the searched rings (``connect.cc ncclTopoPostset``) cut for small sizes by
``topoGetAlgoInfo``'s ``nBytes < nc * nt * threadThreshold`` (``tuning.cc``, ``comm.h``,
``device.h``), or ``nvlsChannels`` (``nvls.cc ncclNvlsTuning``); HBM bytes streamed
``(5(n-1)+1)/n x S`` on a ring/tree (``prims_simple.h``, ``all_reduce.h runRing``), ``2 S`` on
NVLS (``multimem.ld_reduce``/``st``), times the protocol's line overhead (LL x2, LL128 x128/120),
at rate ``h = bytes / t / hbm_bytes_per_s``. With ``phi`` the backward's memory-bound share (an
estimate the uncertainty pass varies) and ``m`` the HBM share its kernels ask::

    compute_slowdown(S) = (1 - phi) / (1 - s) + phi * max(1, m + h)
    comm_slowdown       = 1 + phi * (max(1, m + h_max) - 1)

The prior's ``compute_slowdown`` is the largest over sizes ``2^(k/4)`` B up to 4 GiB, and its
table gives each size its share ``(compute_slowdown(S) - 1) / (compute_slowdown - 1)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ddpsim.network import nccl
from ddpsim.network.interference import Interference
from ddpsim.network.nccl_exec import MAX_THREADS, THREAD_THRESHOLD

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


def runtime_channels(system: nccl.NcclSystem, algo: str, proto: str, size_bytes: int) -> int:
    """Thread blocks (= SMs) NCCL launches for one all-reduce (module docstring: one block per channel)."""
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
    """HBM bytes one GPU reads and writes for one all-reduce (module docstring: HBM bytes streamed)."""
    n = num_ranks
    base = 2.0 * size_bytes if algo in ("nvls", "nvls_tree") else (5.0 * (n - 1) + 1.0) / n * size_bytes
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
    """The device's SMs and HBM (from the validated topology), and the backward's memory-bound share
    (``phi``) and HBM efficiency (from the validated ``cost_model`` section)."""

    num_sms: int
    hbm_bytes_per_s: float
    memory_bound_fraction: float = MEMORY_BOUND_FRACTION
    memory_efficiency: float = MEMORY_EFFICIENCY


def collective_contention(system: nccl.NcclSystem, res: GpuResources, size_bytes: int, *,
                          algorithm: str | None = None, protocol: str | None = None) -> CollectiveContention:
    """The module docstring's derivation for one all-reduce of ``size_bytes``."""
    algo, proto, t_us = nccl.choose(system, size_bytes, algorithm=algorithm, protocol=protocol)
    if algo == "none" or size_bytes <= 0 or system.num_ranks < 2 or not math.isfinite(t_us) or t_us <= 0:
        return CollectiveContention(size_bytes=size_bytes, algorithm="none", protocol="none", channels=0,
                                    sm_share=0.0, hbm_share=0.0, compute_slowdown=1.0)
    nc = runtime_channels(system, algo, proto, size_bytes)
    s = min(nc / res.num_sms, 0.95)
    h = hbm_bytes(algo, proto, size_bytes, system.num_ranks) / (t_us * 1e-6) / res.hbm_bytes_per_s
    phi, m = res.memory_bound_fraction, res.memory_efficiency
    slow = (1.0 - phi) / (1.0 - s) + phi * max(1.0, m + h)
    return CollectiveContention(size_bytes=size_bytes, algorithm=algo, protocol=proto, channels=nc, sm_share=s,
                                hbm_share=h, compute_slowdown=slow)


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


def system_prior(system: nccl.NcclSystem, res: GpuResources, *, algorithm: str | None = None,
                 protocol: str | None = None) -> ContentionPrior | None:
    """The prior interference of one NCCL communicator on GPUs ``res`` (None: one rank)."""
    if system.num_ranks < 2:
        return None
    if algorithm == "hierarchical":
        algorithm = None  # its stages run NCCL's own choices; costed like them
    sizes = sorted({int(round(2.0 ** (k / GRID_PER_OCTAVE))) for k in range(GRID_PER_OCTAVE * GRID_MAX_LOG2 + 1)})
    rows = [collective_contention(system, res, s, algorithm=algorithm, protocol=protocol) for s in sizes]
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


def gpu_terms(comm: Any) -> bool:
    """The GPU cost terms (this prior among them) apply to the analytical NCCL model only."""
    from ddpsim.network.collective_cost import NcclCommModel

    return isinstance(comm, NcclCommModel)


def contention_prior(spec: Any, graph: Any, comm: Any) -> ContentionPrior | None:
    """The prior of a comm model on a topology under the cost model ``spec`` (its
    ``memory_bound_fraction`` and ``memory_efficiency``): None unless ``comm`` is the analytical
    NCCL model on GPUs whose ``sm_count`` the topology gives (a calibrated or gloo model has none)."""
    from ddpsim.network.topology import MEMORY_BANDWIDTH, SM_COUNT, rank_nodes

    if not gpu_terms(comm):
        return None
    devs = rank_nodes(graph)[:comm.num_ranks]
    sms = [graph.nodes[d].get(SM_COUNT) for d in devs]  # >= 1 where given (catalogue, YAML schema)
    if None in sms:
        return None
    hbm = float(min(graph.nodes[d][MEMORY_BANDWIDTH] for d in devs))
    res = GpuResources(num_sms=min(sms), hbm_bytes_per_s=hbm,
                       memory_bound_fraction=spec.memory_bound_fraction,
                       memory_efficiency=spec.memory_efficiency)
    return system_prior(comm.system, res, algorithm=comm.algorithm, protocol=comm.protocol)
