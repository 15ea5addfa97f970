"""Collective cost models over a topology graph. :func:`build_comm_model` binds a topology
(:mod:`ddpsim.network.topology`) and a number of ranks to a
:class:`~ddpsim.network.comm_model.CommModel`. NCCL (:class:`NcclCommModel`): the channels of NCCL's
graph search (``src/graph/search.cc``, :mod:`ddpsim.network.graph_search`), NCCL's choice of algorithm
and protocol (``src/graph/tuning.cc`` v2.30.7, :mod:`ddpsim.network.nccl`; NVLS needs an NVLS switch and
compute capability >= 90, NVLSTree across hosts) and the all-reduce's time from that choice's execution
(:mod:`ddpsim.network.nccl_exec`); broadcasts and ``hierarchical`` stages keep NCCL's estimate. gloo
(:class:`GlooCommModel`): gloo's ring (:mod:`ddpsim.network.gloo`) over the ring hop's summed latency
and shared bottleneck bandwidth, and the CPU's reduction bandwidth. ``calibration=``:
:class:`CalibratedCommModel` (:mod:`ddpsim.calibration.loader`), measured curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import networkx as nx

from ddpsim.errors import InputError, require
from ddpsim.network import gloo, nccl, nccl_exec
from ddpsim.network.comm_model import CollectiveEstimate, EstimatingCommModel, make_estimate
from ddpsim.network.graph_search import search_graphs
from ddpsim.network.routing import Placement, Router, place_ranks
from ddpsim.network.topology import BANDWIDTH, REDUCE_BANDWIDTH, gc_paused

def _check_size(size_bytes: int) -> None:
    ok = isinstance(size_bytes, int) and not isinstance(size_bytes, bool) and size_bytes >= 0
    require(ok, "size_bytes", size_bytes, "an integer >= 0")


# ---- NCCL ----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class NcclCommModel(EstimatingCommModel):
    """NCCL on a topology (module docstring); ``algorithm`` / ``protocol`` force a choice as
    ``NCCL_ALGO`` / ``NCCL_PROTO`` do (``hierarchical``, ddpsim's own: intra-node reduce-scatter,
    inter-node all-reduce, intra-node all-gather)."""

    system: nccl.NcclSystem
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
        return make_estimate(size_bytes, nccl_exec.time_us(self.system, a, p, size_bytes) * 1e-6, n, a, p)

    def _hierarchical(self, size: int) -> CollectiveEstimate:
        ppn, nn = self.system.ppn, self.system.num_nodes
        picks = []  # (algorithm, protocol, time_us) of each stage
        if self.intra_system is not None and ppn > 1:
            picks += [self._pick(self.intra_system, size, coll, "ring") for coll in ("reducescatter", "allgather")]
        if self.inter_system is not None and nn > 1:
            picks.append(self._pick(self.inter_system, max(1, size // ppn), "allreduce", None))
        proto = max((t, p) for _, p, t in picks)[1] if picks else "none"  # the longest stage's
        return make_estimate(size, sum(t for _, _, t in picks) * 1e-6, self.num_ranks, "hierarchical", proto)

    def estimate_broadcast(self, size_bytes: int) -> CollectiveEstimate:
        _check_size(size_bytes)
        n = self.num_ranks
        if n == 1 or size_bytes == 0:
            return make_estimate(size_bytes, 0.0, n, "none", "none", coll="broadcast")
        a, p, t = nccl.choose(self.system, size_bytes, "broadcast", protocol=self.protocol)
        if a == "none":
            a, p, t = nccl.choose(self.system, size_bytes, "broadcast")
        return make_estimate(size_bytes, t * 1e-6, n, a, p, coll="broadcast")

    def describe(self) -> dict[str, Any]:
        s, ring, nv = self.system, self.system.ring, self.system.nvls
        return {
            "model": "nccl", "nccl_version": nccl.NCCL_VERSION, "topology": self.topology_name,
            "num_ranks": s.num_ranks, "num_nodes": s.num_nodes, "compute_capability": s.compute_capability,
            "ring_channels": ring.num_channels, "ring_bw_per_channel_gbps": ring.bw_intra_gbps,
            "tree_channels": s.tree.num_channels, "tree_bw_intra_gbps": s.tree.bw_intra_gbps,
            "tree_bw_inter_gbps": s.tree.bw_inter_gbps, "tree_pattern": "tree" if s.tree.simple_tree else "balanced_tree",
            "ring_bus_bw_gbps": ring.num_channels * ring.bw_intra_gbps, "ring_bottleneck_link": ring.bottleneck,
            "nvls_channels": nv.num_channels if nv else 0,
            "nvls_bw_per_channel_gbps": nv.bw_intra_gbps if nv else 0.0,
            "nvls_bw_inter_gbps": nv.bw_inter_gbps if nv else 0.0,
            "nvlink_intra": ring.nvlink_intra, "ll128_enabled": s.ll128_enabled,
            "forced_algorithm": self.algorithm, "forced_protocol": self.protocol,
        }


def _nccl_model(graph: nx.Graph, placement: Placement, algorithm: str | None, protocol: str | None) -> NcclCommModel:
    system = search_graphs(graph, placement)
    intra = inter = None
    if algorithm == "hierarchical":
        if placement.ppn > 1:
            intra = search_graphs(graph, Placement(hosts=(placement.hosts[0],)))
        if placement.num_nodes > 1:
            # one ring per local rank, all at once: each gets 1/ppn of the multi-node graph
            total = system.ring.num_channels * system.ring.bw_intra_gbps
            ch = max(1, system.ring.num_channels // placement.ppn)
            g1 = nccl.NcclGraph(num_channels=ch, bw_intra_gbps=total / placement.ppn / ch,
                                bw_inter_gbps=total / placement.ppn / ch, nvlink_intra=False)
            inter = nccl.NcclSystem(num_ranks=placement.num_nodes, num_nodes=placement.num_nodes,
                                    compute_capability=system.compute_capability,
                                    cpu_vendor=system.cpu_vendor, ring=g1, tree=g1, nvls=None,
                                    ll128_enabled=system.ll128_enabled)
    return NcclCommModel(system=system, intra_system=intra, inter_system=inter,
                         topology_name=str(graph.graph.get("name")), algorithm=algorithm, protocol=protocol)


# ---- gloo ----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class GlooCommModel(EstimatingCommModel):
    """gloo's ring all-reduce over TCP (see :mod:`ddpsim.network.gloo`)."""

    num_ranks: int
    hop_latency_s: float
    hop_bandwidth_bytes_per_s: float
    reduce_bandwidth_bytes_per_s: float
    topology_name: str = ""
    backend: str = "gloo"

    def estimate_allreduce(self, size_bytes: int) -> CollectiveEstimate:
        _check_size(size_bytes)
        t = gloo.ring_allreduce_s(size_bytes, self.num_ranks, hop_latency_s=self.hop_latency_s,
                                  hop_bandwidth_bytes_per_s=self.hop_bandwidth_bytes_per_s,
                                  reduce_bandwidth_bytes_per_s=self.reduce_bandwidth_bytes_per_s)
        algo = "ring" if t > 0 else "none"
        return make_estimate(size_bytes, t, self.num_ranks, algo, "tcp" if t > 0 else "none")

    def estimate_broadcast(self, size_bytes: int) -> CollectiveEstimate:
        _check_size(size_bytes)
        t = gloo.broadcast_s(size_bytes, self.num_ranks, hop_latency_s=self.hop_latency_s,
                             hop_bandwidth_bytes_per_s=self.hop_bandwidth_bytes_per_s)
        return make_estimate(size_bytes, t, self.num_ranks, "tree" if t > 0 else "none",
                             "tcp" if t > 0 else "none", coll="broadcast")

    def describe(self) -> dict[str, Any]:
        return {"model": "gloo-ring", "topology": self.topology_name, "num_ranks": self.num_ranks,
                "hop_latency_s": self.hop_latency_s, "hop_bandwidth_bytes_per_s": self.hop_bandwidth_bytes_per_s,
                "reduce_bandwidth_bytes_per_s": self.reduce_bandwidth_bytes_per_s,
                "segment_bytes_max": gloo.K_MAX_SEGMENT_BYTES}


