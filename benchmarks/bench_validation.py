"""Summarise every committed ``reports/*/validation.json``: accuracy per scenario, and how far
the prediction trace's compute was from the compute the real runs saw (the main limit on a
shared CPU host, where load drifts between the trace capture and the runs), and the run
spread: how far apart repeated runs of one configuration land (the measurement's noise floor);
then, per scenario, the predicted against the measured phases (forward, backward with its
communication, optimizer) at cap=default.

    python benchmarks/bench_validation.py [reports] [--slowdown-grid 2,3,4,6,8] [--buckets]
    python benchmarks/bench_validation.py --criteria reports reports/cpu-gloo-session7 ...
    python benchmarks/bench_validation.py --bias reports reports/cpu-gloo-session7 ...
    python benchmarks/bench_validation.py --alternatives reports reports/cpu-gloo-session7 ...
    python benchmarks/bench_validation.py --phase-bias reports reports/cpu-gloo-session7 ...
    python benchmarks/bench_validation.py --host reports/cpu-gloo-session17 ...
    python benchmarks/bench_validation.py --pairing reports/cpu-gloo-session17 reports/cpu-gloo-session18 ...

``--slowdown-grid``: also re-simulate every point of every report with the engine's
compute_slowdown set to each listed value (the calibration's comm_slowdown and everything
else kept) and print the signed median error per scenario: which overlap slowdown each model's
own runs would want, beside the one the calibration's probe fit gave (a diagnostic of the
one-calibration-per-machine model, never used to predict).

``--buckets``: also, for every point with a hooked run (``validate`` without
``--no-bucket-timing``), the per-bucket timing measured (medians over the hooked run's iterations,
rank 0) against predicted (the first steady iteration): the first bucket's start (forward and
early backward, from the iteration start), the backward span from the first to
the last bucket's start (the last rank's launch: backward compute under the overlap, on the
rank that falls behind), the sum of the buckets' own all-reduce times (the wait for the last
rank and the queueing behind the previous bucket taken out:
:func:`ddpsim.validate.bucket_figures`), the last bucket's, how far apart the ranks launch the
last bucket (measured: each rank's median; predicted: the first steady iteration), and the
compute_slowdown at which
the engine's backward span equals the measured one (bisection over 1..16 with the report's
calibration otherwise) -- what the overlap cost this model's backward, beside the probe's fit.
And, from every raw run, how much the per-iteration phases move within one run (p90/p10 - 1 of
the iterations' rank-mean forward, backward+comm and step, median over the points).

The first table: ``med|err|`` is the median over a report's points of |error| between the
simulated and the measured MEAN step (the compared figure, :mod:`ddpsim.validate`); ``of p50s``
the same between the simulated and the measured median step, kept beside it.

``--criteria ROOT [ROOT ...]``: instead, one line per report of every listed run folder: the
issue's three criteria (median |error| <= 5 %, every point in band or within 10 %, predicted
best within 2 % of the measured best), which are met, and whether the best-cap gap is larger
than the run spread of the two points involved (the larger of their slowest-minus-fastest run
medians over the pooled mean): a gap inside it is a pick the measurement cannot tell apart
from noise; and the 95 % interval of that gap from the two points' runs paired by round
(``ddpsim.validate.paired_gap_ci_pct``) with what it decides: ``met`` (the interval lies at or
under 2 %, or the predicted best is the measured best), ``missed`` (above 2 %), ``unresolved``
(2 % inside it), ``n/a`` (a report written before per-run means were kept: rebuild it with
``ddpsim validate --reanalyze``); for an unresolved one, how many rounds would decide it at
the runs' scatter (``ddpsim.validate.rounds_to_decide``). Then the count of reports meeting all
three, and of verdicts.

``--bias ROOT [ROOT ...]``: instead, per scenario and point, the signed error of every listed
run folder's report, their mean, range and how many are under: an error that keeps its sign
in every run is the model's, one that changes sign is the host's noise.

``--alternatives ROOT [ROOT ...]``: instead, every report re-simulated under the calibration's
own model (``fitted``) and two alternatives built from the same calibration, with no
per-model factor (``alternative_rows``): ``conserve`` (compute_slowdown ``m / (m - 1)`` from
the microbenchmark's comm_slowdown m: an overlapped all-reduce and compute share the CPU, so
overlap never costs more than running them one after the other) and ``round-matched`` (each
run predicted from the trace captured in its own round); per report the three criteria under
each, then the totals and the mean signed error per scenario and point.

``--phase-bias ROOT [ROOT ...]``: instead, per scenario and point, where the step's signed error
sits: predicted minus measured forward (with zero_grad and DDP's pre-forward), backward+comm
(what ``loss.backward()`` spans under DDP) and optimizer, as % of the measured step, mean over
every report, and how many reports predict each phase short (:func:`phase_bias_table`).

``--pairing ROOT [ROOT ...]``: instead, per report, how well what the prediction stands on
tracks what was measured, by launch layout (``validate --launch``): ``track`` is the scatter
over the runs (standard deviation, %) of each run's forward against the forward of its own
round's trace (forward has no gradient communication: compute against compute); ``bias`` their
mean; with ``--launch round``, ``slice`` the same against the trace slice captured right before
the run in the same launch. ``run`` is the scatter of each run's mean step about its point's
pooled mean (what a point's level carries from the launches it ran in), ``pair`` the scatter
over rounds of the ratio of two points' runs in one round, root-mean-square over the pairs of
points (what a best-cap decision is made from). A layout whose trace and runs share the
launch's speed shows a smaller ``track``; one whose points share it, a smaller ``pair``.

Not a test: it reads files and prints; no timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any


def simulate_point(scen: Any, point: Any, trace: Any, cal: Any) -> Any:
    """ddpsim's simulation of one point of scenario ``scen`` from ``trace`` and calibration ``cal``."""
    from ddpsim.engine import simulate

    inp = scen.build_point(point, trace=trace, calibration=cal)
    return simulate(inp.trace, inp.plan, inp.comm, inp.config)


