"""Which interference weighting predicts committed real DDP runs better, under every calibration of the host.

One command, prints figures; no assertions::

    python studies/weighting.py                   # committed runs x committed calibrations
    python studies/weighting.py --runs reports/cpu-gloo-resnet50 --calibrations cal.json

The engine slows backward compute while a collective is in flight (``Interference``); the
calibration's ``weighting`` says by how much of ``compute_slowdown`` a collective applies:
``uniform`` (all of it, whatever its size) or ``bandwidth`` (its share of moved bytes, so a
latency-bound small bucket barely slows compute). A calibration fits ``compute_slowdown`` to its
probe (three 25 MiB buckets: the two weightings fit nearly the same value), so the choice shows
at the points with many small buckets.

Every validation folder that holds its raw runs (``<folder>/validation/*.run*.json`` and its
pooled trace) is predicted again with each calibration file and each weighting, errors only
(no intervals, nothing run): the measured means are the folder's ``validation.csv``. Per
calibration and weighting it prints how many models land within 5 % (median |error| over their
points), the median of those medians, the mean signed error, and the cap trend: for each model,
(predicted - measured) of (step at its smallest cap - step at its largest cap) / the measured
step at the largest, median |.| over the models -- whether more buckets cost what they measure.
``--per-model`` adds, per model, its signed error at every point and its step at the smallest
cap over its step at the largest, measured and predicted. A few seconds per calibration.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import glob
import io
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

RUNS = [*sorted(glob.glob("reports/zoo/quiet/zoo/zoo-*")), *sorted(glob.glob("reports/zoo/self-calibrated/zoo/zoo-*")),
        *sorted(glob.glob("reports/zoo/lanes/zoo/zoo-*")),
        *(f"reports/cpu-gloo-{m}" for m in ("bert-base", "gpt2-124m", "mlp", "resnet50"))]
CALIBRATIONS = [p for p in ["reports/cpu-gloo-calibration.json", "reports/zoo/calibration.json",
                *sorted(glob.glob("reports/zoo/calibrations/*.json")), *sorted(glob.glob("reports/zoo/self-calibrated/zoo/calibration.json")),
                *sorted(glob.glob("reports/zoo/lanes/zoo/calibration.json"))] if os.path.isfile(p)]
WEIGHTINGS = ("bandwidth", "uniform")


def scenario_of(folder: Path) -> str:
    """The scenario a validation folder was written for: the zoo's own YAML beside it, else the bundled name."""
    zoo = folder.parent / "scenarios" / f"{folder.name}.yaml"
    return str(zoo) if zoo.is_file() else folder.name


def load_runs(folders: list[str]) -> list[tuple[str, object, list, object, dict[str, float]]]:
    """``(name, scenario, points, pooled trace, {point: measured mean s})`` per folder."""
    from ddpsim.pipeline.scenario import load_scenario
    from ddpsim.trace.records import load_trace
    from ddpsim.validation.measure import select_points, report_trace_path

    out = []
    for f in folders:
        folder = Path(f)
        if not (folder / "validation.json").is_file():
            print(f"{f}: no validation.json, skipped")
            continue
        old = json.loads((folder / "validation.json").read_text())
        scenario = load_scenario(scenario_of(folder))
        trace = load_trace(report_trace_path(old, folder / "validation"))
        points = select_points(scenario, [r["bucket_cap_mb"] for r in old["rows"]])
        measured = {r["point"]: float(r["measured_s"]) for r in csv.DictReader(open(folder / "validation.csv"))}
        out.append((str(folder), scenario, points, trace, measured))
    return out


def errors(runs, cal) -> dict[str, dict[str, float]]:
    """Per model, per point: 100 * (predicted - measured) / measured."""
    from ddpsim.validation.compare import PointOutcome
    from ddpsim.validation.measure import predict_points

    res = {}
    for name, scenario, points, trace, measured in runs:
        outs = {p.point_id: PointOutcome(point_id=p.point_id, bucket_cap_mb=None) for p in points}
        with contextlib.redirect_stdout(io.StringIO()):
            predict_points(scenario, points, outs, trace, cal)
        res[name] = {pid: (o.predicted_s, measured[pid]) for pid, o in outs.items()}
    return res


def cap_of(point_id: str) -> float:
    cap = point_id.split("=", 1)[1]
    return 25.0 if cap == "default" else float(cap)


def figures(res) -> tuple[int, float, float, float]:
    meds, signed, trend = [], [], []
    for pts in res.values():
        errs = [100 * (p - m) / m for p, m in pts.values()]
        meds.append(statistics.median(abs(e) for e in errs))
        signed += errs
        caps = sorted(pts, key=cap_of)
        (p0, m0), (p1, m1) = pts[caps[0]], pts[caps[-1]]
        trend.append(abs(100 * ((p0 - p1) - (m0 - m1)) / m1))
    return sum(m <= 5 for m in meds), statistics.median(meds), statistics.mean(signed), statistics.median(trend)


def per_model_lines(res) -> list[str]:
    """Per model: signed errors by point, and (smallest cap / largest cap - 1) measured and predicted."""
    out = []
    for name, pts in res.items():
        caps = sorted(pts, key=cap_of)
        (p0, m0), (p1, m1) = pts[caps[0]], pts[caps[-1]]
        errs = " ".join(f"{pid} {100 * (p - m) / m:+.1f}" for pid, (p, m) in pts.items())
        out.append(f"    {name}: {errs} %; {caps[0]} over {caps[-1]}: measured {100 * (m0 / m1 - 1):+.1f} %, "
                   f"predicted {100 * (p0 / p1 - 1):+.1f} %")
    return out


def main(argv: list[str]) -> int:
    from ddpsim.calibration.loader import calibration_from_dict
    from ddpsim.errors import InputError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", default=RUNS, help="validation folders holding their raw runs")
    ap.add_argument("--calibrations", nargs="+", default=CALIBRATIONS, help="calibration files")
    ap.add_argument("--per-model", action="store_true", help="also each model's errors and cap trend")
    args = ap.parse_args(argv)
    runs = load_runs(args.runs)
    print(f"{len(runs)} validations ({sum(len(r[2]) for r in runs)} points) x {len(args.calibrations)} calibrations")
    print(f"{'calibration':48s} {'weighting':10s} {'within 5 %':>10s} {'median':>7s} {'signed':>7s} {'cap trend':>9s}")
    wins = {w: 0 for w in WEIGHTINGS}
    for path in args.calibrations:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            print(f"{path}: not readable ({exc})")
            continue
        best = None
        for w in WEIGHTINGS:
            if isinstance(doc.get("interference"), dict):
                doc["interference"]["weighting"] = w
            try:
                cal = calibration_from_dict(doc)
            except InputError as exc:
                print(f"{path}: {exc}")
                break
            res = errors(runs, cal)
            n5, med, signed, trend = figures(res)
            print(f"{path:48s} {w:10s} {n5:>5d}/{len(runs):<4d} {med:6.1f}% {signed:+6.1f}% {trend:8.1f}%")
            if args.per_model:
                print("\n".join(per_model_lines(res)))
            best = (w, med) if best is None or med < best[1] else best
        if best is not None:
            wins[best[0]] += 1
    print("lower median |error| under: " + ", ".join(f"{w} {n} calibration(s)" for w, n in wins.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
