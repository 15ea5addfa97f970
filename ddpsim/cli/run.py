"""``ddpsim run``: run a scenario end to end and write its report folder."""

from __future__ import annotations

import argparse
import logging
from typing import Any

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
  points/<point>.json          finished points; a rerun reuses them (resumable)

With no SCENARIO, runs scenarios/default.yaml."""

EPILOG = """\
examples:
  ddpsim run                                   # scenarios/default.yaml -> reports/default/
  ddpsim run resnet50-a100-2n --out-dir /tmp/reports --no-plots --jobs 2 --set cluster.nodes=4

--set KEY=VALUE sets any scenario key for this run (dotted key, YAML value), checked like the
file: --set ddp.bucket_cap_mb=50, --set 'sweep.bucket_cap_mb=[null, 10, 50]', --set name=mine.

--method-error FILE joins the answer with a zoo's residuals ('ddpsim validate zoo' writes
<out-dir>/zoo/method_error.json) for a CPU gloo scenario with 'calibration: FILE' of that host.

Bad input (an unknown key, a wrong type, a missing trace, an unwritable --out-dir) stops
with one line naming the key or path and exit status 2; files already written are kept."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from ddpsim.cli.args import add_set, add_verb, int_in, nonempty
    from ddpsim.units import MAX_JOBS

    p = add_verb(subparsers, "run", help="run a scenario and write its report", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("scenario", metavar="SCENARIO", nargs="?", default=None, type=nonempty,
                   help="scenario YAML path or bundled name; default: 'default'")
    p.add_argument("--out-dir", metavar="DIR", default="reports", type=nonempty, help="parent folder of the report; default: reports")
    p.add_argument("--jobs", metavar="N", default=None, type=int_in(1, MAX_JOBS),
                   help="parallel processes for the sweep, and for the report: its PNGs drawn by N - 1 of them beside "
                        "the rest; default: the CPUs this process may use (its affinity)")
    add_set(p)
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no progress lines, only the summary's answer")
    p.add_argument("--method-error", metavar="FILE", default=None,
                   help="state the method's error measured on other models in the answer: a zoo run's residuals "
                        "(<out-dir>/zoo/method_error.json of 'ddpsim validate zoo' on the same host and backend; the "
                        "scenario needs its calibration): the band around the best point's step and the caps too close "
                        "to the best to tell apart")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ddpsim.api import run_scenario
    from ddpsim.pipeline.scenario import load_scenario

    sc = load_scenario(args.scenario, args.overrides)
    warning = sc.calibration_warning()
    if warning:
        log.warning("ddpsim run: WARNING: %s", warning)
    rep = run_scenario(sc, out_dir=args.out_dir, jobs=args.jobs, plots=not args.no_plots, progress=not args.quiet,
                       method_error=args.method_error)
    md = rep.summary_md
    start = md.find("## Answer")
    end = md.find("## ", start + 3)
    print(f"{sc.name}: {len(rep.records)} points, world size {rep.summary['world_size']} ({rep.summary['backend']})")
    print(md[start:end].strip())
    print(f"\nreport: {rep.out_dir / 'summary.md'} ({len(rep.files)} files)")
    return 0
