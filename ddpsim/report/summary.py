"""The report of a scenario: tables (data) and their rendering as CSV and markdown.

Analysis returns data (:func:`summarize` -> a dict, :func:`buckets_table` -> a DataFrame);
:func:`render_summary` turns the dict into ``summary.md``. Files are written atomically by
the ``write_*`` helpers, each as soon as it is ready. Plotting lives in :mod:`ddpsim.report.plots`.

Definitions used in the summary (all over steady iterations, i.e. after DDP's first
iteration and the bucket rebuild, unless said otherwise):

* step time: per iteration, from the previous iteration's end on its slowest rank to this
  one's end on its slowest rank (adds up to the job's wall time;
  :meth:`ddpsim.engine.result.SimResult.step_times_s`); p50 / p95 over iterations;
* gain of a point over the default: ``(p50_default - p50_point) / p50_default``, the default
  being the point with ``bucket_cap_mb`` not given and the same other values;
* exposed communication: end of backward compute to the end of the last collective; its
  tail is the p95 over steady iterations (slowest rank);
* overlap: communication time overlapped by compute / communication time (HTA's
  ``get_comm_comp_overlap``), computed from the written Perfetto trace of each rank.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Sequence

from ddpsim.report import bucket_costs, ddp_modes, term_effects
from ddpsim.report import compiled as compiled_report
from ddpsim.io import FLOAT_DIGITS, file_id, write_text_atomic
from ddpsim.plan.planner import mb_text
from ddpsim.pipeline.sweep import PointRecord, best_record, default_record, fmt_pct, fmt_s, uncertainty_summary
from ddpsim.units import format_size

CSV_FLOAT = f"%.{FLOAT_DIGITS}g"


def buckets_table(records: Sequence[PointRecord]):
    """Every bucket of every point: point, rank, iteration, bucket, size, ready, launch, start, end (s)."""
    import pandas as pd

    rows = []
    for r in records:
        for b in r.result.buckets:
            rows.append({"point": r.point_id, "rank": b.rank, "iteration": b.iteration, "bucket": b.bucket,
                         "size_bytes": b.size_bytes, "num_params": b.num_params, "ready_s": b.ready_s,
                         "launch_s": b.launch_s, "start_s": b.start_s, "end_s": b.end_s})
    cols = ["point", "rank", "iteration", "bucket", "size_bytes", "num_params", "ready_s", "launch_s", "start_s", "end_s"]
    return pd.DataFrame(rows, columns=cols)


def to_csv_text(df) -> str:
    buf = io.StringIO()
    df.to_csv(buf, index=False, float_format=CSV_FLOAT, lineterminator="\n")
    return buf.getvalue()


def write_csv(df, path: str | Path) -> Path:
    return write_text_atomic(path, to_csv_text(df))


def _gain(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base <= 0:
        return None
    return (base - new) / base


def summarize(scenario: Any, records: Sequence[PointRecord], *, trace: Any = None,
              overlaps: dict[str, dict[int, float]] | None = None,
              trace_files: dict[str, list[str]] | None = None,
              recommendation: dict[str, Any] | None = None,
              warnings: Sequence[str] | None = None, cost_terms: Sequence[str] | None = None,
              method_error: dict[str, Any] | None = None, compiled: dict[str, Any] | None = None,
              host_costs: Any = None, term_effects: dict[str, Any] | None = None) -> dict[str, Any]:
    """All figures of the summary as plain data (JSON-able); ``warnings`` (one line each, e.g.
    the calibration's) become a ``warnings`` key only when there are any; ``cost_terms`` (one
    line each: the GPU cost terms in force and where their values come from) likewise;
    ``method_error`` (:func:`ddpsim.pipeline.method_error.answer`) likewise; ``host_costs`` (the
    :class:`~ddpsim.network.host_costs.HostCosts` in force, None: none) adds ``bucket_costs``
    (:func:`ddpsim.report.bucket_costs.figures`); ``term_effects``
    (:func:`ddpsim.pipeline.term_effects.term_effects`) is kept as it is."""
    best = best_record(records)
    base = default_record(records, best.point) or records[0]
    bm, dm = best.metrics, base.metrics
    out: dict[str, Any] = {
        "scenario": scenario.name, "description": scenario.description,
        "world_size": best.world_size, "backend": best.backend,
        "cluster": {"topology": Path(scenario.cluster.label).name if scenario.cluster.label.endswith((".yaml", ".yml")) else scenario.cluster.label,
                    "nodes": scenario.cluster.nodes},
        "comm_model": best.comm,
        "num_points": len(records),
        "best": {"point": best.point_id, "bucket_cap_mb": best.point.bucket_cap_mb,
                 **({"bucket_cap_mb_list": list(best.point.bucket_cap_mb_list)} if best.point.bucket_cap_mb_list else {}),
                 **_pick(bm)},
        "default": {"point": base.point_id, **_pick(dm)},
        "gain_over_default": _gain(dm["iteration_p50_s"], bm["iteration_p50_s"]),
        "saved_per_step_s": dm["iteration_p50_s"] - bm["iteration_p50_s"],
        "overlaps": overlaps or {}, "trace_files": trace_files or {},
        "recommendation": recommendation,
        "points": [{"point": r.point_id, **_pick(r.metrics),
                    "gain_over_default": _gain((default_record(records, r.point) or base).metrics["iteration_p50_s"],
                                               r.metrics["iteration_p50_s"])} for r in records],
    }
    if warnings:
        out["warnings"] = list(warnings)
    if cost_terms:
        out["cost_terms"] = list(cost_terms)
    if method_error:
        out["method_error"] = method_error
    out.update(ddp_modes.figures(records))
    if compiled:  # torch.compile: every point also run eagerly (ddpsim.pipeline.compiled.eager_comparison)
        out["compile"] = compiled
    costs = bucket_costs.figures(out["points"], host_costs, trace.num_params if trace is not None else None)
    if costs is not None:
        out["bucket_costs"] = costs
    if term_effects:
        out["term_effects"] = term_effects
    band = uncertainty_summary(records)
    if band is not None:
        out["uncertainty"] = band
    if trace is not None:
        out["trace"] = {"model": trace.model, "num_params": trace.num_params, "param_bytes": trace.total_param_bytes,
                        "device": trace.environment.get("device"), "device_name": trace.environment.get("device_name"),
                        "batch_size": trace.environment.get("batch_size"), "synthetic": trace.synthetic is not None,
                        "forward_s": trace.phase("forward").median_s, "backward_s": trace.phase("backward").median_s,
                        "optimizer_s": trace.phase("optimizer").median_s}
        if scenario.trace_path is not None:
            out["trace"]["path"] = _rel(scenario.trace_path)
    return out


def _rel(p: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


_KEYS = ("iteration_p50_s", "iteration_p95_s", "iteration_mean_s", "forward_s", "backward_compute_s", "exposed_comm_s",
         "exposed_comm_p95_s", "comm_s", "overlap_ratio", "optimizer_s", "other_s", "first_iteration_s",
         "first_iteration_exposed_comm_s", "rebuild_iteration", "rebuild_iteration_s", "num_buckets",
         "num_buckets_initial", "bucket_sizes_bytes", "first_bucket_sizes_bytes", "num_steady_iterations",
         "compute_by_kind_s")


def _pick(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m.get(k) for k in _KEYS}


#: a predicted gain below this is a tie in practice (what a simulation can promise)
PRACTICAL_GAIN = 0.01


def _cap_list_line(cl: dict[str, Any], cap_gain: float | None) -> str:
    """The summary's bullet with the line to paste: the ``bucket_cap_mb_list`` when it is
    predicted at least :data:`PRACTICAL_GAIN` faster than the best uniform cap, else that cap,
    and DDP's default when the best cap (gain ``cap_gain`` over it) is a tie with it."""
    gains = (f"predicted p50 {fmt_s(cl['iteration_p50_s'])}: {fmt_pct(cl['gain_over_default'])} over the default "
             f"(`{cl['default_point']}`), {fmt_pct(cl['gain_over_best_cap'])} over the best uniform cap (`{cl['best_cap_point']}`)")
    if (cl["gain_over_best_cap"] or 0) < PRACTICAL_GAIN:
        # a list not clearly faster than one cap: the cap is the line to paste, the list stays in the plan file
        cap = cl["best_cap_mb"]
        if cap is not None and (cap_gain or 0) < PRACTICAL_GAIN:
            return (f"- **To paste**: `DDP(model)` (`{cl['default_point']}`) - the best cap (`{cl['best_cap_point']}`) "
                    f"is predicted less than {100 * PRACTICAL_GAIN:g}% faster, and no bucket_cap_mb_list "
                    f"{100 * PRACTICAL_GAIN:g}% or more faster than it (the best list, {fmt_pct(cl['gain_over_best_cap'])}, "
                    f"is in `recommended_plan.json`).")
        line = "DDP(model)" if cap is None else f"DDP(model, bucket_cap_mb={mb_text(cap)})"
        return (f"- **To paste**: `{line}` (`{cl['best_cap_point']}`) - no bucket_cap_mb_list is predicted "
                f"{100 * PRACTICAL_GAIN:g}% or more faster than this uniform cap (the best list, "
                f"{fmt_pct(cl['gain_over_best_cap'])}, is in `recommended_plan.json`).")
    if cl["reproduces_recommended_plan"]:
        head = ("- **To paste** (torch >= 2.13): `" + cl["paste"] + "` - real DDP rebuilds exactly the buckets of "
                "`recommended_plan.json` from it; " + gains)
    else:
        head = ("- **To paste** (torch >= 2.13): `" + cl["paste"] + "` - no bucket_cap_mb_list builds the buckets of "
                "`recommended_plan.json` (" + cl["reason"] + "); this is the fastest list found, " + gains)
    return head + "."


