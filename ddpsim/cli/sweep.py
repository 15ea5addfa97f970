"""``ddpsim sweep``: an ad-hoc bucket_cap_mb sweep of one trace on one cluster."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ddpsim.cli.args import parse_int

DESCRIPTION = """\
Sweep DDP's bucket_cap_mb for one trace on one modelled cluster and print one row per
point (each point built and simulated as 'ddpsim run' builds a scenario's points, with the
same cost terms): p50/p95 step time, the breakdown (forward, backward compute, exposed
communication, optimizer), overlap and bucket count. Nothing is written unless --out-dir
is given (then finished points are kept in <out-dir>/points/ and reused by a rerun).

For a full report (plots, Perfetto traces, recommended plan) write a scenario and use
'ddpsim run'."""

EPILOG = """\
examples:
  ddpsim sweep --trace traces/mlp.cpu.json --topology cpu-gloo --world-size 2
  ddpsim sweep --trace traces/gpt2-1.5b.h100.json --topology dgx-h100 --nodes 8 \\
      --bucket-cap-mb default,5,25,100,200 --jobs 2 --format csv
  ddpsim sweep --trace traces/mlp.cpu.json --bucket-cap-mb default,1 --bucket-cap-mb-list 0.2,0.5 --bucket-cap-mb-list 1,4
  ddpsim sweep --trace traces/resnet50.a100.json --topology dgx-a100 --nodes 2 \\
      --bucket-cap-mb 1:200:12 --format json

--bucket-cap-mb takes a comma list of MiB values ('default' = not given) or a log range
MIN:MAX:POINTS; the default point is always included (gains are measured against it).
Each --bucket-cap-mb-list X,Y,... (repeatable) adds a bucket_cap_mb_list point after the caps
(torch >= 2.13: per-bucket limits in MiB, the last reused), named list=X+Y+...."""

FORMATS = ("table", "csv", "json")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("sweep", help="sweep bucket_cap_mb for a trace", description=DESCRIPTION,
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", metavar="FILE", required=True, help="trace JSON written by 'ddpsim trace'")
    p.add_argument("--topology", metavar="SPEC", default="cpu-gloo",
                   help="preset (dgx-a100, dgx-h100, pcie, cpu-gloo) or topology YAML; default: cpu-gloo")
    p.add_argument("--nodes", metavar="N", default="1", help="number of nodes (presets); default: 1")
    p.add_argument("--world-size", metavar="N", default=None, help="ranks; default: every device of the cluster")
    p.add_argument("--bucket-cap-mb", metavar="LIST", default="default,1,5,25,100",
                   help="comma list of MiB ('default' = not given) or MIN:MAX:POINTS; default: default,1,5,25,100")
    p.add_argument("--bucket-cap-mb-list", metavar="X,Y,...", action="append", default=None,
                   help="a bucket_cap_mb_list point in MiB, e.g. 1,4,25 (repeatable)")
    p.add_argument("--comm-hook", metavar="HOOK", default="none", help="none, allreduce, fp16, bf16, powersgd; default: none")
    p.add_argument("--iterations", metavar="N", default="6", help="simulated iterations; default: 6")
    p.add_argument("--seed", metavar="N", default="0", help="seed of the jitter; default: 0")
    p.add_argument("--calibration", metavar="FILE", default=None, help="calibration JSON from the executor")
    p.add_argument("--jobs", metavar="N", default=None, help="parallel processes; default: the CPUs this process may use (its affinity)")
    p.add_argument("--out-dir", metavar="DIR", default=None, help="keep finished points in DIR/points/ (resumable)")
    p.add_argument("--format", metavar="{table,csv,json}", default="table", help="output format; default: table")
    p.set_defaults(func=run)
    return p


def parse_caps(text: str) -> list[float | None] | dict[str, Any]:
    """``default,1,5`` -> [None, 1, 5]; ``1:200:12`` -> a log range spec."""
    from ddpsim.cli.args import parse_cap_value
    from ddpsim.errors import InputError

    text = text.strip()
    if ":" in text:
        parts = text.split(":")
        try:
            lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
            assert len(parts) == 3
        except (ValueError, IndexError, AssertionError):
            raise InputError(f"--bucket-cap-mb: {text!r} is not accepted; expected MIN:MAX:POINTS (e.g. 1:200:12)") from None
        return {"min": lo, "max": hi, "points": n, "scale": "log"}
    out: list[float | None] = []
    for item in [x.strip() for x in text.split(",") if x.strip()]:
        out.append(parse_cap_value(item, "--bucket-cap-mb", "numbers of MiB > 0 or 'default', comma-separated"))
    if not out:
        raise InputError(f"--bucket-cap-mb: {text!r} gives a sweep with no points; expected at least one value")
    return out


#: scenario keys -> the flags that set them (errors of the scenario name the flag)
FLAGS = {"trace": "--trace", "cluster.topology": "--topology", "world_size": "--world-size", "comm_hook": "--comm-hook",
         "calibration": "--calibration", "sweep.bucket_cap_mb_list": "--bucket-cap-mb-list",
         "sweep.bucket_cap_mb": "--bucket-cap-mb"}

COLUMNS = ("point", "num_buckets", "iteration_p50_s", "iteration_p95_s", "forward_s", "backward_compute_s",
           "exposed_comm_s", "exposed_comm_p95_s", "optimizer_s", "overlap_ratio")


def run(args: argparse.Namespace) -> int:
    from ddpsim.cli.args import parse_cap_list, scenario_from_flags
    from ddpsim.errors import InputError
    from ddpsim.report.summary import to_csv_text
    from ddpsim.pipeline.sweep import fmt_s, run_sweep, sweep_table

    if args.format not in FORMATS:
        raise InputError(f"--format: {args.format!r} is not accepted; expected one of {', '.join(FORMATS)}")
    data: dict[str, Any] = {
        "name": "sweep", "trace": args.trace,
        "cluster": {"topology": args.topology, "nodes": parse_int(args.nodes, "--nodes", 1)},
        "world_size": parse_int(args.world_size, "--world-size", 1), "comm_hook": args.comm_hook,
        "simulation": {"iterations": parse_int(args.iterations, "--iterations", 1), "seed": parse_int(args.seed, "--seed", 0)},
        "sweep": {"bucket_cap_mb": parse_caps(args.bucket_cap_mb)}, "timelines": []}
    if args.calibration is not None:
        data["calibration"] = args.calibration
    if args.bucket_cap_mb_list:
        data["sweep"]["bucket_cap_mb_list"] = [list(parse_cap_list(t, "--bucket-cap-mb-list")) for t in args.bucket_cap_mb_list]
    sc = scenario_from_flags(data, "ddpsim sweep", FLAGS)
    warning = sc.calibration_warning()
    if warning:
        print(f"ddpsim sweep: WARNING: {warning}", file=sys.stderr)
    jobs = parse_int(args.jobs, "--jobs", 1)
    recs = run_sweep(sc, out_dir=args.out_dir, jobs=jobs, progress=True)
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
        w = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(hdr)]
        print(f"{sc.cluster.topology} x {sc.cluster.nodes} node(s), world size {recs[0].world_size} ({recs[0].backend})")
        print("  ".join(h.ljust(w[i]) for i, h in enumerate(hdr)).rstrip())
        for x in rows:
            print("  ".join(v.ljust(w[i]) for i, v in enumerate(x)).rstrip())
    return 0
