"""``ddpsim topology``: summarise (and draw) a cluster topology; ``--list``: every GPU and system
of the hardware catalogue, with its figures and the documents they come from."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ddpsim.cli.args import add_format, add_verb, int_in, is_folder, nonempty, refuse
from ddpsim.errors import InputError, require, shorten
from ddpsim.units import MAX_NODES

DESCRIPTION = """\
What devices, links and NCCL channels does this cluster topology have?

Summarise a cluster topology: a preset (a system of the hardware catalogue: dgx-a100, dgx-h100,
pcie, dgx-v100, dgx-h200, dgx-b200, gb200-nvl72, pcie-l40s, mi300x-platform, mi325x-platform,
mi355x-platform, hgx-h100-4, gh200-quad; or cpu-gloo) or a custom YAML file.
Prints the devices, the elements (NVSwitches, PCIe switches, NICs, leaf and spine switches), the
links by type with their bandwidth per direction (GB/s = 1e9 B/s, as NCCL models them), the
narrowest link of each type, and the channels NCCL's graph search finds for all the devices
(nChannels x GB/s per channel, and the link that bounds them).

Preset options are given with --set KEY=VALUE (repeatable):
  dgx-a100 / dgx-h100: gpus_per_node, nvlinks_per_gpu, nic_gbit, pcie_gen,
                       fabric (rail | fat-tree), oversubscription, leaf_radix, num_spines
                       (the same for the NVSwitch systems dgx-h200, dgx-b200, gb200-nvl72;
                       on gb200-nvl72 a node is a rack, gpus_per_node its NVLink domain)
  dgx-v100:            gpus_per_node (the first GPUs of the mesh), nic_gbit, pcie_gen, fabric options
                       (the same for the other direct meshes: the mi*-platform presets,
                       hgx-h100-4, gh200-quad)
  pcie:                gpus_per_node, gpus_per_switch, pcie_gen (4 | 5), nic_gbit, fabric options
                       (pcie-l40s: the same, Gen4 only)
  cpu-gloo:            ranks_per_host, loopback_gbps, loopback_latency_us, ethernet_gbit,
                       ethernet_latency_us, memory_gbps, reduce_gbps"""

EPILOG = """\
examples:
  ddpsim topology dgx-a100 --draw dgx-a100.png
  ddpsim topology dgx-h100 --nodes 4 --set fabric=fat-tree --set oversubscription=2 --format json"""


#: the image formats --draw writes (by the file's suffix)
DRAW_SUFFIXES = (".png", ".svg", ".pdf")


def drawing_path(text: str) -> str:
    """``--draw``'s file: a path ending in one of :data:`DRAW_SUFFIXES`, not a folder."""
    if Path(text).suffix.lower() not in DRAW_SUFFIXES or is_folder(text, "an image file path"):
        raise refuse(text, f"an image file path ending in {', '.join(DRAW_SUFFIXES)}")
    return text


def add_preset_flags(p: argparse.ArgumentParser, set_help: str) -> None:
    """``--nodes N`` and ``--set KEY=VALUE`` (repeatable): a preset's hosts and options."""
    p.add_argument("--nodes", default=1, type=int_in(1, MAX_NODES), metavar="N",
                   help="number of hosts (presets only); default: 1")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="options", help=set_help)


def resolve_graph(args: argparse.Namespace, catalogue: Any) -> Any:
    """The topology graph of ``args.topology`` on ``args.nodes`` hosts with ``--set``'s options (each
    value an int, else a float, else a string)."""
    from ddpsim.network.topology import resolve_topology

    options: dict[str, Any] = {}
    for pair in args.options or []:
        require("=" in pair, "--set", pair, "KEY=VALUE, e.g. nvlinks_per_gpu=8")
        k, v = pair.split("=", 1)
        for conv in (int, float, str.strip):
            try:
                options[k.strip().replace("-", "_")] = conv(v)
                break
            except ValueError:
                continue
    return resolve_topology(args.topology, num_nodes=args.nodes, catalogue=catalogue, **options)


def add_catalogue_flag(p: argparse.ArgumentParser) -> None:
    """``--catalogue FILE``: a hardware catalogue YAML adding GPUs and systems to the bundled one."""
    p.add_argument("--catalogue", metavar="FILE", default=None, type=nonempty,
                   help="a hardware catalogue YAML adding your GPUs and systems (format: ddpsim/hardware/catalogue.yaml)")