#: robust caps this many or more in a row (in the sweep's cap order) are named as a range
RANGE_MIN_POINTS = 3


def robust_phrase(points: Sequence[str], robust: Sequence[str]) -> str:
    """The robust points in words, in sweep order: caps that are robust for every cap swept between
    them (same other values) are one range when there are at least :data:`RANGE_MIN_POINTS`,
    ``caps 5-25 MiB (4 points swept)``; other points by their id (``cap=default``, ``cap=1``)."""
    keep = set(robust)
    groups: dict[str, list[tuple[float, str]]] = {}
    for p in points:
        head, _, rest = p.partition(",")
        try:
            groups.setdefault(rest, []).append((float(head[len("cap="):]), p))
        except ValueError:  # cap=default
            continue
    ranged: dict[str, str] = {}  # the run's first point in sweep order -> its words
    covered: set[str] = set()
    for rest, caps in groups.items():
        caps.sort()
        run: list[tuple[float, str]] = []
        for cap, p in caps + [(float("nan"), "")]:
            if p in keep:
                run.append((cap, p))
                continue
            if len(run) >= RANGE_MIN_POINTS:
                first = min((q for _, q in run), key=points.index)
                ranged[first] = (f"caps {run[0][0]:g}\u2013{run[-1][0]:g} MiB ({len(run)} points swept"
                                 f"{', ' + rest if rest else ''})")
                covered.update(q for _, q in run)
            run = []
    out = [ranged.get(p, f"`{p}`") for p in points if p in keep and (p in ranged or p not in covered)]
    return ", ".join(out)


