"""Cluster topologies as plain networkx graphs. A topology is an undirected :class:`networkx.Graph`: its
nodes are devices (a GPU or a CPU rank), switches (NVSwitch, PCIe switch, host bridge, leaf, spine,
Ethernet switch) and NICs, its edges full-duplex links carrying their **usable bandwidth per
direction**, as NCCL's topology code models GPU links (``src/graph/topo.h``/``topo.cc`` v2.30.7: NVLink
per compute capability, PCIe x16 per generation, NIC ``mbps/8000``) and as TCP delivers it for CPU
links. The presets are the systems of the hardware catalogue (``catalogue.yaml``, each figure with its
datasheet or user guide) plus ``cpu-gloo`` (:class:`CpuGlooOptions`). An NVSwitch box's switch chips are
one ``nvswitch`` node whose edge to a GPU bundles its NVLinks; a GPU reaches its NIC through a PCIe
switch (GPUDirect RDMA, NCCL path PIX); hosts meet on an InfiniBand leaf/spine fabric, rail-optimised or
a two-level fat tree, leaf uplinks = downlinks / ``oversubscription`` spread over the spines (ECMP);
cpu-gloo ranks talk through TCP loopback inside a host and one Ethernet NIC per host. Attribute names
and meanings: :mod:`ddpsim.network.graph_attrs`.
"""

from __future__ import annotations

import collections
import math
from os.path import exists
from pathlib import Path
from typing import Any

import networkx as nx

from ddpsim.errors import InputError, shorten
from ddpsim.hardware.catalogue import Catalogue, bundled, scaled
from ddpsim.hardware.schema import Gpu, System
from ddpsim.io import read_yaml
from ddpsim.network.comm_model import GBPS
from ddpsim.network.graph_attrs import (BANDWIDTH, COMPUTE_CAPABILITY, DEVICE_KINDS, DEVICE_MODEL, HOST, KIND, LATENCY,
                                        LINK_TYPE, LOCAL_RANK, MEMORY_BANDWIDTH, NUM_LINKS, NVLS, RAIL,
                                        REDUCE_BANDWIDTH, SM_COUNT)
from ddpsim.network.graph_build import Builder, gc_paused, new_graph
from ddpsim.network.topology_check import validate_topology
from ddpsim.network.topology_schema import (LINK_TYPES, CpuGlooOptions, DgxOptions, FabricOptions,
                                            GpuOptions, NodeDoc, PcieOptions, TopologyDoc)
from ddpsim.schema import Schema, validate
from ddpsim.units import MAX_NODES


# --- NCCL's figures for the links the presets build (topo.h/topo.cc/tuning.cc, NVIDIA documents) ---
#: NCCL topo.h per-NVLink bandwidth (GB/s, usable per direction) by compute capability, as
#: ``ncclTopoNVLinkBw`` picks it (v2.30.7): SM60 18.0, SM70 20.0, SM80 20.0, SM86 12.0,
#: SM90 20.6 (nccl#1189: 18 links ``NVL[370.8]``), SM100 40.1. ``nvlinks_per_gpu=8``: A800 (nccl#412).
NVLINK_BW_GBPS = {60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 90: 20.6, 100: 40.1}
#: NCCL topo.cc PCIe x16 usable estimate per generation (GB/s): width*speed/80 with
#: kvDictPciGen: Gen3 12, Gen4 24, Gen5 48, Gen6 96.
PCIE_X16_GBPS = {3: 12.0, 4: 24.0, 5: 48.0, 6: 96.0}
#: NIC bandwidth NCCL models = mbps/8000 GB/s: EDR 100 Gb/s -> 12.5, HDR 200 -> 25.0, NDR 400 -> 50.0.
IB_LATENCY_S = 0.6e-6  # ConnectX-6 / HDR switch "sub-600ns latency" (NVIDIA ConnectX-6 / Quantum HDR datasheets)
NVLINK_LATENCY_S = 0.6e-6  # NCCL hwLat NVLINK Ring LL (tuning.cc v2.30.7), per hop
PCIE_LATENCY_S = 1.0e-6  # NCCL hwLat PCI Ring LL (tuning.cc v2.30.7), per hop


