"""Cluster topologies as plain networkx graphs.

A topology is an undirected :class:`networkx.Graph` whose nodes are devices (the things a
rank runs on: a GPU or a CPU rank), switches (NVSwitch, PCIe switch, host bridge, leaf,
spine, Ethernet switch) and NICs, and whose edges are links. Every link is full duplex:
its bandwidth is the **usable bandwidth per direction**, as NCCL's topology code models it
for GPU links (``src/graph/topo.h``: NVLink 20.0 GB/s per A100 link, 20.6 per H100 link,
PCIe x16 Gen4 24 / Gen5 48, NIC ``mbps/8000``), and as TCP delivers it for CPU links.

Modelling assumptions (stated once):

* The six (A100) or four (H100) NVSwitch chips of a DGX are one ``nvswitch`` node; a GPU's
  edge to it carries all of its NVLinks (``num_links`` x per-link bandwidth).
* Each GPU reaches its NIC through a PCIe switch (GPUDirect RDMA, NCCL path type PIX).
* Multi-node fabrics are InfiniBand, either *rail-optimised* (NIC ``r`` of every node on
  the leaf of rail ``r``) or a *two-level fat tree* (all NICs of a node on one leaf). Leaves
  reach every spine; a leaf's uplink bandwidth is its downlink bandwidth divided by
  ``oversubscription`` and spread evenly over the spines (ECMP).
* The CPU/gloo preset puts ranks on hosts: ranks of one host talk through the kernel's TCP
  loopback, hosts through one Ethernet NIC each and one Ethernet switch.

Preset numbers and their sources (NCCL v2.30.7 ``src/graph/topo.h``/``topo.cc``, NVIDIA datasheets and DGX user guides):

=============  =====================================================================================
dgx-a100       8x A100-SXM4-80GB (HBM2e 2039 GB/s; NVIDIA A100 datasheet), cc 8.0; 12 NVLink3 links
               per GPU x 20.0 GB/s (SM80_NVLINK_BW) = 240 GB/s into the NVSwitch; 4 PCIe Gen4 switches,
               each 2 GPUs + 2 NICs, x16 = 24 GB/s (NCCL's Gen4 estimate); 8x ConnectX-6 HDR 200 Gb/s
               = 25 GB/s (mbps/8000); AMD EPYC hosts; HDR switch QM8700, 40 ports; link latency
               NVLink 0.6 us, PCIe 1.0 us (NCCL hwLat Ring/LL), IB 0.6 us ("sub-600ns", ConnectX-6).
               ``nvlinks_per_gpu=8`` is the A800 (nccl#412).
dgx-h100       8x H100-SXM5-80GB (HBM3 3.35 TB/s; NVIDIA H100 datasheet), cc 9.0; 18 NVLink4 links x
               20.6 GB/s (SM90_NVLINK_BW) = 370.8 GB/s (nccl#1189 log ``NVL[370.8]``), NVLink-SHARP
               (NVLS) NVSwitch; PCIe Gen5 x16 = 48 GB/s; 8x ConnectX-7 NDR 400 Gb/s = 50 GB/s
               (``NET[50.0]``); Intel Xeon hosts; NDR switch QM9700, 64 ports.
pcie           N GPUs (default 8), ``gpus_per_switch`` (4) per PCIe switch, one NIC per switch;
               Gen4 (A100-PCIe-80GB, 1935 GB/s, 24 GB/s x16, HDR 200 Gb/s) or Gen5 (H100-PCIe-80GB,
               2.0 TB/s, 48 GB/s x16, NDR 400 Gb/s). No NVLink.
cpu-gloo       ``ranks_per_host`` (2) CPU ranks per host over TCP loopback (4 GB/s per direction,
               15 us per message), hosts over 10 GbE (1.25 GB/s x 1448/1538 TCP payload share,
               25 us); CPU reduction 4 GB/s, memory copy 10 GB/s. Defaults of our choosing (orders
               of gloo#21, gloo#158): measure your machine with the executor and pass the
               calibration instead.
fabric         ``rail`` (default) or ``fat-tree``, two levels, leaf radix per switch above (half
               the ports down), ``num_spines`` (4) spines, ``oversubscription`` (1.0) = leaf
               downlink / uplink bandwidth.
=============  =====================================================================================

Node attributes (names are the constants below):

``kind``                       one of :data:`NODE_KINDS`
``host``                       index of the host (node) the element belongs to; switches of the fabric: -1
``local_rank``                 devices only: index of the device on its host
``device_model``               devices only: e.g. ``"A100-SXM4-80GB"``
``memory_bandwidth_bytes_per_s`` devices only: memory bandwidth used for gradient copy-in/out
``compute_capability``         GPUs only: 80 (Ampere), 90 (Hopper); CPU ranks: 0
``sm_count``                   GPUs only: streaming multiprocessors (A100 108, H100-SXM5 132,
                               H100-PCIe 114; NVIDIA A100 / H100 whitepapers): the compute an NCCL
                               kernel's blocks take away (:mod:`ddpsim.network.contention`)
``reduce_bandwidth_bytes_per_s`` CPU ranks only: bytes/s one rank sums (gloo's reduction)
``nvls``                       NVSwitch only: True when it can reduce in the switch (NVLink SHARP)
``rail``                       NICs only: the NIC's index on its host

Edge attributes:

``bandwidth_bytes_per_s``      usable bandwidth per direction (> 0)
``latency_s``                  one-way latency of the link (>= 0, seconds)
``link_type``                  one of :data:`LINK_TYPES`
``num_links``                  NVLink edges: number of NVLinks bundled in the edge

Graph attributes: ``name``, ``backend`` ("nccl" or "gloo"), ``num_nodes``, ``cpu_vendor``
("intel" or "amd"; NCCL's tuning depends on it), ``description``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import networkx as nx

from ddpsim.errors import InputError

# --- attribute names (the only place they are spelled) -------------------------------
KIND = "kind"
HOST = "host"
LOCAL_RANK = "local_rank"
DEVICE_MODEL = "device_model"
MEMORY_BANDWIDTH = "memory_bandwidth_bytes_per_s"
COMPUTE_CAPABILITY = "compute_capability"
SM_COUNT = "sm_count"
REDUCE_BANDWIDTH = "reduce_bandwidth_bytes_per_s"
NVLS = "nvls"
RAIL = "rail"
BANDWIDTH = "bandwidth_bytes_per_s"
LATENCY = "latency_s"
LINK_TYPE = "link_type"
NUM_LINKS = "num_links"

DEVICE_KINDS = ("gpu", "cpu")
NODE_KINDS = ("gpu", "cpu", "nvswitch", "pcie_switch", "host_bridge", "nic", "leaf", "spine",
              "loopback", "eth_switch")
LINK_TYPES = ("nvlink", "pcie", "net", "loopback", "ethernet")
BACKENDS = ("nccl", "gloo")
CPU_VENDORS = ("intel", "amd")

PRESETS: tuple[str, ...] = ("dgx-a100", "dgx-h100", "pcie", "cpu-gloo")
FABRICS = ("rail", "fat-tree")

GBPS = 1e9  # GB/s as NCCL prints them


# --- published numbers used by the presets (NCCL topo.h/topo.cc/tuning.cc, NVIDIA documents) ---
#: NCCL topo.h per-NVLink bandwidth (GB/s, usable per direction): SM80_NVLINK_BW 20.0,
#: SM90_NVLINK_BW 20.6 (v2.21+; v2.30.7 is the pinned version).
NVLINK_BW_GBPS = {80: 20.0, 90: 20.6}
#: NCCL topo.cc PCIe x16 usable estimate per generation (GB/s): width*speed/80 with
#: kvDictPciGen: Gen3 12, Gen4 24, Gen5 48.
PCIE_X16_GBPS = {3: 12.0, 4: 24.0, 5: 48.0}
#: NIC bandwidth NCCL models = mbps/8000 GB/s: HDR 200 Gb/s -> 25.0, NDR 400 Gb/s -> 50.0.
IB_LATENCY_S = 0.6e-6  # ConnectX-6 / HDR switch "sub-600ns latency" (NVIDIA ConnectX-6 / Quantum HDR datasheets)
NVLINK_LATENCY_S = 0.6e-6  # NCCL hwLat NVLINK Ring LL (tuning.cc v2.30.7), per hop
PCIE_LATENCY_S = 1.0e-6  # NCCL hwLat PCI Ring LL (tuning.cc v2.30.7), per hop

_DGX = {
    # DGX A100: 8x A100-SXM4-80GB (2039 GB/s HBM2e), 12 NVLink3 links per GPU into 6
    # NVSwitches, 8x ConnectX-6 HDR 200 Gb/s compute NICs, 4 PCIe Gen4 switches each with
    # 2 GPUs + 2 NICs, 2x AMD EPYC 7742 (NVIDIA DGX A100 user guide).
    "dgx-a100": dict(device_model="A100-SXM4-80GB", memory_bw=2.039e12, cc=80, sms=108, nvlinks=12,
                     nvls=False, nic_gbit=200.0, pcie_gen=4, cpu_vendor="amd", leaf_radix=40),
    # DGX H100: 8x H100-SXM5-80GB (3.35 TB/s HBM3), 18 NVLink4 links per GPU into 4
    # NVLink-SHARP-capable NVSwitches, 8x ConnectX-7 NDR 400 Gb/s, PCIe Gen5,
    # 2x Intel Xeon 8480C (NVIDIA DGX H100 user guide). QM9700: 64 ports.
    "dgx-h100": dict(device_model="H100-SXM5-80GB", memory_bw=3.35e12, cc=90, sms=132, nvlinks=18,
                     nvls=True, nic_gbit=400.0, pcie_gen=5, cpu_vendor="intel", leaf_radix=64),
}


def _opt(options: dict[str, Any], name: str, default: Any, check, accepted: str) -> Any:
    value = options.pop(name, default)
    if value is None:
        value = default
    if not check(value):
        raise InputError(f"{name}: {value!r} is not accepted; expected {accepted}")
    return value


def _is_int(v: Any, lo: int = 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _is_pos(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _no_leftovers(options: dict[str, Any], preset: str, accepted: tuple[str, ...]) -> None:
    if options:
        name = sorted(options)[0]
        raise InputError(f"{name}: is not an option of preset {preset!r}; expected one of {', '.join(accepted)}")


def _new_graph(**attrs: Any) -> nx.Graph:
    # NOTE: nx.Graph(backend=...) is networkx's dispatch keyword; set graph attributes after.
    g = nx.Graph()
    g.graph.update(attrs)
    return g


def _add_link(g: nx.Graph, u: str, v: str, bw_bytes_per_s: float, latency_s: float, link_type: str,
              **extra: Any) -> None:
    g.add_edge(u, v, **{BANDWIDTH: float(bw_bytes_per_s), LATENCY: float(latency_s), LINK_TYPE: link_type}, **extra)


def _add_fabric(g: nx.Graph, nics: list[list[str]], nic_bw: float, *, fabric: str, oversubscription: float,
                leaf_radix: int, num_spines: int) -> None:
    """Connect ``nics[host][rail]`` through a rail-optimised or fat-tree leaf/spine fabric."""
    num_hosts = len(nics)
    num_rails = len(nics[0])
    down_ports = max(1, leaf_radix // 2)  # non-blocking leaf: half its ports face down
    leaves: list[tuple[str, float]] = []  # (leaf name, downlink bandwidth it serves)
    if fabric == "rail":
        hosts_per_leaf = down_ports
        for r in range(num_rails):
            for grp in range(math.ceil(num_hosts / hosts_per_leaf)):
                leaf = f"leaf-r{r}-{grp}"
                g.add_node(leaf, **{KIND: "leaf", HOST: -1})
                members = range(grp * hosts_per_leaf, min(num_hosts, (grp + 1) * hosts_per_leaf))
                for h in members:
                    _add_link(g, nics[h][r], leaf, nic_bw, IB_LATENCY_S, "net")
                leaves.append((leaf, nic_bw * len(members)))
    else:
        hosts_per_leaf = max(1, down_ports // num_rails)
        for grp in range(math.ceil(num_hosts / hosts_per_leaf)):
            leaf = f"leaf-{grp}"
            g.add_node(leaf, **{KIND: "leaf", HOST: -1})
            members = range(grp * hosts_per_leaf, min(num_hosts, (grp + 1) * hosts_per_leaf))
            for h in members:
                for r in range(num_rails):
                    _add_link(g, nics[h][r], leaf, nic_bw, IB_LATENCY_S, "net")
            leaves.append((leaf, nic_bw * num_rails * len(members)))
    if len(leaves) > 1:
        for s in range(num_spines):
            g.add_node(f"spine-{s}", **{KIND: "spine", HOST: -1})
        for leaf, down_bw in leaves:
            for s in range(num_spines):
                _add_link(g, leaf, f"spine-{s}", down_bw / oversubscription / num_spines, IB_LATENCY_S, "net")


def _fabric_options(options: dict[str, Any], leaf_radix_default: int) -> dict[str, Any]:
    return dict(
        fabric=_opt(options, "fabric", "rail", lambda v: v in FABRICS, f"one of {', '.join(FABRICS)}"),
        oversubscription=float(_opt(options, "oversubscription", 1.0,
                                    lambda v: _is_pos(v) and v >= 1.0, "a number >= 1 (1 = non-blocking)")),
        leaf_radix=_opt(options, "leaf_radix", leaf_radix_default, lambda v: _is_int(v, 2), "an integer >= 2"),
        num_spines=_opt(options, "num_spines", 4, _is_int, "an integer >= 1"),
    )


def _dgx(name: str, num_nodes: int, options: dict[str, Any]) -> nx.Graph:
    spec = _DGX[name]
    accepted = ("gpus_per_node", "nvlinks_per_gpu", "nic_gbit", "pcie_gen", "fabric", "oversubscription",
                "leaf_radix", "num_spines")
    gpn = _opt(options, "gpus_per_node", 8, _is_int, "an integer >= 1")
    nvlinks = _opt(options, "nvlinks_per_gpu", spec["nvlinks"], _is_int, "an integer >= 1")
    nic_gbit = float(_opt(options, "nic_gbit", spec["nic_gbit"], _is_pos, "a number > 0 (Gb/s)"))
    pcie_gen = _opt(options, "pcie_gen", spec["pcie_gen"], lambda v: v in PCIE_X16_GBPS,
                    f"one of {sorted(PCIE_X16_GBPS)}")
    fab = _fabric_options(options, spec["leaf_radix"])
    _no_leftovers(options, name, accepted)
    cc = spec["cc"]
    nvlink_bw = nvlinks * NVLINK_BW_GBPS[cc] * GBPS
    pcie_bw = PCIE_X16_GBPS[pcie_gen] * GBPS
    nic_bw = nic_gbit / 8.0 * GBPS  # NCCL: net bw = mbps / 8000 GB/s
    g = _new_graph(name=name, backend="nccl", num_nodes=num_nodes, cpu_vendor=spec["cpu_vendor"],
                 description=f"{num_nodes}x {name}: {gpn}x {spec['device_model']}, {nvlinks} NVLinks/GPU "
                             f"({nvlink_bw / GBPS:.1f} GB/s), {gpn} NICs x {nic_gbit:g} Gb/s")
    nics: list[list[str]] = []
    for h in range(num_nodes):
        nvs = f"n{h}/nvswitch"
        g.add_node(nvs, **{KIND: "nvswitch", HOST: h, NVLS: spec["nvls"]})
        cpu = f"n{h}/cpu"
        g.add_node(cpu, **{KIND: "host_bridge", HOST: h})
        host_nics = []
        for i in range(gpn):
            gpu = f"n{h}/gpu{i}"
            g.add_node(gpu, **{KIND: "gpu", HOST: h, LOCAL_RANK: i, DEVICE_MODEL: spec["device_model"],
                               MEMORY_BANDWIDTH: spec["memory_bw"], COMPUTE_CAPABILITY: cc, SM_COUNT: spec["sms"]})
            _add_link(g, gpu, nvs, nvlink_bw, NVLINK_LATENCY_S, "nvlink", **{NUM_LINKS: nvlinks})
            sw = f"n{h}/pcie{i // 2}"  # 2 GPUs + 2 NICs per PCIe switch
            if sw not in g:
                g.add_node(sw, **{KIND: "pcie_switch", HOST: h})
                _add_link(g, sw, cpu, pcie_bw, PCIE_LATENCY_S, "pcie")
            _add_link(g, gpu, sw, pcie_bw, PCIE_LATENCY_S, "pcie")
            if num_nodes > 1:
                nic = f"n{h}/nic{i}"
                g.add_node(nic, **{KIND: "nic", HOST: h, RAIL: i})
                _add_link(g, nic, sw, pcie_bw, PCIE_LATENCY_S, "pcie")
                host_nics.append(nic)
        nics.append(host_nics)
    if num_nodes > 1:
        _add_fabric(g, nics, nic_bw, **fab)
    return g


def _pcie(num_nodes: int, options: dict[str, Any]) -> nx.Graph:
    """PCIe-only GPU servers: ``gpus_per_switch`` GPUs and one NIC under each PCIe switch,
    switches under one host bridge. Gen4 default: A100-PCIe-80GB (1935 GB/s HBM2e, cc 8.0),
    Gen5: H100-PCIe-80GB (2.0 TB/s HBM2e, cc 9.0). No NVLink, hence no LL128 in NCCL."""
    accepted = ("gpus_per_node", "gpus_per_switch", "pcie_gen", "nic_gbit", "fabric", "oversubscription",
                "leaf_radix", "num_spines")
    gpn = _opt(options, "gpus_per_node", 8, _is_int, "an integer >= 1")
    per_sw = _opt(options, "gpus_per_switch", 4, _is_int, "an integer >= 1")
    pcie_gen = _opt(options, "pcie_gen", 4, lambda v: v in (4, 5), "4 or 5")
    nic_gbit = float(_opt(options, "nic_gbit", 200.0 if pcie_gen == 4 else 400.0, _is_pos, "a number > 0 (Gb/s)"))
    fab = _fabric_options(options, 40 if pcie_gen == 4 else 64)
    _no_leftovers(options, "pcie", accepted)
    model, mem_bw, cc, sms = ("A100-PCIe-80GB", 1.935e12, 80, 108) if pcie_gen == 4 else ("H100-PCIe-80GB", 2.0e12, 90, 114)
    pcie_bw = PCIE_X16_GBPS[pcie_gen] * GBPS
    g = _new_graph(name="pcie", backend="nccl", num_nodes=num_nodes, cpu_vendor="intel",
                 description=f"{num_nodes}x PCIe Gen{pcie_gen} server: {gpn}x {model}, {per_sw} GPUs per switch")
    nics: list[list[str]] = []
    for h in range(num_nodes):
        cpu = f"n{h}/cpu"
        g.add_node(cpu, **{KIND: "host_bridge", HOST: h})
        host_nics = []
        for i in range(gpn):
            sw_i = i // per_sw
            sw = f"n{h}/pcie{sw_i}"
            if sw not in g:
                g.add_node(sw, **{KIND: "pcie_switch", HOST: h})
                _add_link(g, sw, cpu, pcie_bw, PCIE_LATENCY_S, "pcie")
                if num_nodes > 1:
                    nic = f"n{h}/nic{sw_i}"
                    g.add_node(nic, **{KIND: "nic", HOST: h, RAIL: sw_i})
                    _add_link(g, nic, sw, pcie_bw, PCIE_LATENCY_S, "pcie")
                    host_nics.append(nic)
            gpu = f"n{h}/gpu{i}"
            g.add_node(gpu, **{KIND: "gpu", HOST: h, LOCAL_RANK: i, DEVICE_MODEL: model,
                               MEMORY_BANDWIDTH: mem_bw, COMPUTE_CAPABILITY: cc, SM_COUNT: sms})
            _add_link(g, gpu, sw, pcie_bw, PCIE_LATENCY_S, "pcie")
        nics.append(host_nics)
    if num_nodes > 1:
        _add_fabric(g, nics, nic_gbit / 8.0 * GBPS, **fab)
    return g


#: cpu-gloo defaults. Loopback: Linux TCP over ``lo`` moves a few GB/s per stream with
#: ~10-20 us per small message through the kernel stack; a calibration measured on the
#: machine (``executor collectives``) replaces them.
#: Ethernet: 10 GbE, 94 % of line rate usable by TCP with a 1500 B MTU (1448/1538 payload
#: per frame), 25 us one way through NIC + switch + stack (gloo#21 / gloo#158 orders).
CPU_GLOO_DEFAULTS = dict(ranks_per_host=2, loopback_gbps=4.0, loopback_latency_us=15.0, ethernet_gbit=10.0,
                         ethernet_latency_us=25.0, memory_gbps=10.0, reduce_gbps=4.0)
TCP_EFFICIENCY = 1448.0 / 1538.0


def _cpu_gloo(num_nodes: int, options: dict[str, Any]) -> nx.Graph:
    d = CPU_GLOO_DEFAULTS
    accepted = tuple(d)
    rph = _opt(options, "ranks_per_host", d["ranks_per_host"], _is_int, "an integer >= 1")
    vals = {k: float(_opt(options, k, d[k], _is_pos, "a number > 0")) for k in accepted if k != "ranks_per_host"}
    _no_leftovers(options, "cpu-gloo", accepted)
    g = _new_graph(name="cpu-gloo", backend="gloo", num_nodes=num_nodes, cpu_vendor="intel",
                 description=f"{num_nodes} CPU host(s) x {rph} gloo rank(s): TCP loopback "
                             f"{vals['loopback_gbps']:g} GB/s, {vals['ethernet_gbit']:g} GbE between hosts")
    for h in range(num_nodes):
        lo = f"n{h}/loopback"
        g.add_node(lo, **{KIND: "loopback", HOST: h})
        for i in range(rph):
            cpu = f"n{h}/cpu{i}"
            g.add_node(cpu, **{KIND: "cpu", HOST: h, LOCAL_RANK: i, DEVICE_MODEL: "cpu",
                               MEMORY_BANDWIDTH: vals["memory_gbps"] * GBPS, COMPUTE_CAPABILITY: 0,
                               REDUCE_BANDWIDTH: vals["reduce_gbps"] * GBPS})
            # NOTE: half the latency on each side of the loopback node: rank -> rank = one latency.
            _add_link(g, cpu, lo, vals["loopback_gbps"] * GBPS, vals["loopback_latency_us"] * 0.5e-6, "loopback")
        if num_nodes > 1:
            nic = f"n{h}/nic0"
            g.add_node(nic, **{KIND: "nic", HOST: h, RAIL: 0})
            _add_link(g, lo, nic, vals["loopback_gbps"] * GBPS, 0.0, "loopback")
            if "eth-switch" not in g:
                g.add_node("eth-switch", **{KIND: "eth_switch", HOST: -1})
            _add_link(g, nic, "eth-switch", vals["ethernet_gbit"] / 8.0 * GBPS * TCP_EFFICIENCY,
                      vals["ethernet_latency_us"] * 0.5e-6, "ethernet")
    return g


def build_preset(name: str, *, num_nodes: int = 1, **options: Any) -> nx.Graph:
    """Build a preset topology.

    Args:
        name: one of :data:`PRESETS`.
        num_nodes: number of hosts (>= 1).
        **options: preset options. ``dgx-a100``/``dgx-h100``: gpus_per_node, nvlinks_per_gpu,
            nic_gbit, pcie_gen, fabric ("rail" | "fat-tree"), oversubscription, leaf_radix,
            num_spines. ``pcie``: gpus_per_node, gpus_per_switch, pcie_gen (4 | 5), nic_gbit
            and the fabric options. ``cpu-gloo``: ranks_per_host, loopback_gbps,
            loopback_latency_us, ethernet_gbit, ethernet_latency_us, memory_gbps, reduce_gbps.

    Raises:
        InputError: unknown preset or option, or a bad option value.
    """
    if name not in PRESETS:
        raise InputError(f"topology: {name!r} is not a preset; expected one of {', '.join(PRESETS)} or a YAML file path")
    if not _is_int(num_nodes):
        raise InputError(f"num_nodes: {num_nodes!r} is not accepted; expected an integer >= 1")
    options = dict(options)
    if name in _DGX:
        g = _dgx(name, num_nodes, options)
    elif name == "pcie":
        g = _pcie(num_nodes, options)
    else:
        g = _cpu_gloo(num_nodes, options)
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

    ``bandwidth_gbps`` is GB/s (1e9 B/s) per direction; ``latency_us`` microseconds.
    CPU ranks may give ``reduce_bandwidth_gbps``; GPUs ``sm_count`` (without it no
    compute-communication contention prior is derived).

    Raises:
        InputError: unreadable file, missing or bad field, disconnected graph, devices
            without a host or local rank.
    """
    p = Path(path)
    data = _read_topology_yaml(p)
    backend = data.get("backend", "nccl")
    if backend not in BACKENDS:
        raise InputError(f"backend: {backend!r} is not accepted; expected one of {', '.join(BACKENDS)}")
    cpu_vendor = data.get("cpu_vendor", "intel")
    if cpu_vendor not in CPU_VENDORS:
        raise InputError(f"cpu_vendor: {cpu_vendor!r} is not accepted; expected one of {', '.join(CPU_VENDORS)}")
    g = _new_graph(name=str(data.get("name", p.stem)), backend=backend, cpu_vendor=cpu_vendor,
                   description=str(data.get("description", f"custom topology {p.name}")))
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise InputError(f"nodes: {nodes!r} is not accepted; expected a non-empty list of nodes")
    for i, n in enumerate(nodes):
        _add_yaml_node(g, f"nodes[{i}]", n)
    links = data.get("links")
    if not isinstance(links, list) or not links:
        raise InputError(f"links: {links!r} is not accepted; expected a non-empty list of links")
    for i, e in enumerate(links):
        _add_yaml_link(g, f"links[{i}]", e)
    hosts = {d[HOST] for _, d in g.nodes(data=True) if d[KIND] in DEVICE_KINDS}
    g.graph["num_nodes"] = len(hosts)
    validate_topology(g, source=str(p))
    return g