def render_uncertainty(u: dict[str, Any]) -> str:
    """The answer's line on the recommendation's uncertainty (:mod:`ddpsim.pipeline.resampling`)."""
    tol = 100 * u["tolerance"]
    robust = u["robust"]
    head = f"- Under the model's uncertainty ({len(u['samples'])} re-simulations per point: {', '.join(u['inputs'])}): "
    if robust and len(robust) == len(u["points"]):
        head += f"every point swept is within {tol:g} % of the best in every one"
    elif len(robust) > 1:
        head += (f"any of {robust_phrase([p['point'] for p in u['points']], robust)} is within {tol:g} % of the best "
                 "in every one")
    elif robust:
        head += f"only `{robust[0]}` is within {tol:g} % of the best in every one"
    else:
        head += (f"no point is within {tol:g} % of the best in every one; the safest is `{u['safest']}` (at most "
                 f"{100 * u['safest_regret_max']:.1f} % from the best in any of them)")
    most = u.get("most_sensitive")
    if most:
        sens = u["sensitivity"][most]
        if sens["prior_best_regret"] >= 5e-4:
            head += (f"; the ranking is most sensitive to {most}: there keeping `{u['prior_best']}` costs up to "
                     f"{100 * sens['prior_best_regret']:.1f} %")
        else:
            head += (f"; `{u['prior_best']}` stays within 0.05 % of the best in every one; {most} moves the points' "
                     f"distances to the best most (up to {100 * sens['regret_shift']:.1f} points)")
    return head + "."