def point_runs(folder: Path, point: str = "*") -> list[dict]:
    """The raw runs (``<point>.run<k>.json`` under ``validation/``) of one point of a report, or
    of every point with ``"*"``."""
    return [json.loads(p.read_text()) for p in sorted((folder / "validation").glob(f"{point}.run*.json"))]


def forward_drift(folder: Path, data: dict) -> tuple[float, float] | None:
    """(trace forward median, real runs' forward median) in seconds; forward has no gradient
    communication, so it compares compute only."""
    tpath = Path(data.get("trace", ""))
    if not tpath.is_file():
        return None
    trace = json.loads(tpath.read_text())
    t_fwd = statistics.median(it["forward_s"] for it in trace["iterations"])
    runs = point_runs(folder)
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
    report's own trace and calibration and cut where the executor's clock cuts a step
    (:func:`executor_phases`); measured = median over the runs of each run's median, and the
    range of the runs' forward medians (no gradient communication)."""
    from ddpsim.calibration import load_calibration
    from ddpsim.scenario import load_scenario
    from ddpsim.trace import load_trace

    runs = point_runs(folder, point)
    if not runs or not Path(d.get("trace", "")).is_file() or not Path(d.get("calibration", "")).is_file():
        return None
    scen = load_scenario(d["scenario"])
    (pt,) = [p for p in scen.points() if p.point_id == point]
    pred = executor_phases(simulate_point(scen, pt, load_trace(d["trace"]), load_calibration(d["calibration"])))
    fwd = [r["summary"]["forward_s"] for r in runs]
    meas = {"forward": statistics.median(fwd), "backward+comm": statistics.median(r["summary"]["backward_s"] for r in runs),
            "optimizer": statistics.median(r["summary"]["optimizer_s"] for r in runs), "forward_range": (min(fwd), max(fwd))}
    return pred, meas


def slowdown_grid(root: Path, grid: list[float]) -> None:
    """Signed median error (%) per scenario for each compute_slowdown in ``grid``."""
    from ddpsim.calibration import load_calibration
    from ddpsim.scenario import load_scenario
    from ddpsim.trace import load_trace

    print(f"\nsigned median error (%) with compute_slowdown set to each value (the report's calibration otherwise)")
    print(f"{'scenario':22s} {'fitted':>7s} " + " ".join(f"{g:>7g}" for g in grid))
    for vj in sorted(root.glob("*/validation.json")):
        d = json.loads(vj.read_text())
        if not d.get("summary") or not Path(d.get("trace", "")).is_file() or not Path(d.get("calibration", "")).is_file():
            continue
        cal = load_calibration(d["calibration"])
        if cal.interference is None:
            continue
        scen, trace = load_scenario(d["scenario"]), load_trace(d["trace"])
        points = {p.point_id: p for p in scen.points()}
        cells = []
        for g in grid:
            c = replace(cal, interference=replace(cal.interference, compute_slowdown=g))
            errs = []
            for r in d["rows"]:
                if r.get("measured_s") is None or r["point"] not in points:
                    continue
                pred = simulate_point(scen, points[r["point"]], trace, c).summary()["iteration_mean_s"]
                errs.append(100 * (pred - r["measured_s"]) / r["measured_s"])
            cells.append(statistics.median(errs) if errs else float("nan"))
        print(f"{d['scenario']:22s} {cal.interference.compute_slowdown:7.2f} " + " ".join(f"{e:+7.1f}" for e in cells))


def phase_spread(folder: Path) -> dict[str, float] | None:
    """Within-run spread of each phase, p90/p10 - 1 (%) of the measured iterations' rank-mean
    values, per point (all its runs pooled), median over the points."""
    from ddpsim.trace import quantile

    per_point: dict[str, dict[str, list[float]]] = {}
    for path in sorted((folder / "validation").glob("*.run*.json")):
        m = json.loads(path.read_text())
        acc = per_point.setdefault(path.name.split(".run")[0], {"forward_s": [], "backward_s": [], "iteration_s": []})
        ranks = [{it["iteration"]: it for it in r["iterations"] if it["iteration"] > m["warmup"]} for r in m["ranks"]]
        for i in sorted(set.intersection(*(set(r) for r in ranks))):
            for k in acc:
                acc[k].append(statistics.fmean(r[i][k] for r in ranks))
    if not per_point:
        return None
    out = {}
    for k in ("forward_s", "backward_s", "iteration_s"):
        vals = [100 * (quantile(v[k], 0.9) / quantile(v[k], 0.1) - 1) for v in per_point.values() if len(v[k]) >= 2]
        out[k] = statistics.median(vals) if vals else float("nan")
    return out


def last_launch_skew_s(per_rank: list[list[dict]], bucket: int) -> float:
    """How far apart the ranks launch ``bucket``: max - min over ranks of each rank's median
    launch (records with ``bucket`` and ``launch_s``, per rank)."""
    meds = [statistics.median(b["launch_s"] for b in recs if b["bucket"] == bucket) for recs in per_rank]
    return max(meds) - min(meds)


