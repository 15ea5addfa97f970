"""``ddpsim validate``: run a scenario's points for real and compare with the prediction."""

from __future__ import annotations

import argparse
from typing import Any

DESCRIPTION = """\
Validate ddpsim on this machine: capture the trace on all ranks at once, in lockstep (the run's
conditions; --scenario-trace keeps the scenario's), calibrate it once with the executor (all-reduce and
broadcast curves, compute/communication interference, copy bandwidth; once more when the
interference fit hits its bound, the rejected file kept as calibration.clamped1.json; or reuse
--calibration FILE), run real DDP at every validated bucket_cap_mb point of SCENARIO
(2 local gloo ranks via torchrun, one thread per rank unless the trace says otherwise;
each point --repeats times, round-robin, each round's order rotated by one), simulate
the same points, and write reports/<name>/:

  validation.csv    point, predicted_s, measured_s, measured_p10_s, measured_p90_s,
                    error_pct, in_band, plan_matches, ...
  validation.md     the table and the accuracy figures (median |error|, points in the
                    noise band, measured-best vs predicted-best cap, whether their
                    gap lies inside the two points' run spread, and its 95 % interval
                    from their runs paired by round: whether the runs decide the
                    2 % best-cap criterion -- met, missed or unresolved, and if
                    unresolved how many rounds would decide it); with the hooked
                    runs, per point: backward span, summed all-reduce time and the last
                    bucket's, measured / predicted
  validation.png    predicted vs measured per point (noise band), per-bucket completion
  validation.json   all of it, plus per-bucket times predicted and measured
  validation/       every raw executor measurement (ddpsim-measurement JSON)

By default (--launch point) each round's trace is captured in a launch of its own and each
point runs in a launch of its own. --launch round runs a round in ONE executor launch
('executor round'): before each point a slice of the trace (2 lockstep steps), then the
point under a fresh real DDP over the same module, so that the prediction's trace and the
runs share the process pair's speed and the moment; the slices of all rounds are pooled
into the prediction's trace. It saves the launches (12-19 % of the time for the large
models on the 2-core host; the mlp's 16 rounds take a quarter). Under the executor's steady
allocator both layouts met the accuracy targets in session 18; point stays the default
until more runs compare them (reports/cpu-gloo-summary/validation.md, "Session 18").

--zoo validates the model zoo (models ddpsim was never tuned on: 'ddpsim trace --list-models',
zoo:<name>; the torchvision ones need 'pip install "ddpsim[zoo]"') unattended, one model after
another, calibrated once, a model already done skipped, and writes <out-dir>/zoo/summary.md: per
model the median |error| (wall clock, CPU clock, CPU clock at the runs' load), how often the
measured mean lies in its prediction interval, and how far predictions from single captures
land apart. The ten models take about 30 minutes on an idle 2-core host at 3 caps x 3 rounds;
--zoo-models and fewer --caps/--repeats give a quick subset.

Files are rewritten atomically after every run, so an interrupted validation keeps
what it measured. The trace must be captured under the same conditions as the run
(model, batch size, threads per rank). On GPU nodes run the executor with torchrun
yourself ('torchrun --nproc-per-node 8 -m executor ddp ...')."""