def render_method_error(me: dict[str, Any]) -> str:
    """The answer's line on the method's error measured on other models (:mod:`ddpsim.pipeline.method_error`)."""
    lvl = f"{100 * me['level']:.0f} %"
    head = (f"- Measured error of the method (`{me['source']}`: {me['points']} points of {me['models']} other models"
            + (f"; {me['note']}" if me.get("note") else "") + "): ")
    if me.get("band") is None:
        return head + f"too few residuals for a {lvl} band."
    lo, hi = me["band"]
    head += (f"{lvl} of their measured mean steps lay within {100 * lo:+.1f}..{100 * hi:+.1f} % of the prediction, here "
             f"{fmt_s(me['best_range_s'][0])} to {fmt_s(me['best_range_s'][1])} for the best point's mean step "
             f"{fmt_s(me['best_mean_s'])} (predicted from the trace's mean phases, as the residuals were)")
    t = me.get("trend_band")
    if t:
        head += (f"; the step ratio of two caps of one model was off by {100 * t[0]:+.1f}..{100 * t[1]:+.1f} % ({lvl}), so "
                 + (f"{', '.join('`' + p + '`' for p in me['tied'])} {'is' if len(me['tied']) == 1 else 'are'} a tie with "
                    f"`{me['best']}` by that measure" if me["tied"] else f"no other point is that close to `{me['best']}`"))
    return head + "."


def render_summary(s: dict[str, Any]) -> str:
    """``summary.md`` from :func:`summarize`'s dict: setup, answer, breakdown, sweep, first
    iteration and rebuild, Perfetto overlap, in that order."""
    L: list[str] = [f"# ddpsim report: {s['scenario']}", ""]
    if s.get("description"):
        L += [s["description"], ""]
    L += _setup_section(s)
    L += _answer_section(s)
    L += _breakdown_section(s)
    L += compiled_report.compiled_table(s)
    L += _sweep_section(s)
    L += bucket_costs.table(s)
    L += term_effects.section(s)
    L += _first_iteration_section(s)
    L += _overlap_section(s)
    return "\n".join(L)


def _setup_section(s: dict[str, Any]) -> list[str]:
    """``## Setup``: cluster, trace, comm model, cost terms, steady iterations; then the warnings."""
    b = s["best"]
    t = s.get("trace") or {}
    setup = [f"- cluster: `{s['cluster']['topology']}` x {s['cluster']['nodes']} node(s), world size {s['world_size']}, backend `{s['backend']}`"]
    if t:
        setup.append(f"- trace: `{t.get('path', t['model'])}` ({t['model']}, {t['num_params']} parameters, {format_size(t['param_bytes'])} of gradients; "
                     f"forward {fmt_s(t['forward_s'])}, backward {fmt_s(t['backward_s'])}, optimizer {fmt_s(t['optimizer_s'])} per step"
                     f"{', device ' + str(t['device_name'] or t['device']) if (t.get('device_name') or t.get('device')) else ''}"
                     f"{', retimed/synthetic' if t.get('synthetic') else ''})")
    cm = s.get("comm_model") or {}
    if cm:
        items = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in cm.items()
                 if not isinstance(v, (dict, list)) and k not in ("topology", "num_ranks")]
        setup.append("- comm model: " + ", ".join(items[:8]) + (", ... (summary.json has all)" if len(items) > 8 else ""))
    for term in s.get("cost_terms") or ():
        setup.append(f"- cost term: {term}")
    setup.append(f"- steady iterations per point: {b.get('num_steady_iterations')} (after DDP's first iteration and the rebuild); "
                 f"step time = slowest rank's end to slowest rank's end")
    L = ["## Setup", "", *setup, ""]
    for w in s.get("warnings") or ():
        L += [f"**WARNING: {w}.**", ""]
    return L