def _read_topology_yaml(p: Path) -> dict[str, Any]:
    """The mapping a topology YAML file holds."""
    import yaml

    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise InputError(f"topology: {str(p)!r} cannot be read ({exc.strerror}); expected a preset "
                         f"({', '.join(PRESETS)}) or a readable YAML file") from None
    except yaml.YAMLError as exc:
        raise InputError(f"topology: {str(p)!r} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise InputError(f"topology: {str(p)!r} holds {type(data).__name__}; expected a mapping with nodes and links")
    return data


def _add_yaml_node(g: nx.Graph, f: str, n: Any) -> None:
    """Add the node entry ``n`` (field name ``f``, e.g. ``nodes[3]``) to ``g``."""
    if not isinstance(n, dict) or "id" not in n:
        raise InputError(f"{f}: {n!r} is not accepted; expected a mapping with id and kind")
    kind = n.get("kind")
    if kind not in NODE_KINDS:
        raise InputError(f"{f}.kind: {kind!r} is not accepted; expected one of {', '.join(NODE_KINDS)}")
    nid = str(n["id"])
    if nid in g:
        raise InputError(f"{f}.id: {nid!r} is a duplicate; expected unique node ids")
    attrs: dict[str, Any] = {KIND: kind, HOST: n.get("host", -1 if kind in ("leaf", "spine", "eth_switch") else 0)}
    if not isinstance(attrs[HOST], int) or isinstance(attrs[HOST], bool):
        raise InputError(f"{f}.host: {attrs[HOST]!r} is not accepted; expected an integer")
    if kind in DEVICE_KINDS:
        attrs.update(_yaml_device_attrs(f, n, kind))
    if kind == "nvswitch":
        attrs[NVLS] = bool(n.get("nvls", False))
    if kind == "nic":
        attrs[RAIL] = n.get("rail", 0)
    g.add_node(nid, **attrs)


def _yaml_device_attrs(f: str, n: dict[str, Any], kind: str) -> dict[str, Any]:
    """A device node's attributes: local rank, model, compute capability, memory bandwidth,
    SM count (GPUs) and reduction bandwidth (CPU ranks)."""
    attrs: dict[str, Any] = {}
    lr = n.get("local_rank")
    if not _is_int(lr, 0):
        raise InputError(f"{f}.local_rank: {lr!r} is not accepted; expected an integer >= 0")
    attrs[LOCAL_RANK] = lr
    attrs[DEVICE_MODEL] = str(n.get("device_model", kind))
    cc = n.get("compute_capability", 80 if kind == "gpu" else 0)
    if not _is_int(cc, 0):
        raise InputError(f"{f}.compute_capability: {cc!r} is not accepted; expected an integer like 80 or 90")
    attrs[COMPUTE_CAPABILITY] = cc
    mbw = n.get("memory_bandwidth_gbps", 2000.0 if kind == "gpu" else 10.0)
    if not _is_pos(mbw):
        raise InputError(f"{f}.memory_bandwidth_gbps: {mbw!r} is not accepted; expected a number > 0")
    attrs[MEMORY_BANDWIDTH] = float(mbw) * GBPS
    if kind == "gpu" and n.get("sm_count") is not None:
        if not _is_int(n["sm_count"], 1):
            raise InputError(f"{f}.sm_count: {n['sm_count']!r} is not accepted; expected an integer >= 1 or absent")
        attrs[SM_COUNT] = n["sm_count"]
    if kind == "cpu":
        rbw = n.get("reduce_bandwidth_gbps", CPU_GLOO_DEFAULTS["reduce_gbps"])
        if not _is_pos(rbw):
            raise InputError(f"{f}.reduce_bandwidth_gbps: {rbw!r} is not accepted; expected a number > 0")
        attrs[REDUCE_BANDWIDTH] = float(rbw) * GBPS
    return attrs


def _add_yaml_link(g: nx.Graph, f: str, e: Any) -> None:
    """Add the link entry ``e`` (field name ``f``, e.g. ``links[3]``) to ``g``."""
    if not isinstance(e, dict):
        raise InputError(f"{f}: {e!r} is not accepted; expected a mapping with a, b, bandwidth_gbps, latency_us")
    for end in ("a", "b"):
        if str(e.get(end)) not in g:
            raise InputError(f"{f}.{end}: {e.get(end)!r} is not a node id; expected one of the ids under nodes")
    bw = e.get("bandwidth_gbps")
    if not _is_pos(bw):
        raise InputError(f"{f}.bandwidth_gbps: {bw!r} is not accepted; expected a number > 0 (GB/s per direction)")
    lat = e.get("latency_us")
    if not _is_pos(lat):
        raise InputError(f"{f}.latency_us: {lat!r} is not accepted; expected a number > 0 (microseconds)")
    lt = e.get("link_type", "pcie")
    if lt not in LINK_TYPES:
        raise InputError(f"{f}.link_type: {lt!r} is not accepted; expected one of {', '.join(LINK_TYPES)}")
    extra = {NUM_LINKS: int(e["num_links"])} if "num_links" in e else {}
    _add_link(g, str(e["a"]), str(e["b"]), float(bw) * GBPS, float(lat) * 1e-6, lt, **extra)


def validate_topology(g: nx.Graph, *, source: str = "topology") -> None:
    """Check a topology: connected, at least one device, every device with a host and a
    unique (host, local_rank), positive bandwidths, non-negative latencies, one backend
    matching the device kinds. Raises InputError naming the first problem."""
    devs = [n for n, d in g.nodes(data=True) if d.get(KIND) in DEVICE_KINDS]
    if not devs:
        raise InputError(f"{source}: has no device; expected at least one node of kind gpu or cpu")
    if not nx.is_connected(g):
        parts = sorted((sorted(map(str, c)) for c in nx.connected_components(g)), key=len)
        raise InputError(f"{source}: is disconnected ({len(parts)} parts; e.g. {parts[0][:3]} is cut off); "
                         "expected every node reachable through links")
    seen: dict[tuple[int, int], str] = {}
    kinds = set()
    for n in devs:
        d = g.nodes[n]
        key = (d.get(HOST), d.get(LOCAL_RANK))
        if key in seen:
            raise InputError(f"{source}: devices {seen[key]!r} and {n!r} share host {key[0]} local_rank {key[1]}; "
                             "expected a unique local_rank per host")
        seen[key] = n
        kinds.add(d[KIND])
    for u, v, d in g.edges(data=True):
        bw = d.get(BANDWIDTH)
        if not _is_pos(bw):
            raise InputError(f"{source}: link {u}-{v} bandwidth {bw!r} is not accepted; expected > 0")
        lat = d.get(LATENCY)
        if not (isinstance(lat, (int, float)) and math.isfinite(lat) and lat >= 0):
            raise InputError(f"{source}: link {u}-{v} latency {lat!r} is not accepted; expected >= 0")
    backend = g.graph.get("backend")
    if backend not in BACKENDS:
        raise InputError(f"{source}: backend {backend!r} is not accepted; expected one of {', '.join(BACKENDS)}")
    if backend == "nccl" and kinds != {"gpu"}:
        raise InputError(f"{source}: backend 'nccl' needs GPU devices only, found kinds {sorted(kinds)}; "
                         "expected kind gpu (or backend gloo for CPU ranks)")
    if backend == "gloo" and kinds != {"cpu"}:
        raise InputError(f"{source}: backend 'gloo' models CPU ranks only, found kinds {sorted(kinds)}; "
                         "expected kind cpu (or backend nccl for GPUs)")


def resolve_topology(spec: str, *, num_nodes: int = 1, **options: Any) -> nx.Graph:
    """A preset name (see :data:`PRESETS`) or a path to a YAML file (``num_nodes`` and
    options apply to presets only)."""
    if spec in PRESETS:
        return build_preset(spec, num_nodes=num_nodes, **options)
    if str(spec).endswith((".yaml", ".yml")) or Path(str(spec)).exists():
        if num_nodes != 1 or options:
            raise InputError(f"topology: {spec!r} is a YAML file; expected no --nodes or preset options with it "
                             "(describe every host in the file)")
        return load_topology_yaml(spec)
    raise InputError(f"topology: {spec!r} is not a preset; expected one of {', '.join(PRESETS)} or a YAML file path")


# --- queries ---------------------------------------------------------------------------

def rank_nodes(graph: nx.Graph) -> list:
    """Device nodes in rank order: by host, then local rank (torchrun's order)."""
    devs = [n for n, d in graph.nodes(data=True) if d.get(KIND) in DEVICE_KINDS]
    return sorted(devs, key=lambda n: (graph.nodes[n][HOST], graph.nodes[n][LOCAL_RANK]))


def max_ranks(graph: nx.Graph) -> int:
    """Number of ranks the topology holds (one per device)."""
    return len(rank_nodes(graph))


def edge_weight(u: Any, v: Any, d: dict[str, Any]) -> int:
    """Routing cost of a link: picoseconds per byte (integer, so equal-cost paths tie exactly
    for ECMP). Prefers wide links: NVLink over PCIe inside a node."""
    return max(1, round(1e12 / d[BANDWIDTH]))


def summarize(graph: nx.Graph) -> dict[str, Any]:
    """A JSON-able summary: devices, node kinds, links by type, per-device link bandwidth and
    the bottleneck links (narrowest link of each type)."""
    devs = rank_nodes(graph)
    kinds: dict[str, int] = {}
    for _, d in graph.nodes(data=True):
        kinds[d[KIND]] = kinds.get(d[KIND], 0) + 1
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
