"""Reporting a validation: ``validation.csv`` / ``.json`` / ``.md`` / ``.png`` / ``_timeline.png``,
atomically, from :meth:`ddpsim.validation.compare.PointOutcome.row` and
:func:`ddpsim.validation.compare.summary_figures`; per-bucket errors are measured minus predicted."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

from ddpsim.calibration.loader import clamped_fit_warning
from ddpsim.io import write_text_atomic
from ddpsim.report.tables import to_csv_text
from ddpsim.validation.intervals import ALTERNATIVES_TEXT
from ddpsim.validation.compare import (BEST_CAP_TOLERANCE_PCT, bucket_figures, bucket_service_s, measured_bucket_times,
                                       summary_figures)


#: the level of the prediction intervals a validation reports
INTERVAL_LEVEL = 0.8
#: what ``validation.json`` records of the run (:class:`ddpsim.validation.measure._Validation`'s fields)
RUN_FIELDS = ("model", "batch_size", "num_threads", "world_size", "iterations", "warmup", "repeats")


def _interference_record(raw: dict[str, Any], cal: Any) -> dict[str, Any] | None:
    """The slowdowns the prediction used: probe-fitted ones with the microbenchmark's beside them."""
    if cal is None or cal.interference is None:
        return raw.get("interference")
    rec: dict[str, Any] = {"compute_slowdown": cal.interference.compute_slowdown,
                           "comm_slowdown": cal.interference.comm_slowdown}
    if cal.interference_fit is not None:
        mb = cal.interference_microbenchmark
        rec["fitted_to_probe"] = dict(cal.interference_fit)
        rec["microbenchmark"] = {"compute_slowdown": mb.compute_slowdown, "comm_slowdown": mb.comm_slowdown}
        if cal.probe_forward_factor is not None:
            rec["fitted_to_probe"]["probe_forward_factor"] = cal.probe_forward_factor
    return rec


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)


