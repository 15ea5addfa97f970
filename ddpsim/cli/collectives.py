"""``ddpsim collectives``: predicted all-reduce (or broadcast) times, as nccl-tests prints them."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from ddpsim.cli.args import add_format, add_verb, int_in, lower, nonempty, refuse
from ddpsim.errors import InputError
from ddpsim.units import MAX_SIZE_BYTES, MAX_WORLD_SIZE, parse_size_bytes

DESCRIPTION = """\
How long does one all-reduce (or broadcast) of each message size take on this topology?

Predict the time of one all-reduce (or broadcast) per message size on a topology, and print
what nccl-tests' all_reduce_perf prints: size, time, algbw = size / time and
busbw = algbw * 2(n-1)/n (GB/s = 1e9 B/s), plus the algorithm and protocol chosen.

NCCL topologies use NCCL v2.30.7's own tuning model (latencies, per-channel bandwidths,
protocol factors, tree corrections, ring plateau) over the channels found by a search of
the topology graph; NCCL's choice is the fastest (algorithm, protocol) unless forced with
--algorithm / --protocol (like NCCL_ALGO / NCCL_PROTO; 'hierarchical' = intra-node
reduce-scatter + inter-node all-reduce + intra-node all-gather, never NCCL's default).
The cpu-gloo topology uses gloo's ring (1 MiB segments). --calibration replaces the model
with measured curves (piecewise alpha-beta between the measured sizes): the executor's
calibration JSON, or your cluster's own nccl-tests all_reduce_perf output saved as text."""

EPILOG = """\
examples:
  ddpsim collectives --topology dgx-a100 --nodes 2 --sizes 1KiB,1MiB,64MiB,1GiB
  ddpsim collectives --topology dgx-h100 --algorithm ring --format csv

--collective broadcast runs NCCL's ring (the only broadcast algorithm NCCL has): --algorithm
is refused with it. A forced --protocol the chosen algorithm cannot run is refused too."""

DEFAULT_SIZES = "1KiB,4KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,64MiB,256MiB,1GiB"


def add_parser(subparsers: Any) -> None:
    from ddpsim.cli.topology import add_catalogue_flag, add_preset_flags
    from ddpsim.network.nccl import FORCEABLE_ALGORITHMS, PROTOCOLS

    p = add_verb(subparsers, "collectives", help="predicted collective times per size (nccl-tests style)",
                 description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--topology", required=True, metavar="PRESET|FILE", type=nonempty,
                   help="a preset name or a topology YAML file")
    add_preset_flags(p, "a preset option (repeatable); see 'ddpsim topology --help'")
    p.add_argument("--ranks", default=None, type=int_in(1, MAX_WORLD_SIZE), metavar="R", help="ranks in the group; default: every device")
    p.add_argument("--sizes", default=DEFAULT_SIZES, metavar="LIST", type=parse_sizes,
                   help=f"comma-separated sizes (B, KiB, MiB, GiB, KB, MB, GB); default: {DEFAULT_SIZES}")
    p.add_argument("--calibration", metavar="FILE", default=None, type=nonempty, help="calibration JSON measured by the executor, or an nccl-tests all_reduce_perf log")
    p.add_argument("--algorithm", default=None, type=lower, choices=FORCEABLE_ALGORITHMS,
                   help="force an algorithm (NCCL only); default: NCCL's choice")
    p.add_argument("--protocol", default=None, type=lower, choices=PROTOCOLS,
                   help="force a protocol (NCCL only); default: NCCL's choice")
    p.add_argument("--collective", default="allreduce", choices=("allreduce", "broadcast"),
                   help="collective to cost; default: allreduce")
    add_format(p, "table", "json", "csv")
    add_catalogue_flag(p)


def parse_sizes(text: str) -> list[int]:
    """``1KiB,1MiB`` -> [1024, 1048576]; refused for an empty item or a size outside (0, 1 TiB]."""
    expected = "a comma list of sizes in (0, 1 TiB] like 1KiB,1MiB"
    items = str(text).split(",")
    if not all(i.strip() for i in items):
        raise refuse(text, expected)
    sizes = []
    for item in items:
        try:
            size = parse_size_bytes(item.strip(), "--sizes")
        except InputError:
            size = 0
        if not 0 < size <= MAX_SIZE_BYTES:
            raise refuse(item, expected)
        sizes.append(size)
    return sizes


def check_forced(args: argparse.Namespace, backend: str, rows: list[dict[str, Any]]) -> None:
    """Refuse a forced algorithm or protocol the model does not run for this collective."""
    if args.collective == "broadcast" and args.algorithm is not None:
        raise InputError(f"--algorithm: {args.algorithm!r} is not accepted with --collective broadcast; expected none "
                         f"({'gloo' if backend == 'gloo' else 'NCCL'} broadcasts with its one algorithm)")
    if args.calibration is not None and (args.algorithm or args.protocol):
        raise InputError(f"--algorithm/--protocol: {args.algorithm or args.protocol!r} is not accepted with --calibration; "
                         "expected neither (the measured curves replace the model)")
    ran = sorted({r["protocol"] for r in rows} - {"none"})
    if args.protocol is not None and ran not in ([], [args.protocol]):
        raise InputError(f"--protocol: {args.protocol!r} is not accepted for {args.collective} here; expected none or "
                         f"{', '.join(ran)} (what the model runs)")


def run(args: argparse.Namespace) -> int:
    from ddpsim.calibration.loader import load_calibration
    from ddpsim.network.collective_cost import build_comm_model
    from ddpsim.cli.topology import resolve_graph
    from ddpsim.hardware.catalogue import load_catalogue
    from ddpsim.network.topology import rank_nodes

    algo, proto = args.algorithm, args.protocol
    graph = resolve_graph(args, load_catalogue(args.catalogue))
    if args.collective == "broadcast" and algo is not None:
        check_forced(args, graph.graph.get("backend"), [])
    ranks = len(rank_nodes(graph)) if args.ranks is None else args.ranks
    cal = load_calibration(args.calibration) if args.calibration else None
    model = build_comm_model(graph, ranks, calibration=cal, algorithm=algo, protocol=proto)
    est = model.estimate_allreduce if args.collective == "allreduce" else model.estimate_broadcast
    rows = [dataclasses.asdict(est(s)) for s in args.sizes]
    check_forced(args, graph.graph.get("backend"), rows)
    if args.format == "json":
        print(json.dumps(rows, indent=1))
        return 0
    if args.format == "csv":
        from ddpsim.report.tables import to_csv_text

        print(to_csv_text(rows, float_format=None), end="")
        return 0
    d = model.describe()
    if d.get("model") == "nccl":
        head = (f"NCCL {d['nccl_version']} tuning model; ring {d['ring_channels']} ch x {d['ring_bw_per_channel_gbps']:g} GB/s"
                + (f", NVLS {d['nvls_channels']} ch x {d['nvls_bw_per_channel_gbps']:g} GB/s" if d["nvls_channels"] else ""))
    elif d.get("model") == "calibrated":
        head = (f"calibrated ({d['allreduce_points']} all-reduce points measured at {d['calibration_world_size']} ranks"
                f"{', rescaled' if d['rescaled_to_num_ranks'] else ''})")
    else:
        head = (f"gloo ring; hop {d['hop_latency_s'] * 1e6:.1f} us, {d['hop_bandwidth_bytes_per_s'] / 1e9:.2f} GB/s; "
                f"reduce {d['reduce_bandwidth_bytes_per_s'] / 1e9:.2f} GB/s")
    print(f"# ddpsim collectives: {args.collective} on {graph.graph['name']} x{args.nodes} node(s), {ranks} ranks: "
          f"{head}")
    print(f"# {'size':>12} {'time':>12} {'algbw':>8} {'busbw':>8}  {'algorithm':<12} {'protocol':<8}")
    print(f"# {'(B)':>12} {'(us)':>12} {'(GB/s)':>8} {'(GB/s)':>8}")
    for r in rows:
        print(f"  {r['size_bytes']:>12} {r['time_s'] * 1e6:>12.2f} {r['algbw_gbps']:>8.2f} {r['busbw_gbps']:>8.2f}  "
              f"{r['algorithm']:<12} {r['protocol']}")
    return 0
