"""``ddpsim sweep``: an ad-hoc bucket_cap_mb sweep of one trace on one cluster."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ddpsim.cli.args import add_format, add_verb, int_in, nonempty, text_table
from ddpsim.units import MAX_JOBS

DESCRIPTION = """\
Which bucket_cap_mb is fastest for this trace on this cluster, without writing a scenario?

Sweep DDP's bucket_cap_mb for one trace on one modelled cluster and print one row per
point (each point built and simulated as 'ddpsim run' builds a scenario's points, with the
same cost terms): p50/p95 step time, the breakdown (forward, backward compute, exposed
communication, optimizer), overlap and bucket count. For a full report (plots, Perfetto
traces, recommended plan) write a scenario and use 'ddpsim run'."""

EPILOG = """\
examples:
  ddpsim sweep --trace traces/mlp.cpu.json --set 'sweep.bucket_cap_mb=[null, 1]' --set 'sweep.bucket_cap_mb_list=[[0.2, 0.5], [1, 4]]'
  ddpsim sweep --trace traces/resnet50.a100.json --topology dgx-a100 --set cluster.nodes=2 \\
      --set 'sweep.bucket_cap_mb={min: 1, max: 200, points: 12}' --set ddp.comm_hook=bf16 --format json

Every scenario key is set with --set KEY=VALUE, as in a scenario file: sweep.bucket_cap_mb (a
list of MiB, null = not given, or a log range {min, max, points}; default [null, 1, 5, 25, 100];
the default point is always included, gains are measured against it), sweep.bucket_cap_mb_list
(bucket_cap_mb_list points after the caps, torch >= 2.13: per-bucket limits in MiB, the last
reused, named list=X+Y+...), cluster.nodes, world_size (default: every device of the cluster),
calibration, simulation.iterations, ddp.comm_hook..."""


def add_parser(subparsers: Any) -> None:
    from ddpsim.cli.run import add_scenario_flags

    p = add_verb(subparsers, "sweep", help="sweep bucket_cap_mb for a trace", description=DESCRIPTION, epilog=EPILOG)
    add_scenario_flags(p, topology_default="cpu-gloo")
    p.add_argument("--jobs", metavar="N", default=None, type=int_in(1, MAX_JOBS), help="parallel processes; default: the CPUs this process may use (its affinity)")
    p.add_argument("--out-dir", metavar="DIR", default=None, type=nonempty,
                   help="keep finished points in DIR/points/ (resumable)")
    add_format(p, "table", "csv", "json")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no progress lines, only the table")


def run(args: argparse.Namespace) -> int:
    from ddpsim.api import SWEEP_CAPS
    from ddpsim.cli.run import command_scenario
    from ddpsim.report.tables import to_csv_text
    from ddpsim.pipeline.sweep import fmt_s, run_sweep, sweep_table

    sc = command_scenario(args, "ddpsim sweep", sweep={"bucket_cap_mb": list(SWEEP_CAPS)})
    recs = run_sweep(sc, out_dir=args.out_dir, jobs=args.jobs, progress=not args.quiet)
    table = sweep_table(recs)
    if args.format == "csv":
        sys.stdout.write(to_csv_text(table))
    elif args.format == "json":
        import json

        sys.stdout.write(json.dumps({"world_size": recs[0].world_size, "backend": recs[0].backend,
                                     "points": table.to_dict("records")}, indent=1, default=str) + "\n")
    else:
        base = table.iloc[0]["iteration_p50_s"]
        hdr = ["point", "buckets", "p50 step", "p95 step", "fwd", "bwd compute", "exposed", "exp p95", "optim", "overlap", "vs default"]
        rows = [[r["point"], str(r["num_buckets"]), fmt_s(r["iteration_p50_s"]), fmt_s(r["iteration_p95_s"]), fmt_s(r["forward_s"]),
                 fmt_s(r["backward_compute_s"]), fmt_s(r["exposed_comm_s"]), fmt_s(r["exposed_comm_p95_s"]), fmt_s(r["optimizer_s"]),
                 f"{100 * r['overlap_ratio']:.1f}%", f"{100 * (base - r['iteration_p50_s']) / base:+.1f}%"] for r in table.to_dict("records")]
        print(f"{sc.cluster.topology} x {sc.cluster.nodes} node(s), world size {recs[0].world_size} ({recs[0].backend})")
        print("\n".join(text_table(hdr, rows, right=())))
    return 0
