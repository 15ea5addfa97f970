"""``ddpsim sweep``: an ad-hoc bucket_cap_mb sweep of one trace on one cluster."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ddpsim.errors import InputError, shorten

log = logging.getLogger(__name__)

DESCRIPTION = """\
Which bucket_cap_mb is fastest for this trace on this cluster, without writing a scenario?

Sweep DDP's bucket_cap_mb for one trace on one modelled cluster and print one row per
point (each point built and simulated as 'ddpsim run' builds a scenario's points, with the
same cost terms): p50/p95 step time, the breakdown (forward, backward compute, exposed
communication, optimizer), overlap and bucket count. Nothing is written unless --out-dir
is given (then finished points are kept in <out-dir>/points/ and reused by a rerun).

For a full report (plots, Perfetto traces, recommended plan) write a scenario and use
'ddpsim run'."""

EPILOG = """\
examples:
  ddpsim sweep --trace traces/mlp.cpu.json --bucket-cap-mb default,1 --set 'sweep.bucket_cap_mb_list=[[0.2, 0.5], [1, 4]]'
  ddpsim sweep --trace traces/resnet50.a100.json --topology dgx-a100 --nodes 2 \\
      --bucket-cap-mb 1:200:12 --set ddp.comm_hook=bf16 --format json

--bucket-cap-mb takes a comma list of MiB values ('default' = not given) or a log range
MIN:MAX:POINTS (at most 10000 points); the default point is always included (gains are measured
against it). Every other scenario key is set with --set KEY=VALUE, as in a scenario file:
sweep.bucket_cap_mb_list adds bucket_cap_mb_list points after the caps (torch >= 2.13: per-bucket
limits in MiB, the last reused), named list=X+Y+...; simulation.iterations, ddp.comm_hook..."""

FORMATS = ("table", "csv", "json")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from ddpsim.cli.args import add_scenario_flags, add_verb, from_parser, int_in, nonempty
    from ddpsim.units import MAX_JOBS

    p = add_verb(subparsers, "sweep", help="sweep bucket_cap_mb for a trace", description=DESCRIPTION, epilog=EPILOG)
    add_scenario_flags(p, topology_default="cpu-gloo", world_size_help="ranks; default: every device of the cluster")
    p.add_argument("--bucket-cap-mb", metavar="LIST", default=None, type=from_parser(parse_caps),
                   help="comma list of MiB ('default' = not given) or MIN:MAX:POINTS, the scenario key "
                        "sweep.bucket_cap_mb; default: default,1,5,25,100")
    p.add_argument("--jobs", metavar="N", default=None, type=int_in(1, MAX_JOBS), help="parallel processes; default: the CPUs this process may use (its affinity)")
    p.add_argument("--out-dir", metavar="DIR", default=None, type=nonempty,
                   help="keep finished points in DIR/points/ (resumable)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format; default: table")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no progress lines, only the table")
    p.set_defaults(func=run)
    return p


def parse_caps(text: str) -> list[float | None] | dict[str, Any]:
    """``default,1,5`` -> [None, 1, 5]; ``1:200:12`` -> a log range spec (MIN <= MAX, both finite
    and > 0, 1 to the scenario's :data:`~ddpsim.pipeline.scenario_types.MAX_POINTS` points);
    InputError otherwise, an empty item (``1,,5``) included. The scenario's schema checks the
    rest (the largest cap) as it checks a file's sweep.bucket_cap_mb."""
    from ddpsim.cli.args import int_in
    from ddpsim.units import parse_cap_value
    from ddpsim.pipeline.scenario_types import MAX_POINTS

    text = str(text).strip()
    if ":" in text:
        expected = f"MIN:MAX:POINTS with 0 < MIN <= MAX finite and 1 <= POINTS <= {MAX_POINTS} (e.g. 1:200:12)"
        parts = text.split(":")
        try:
            lo, hi = (parse_cap_value(x, "--bucket-cap-mb", expected, allow_not_given=False) for x in parts[:2])
            n = int_in(1, MAX_POINTS)(parts[2])
            assert len(parts) == 3 and lo <= hi
        except (InputError, argparse.ArgumentTypeError, ValueError, IndexError, AssertionError):
            raise InputError(f"--bucket-cap-mb: {shorten(text)} is not accepted; expected {expected}") from None
        return {"min": lo, "max": hi, "points": n, "scale": "log"}
    expected = "numbers of MiB > 0 or 'default', comma-separated"
    items = text.split(",")
    if not all(x.strip() for x in items):
        raise InputError(f"--bucket-cap-mb: {shorten(text)} is not accepted; expected {expected}, no empty item")
    return [parse_cap_value(x.strip(), "--bucket-cap-mb", expected) for x in items]


#: the caps 'ddpsim sweep' runs without --bucket-cap-mb (None: not given, DDP's default)
DEFAULT_CAPS = (None, 1, 5, 25, 100)


def build_scenario(args: argparse.Namespace):
    """The scenario of the parsed flags (:func:`ddpsim.cli.args.scenario_from_cli`): the swept caps
    of --bucket-cap-mb (else :data:`DEFAULT_CAPS`), every other key from --set."""
    from ddpsim.cli.args import scenario_from_cli

    caps = list(DEFAULT_CAPS) if args.bucket_cap_mb is None else args.bucket_cap_mb
    return scenario_from_cli(args, "ddpsim sweep", sweep={"bucket_cap_mb": caps})


def run(args: argparse.Namespace) -> int:
    from ddpsim.cli.args import text_table
    from ddpsim.report.tables import to_csv_text
    from ddpsim.pipeline.sweep import fmt_s, run_sweep, sweep_table

    sc = build_scenario(args)
    warning = sc.calibration_warning()
    if warning:
        log.warning("ddpsim sweep: WARNING: %s", warning)
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