def bucket_timing(root: Path) -> None:
    """Per point with a hooked run: measured vs predicted first start, backward span, all-reduce
    time, last bucket, ranks' skew at the last launch, and the compute_slowdown that matches the
    measured span (module docstring)."""
    from ddpsim.calibration import load_calibration
    from ddpsim.interference_fit import bisect_increasing
    from ddpsim.scenario import load_scenario
    from ddpsim.trace import load_trace
    from ddpsim.validate import bucket_figures, predicted_bucket_times

    reports = [(vj, json.loads(vj.read_text())) for vj in sorted(root.glob("*/validation.json"))]
    print("\nper-bucket timing, measured / predicted (ms; measured: hooked run, medians over its iterations; first start,"
          " span and all-reduce from the last rank's launches; skew: how far apart the ranks launch the last bucket)")
    print(f"{'scenario':22s} {'point':12s} {'buckets':>7s} {'first start':>15s} {'backward span':>17s} {'all-reduce sum':>17s} "
          f"{'last bucket':>15s} {'skew':>15s} {'fitted':>7s} {'span wants':>10s}")
    for vj, d in reports:
        timed = {k: v for k, v in (d.get("buckets") or {}).items() if v.get("measured")}
        if not timed or not Path(d.get("trace", "")).is_file() or not Path(d.get("calibration", "")).is_file():
            continue
        cal = load_calibration(d["calibration"])
        scen, trace = load_scenario(d["scenario"]), load_trace(d["trace"])
        points = {p.point_id: p for p in scen.points()}
        for name, b in timed.items():
            if name not in points:
                continue
            meas, pred = b["measured"], b["predicted"]

            def predicted(g: float | None = None) -> Any:
                c = cal if cal.interference is None or g is None else replace(
                    cal, interference=replace(cal.interference, compute_slowdown=g))
                return simulate_point(scen, points[name], trace, c)

            fm, fp = bucket_figures(meas), bucket_figures(pred)
            want = "n/a"
            if cal.interference is not None and len(meas) > 1:
                g, clamped = bisect_increasing(lambda g: bucket_figures(predicted_bucket_times(predicted(g)))["span_s"],
                                               fm["span_s"], 1.0, 16.0, steps=20)
                want = ("<= 1" if g == 1.0 else ">= 16") if clamped else f"{g:.2f}"
            hooked = json.loads((vj.parent / "validation" / f"{name}.hooked.json").read_text())
            last = meas[-1]["bucket"]
            skew_m = last_launch_skew_s([[x for x in r["buckets"] if x["iteration"] > hooked["warmup"]]
                                         for r in hooked["ranks"]], last)
            res = predicted()
            it = min(res.steady_iterations(), key=lambda s: (s.iteration, s.rank))
            skew_p = last_launch_skew_s([[{"bucket": x.bucket, "launch_s": x.launch_s} for x in res.buckets
                                          if x.rank == r and x.iteration == it.iteration] for r in sorted({x.rank for x in res.buckets})],
                                        last)
            fitted = cal.interference.compute_slowdown if cal.interference is not None else 1.0
            print(f"{d['scenario']:22s} {name:12s} {len(meas):7d} {fm['first_start_s'] * 1e3:7.1f}/{fp['first_start_s'] * 1e3:7.1f} "
                  f"{fm['span_s'] * 1e3:8.1f}/{fp['span_s'] * 1e3:8.1f} "
                  f"{fm['allreduce_sum_s'] * 1e3:8.1f}/{fp['allreduce_sum_s'] * 1e3:8.1f} "
                  f"{fm['last_s'] * 1e3:7.1f}/{fp['last_s'] * 1e3:7.1f} {skew_m * 1e3:7.1f}/{skew_p * 1e3:7.1f} {fitted:7.2f} {want:>10s}")
    print("\nwithin-run spread of the measured iterations (p90/p10 - 1, median over the points)")
    print(f"{'scenario':22s} {'forward':>8s} {'backward+comm':>14s} {'step':>8s}")
    for vj, d in reports:
        sp = phase_spread(vj.parent)
        if sp:
            print(f"{d['scenario']:22s} {sp['forward_s']:7.1f}% {sp['backward_s']:13.1f}% {sp['iteration_s']:7.1f}%")


#: the issue's median target on the 2-core host (the band criterion: every point in band or within
#: 10 %; the best-cap one: ddpsim.validate.BEST_CAP_TOLERANCE_PCT)
TARGET_MEDIAN_PCT = 5.0


def _reports(roots: list[str]) -> Any:
    """``(root, validation.json as a dict)`` of every report under each of ``roots``, in order."""
    for root in roots:
        for vj in sorted(Path(root).glob("*/validation.json")):
            yield root, json.loads(vj.read_text())


def criteria_met(s: dict) -> tuple[bool, bool, bool]:
    """Which of the issue's three criteria a summary (``ddpsim.validate.summary_figures``) meets:
    median |error|, every point in band or within 10 %, the predicted best within
    ``BEST_CAP_TOLERANCE_PCT`` of the measured best."""
    from ddpsim.validate import BEST_CAP_TOLERANCE_PCT

    return (s["median_abs_error_pct"] <= TARGET_MEDIAN_PCT, s["num_in_band_or_within_10pct"] == s["num_points"],
            s["predicted_best_gap_pct"] <= BEST_CAP_TOLERANCE_PCT)


