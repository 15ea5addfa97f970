"""How far apart independent validations of one model predict, with one calibration and one engine.

One command, prints figures; no assertions::

    python studies/stability.py                   # the whole-zoo runs under reports/zoo, raw runs unpacked
    python studies/stability.py --zoo-runs reports/zoo/quiet reports/zoo/lanes --calibration cal.json

``ddpsim validate zoo``'s stability column compares the predictions from each round's capture
alone (20 iterations: a capture that lands in a slow spell of the host moves it). What a user
compares is two validations: each predicts from its rounds' captures pooled. Every whole-zoo
run (``<run>/zoo/zoo-<model>/validation/trace.concurrent.json``, captured on its own day and
moment) is predicted again with ONE calibration at each cap of its scenario, nothing run; per
model and cap: (max - min) / median of the runs' predictions; per model the median over caps,
beside the spread of those runs' measured means the same way (how far the host itself moved
between the runs). Target of the zoo issue: within 3 %.
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

ZOO_RUNS = sorted(os.path.dirname(p) for p in glob.glob("reports/zoo/*/zoo"))


def predictions(folder: Path, cal) -> dict[str, tuple[float, float]]:
    """``{point: (predicted mean s, measured mean s)}`` of one validation folder."""
    from ddpsim.pipeline.scenario import load_scenario
    from ddpsim.trace.records import load_trace
    from ddpsim.validation.compare import PointOutcome
    from ddpsim.validation.measure import predict_points, select_points, report_trace_path

    old = json.loads((folder / "validation.json").read_text())
    scenario = load_scenario(str(folder.parent / "scenarios" / f"{folder.name}.yaml"))
    trace = load_trace(report_trace_path(old, folder / "validation"))
    points = select_points(scenario, [r["bucket_cap_mb"] for r in old["rows"]])
    outs = {p.point_id: PointOutcome(point_id=p.point_id, bucket_cap_mb=None) for p in points}
    with contextlib.redirect_stdout(io.StringIO()):
        predict_points(scenario, points, outs, trace, cal)
    measured = {r["point"]: float(r["measured_s"]) for r in csv.DictReader(open(folder / "validation.csv"))}
    return {pid: (o.predicted_s, measured[pid]) for pid, o in outs.items()}


def spread(xs: list[float]) -> float:
    return 100 * (max(xs) - min(xs)) / statistics.median(xs)


def main(argv: list[str]) -> int:
    from ddpsim.calibration.loader import load_calibration
    from ddpsim.errors import InputError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo-runs", nargs="+", default=ZOO_RUNS, help="whole-zoo output folders holding their raw runs")
    ap.add_argument("--calibration", default="reports/zoo/lanes/zoo/calibration.json", help="the one calibration")
    args = ap.parse_args(argv)
    try:
        cal = load_calibration(args.calibration)
    except InputError as exc:
        print(f"stability: {exc}", file=sys.stderr)
        return 2
    per_model: dict[str, list[dict[str, tuple[float, float]]]] = {}
    for run in args.zoo_runs:
        for folder in sorted(Path(run, "zoo").glob("zoo-*")):
            if (folder / "validation.json").is_file():
                per_model.setdefault(folder.name, []).append(predictions(folder, cal))
    print(f"{len(args.zoo_runs)} whole-zoo runs, predicted again with {args.calibration}")
    print(f"{'model':26s} {'runs':>4s} {'prediction spread':>17s} {'measured spread':>15s}")
    within = 0
    counted = 0
    for name, runs in per_model.items():
        if len(runs) < 2:
            print(f"{name:26s} {len(runs):>4d}  (one run: nothing to compare)")
            continue
        caps = [c for c in runs[0] if all(c in r for r in runs)]
        pred = statistics.median(spread([r[c][0] for r in runs]) for c in caps)
        meas = statistics.median(spread([r[c][1] for r in runs]) for c in caps)
        counted += 1
        within += pred <= 3.0
        print(f"{name:26s} {len(runs):>4d} {pred:16.1f}% {meas:14.1f}%")
    print(f"within 3 %: {within} of {counted} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
