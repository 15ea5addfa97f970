"""``ddpsim validate``: run a scenario's points for real and compare with the prediction."""

from __future__ import annotations

import argparse
from typing import Any

from ddpsim.cli.args import add_verb, float_in, from_parser, int_in, nonempty, require_torch
from ddpsim.errors import InputError, require, shorten
from ddpsim.units import MAX_ITERATIONS, MAX_REPEATS, MAX_THREADS, MAX_TIMEOUT_S, parse_caps

DESCRIPTION = """\
How close are ddpsim's predictions for this scenario to real DDP runs on this machine?

For SCENARIO's validated bucket_cap_mb points: capture the model's trace on all ranks at once,
in lockstep (the runs' conditions; --scenario-trace predicts from the scenario's trace instead);
calibrate the machine once with the executor (all-reduce and broadcast curves,
compute/communication interference fitted to a real DDP probe, copy bandwidth; measured once
more when the interference fit hits its bound; or --calibration FILE); run real DDP at every
point (local gloo ranks via torchrun, one thread per rank unless the trace says otherwise; each
point --repeats times, round-robin); simulate the same points; and write reports/<name>/:

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
  validation_timeline.png  one steady iteration, predicted above measured, and the per-bucket
                    errors of the worst-predicted point
  validation.json   all of it, plus per-bucket times predicted and measured and their errors
  validation/       every raw executor measurement; --reanalyze rebuilds the report from it

Launch layout: --launch point (default) captures each round's trace in a launch of its own
and runs each point in a launch of its own; --launch round runs a whole round in ONE
executor launch (before each point a 2-step slice of the trace, then the point under a
fresh DDP over the same module), so that trace and runs share each launch's speed. On CPU
the executor holds glibc's allocator steady in every step (--malloc steady) so that trace
capture and runs reuse their pages alike. How the figures are made and read:
docs/VALIDATION.md.

With SCENARIO zoo (or zoo:NAME,NAME,... for some of its models), validate the model zoo instead
('ddpsim trace --list-models', zoo:<name>; the torchvision ones need the 'zoo' extra): each
model as above, one after another, calibrated once, a model already done skipped; it writes
<out-dir>/zoo/summary.md: per model the median |error| (wall clock, CPU clock, CPU clock at the
runs' load), how often the measured mean lies in its prediction interval, and how far
predictions from single captures land apart; each model's interval joined with the method's
error measured on the other models (the split-conformal band of their residuals measured /
predicted - 1) is scored beside it, and every residual is written to
<out-dir>/zoo/method_error.json, which 'ddpsim run' and 'ddpsim validate' take as --method-error
FILE on the same host. The eleven models at 3 caps x 3 rounds take tens of minutes on a small
CPU host (studies/zoo/README.md); fewer models, --caps and --repeats give a quick subset.

Files are rewritten atomically after every run, so an interrupted validation keeps what it
measured. Local validation is CPU/gloo; on GPU nodes run the executor under torchrun
yourself ('torchrun --nproc-per-node 8 -m executor ddp ...')."""

EPILOG = """\
examples:
  ddpsim validate cpu-gloo-mlp --caps none,1,25 --repeats 4    # calibrate, capture, run, compare
  ddpsim validate zoo:resnet18,tied_lm --caps 5,25 --repeats 2   # two models of the zoo

'ddpsim validate cpu-gloo-mlp --reanalyze' rebuilds the shipped report from its raw runs;
'ddpsim validate zoo --reanalyze --calibration reports/zoo/calibration.json' analyses every
zoo model done again."""


