"""Summarise every committed ``reports/*/validation.json``: accuracy per scenario, and how far
the prediction trace's compute was from the compute the real runs saw (the main limit on a
shared CPU host, where load drifts between the trace capture and the runs), and the run
spread: how far apart repeated runs of one configuration land (the measurement's noise floor);
then, per scenario, the predicted against the measured phases (forward, backward with its
communication, optimizer) at cap=default.

    python benchmarks/bench_validation.py [reports]

Not a test: it reads files and prints; no timing is asserted anywhere.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def forward_drift(folder: Path, data: dict) -> tuple[float, float] | None:
    """(trace forward median, real runs' forward median) in seconds; forward has no gradient
    communication, so it compares compute only."""
    tpath = Path(data.get("trace", ""))
    if not tpath.is_file():
        return None
    trace = json.loads(tpath.read_text())
    t_fwd = statistics.median(it["forward_s"] for it in trace["iterations"])
    runs = [json.loads(p.read_text()) for p in sorted((folder / "validation").glob("*.run*.json"))]
    if not runs:
        return None
    r_fwd = statistics.median(r["summary"]["forward_s"] for r in runs)
    return t_fwd, r_fwd


def run_spread(d: dict) -> float:
    """Median over the points of (slowest - fastest run median) / measured, in %: the noise floor
    of the measurement itself (from each row's run medians, so older reports have it too)."""
    from ddpsim.validate import run_spread_pct

    out = [run_spread_pct([float(x) for x in str(r.get("run_medians_s") or "").split()], r.get("measured_s"))
           for r in d["rows"]]
    out = [x for x in out if x is not None]
    return statistics.median(out) if out else float("nan")


def phases(folder: Path, d: dict, point: str = "cap=default") -> tuple[dict, dict] | None:
    """Predicted vs measured phases (seconds) of one point: the prediction re-simulated from the
    report's own trace and calibration; measured = median over the runs of each run's median,
    and the range of the runs' forward medians (compute only: no gradient communication)."""
    from ddpsim.calibration import load_calibration
    from ddpsim.engine import simulate
    from ddpsim.scenario import load_scenario
    from ddpsim.trace import load_trace

    runs = [json.loads(p.read_text()) for p in sorted((folder / "validation").glob(f"{point}.run*.json"))]
    if not runs or not Path(d.get("trace", "")).is_file() or not Path(d.get("calibration", "")).is_file():
        return None
    scen = load_scenario(d["scenario"])
    (pt,) = [p for p in scen.points() if p.point_id == point]
    inp = scen.build_point(pt, trace=load_trace(d["trace"]), calibration=load_calibration(d["calibration"]))
    m = simulate(inp.trace, inp.plan, inp.comm, inp.config).summary()
    pred = {"forward": m["forward_s"], "backward+comm": m["backward_compute_s"] + m["exposed_comm_s"],
            "optimizer": m["optimizer_s"]}
    fwd = [r["summary"]["forward_s"] for r in runs]
    meas = {"forward": statistics.median(fwd), "backward+comm": statistics.median(r["summary"]["backward_s"] for r in runs),
            "optimizer": statistics.median(r["summary"]["optimizer_s"] for r in runs), "forward_range": (min(fwd), max(fwd))}
    return pred, meas


def main(root: str = "reports") -> int:
    rows = []
    for vj in sorted(Path(root).glob("*/validation.json")):
        d = json.loads(vj.read_text())
        s = d.get("summary") or {}
        if not s:
            continue
        drift = forward_drift(vj.parent, d)
        rows.append((d["scenario"], s, drift, d))
    print(f"{'scenario':22s} {'points':>6s} {'med|err|':>8s} {'max|err|':>8s} {'band/10%':>8s} "
          f"{'best gap':>8s} {'plan':>5s} {'trace fwd':>9s} {'run fwd':>8s} {'drift':>7s} {'run spread':>10s}")
    for name, s, drift, d in rows:
        tf, rf = drift if drift else (float("nan"), float("nan"))
        print(f"{name:22s} {s['num_points']:6d} {s['median_abs_error_pct']:7.1f}% {s['max_abs_error_pct']:7.1f}% "
              f"{s['num_in_band_or_within_10pct']:>4d}/{s['num_points']:<3d} {s['predicted_best_gap_pct']:7.1f}% "
              f"{str(s['plan_matches_all']).lower():>5s} {tf * 1e3:8.1f}ms {rf * 1e3:7.1f}ms {100 * (tf - rf) / rf:+6.1f}% {run_spread(d):9.1f}%")
    print("\nphases at cap=default, predicted / measured (ms; measured forward: median and range of the runs' medians;"
          " the predicted forward includes the calibrated DDP overhead)")
    for name, s, drift, d in rows:
        ph = phases(Path(root) / name, d)
        if ph is None:
            continue
        pred, meas = ph
        lo, hi = meas["forward_range"]
        print(f"{name:22s} forward {pred['forward'] * 1e3:9.2f} / {meas['forward'] * 1e3:9.2f} ({lo * 1e3:.2f}-{hi * 1e3:.2f})"
              f"  backward+comm {pred['backward+comm'] * 1e3:9.2f} / {meas['backward+comm'] * 1e3:9.2f}"
              f"  optimizer {pred['optimizer'] * 1e3:7.2f} / {meas['optimizer'] * 1e3:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