def _best_line(s: dict[str, Any]) -> str:
    """The answer's first bullet: the best point against the default."""
    b, d = s["best"], s["default"]
    cap = "default (not given)" if b["bucket_cap_mb"] is None else f"{b['bucket_cap_mb']:g} MiB"
    what = "bucket_cap_mb"
    if b.get("bucket_cap_mb_list"):
        what, cap = "setting", f"bucket_cap_mb_list=[{', '.join(mb_text(x) for x in b['bucket_cap_mb_list'])}]"
    if b["point"] == d["point"]:
        return (f"- **Best bucket_cap_mb: {cap}** - DDP's default is already the fastest point swept: "
                f"p50 step {fmt_s(b['iteration_p50_s'])}.")
    return (f"- **Best {what}: {cap}** (`{b['point']}`): p50 step {fmt_s(b['iteration_p50_s'])} vs "
            f"{fmt_s(d['iteration_p50_s'])} at the default (`{d['point']}`): "
            f"**{100 * (s['gain_over_default'] or 0):.1f}% faster**, {fmt_s(s['saved_per_step_s'])} saved per step"
            + (" - under 1%, within what a simulation can promise: a tie in practice, keep the default."
               if (s['gain_over_default'] or 0) < PRACTICAL_GAIN else "."))


def _recommendation_lines(rec: dict[str, Any], cap_gain: float | None) -> list[str]:
    """The answer's bullets on the explicit plan beyond one cap and the line to paste."""
    if rec.get("better"):
        L = [f"- **Beyond one cap**: an explicit plan of {rec['num_buckets']} buckets cut along the gradient-ready order "
             f"(`recommended_plan.json`) gives p50 {fmt_s(rec['iteration_p50_s'])}, **{100 * rec['gain_over_best_cap']:.1f}% "
             f"faster than the best cap** (engine-verified; analytical search: {rec['method']})."]
    else:
        L = [f"- Beyond one cap: the best explicit plan found ({rec['num_buckets']} buckets, p50 {fmt_s(rec['iteration_p50_s'])}) "
             f"is not faster than the best cap ({fmt_pct(rec['gain_over_best_cap'])} by the engine); "
             f"`recommended_plan.json` holds the best cap's own buckets instead."]
    cl = rec.get("cap_list")
    if cl:
        L.append(_cap_list_line(cl, cap_gain))
    return L


def _trust_line(s: dict[str, Any]) -> str | None:
    """What the answer rests on when no measured method error comes with it: the trace's
    provenance and the communication model's, and what would check them (None for a summary
    without them)."""
    if not s.get("trace") or not s.get("comm_model"):
        return None
    tr, model = s["trace"], s["comm_model"].get("model", "")
    if model == "calibrated":
        comm = "collectives from this host's calibration"
    elif s["backend"] == "nccl":
        comm = ("NCCL's algorithm choice (tuning.cc) timed from its execution, scored against published "
                "all-reduce curves (`benchmarks/bench_collective_score.py`)")
    else:
        comm = (f"{s['backend']}'s analytical model, not calibrated on this host (`ddpsim validate` calibrates it and "
                "measures real DDP runs; a small VM's loopback can cost several times the model's figure)")
    source = ("a trace re-timed for the GPU from a CPU capture (a roofline model per ATen op)" if tr.get("synthetic")
              else f"a trace measured on {tr.get('device_name') or tr.get('device')}")
    return (f"- How sure: the spread above is the model's own; the answer rests on {source} and on {comm}, "
            "with no measured error of the whole prediction attached (a validation's `--method-error` file attaches one).")


