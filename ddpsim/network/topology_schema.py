"""The declared inputs of :mod:`ddpsim.network.topology`, each key's type, bound and default once: the
presets' options (None: the catalogue's figure, :mod:`ddpsim.hardware.catalogue`) and the topology YAML
file. Counts are bounded integers (at most :data:`MAX_NODES` hosts, :data:`MAX_DEVICES_PER_NODE` devices
per host), bandwidths and latencies finite positive numbers, booleans strict (``nvls: "false"`` is
refused); a YAML node's key of another kind is refused, naming the kinds that take it. The graph as a
whole is checked by :mod:`ddpsim.network.topology_check`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from ddpsim.schema import Schema, rule
from ddpsim.units import MAX_NODES

#: the most devices (GPUs or CPU ranks) one host may have
MAX_DEVICES_PER_NODE = 1024
#: the widest link or fastest memory accepted, GB/s (or Gb/s for a NIC)
MAX_GBPS = 1e6
#: the longest latency accepted, microseconds (one second)
MAX_LATENCY_US = 1e6

NODE_KINDS = ("gpu", "cpu", "nvswitch", "pcie_switch", "host_bridge", "nic", "leaf", "spine", "loopback", "eth_switch")
#: ``sys``: the link between two CPU sockets of a host (QPI/UPI, Infinity Fabric; NCCL's LINK_SYS)
LINK_TYPES = ("nvlink", "pcie", "net", "loopback", "ethernet", "sys")

PerNode = Annotated[int, Field(ge=1, le=MAX_DEVICES_PER_NODE)]
Gbps = Annotated[float, Field(gt=0, le=MAX_GBPS, allow_inf_nan=False)]
LatencyUs = Annotated[float, Field(gt=0, le=MAX_LATENCY_US, allow_inf_nan=False)]
Radix = Annotated[int, Field(ge=2, le=MAX_NODES)]


class FabricOptions(Schema):
    """The leaf/spine fabric between hosts (``_add_fabric``)."""

    fabric: Literal["rail", "fat-tree"] = "rail"
    oversubscription: Annotated[float, Field(ge=1, le=1e3, allow_inf_nan=False)] = 1.0
    leaf_radix: Radix | None = None
    num_spines: Annotated[int, Field(ge=1, le=MAX_NODES)] = 4


def one_of(tp: type, values: tuple) -> Any:
    """``tp`` restricted to ``values`` (a value of another type gets ``tp``'s own error)."""
    return Annotated[tp, rule(f"one of {', '.join(map(str, values))}", lambda v: type(v) is not tp or v in values)]


#: a PCIe generation a preset can build
PcieGen = one_of(int, (3, 4, 5))


class GpuOptions(FabricOptions):
    """Options of every GPU preset (None: the catalogue's figure); the direct NVLink mesh presets
    (``dgx-v100``) take these alone: the first ``gpus_per_node`` GPUs of the mesh and the NVLinks
    between them."""

    gpus_per_node: PerNode | None = None
    nic_gbit: Gbps | None = None
    pcie_gen: PcieGen | None = None


class DgxOptions(GpuOptions):
    """Options of the NVSwitch presets (``dgx-h100``, ``gb200-nvl72`` ...)."""

    nvlinks_per_gpu: Annotated[int, Field(ge=1, le=64)] | None = None


class PcieOptions(GpuOptions):
    """Options of the PCIe presets (``pcie``, ``pcie-l40s``; ``pcie`` with ``pcie_gen: 5`` holds
    H100-PCIe GPUs and NDR 400 Gb/s NICs)."""

    gpus_per_switch: PerNode | None = None


class CpuGlooOptions(Schema):
    """Options of the ``cpu-gloo`` preset and their defaults. Loopback: Linux TCP over ``lo``
    moves a few GB/s per stream with ~10-20 us per small message through the kernel stack;
    Ethernet: 10 GbE, 25 us one way through NIC + switch + stack (gloo#21 / gloo#158 orders);
    a calibration measured on the machine (``executor collectives``) replaces them."""

    ranks_per_host: PerNode = 2
    loopback_gbps: Gbps = 4.0
    loopback_latency_us: LatencyUs = 15.0
    ethernet_gbit: Gbps = 10.0
    ethernet_latency_us: LatencyUs = 25.0
    memory_gbps: Gbps = 10.0
    reduce_gbps: Gbps = 4.0


def _node_id(value: Any) -> Any:
    """A node id: a string, or an integer read as its decimal string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise ValueError("expected a string or an integer")
    return value


#: the YAML node keys that only some kinds take
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "local_rank": ("gpu", "cpu"), "device_model": ("gpu", "cpu"), "compute_capability": ("gpu", "cpu"),
    "memory_bandwidth_gbps": ("gpu", "cpu"), "sm_count": ("gpu",), "reduce_bandwidth_gbps": ("cpu",),
    "nvls": ("nvswitch",), "rail": ("nic",),
}


class NodeDoc(Schema):
    """One entry of ``nodes``; absent keys: its kind's :data:`~ddpsim.network.topology.YAML_NODE_DEFAULTS`."""

    id: str
    kind: one_of(str, NODE_KINDS)
    host: Annotated[int, Field(ge=-1, le=MAX_NODES)] | None = None
    local_rank: Annotated[int, Field(ge=0, le=MAX_DEVICES_PER_NODE)] | None = Field(default=None, validate_default=True)
    device_model: str | None = None
    compute_capability: Annotated[int, Field(ge=0, le=1000)] | None = None
    memory_bandwidth_gbps: Gbps | None = None
    sm_count: Annotated[int, Field(ge=1, le=1 << 16)] | None = None
    reduce_bandwidth_gbps: Gbps | None = None
    nvls: bool | None = None
    rail: Annotated[int, Field(ge=0, le=MAX_DEVICES_PER_NODE)] | None = None

    _id = field_validator("id", mode="before")(_node_id)

    @field_validator(*KIND_KEYS)
    @classmethod
    def _of_its_kind(cls, v: Any, info: ValidationInfo) -> Any:
        kinds, kind = KIND_KEYS[info.field_name], info.data.get("kind")
        if kind is None:
            return v
        if v is not None and kind not in kinds:
            raise ValueError(f"no {info.field_name} on a {kind} node (it is a key of kind {' or '.join(kinds)})")
        if v is None and info.field_name == "local_rank" and kind in kinds:
            raise ValueError(f"an integer in [0, {MAX_DEVICES_PER_NODE}]: a {kind} node's index on its host")
        return v


class LinkDoc(Schema):
    """One entry of ``links``: GB/s per direction, one-way microseconds."""

    a: str
    b: str
    bandwidth_gbps: Gbps
    latency_us: LatencyUs
    link_type: one_of(str, LINK_TYPES) = "pcie"
    num_links: Annotated[int, Field(ge=1, le=1024)] | None = None

    _ends = field_validator("a", "b", mode="before")(_node_id)


class TopologyDoc(Schema):
    """A topology YAML file (:func:`ddpsim.network.topology.load_topology_yaml`); ``name``
    defaults to the file's stem, ``description`` to a line naming the file."""

    name: str | None = None
    backend: Literal["nccl", "gloo"] = "nccl"
    cpu_vendor: Literal["intel", "amd"] = "intel"
    description: str | None = None
    nodes: Annotated[list[NodeDoc], rule("a non-empty list of nodes", lambda v: v != [])]
    links: Annotated[list[LinkDoc], rule("a non-empty list of links", lambda v: v != [])]
