"""Study: how far is a validation's prediction from its runs once the host's other load is taken out?

One command, prints figures; no assertions:

    python studies/validation_at_load.py REPORT_DIR [--calibration CAL]

``REPORT_DIR`` is a ``ddpsim validate`` report folder with its raw runs (``validation.json`` and
``validation/``: the rounds' traces ``trace.round<k>.json`` and every run's record). On a host
shared with other jobs a small model's step is stretched by every millisecond the ranks wait for
a CPU, which is not the model's. Per point this prints the measured mean step; the wall-clock
prediction ``ddpsim validate`` makes (the rounds' pooled traces); the prediction from the same
traces on the CPU clock (:func:`ddpsim.validation.stability.cpu_clock_trace`) stretched by the
share of a CPU the ranks held in the point's runs (:func:`ddpsim.validation.stability.cpu_share`,
the other load from the runs' ``/proc/stat`` counters, pooled over the point's runs since one
millisecond-step run spans too few 10 ms ticks); and both errors. Then each point's step over the
first point's, paired by round (run k of every point ran in round k), against the predicted
ratio: the order of the points with the host's drift paired out; and the same with each run's
step first scaled by the CPU share its own other load left the ranks (``cpu_share``; one run's
share scatters by several % over its few hundred 10 ms ticks, far less than the load moves).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def other_pct(runs: list[dict]) -> float:
    """The host's CPU time busy with other work during ``runs``' steps, % (counters pooled)."""
    from ddpsim.formats import host_shares

    busy = steal = all_s = ours = 0.0
    for run in runs:
        ranks = [g["iterations"] for g in run["ranks"]]
        busy += statistics.fmean(sum(s["host_busy_s"] for s in r) for r in ranks)
        steal += statistics.fmean(sum(s["host_steal_s"] for s in r) for r in ranks)
        all_s += statistics.fmean(sum(s["host_all_s"] for s in r) for r in ranks)
        ours += sum(s["cpu_s"] for r in ranks for s in r)
    return host_shares(ours, busy, steal, all_s)["other_pct"]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report_dir", help="a ddpsim validate report folder with its validation/ raw runs")
    ap.add_argument("--calibration", default=None, help="calibration to predict with (default: the report's)")
    args = ap.parse_args(argv)
    from ddpsim.calibration.loader import load_calibration
    from ddpsim.errors import InputError
    from ddpsim.pipeline.scenario import load_scenario
    from ddpsim.trace.records import load_trace, pool_traces
    from ddpsim.validation.intervals import predict_mean
    from ddpsim.validation.stability import cpu_clock_trace, cpu_share

    raw = os.path.join(args.report_dir, "validation")
    try:
        with open(os.path.join(args.report_dir, "validation.json")) as f:
            rep = json.load(f)
    except OSError as exc:
        print(f"validation_at_load: REPORT_DIR: {args.report_dir!r} is not accepted ({exc}); expected a validate report folder",
              file=sys.stderr)
        return 2
    cal = load_calibration(args.calibration or rep["calibration"])
    traces = [load_trace(p) for p in sorted(glob.glob(os.path.join(raw, "trace.round*.json")))]
    if not traces:
        raise InputError(f"{raw}: no trace.round<k>.json; expected a validation's round captures")
    wall_trace, cpu_trace = pool_traces(traces), pool_traces([cpu_clock_trace(t) for t in traces])
    from ddpsim.pipeline.scenario import find_scenario

    scenario = load_scenario(find_scenario(rep["scenario"]))
    points = {p.point_id: p for p in scenario.points()}
    num_cpus = int(traces[0].environment.get("num_cpus") or os.cpu_count() or 1)
    print(f"{rep['scenario']}: {len(traces)} rounds; calibration {args.calibration or rep['calibration']}")
    print(f"{'point':>16s} {'measured':>9s} {'other %':>7s} {'wall pred':>9s} {'error':>7s} {'at load':>8s} {'error':>7s}")
    runs_by_point, pred, wall_of = {}, {}, {}
    for row in rep["rows"]:
        pid = row["point"]
        runs = []
        for path in sorted(glob.glob(os.path.join(raw, f"{pid}.run*.json"))):
            with open(path) as f:
                runs.append(json.load(f))
        runs_by_point[pid] = runs
        predict = predict_mean(scenario, points[pid], cal)
        wall, cpu = predict(wall_trace), predict(cpu_trace)
        other = other_pct(runs)
        # every phase stretched alike, communication included
        load = cpu / cpu_share(max(0.0, other), num_cpus=num_cpus, num_busy_threads=scenario.world_size or 2)
        m = row["measured_s"]
        pred[pid] = load
        wall_of[pid] = wall
        print(f"{pid:>16s} {m * 1e3:8.2f}  {other:7.1f} {wall * 1e3:8.2f}  {100 * (wall / m - 1):+6.1f}% "
              f"{load * 1e3:7.2f}  {100 * (load / m - 1):+6.1f}%")

    def steps(pid: str, scaled: bool) -> list[float]:
        out = []
        for r in runs_by_point[pid]:
            share = cpu_share(min(99.0, max(0.0, other_pct([r]))), num_cpus=num_cpus,
                              num_busy_threads=scenario.world_size or 2) if scaled else 1.0
            out.append(statistics.fmean(r["summary"]["step_times_s"]) * share)
        return out

    first = rep["rows"][0]["point"]
    for scaled in (False, True):
        base = steps(first, scaled)
        for row in rep["rows"][1:]:
            pid = row["point"]
            ratios = [a / b for a, b in zip(steps(pid, scaled), base)]
            gm = math.exp(statistics.fmean(math.log(x) for x in ratios))
            print(f"{pid} / {first}{' (each run at its CPU share)' if scaled else ''}: measured {gm:.3f} (geometric mean "
                  f"of {len(ratios)} rounds: {' '.join(f'{x:.2f}' for x in ratios)}), predicted {wall_of[pid] / wall_of[first]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
