"""``ddpsim explore``: simulate a design space (a scenario's ``explore`` block) and rank it."""

from __future__ import annotations

import argparse
import logging
from functools import partial
from pathlib import Path
from typing import Any

from ddpsim.cli.args import add_verb, nonempty

log = logging.getLogger(__name__)

DESCRIPTION = """\
Which system, scale and DDP plan train this model fastest, and at what cost per sample?

Simulate every point of a scenario's design space (its 'explore' block: axes over system,
nodes, world_size, bucket_cap_mb, bucket_cap_mb_list, comm_hook, batch_size or any scenario
key; crossed, or a seeded sample) with the DDP Reducer engine, and write <out-dir>/<name>/:

  table.parquet, table.csv  one row per point: step time p50/p95, throughput (samples/s),
                            scaling efficiency against one GPU without DDP, exposed and total
                            communication, GPU-hours and (with explore.prices) cost per 1,000
                            samples, on_front
  front.csv                 the Pareto front of throughput against cost
  scaling.png, front.png    scaling per system; every point's throughput against cost
  report.md                 the best point per system and the front
  points/<point>.json       finished points; a rerun simulates only the missing ones

Points run in this process, in --jobs local processes, or on Ray (--ray: a local Ray;
--cluster ADDRESS: a running cluster; 'pip install ddpsim[ray]'); the table is the same bytes
whichever runs them."""

EPILOG = """\
examples:
  ddpsim explore gpt2-1.5b-design-space                 # -> reports/gpt2-1.5b-design-space/
  ddpsim explore my-space.yaml --cluster ray://head-node:10001 --out-dir /shared/reports

A lost worker or an interrupted run loses no finished point: run the same command again.
Bad input (an unknown axis, an axis value the scenario refuses, a missing prices file) stops
with one line naming the key and exit status 2. The explore block's keys and how to start and
point at a real Ray cluster: docs/EXPLORE.md."""


def add_parser(subparsers: Any) -> None:
    from ddpsim.cli.run import add_report_flags

    p = add_verb(subparsers, "explore", help="simulate a design space of systems, scales and plans",
                 description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("scenario", metavar="SCENARIO", type=nonempty, help="scenario YAML path or bundled name, with an "
                                                                        "'explore' block")
    add_report_flags(p, "local processes")
    ray = p.add_mutually_exclusive_group()
    ray.add_argument("--ray", action="store_true", help="spread the points over a local Ray (one worker per CPU)")
    ray.add_argument("--cluster", metavar="ADDRESS", default=None, type=nonempty,
                     help="spread the points over the Ray cluster at ADDRESS (ray://HOST:10001, or auto)")


def run(args: argparse.Namespace) -> int:
    from ddpsim.pipeline.explore import explore_table, load_prices, load_space, run_explore
    from ddpsim.pipeline.sweep import default_jobs
    from ddpsim.report.explore_report import write_explore_report

    space = load_space(args.scenario, args.overrides)
    prices = load_prices(space)
    runner = None
    if args.ray or args.cluster is not None:
        from ddpsim.pipeline.sweep import run_on_ray

        runner = partial(run_on_ray, args.cluster)
    out = Path(args.out_dir) / space.name
    records, trace_info, job = run_explore(space, out_dir=out, jobs=args.jobs or default_jobs(), ray=runner,
                                           progress=not args.quiet)
    table = explore_table(space, records, job, trace_info, None if prices is None else prices.gpu_hour)
    notes = []
    if prices is not None:
        missing = sorted(set(table["system"]) - set(prices.gpu_hour))
        notes.append(f"prices: {prices.currency} per GPU-hour{' (' + prices.source + ')' if prices.source else ''}")
        if missing:
            log.warning("ddpsim explore: no price for %s: their cost is left empty", ", ".join(missing))
            notes.append(f"no price for {', '.join(missing)}: cost left empty, not on the front")
    cost_label = prices.currency if prices is not None else "GPU-hours"
    files = write_explore_report(table, out, title=space.name, cost_label=cost_label, notes=notes,
                                 plots=not args.no_plots)
    front = table[table["on_front"]]
    print(f"{space.name}: {len(table)} points, {len(front)} on the Pareto front of throughput against cost ({cost_label})")
    if table["throughput_samples_per_s"].notna().any():
        best = table.loc[table["throughput_samples_per_s"].idxmax()]
        print(f"fastest: {best['point']}: {best['throughput_samples_per_s']:.4g} samples/s on {best['world_size']} GPUs, "
              f"scaling efficiency {best['scaling_efficiency']:.3f}")
    print(f"report: {out / 'report.md'} ({len(files)} files)")
    return 0
