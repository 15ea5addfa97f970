"""The declared format of a hardware catalogue file (:mod:`ddpsim.hardware.catalogue`): its
``references`` (the datasheets, user guides and source files the figures come from), ``gpus`` and
``systems`` (node layouts), every figure group naming an existing reference under ``sources``.
Units are in the key names: ``tflops`` = 1e12 FLOP/s dense (no sparsity), ``gbps`` = GB/s (1e9
B/s) per direction, ``gb`` = 1e9 bytes, ``gbit`` = Gb/s line rate."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ddpsim.errors import require
from ddpsim.schema import Schema, format_version

#: the widest link, fastest memory or highest FLOP/s figure accepted, in the key's unit
MAX_FIGURE = 1e6
#: the most GPUs of one node (an NVLink domain of a rack counts as one node)
MAX_GPUS_PER_NODE = 1024

Figure = Annotated[float, Field(gt=0, le=MAX_FIGURE, allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Id = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$")]
Text = Annotated[str, Field(min_length=1, max_length=1000)]
PcieGen = Annotated[int, Field(ge=3, le=6)]
GpuIndex = Annotated[int, Field(ge=0, lt=MAX_GPUS_PER_NODE)]
Count = Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE)]


class Reference(Schema):
    """A document a figure comes from."""

    title: Text
    url: Annotated[str, Field(min_length=8, max_length=1000, pattern=r"^https?://")]


class Sourced(Schema):
    """An entry whose ``sources`` name exactly one reference per figure group of ``FIGURES``
    (a group named after an optional field only when the field is given)."""

    FIGURES: ClassVar[tuple[str, ...]] = ()

    @field_validator("sources", check_fields=False)
    @classmethod
    def _every_figure_sourced(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        figures = [f for f in cls.FIGURES if info.data.get(f, f) is not None]
        missing, extra = [f for f in figures if f not in v], [k for k in v if k not in figures]
        if missing or extra:
            raise ValueError(f"a reference id for each of {', '.join(figures)}"
                             + (f" (missing {', '.join(missing)})" if missing else "")
                             + (f" (no figure {', '.join(extra)})" if extra else ""))
        return v


class DenseFlops(Schema):
    """Peak dense (no sparsity) throughput per precision, TFLOP/s. ``bf16``, ``fp8`` and ``tf32``
    are absent on GPUs without tensor cores for them (V100: fp16 only)."""

    fp16: Figure
    bf16: Figure | None = None
    fp8: Figure | None = None
    tf32: Figure | None = None
    fp32: Figure


class Nvlink(Schema):
    """A GPU's NVLinks: generation, how many, GB/s per link per direction (datasheet).
    ``fabric``: ``nvlink`` (the topology takes NCCL's usable per-link figure for the compute
    capability, ``link_gbps`` is the datasheet's) or ``infinity-fabric`` (AMD's xGMI links,
    held here too: the topology takes ``link_gbps`` itself)."""

    generation: Annotated[int, Field(ge=1, le=10)]
    links: Annotated[int, Field(ge=1, le=64)]
    link_gbps: Figure
    fabric: Literal["nvlink", "infinity-fabric"] = "nvlink"


class Gpu(Sourced):
    """One GPU model."""

    model: Name = Field(description="the model name devices carry, e.g. H100-SXM5-80GB")
    architecture: Name
    compute_capability: Annotated[int, Field(ge=10, le=1000)] = Field(description="major * 10 + minor, e.g. 90")
    sm_count: Count
    memory_gb: Figure
    memory_gbps: Figure
    dense_tflops: DenseFlops
    nvlink: Nvlink | None = None
    pcie_gen: PcieGen
    summary: Text = Field(description="one line: the headline figures and the document they come from")
    sources: dict[str, Id]

    FIGURES = ("sm_count", "dense_tflops", "memory", "nvlink", "pcie_gen")


class Pcie(Schema):
    """A node's PCIe tree: each switch holds ``gpus_per_switch`` GPUs and ``nics_per_switch`` NICs;
    switches hang from the host bridge. ``switch_gen``: the generation of the switches' uplinks and
    NIC links where it is newer than the GPUs' (default: ``gen``)."""

    gen: PcieGen
    gpus_per_switch: Count
    nics_per_switch: Annotated[int, Field(ge=0, le=64)]
    switch_gen: PcieGen | None = None


class Nic(Schema):
    """The compute (east-west) NICs: line rate, fabric, model."""

    gbit: Figure
    fabric: Literal["infiniband", "ethernet"]
    model: Name


class Cpu(Schema):
    """The host CPUs (NCCL's tuning depends on the vendor)."""

    vendor: Literal["intel", "amd", "arm"]
    model: Name


class PcieVariant(Schema):
    """What a PCIe system holds at another PCIe generation (the ``pcie_gen`` option)."""

    gpu: Id
    nic_gbit: Figure
    switch_radix: Annotated[int, Field(ge=2, le=4096)]


class System(Sourced):
    """One node layout (a preset of ``ddpsim topology``)."""

    description: Text
    gpu: Id
    gpus_per_node: Count
    interconnect: Literal["nvswitch", "nvlink-mesh", "pcie"]
    nvls: bool = Field(False, description="nvswitch only: the switch reduces in the fabric (NVLink SHARP)")
    nvlink_edges: list[Annotated[list[GpuIndex], Field(min_length=3, max_length=3)]] | None = Field(
        None, description="nvlink-mesh only: [gpu a, gpu b, NVLinks between them]")
    gpus_per_tray: Count | None = Field(None, description="GPUs per compute tray when a node (an NVLink domain) "
                                                          "spans several trays, each with its own CPUs")
    pcie: Pcie
    nic: Nic
    cpu: Cpu
    switch_radix: Annotated[int, Field(ge=2, le=4096)] = Field(description="ports of a leaf switch of the fabric")
    by_pcie_gen: dict[PcieGen, PcieVariant] = Field(default_factory=dict)
    sources: dict[str, Id]
    FIGURES = ("layout", "pcie", "nic", "cpu", "switch_radix")

    @model_validator(mode="after")
    def _layout(self) -> System:
        """NVLS only on a switch, NVLink edges with a mesh only, trays that divide the node, PCIe variants
        of a PCIe system only."""
        gpn, edges = self.gpus_per_node, self.nvlink_edges
        require(not self.nvls or self.interconnect == "nvswitch", "nvls", self.nvls,
                "false (NVLS needs interconnect nvswitch)")
        require((self.interconnect == "nvlink-mesh") == (edges is not None), "nvlink_edges", edges,
                "a list of [gpu a, gpu b, links] with interconnect nvlink-mesh, and only with it")
        for a, b, links in edges or ():
            require(a != b and max(a, b) < gpn and links >= 1, "nvlink_edges", edges,
                    f"edges of >= 1 link between two different GPUs in [0, {gpn}), not {a}-{b} x {links}")
        require(self.gpus_per_tray is None or gpn % self.gpus_per_tray == 0, "gpus_per_tray", self.gpus_per_tray,
                f"a divisor of gpus_per_node ({gpn})")
        require(not self.by_pcie_gen or self.interconnect == "pcie", "by_pcie_gen",
                {g: v.model_dump() for g, v in self.by_pcie_gen.items()},
                "{} (variants by PCIe generation need interconnect pcie)")
        return self


class CatalogueFile(Schema):
    """A catalogue file: the bundled one, or a user's that adds GPUs and systems to it."""

    version: format_version(1)
    references: dict[Id, Reference] = Field(default_factory=dict)
    gpus: dict[Id, Gpu] = Field(default_factory=dict)
    systems: dict[Id, System] = Field(default_factory=dict)
