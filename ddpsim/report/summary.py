"""A scenario's report: :func:`summarize` (``summary.json``'s document), :func:`bucket_rows`
(``buckets.csv``) and :func:`render_summary` (``summary.md``, every section, from the document read
as a typed :class:`~ddpsim.report.figures.Summary`). Over steady iterations (after DDP's first
iteration and the rebuild): the step time runs from the previous iteration's end on its slowest rank
to this one's (adding up to the wall time, :meth:`ddpsim.engine.result.SimResult.step_times_s`),
p50/p95 over iterations; a point's gain over the default (``bucket_cap_mb`` not given, the same
other values) is ``(p50_default - p50_point) / p50_default``; exposed communication runs from the
end of backward compute to the end of the last collective (its tail: the p95, slowest rank); overlap
is communication time overlapped by compute / communication time (HTA's ``get_comm_comp_overlap``),
from each rank's written Perfetto trace.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any, Sequence

from ddpsim.report import ddp_modes
from ddpsim.report.figures import (POINT_KEYS, BucketCostRow, BucketCosts, CapList, Compiled, MethodError,
                                   PointFigures, Summary, TermEffects, TraceFigures, Uncertainty, typed)
from ddpsim.report.tables import md_table
from ddpsim.engine.result import BucketTiming
from ddpsim.io import file_id
from ddpsim.network.host_costs import HostCosts
from ddpsim.plan.planner import mb_text
from ddpsim.pipeline.scenario_run import ScenarioRun
from ddpsim.pipeline.sweep import (PointRecord, default_record, fmt_pct, fmt_s, gain,
                                   uncertainty_summary)
from ddpsim.units import format_size

#: ``buckets.csv``'s columns: the point, then :class:`~ddpsim.engine.result.BucketTiming`'s fields
#: (rank, iteration, bucket, size, parameters, ready, launch, start, end (s))
BUCKET_FIELDS = ("point", *(f.name for f in fields(BucketTiming)))


def bucket_rows(records: Sequence[PointRecord]) -> list[tuple]:
    """Every bucket of every point, one tuple of :data:`BUCKET_FIELDS` each."""
    get = attrgetter(*BUCKET_FIELDS[1:])
    return [(r.point_id, *get(b)) for r in records for b in r.result.buckets]


def summarize(run: ScenarioRun, *, overlaps: dict[str, dict[int, float]] | None = None,
              trace_files: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """``summary.json``'s document of ``run`` (the keys and types
    :class:`~ddpsim.report.figures.Summary` declares; ``overlaps`` and ``trace_files``: per timeline
    point written); each optional section (``warnings``, ``cost_terms``, ``method_error``,
    ``bucket_costs`` from the recommended plan's host costs, ...) only where the run has it."""
    scenario, records, trace, rec = run.scenario, run.records, run.trace, run.recommendation
    best = run.best
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
        "gain_over_default": gain(dm["iteration_p50_s"], bm["iteration_p50_s"]),
        "saved_per_step_s": dm["iteration_p50_s"] - bm["iteration_p50_s"],
        "overlaps": overlaps or {}, "trace_files": trace_files or {},
        "recommendation": None if rec is None else rec.info,
        "points": [{"point": r.point_id, **_pick(r.metrics),
                    "gain_over_default": gain((default_record(records, r.point) or base).metrics["iteration_p50_s"],
                                               r.metrics["iteration_p50_s"])} for r in records],
    }
    costs = bucket_cost_figures(out["points"], rec and rec.inputs.config.host_costs,
                                trace and trace.num_params)
    optional = {"warnings": [run.warning] if run.warning else None,
                "cost_terms": list(run.cost_terms), "method_error": run.method_error,
                **ddp_modes.figures(records, best), "compile": run.compiled,
                "bucket_costs": costs and asdict(costs), "term_effects": run.term_effects,
                "uncertainty": uncertainty_summary(records)}
    out.update({k: v for k, v in optional.items() if v})  # each only where the scenario has it
    if trace is not None:
        out["trace"] = {"model": trace.model, "num_params": trace.num_params, "param_bytes": trace.total_param_bytes,
                        "device": trace.environment.get("device"), "device_name": trace.environment.get("device_name"),
                        "batch_size": trace.environment.get("batch_size"), "synthetic": trace.synthetic is not None,
                        "forward_s": trace.phase("forward").median_s, "backward_s": trace.phase("backward").median_s,
                        "optimizer_s": trace.phase("optimizer").median_s}
        if scenario.trace_path is not None:  # relative to the working folder where it is in it
            p, cwd = Path(scenario.trace_path).resolve(), Path.cwd().resolve()
            out["trace"]["path"] = str(p.relative_to(cwd) if p.is_relative_to(cwd) else scenario.trace_path)
    return out