def gpu_link_bw_gbps(gpu: Gpu) -> float:
    """One GPU-to-GPU link's usable GB/s per direction: NCCL's per-NVLink figure (``ncclTopoNVLinkBw``,
    topo.h v2.30.7); an xGMI link the catalogue's ``link_gbps`` (RCCL's ``src/graph/topo.h``,
    ``rome_models.cc`` unfollowed: docs/MODEL.md)."""
    nvl, cc = gpu.nvlink, gpu.compute_capability
    if nvl is not None and nvl.fabric == "infinity-fabric":
        return float(nvl.link_gbps)
    key = 100 if cc >= 100 else 90 if cc >= 90 else 86 if cc == 86 else 80 if cc >= 80 else 70 if cc >= 70 else 60
    return NVLINK_BW_GBPS[key]


def presets(catalogue: Catalogue | None = None) -> tuple[str, ...]:
    """The preset names: the catalogue's systems, then ``cpu-gloo``."""
    return (*(bundled() if catalogue is None else catalogue).systems, "cpu-gloo")


def _options(model: type[Schema], preset: str, options: dict[str, Any]) -> Any:
    """``options`` validated as ``model`` (None: the default)."""
    return validate(model, {k: v for k, v in options.items() if v is not None}, f"topology {preset}")


def _add_link(g: nx.Graph | Builder, u: str, v: str, bw_bytes_per_s: float, latency_s: float, link_type: str,
              **extra: Any) -> None:
    g.add_edge(u, v, **{BANDWIDTH: float(bw_bytes_per_s), LATENCY: float(latency_s), LINK_TYPE: link_type}, **extra)