def criteria(d: dict) -> dict:
    """The three criteria of one report, and the run spread the best-cap gap is measured against."""
    from ddpsim.validate import summary_figures

    # the summary again from the report's rows, so that reports written before the best-pair
    # spread was summarised have it too
    s = summary_figures(d["rows"])
    gap, pair = s["predicted_best_gap_pct"], s["best_pair_run_spread_pct"]
    noise = 0.0 if gap == 0 else (float("nan") if pair is None else pair)
    met = criteria_met(s)
    ci = s.get("best_pair_gap_ci95_pct")
    return {"median": s["median_abs_error_pct"], "band": f"{s['num_in_band_or_within_10pct']}/{s['num_points']}",
            "gap": gap, "noise": noise, "met": met, "verdict": s.get("best_cap_verdict") or "n/a",
            "ci": "" if ci is None else f"{ci[0]:+.1f}..{ci[1]:+.1f}% ({s['best_pair_rounds']})",
            "need": "" if s.get("best_pair_rounds_to_decide") is None else str(s["best_pair_rounds_to_decide"])}


def criteria_table(roots: list[str]) -> int:
    print(f"{'run':34s} {'scenario':22s} {'med|err|':>8s} {'band/10%':>8s} {'best gap':>8s} {'gap spread':>10s} "
          f"{'gap > spread':>12s} {'gap 95% CI (rounds)':>21s} {'by rounds':>10s} {'to decide':>9s}  criteria met")
    total = full = 0
    verdicts: dict[str, int] = {}
    for root, d in _reports(roots):
        if not d.get("summary"):
            continue
        c = criteria(d)
        total += 1
        full += all(c["met"])
        names = [n for n, ok in zip(("median", "band", "best"), c["met"]) if ok]
        beyond = "n/a" if c["gap"] == 0 else ("yes" if c["gap"] > c["noise"] else "no")
        print(f"{root:34s} {d['scenario']:22s} {c['median']:7.1f}% {c['band']:>8s} {c['gap']:7.1f}% "
              f"{c['noise']:9.1f}% {beyond:>12s} {c['ci']:>21s} {c['verdict']:>10s} {c['need']:>9s}  {len(names)}/3 {' '.join(names)}")
        verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
    print(f"\nreports meeting all three criteria: {full} of {total}")
    print("best-cap criterion decided by the runs paired by round (95 % interval of the gap against 2 %): "
          + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))
    return 0


def bias_table(roots: list[str]) -> int:
    """Per scenario and point, the signed error of every listed run: what repeats with the same
    sign in every run is the model's, what changes sign is the host's."""
    errs: dict[tuple[str, str], list[float]] = {}
    for _, d in _reports(roots):
        for r in d.get("rows", []):
            if r.get("error_pct") is not None:
                errs.setdefault((d["scenario"], r["point"]), []).append(r["error_pct"])
    print(f"{'scenario':22s} {'point':12s} {'runs':>4s} {'mean':>7s} {'min':>7s} {'max':>7s} {'under':>6s}  signed error of each run (%)")
    for (sc, pt), xs in errs.items():
        print(f"{sc:22s} {pt:12s} {len(xs):4d} {statistics.fmean(xs):+6.1f}% {min(xs):+6.1f}% {max(xs):+6.1f}% "
              f"{sum(x < 0 for x in xs):3d}/{len(xs):<2d}  {' '.join(f'{x:+.1f}' for x in xs)}")
    return 0


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def host_table(roots: list[str]) -> int:
    """Per report with host counters (the executor records them since session 17): each run's
    mean step against its point's pooled mean, beside the host's other work and steal in that
    run and the ranks' CPU seconds per step (against the point's mean), and per report the
    correlations over the runs: does a slow run coincide with a busy or robbed host, or did the
    ranks' work itself take more CPU time? Reports whose runs span too few of the host's clock
    ticks (the mlp's: ``ddpsim.validate.MIN_HOST_CPU_S``) have no host figures and are left out."""
    print(f"{'run':34s} {'scenario':22s} {'runs':>4s} {'ranks cpu':>9s} {'other':>6s} {'other max':>9s} "
          f"{'steal':>6s} {'steal max':>9s} {'r(dev,other)':>12s} {'r(dev,steal)':>12s} {'r(dev,cpu)':>10s} "
          f"{'slope':>6s}  run deviation % / other % / steal % / CPU-s deviation %")
    found = 0
    for root, d in _reports(roots):
        s = d.get("summary") or {}
        rows = [r for r in d.get("rows", []) if r.get("run_host_other_pct") and r.get("measured_s")]
        if s.get("host_other_pct") is None or not rows:
            continue
        found += 1
        folder = Path(root) / d["scenario"]
        dev, oth, stl, cpu, cells = [], [], [], [], []
        for r in rows:
            means = [float(x) for x in r["run_means_s"].split()]
            o = [float(x) for x in r["run_host_other_pct"].split()]
            st = [float(x) for x in r["run_host_steal_pct"].split()]
            # the ranks' CPU seconds per step in each run (round k = run k), against the point's mean
            per_step = []
            for k in range(1, len(means) + 1):
                run = json.loads((folder / "validation" / f"{r['point']}.run{k}.json").read_text())
                its = [g["iterations"] for g in run["ranks"]]
                per_step.append(sum(x["cpu_s"] for it in its for x in it) / min(len(it) for it in its))
            mean_cpu = statistics.fmean(per_step)
            for m, a, b, c in zip(means, o, st, per_step):
                dev.append(100.0 * (m - r["measured_s"]) / r["measured_s"])
                oth.append(a)
                stl.append(b)
                cpu.append(100.0 * (c - mean_cpu) / mean_cpu)
                cells.append(f"{dev[-1]:+.1f}/{a:.1f}/{b:.1f}/{cpu[-1]:+.1f}")
        ro, rs, rc = _pearson(dev, oth), _pearson(dev, stl), _pearson(dev, cpu)
        # least-squares slope of the CPU-seconds deviation on the step-time deviation: 1 when a
        # slow run burned that much more CPU (the work itself ran slower), 0 when it waited
        sxx = sum(x * x for x in dev)
        slope = sum(x * y for x, y in zip(dev, cpu)) / sxx if sxx else float("nan")
        print(f"{root:34s} {d['scenario']:22s} {len(dev):4d} {s['ranks_cpu_pct']:8.1f}% {s['host_other_pct']:5.1f}% "
              f"{s['host_other_pct_max_run']:8.1f}% {s['host_steal_pct']:5.1f}% {s['host_steal_pct_max_run']:8.1f}% "
              f"{'n/a' if ro is None else format(ro, '+.2f'):>12s} {'n/a' if rs is None else format(rs, '+.2f'):>12s} "
              f"{'n/a' if rc is None else format(rc, '+.2f'):>10s} {slope:6.2f}  " + " ".join(cells))
    if not found:
        print("no report under these folders has host counters (validations run before the executor recorded them)")
    return 0