def _pick(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m.get(k) for k in POINT_KEYS}


def bucket_cost_figures(points: Sequence[dict[str, Any]], host: HostCosts | None,
                        num_params: int | None) -> BucketCosts | None:
    """What each cap's buckets cost beyond their all-reduce kernels, term by term, from the
    summary's ``points`` and the host costs in force (:class:`~ddpsim.network.host_costs.HostCosts`,
    measured on profiles: :mod:`ddpsim.network.host_cost_profiles`): on the host, per bucket DDP's
    launch (``mark_bucket_ready`` -> ``all_reduce_bucket``) and ProcessGroupNCCL's enqueue, and the
    per-gradient hook (the same at every cap, shown once); on the device, the gradient copies in and
    out of the buckets and the all-reduces (total and exposed); and the p50 step against the
    default's. Host time counts only where the CPU falls behind the device (the engine's CPU clock).
    None without host costs (gloo, a calibration, ``host: false``)."""
    if host is None or num_params is None:
        return None
    per_bucket = host.bucket_launch_s + host.enqueue_s

    def row(p: dict[str, Any]) -> BucketCostRow:
        kinds = p.get("compute_by_kind_s") or {}
        return BucketCostRow(**{f.name: p[f.name] for f in fields(BucketCostRow) if f.name in p},
                             host_buckets_s=p["num_buckets"] * per_bucket,
                             copy_kernels_s=kinds.get("copy_in", 0.0) + kinds.get("copy_out", 0.0))
    return BucketCosts(host_per_bucket_s=per_bucket, host_hooks_s=num_params * host.hook_s_per_param,
                       num_params=num_params, rows=tuple(row(p) for p in points))


#: a predicted gain below this is a tie in practice (what a simulation can promise)
PRACTICAL_GAIN = 0.01


def _cap_list_line(cl: CapList, cap_gain: float | None) -> str:
    """The bullet with the line to paste: the ``bucket_cap_mb_list`` when at least :data:`PRACTICAL_GAIN`
    faster than the best uniform cap, else that cap, else DDP's default (``cap_gain``: the cap's gain)."""
    margin, best_list = f"{100 * PRACTICAL_GAIN:g}%", fmt_pct(cl.gain_over_best_cap)
    if (cl.gain_over_best_cap or 0) < PRACTICAL_GAIN:
        # a list not clearly faster than one cap: the cap is the line to paste, the list stays in the plan file
        if cl.best_cap_mb is not None and (cap_gain or 0) < PRACTICAL_GAIN:
            return (f"- **To paste**: `DDP(model)` (`{cl.default_point}`) - the best cap (`{cl.best_cap_point}`) is predicted "
                    f"less than {margin} faster, and no bucket_cap_mb_list {margin} or more faster than it (the best list, "
                    f"{best_list}, is in `recommended_plan.json`).")
        line = "DDP(model)" if cl.best_cap_mb is None else f"DDP(model, bucket_cap_mb={mb_text(cl.best_cap_mb)})"
        return (f"- **To paste**: `{line}` (`{cl.best_cap_point}`) - no bucket_cap_mb_list is predicted {margin} or more "
                f"faster than this uniform cap (the best list, {best_list}, is in `recommended_plan.json`).")
    how = ("real DDP rebuilds exactly the buckets of `recommended_plan.json` from it;" if cl.reproduces_recommended_plan else
           f"no bucket_cap_mb_list builds the buckets of `recommended_plan.json` ({cl.reason}); this is the fastest list found,")
    return (f"- **To paste** (torch >= 2.13): `{cl.paste}` - {how} predicted p50 {fmt_s(cl.iteration_p50_s)}: "
            f"{fmt_pct(cl.gain_over_default)} over the default (`{cl.default_point}`), {best_list} over the best uniform "
            f"cap (`{cl.best_cap_point}`).")


#: robust caps this many or more in a row (in the sweep's cap order) are named as a range
RANGE_MIN_POINTS = 3


