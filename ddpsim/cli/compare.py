"""``ddpsim compare``: a real DDP run's torch.profiler profiles against ddpsim's prediction of the run."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from ddpsim.cli.args import add_verb, nonempty
from ddpsim.errors import InputError

DESCRIPTION = """\
How far is ddpsim's prediction from a real multi-GPU DDP run I profiled, and which term is off?

Import the profile of one rank (or of every rank) of a real DDP run (the Chrome/Kineto JSON
that torch.profiler's export_chrome_trace or tensorboard_trace_handler writes, .json or
.json.gz; the same import as 'ddpsim trace --from-profile'), simulate the same configuration
-- the run's world size, the model's parameters and gradient-ready times from the profile,
the catalogue system of its GPU on as many nodes as the ranks fill (V100: dgx-v100, A100:
dgx-a100, H100: dgx-h100, H200, B200, GB200, L40S likewise; others need --scenario), DDP's
default options or --scenario's, and DDP's host costs measured on the profile's CPU timeline
-- through the same path as every ddpsim simulation, and write a report folder:

  summary.md    where the prediction is off and which term is responsible (compute, DDP's
                host costs, each bucket's collective, waiting for the other ranks, the
                exposed tail), the step term by term, and per bucket the predicted and measured
                launch, start and all-reduce time (and the NCCL model with the algorithm and
                protocol the profile's kernels ran)
  compare.json  all of it, in seconds
  compare.png   one steady iteration, predicted above measured, and the per-bucket errors

The step is simulated on its critical path: each phase boundary is the later of its CPU and
GPU times, so a host-bound run (the CPU slower than its kernels) is predicted host-bound as it
ran. With one rank's profile an NCCL kernel's duration also holds its wait for the other
ranks: give every rank's profile to separate the transfer. How each figure is taken:
docs/MODEL.md, "Comparing with a profile"."""

EPILOG = """\
examples:
  ddpsim compare tests/data/resnet50_ddp_2xA100_rank0.json.gz --model resnet50 --name resnet50-2xa100
  ddpsim compare rank0.json.gz rank1.json.gz --scenario my-cluster.yaml --out-dir /tmp/compare

Bad input (a profile with no ProfilerStep, no GPU kernels or no backward, a truncated or
non-JSON file, profiles of different runs, a --model whose parameters do not match the
recorded buckets) stops with one line and exit status 2."""


def add_parser(subparsers: Any) -> None:
    p = add_verb(subparsers, "compare", help="compare a profiled DDP run with ddpsim's prediction",
                 description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("profiles", metavar="PROFILE", nargs="+", type=nonempty,
                   help="torch.profiler traces (.json or .json.gz) of the run's ranks (one or all)")
    p.add_argument("--model", metavar="FACTORY", default=None, type=nonempty,
                   help="a built-in model name or package.module:factory naming the profile's parameters "
                        "(default: sized from the run's recorded buckets)")
    p.add_argument("--scenario", metavar="SCENARIO", default=None, type=nonempty,
                   help="scenario YAML or bundled name whose cluster, DDP options and cost model describe the run "
                        "(its trace is replaced by the profile's, its world size must be the run's)")
    p.add_argument("--name", metavar="NAME", default=None, type=nonempty,
                   help="the report's name (default: the first profile's file name)")
    p.add_argument("--out-dir", metavar="DIR", default="reports", type=nonempty,
                   help="parent folder of the report, written to DIR/compare-NAME; default: reports")
    p.add_argument("--no-plots", action="store_true", help="skip compare.png")


def run(args: argparse.Namespace) -> int:
    from ddpsim.pipeline.scenario import load_scenario
    from ddpsim.trace.profile import import_profile
    from ddpsim.validation.profile_compare import compare
    from ddpsim.validation.profile_report import write_compare_report

    # every profile imported, each read once (its steps are what compare measures), rank 0's first
    imps = sorted((import_profile(p, model=args.model) for p in args.profiles),
                  key=lambda i: (i.environment.rank is None, i.environment.rank or 0))
    worlds = {i.environment.world_size for i in imps}
    ranks = [i.environment.rank for i in imps]
    if len(worlds) > 1 or len(set(ranks)) != len(ranks):
        raise InputError(f"PROFILE: world sizes {sorted(worlds, key=str)} and ranks {ranks} are not accepted; "
                         "expected profiles of one run, one per rank")
    steps = [i.iterations for i in imps]
    env = imps[0].environment
    world = env.world_size or len(imps)
    scenario = load_scenario(args.scenario) if args.scenario else None
    # the report's name by default: the first profile's file name (rank-0.pt.trace.json.gz: rank-0)
    stem = re.sub(r"(\.pt\.trace)?\.json(\.gz)?$", "", Path(args.profiles[0]).name)
    name = args.name or re.sub(r"[^A-Za-z0-9._-]+", "-", stem) or "profile"
    data = compare([i.source for i in imps], steps, trace=imps[0].trace, gpu_name=env.gpu_name, world_size=world,
                   recorded_numels=imps[0].recorded_bucket_numels(), scenario=scenario, name=name,
                   ranks=[i.environment.rank if i.environment.rank is not None else k for k, i in enumerate(imps)],
                   ddp_modules=imps[0].ddp_modules, recorded_buckets=imps[0].iterations[-1].buckets)
    out = Path(args.out_dir) / f"compare-{name}"
    write_compare_report(data, out, plots=not args.no_plots)
    p, m = data["predicted"]["step_s"], data["measured"]["mean"]["step_s"]
    plan = data["plan"]
    said = ("plan not checked (the profile records no bucket sizes)" if not plan["recorded_numels"]
            else f"plan not checked ({plan['ddp_modules']} DDP modules, no split of the run's buckets among them found)"
            if plan["matches"] is None
            else f"plan matches the run's ({plan['ddp_modules']} DDP modules, each planned on its own parameters)"
            if plan.get("modules")
            else f"plan {'matches' if plan['matches'] else 'differs from'} the run's")
    print(f"{name}: step predicted {p * 1e3:.2f} ms, measured {m * 1e3:.2f} ms ({100 * (p - m) / m:+.1f} %), "
          f"{len(data['buckets'])} buckets; {said}")
    print(f"report: {out / 'summary.md'}")
    return 0