EPILOG = """\
examples:
  ddpsim validate default                       # bundled MLP, caps of the scenario
  ddpsim validate default --caps none,1,5,25,100 --repeats 3
  ddpsim validate scenarios/my.yaml --calibration reports/default/calibration.json
  ddpsim validate cpu-gloo-mlp --reanalyze       # re-report the runs already measured
  ddpsim validate --zoo                          # every zoo model, unattended, resumable
  ddpsim validate --zoo --zoo-models resnet18,tied_lm --caps 5,25 --repeats 2   # a quick subset

Bad input (a missing scenario, a bad --caps value, a failing executor run) stops with
one line and exit status 2; files already written are kept."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("validate", help="compare predictions with real DDP runs on this machine",
                              description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", metavar="SCENARIO", nargs="?", default=None, help="scenario YAML or bundled name; default: 'default'")
    p.add_argument("--calibration", metavar="FILE", default=None, help="reuse a calibration JSON instead of calibrating")
    p.add_argument("--caps", metavar="LIST", default=None,
                   help="comma list of bucket_cap_mb to run ('none' = not given); default: validation.bucket_cap_mb or the sweep's")
    p.add_argument("--repeats", metavar="N", type=int, default=3, help="runs per point (default 3)")
    p.add_argument("--iterations", metavar="N", type=int, default=None, help="measured iterations per run (default: scenario)")
    p.add_argument("--warmup", metavar="N", type=int, default=None, help="warm-up iterations per run (default: scenario)")
    p.add_argument("--num-threads", metavar="N", type=int, default=None, help="torch threads per rank (default: the trace's)")
    p.add_argument("--out-dir", metavar="DIR", default="reports", help="parent folder of the report (default: reports)")
    p.add_argument("--no-bucket-timing", action="store_true", help="skip the hooked runs that time each bucket")
    p.add_argument("--scenario-trace", action="store_true",
                   help="predict from the scenario's trace as is (default: capture a fresh trace on all ranks at once, "
                        "the run's conditions, with 'executor trace')")
    p.add_argument("--reanalyze", action="store_true",
                   help="run nothing: rebuild the report from the raw runs an earlier validate left under "
                        "reports/<name>/validation/ (step times recomputed from the per-rank records, points simulated "
                        "again with the current engine and the calibration validation.json names, or --calibration)")
    p.add_argument("--launch", metavar="MODE", default="point",
                   help="point (default): a launch per point and run, the round's trace in its own; "
                        "round: each round's trace slices and points in one executor launch")
    p.add_argument("--no-plots", action="store_true", help="skip validation.png")
    p.add_argument("--zoo", action="store_true",
                   help="validate the model zoo instead of SCENARIO (ddpsim/zoo.py): every zoo model (or --zoo-models) "
                        "at --caps (default 1,5,25), calibrated once, a model already done skipped; writes "
                        "<out-dir>/zoo/summary.md (per model: median |error|, prediction-interval coverage, "
                        "prediction stability on the wall and the CPU clock); with --reanalyze, the models done are analysed "
                        "again without running anything)")
    p.add_argument("--zoo-models", metavar="LIST", default=None,
                   help="with --zoo: comma list of zoo models (names from 'ddpsim trace --list-models', zoo: optional)")
    p.add_argument("--timeout-s", metavar="S", type=float, default=900.0, help="limit per executor run (default 900)")
    p.set_defaults(func=run)
    return p


def parse_caps(text: str | None) -> list[float | None] | None:
    from ddpsim.commands._args import parse_cap_value

    if text is None:
        return None
    return [parse_cap_value(item, "--caps", "a comma list of MiB > 0 or 'none'") for item in text.split(",")]


def run(args: argparse.Namespace) -> int:
    from ddpsim.validate import reanalyze, validate

    if args.zoo_models is not None and not args.zoo:
        from ddpsim.errors import InputError

        raise InputError(f"--zoo-models: {args.zoo_models!r} is not accepted without --zoo; expected --zoo --zoo-models LIST")
    if args.zoo:
        from ddpsim.zoo import run_zoo_cli

        return run_zoo_cli(args, parse_caps(args.caps))
    if args.reanalyze:
        res = reanalyze(args.scenario, calibration=args.calibration, out_dir=args.out_dir, plots=not args.no_plots)
    else:
        res = validate(args.scenario, calibration=args.calibration, out_dir=args.out_dir, caps=parse_caps(args.caps),
                       iterations=args.iterations, warmup=args.warmup, repeats=args.repeats,
                       bucket_timing=not args.no_bucket_timing, num_threads=args.num_threads, timeout_s=args.timeout_s,
                       plots=not args.no_plots, capture=not args.scenario_trace, launch_mode=args.launch)
    s = res["summary"]
    print(f"validate: wrote {res['out']}/validation.md, validation.csv, validation.json"
          f"{'' if args.no_plots else ', validation.png'}")
    if s:
        print(f"validate: median |error| {s['median_abs_error_pct']:.1f} % over {s['num_points']} points; "
              f"{s['num_in_band_or_within_10pct']}/{s['num_points']} in band or within 10 %; measured best "
              f"{s['measured_best']}, predicted best {s['predicted_best']} ({s['predicted_best_gap_pct']:.1f} % from it"
              + ("" if s.get("best_pair_run_spread_pct") is None else
                 f", {'inside' if s['predicted_best_gap_within_spread'] else 'beyond'} their run spread "
                 f"{s['best_pair_run_spread_pct']:.1f} %")
              + ("" if s.get("best_pair_gap_ci95_pct") is None else
                 f"; paired by round {s['best_pair_gap_ci95_pct'][0]:+.1f}..{s['best_pair_gap_ci95_pct'][1]:+.1f} %, "
                 f"criterion {s['best_cap_verdict']}"
                 + ("" if s.get("best_pair_rounds_to_decide") is None else
                    f", about {s['best_pair_rounds_to_decide']} rounds would decide it"))
              + "); "
              f"plan matches: {str(s['plan_matches_all']).lower()}")
    return 0