def robust_phrase(points: Sequence[str], robust: Sequence[str]) -> str:
    """The robust points in words, in sweep order: at least :data:`RANGE_MIN_POINTS` robust caps in a
    row (same other values) as one range, ``caps 5-25 MiB (4 points swept)``; others by their id."""
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
        for robust_run, group in groupby(sorted(caps), key=lambda c: c[1] in keep):
            run = list(group)
            if robust_run and len(run) >= RANGE_MIN_POINTS:
                first = min((q for _, q in run), key=points.index)
                ranged[first] = (f"caps {run[0][0]:g}\u2013{run[-1][0]:g} MiB ({len(run)} points swept"
                                 f"{', ' + rest if rest else ''})")
                covered.update(q for _, q in run)
    out = [ranged.get(p, f"`{p}`") for p in points if p in keep and (p in ranged or p not in covered)]
    return ", ".join(out)


def render_uncertainty(u: Uncertainty) -> str:
    """The answer's line on the recommendation's uncertainty (:mod:`ddpsim.pipeline.resampling`)."""
    within = f"within {100 * u.tolerance:g} % of the best in every one"
    head = f"- Under the model's uncertainty ({len(u.samples)} re-simulations per point: {', '.join(u.inputs)}): "
    if u.robust and len(u.robust) == len(u.points):
        head += f"every point swept is {within}"
    elif len(u.robust) > 1:
        head += f"any of {robust_phrase([p['point'] for p in u.points], u.robust)} is {within}"
    elif u.robust:
        head += f"only `{u.robust[0]}` is {within}"
    else:
        head += (f"no point is {within}; the safest is `{u.safest}` (at most {100 * u.safest_regret_max:.1f} % from "
                 "the best in any of them)")
    if u.most_sensitive:
        most, sens = u.most_sensitive, u.sensitivity[u.most_sensitive]
        if sens.prior_best_regret >= 5e-4:
            head += (f"; the ranking is most sensitive to {most}: there keeping `{u.prior_best}` costs up to "
                     f"{100 * sens.prior_best_regret:.1f} %")
        else:
            head += (f"; `{u.prior_best}` stays within 0.05 % of the best in every one; {most} moves the points' "
                     f"distances to the best most (up to {100 * sens.regret_shift:.1f} points)")
    return head + "."


def render_method_error(me: MethodError) -> str:
    """The answer's line on the method's error measured on other models (:mod:`ddpsim.pipeline.method_error`)."""
    lvl = f"{100 * me.level:.0f} %"
    head = (f"- Measured error of the method (`{me.source}`: {me.points} points of {me.models} other models"
            + (f"; {me.note}" if me.note else "") + "): ")
    if me.band is None:
        return head + f"too few residuals for a {lvl} band."
    (lo, hi), (low_s, high_s) = me.band, me.best_range_s
    head += (f"{lvl} of their measured mean steps lay within {100 * lo:+.1f}..{100 * hi:+.1f} % of the prediction, here "
             f"{fmt_s(low_s)} to {fmt_s(high_s)} for the best point's mean step {fmt_s(me.best_mean_s)} (predicted from "
             "the trace's mean phases, as the residuals were)")
    if me.trend_band:
        tied = ", ".join(f"`{p}`" for p in me.tied)
        head += (f"; the step ratio of two caps of one model was off by {100 * me.trend_band[0]:+.1f}.."
                 f"{100 * me.trend_band[1]:+.1f} % ({lvl}), so "
                 + (f"{tied} {'is' if len(me.tied) == 1 else 'are'} a tie with `{me.best}` by that measure" if me.tied
                    else f"no other point is that close to `{me.best}`"))
    return head + "."


#: optimize_ddp's modes in words
MODE_TEXT = {"ddp_optimizer": "Dynamo's DDPOptimizer splitting the graph at bucket boundaries",
             "no_optimization": "optimize_ddp=False: one compiled backward, every gradient ready at its end",
             "python_reducer": "compiled autograd's python reducer (inductor's fused all-reduces)"}


def _change(compiled_s: float, eager_s: float) -> str:
    """Compiled against eager, signed percent; a change under 0.05 % reads as none."""
    change = (compiled_s - eager_s) / eager_s
    return "0.0%" if abs(change) < 5e-4 else f"{100 * change:+.1f}%"