def add_parser(subparsers: Any) -> None:
    p = add_verb(subparsers, "topology", help="summarise and draw a cluster topology", description=DESCRIPTION,
                 epilog=EPILOG)
    p.add_argument("topology", metavar="PRESET|FILE", type=nonempty, nargs="?", default=None,
                   help="a preset name or a topology YAML file")
    p.add_argument("--list", action="store_true", help="list the catalogue's GPUs and systems with their figures and sources")
    add_catalogue_flag(p)
    add_preset_flags(p, "a preset option (repeatable); see above")
    p.add_argument("--draw", metavar="PNG", default=None, type=drawing_path, help="draw the graph to this image file")
    add_format(p, "table", "json")


def draw_topology(graph: Any, path: str) -> None:
    """Draw ``graph`` in layers (devices at the bottom, spines on top) to ``path``."""
    import matplotlib
    import networkx as nx

    from ddpsim.io import ensure_dir
    from ddpsim.network.topology import BANDWIDTH, HOST, KIND, LINK_TYPE
    from ddpsim.report.plots import new_figure

    layer = {"gpu": 0, "cpu": 0, "nvswitch": 1, "loopback": 1, "pcie_switch": 1, "host_bridge": 2, "nic": 2,
             "leaf": 3, "eth_switch": 3, "spine": 4}

    def order(item: Any) -> tuple:
        name, d = item
        return (d[HOST] if d[HOST] >= 0 else 1 << 30,
                [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))])

    rows: dict[int, list] = {}  # layer -> nodes in host order, spread left to right
    for n, d in sorted(graph.nodes(data=True), key=order):
        rows.setdefault(layer.get(d[KIND], 2), []).append(n)
    pos = {n: ((i + 0.5) / len(ns), float(y)) for y, ns in rows.items() for i, n in enumerate(ns)}
    colors = {"nvlink": "tab:green", "pcie": "tab:blue", "net": "tab:red", "loopback": "tab:gray",
              "ethernet": "tab:orange"}
    n = graph.number_of_nodes()
    fig = new_figure(figsize=(max(8, min(40, n * 0.35)), 6))
    ax = fig.subplots()
    top = max(d[BANDWIDTH] for _, _, d in graph.edges(data=True))
    for lt, c in colors.items():
        es = [(u, v) for u, v, d in graph.edges(data=True) if d[LINK_TYPE] == lt]
        if es:
            widths = [0.5 + 3.0 * graph.edges[e][BANDWIDTH] / top for e in es]
            nx.draw_networkx_edges(graph, pos, edgelist=es, edge_color=c, width=widths, ax=ax, label=lt)
    kinds = sorted({d[KIND] for _, d in graph.nodes(data=True)})
    cmap = matplotlib.colormaps["tab10"]
    for i, k in enumerate(kinds):
        ns = [x for x, d in graph.nodes(data=True) if d[KIND] == k]
        nx.draw_networkx_nodes(graph, pos, nodelist=ns, node_color=[cmap(i % 10)], node_size=120, ax=ax, label=k)
    if n <= 40:
        nx.draw_networkx_labels(graph, pos, font_size=6, ax=ax)
    ax.set_title(f"{graph.graph.get('name')}: {graph.graph.get('description', '')}", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    ax.axis("off")
    ensure_dir(Path(path).parent)
    fig.savefig(path, dpi=120, bbox_inches="tight")


# ---- --list: the hardware catalogue ---------------------------------------------------------

#: the order precisions are printed in
PRECISIONS = ("fp8", "fp16", "bf16", "tf32", "fp32")


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
        f = gpu.dense_tflops
        flops = " ".join(f"{p} {getattr(f, p):g}" for p in PRECISIONS if getattr(f, p) is not None)
        nvlink = ("no NVLink" if gpu.nvlink is None else
                  f"NVLink{gpu.nvlink.generation} {gpu.nvlink.links} x {gpu.nvlink.link_gbps:g} GB/s")
        print(f"  {name:<10} {gpu.model} ({gpu.architecture}, sm_{gpu.compute_capability}), "
              f"{gpu.sm_count} SMs; dense TFLOP/s {flops}; {gpu.memory_gb:g} GB at {gpu.memory_gbps:g} GB/s; "
              f"{nvlink}; PCIe Gen{gpu.pcie_gen}")
        print(_sources(gpu.sources))
    print("systems (topology presets; cpu-gloo: CPU ranks over TCP, see 'ddpsim topology --help')")
    for name, system in catalogue.systems.items():
        links = {"nvswitch": f"NVSwitch{' with NVLS' if system.nvls else ''}",
                 "nvlink-mesh": f"NVLink mesh of {len(system.nvlink_edges or ())} edges",
                 "pcie": "PCIe only"}[system.interconnect]
        pcie = system.pcie
        tray = "" if system.gpus_per_tray is None else f" in trays of {system.gpus_per_tray}"
        gens = "" if not system.by_pcie_gen else "; pcie_gen " + ", ".join(
            f"{g}: {v.gpu}, {v.nic_gbit:g} Gb/s" for g, v in system.by_pcie_gen.items())
        print(f"  {name:<12} {system.gpus_per_node}x {system.gpu}{tray}, {links}; PCIe Gen{pcie.gen}, "
              f"{pcie.gpus_per_switch} GPUs + {pcie.nics_per_switch} NICs per switch; "
              f"NIC {system.nic.gbit:g} Gb/s {system.nic.fabric} ({system.nic.model}); "
              f"{system.cpu.model} ({system.cpu.vendor}); leaf radix {system.switch_radix}{gens}")
        print(f"    {system.description}")
        print(_sources(system.sources))
    print("references")
    for ref_id, ref in catalogue.references.items():
        print(f"  [{ref_id}] {ref.title} <{ref.url}>")


def run(args: argparse.Namespace) -> int:
    from ddpsim.hardware.catalogue import load_catalogue
    from ddpsim.network.graph_search import search_graphs
    from ddpsim.network.routing import place_ranks
    from ddpsim.network.topology import rank_nodes, summarize

    catalogue = load_catalogue(args.catalogue)
    if args.list:
        if args.topology is not None:
            raise InputError(f"--list: given with {shorten(args.topology)}; expected --list alone or a topology")
        print_catalogue(catalogue, args.format)
        return 0
    if args.topology is None:
        raise InputError("topology: missing; expected a preset name or a topology YAML file (or --list)")
    graph = resolve_graph(args, catalogue)
    summary = summarize(graph)
    if graph.graph["backend"] == "nccl":
        info = search_graphs(graph, place_ranks(graph, len(rank_nodes(graph))))
        summary["nccl_graph"] = {
            "ring_channels": info.ring.num_channels, "ring_bw_per_channel_gbps": info.ring.bw_intra_gbps,
            "ring_bus_bw_gbps": info.ring.num_channels * info.ring.bw_intra_gbps,
            "bounded_by": info.ring.bottleneck,
            "nvls_channels": info.nvls.num_channels if info.nvls else 0,
            "nvls_bw_per_channel_gbps": info.nvls.bw_intra_gbps if info.nvls else 0.0,
            "nvlink_intra": info.ring.nvlink_intra, "ll128_enabled": info.ll128_enabled,
        }
    if args.draw:
        draw_topology(graph, args.draw)
        summary["drawing"] = args.draw
    if args.format == "json":
        print(json.dumps(summary, indent=1, default=str))
        return 0
    print(f"topology  {summary['name']} ({summary['backend']}): {summary['description']}")
    print(f"devices   {summary['num_devices']} x {summary['device_model']} on {summary['num_nodes']} host(s)")
    print("elements  " + ", ".join(f"{v} {k}" for k, v in sorted(summary["node_kinds"].items())))
    print(f"links     {summary['num_links']}")
    print(f"  {'type':<9} {'count':>5} {'min GB/s':>9} {'max GB/s':>9}  narrowest")
    for lt, t in sorted(summary["links"].items()):
        print(f"  {lt:<9} {t['count']:>5} {t['min_bandwidth_gbps']:>9.1f} {t['max_bandwidth_gbps']:>9.1f}  {t['narrowest']}")
    bw = ", ".join(f"{k} {v:.1f} GB/s" for k, v in summary["device0_link_bandwidth_gbps"].items())
    print(f"device 0  {bw}")
    if "nccl_graph" in summary:
        g = summary["nccl_graph"]
        line = (f"nccl      ring {g['ring_channels']} ch x {g['ring_bw_per_channel_gbps']:g} GB/s = "
                f"{g['ring_bus_bw_gbps']:.1f} GB/s busbw (bounded by {g['bounded_by'] or 'n/a'})")
        if g["nvls_channels"]:
            line += f"; NVLS {g['nvls_channels']} ch x {g['nvls_bw_per_channel_gbps']:g} GB/s"
        print(line + f"; LL128 {'on' if g['ll128_enabled'] else 'off'}")
    if args.draw:
        print(f"drawing   {args.draw}")
    return 0