def _answer_section(s: dict[str, Any]) -> list[str]:
    """``## Answer``: the best point, its uncertainty and the method's error, the exposed
    communication tail, the step p95, and the recommendation beyond one cap."""
    b, d = s["best"], s["default"]
    L = ["## Answer", "", *ddp_modes.answer_lines(s), _best_line(s)]
    L[2:2] = compiled_report.answer_lines(s)
    u = s.get("uncertainty")
    if u:
        L.append(render_uncertainty(u))
    me = s.get("method_error")
    trust = render_method_error(me) if me else _trust_line(s)
    if trust:
        L.append(trust)
    L.append(f"- Exposed communication tail (p95 over steady iterations): {fmt_s(b['exposed_comm_p95_s'])} at the best point, "
             f"{fmt_s(d['exposed_comm_p95_s'])} at the default (mean {fmt_s(b['exposed_comm_s'])} / {fmt_s(d['exposed_comm_s'])}).")
    L.append(f"- Step-time p95: {fmt_s(b['iteration_p95_s'])} at the best point, {fmt_s(d['iteration_p95_s'])} at the default.")
    rec = s.get("recommendation")
    if rec:
        L += _recommendation_lines(rec, s["gain_over_default"])
    L.append("")
    return L


def _breakdown_section(s: dict[str, Any]) -> list[str]:
    """``## Iteration-time breakdown``: the best and the default point's mean steady iteration."""
    b, d = s["best"], s["default"]
    L = ["## Iteration-time breakdown (mean steady iteration; p50/p95 of the job's step time)", "",
         "| | forward | backward compute | exposed comm | optimizer | other | mean | p50 | p95 | comm (total) | overlap |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = [("best `" + b["point"] + "`", b), ("default `" + d["point"] + "`", d)] if b["point"] != d["point"] else [("default = best `" + b["point"] + "`", b)]
    for name, m in rows:
        L.append(f"| {name} | {fmt_s(m['forward_s'])} | {fmt_s(m['backward_compute_s'])} | {fmt_s(m['exposed_comm_s'])} | "
                 f"{fmt_s(m['optimizer_s'])} | {fmt_s(m['other_s'])} | {fmt_s(m['iteration_mean_s'])} | {fmt_s(m['iteration_p50_s'])} | "
                 f"{fmt_s(m['iteration_p95_s'])} | {fmt_s(m['comm_s'])} | {100 * m['overlap_ratio']:.1f}% |")
    L.append("")
    kinds = {k: v for k, v in (b.get("compute_by_kind_s") or {}).items()
             if k not in ("forward", "backward", "optimizer", "wait") and v > 0}
    L.append("'exposed comm' runs from the end of backward compute to the end of the last collective (worst rank for the "
             "p95 tail); 'other' is the rest of the step: " + (", ".join(f"{k.replace('_', ' ')} {fmt_s(v)}" for k, v in kinds.items())
             + " on the compute stream at the best point, and " if kinds else "") + "waiting for the slowest rank / the next collective.")
    L.append("")
    return L


def _sweep_section(s: dict[str, Any]) -> list[str]:
    """``## Sweep``: one row per point."""
    b = s["best"]
    L = ["## Sweep", "", "| point | buckets | p50 step | p95 step | exposed comm (mean) | exposed comm p95 | overlap | vs default |",
         "|---|---|---|---|---|---|---|---|"]
    for p in s["points"]:
        mark = " **best**" if p["point"] == b["point"] else ""
        L.append(f"| `{p['point']}`{mark} | {p['num_buckets']} | {fmt_s(p['iteration_p50_s'])} | {fmt_s(p['iteration_p95_s'])} | "
                 f"{fmt_s(p['exposed_comm_s'])} | {fmt_s(p['exposed_comm_p95_s'])} | {100 * p['overlap_ratio']:.1f}% | {fmt_pct(p['gain_over_default'])} |")
    L += ["", "Full figures: `sweep.csv`; every bucket of every iteration: `buckets.csv`; plot: `sweep.png`.", ""]
    return L


def _first_iteration_section(s: dict[str, Any]) -> list[str]:
    """``## First iteration and the bucket rebuild``: DDP's construction-time layout in
    iteration 1 and the rebuild in gradient-ready order (torch/csrc/distributed/c10d/reducer.cpp,
    Reducer::rebuild_buckets), for the default and the best point."""
    b, d = s["best"], s["default"]
    L = ["## First iteration and the bucket rebuild", ""]
    for name, m in (("default", d), ("best", b)) if b["point"] != d["point"] else (("default", d),):
        fb = m.get("first_bucket_sizes_bytes") or []
        fi, ri, ss = m.get("first_iteration_s"), m.get("rebuild_iteration_s"), m["iteration_p50_s"]
        line = (f"- {name} (`{m and (b['point'] if name == 'best' else d['point'])}`): iteration 1 uses DDP's construction-time layout, "
                f"{len(fb)} bucket(s) ({', '.join(format_size(x) for x in fb[:3])}{'...' if len(fb) > 3 else ''}), launched when the "
                f"whole backward is done: {fmt_s(fi)} ({fmt_pct(None if fi is None or not ss else fi / ss - 1)} vs steady p50 {fmt_s(ss)}; "
                f"exposed comm {fmt_s(m.get('first_iteration_exposed_comm_s'))}).")
        if m.get("rebuild_iteration"):
            line += (f" Buckets are rebuilt in gradient-ready order into {m.get('num_buckets')} bucket(s), used from iteration "
                     f"{m['rebuild_iteration']}: {fmt_s(ri)} ({fmt_pct(None if ri is None or not ss else ri / ss - 1)} vs steady).")
        else:
            line += " No rebuild (find_unused_parameters without static_graph): the first layout stays."
        L.append(line)
    L.append("")
    return L


def _overlap_line(s: dict[str, Any], point: str, per_rank: dict[Any, float]) -> str:
    """One point's bullet of the Perfetto section: the HTA overlap per rank written, beside the engine's."""
    files = s["trace_files"].get(point, [])
    vals = [v for _, v in sorted(per_rank.items(), key=lambda kv: int(kv[0]))]
    if len(set(f"{100 * v:.2f}" for v in vals)) == 1:
        ranks = f"{100 * vals[0]:.2f}%" + (f" on each of the {len(vals)} ranks written" if len(vals) > 1 else "")
    else:
        ranks = ", ".join(f"rank {r}: {100 * v:.2f}%" for r, v in sorted(per_rank.items(), key=lambda kv: int(kv[0])))
    steady = next((p["overlap_ratio"] for p in s["points"] if p["point"] == point), None)
    shown = files if len(files) <= 4 else files[:2] + ["...", files[-1]]
    return (f"- `{point}`: communication overlapped by compute, as HTA's `get_comm_comp_overlap` computes it over "
            f"the whole trace (iteration 1 included): {ranks}; steady iterations only (engine): "
            f"{'-' if steady is None else f'{100 * steady:.1f}%'}. Files: {', '.join(f if f == '...' else '`' + f + '`' for f in shown)}; "
            f"timeline `timeline_{file_id(point)}.png`.")


def _overlap_section(s: dict[str, Any]) -> list[str]:
    """``## Overlap shown by the Perfetto traces``: one bullet per point written, and how to open them."""
    L = ["## Overlap shown by the Perfetto traces", ""]
    if not s["overlaps"]:
        return L + ["- (no timelines requested)", ""]
    for point, per_rank in s["overlaps"].items():
        L.append(_overlap_line(s, point, per_rank))
    pair = (s["default"]["point"], s["best"]["point"])
    if pair[0] != pair[1] and all(p in s["overlaps"] for p in pair):
        L.append(f"- `{pair[0]}` against `{pair[1]}` on one time axis: `timeline_default_vs_best.png`.")
    L += ["", "Open a trace at https://ui.perfetto.dev (one track per stream; bucket ready/launch are instant marks), "
          "or check the overlap with HTA: `TraceAnalysis(trace_dir=..., include_last_profiler_step=True).get_comm_comp_overlap()` "
          "on a folder holding one point's rank files (iterations are `ProfilerStep#<k>` spans, as torch.profiler writes them)."
          , ""]
    return L