def compiled_answer_lines(c: Compiled | None, best: str) -> list[str]:
    """The ``## Answer`` bullet of a compiled scenario whose best point is ``best`` (none for an
    eager one): the best cap under ``torch.compile`` (and DDPOptimizer's subgraphs there) beside
    eager DDP's best on the same trace and cluster (:func:`ddpsim.pipeline.run.eager_comparison`'s
    figures; :mod:`ddpsim.plan.compiled` states the model)."""
    if c is None:
        return []
    row = {r.point: r for r in c.points}
    here, eager_best = row[best], row[c.eager_best]
    cut = "" if here.subgraphs is None else f", {here.subgraphs} compiled subgraph(s)"
    same = ("the same cap" if c.eager_best == best else
            f"`{c.eager_best}` ({fmt_s(eager_best.eager_p50_s)}; compiled there: {fmt_s(eager_best.compiled_p50_s)})")
    return [f"- **Compiled, the best cap is `{best}`** (torch.compile with {MODE_TEXT[c.mode]}{cut}): p50 step "
            f"{fmt_s(here.compiled_p50_s)}, {_change(here.compiled_p50_s, here.eager_p50_s)} against eager DDP at that "
            f"cap ({fmt_s(here.eager_p50_s)}); eager DDP's best on this trace and cluster is {same}. Same per-op times "
            "as the trace: what compiling changes here is only when the gradients become ready."]


def compiled_table(c: Compiled | None) -> list[str]:
    """``## Compiled against eager``: every point's p50 both ways (none for an eager scenario)."""
    if c is None:
        return []
    return ["## Compiled against eager", "", *md_table([
        {"point": f"`{r.point}`", "subgraphs": "-" if r.subgraphs is None else str(r.subgraphs),
         "compiled p50": fmt_s(r.compiled_p50_s), "eager p50": fmt_s(r.eager_p50_s),
         "compiled vs eager": _change(r.compiled_p50_s, r.eager_p50_s)} for r in c.points], right=4), ""]


def bucket_costs_table(f: BucketCosts | None) -> list[str]:
    """``## What the buckets cost, term by term``: one row per point (empty without the figures)."""
    if f is None:
        return []
    return ["## What the buckets cost, term by term", "",
            f"Per step on the host: {fmt_s(f.host_per_bucket_s)} per bucket (DDP's bucket launch and "
            f"ProcessGroupNCCL's enqueue), and {fmt_s(f.host_hooks_s)} of autograd hooks at every cap "
            f"({f.num_params} parameters); host time delays the step only where the CPU falls behind the device.", "",
            *md_table([{"point": f"`{r.point}`", "buckets": str(r.num_buckets), "host: bucket launches": fmt_s(r.host_buckets_s),
                        "device: copy kernels": fmt_s(r.copy_kernels_s), "device: all-reduces": fmt_s(r.comm_s),
                        "exposed comm": fmt_s(r.exposed_comm_s), "p50 step": fmt_s(r.iteration_p50_s),
                        "vs default": fmt_pct(r.gain_over_default)} for r in f.rows], right=7), ""]


#: the GPU cost terms in words
TERM_NAMES = {"contention": "compute slowed while NCCL runs",
              "copy_kernels": "gradient copies as kernels", "host": "host costs"}


def _term_names(terms: tuple[str, ...]) -> str:
    return ", ".join(TERM_NAMES[t] for t in terms)


def term_effects_section(f: TermEffects | None) -> list[str]:
    """``## Which cost terms move the best cap``, from
    :func:`ddpsim.pipeline.term_effects.term_effects` (the sweep simulated again with terms off);
    empty without the figures."""
    if f is None:
        return []
    L = ["## Which cost terms move the best cap", "",
         f"The sweep simulated again (p50 step, no uncertainty samples) without the GPU cost terms "
         f"({_term_names(f.terms)}): where the best point lands, and what the full model's best, "
         f"`{f.best}`, loses there against it.", ""]
    for w in f.without:
        where = "the same point" if w.best == f.best else f"`{w.best}`, {100 * w.lost:.2f} % faster than `{f.best}`"
        L.append(f"- without {_term_names(w.off)}: {where} (p50 {fmt_s(w.best_p50_s)})")
    if len(f.moved_by) == 1:
        verdict = f"The term that moves the best cap: {_term_names(f.moved_by)}."
    elif f.moved_by:
        verdict = f"Each of these moves the best cap on its own: {_term_names(f.moved_by)}."
    elif f.without[0].best != f.best:
        verdict = "No term alone moves the best cap; together they do."
    else:
        verdict = "None of the terms moves the best cap."
    return L + ["", verdict + " A move smaller than the uncertainty above is a tie, not a change of answer.", ""]


