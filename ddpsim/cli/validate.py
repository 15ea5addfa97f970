"""``ddpsim validate``: run a scenario's points for real and compare with the prediction."""

from __future__ import annotations

import argparse
from typing import Any

DESCRIPTION = """\
Check ddpsim against real DDP on this machine. For SCENARIO's validated bucket_cap_mb points:
capture the model's trace on all ranks at once, in lockstep (the runs' conditions;
--scenario-trace predicts from the scenario's trace instead); calibrate the machine once with
the executor (all-reduce and broadcast curves, compute/communication interference fitted to a
real DDP probe, copy bandwidth; measured once more when the interference fit hits its bound;
or --calibration FILE); run real DDP at every point (local gloo ranks via torchrun, one
thread per rank unless the trace says otherwise; each point --repeats times, round-robin);
simulate the same points; and write reports/<name>/:

  validation.md     the table and the accuracy figures: median |error| of the mean step,
                    points in the measured p10..p90 band or within 10 %, measured-best vs
                    predicted-best cap and the gap's 95 % interval from the runs paired by
                    round (best-cap verdict met / missed / unresolved, and for an
                    unresolved one how many rounds would decide it), plan_matches, and
                    how many measured means lie inside their 80 % prediction interval
                    (the rounds' captures resampled through the engine, around the
                    predictions with the calibration's fitted compute slowdown, its
                    microbenchmark's and its probe rounds' fitted one by one, joined)
  validation.csv    one row per point (predicted_s, measured_s, p10/p90, error_pct,
                    predicted_low_s/high_s, in_interval, ...)
  validation.png    predicted vs measured per point, per-bucket completion
  validation.json   all of it, plus per-bucket times predicted and measured
  validation/       every raw executor measurement; --reanalyze rebuilds the report from it

Launch layout: --launch point (default) captures each round's trace in a launch of its own
and runs each point in a launch of its own; --launch round runs a whole round in ONE
executor launch (before each point a 2-step slice of the trace, then the point under a
fresh DDP over the same module), so that trace and runs share each launch's speed. On CPU
the executor holds glibc's allocator steady in every step (--malloc steady) so that trace
capture and runs reuse their pages alike. How the figures are made and read:
docs/VALIDATION.md.

--zoo validates the model zoo (models ddpsim was never tuned on: 'ddpsim trace --list-models',
zoo:<name>; the torchvision ones need the 'zoo' extra) unattended, one model after another,
calibrated once, a model already done skipped, and writes <out-dir>/zoo/summary.md: per model
the median |error| (wall clock, CPU clock, CPU clock at the runs' load), how often the measured
mean lies in its prediction interval, and how far predictions from single captures land apart;
each model's interval joined with the method's error measured on the other models (the
split-conformal band of their residuals measured / predicted - 1) is scored beside it, and every
residual is written to <out-dir>/zoo/method_error.json, which --method-error FILE joins to the
intervals of another validation on the same host.
The eleven models take 22-25 minutes on a quiet 2-core host at 3 caps x 3 rounds, 30-45 under
other load or on a slow VM (the zoo study, studies/zoo/README.md); --zoo-models and fewer
--caps/--repeats give a quick subset.

Files are rewritten atomically after every run, so an interrupted validation keeps what it
measured. Local validation is CPU/gloo; on GPU nodes run the executor under torchrun
yourself ('torchrun --nproc-per-node 8 -m executor ddp ...')."""