def _sd_pct(logs: list[float]) -> float:
    """The sample standard deviation of natural-log ratios, in % (nan for fewer than two)."""
    return 100.0 * statistics.stdev(logs) if len(logs) >= 2 else float("nan")


def pairing_figures(folder: Path, d: dict) -> dict[str, Any] | None:
    """:func:`pairing_table`'s figures of one report (``folder``: its scenario folder), or None
    when its rounds' traces are not kept."""
    raw = folder / "validation"
    rows = [r for r in d.get("rows", []) if r.get("measured_s")]
    track, slice_, run_dev = [], [], []
    means: dict[str, list[float]] = {}
    traces: dict[int, dict] = {}  # round -> its trace, read once
    for r in rows:
        means[r["point"]] = []
        k = 1
        while (raw / f"{r['point']}.run{k}.json").exists():
            run = json.loads((raw / f"{r['point']}.run{k}.json").read_text())
            if k not in traces:
                tpath = raw / f"trace.round{k}.json"
                if not tpath.exists():
                    return None
                traces[k] = json.loads(tpath.read_text())
            trace = traces[k]
            fwd = run["summary"]["forward_s"]
            track.append(math.log(fwd / statistics.median(it["forward_s"] for it in trace["iterations"])))
            launch = run.get("launch") or {}
            order = (trace.get("environment") or {}).get("interleaved_with") or []
            if launch.get("kind") == "round" and r["point"] in order:
                per = len(trace["iterations"]) // len(order)
                j = order.index(r["point"])
                own = trace["iterations"][j * per:(j + 1) * per]
                slice_.append(math.log(fwd / statistics.median(it["forward_s"] for it in own)))
            means[r["point"]].append(statistics.fmean(run["summary"]["step_times_s"]))
            k += 1
        run_dev += [math.log(m / r["measured_s"]) for m in means[r["point"]]]
    pts = [p for p in means if means[p]]
    pair_sd = []
    for i, a in enumerate(pts):
        for b in pts[i + 1:]:
            n = min(len(means[a]), len(means[b]))
            if n >= 2:
                pair_sd.append(_sd_pct([math.log(x / y) for x, y in zip(means[a][:n], means[b][:n])]))
    if not track:
        return None
    return {"launch": d.get("launch") or ("round" if slice_ else "point"), "runs": len(track),
            "rounds": max(len(v) for v in means.values()),
            "track": _sd_pct(track), "bias": 100.0 * statistics.fmean(track),
            "slice": _sd_pct(slice_) if slice_ else float("nan"),
            "run": _sd_pct(run_dev), "pair": math.sqrt(statistics.fmean(x * x for x in pair_sd)) if pair_sd else float("nan")}


def pairing_table(roots: list[str]) -> int:
    """Per report: the scatter of the runs against their round's trace and against one another
    (the module docstring's ``--pairing``), then per scenario and layout the median of each."""
    print(f"{'run':34s} {'scenario':22s} {'launch':6s} {'runs':>4s} {'rounds':>6s} {'track':>6s} {'bias':>6s} "
          f"{'slice':>6s} {'run':>6s} {'pair':>6s}")
    by: dict[tuple[str, str], list[dict]] = {}
    for root, d in _reports(roots):
        f = pairing_figures(Path(root) / d["scenario"], d)
        if f is None:
            continue
        by.setdefault((d["scenario"], f["launch"]), []).append(f)
        print(f"{root:34s} {d['scenario']:22s} {f['launch']:6s} {f['runs']:4d} {f['rounds']:6d} {f['track']:5.1f}% "
              f"{f['bias']:+5.1f}% {f['slice']:5.1f}% {f['run']:5.1f}% {f['pair']:5.1f}%")
    if not by:
        print("no report under these folders keeps its rounds' traces")
        return 0
    print()
    print("median over the reports (standard deviations in %; bias: mean run forward over its round's trace forward)")
    print(f"{'scenario':22s} {'launch':6s} {'reports':>7s} {'track':>6s} {'bias':>6s} {'slice':>6s} {'run':>6s} {'pair':>6s}")
    for (scen, launch), fs in sorted(by.items()):
        med = {k: statistics.median(f[k] for f in fs) for k in ("track", "bias", "slice", "run", "pair")}
        print(f"{scen:22s} {launch:6s} {len(fs):7d} {med['track']:5.1f}% {med['bias']:+5.1f}% {med['slice']:5.1f}% "
              f"{med['run']:5.1f}% {med['pair']:5.1f}%")
    return 0


