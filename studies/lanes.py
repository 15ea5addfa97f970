"""Whether running a gloo group's collectives on its worker threads' lanes predicts committed real
DDP runs better than one in-order stream.

One command, prints figures; no assertions::

    python studies/lanes.py                       # committed runs x calibrations with a queued curve
    python studies/lanes.py --runs reports/zoo/self-calibrated/zoo/zoo-* --calibrations cal.json

A calibration with ``allreduce_queued`` (``executor collectives --queued-ops``) gives the engine
``comm_threads`` lanes, each collective paced by ``b / (n q)`` while ``n`` progress
(ddpsim/engine/simulate.py, "lanes"). Every validation folder that holds its raw runs is predicted again
with each such calibration as it is (lanes) and with its queued curve taken out (one lane),
errors only: nothing is run. Per calibration and mode: models within 5 % (median |error| over
their points), the median of those medians, the mean signed error and the cap trend, as
``weighting.py`` prints them, and the best-cap figures: how many models' predicted-best
point is the measured best, and the mean of (measured step at the predicted-best point /
measured best - 1) -- what following the prediction costs; ``--per-model`` adds each model's signed errors and its
smallest-cap over largest-cap step, measured and predicted. The slope between caps is where
lanes act: a model whose small buckets queue up during backward.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from weighting import RUNS, errors, figures, load_runs, per_model_lines  # noqa: E402

CALIBRATIONS = sorted(p for p in [*glob.glob("reports/zoo/*/zoo/calibration.json"), *glob.glob("reports/zoo/calibrations/*.json"),
                                  "reports/cpu-gloo-calibration.json", "reports/zoo/calibration.json"]
                      if os.path.isfile(p) and "allreduce_queued" in json.loads(Path(p).read_text()))


def best_cap(res) -> tuple[int, float]:
    """(models whose predicted-best point is the measured best, mean % the predicted best measured
    above the measured best)."""
    hits, gaps = 0, []
    for pts in res.values():
        pred = min(pts, key=lambda k: pts[k][0])
        meas = min(pts, key=lambda k: pts[k][1])
        hits += pred == meas
        gaps.append(100 * (pts[pred][1] / pts[meas][1] - 1))
    return hits, sum(gaps) / len(gaps)


def main(argv: list[str]) -> int:
    from ddpsim.calibration.loader import calibration_from_dict
    from ddpsim.errors import InputError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", default=RUNS, help="validation folders holding their raw runs")
    ap.add_argument("--calibrations", nargs="+", default=CALIBRATIONS,
                    help="calibration files with a queued curve (default: every committed one)")
    ap.add_argument("--per-model", action="store_true", help="also each model's errors and cap trend")
    args = ap.parse_args(argv)
    if not args.calibrations:
        print("lanes: no calibration with a queued curve (allreduce_queued); expected --calibrations FILE ...",
              file=sys.stderr)
        return 2
    runs = load_runs(args.runs)
    print(f"{len(runs)} validations ({sum(len(r[2]) for r in runs)} points) x {len(args.calibrations)} calibrations")
    print(f"{'calibration':48s} {'mode':10s} {'within 5 %':>10s} {'median':>7s} {'signed':>7s} {'cap trend':>9s} "
          f"{'best cap':>9s} {'its cost':>8s}")
    wins = {"lanes": 0, "one lane": 0}
    for path in args.calibrations:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            print(f"{path}: not readable ({exc})")
            continue
        if "allreduce_queued" not in doc:
            print(f"{path}: no queued curve (allreduce_queued), skipped")
            continue
        best = None
        for mode in wins:
            d = dict(doc)
            if mode == "one lane":
                d.pop("allreduce_queued")
                d.pop("comm_threads", None)
            try:
                cal = calibration_from_dict(d)
            except InputError as exc:
                print(f"{path}: {exc}")
                break
            res = errors(runs, cal)
            n5, med, signed, trend = figures(res)
            hits, cost = best_cap(res)
            print(f"{path:48s} {mode:10s} {n5:>5d}/{len(runs):<4d} {med:6.1f}% {signed:+6.1f}% {trend:8.1f}% "
                  f"{hits:>4d}/{len(runs):<4d} {cost:7.2f}%")
            if args.per_model:
                print("\n".join(per_model_lines(res)))
            best = (mode, med) if best is None or med < best[1] else best
        if best is not None:
            wins[best[0]] += 1
    print("lower median |error| under: " + ", ".join(f"{m} {n} calibration(s)" for m, n in wins.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
