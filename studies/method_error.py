"""How often measured means lie inside their prediction intervals, without and with the method's
error measured on other models (ddpsim/pipeline/method_error.py).

One command, prints figures; no assertions; nothing is run or simulated (it reads the committed
validations' recorded predictions, measurements and noise intervals)::

    python studies/method_error.py
    python studies/method_error.py --zoo-runs reports/zoo/lanes/zoo --level 0.8

For every whole-zoo run (``<run>/zoo-*/zoo.json``):

* **leave one model out, same run**: each model's wall-clock intervals joined with the
  split-conformal band of the OTHER models' residuals (measured / predicted - 1) of the same run
  -- what ``ddpsim validate zoo`` scores; beside it the noise interval alone and the band alone;
* **across runs**: the band of run A's residuals (the model itself left out) joined with run B's
  intervals -- residuals measured at another moment, with another calibration, as a user who
  reuses a zoo run's ``method_error.json`` would have them;

and for the bundled validations (``reports/cpu-gloo-*/validation.json``), each zoo run's band
(every zoo model: none is a bundled one) joined with their intervals.

A band is valid where the new model's residual is exchangeable with the others': the same host,
backend and calibration. The across-run rows show what happens when the calibration differs.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

ZOO_RUNS = sorted(os.path.dirname(p) for p in glob.glob("reports/zoo/*/zoo/summary.json"))
BUNDLED = sorted(glob.glob("reports/cpu-gloo-*/validation.json"))


def zoo_points(run: str) -> dict[str, list[dict]]:
    """model -> its points (measured_s, predicted_s, low_s, high_s) of one zoo run."""
    out = {}
    for f in sorted(glob.glob(os.path.join(run, "zoo-*", "zoo.json"))):
        d = json.loads(Path(f).read_text())
        pts = [{"measured_s": p["measured_s"], "predicted_s": p["predicted_s"], "low_s": p["interval"]["low_s"],
                "high_s": p["interval"]["high_s"]}
               for p in (d.get("analysis") or {}).get("points", []) if p.get("measured_s") and p.get("interval")]
        if pts:
            out[d["model"]] = pts
    return out


def residuals(points: dict[str, list[dict]], exclude: str | None = None) -> list[float]:
    return [p["measured_s"] / p["predicted_s"] - 1 for m, ps in points.items() if m != exclude for p in ps]


def score(pts: list[dict], band: tuple[float, float] | None) -> tuple[int, int, int]:
    """(inside the noise interval, inside the band alone, inside their hull) over ``pts``."""
    noise = sum(p["low_s"] <= p["measured_s"] <= p["high_s"] for p in pts)
    if band is None:
        return noise, 0, noise
    alone = hull = 0
    for p in pts:
        lo, hi = p["predicted_s"] * (1 + band[0]), p["predicted_s"] * (1 + band[1])
        alone += lo <= p["measured_s"] <= hi
        hull += min(lo, p["low_s"]) <= p["measured_s"] <= max(hi, p["high_s"])
    return noise, alone, hull


def calibration_of(run: str) -> str:
    try:
        return json.loads(Path(run, "method_error.json").read_text()).get("calibration") or "?"
    except (OSError, ValueError):
        return "?"


def main(argv: list[str]) -> int:
    from ddpsim.pipeline.method_error import conformal_band

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo-runs", nargs="+", default=ZOO_RUNS, help="zoo folders (<out>/zoo) with zoo.json per model")
    ap.add_argument("--bundled", nargs="*", default=BUNDLED, help="validation.json files of single validations")
    ap.add_argument("--level", type=float, default=0.8, help="interval level (default 0.8)")
    args = ap.parse_args(argv)
    runs = {r: zoo_points(r) for r in args.zoo_runs}
    runs = {r: p for r, p in runs.items() if p}
    if not runs:
        print("method_error: no zoo run with analysed points; expected --zoo-runs DIR ...", file=sys.stderr)
        return 2
    print(f"level {args.level:.0%}; coverage = measured means inside / points")
    print(f"{'residuals from':34s} {'intervals of':34s} {'points':>6s} {'noise':>7s} {'band':>7s} {'joined':>7s}  band (median over models)")
    for b_run, b_pts in runs.items():
        for a_run, a_pts in runs.items():
            tot = [0, 0, 0, 0]
            bands = []
            for m, ps in b_pts.items():
                band = conformal_band(residuals(a_pts, exclude=m), args.level)
                n, al, h = score(ps, band)
                tot = [tot[0] + len(ps), tot[1] + n, tot[2] + al, tot[3] + h]
                if band:
                    bands.append(band)
            bands.sort(key=lambda x: x[1] - x[0])
            mid = bands[len(bands) // 2] if bands else None
            label = "same run, other models" if a_run == b_run else a_run
            print(f"{label:34s} {b_run:34s} {tot[0]:6d} {tot[1]:3d} ({100 * tot[1] / tot[0]:2.0f}%) "
                  f"{tot[2]:3d} ({100 * tot[2] / tot[0]:2.0f}%) {tot[3]:3d} ({100 * tot[3] / tot[0]:2.0f}%)  "
                  + ("-" if mid is None else f"{100 * mid[0]:+.1f}..{100 * mid[1]:+.1f} %"))
    if args.bundled:
        print()
        print("bundled validations (their own calibration), with each zoo run's band")
        for f in args.bundled:
            d = json.loads(Path(f).read_text())
            pts = [{"measured_s": r["measured_s"], "predicted_s": r["predicted_s"], "low_s": r["predicted_low_s"],
                    "high_s": r["predicted_high_s"]} for r in d["rows"]
                   if r.get("measured_s") and r.get("predicted_low_s") is not None]
            if not pts:
                continue
            for a_run, a_pts in runs.items():
                band = conformal_band(residuals(a_pts, exclude=d.get("model")), args.level)
                n, al, h = score(pts, band)
                print(f"  {d['scenario']:20s} residuals of {a_run:34s} {len(pts)} points: noise {n}, band {al}, joined {h}"
                      + ("" if band is None else f"  ({100 * band[0]:+.1f}..{100 * band[1]:+.1f} %)"))
    print()
    for r in runs:
        print(f"{r}: calibration {calibration_of(r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