def _add_fabric(g: Builder, nics: list[list[str]], nic_gbit: float, o: FabricOptions, leaf_radix: int) -> None:
    """Connect ``nics[host][rail]`` (several hosts) through a rail-optimised or fat-tree leaf/spine fabric
    (``leaf_radix``: the system's switch radix unless ``o`` gives one)."""
    num_hosts, nic_bw = len(nics), nic_gbit / 8.0 * GBPS
    if num_hosts < 2:
        return
    # a non-blocking leaf: half its ports face down
    down_ports = max(1, (leaf_radix if o.leaf_radix is None else o.leaf_radix) // 2)
    # rail-optimised: a leaf per rail and group of hosts; fat tree: a leaf per group, every rail
    rail_sets = [[r] for r in range(len(nics[0]))] if o.fabric == "rail" else [list(range(len(nics[0])))]
    hosts_per_leaf = max(1, down_ports // len(rail_sets[0]))
    leaves: list[tuple[str, float]] = []  # (leaf name, downlink bandwidth it serves)
    for rails in rail_sets:
        for grp in range(math.ceil(num_hosts / hosts_per_leaf)):
            leaf = f"leaf-r{rails[0]}-{grp}" if o.fabric == "rail" else f"leaf-{grp}"
            g.add_node(leaf, **{KIND: "leaf", HOST: -1})
            members = range(grp * hosts_per_leaf, min(num_hosts, (grp + 1) * hosts_per_leaf))
            for h in members:
                for r in rails:
                    _add_link(g, nics[h][r], leaf, nic_bw, IB_LATENCY_S, "net")
            leaves.append((leaf, nic_bw * len(rails) * len(members)))
    if len(leaves) > 1:
        for s in range(o.num_spines):
            g.add_node(f"spine-{s}", **{KIND: "spine", HOST: -1})
        for leaf, down_bw in leaves:
            for s in range(o.num_spines):
                _add_link(g, leaf, f"spine-{s}", down_bw / o.oversubscription / o.num_spines, IB_LATENCY_S, "net")


def _nvlink_system(name: str, system: System, gpu: Gpu, num_nodes: int, options: dict[str, Any]) -> nx.Graph:
    """An NVSwitch box (one ``nvswitch`` node per host) or a direct NVLink mesh; a system of compute
    trays (GB200 NVL72) is ``num_nodes`` racks, each tray a host, the rack's trays sharing one
    ``nvswitch`` node of ``host`` -1 (the NVLink domain spans hosts: NCCL's multi-node NVLink)."""
    mesh = system.interconnect == "nvlink-mesh"
    o = _options(GpuOptions if mesh else DgxOptions, name, options)
    gpn = system.gpus_per_node if o.gpus_per_node is None else o.gpus_per_node
    if mesh and gpn > system.gpus_per_node:
        raise InputError(f"topology {name}: gpus_per_node: {gpn} is not accepted; expected at most "
                         f"{system.gpus_per_node} (the GPUs of its NVLink mesh)")
    nvlinks = gpu.nvlink.links if mesh or o.nvlinks_per_gpu is None else o.nvlinks_per_gpu
    nic_gbit = float(system.nic.gbit if o.nic_gbit is None else o.nic_gbit)
    pcie_gen = system.pcie.gen if o.pcie_gen is None else o.pcie_gen
    link_bw = gpu_link_bw_gbps(gpu) * GBPS
    nvlink_bw = nvlinks * link_bw
    per_host = gpn if system.gpus_per_tray is None else system.gpus_per_tray
    if gpn % per_host:
        raise InputError(f"topology {name}: gpus_per_node: {gpn} is not accepted; expected a multiple of "
                         f"{per_host} (the GPUs of a compute tray)")
    hosts_per_node = gpn // per_host
    xgmi = gpu.nvlink is not None and gpu.nvlink.fabric == "infinity-fabric"
    links = "Infinity Fabric mesh, {} Infinity Fabric links" if xgmi else "NVLink mesh, {} NVLinks"
    fabric = (f"{links.format(nvlinks)}/GPU x {link_bw / GBPS:g} GB/s" if mesh
              else f"{nvlinks} NVLinks/GPU ({nvlink_bw / GBPS:.1f} GB/s)")
    trays = "" if system.gpus_per_tray is None else f" ({hosts_per_node} trays of {per_host})"
    # NIC j of a PCIe switch comes with the switch's GPU nearest to it (as _add_host adds them)
    per_sw, nics_per_sw = system.pcie.gpus_per_switch, system.pcie.nics_per_switch
    nics_per_host = sum(j * per_sw // nics_per_sw == i % per_sw for i in range(per_host)
                        for j in range(nics_per_sw))
    g = Builder(name=name, backend="nccl", num_nodes=num_nodes, cpu_vendor=system.cpu.vendor,
                 description=f"{num_nodes}x {name}: {gpn}x {gpu.model}{trays}, {fabric}, "
                               f"{nics_per_host * hosts_per_node} NICs x {nic_gbit:g} Gb/s")
    if system.gpus_per_tray is not None:
        g.graph["gpus_per_tray"] = per_host
    nics: list[list[str]] = []
    for node in range(num_nodes):
        for t in range(hosts_per_node):
            h = node * hosts_per_node + t
            nvs = f"n{h}/nvswitch" if system.gpus_per_tray is None else f"rack{node}/nvswitch"

            def add(h: int = h, nvs: str = nvs) -> list[str]:
                if not mesh and nvs not in g:
                    g.add_node(nvs, **{KIND: "nvswitch", HOST: h if system.gpus_per_tray is None else -1,
                                       NVLS: system.nvls})
                host_nics = _add_host(g, system, gpu, h, per_host, None if mesh else (nvs, nvlink_bw, nvlinks),
                                      multi_host=num_nodes * hosts_per_node > 1, pcie_gen=pcie_gen,
                                      per_sw=per_sw)
                for a, b, links in system.nvlink_edges or ():
                    if max(a, b) < per_host:
                        _add_link(g, f"n{h}/gpu{a}", f"n{h}/gpu{b}", links * link_bw, NVLINK_LATENCY_S, "nvlink",
                                  **{NUM_LINKS: links})
                return host_nics
            nics.append(g.host(h, add))
    _add_fabric(g, nics, nic_gbit, o, system.switch_radix)
    return g.to_graph()


def _add_host(g: Builder, system: System, gpu: Gpu, h: int, gpus: int, nvswitch: tuple[str, float, int] | None, *,
              multi_host: bool, pcie_gen: int, per_sw: int) -> list[str]:
    """Host ``h``: its host bridge, GPUs (linked to ``nvswitch``: its name, the GPU's NVLink bandwidth
    and link count; None: PCIe only), ``per_sw`` of them under each PCIe switch, and (``multi_host``)
    NICs; returns the NICs."""
    nics_per_sw = system.pcie.nics_per_switch
    pcie_bw = PCIE_X16_GBPS[pcie_gen] * GBPS
    up_bw = PCIE_X16_GBPS[system.pcie.switch_gen or pcie_gen] * GBPS
    cpu = f"n{h}/cpu"
    g.add_node(cpu, **{KIND: "host_bridge", HOST: h})
    host_nics: list[str] = []
    for i in range(gpus):
        sw = f"n{h}/pcie{i // per_sw}"
        if sw not in g:
            g.add_node(sw, **{KIND: "pcie_switch", HOST: h})
            _add_link(g, sw, cpu, up_bw, PCIE_LATENCY_S, "pcie")
            on_sw = min(per_sw, gpus - i)  # NIC j comes with the switch's GPU nearest to it
            for j in range(nics_per_sw if multi_host else 0):
                if j * per_sw // nics_per_sw < on_sw:
                    nic = f"n{h}/nic{(i // per_sw) * nics_per_sw + j}"
                    g.add_node(nic, **{KIND: "nic", HOST: h, RAIL: len(host_nics)})
                    _add_link(g, nic, sw, up_bw, PCIE_LATENCY_S, "pcie")
                    host_nics.append(nic)
        gpu_node = f"n{h}/gpu{i}"
        g.add_node(gpu_node, **{KIND: "gpu", HOST: h, LOCAL_RANK: i, DEVICE_MODEL: gpu.model,
                                MEMORY_BANDWIDTH: scaled(gpu.memory_gbps, 9),
                                COMPUTE_CAPABILITY: gpu.compute_capability, SM_COUNT: gpu.sm_count})
        if nvswitch is not None:
            nvs, bw, links = nvswitch
            _add_link(g, gpu_node, nvs, bw, NVLINK_LATENCY_S, "nvlink", **{NUM_LINKS: links})
        _add_link(g, gpu_node, sw, pcie_bw, PCIE_LATENCY_S, "pcie")
    return host_nics


def _pcie_system(name: str, system: System, catalogue: Catalogue, num_nodes: int, options: dict[str, Any]) -> nx.Graph:
    """PCIe-only GPU servers (no NVLink, hence no LL128 in NCCL)."""
    o = _options(PcieOptions, name, options)
    gpn = system.gpus_per_node if o.gpus_per_node is None else o.gpus_per_node
    per_sw = system.pcie.gpus_per_switch if o.gpus_per_switch is None else o.gpus_per_switch
    pcie_gen = system.pcie.gen if o.pcie_gen is None else o.pcie_gen
    if pcie_gen == system.pcie.gen:
        gpu, nic_default, radix = catalogue.gpus[system.gpu], system.nic.gbit, system.switch_radix
    elif pcie_gen in system.by_pcie_gen:
        v = system.by_pcie_gen[pcie_gen]
        gpu, nic_default, radix = catalogue.gpus[v.gpu], v.nic_gbit, v.switch_radix
    else:
        gens = ", ".join(str(x) for x in (system.pcie.gen, *system.by_pcie_gen))
        raise InputError(f"topology {name}: pcie_gen: {pcie_gen} is not accepted; expected {gens} (the generations "
                         "of its catalogue entry)")
    nic_gbit = float(nic_default if o.nic_gbit is None else o.nic_gbit)
    g = Builder(name=name, backend="nccl", num_nodes=num_nodes, cpu_vendor=system.cpu.vendor,
                 description=f"{num_nodes}x PCIe Gen{pcie_gen} server: {gpn}x {gpu.model}, {per_sw} GPUs per switch")
    nics = [g.host(h, lambda h=h: _add_host(g, system, gpu, h, gpn, None, multi_host=num_nodes > 1,
                                            pcie_gen=pcie_gen, per_sw=per_sw))
            for h in range(num_nodes)]
    _add_fabric(g, nics, nic_gbit, o, radix)
    return g.to_graph()


#: TCP's payload share of a 1500 B MTU Ethernet frame (1448/1538): 94 % of line rate usable
TCP_EFFICIENCY = 1448.0 / 1538.0


def _cpu_gloo(num_nodes: int, options: dict[str, Any]) -> nx.Graph:
    o = _options(CpuGlooOptions, "cpu-gloo", options)
    rph = o.ranks_per_host
    g = Builder(name="cpu-gloo", backend="gloo", num_nodes=num_nodes, cpu_vendor="intel",
                 description=f"{num_nodes} CPU host(s) x {rph} gloo rank(s): TCP loopback "
                             f"{o.loopback_gbps:g} GB/s, {o.ethernet_gbit:g} GbE between hosts")
    for h in range(num_nodes):
        lo = f"n{h}/loopback"
        g.add_node(lo, **{KIND: "loopback", HOST: h})
        for i in range(rph):
            cpu = f"n{h}/cpu{i}"
            g.add_node(cpu, **{KIND: "cpu", HOST: h, LOCAL_RANK: i, DEVICE_MODEL: "cpu",
                               MEMORY_BANDWIDTH: o.memory_gbps * GBPS, COMPUTE_CAPABILITY: 0,
                               REDUCE_BANDWIDTH: o.reduce_gbps * GBPS})
            # NOTE: half the latency on each side of the loopback node: rank -> rank = one latency.
            _add_link(g, cpu, lo, o.loopback_gbps * GBPS, o.loopback_latency_us * 0.5e-6, "loopback")
        if num_nodes > 1:
            nic = f"n{h}/nic0"
            g.add_node(nic, **{KIND: "nic", HOST: h, RAIL: 0})
            _add_link(g, lo, nic, o.loopback_gbps * GBPS, 0.0, "loopback")
            if "eth-switch" not in g:
                g.add_node("eth-switch", **{KIND: "eth_switch", HOST: -1})
            _add_link(g, nic, "eth-switch", o.ethernet_gbit / 8.0 * GBPS * TCP_EFFICIENCY,
                      o.ethernet_latency_us * 0.5e-6, "ethernet")
    return g.to_graph()


def build_preset(name: str, *, num_nodes: int = 1, catalogue: Catalogue | None = None, **options: Any) -> nx.Graph:
    """A preset topology of ``num_nodes`` hosts (a GB200 NVL72 host is a rack): a system of the
    hardware catalogue (None: the bundled one) or ``cpu-gloo``, with the options of
    :mod:`~ddpsim.network.topology_schema` (InputError on an unknown preset or a bad option)."""
    cat = bundled() if catalogue is None else catalogue
    if name != "cpu-gloo" and name not in cat.systems:
        raise InputError(f"topology: {shorten(name)} is not a preset; expected one of {', '.join(presets(cat))} "
                         "or a YAML file path")
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or not 1 <= num_nodes <= MAX_NODES:
        raise InputError(f"topology {name}: num_nodes: {shorten(num_nodes)} is not accepted; expected an integer in "
                         f"[1, {MAX_NODES}]")
    with gc_paused():
        if name == "cpu-gloo":
            g = _cpu_gloo(num_nodes, options)
        elif cat.systems[name].interconnect == "pcie":
            g = _pcie_system(name, cat.systems[name], cat, num_nodes, options)
        else:
            g = _nvlink_system(name, cat.systems[name], cat.gpus[cat.systems[name].gpu], num_nodes, options)
        validate_topology(g, source=name)
    return g


# --- YAML ---------------------------------------------------------------------------

def load_topology_yaml(path: str | Path) -> nx.Graph:
    """Load a custom topology.

    Format::

        name: my-cluster
        backend: nccl            # or gloo
        cpu_vendor: intel        # optional (intel | amd)
        nodes:
          - {id: gpu0, kind: gpu, host: 0, local_rank: 0, device_model: A100, compute_capability: 80,
             memory_bandwidth_gbps: 2039, sm_count: 108}
          - {id: sw, kind: nvswitch, host: 0, nvls: false}
        links:
          - {a: gpu0, b: sw, bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}

    ``bandwidth_gbps`` is GB/s (1e9 B/s) per direction; ``latency_us`` microseconds. CPU ranks may
    give ``reduce_bandwidth_gbps``; GPUs ``sm_count`` (without it no contention prior is derived).
    """
    p = Path(path)
    source = f"topology {shorten(str(p))}"
    data = read_yaml(p, "topology", f"a preset ({', '.join(presets())}) or a topology YAML file")
    doc = validate(TopologyDoc, data, source)
    g = new_graph(name=p.stem if doc.name is None else doc.name, backend=doc.backend, cpu_vendor=doc.cpu_vendor,
                   description=f"custom topology {p.name}" if doc.description is None else doc.description)
    for i, n in enumerate(doc.nodes):
        if n.id in g:
            raise InputError(f"{source}: nodes[{i}].id: {n.id!r} is a duplicate; expected unique node ids")
        g.add_node(n.id, **_yaml_node_attrs(n))
    for i, e in enumerate(doc.links):
        for end in ("a", "b"):
            if getattr(e, end) not in g:
                raise InputError(f"{source}: links[{i}].{end}: {getattr(e, end)!r} is not a node id; "
                                 "expected one of the ids under nodes")
        _add_link(g, e.a, e.b, e.bandwidth_gbps * GBPS, e.latency_us * 1e-6, e.link_type,
                  **({} if e.num_links is None else {NUM_LINKS: e.num_links}))
    hosts = {d[HOST] for _, d in g.nodes(data=True) if d[KIND] in DEVICE_KINDS}
    g.graph["num_nodes"] = len(hosts)
    validate_topology(g, source=source)
    return g


#: a YAML node's attributes when its entry leaves them out, per kind (``host``: -1 for the fabric's switches)
YAML_NODE_DEFAULTS: dict[str, dict[str, Any]] = {
    "gpu": {HOST: 0, COMPUTE_CAPABILITY: 80, "memory_bandwidth_gbps": 2000.0},
    "cpu": {HOST: 0, COMPUTE_CAPABILITY: 0, "memory_bandwidth_gbps": 10.0,
            "reduce_bandwidth_gbps": CpuGlooOptions.model_fields["reduce_gbps"].default},
    "nvswitch": {HOST: 0, NVLS: False}, "nic": {HOST: 0, RAIL: 0},
    "leaf": {HOST: -1}, "spine": {HOST: -1}, "eth_switch": {HOST: -1},
}


def _yaml_node_attrs(n: NodeDoc) -> dict[str, Any]:
    """The graph attributes of a validated YAML node: its keys, the kind's defaults for the absent ones."""
    given = {k: v for k, v in n.model_dump(exclude={"id"}).items() if v is not None}
    d = {HOST: 0, **YAML_NODE_DEFAULTS.get(n.kind, {}), **given}
    attrs: dict[str, Any] = {KIND: n.kind, HOST: d[HOST]}
    if n.kind in DEVICE_KINDS:
        attrs.update({LOCAL_RANK: d["local_rank"], DEVICE_MODEL: d.get("device_model", n.kind),
                      COMPUTE_CAPABILITY: d[COMPUTE_CAPABILITY],
                      MEMORY_BANDWIDTH: float(d["memory_bandwidth_gbps"]) * GBPS})
    attrs.update({k: d[k] for k in (SM_COUNT, NVLS, RAIL) if k in d})  # a key of one kind each (NodeDoc)
    if "reduce_bandwidth_gbps" in d:
        attrs[REDUCE_BANDWIDTH] = float(d["reduce_bandwidth_gbps"]) * GBPS
    return attrs


def resolve_topology(spec: str, *, num_nodes: int = 1, catalogue: Catalogue | None = None, **options: Any) -> nx.Graph:
    """A preset of ``catalogue`` (None: the bundled one) or a YAML file (no ``num_nodes`` or options)."""
    if spec not in presets(catalogue) and (str(spec).endswith((".yaml", ".yml")) or exists(str(spec))):
        if num_nodes != 1 or options:
            raise InputError(f"topology: {shorten(spec)} is a YAML file; expected no --nodes or preset options with it "
                             "(describe every host in the file)")
        return load_topology_yaml(spec)
    return build_preset(spec, num_nodes=num_nodes, catalogue=catalogue, **options)  # or "not a preset"


# --- queries ---------------------------------------------------------------------------

def rank_nodes(graph: nx.Graph) -> list:
    """Device nodes in rank order: by host, then local rank (torchrun's)."""
    attr = graph._node
    devs = [n for n, d in attr.items() if d.get(KIND) in DEVICE_KINDS]
    return sorted(devs, key=lambda n: (attr[n][HOST], attr[n][LOCAL_RANK]))


def edge_weight(u: Any, v: Any, d: dict[str, Any]) -> int:
    """Routing cost of a link: picoseconds per byte (an integer: equal-cost paths tie exactly, ECMP)."""
    return max(1, round(1e12 / d[BANDWIDTH]))


def summarize(graph: nx.Graph) -> dict[str, Any]:
    """A JSON-able summary: devices, node kinds, links by type (the narrowest of each), device 0's links."""
    devs = rank_nodes(graph)
    kinds = dict(collections.Counter(d[KIND] for d in graph._node.values()))
    link_types: dict[str, dict[str, Any]] = {}
    for u, v, d in graph.edges(data=True):
        t = link_types.setdefault(d[LINK_TYPE], {"count": 0, "min_bandwidth_gbps": math.inf,
                                                 "max_bandwidth_gbps": 0.0, "narrowest": None})
        t["count"] += 1
        bw = d[BANDWIDTH] / GBPS
        if bw < t["min_bandwidth_gbps"]:
            t["min_bandwidth_gbps"], t["narrowest"] = bw, f"{u} - {v}"
        t["max_bandwidth_gbps"] = max(t["max_bandwidth_gbps"], bw)
    first = devs[0]
    per_dev = {lt: sum(d[BANDWIDTH] for _, _, d in graph.edges(first, data=True) if d[LINK_TYPE] == lt) / GBPS
               for lt in LINK_TYPES}
    return {
        "name": graph.graph.get("name"), "backend": graph.graph.get("backend"),
        "num_nodes": graph.graph.get("num_nodes", 1), "num_devices": len(devs),
        "device_model": graph.nodes[first][DEVICE_MODEL], "description": graph.graph.get("description", ""),
        "node_kinds": kinds, "num_links": graph.number_of_edges(),
        "links": link_types,
        "device0_link_bandwidth_gbps": {k: v for k, v in per_dev.items() if v > 0},
    }