def csv_text(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    """``columns`` of ``rows`` as CSV, None empty, floats to 6 digits (``report.tables.to_csv_text``)."""
    return to_csv_text([{c: _fmt(r[c]) for c in columns} for r in rows], columns, float_format=None)


def write_reports(v: Any, *, reanalyzed: bool = False) -> None:
    """Write ``validation.{csv,json,md}`` (and the plots) of a :class:`ddpsim.validation.measure._Validation`."""
    out = v.out
    rows = [o.row() for o in v.outcomes.values()]
    write_text_atomic(out / "validation.csv", csv_text(list(rows[0]) if rows else [], rows))  # PointOutcome.row's keys
    cal = json.loads(Path(v.cal_path).read_text())
    buckets = {}  # per point, its bucket times predicted and measured (the hooked run), and their errors
    for k, o in v.outcomes.items():
        measured = measured_bucket_times(o.hooked) if o.hooked else []
        buckets[k] = {"predicted": o.predicted_buckets, "measured": measured,
                      "errors": bucket_errors(o.predicted_buckets, measured)}
    data = {"format": "ddpsim-validation", "version": 1, "scenario": v.scenario.name,
            **{k: getattr(v, k) for k in RUN_FIELDS}, "calibration": str(v.cal_path), "trace": str(v.trace_path),
            "interference": _interference_record(cal, v.cal), "copy_bandwidth_bytes_per_s": cal.get("copy_bandwidth_bytes_per_s"),
            # the loaded calibration's (recomputed against the idle-launch charge when it can be:
            # ddpsim.calibration.loader.consistent_ddp_overhead), and the file's own figure beside it
            "ddp_iteration_overhead_s": (cal.get("ddp_iteration_overhead_s") if v.cal is None
                                         else v.cal.ddp_iteration_overhead_s),
            "ddp_iteration_overhead_measured_s": cal.get("ddp_iteration_overhead_s"),
            "reanalyzed": reanalyzed, "summary": summary_figures(rows), "rows": rows, "buckets": buckets}
    extra = (("malloc", (v.trace.environment or {}).get("malloc")), ("launch", v.launch_mode))
    data.update({k: x for k, x in extra if x is not None})
    bands = {o.interval.method_band for o in v.outcomes.values() if o.interval is not None and o.interval.method_band}
    if bands:
        data["method_band"] = list(bands.pop())  # one band for every point: the other models' residuals
    write_text_atomic(out / "validation.json", json.dumps(data, indent=1) + "\n")
    write_text_atomic(out / "validation.md", markdown(data))
    if v.plots and any(r["measured_s"] is not None for r in rows):
        from ddpsim.report.plots import save_figure

        save_figure(validation_figure(data), out / "validation.png")
        save_figure(timeline_figure(data), out / "validation_timeline.png")


def _pct(err: float, ref: float) -> float | None:
    return None if ref <= 0.0 else 100.0 * err / ref


def bucket_errors(predicted: list[dict[str, Any]], measured: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per bucket index in both, measured minus predicted: ``end_error_s`` (the all-reduce's completion)
    and ``allreduce_error_s`` (its own time, :func:`~ddpsim.validation.compare.bucket_service_s`), each
    also in % of the predicted figure (None where that is not positive)."""
    def by_bucket(bs: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:  # bucket -> (end, own time)
        ordered = sorted(bs, key=lambda b: b["bucket"])
        return {b["bucket"]: (b["end_s"], t) for b, t in zip(ordered, bucket_service_s(ordered))}

    pred, meas = by_bucket(predicted), by_bucket(measured)
    out = []
    for k in sorted(pred.keys() & meas.keys()):
        (p_end, p_own), (m_end, m_own) = pred[k], meas[k]
        out.append({"bucket": k, "end_error_s": m_end - p_end, "end_error_pct": _pct(m_end - p_end, p_end),
                    "allreduce_error_s": m_own - p_own, "allreduce_error_pct": _pct(m_own - p_own, p_own)})
    return out


def markdown(data: dict[str, Any]) -> str:
    """``validation.md``: the setup, the accuracy figures, a row per point, the per-bucket comparison."""
    s = data["summary"]
    lines = _setup_lines(data) + (_accuracy_lines(s, data) if s else [])
    return "\n".join(lines + _table_lines(data["rows"]) + _bucket_lines(data.get("buckets") or {}))


def _calibration_text(data: dict[str, Any], inter: dict[str, Any]) -> str:
    """The calibration's slowdowns and DDP overhead the prediction used."""
    text = f"compute_slowdown {inter.get('compute_slowdown', 1.0):.3f}"
    probe = inter.get("fitted_to_probe")
    if probe:
        forward = (f", whose forward ran {probe['probe_forward_factor']:.3f}x its trace's under DDP"
                   if "probe_forward_factor" in probe else "")
        text += (f" (fitted to the calibration's DDP probe{forward}; the microbenchmark's: "
                 f"{inter['microbenchmark']['compute_slowdown']:.3f})")
    text += f", comm_slowdown {inter.get('comm_slowdown', 1.0):.3f}"
    overhead, measured = data.get("ddp_iteration_overhead_s"), data.get("ddp_iteration_overhead_measured_s")
    if overhead is not None:
        text += f", DDP overhead {overhead * 1e3:.3f} ms per iteration"
        if measured not in (None, overhead):
            text += f" (the executor's residue against the loop curve: {measured * 1e3:.3f} ms)"
    return text


def _setup_lines(data: dict[str, Any]) -> list[str]:
    """The title, what ran against what (:func:`_calibration_text`), the calibration's warning, what
    is compared, and ``--reanalyze``."""
    inter = data.get("interference") or {}
    lines = [f"# Validation: {data['scenario']}", "",
             f"Real DDP ({data['world_size']} gloo ranks on this CPU host, {data['num_threads']} thread(s) per rank; "
             f"model `{data['model']}`, batch {data['batch_size']} per rank; {data['warmup']} warm-up + "
             f"{data['iterations']} measured iterations x {data['repeats']} runs per point, round-robin) against "
             f"ddpsim's prediction from the scenario's trace and ONE machine calibration (`{data['calibration']}`: "
             + _calibration_text(data, inter) + ").",
             "", f"Prediction trace: `{data['trace']}`.", ""]
    warn = clamped_fit_warning(inter.get("fitted_to_probe"))
    if warn:
        lines += [f"**WARNING: {warn}.**", ""]
    lines += ["Measured = mean of the pooled steady-state step times (per iteration, the mean over ranks) of all runs, "
              "predicted = mean of the simulated steady steps: the mean is what adds up to a job's wall time, and the "
              "calibration's costs are means; band = the measured p10..p90. The medians (`measured_median_s`, "
              "`predicted_p50_s`, `error_p50_pct` in `validation.csv`) are compared too. No GPU was used: gloo on CPU."
              + ("" if data.get("malloc") is None else
                 f" Allocator of every rank, trace capture and runs alike: {data['malloc']} (the executor's `--malloc`).")
              + {None: "", "point": " Launches: one per point and run, the round's trace in a launch of its own (`--launch point`).",
                 "round": " Launches: one per round (`executor round`): before each point a slice of the trace, then the "
                          "point under a fresh real DDP, in the same process pair (`--launch round`)."}[data.get("launch")],
              ""]
    if data.get("reanalyzed"):
        lines += ["Rebuilt from the raw runs under `validation/` by `ddpsim validate --reanalyze` (nothing run again: "
                        "step times recomputed from the per-rank records, every point simulated again).", ""]
    return lines


def _interval_text(s: dict[str, Any], data: dict[str, Any]) -> str:
    """How many measured means lie in their prediction interval, and how the intervals are made."""
    if not s.get("num_with_interval"):
        return ""
    return (f"; inside the {INTERVAL_LEVEL:.0%} prediction interval: {s['num_in_interval']}/{s['num_with_interval']} "
            f"(the rounds' captures and their iterations resampled through the engine, {ALTERNATIVES_TEXT}"
            + ("" if not data.get("method_band") else
               f"; joined with the method error measured on other models, {100 * data['method_band'][0]:+.1f}.."
               f"{100 * data['method_band'][1]:+.1f} % around the prediction: `ddpsim.pipeline.method_error`")
            + ")")


def _best_cap_text(s: dict[str, Any]) -> str:
    """The best caps, their gap and :func:`ddpsim.validation.compare.best_cap_verdict`."""
    return (f"* measured best: `{s['measured_best']}`; predicted best: `{s['predicted_best']}` "
            + (f"(tied in the prediction with {', '.join('`' + p + '`' for p in s['predicted_best_tied'] if p != s['predicted_best'])}, "
               f"the fastest measured of them named; " if s.get("predicted_best_tied") else "(")
            + f"its measured time is {s['predicted_best_gap_pct']:.1f} % above the measured best"
            + ("" if s.get("best_pair_run_spread_pct") is None else
               f"; {'inside' if s['predicted_best_gap_within_spread'] else 'beyond'} the two points' run spread of "
               f"{s['best_pair_run_spread_pct']:.1f} %"
               + (": the repeated runs cannot tell them apart" if s["predicted_best_gap_within_spread"] else ""))
            + ("" if s.get("best_pair_gap_ci95_pct") is None else
               f"; paired by round over {s['best_pair_rounds']} rounds, the gap's 95 % interval is "
               f"{s['best_pair_gap_ci95_pct'][0]:+.1f} to {s['best_pair_gap_ci95_pct'][1]:+.1f} %: "
               + {"met": f"the best-cap criterion (within {BEST_CAP_TOLERANCE_PCT:g} %) is met",
                  "missed": f"the predicted best is slower than the measured best by more than {BEST_CAP_TOLERANCE_PCT:g} %",
                  "unresolved": f"these runs do not decide the best-cap criterion (within {BEST_CAP_TOLERANCE_PCT:g} %)"
                  + ("" if s.get("best_pair_rounds_to_decide") is None else
                     f"; at the runs' scatter, about {s['best_pair_rounds_to_decide']} rounds would")
                  }[s["best_cap_verdict"]])
            + ")")


def _accuracy_lines(s: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """The accuracy bullets of :func:`ddpsim.validation.compare.summary_figures`' ``s``."""
    lines = [f"* median |error|: **{s['median_abs_error_pct']:.1f} %** (max {s['max_abs_error_pct']:.1f} %) over {s['num_points']} points"
             + ("" if s.get("median_abs_error_p50_pct") is None else
                f"; medians against medians: {s['median_abs_error_p50_pct']:.1f} %"),
             f"* inside the measured band: {s['num_in_band']}/{s['num_points']}; in band or within 10 %: "
             f"{s['num_in_band_or_within_10pct']}/{s['num_points']}" + _interval_text(s, data),
             _best_cap_text(s),
             f"* real DDP's rebuilt buckets equal ddpsim's plan at every point: {str(s['plan_matches_all']).lower()}"]
    if s.get("median_run_spread_pct") is not None:
        lines.append(f"* run-to-run spread (slowest minus fastest run's median at one point, over the measured): "
                     f"median {s['median_run_spread_pct']:.1f} % over the points -- the measurement's own noise floor")
    if s.get("host_other_pct") is not None:
        lines.append(f"* the host's CPUs during the measured steps (`/proc/stat`, read by every rank around each step): "
                     f"the ranks {s['ranks_cpu_pct']:.1f} % of their time, other work {s['host_other_pct']:.1f} % "
                     f"(the busiest run {s['host_other_pct_max_run']:.1f} %), stolen by the hypervisor "
                     f"{s['host_steal_pct']:.1f} % (the most in one run {s['host_steal_pct_max_run']:.1f} %); "
                     "per point in the table, per run in `validation.csv`")
    lines.append("")
    return lines


def _ms(v: Any) -> str:
    return "" if v is None else f"{v * 1e3:.2f} ms"


def _pct_cell(v: Any) -> str:
    return "" if v is None else format(v, ".1f") + " %"


def _yes_no(v: Any) -> str:
    return "" if v is None else ("yes" if v else "no")


def _table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The table of points (the host-load and interval columns only when some row has them) and the
    note on where the per-bucket times are."""
    host = any(r.get("host_other_pct") is not None for r in rows)
    ivs = any(r.get("predicted_low_s") is not None for r in rows)
    lines = ["| point | predicted | measured | p10 | p90 | error | in band | runs | run spread | buckets | plan matches |"
             + (" other load | steal |" if host else "") + (f" {INTERVAL_LEVEL:.0%} interval | inside |" if ivs else ""),
             "|---|---:|---:|---:|---:|---:|:-:|---:|---:|---:|:-:|" + ("---:|---:|" if host else "")
             + ("---:|:-:|" if ivs else "")]
    for r in rows:
        err = "" if r["error_pct"] is None else f"{r['error_pct']:+.1f} %"
        pm = "" if r["plan_matches"] is None else str(r["plan_matches"]).lower()
        interval = "" if r.get("predicted_low_s") is None else f"{_ms(r['predicted_low_s'])} to {_ms(r['predicted_high_s'])}"
        lines.append(f"| {r['point']} | {_ms(r['predicted_s'])} | {_ms(r['measured_s'])} | {_ms(r['measured_p10_s'])} | "
                     f"{_ms(r['measured_p90_s'])} | {err} | {_yes_no(r['in_band'])} | {r['num_runs']} | "
                     f"{_pct_cell(r.get('run_spread_pct'))} | {_fmt(r['num_buckets_real'])} | {pm} |"
                     + ("" if not host else f" {_pct_cell(r.get('host_other_pct'))} | {_pct_cell(r.get('host_steal_pct'))} |")
                     + ("" if not ivs else f" {interval} | {_yes_no(r.get('in_interval'))} |"))
    lines += ["", "Per-bucket launch, start and end times (from the iteration's start; predicted: the first steady "
              "iteration; measured: medians over the hooked run's iterations) are in "
              "`validation.json` (with their errors, measured minus predicted) and `validation.png`; "
              "`validation_timeline.png` draws one steady iteration, predicted above measured, and the per-bucket errors "
              "of the worst-predicted point with measured bucket times (of all points when none has them); the "
              "measured ones come from a separate run with a timing comm "
              "hook (a hook makes DDP skip the fused division, so that run's iteration time is not the one compared: "
              "column `measured_hooked_s` of `validation.csv`).", ""]
    return lines


def _bucket_lines(buckets: dict[str, Any]) -> list[str]:
    """Per point with a hooked run: the measured against the predicted backward span and all-reduce times."""
    timed = [(k, bucket_figures(b["measured"]), bucket_figures(b["predicted"]), len(b["measured"]))
             for k, b in buckets.items() if b.get("measured") and b.get("predicted")]
    if not timed:
        return []
    lines = ["Per bucket, measured (the hooked run: medians over its iterations) / predicted, in ms. Each bucket's "
             "times count from its start, the last rank's launch: `backward span` runs from the first bucket's "
             "start to the last one's (backward compute under the overlap, on the rank that launches last); the "
             "all-reduce times leave out the waits for that rank and for the previous bucket.", "",
             "| point | buckets | backward span | all-reduce time, summed | last bucket's all-reduce |",
             "|---|---:|---:|---:|---:|"]
    for k, m, p, n in timed:
        pairs = " | ".join(f"{m[x] * 1e3:.1f} / {p[x] * 1e3:.1f}" for x in ("span_s", "allreduce_sum_s", "last_s"))
        lines.append(f"| {k} | {n} | {pairs} |")
    lines.append("")
    return lines


def validation_figure(data: dict[str, Any]) -> Any:
    """Per point, the measured iteration time (mean, p10-p90) against predicted; and each bucket's
    all-reduce completion, measured (solid) against predicted (dashed)."""
    import matplotlib
    from matplotlib.ticker import MaxNLocator

    from ddpsim.report.plots import new_figure

    rows = [r for r in data["rows"] if r["measured_s"] is not None]
    fig = new_figure(figsize=(12, 5), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    x = list(range(len(rows)))
    meas = [r["measured_s"] * 1e3 for r in rows]
    # the mean may lie outside p10..p90 when a few steps are far out: the bar then starts at the mean
    lo = [max(0.0, r["measured_s"] - r["measured_p10_s"]) * 1e3 for r in rows]
    hi = [max(0.0, r["measured_p90_s"] - r["measured_s"]) * 1e3 for r in rows]
    ax1.errorbar(x, meas, yerr=[lo, hi], fmt="o", color="#4c72b0", capsize=4, label="measured (mean, p10-p90)")
    ax1.plot(x, [r["predicted_s"] * 1e3 for r in rows], "s--", color="#dd8452", label="predicted (mean)")
    ax1.set_xticks(x, [r["point"] for r in rows], rotation=20)
    ax1.set_ylabel("iteration time (ms)")
    ax1.set_title(f"{data['scenario']}: iteration time per point", fontsize=10)
    ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8)
    ax1.set_ylim(bottom=0)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    timed = any(b["measured"] for b in data["buckets"].values())
    for i, (k, b) in enumerate(data["buckets"].items()):
        c = colors[i % len(colors)]
        for side, style, marker in (("predicted", "--", "s"), ("measured", "-", "o")):
            if b[side]:  # one label per point: the measured line's when it has one
                ax2.plot([d["bucket"] for d in b[side]], [d["end_s"] * 1e3 for d in b[side]], style, color=c,
                         marker=marker, ms=3, label=None if side == "predicted" and b["measured"] else k)
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.set_xlabel("bucket (launch order)")
    ax2.set_ylabel("all-reduce end from iteration start (ms)")
    ax2.set_title("bucket all-reduce end: measured (solid) vs predicted (dashed)" if timed else
                  "bucket all-reduce end, predicted (no per-bucket times measured: --no-bucket-timing)", fontsize=10)
    if data["buckets"]:
        ax2.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, borderaxespad=0)
    return fig


#: the bars of the timelines: the wait from rank 0's launch to the last rank's, the all-reduce
#: (two shades, alternating by bucket), the iteration
_WAIT, _ALLREDUCE, _ITERATION = "#e8e8e8", ("#dd8452", "#f2b48a"), "#c6d4e8"
#: the per-bucket error bars: completion, own all-reduce time
_END_ERR, _SVC_ERR = "#4c72b0", "#c44e52"
#: the most bucket-index ticks an error panel labels (every k-th index beyond)
MAX_BUCKET_TICKS = 36


def point_of_interest(data: dict[str, Any]) -> str | None:
    """The point :func:`timeline_figure` draws: the worst-predicted of those with measured bucket times
    (else of all measured points); None when none was measured."""
    rows = [r for r in data["rows"] if r["error_pct"] is not None]
    timed = [r for r in rows if (data["buckets"].get(r["point"]) or {}).get("measured")]
    return max(timed or rows, key=lambda r: abs(r["error_pct"]))["point"] if rows else None


def timeline_figure(data: dict[str, Any]) -> Any:
    """One steady iteration of :func:`point_of_interest`'s point, predicted above measured (each bucket's
    launch, wait for the last rank and all-reduce), and :func:`bucket_errors` in ms and %; without
    measured bucket times, the predicted one alone, said."""
    from ddpsim.report.plots import new_figure

    point = point_of_interest(data)
    assert point is not None, "timeline_figure needs a measured point"
    row = next(r for r in data["rows"] if r["point"] == point)
    b = data["buckets"][point]
    timed = bool(b["measured"])
    fig = new_figure(figsize=(11, 8.4 if timed else 3.4), layout="constrained")
    if timed:
        axes = fig.subplots(4, 1, gridspec_kw={"height_ratios": [1, 1, 1.4, 1.4]})
        axes[1].sharex(axes[0])
        axes[3].sharex(axes[2])
    else:
        axes = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1, 0.45]})
    end = max([d["end_s"] for d in b["predicted"] + b["measured"]] + [row["predicted_s"], row["measured_hooked_s"] or 0.0])
    labels = [_timeline_panel(axes[0], b["predicted"], row["predicted_s"], "predicted", legend=True)]
    if timed:
        labels.append(_timeline_panel(axes[1], b["measured"], row["measured_hooked_s"], "measured (hooked run, medians)",
                                      legend=False))
        _error_panels(axes[2], axes[3], b["errors"])
    else:
        axes[1].set_axis_off()
        axes[1].text(0.0, 0.5, "No per-bucket times were measured for this validation (it ran with --no-bucket-timing): "
                     "no measured timeline and no per-bucket errors to draw.\nRun `ddpsim validate` without "
                     "--no-bucket-timing to time each bucket with a comm hook.", transform=axes[1].transAxes,
                     va="center", ha="left", fontsize=9)
    axes[0].set_xlim(0.0, 1.02 * end * 1e3)
    counts = f"buckets: predicted {len(b['predicted'])}, measured {len(b['measured'])}"
    fig.suptitle(f"{data['scenario']}, {point}: the worst-predicted point"
                 + (" with per-bucket times" if timed else "")
                 + f" (mean step: predicted {row['predicted_s'] * 1e3:.1f} ms, measured {row['measured_s'] * 1e3:.1f} ms, "
                 f"error {row['error_pct']:+.1f} %)\none steady iteration, buckets matched by index ({counts})",
                 fontsize=10)
    _place_bucket_labels(fig, labels)
    return fig


def _timeline_panel(ax: Any, buckets: list[dict[str, Any]], iteration_s: float | None, name: str, *,
                    legend: bool) -> list[tuple[Any, float, float]]:
    """Two rows: the iteration and the buckets' all-reduces, each after its wait from rank 0's launch (|)
    to the last rank's (``start_s``); returns the index labels for :func:`_place_bucket_labels`."""
    if iteration_s is not None:
        ax.broken_barh([(0.0, iteration_s * 1e3)], (1.8, 0.7), facecolors=_ITERATION, label="steady iteration")
    waits = [(d["launch_s"] * 1e3, max(0.0, d["start_s"] - d["launch_s"]) * 1e3) for d in buckets]
    ax.broken_barh(waits, (0.3, 0.7), facecolors=_WAIT, edgecolor="#999999", linewidth=0.3,
                   label="launched, waiting to start\n(the other ranks' launch; predicted:\nalso the previous all-reduce)")
    for shade in (0, 1):
        bars = [(d["start_s"] * 1e3, max(0.0, d["end_s"] - d["start_s"]) * 1e3) for d in buckets if d["bucket"] % 2 == shade]
        ax.broken_barh(bars, (0.3, 0.7), facecolors=_ALLREDUCE[shade], edgecolor="black", linewidth=0.3,
                       label="all-reduce (shades alternate\nby bucket)" if shade == 0 else None)
    ax.plot([d["launch_s"] * 1e3 for d in buckets], [0.1] * len(buckets), "|", color="black", ms=6, ls="none",
            label="rank 0 launches the bucket")
    labels = [(ax.text((d["start_s"] + d["end_s"]) / 2 * 1e3, 0.65, str(d["bucket"]), ha="center", va="center",
                       fontsize=7, gid="bucket-label", clip_on=True), d["start_s"] * 1e3, d["end_s"] * 1e3)
              for d in buckets]
    ax.set_ylim(-0.1, 2.6)
    it = "" if iteration_s is None else f"\n{iteration_s * 1e3:.1f} ms"
    ax.set_yticks([0.5, 2.15], ["all-reduce", f"iteration{it}"], fontsize=8)
    ax.set_title(name, fontsize=9, loc="left")
    ax.set_xlabel("time from the iteration's start (ms)", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, borderaxespad=0)
    return labels


def _place_bucket_labels(fig: Any, labels: list[list[tuple[Any, float, float]]]) -> None:
    """Each bucket's index inside its bar where it fits, else on the first of two levels above it where it
    overlaps no earlier label of the panel, else hidden (the error panels carry every index)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for panel in labels:
        placed: list[Any] = []
        for t, start, end in sorted(panel, key=lambda p: p[1]):
            px = t.axes.transData.transform([(start, 0.0), (end, 0.0)])
            fits = t.get_window_extent(renderer).width * 1.2 < px[1][0] - px[0][0]
            for y in ((0.65,) if fits else ()) + (1.23, 1.53):
                t.set_y(y)
                box = t.get_window_extent(renderer).expanded(1.2, 1.0)
                if not any(box.overlaps(p) for p in placed):
                    placed.append(box)
                    break
            else:
                t.set_visible(False)


def _error_panels(ax_ms: Any, ax_pct: Any, errors: list[dict[str, Any]]) -> None:
    """Per bucket, measured minus predicted completion and own time, in ms and in % of the predicted."""
    ks = [e["bucket"] for e in errors]
    series = (("end_error", "completion (all-reduce end\nfrom the iteration start)", _END_ERR, -0.2),
              ("allreduce_error", "own all-reduce time\n(no waits)", _SVC_ERR, 0.2))
    for ax, unit, scale, suffix in ((ax_ms, "ms", 1e3, "_s"), (ax_pct, "%", 1.0, "_pct")):
        for key, label, color, dx in series:
            pts = [(k + dx, e[key + suffix] * scale) for k, e in zip(ks, errors) if e[key + suffix] is not None]
            ax.bar([x for x, _ in pts], [v for _, v in pts], width=0.4, color=color, label=label, gid=key + suffix)
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_ylabel(f"measured - predicted\n({unit})", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.set_xticks(range(min(ks), max(ks) + 1, max(1, math.ceil(len(ks) / MAX_BUCKET_TICKS))))
        ax.tick_params(axis="x", labelsize=8)
        ax.set_xlim(min(ks) - 0.6, max(ks) + 0.6)
    ax_ms.set_title("per-bucket error", fontsize=9, loc="left")
    ax_ms.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, borderaxespad=0)
    ax_pct.set_xlabel("bucket (launch order)", fontsize=8)