def render_summary(s: dict[str, Any] | Summary) -> str:
    """``summary.md`` from :func:`summarize`'s document (or its :class:`Summary`): setup, answer,
    breakdown, sweep, first iteration and rebuild, Perfetto overlap, in that order."""
    s = typed(Summary, s) if isinstance(s, dict) else s
    L: list[str] = [f"# ddpsim report: {s.scenario}", ""] + ([s.description, ""] if s.description else [])
    L += _setup_section(s) + _answer_section(s) + _breakdown_section(s) + compiled_table(s.compile)
    L += _sweep_section(s) + bucket_costs_table(s.bucket_costs)
    L += term_effects_section(s.term_effects)
    return "\n".join(L + _first_iteration_section(s) + _overlap_section(s))


def _setup_section(s: Summary) -> list[str]:
    """``## Setup``: cluster, trace, comm model, cost terms, steady iterations; then the warnings."""
    setup = [f"- cluster: `{s.cluster.topology}` x {s.cluster.nodes} node(s), world size {s.world_size}, backend `{s.backend}`"]
    if t := s.trace:
        device = t.device_name or t.device
        setup.append(f"- trace: `{t.path or t.model}` ({t.model}, {t.num_params} parameters, {format_size(t.param_bytes)} of "
                     f"gradients; forward {fmt_s(t.forward_s)}, backward {fmt_s(t.backward_s)}, optimizer "
                     f"{fmt_s(t.optimizer_s)} per step{f', device {device}' if device else ''}"
                     f"{', retimed/synthetic' if t.synthetic else ''})")
    items = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in s.comm_model.items()
             if not isinstance(v, (dict, list)) and k not in ("topology", "num_ranks")]
    if s.comm_model:
        setup.append("- comm model: " + ", ".join(items[:8]) + (", ... (summary.json has all)" if len(items) > 8 else ""))
    setup += [f"- cost term: {term}" for term in s.cost_terms]
    setup.append(f"- steady iterations per point: {s.best.num_steady_iterations} (after DDP's first iteration and the "
                 "rebuild); step time = slowest rank's end to slowest rank's end")
    return ["## Setup", "", *setup, ""] + [line for w in s.warnings for line in (f"**WARNING: {w}.**", "")]


def _best_line(s: Summary) -> str:
    """The answer's first bullet: the best point against the default."""
    b, d, gain = s.best, s.default, s.gain_over_default or 0
    what, cap = "bucket_cap_mb", "default (not given)" if b.bucket_cap_mb is None else f"{b.bucket_cap_mb:g} MiB"
    if b.bucket_cap_mb_list:
        what, cap = "setting", f"bucket_cap_mb_list=[{', '.join(mb_text(x) for x in b.bucket_cap_mb_list)}]"
    if b.point == d.point:
        return (f"- **Best bucket_cap_mb: {cap}** - DDP's default is already the fastest point swept: "
                f"p50 step {fmt_s(b.iteration_p50_s)}.")
    return (f"- **Best {what}: {cap}** (`{b.point}`): p50 step {fmt_s(b.iteration_p50_s)} vs {fmt_s(d.iteration_p50_s)} "
            f"at the default (`{d.point}`): **{100 * gain:.1f}% faster**, {fmt_s(s.saved_per_step_s)} saved per step"
            + (" - under 1%, within what a simulation can promise: a tie in practice, keep the default."
               if gain < PRACTICAL_GAIN else "."))


def _trust_line(backend: str, comm_model: dict[str, Any], tr: TraceFigures | None) -> str | None:
    """What the answer rests on without a measured method error: the trace's and the communication
    model's provenance (None without them)."""
    if tr is None or not comm_model:
        return None
    if comm_model.get("model", "") == "calibrated":
        comm = "collectives from this host's calibration"
    elif backend == "nccl":
        comm = ("NCCL's algorithm choice (tuning.cc) timed from its execution, scored against published "
                "all-reduce curves (`benchmarks/bench_collective_score.py`)")
    else:
        comm = (f"{backend}'s analytical model, not calibrated on this host (`ddpsim validate` calibrates it and "
                "measures real DDP runs; a small VM's loopback can cost several times the model's figure)")
    source = ("a trace re-timed for the GPU from a CPU capture (a roofline model per ATen op)" if tr.synthetic
              else f"a trace measured on {tr.device_name or tr.device}")
    return (f"- How sure: the spread above is the model's own; the answer rests on {source} and on {comm}, "
            "with no measured error of the whole prediction attached (a validation's `--method-error` file attaches one).")