def executor_phases(res: Any) -> dict[str, float]:
    """A simulation's phases cut where the executor's clock cuts a DDP step (zero_grad + forward
    | backward | optimizer; :func:`executor.workload.timed_steps`): ``forward`` from the
    iteration's start (the buffer broadcast's wait, forward, DDP overhead) to its first backward
    span, plus its ``zero_grad`` (the engine runs it at the iteration's end, the executor at the
    start); ``backward+comm`` from there to the optimizer (hooks, copies, the end-of-backward
    waits, copy-out: what ``loss.backward()`` spans under DDP); ``optimizer`` the rest. Per
    steady iteration the mean over ranks, then the median over the iterations, as
    :func:`executor.ddp_step.summarize` reduces the measured ones."""
    per_it: dict[int, list[tuple[float, float, float]]] = {}
    first: dict[tuple[int, int], dict[str, float]] = {}
    for sp in res.spans:
        if sp.stream != "compute":
            continue
        f = first.setdefault((sp.rank, sp.iteration), {"backward": math.inf, "optimizer": math.inf, "zero_grad": 0.0})
        if sp.kind in ("backward", "optimizer"):
            f[sp.kind] = min(f[sp.kind], sp.start_s)
        elif sp.kind == "zero_grad":
            f["zero_grad"] += sp.end_s - sp.start_s
    for it in res.iterations:
        if it.warmup or not it.synced:
            continue
        f = first[(it.rank, it.iteration)]
        fwd = f["backward"] - it.start_s + f["zero_grad"]
        bwd = f["optimizer"] - f["backward"]
        per_it.setdefault(it.iteration, []).append((fwd, bwd, it.end_s - f["optimizer"] - f["zero_grad"]))
    rows = [tuple(statistics.fmean(x[k] for x in v) for k in range(3)) for _, v in sorted(per_it.items())]
    return {name: statistics.median(r[k] for r in rows) for k, name in enumerate(("forward", "backward+comm", "optimizer"))}


def phase_bias_table(roots: list[str]) -> int:
    """Per scenario and point, where the step's signed error sits: predicted minus measured
    forward, backward+comm and optimizer, as % of the measured step, mean over every ROOT's
    report (and how many of them under-predict the phase), beside the step's own signed error
    (the report's, of the means). Predicted: each report's pooled trace and calibration, simulated
    again, its phases cut as the executor times them (:func:`executor_phases`); measured: the
    mean over the point's runs of each run's median phase (rank means per iteration). Medians of
    phases do not add up to the mean step exactly; their sum is printed beside it."""
    acc: dict[tuple[str, str], dict[str, list[float]]] = {}
    for root, d in _reports(roots):
        folder = Path(root) / d["scenario"]
        inputs = report_inputs(folder, d)
        if inputs is None:
            continue
        scen, cal, trace = inputs
        points = {p.point_id: p for p in scen.points()}
        for r in d.get("rows", []):
            runs = point_runs(folder, r["point"])
            if not runs or r["point"] not in points or r.get("measured_s") is None or r.get("error_pct") is None:
                continue
            pred = executor_phases(simulate_point(scen, points[r["point"]], trace, cal))
            meas = {"forward": statistics.fmean(x["summary"]["forward_s"] for x in runs),
                    "backward+comm": statistics.fmean(x["summary"]["backward_s"] for x in runs),
                    "optimizer": statistics.fmean(x["summary"]["optimizer_s"] for x in runs)}
            cell = acc.setdefault((d["scenario"], r["point"]), {k: [] for k in (*pred, "sum", "step")})
            for k in pred:
                cell[k].append(100.0 * (pred[k] - meas[k]) / r["measured_s"])
            cell["sum"].append(sum(cell[k][-1] for k in pred))
            cell["step"].append(r["error_pct"])
    print("predicted minus measured, per phase, as % of the measured step (mean over the runs; under: runs predicting the phase short)")
    print(f"{'scenario':22s} {'point':12s} {'runs':>4s} {'forward':>16s} {'backward+comm':>16s} {'optimizer':>16s} {'sum':>7s} {'step':>7s}")
    for (sc, pt), c in acc.items():
        n = len(c["step"])
        cols = " ".join(f"{statistics.fmean(c[k]):+7.1f}% {sum(x < 0 for x in c[k]):3d}/{n:<3d}"
                        for k in ("forward", "backward+comm", "optimizer"))
        print(f"{sc:22s} {pt:12s} {n:4d} {cols} {statistics.fmean(c['sum']):+6.1f}% {statistics.fmean(c['step']):+6.1f}%")
    return 0


#: the interference models ``--alternatives`` compares with the calibration's own (see alternative_rows)
ALTERNATIVES = ("fitted", "conserve", "round-matched")