def add_parser(subparsers: Any) -> None:
    from ddpsim.validation.measure import DEFAULT_TIMEOUT_S, LAUNCH_MODES

    p = add_verb(subparsers, "validate", help="compare predictions with real DDP runs on this machine",
                 description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("scenario", metavar="SCENARIO", nargs="?", default=None, type=nonempty,
                   help=f"scenario YAML or bundled name, or {ZOO} / {ZOO}:NAME,NAME,... (the model zoo); default: "
                        f"{LOCAL_SCENARIO!r} (2 gloo ranks on this host)")
    p.add_argument("--calibration", metavar="FILE", default=None, type=nonempty,
                   help="reuse a calibration JSON instead of calibrating")
    p.add_argument("--caps", metavar="LIST", default=None, type=from_parser(parse_caps),
                   help="comma list of bucket_cap_mb to run ('none' = not given; list=X+Y+... a bucket_cap_mb_list, "
                        "e.g. none,5,list=0.2+0.5+0.3); default: validation.bucket_cap_mb or the sweep's (the zoo: 1,5,25)")
    p.add_argument("--repeats", metavar="N", type=int_in(1, MAX_REPEATS), default=3, help="runs per point (default 3)")
    p.add_argument("--iterations", metavar="N", type=int_in(1, MAX_ITERATIONS), default=None,
                   help="measured iterations per run (default: the scenario's; the zoo: 20)")
    p.add_argument("--warmup", metavar="N", type=int_in(0, MAX_ITERATIONS), default=None,
                   help="warm-up iterations per run (default: the scenario's; the zoo: 5)")
    p.add_argument("--out-dir", metavar="DIR", default="reports", type=nonempty,
                   help="parent folder of the report (default: reports)")
    p.add_argument("--timeout-s", metavar="S", type=float_in(0, above=True, maximum=MAX_TIMEOUT_S),
                   default=DEFAULT_TIMEOUT_S, help=f"limit per executor run in seconds (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the result lines")
    p.add_argument("--reanalyze", action="store_true",
                   help="run nothing: rebuild the report from the raw runs an earlier validate left under "
                        "reports/<name>/validation/ (step times recomputed from the per-rank records, points simulated "
                        "again with the current engine and the calibration validation.json names, or --calibration); "
                        "the zoo: analyse the models done again")
    scenario_only = p.add_argument_group("a scenario's only (not the zoo's)")
    scenario_only.add_argument("--num-threads", metavar="N", type=int_in(1, MAX_THREADS), default=None,
                               help="torch threads per rank (default: the trace's)")
    scenario_only.add_argument("--no-bucket-timing", action="store_true", help="skip the hooked runs that time each bucket")
    scenario_only.add_argument("--scenario-trace", action="store_true",
                               help="predict from the scenario's trace as is (default: capture a fresh trace on all ranks "
                                    "at once, the run's conditions, with 'executor trace')")
    scenario_only.add_argument("--launch", choices=LAUNCH_MODES, default=None,
                               help="point (default): a launch per point and run, the round's trace in its own; "
                                    "round: each round's trace slices and points in one executor launch")
    scenario_only.add_argument("--method-error", metavar="FILE", default=None, type=nonempty,
                               help="join every prediction interval with the method's error measured on other models: "
                                    "the split-conformal 80 %% band of a zoo run's residuals "
                                    "(<out-dir>/zoo/method_error.json, the validated model's own left out; "
                                    "ddpsim/pipeline/method_error.py)")
    scenario_only.add_argument("--no-plots", action="store_true", help="skip validation.png and validation_timeline.png")


#: the scenario 'ddpsim validate' runs without one: the bundled CPU case every host can run
LOCAL_SCENARIO = "cpu-gloo-mlp"
#: the SCENARIO that validates the model zoo (``zoo``: every model; ``zoo:NAME,NAME``: those)
ZOO = "zoo"
#: the flags of a scenario's validation only, with the value each has when not given
SCENARIO_ONLY = {"num_threads": None, "no_bucket_timing": False, "scenario_trace": False, "launch": None,
                 "method_error": None, "no_plots": False}


def zoo_models(scenario: str | None) -> list[str] | None:
    """The zoo models SCENARIO names (``[]``: every one), or None when it names a scenario."""
    if scenario is None or (scenario != ZOO and not scenario.startswith(ZOO + ":")):
        return None
    models = [m.strip() for m in scenario[len(ZOO) + 1:].split(",") if m.strip()]
    require(scenario == ZOO or bool(models), "SCENARIO", scenario,
            f"{ZOO} or {ZOO}:NAME,NAME,... (names from 'ddpsim trace --list-models')")
    return models


def run(args: argparse.Namespace) -> int:
    models = zoo_models(args.scenario)
    if models is not None:
        return validate_zoo(args, models)
    require_torch("validate")
    from ddpsim.validation.measure import reanalyze, validate

    common = {"calibration": args.calibration, "out_dir": args.out_dir, "plots": not args.no_plots,
              "method_error": args.method_error}
    if args.reanalyze:
        res = reanalyze(args.scenario or LOCAL_SCENARIO, **common)
    else:
        res = validate(args.scenario or LOCAL_SCENARIO, caps=args.caps, iterations=args.iterations, warmup=args.warmup,
                       repeats=args.repeats, bucket_timing=not args.no_bucket_timing, num_threads=args.num_threads,
                       timeout_s=args.timeout_s, capture=not args.scenario_trace, launch_mode=args.launch or "point",
                       **common)
    print(f"validate: wrote {res['out']}/validation.md, validation.csv, validation.json"
          f"{'' if args.no_plots else ', validation.png, validation_timeline.png'}")
    if res["summary"]:
        print(answer_line(res["summary"]))
    return 0


def answer_line(s: dict[str, Any]) -> str:
    """A validation's summary in one line: the error, the best caps and how far apart, the plans."""
    best = f"{s['predicted_best_gap_pct']:.1f} % from it"
    if s.get("best_pair_run_spread_pct") is not None:
        where = "inside" if s["predicted_best_gap_within_spread"] else "beyond"
        best += f", {where} their run spread {s['best_pair_run_spread_pct']:.1f} %"
    if s.get("best_pair_gap_ci95_pct") is not None:
        lo, hi = s["best_pair_gap_ci95_pct"][:2]
        best += f"; paired by round {lo:+.1f}..{hi:+.1f} %, criterion {s['best_cap_verdict']}"
        if s.get("best_pair_rounds_to_decide") is not None:
            best += f", about {s['best_pair_rounds_to_decide']} rounds would decide it"
    line = (f"validate: median |error| {s['median_abs_error_pct']:.1f} % over {s['num_points']} points; "
            f"{s['num_in_band_or_within_10pct']}/{s['num_points']} in band or within 10 %; measured best "
            f"{s['measured_best']}, predicted best {s['predicted_best']} ({best}); "
            f"plan matches: {str(s['plan_matches_all']).lower()}")
    if s.get("num_with_interval"):
        line += f"; inside the 80 % prediction interval: {s['num_in_interval']}/{s['num_with_interval']}"
    return line


def validate_zoo(args: argparse.Namespace, models: list[str]) -> int:
    """``ddpsim validate zoo[:NAME,...]``: run or reanalyse ``models`` (``[]``: all); a scenario's
    flag is refused."""
    for key, unset in SCENARIO_ONLY.items():
        value = getattr(args, key)
        if value != unset:
            raise InputError(f"--{key.replace('_', '-')}: {value!r} is not accepted with SCENARIO {shorten(args.scenario)}; "
                             "expected it only with a scenario (the zoo runs each model its own way and writes its own "
                             "method_error.json)")
    require_torch("validate")
    from ddpsim.validation.zoo_driver import run_zoo as run_models

    res = run_models(models=models or None, out_dir=args.out_dir, caps=args.caps, repeats=args.repeats,
                     iterations=args.iterations or 20, warmup=5 if args.warmup is None else args.warmup,
                     calibration=args.calibration, timeout_s=args.timeout_s, reanalyze=args.reanalyze)
    print(f"zoo: wrote {res['out']}/summary.md, summary.csv, summary.json")
    return 0