def _answer_section(s: Summary) -> list[str]:
    """``## Answer``: the best point, its uncertainty, the method's error, the tails, the recommendation."""
    b, d = s.best, s.default
    L = ["## Answer", "", *compiled_answer_lines(s.compile, b.point),
         *ddp_modes.answer_lines(s), _best_line(s)]
    if s.uncertainty:
        L.append(render_uncertainty(s.uncertainty))
    trust = render_method_error(s.method_error) if s.method_error else _trust_line(s.backend, s.comm_model, s.trace)
    L += [trust] if trust else []
    L.append(f"- Exposed communication tail (p95 over steady iterations): {fmt_s(b.exposed_comm_p95_s)} at the best point, "
             f"{fmt_s(d.exposed_comm_p95_s)} at the default (mean {fmt_s(b.exposed_comm_s)} / {fmt_s(d.exposed_comm_s)}).")
    L.append(f"- Step-time p95: {fmt_s(b.iteration_p95_s)} at the best point, {fmt_s(d.iteration_p95_s)} at the default.")
    if rec := s.recommendation:  # the explicit plan beyond one cap, and the line to paste
        if rec.better:
            L.append(f"- **Beyond one cap**: an explicit plan of {rec.num_buckets} buckets cut along the gradient-ready "
                     f"order (`recommended_plan.json`) gives p50 {fmt_s(rec.iteration_p50_s)}, "
                     f"**{100 * rec.gain_over_best_cap:.1f}% faster than the best cap** (engine-verified; "
                     f"analytical search: {rec.method}).")
        else:
            L.append(f"- Beyond one cap: the best explicit plan found ({rec.num_buckets} buckets, p50 "
                     f"{fmt_s(rec.iteration_p50_s)}) is not faster than the best cap "
                     f"({fmt_pct(rec.gain_over_best_cap)} by the engine); `recommended_plan.json` holds the best "
                     "cap's own buckets instead.")
        L += [_cap_list_line(rec.cap_list, s.gain_over_default)] if rec.cap_list else []
    return L + [""]


def _breakdown_section(s: Summary) -> list[str]:
    """``## Iteration-time breakdown``: the best and the default point's mean steady iteration."""
    b, d = s.best, s.default
    rows = [(f"best `{b.point}`", b), (f"default `{d.point}`", d)] if b.point != d.point else [(f"default = best `{b.point}`", b)]
    table = md_table([{"": name, "forward": fmt_s(m.forward_s), "backward compute": fmt_s(m.backward_compute_s),
                       "exposed comm": fmt_s(m.exposed_comm_s), "optimizer": fmt_s(m.optimizer_s),
                       "other": fmt_s(m.other_s), "mean": fmt_s(m.iteration_mean_s), "p50": fmt_s(m.iteration_p50_s),
                       "p95": fmt_s(m.iteration_p95_s), "comm (total)": fmt_s(m.comm_s),
                       "overlap": f"{100 * m.overlap_ratio:.1f}%"} for name, m in rows], right=10)
    kinds = {k: v for k, v in (b.compute_by_kind_s or {}).items()
             if k not in ("forward", "backward", "optimizer", "wait") and v > 0}
    on_compute = (", ".join(f"{k.replace('_', ' ')} {fmt_s(v)}" for k, v in kinds.items())
                  + " on the compute stream at the best point, and " if kinds else "")
    return ["## Iteration-time breakdown (mean steady iteration; p50/p95 of the job's step time)", "", *table, "",
            "'exposed comm' runs from the end of backward compute to the end of the last collective (worst rank for the "
            f"p95 tail); 'other' is the rest of the step: {on_compute}waiting for the slowest rank / the next collective.", ""]