EPILOG = """\
examples:
  ddpsim validate cpu-gloo-resnet50                       # calibrate, capture, run, compare
  ddpsim validate default --caps none,1,25 --repeats 4 --calibration my-calibration.json
  ddpsim validate cpu-gloo-mlp --reanalyze                # rebuild the shipped report from its raw runs
  ddpsim validate cpu-gloo-resnet50 --reanalyze --method-error reports/zoo/lanes/zoo/method_error.json
  ddpsim validate --zoo --zoo-models resnet18,tied_lm --caps 5,25 --repeats 2   # a quick zoo subset

Bad input (a missing scenario, a bad --caps value, a failing executor run) stops with
one line and exit status 2; files already written are kept."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("validate", help="compare predictions with real DDP runs on this machine",
                              description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", metavar="SCENARIO", nargs="?", default=None, help="scenario YAML or bundled name; default: 'default'")
    p.add_argument("--calibration", metavar="FILE", default=None, help="reuse a calibration JSON instead of calibrating")
    p.add_argument("--caps", metavar="LIST", default=None,
                   help="comma list of bucket_cap_mb to run ('none' = not given; list=X+Y+... a bucket_cap_mb_list, "
                        "e.g. none,5,list=0.2+0.5+0.3); default: validation.bucket_cap_mb or the sweep's")
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
    p.add_argument("--method-error", metavar="FILE", default=None,
                   help="join every prediction interval with the method's error measured on other models: the "
                        "split-conformal 80 %% band of a zoo run's residuals (<out-dir>/zoo/method_error.json, the "
                        "validated model's own left out; ddpsim/pipeline/method_error.py)")
    p.add_argument("--no-plots", action="store_true", help="skip validation.png")
    p.add_argument("--zoo", action="store_true",
                   help="validate the model zoo instead of SCENARIO (ddpsim/validation/zoo_driver.py): every zoo model (or --zoo-models) "
                        "at --caps (default 1,5,25), calibrated once, a model already done skipped; writes "
                        "<out-dir>/zoo/summary.md (per model: median |error|, prediction-interval coverage, "
                        "prediction stability on the wall and the CPU clock); with --reanalyze, the models done are analysed "
                        "again without running anything)")
    p.add_argument("--zoo-models", metavar="LIST", default=None,
                   help="with --zoo: comma list of zoo models (names from 'ddpsim trace --list-models', zoo: optional)")
    p.add_argument("--timeout-s", metavar="S", type=float, default=900.0, help="limit per executor run (default 900)")
    p.set_defaults(func=run)
    return p


def parse_caps(text: str | None) -> list[float | tuple[float, ...] | None] | None:
    from ddpsim.cli.args import parse_cap_point
    from ddpsim.units import CAPS_EXPECTED

    if text is None:
        return None
    return [parse_cap_point(item, "--caps", CAPS_EXPECTED) for item in text.split(",")]


def run(args: argparse.Namespace) -> int:
    from ddpsim.validation.measure import reanalyze, validate

    if args.zoo_models is not None and not args.zoo:
        from ddpsim.errors import InputError

        raise InputError(f"--zoo-models: {args.zoo_models!r} is not accepted without --zoo; expected --zoo --zoo-models LIST")
    if args.zoo:
        from ddpsim.validation.zoo_driver import run_zoo_cli

        if args.method_error is not None:
            from ddpsim.errors import InputError

            raise InputError(f"--method-error: {args.method_error!r} is not accepted with --zoo; expected none (the zoo "
                             "scores each model with the other models' residuals and writes its own method_error.json)")
        return run_zoo_cli(args, parse_caps(args.caps))
    if args.reanalyze:
        res = reanalyze(args.scenario, calibration=args.calibration, out_dir=args.out_dir, plots=not args.no_plots,
                        method_error=args.method_error)
    else:
        res = validate(args.scenario, calibration=args.calibration, out_dir=args.out_dir, caps=parse_caps(args.caps),
                       iterations=args.iterations, warmup=args.warmup, repeats=args.repeats,
                       bucket_timing=not args.no_bucket_timing, num_threads=args.num_threads, timeout_s=args.timeout_s,
                       plots=not args.no_plots, capture=not args.scenario_trace, launch_mode=args.launch,
                       method_error=args.method_error)
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
              f"plan matches: {str(s['plan_matches_all']).lower()}"
              + ("" if not s.get("num_with_interval") else
                 f"; inside the 80 % prediction interval: {s['num_in_interval']}/{s['num_with_interval']}"))
    return 0
