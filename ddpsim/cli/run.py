"""``ddpsim run``: run a scenario end to end and write its report folder; and the scenario of a
command line that ``run``, ``sweep`` and ``simulate`` share (:func:`command_scenario`: a scenario
file, or one from ``--trace`` / ``--topology``, then ``--set``, checked by the scenario's schema),
so the three simulate the same points the same way and differ only in what they print."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from ddpsim.cli.args import add_set, add_verb, int_in, nonempty
from ddpsim.errors import InputError
from ddpsim.units import MAX_JOBS

log = logging.getLogger(__name__)

DESCRIPTION = """\
Which bucket_cap_mb makes this scenario's DDP training fastest, and by how much?

Run a scenario (a YAML file in scenarios/, or a bundled scenario's name): load the trace,
simulate every sweep point of bucket_cap_mb (and the other swept knobs) with the DDP
Reducer engine over the modelled cluster, and write reports/<name>/:

  summary.md        the best bucket_cap_mb and its gain over the default, the exposed-
                    communication tail (p95), the iteration-time breakdown, the sweep
                    table, the first iteration and the rebuild, the overlap in the traces,
                    and the DDP(model, bucket_cap_mb_list=[...]) line to paste (torch >= 2.13)
  sweep.csv         one row per point; buckets.csv: every bucket of every iteration
  sweep.png, timeline_<point>.png, bucket_sizes.png
  trace_<point>_rank<r>.json.gz  Chrome/Kineto traces (Perfetto, HTA)
  recommended_plan.json        an explicit bucket plan ('ddpsim plan --plan', the executor) and
                               the bucket_cap_mb_list that makes real DDP rebuild it (when one does)
  points/<point>.json          finished points; a rerun reuses them (resumable)"""

EPILOG = """\
examples:
  ddpsim run                                   # scenarios/default.yaml -> reports/default/
  ddpsim run resnet50-a100-2n --out-dir /tmp/reports --no-plots --jobs 2 --set cluster.nodes=4"""


def add_parser(subparsers: Any) -> None:
    p = add_verb(subparsers, "run", help="run a scenario and write its report", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("scenario", metavar="SCENARIO", nargs="?", default=None, type=nonempty,
                   help="scenario YAML path or bundled name; default: 'default'")
    add_report_flags(p, "parallel processes for the sweep, and for the report: its PNGs drawn by N - 1 of them beside "
                        "the rest")
    p.add_argument("--method-error", metavar="FILE", default=None,
                   help="state the method's error measured on other models in the answer: a zoo run's residuals "
                        "(<out-dir>/zoo/method_error.json of 'ddpsim validate zoo' on the same host and backend; the "
                        "scenario needs its calibration): the band around the best point's step and the caps too close "
                        "to the best to tell apart")


def run(args: argparse.Namespace) -> int:
    from ddpsim.api import run_scenario

    sc = command_scenario(args, "ddpsim run")
    rep = run_scenario(sc, out_dir=args.out_dir, jobs=args.jobs, plots=not args.no_plots, progress=not args.quiet,
                       method_error=args.method_error)
    md = rep.summary_md
    start = md.find("## Answer")
    end = md.find("## ", start + 3)
    print(f"{sc.name}: {len(rep.records)} points, world size {rep.summary['world_size']} ({rep.summary['backend']})")
    print(md[start:end].strip())
    print(f"\nreport: {rep.out_dir / 'summary.md'} ({len(rep.files)} files)")
    return 0


def add_report_flags(p: argparse.ArgumentParser, jobs: str) -> None:
    """The flags of a scenario's report (``run``, ``explore``): its folder, ``jobs`` processes, ``--set``, and
    no plots or progress."""
    p.add_argument("--out-dir", metavar="DIR", default="reports", type=nonempty,
                   help="parent folder of the report; default: reports")
    p.add_argument("--jobs", metavar="N", default=None, type=int_in(1, MAX_JOBS),
                   help=f"{jobs}; default: the CPUs this process may use (its affinity)")
    add_set(p)
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no progress lines, only the answer")


# ---- the scenario of a command line --------------------------------------------------------


def command_scenario(args: argparse.Namespace, command: str, **keys: Any):
    """The scenario of this command line: SCENARIO's file (``run``), else :func:`add_scenario_flags`'
    with ``keys`` (those the verb sets itself); then ``--set``, the whole checked like a scenario
    file (an error names the flag or ``--set KEY`` that gave the value). A calibration's warning is logged."""
    from ddpsim.pipeline.scenario import apply_overrides, load_scenario, scenario_from_dict

    if "scenario" in args:
        sc = load_scenario(args.scenario, args.overrides)
    else:
        flags = scenario_flags(args)
        topology = args.topology if args.topology is not None else args.topology_default
        data = {"name": command.split()[-1], "trace": args.trace, "timelines": [],
                "cluster": {"topology": topology, "nodes": 1}, "world_size": None, **keys}  # None: every device
        try:
            sc = scenario_from_dict(apply_overrides(data, args.overrides), source=command)
        except InputError as exc:
            raise InputError(flag_message(str(exc).replace(f"{command}: ", "", 1), flags)) from None
    warning = sc.calibration and sc.calibration.warning()
    if warning:
        log.warning("%s: WARNING: %s", command, warning)
    return sc


def add_scenario_flags(p: argparse.ArgumentParser, *, topology_default: str | None) -> None:
    """The flags of a scenario made on the command line (``sweep``, ``simulate``): its trace and its
    cluster; every other scenario key through ``--set``."""
    p.add_argument("--trace", metavar="FILE", required=True, type=nonempty, help="trace JSON written by 'ddpsim trace'")
    p.add_argument("--topology", metavar="PRESET|FILE", default=None, type=nonempty,
                   help="topology preset ('ddpsim topology --list') or YAML file, the scenario key cluster.topology"
                        + (f"; default: {topology_default}" if topology_default else
                           "; without it, a latency + bandwidth model: --set cluster.latency_us=X --set cluster.bandwidth_gbps=Y"))
    add_set(p)
    p.set_defaults(topology_default=topology_default)  # a flag's default is applied after it is known not given


#: the scenario keys the flags of :func:`add_scenario_flags` set -> their flags (errors name the flag)
SCENARIO_FLAGS = {"trace": "--trace", "cluster.topology": "--topology"}


def scenario_flags(args: argparse.Namespace) -> dict[str, str]:
    """Scenario key -> what set it on this command line (a flag, or ``--set KEY``); InputError when
    ``--set`` names a key (or its section) that a flag given on the line sets too."""
    keys = set_keys(args)
    for key in keys:
        for scenario_key, flag in SCENARIO_FLAGS.items():
            if getattr(args, flag[2:]) is not None and (scenario_key == key or scenario_key.startswith(key + ".")):
                raise InputError(f"--set {key}: not accepted with {flag} (both set {scenario_key}); "
                                 "expected one of the two")
    return {**SCENARIO_FLAGS, **{k: f"--set {k}" for k in keys}}


def set_keys(args: argparse.Namespace) -> list[str]:
    """The scenario keys this command line's ``--set`` items name, in order."""
    return [item.partition("=")[0].strip() for item in args.overrides]


def flag_message(msg: str, flags: dict[str, str]) -> str:
    """``msg`` with its leading scenario key replaced by the flag that sets it."""
    for key in sorted(flags, key=len, reverse=True):
        if msg.startswith(key) and msg[len(key):len(key) + 1] in (":", ".", "["):
            return flags[key] + msg[len(key):]
    return msg