def report_inputs(folder: Path, d: dict) -> tuple[Any, Any, Any] | None:
    """``(scenario, calibration, pooled trace)`` of a report, each loaded once (loading the
    calibration runs its probe fit); the trace found as ``validate --reanalyze`` finds it. None
    when the trace or the calibration is gone."""
    from ddpsim.calibration import load_calibration
    from ddpsim.scenario import load_scenario
    from ddpsim.trace import load_trace
    from ddpsim.validate import report_trace_path

    tpath = report_trace_path(d, folder / "validation")
    if not tpath.is_file() or not Path(d.get("calibration", "")).is_file():
        return None
    return load_scenario(d["scenario"]), load_calibration(d["calibration"]), load_trace(tpath)


def alternative_rows(folder: Path, d: dict, inputs: tuple[Any, Any, Any], name: str) -> list[dict] | None:
    """The report's rows with ``predicted_s``, ``error_pct`` and ``in_band`` re-made under one
    alternative model, every other field kept (so ``ddpsim.validate.summary_figures`` reads them
    as it reads the report's); ``inputs`` are :func:`report_inputs`'. None where the report
    lacks what the alternative needs.

    * ``fitted``: the report's calibration as it is (its prediction, simulated again);
    * ``conserve``: compute_slowdown set to ``m / (m - 1)``, m the calibration's comm_slowdown
      (the interference microbenchmark's): compute and an overlapped all-reduce share one CPU
      whose rates add up to one, so overlap costs no more than running the two one after the
      other -- where the probe fit lets it cost more;
    * ``round-matched``: run k of every point predicted from round k's own trace
      (``validation/trace.round<k>.json``, captured just before that round's runs) instead of the
      pooled one, and the point's prediction scaled by the mean of those over the mean of the
      runs' means: whether the trace captured beside a run follows that run's drift.
    """
    from ddpsim.trace import load_trace
    from ddpsim.validate import run_means

    scen, cal, pooled = inputs
    if name == "conserve":
        if cal.interference is None or cal.interference.comm_slowdown <= 1.0:
            return None
        m = cal.interference.comm_slowdown
        cal = replace(cal, interference=replace(cal.interference, compute_slowdown=m / (m - 1.0)))
    points = {p.point_id: p for p in scen.points()}

    def predict(point: str, trace: Any) -> float:
        return simulate_point(scen, points[point], trace, cal).summary()["iteration_mean_s"]

    rounds: dict[int, Any] = {}
    rows = []
    for r in d["rows"]:
        if r.get("measured_s") is None or r["point"] not in points:
            continue
        if name == "round-matched":
            runs = run_means(r)
            if not runs:
                return None
            preds = []
            for k in range(1, len(runs) + 1):
                if k not in rounds:
                    f = folder / "validation" / f"trace.round{k}.json"
                    rounds[k] = load_trace(f) if f.is_file() else pooled
                preds.append(predict(r["point"], rounds[k]))
            pred = r["measured_s"] * statistics.fmean(preds) / statistics.fmean(runs)
        else:
            pred = predict(r["point"], pooled)
        err = 100.0 * (pred - r["measured_s"]) / r["measured_s"]
        rows.append({**r, "predicted_s": pred, "error_pct": err,
                     "in_band": bool(r["measured_p10_s"] <= pred <= r["measured_p90_s"])})
    return rows


def alternatives_table(roots: list[str]) -> int:
    """Every report of every root under each model of ALTERNATIVES: the three criteria per report,
    then per model the median of the reports' median |error|, how many meet each criterion and
    all three, and the mean signed error per scenario and point (how the error moves with the
    cap: what decides the best-cap pick). A report some model cannot be compared under (no
    trace, calibration or per-run means) is left out of every model's figures."""
    from ddpsim.validate import summary_figures

    print(f"{'run':34s} {'scenario':22s} " + " ".join(f"{n + ': med|err| band best gap':>33s}" for n in ALTERNATIVES))
    tally = {n: {"med": [], "median": 0, "band": 0, "best": 0, "all": 0, "n": 0} for n in ALTERNATIVES}
    signed: dict[tuple[str, str, str], list[float]] = {}
    for root, d in _reports(roots):
        if not d.get("summary"):
            continue
        folder = Path(root) / d["scenario"]
        inputs = report_inputs(folder, d)
        if inputs is None:
            continue
        made = {n: alternative_rows(folder, d, inputs, n) for n in ALTERNATIVES}
        sums = {n: summary_figures(rows) for n, rows in made.items() if rows}
        if not all(sums.get(n) for n in ALTERNATIVES):
            continue
        cells = []
        for n, s in sums.items():
            for r in made[n]:
                signed.setdefault((n, d["scenario"], r["point"]), []).append(r["error_pct"])
            cells.append(f"{s['median_abs_error_pct']:8.1f}% {s['num_in_band_or_within_10pct']:>3d}/{s['num_points']:<3d}"
                         f" {s['predicted_best_gap_pct']:9.1f}%")
            met = criteria_met(s)
            t = tally[n]
            t["med"].append(s["median_abs_error_pct"])
            t["n"] += 1
            t["all"] += all(met)
            for key, ok in zip(("median", "band", "best"), met):
                t[key] += ok
        print(f"{root:34s} {d['scenario']:22s} " + " ".join(f"{c:>33s}" for c in cells))
    print(f"\n{'model':14s} {'reports':>7s} {'median of med|err|':>18s} {'median <= 5%':>12s} {'band/10%':>9s} "
          f"{'best <= 2%':>10s} {'all three':>9s}")
    for n, t in tally.items():
        if t["n"]:
            print(f"{n:14s} {t['n']:7d} {statistics.median(t['med']):17.1f}% {t['median']:12d} {t['band']:9d} "
                  f"{t['best']:10d} {t['all']:9d}")
    print(f"\nmean signed error per scenario and point (%), over the reports\n{'scenario':22s} {'point':12s} "
          + " ".join(f"{n:>14s}" for n in ALTERNATIVES))
    for sc, pt in dict.fromkeys((k[1], k[2]) for k in signed):
        print(f"{sc:22s} {pt:12s} " + " ".join(f"{statistics.fmean(signed[(n, sc, pt)]):+13.1f}%"
                                            if (n, sc, pt) in signed else f"{'':>14s}" for n in ALTERNATIVES))
    return 0