def _sweep_section(s: Summary) -> list[str]:
    """``## Sweep``: one row per point."""
    table = md_table([{"point": f"`{p.point}`" + (" **best**" if p.point == s.best.point else ""),
                       "buckets": str(p.num_buckets), "p50 step": fmt_s(p.iteration_p50_s),
                       "p95 step": fmt_s(p.iteration_p95_s), "exposed comm (mean)": fmt_s(p.exposed_comm_s),
                       "exposed comm p95": fmt_s(p.exposed_comm_p95_s), "overlap": f"{100 * p.overlap_ratio:.1f}%",
                       "vs default": fmt_pct(p.gain_over_default)} for p in s.points], right=7)
    return ["## Sweep", "", *table, "", "Full figures: `sweep.csv`; every bucket of every iteration: `buckets.csv`; "
            "plot: `sweep.png`.", ""]


def _vs_steady(x: float | None, steady: float) -> str:
    return fmt_pct(None if x is None or not steady else x / steady - 1)


def _first_iteration_line(name: str, m: PointFigures) -> str:
    """One point's bullet on its first iteration and its rebuild."""
    fb, ss = m.first_bucket_sizes_bytes or (), m.iteration_p50_s
    line = (f"- {name} (`{m.point}`): iteration 1 uses DDP's construction-time layout, {len(fb)} bucket(s) "
            f"({', '.join(format_size(x) for x in fb[:3])}{'...' if len(fb) > 3 else ''}), launched when the whole "
            f"backward is done: {fmt_s(m.first_iteration_s)} ({_vs_steady(m.first_iteration_s, ss)} vs steady p50 "
            f"{fmt_s(ss)}; exposed comm {fmt_s(m.first_iteration_exposed_comm_s)}).")
    if not m.rebuild_iteration:
        return line + " No rebuild (find_unused_parameters without static_graph): the first layout stays."
    return line + (f" Buckets are rebuilt in gradient-ready order into {m.num_buckets} bucket(s), used from iteration "
                   f"{m.rebuild_iteration}: {fmt_s(m.rebuild_iteration_s)} ({_vs_steady(m.rebuild_iteration_s, ss)} vs steady).")


def _first_iteration_section(s: Summary) -> list[str]:
    """DDP's construction-time layout in iteration 1 and the rebuild in gradient-ready order
    (torch/csrc/distributed/c10d/reducer.cpp, Reducer::rebuild_buckets), for the default and the best."""
    pair = [("default", s.default)] + ([("best", s.best)] if s.best.point != s.default.point else [])
    return ["## First iteration and the bucket rebuild", "", *(_first_iteration_line(n, m) for n, m in pair), ""]


def _overlap_section(s: Summary) -> list[str]:
    """``## Overlap shown by the Perfetto traces``: one bullet per point written, and how to open them."""
    if not s.overlaps:
        return ["## Overlap shown by the Perfetto traces", "", "- (no timelines requested)", ""]
    L = ["## Overlap shown by the Perfetto traces", ""]
    for point, per_rank in s.overlaps.items():  # the HTA overlap per rank written, beside the engine's
        files = s.trace_files.get(point, ())
        ranks = sorted(per_rank.items())
        if len({f"{100 * v:.2f}" for _, v in ranks}) == 1:
            words = f"{100 * ranks[0][1]:.2f}%" + (f" on each of the {len(ranks)} ranks written"
                                                   if len(ranks) > 1 else "")
        else:
            words = ", ".join(f"rank {r}: {100 * v:.2f}%" for r, v in ranks)
        steady = next((p.overlap_ratio for p in s.points if p.point == point), None)
        shown = files if len(files) <= 4 else [*files[:2], "...", files[-1]]
        L.append(f"- `{point}`: communication overlapped by compute, as HTA's `get_comm_comp_overlap` "
                 f"computes it over the whole trace (iteration 1 included): {words}; steady iterations only "
                 f"(engine): {'-' if steady is None else f'{100 * steady:.1f}%'}. Files: "
                 f"{', '.join(f if f == '...' else f'`{f}`' for f in shown)}; "
                 f"timeline `timeline_{file_id(point)}.png`.")
    pair = (s.default.point, s.best.point)
    if pair[0] != pair[1] and all(p in s.overlaps for p in pair):
        L.append(f"- `{pair[0]}` against `{pair[1]}` on one time axis: `timeline_default_vs_best.png`.")
    return L + ["", "Open a trace at https://ui.perfetto.dev (one track per stream; bucket ready/launch are instant marks), "
                "or check the overlap with HTA: `TraceAnalysis(trace_dir=..., include_last_profiler_step=True).get_comm_comp_overlap()` "
                "on a folder holding one point's rank files (iterations are `ProfilerStep#<k>` spans, as torch.profiler writes them).", ""]
