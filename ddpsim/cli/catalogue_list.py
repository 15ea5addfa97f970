"""``ddpsim topology --list``: every GPU and system of the hardware catalogue, with its figures
and the documents they come from."""

from __future__ import annotations

import json
from typing import Any

#: the order precisions are printed in
PRECISIONS = ("fp8", "fp16", "bf16", "tf32", "fp32")


def _gpu_line(name: str, gpu: Any) -> str:
    f = gpu.dense_tflops
    flops = " ".join(f"{p} {getattr(f, p):g}" for p in PRECISIONS if getattr(f, p) is not None)
    nvlink = ("no NVLink" if gpu.nvlink is None else
              f"NVLink{gpu.nvlink.generation} {gpu.nvlink.links} x {gpu.nvlink.link_gbps:g} GB/s")
    cc = gpu.compute_capability
    return (f"  {name:<10} {gpu.model} ({gpu.architecture}, sm_{cc}), {gpu.sm_count} SMs; dense TFLOP/s {flops}; "
            f"{gpu.memory_gb:g} GB at {gpu.memory_gbps:g} GB/s; {nvlink}; PCIe Gen{gpu.pcie_gen}")


def _system_line(name: str, system: Any) -> str:
    links = {"nvswitch": f"NVSwitch{' with NVLS' if system.nvls else ''}",
             "nvlink-mesh": f"NVLink mesh of {len(system.nvlink_edges or ())} edges",
             "pcie": "PCIe only"}[system.interconnect]
    pcie = system.pcie
    tray = "" if system.gpus_per_tray is None else f" in trays of {system.gpus_per_tray}"
    gens = "" if not system.by_pcie_gen else "; pcie_gen " + ", ".join(
        f"{g}: {v.gpu}, {v.nic_gbit:g} Gb/s" for g, v in system.by_pcie_gen.items())
    return (f"  {name:<12} {system.gpus_per_node}x {system.gpu}{tray}, {links}; PCIe Gen{pcie.gen}, "
            f"{pcie.gpus_per_switch} GPUs + {pcie.nics_per_switch} NICs per switch; NIC {system.nic.gbit:g} Gb/s "
            f"{system.nic.fabric} ({system.nic.model}); {system.cpu.model} ({system.cpu.vendor}); "
            f"leaf radix {system.switch_radix}{gens}")


def _sources(sources: dict[str, str]) -> str:
    return "    sources: " + ", ".join(f"{figure} [{ref}]" for figure, ref in sources.items())


def print_catalogue(catalogue: Any, fmt: str) -> None:
    """Print the catalogue as a table (``fmt`` "table") or as JSON."""
    if fmt == "json":
        tables = {table: {k: v.model_dump() for k, v in getattr(catalogue, table).items()}
                  for table in ("gpus", "systems", "references")}
        print(json.dumps({**tables, "user_file": catalogue.user_file}, indent=1))
        return
    extra = "" if catalogue.user_file is None else f" + {catalogue.user_file}"
    print(f"hardware catalogue: ddpsim/hardware/catalogue.yaml{extra}")
    print("GPUs (retime --gpu NAME; TFLOP/s dense, GB/s per direction)")
    for name, gpu in catalogue.gpus.items():
        print(_gpu_line(name, gpu))
        print(_sources(gpu.sources))
    print("systems (topology presets; cpu-gloo: CPU ranks over TCP, see 'ddpsim topology --help')")
    for name, system in catalogue.systems.items():
        print(_system_line(name, system))
        print(f"    {system.description}")
        print(_sources(system.sources))
    print("references")
    for ref_id, ref in catalogue.references.items():
        print(f"  [{ref_id}] {ref.title} <{ref.url}>")