def _gloo_model(graph: nx.Graph, placement: Placement, num_ranks: int) -> GlooCommModel:
    devs = [d for h in placement.hosts for d in h]
    router = Router(graph)
    if len(devs) == 1:
        lat, bw = 0.0, math.inf
    else:
        hops = list(zip(devs, devs[1:] + devs[:1]))
        loads: dict[tuple, float] = {}
        for a, b in hops:
            router.add_load(loads, a, b)
        bw = min(graph.edges[e][BANDWIDTH] / load for e, load in loads.items())  # every hop at once: the ring's rate
        lat = max(router.latency(a, b) for a, b in hops)
    reduce_bw = min(graph.nodes[d].get(REDUCE_BANDWIDTH, 4e9) for d in devs)
    return GlooCommModel(num_ranks=num_ranks, hop_latency_s=lat, hop_bandwidth_bytes_per_s=bw,
                         reduce_bandwidth_bytes_per_s=reduce_bw, topology_name=str(graph.graph.get("name")))


# ---- entry point -----------------------------------------------------------------------

def build_comm_model(graph: nx.Graph, num_ranks: int, *, calibration=None, algorithm: str | None = None,
                     protocol: str | None = None):
    """The :class:`~ddpsim.network.comm_model.CommModel` of ``num_ranks`` ranks on the first devices of
    ``graph`` in rank order, ``algorithm`` / ``protocol`` forced (None: NCCL's choice); a
    ``calibration``'s measured curves over it (its ``comm_model(base)``: the layer above)."""
    backend = graph.graph.get("backend")
    for key, value, accepted in (("algorithm", algorithm, nccl.FORCEABLE_ALGORITHMS),
                                 ("protocol", protocol, nccl.PROTOCOLS)):
        require(value is None or value in accepted, key, value, f"one of {', '.join(accepted)}")
    if backend == "gloo" and (algorithm not in (None, "ring") or protocol is not None):
        raise InputError(f"algorithm/protocol: {algorithm or protocol!r} is not accepted with backend gloo; "
                         "expected none (gloo always runs its ring)")
    # a sweep or explore builds each point's model once (pipeline.inputs keeps it per graph)
    with gc_paused():  # a large cluster's placement and searches make many small objects that live on
        placement = place_ranks(graph, num_ranks)  # validates num_ranks
        model: Any = (_gloo_model(graph, placement, num_ranks) if backend == "gloo"
                      else _nccl_model(graph, placement, algorithm, protocol))
    if calibration is not None:
        model = calibration.comm_model(model)  # measured curves over this model (ddpsim.calibration.loader, a layer above)
    return model