def main(root: str = "reports", grid: list[float] | None = None, buckets: bool = False) -> int:
    rows = []
    for vj in sorted(Path(root).glob("*/validation.json")):
        d = json.loads(vj.read_text())
        s = d.get("summary") or {}
        if not s:
            continue
        drift = forward_drift(vj.parent, d)
        rows.append((d["scenario"], s, drift, d))
    print(f"{'scenario':22s} {'points':>6s} {'med|err|':>8s} {'of p50s':>8s} {'max|err|':>8s} {'band/10%':>8s} "
          f"{'best gap':>8s} {'plan':>5s} {'trace fwd':>9s} {'run fwd':>8s} {'drift':>7s} {'run spread':>10s}")
    for name, s, drift, d in rows:
        tf, rf = drift if drift else (float("nan"), float("nan"))
        p50 = s.get("median_abs_error_p50_pct")
        print(f"{name:22s} {s['num_points']:6d} {s['median_abs_error_pct']:7.1f}% "
              f"{'n/a' if p50 is None else format(p50, '7.1f') + '%':>8s} {s['max_abs_error_pct']:7.1f}% "
              f"{s['num_in_band_or_within_10pct']:>4d}/{s['num_points']:<3d} {s['predicted_best_gap_pct']:7.1f}% "
              f"{str(s['plan_matches_all']).lower():>5s} {tf * 1e3:8.1f}ms {rf * 1e3:7.1f}ms {100 * (tf - rf) / rf:+6.1f}% {run_spread(d):9.1f}%")
    print("\nphases at cap=default, predicted / measured (ms; measured forward: median and range of the runs' medians;"
          " both cut as the executor's clock cuts a step: zero_grad + pre-forward + forward | loss.backward() | optimizer)")
    for name, s, drift, d in rows:
        ph = phases(Path(root) / name, d)
        if ph is None:
            continue
        pred, meas = ph
        lo, hi = meas["forward_range"]
        print(f"{name:22s} forward {pred['forward'] * 1e3:9.2f} / {meas['forward'] * 1e3:9.2f} ({lo * 1e3:.2f}-{hi * 1e3:.2f})"
              f"  backward+comm {pred['backward+comm'] * 1e3:9.2f} / {meas['backward+comm'] * 1e3:9.2f}"
              f"  optimizer {pred['optimizer'] * 1e3:7.2f} / {meas['optimizer'] * 1e3:7.2f}")
    if grid:
        slowdown_grid(Path(root), grid)
    if buckets:
        bucket_timing(Path(root))
    return 0


def _grid(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or not all(x >= 1 for x in out):
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; expected a comma list of numbers >= 1, e.g. 2,3,4,6,8")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="*", default=["reports"],
                    help="folder holding <scenario>/validation.json (default: reports); several only with --criteria, --bias, --phase-bias, --alternatives, --host or --pairing")
    ap.add_argument("--slowdown-grid", type=_grid, default=None, metavar="LIST",
                    help="also print the signed median error per scenario at each compute_slowdown in LIST")
    ap.add_argument("--buckets", action="store_true",
                    help="also print the per-bucket timing of the hooked runs against the prediction, and the within-run phase spread")
    ap.add_argument("--criteria", action="store_true",
                    help="print the issue's three criteria per report of every ROOT, and how many meet all three")
    ap.add_argument("--bias", action="store_true",
                    help="print, per scenario and point, the signed error of every ROOT's report (sign kept: a model bias repeats its sign)")
    ap.add_argument("--phase-bias", action="store_true",
                    help="print, per scenario and point, predicted minus measured forward, backward+comm and optimizer "
                         "(%% of the measured step) over every ROOT's report: where the step's signed error sits")
    ap.add_argument("--alternatives", action="store_true",
                    help="re-simulate every report of every ROOT under the calibration's model and two alternatives "
                         "(conserve, round-matched) and print the criteria each would meet")
    ap.add_argument("--host", action="store_true",
                    help="print, per report of every ROOT with host counters, the host's other work and steal per run "
                         "beside the run's deviation from its point's mean, and their correlation")
    ap.add_argument("--pairing", action="store_true",
                    help="print, per report of every ROOT, how closely the runs track their round's trace and one "
                         "another, by launch layout (validate --launch round or point)")
    a = ap.parse_args()
    if a.pairing:
        sys.exit(pairing_table(a.root))
    if a.host:
        sys.exit(host_table(a.root))
    if a.phase_bias:
        sys.exit(phase_bias_table(a.root))
    if a.alternatives:
        sys.exit(alternatives_table(a.root))
    if a.bias:
        sys.exit(bias_table(a.root))
    if a.criteria:
        sys.exit(criteria_table(a.root))
    if len(a.root) > 1:
        ap.error(f"root: {len(a.root)} folders given; expected one (several only with --criteria, --bias, --phase-bias, --alternatives, --host or --pairing)")
    sys.exit(main(a.root[0], a.slowdown_grid, a.buckets))
