"""The notebook facade: a few functions over the pieces, returning DataFrames and figures.

Examples::

    from ddpsim import api
    trace = api.load_trace("traces/mlp.cpu.json")
    api.plan(trace, bucket_cap_mb=5)                      # DataFrame of steady buckets
    res = api.simulate(trace, topology="cpu-gloo", world_size=2, bucket_cap_mb=5)
    res.iterations_df()                                   # per-iteration breakdown
    table = api.sweep(trace, topology="cpu-gloo", world_size=2, bucket_cap_mb=[None, 1, 5, 25])
    report = api.run_scenario("default")                  # writes reports/default/
    report.sweep                                          # the sweep table
    api.sweep_figure(report.sweep)                        # a matplotlib Figure

Everything here is a thin layer: the work is in :mod:`ddpsim.pipeline.scenario`, :mod:`ddpsim.pipeline.sweep`,
:mod:`ddpsim.report.summary`, :mod:`ddpsim.report.perfetto`, :mod:`ddpsim.pipeline.recommend`, :mod:`ddpsim.report.plots`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.errors import InputError
from ddpsim.io import ensure_dir, write_text_atomic
from ddpsim.plan.planner import BucketPlan, DDPOptions, plan_ddp
from ddpsim.pipeline.scenario import Scenario, load_scenario, scenario_from_dict
from ddpsim.trace.records import Trace, load_trace  # noqa: F401  (re-exported)


def plan(trace: Trace, *, bucket_cap_mb: float | None = None, **ddp_options: Any):
    """The steady-state buckets DDP builds for ``trace`` (a DataFrame, one row per bucket).

    Example: ``api.plan(api.load_trace("traces/mlp.cpu.json"), bucket_cap_mb=1)``.
    """
    import pandas as pd

    p = plan_ddp(trace, DDPOptions(bucket_cap_mb=bucket_cap_mb, **ddp_options))
    return pd.DataFrame([{"bucket": b.index, "size_bytes": b.size_bytes, "num_params": len(b.param_indices),
                          "dtype": b.dtype, "first_param": trace.params[b.param_indices[0]].name} for b in p.steady])


def adhoc_scenario(*, trace: str | Path, topology: str = "cpu-gloo", world_size: int | None = 2, nodes: int = 1,
                   bucket_cap_mb: Sequence[float | None] = (None,), iterations: int = 6, seed: int = 0,
                   comm_hook: str = "none", name: str = "adhoc", **extra: Any) -> Scenario:
    """A :class:`Scenario` from keyword arguments (what ``ddpsim sweep`` builds from its flags)."""
    d: dict[str, Any] = {"name": name, "trace": str(trace), "cluster": {"topology": topology, "nodes": nodes},
                         "world_size": world_size, "comm_hook": comm_hook,
                         "simulation": {"iterations": iterations, "seed": seed},
                         "sweep": {"bucket_cap_mb": list(bucket_cap_mb)}, "timelines": []}
    d.update(extra)
    return scenario_from_dict(d, source="sweep")


def simulate(trace: Trace | str | Path, *, topology: str = "cpu-gloo", world_size: int | None = 2, nodes: int = 1,
             bucket_cap_mb: float | None = None, iterations: int = 6, seed: int = 0, comm_hook: str = "none",
             plan: BucketPlan | None = None, simulate_fn: Callable | None = None):
    """Simulate one configuration; returns the engine's :class:`~ddpsim.engine.result.SimResult`.

    Example: ``api.simulate("traces/mlp.cpu.json", topology="cpu-gloo", world_size=2).summary()``.
    """
    tr = trace if isinstance(trace, Trace) else load_trace(trace)
    sc = _scenario_for_trace(tr, topology, world_size, nodes, bucket_cap_mb, iterations, seed, comm_hook)
    point = next(p for p in sc.points() if p.bucket_cap_mb == bucket_cap_mb)
    inputs = sc.build_point(point, trace=tr)
    if simulate_fn is None:
        from ddpsim.engine.simulate import simulate as simulate_fn
    return simulate_fn(inputs.trace, plan or inputs.plan, inputs.comm, inputs.config)


def _scenario_for_trace(tr: Trace, topology, world_size, nodes, cap, iterations, seed, hook) -> Scenario:
    from ddpsim.pipeline.scenario import ClusterSpec, SimulationSpec, SweepSpec

    caps = (None,) if cap is None else (None, cap)
    return Scenario(name="adhoc", trace_path=Path("<in-memory>"), cluster=ClusterSpec(topology=topology, nodes=nodes),
                    world_size=world_size, comm_hook=hook, simulation=SimulationSpec(iterations=iterations, seed=seed),
                    sweep=SweepSpec(bucket_cap_mb=caps), timelines=())


def sweep(trace: Trace | str | Path, *, topology: str = "cpu-gloo", world_size: int | None = 2, nodes: int = 1,
          bucket_cap_mb: Sequence[float | None] = (None, 1, 5, 25, 100), iterations: int = 6, seed: int = 0,
          comm_hook: str = "none", jobs: int | None = None, progress: bool = False, simulate_fn: Callable | None = None):
    """Sweep ``bucket_cap_mb``; returns the sweep table (a DataFrame, one row per point).

    Example: ``api.sweep("traces/mlp.cpu.json", bucket_cap_mb=[None, 1, 5])[["point", "iteration_p50_s"]]``.
    """
    from ddpsim.pipeline.sweep import run_sweep, sweep_table

    tr = trace if isinstance(trace, Trace) else load_trace(trace)
    sc = _scenario_for_trace(tr, topology, world_size, nodes, None, iterations, seed, comm_hook)
    sc = replace(sc, sweep=replace(sc.sweep, bucket_cap_mb=tuple(dict.fromkeys([None, *bucket_cap_mb]))))
    return sweep_table(run_sweep(sc, trace=tr, jobs=jobs, progress=progress, simulate=simulate_fn))


@dataclass(frozen=True, kw_only=True)
class Report:
    """What :func:`run_scenario` produced: the data, and the files written (paths)."""

    scenario: Scenario
    out_dir: Path
    summary: dict[str, Any]
    sweep: Any                     # pandas DataFrame (sweep.csv)
    buckets: Any                   # pandas DataFrame (buckets.csv)
    records: tuple[Any, ...] = ()
    files: tuple[Path, ...] = ()
    summary_md: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def run_scenario(scenario: Scenario | str | Path | None = None, *, out_dir: str | Path = "reports",
                 jobs: int | None = None, plots: bool = True, progress: bool = True,
                 simulate_fn: Callable | None = None, build_fn: Callable | None = None,
                 log: Callable[[str], None] | None = None, method_error: str | Path | None = None) -> Report:
    """Run a scenario end to end and write ``<out_dir>/<name>/`` (each file as it is finished).

    Writes ``points/*.json`` (resumable), ``sweep.csv``, ``buckets.csv``, per timeline point
    ``trace_<point>_rank<r>.json.gz`` and ``timeline_<point>.png``, ``recommended_plan.json``,
    ``sweep.png``, ``bucket_sizes.png``, ``summary.json`` and ``summary.md``.
    ``method_error``: a residual file (:mod:`ddpsim.pipeline.method_error`) whose measured error the
    answer states (:func:`ddpsim.pipeline.method_error.answer`); checked before anything runs.

    Raises:
        InputError: bad scenario, missing trace, unwritable ``out_dir``; a ``method_error``
        file that is unreadable, or measured on another backend or without the scenario
        having a calibration. Files written by an
        earlier run are only ever replaced atomically by complete new ones.
    """
    from ddpsim.report import perfetto
    from ddpsim.pipeline import recommend
    from ddpsim.report import summary as report
    from ddpsim.pipeline.sweep import best_record, run_sweep, sweep_table

    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    say = log or (lambda msg: None)
    root = ensure_dir(out_dir, "--out-dir")
    rdir = ensure_dir(root / sc.name, "--out-dir")
    files: list[Path] = []
    trace = sc.load_trace()
    me, me_note = _method_error_for(sc, trace, method_error)
    if sc.model is not None:
        from ddpsim.trace.records import save_trace

        files.append(save_trace(trace, rdir / "trace.json"))

    warning = sc.calibration_warning()
    records = run_sweep(sc, out_dir=rdir, jobs=jobs, trace=trace, progress=progress, simulate=simulate_fn, build=build_fn)
    table = sweep_table(records)
    files.append(report.write_csv(table, rdir / "sweep.csv"))
    btable = report.buckets_table(records)
    files.append(report.write_csv(btable, rdir / "buckets.csv"))
    say(f"wrote {rdir / 'sweep.csv'} and {rdir / 'buckets.csv'}")

    best = best_record(records)
    overlaps: dict[str, dict[int, float]] = {}
    trace_files: dict[str, list[str]] = {}
    for point in sc.timeline_points(best.point):
        rec = next(r for r in records if r.point == point)
        paths = perfetto.write_traces(rec.result, rdir, rec.point_id, backend=rec.backend)
        files += paths
        trace_files[rec.point_id] = [p.name for p in paths]
        overlaps[rec.point_id] = {r: perfetto.comm_comp_overlap(perfetto.chrome_trace(rec.result, r, backend=rec.backend))
                                  for r in perfetto.representative_ranks(rec.result)}
        if plots:
            from ddpsim.report import plots as P

            fig = P.timeline_figure(rec.result, title=f"{sc.name}: {rec.point_id} (world size {rec.world_size}, {rec.backend})")
            files.append(P.save_figure(fig, rdir / f"timeline_{perfetto.file_id(rec.point_id)}.png"))
    say(f"wrote timelines for {', '.join(trace_files) or 'no point'}")

    # ---- recommender: explicit plan along the gradient-ready order, verified by the engine
    rec_info = None
    build = (lambda s, p, t: build_fn(s, p, t)) if build_fn is not None else (lambda s, p, t: s.build_point(p, trace=t))
    inputs = build(sc, best.point, trace)
    opts = sc.ddp_options(best.point)
    sim = simulate_fn
    if sim is None:
        from ddpsim.engine.simulate import simulate as sim
    from ddpsim.pipeline.sweep import point_metrics

    # NOTE: an explicit plan applies from iteration 1 (no rebuild); measure it over the same
    # steady iterations as the best cap so that both medians see the same jitter draws.
    warm = inputs.config.num_warmup_iterations
    if warm is None:
        warm = inputs.plan.rebuild_iteration or 1
    rec_config = replace(inputs.config, num_warmup_iterations=warm)
    tried = []
    # the recommender cuts every parameter's gradient-ready order; delayed parameters
    # (delay_all_reduce_named_params) are not the reducer's, so they leave its buckets
    every = replace(opts, delay_all_reduce_named_params=None, param_to_hook_all_reduce=None)
    for label, cand in recommend.candidate_plans(trace, inputs.comm, comm_hook=best.point.comm_hook, options=every):
        if every != opts:
            from ddpsim.plan.planner import without_delayed

            plan = without_delayed(cand.plan, trace, opts)
            cand = replace(cand, plan=plan, buckets_bytes=tuple(b.size_bytes for b in plan.steady))
        res = sim(inputs.trace, cand.plan, inputs.comm, rec_config)
        tried.append((point_metrics(res, cand.plan)["iteration_p50_s"], len(tried), label, cand, res))
    rm_p50, _, label, found, rec_result = min(tried, key=lambda x: (x[0], x[1]))
    rm = point_metrics(rec_result, found.plan)
    gain = (best.metrics["iteration_p50_s"] - rm["iteration_p50_s"]) / best.metrics["iteration_p50_s"]
    better = gain > 1e-9
    if better:
        chosen = found.plan
    else:
        from ddpsim.plan.planner import explicit_plan

        chosen = explicit_plan(trace, [list(b.param_indices) for b in inputs.plan.steady], options=opts,
                               source=f"ddpsim-recommend (DDP buckets of {best.point_id})")
    cap_list = _recommend_cap_list(sc, records, trace, build, sim, opts, [chosen] + [t[3].plan for t in tried],
                                   chosen, best)
    plan_doc = chosen.to_dict()
    plan_doc["bucket_cap_mb_list"] = {k: cap_list[k] for k in ("bucket_cap_mb_list", "paste", "reproduces_recommended_plan",
                                                                "reason", "iteration_p50_s", "gain_over_default",
                                                                "gain_over_best_cap", "best_cap_point")}
    files.append(write_text_atomic(rdir / "recommended_plan.json", json.dumps(plan_doc, indent=1) + "\n"))
    rec_info = {"better": better, "num_buckets": len(found.plan.steady), "iteration_p50_s": rm["iteration_p50_s"],
                "iteration_p95_s": rm["iteration_p95_s"], "exposed_comm_s": rm["exposed_comm_s"],
                "gain_over_best_cap": gain, "best_cap_point": best.point_id,
                "bucket_sizes_bytes": [b.size_bytes for b in found.plan.steady],
                "method": f"dynamic programming over bucket boundaries in gradient-ready order; best of "
                          f"{len(tried)} cost-model variant(s) by the engine: {label}",
                "candidates": [{"variant": t[2], "num_buckets": len(t[3].plan.steady), "iteration_p50_s": t[0]} for t in tried],
                "written": "explicit plan" if better else f"DDP buckets of {best.point_id}", "cap_list": cap_list}
    say(f"wrote {rdir / 'recommended_plan.json'}")

    if plots:
        from ddpsim.report import plots as P

        files.append(P.save_figure(P.sweep_figure(table, title=f"{sc.name}: step time vs bucket_cap_mb"), rdir / "sweep.png"))
        rows = [(f"default ({records[0].point_id})" if r.point.is_default_cap else r.point_id, r.metrics.get("bucket_sizes_bytes") or [])
                for r in records if r.point in sc.timeline_points(best.point)]
        rows.append(("recommended explicit plan", list(rec_info["bucket_sizes_bytes"])))
        files.append(P.save_figure(P.bucket_sizes_figure(rows, title=f"{sc.name}: bucket sizes (steady state)"), rdir / "bucket_sizes.png"))

    me_answer = None
    if me is not None:
        from ddpsim.pipeline.method_error import answer

        # the residuals are of mean steps predicted as a validation predicts them (the trace's
        # mean phases): the band goes around the best point's mean step predicted so
        best_mean = sim(inputs.trace, inputs.plan, inputs.comm, inputs.config.for_validation()).summary()["iteration_mean_s"]
        me_answer = answer(me, points=[(r.point_id, r.metrics["iteration_p50_s"]) for r in records], best=best.point_id,
                           level=0.8, source=str(method_error), model=trace.model, note=me_note, best_mean_s=best_mean)
    summ = report.summarize(sc, records, trace=trace, overlaps=overlaps, trace_files=trace_files, recommendation=rec_info,
                            warnings=[warning] if warning else None, cost_terms=cost_terms(sc, best.point, inputs),
                            method_error=me_answer)
    files.append(write_text_atomic(rdir / "summary.json", json.dumps(summ, indent=1, sort_keys=True, default=str) + "\n"))
    md = report.render_summary(summ)
    files.append(write_text_atomic(rdir / "summary.md", md + "\n"))
    # The run succeeded: traces and timelines of points an earlier run chose (another best)
    # would now mislead; remove those (only files of these two patterns, never anything else).
    written = {p.name for p in files}
    for pattern in ("trace_*_rank*.json", "trace_*_rank*.json.gz", "timeline_*.png"):
        for stale in rdir.glob(pattern):
            if stale.name not in written:
                stale.unlink()
    return Report(scenario=sc, out_dir=rdir, summary=summ, sweep=table, buckets=btable, records=tuple(records),
                  files=tuple(files), summary_md=md, extra={"recommended_result": rec_result})


def _recommend_cap_list(sc: Scenario, records: Sequence[Any], trace: Trace, build: Callable, sim: Callable,
                        opts: DDPOptions, plans: Sequence[BucketPlan], recommended: BucketPlan, best: Any) -> dict[str, Any]:
    """The ``bucket_cap_mb_list`` to paste: one per candidate plan (exact where a list can
    express it), each simulated by the engine as a DDP configuration (its construction layout
    in iteration 1, the rebuild, the same iterations and seed as the sweep's points); the
    list that reproduces the recommended plan (``plans[0]``) is taken when there is one, else
    the fastest; it is compared with the default and the best uniform cap."""
    from ddpsim.pipeline import recommend
    from ddpsim.pipeline.sweep import best_record, default_record, point_metrics

    uniform = [r for r in records if not r.point.bucket_cap_mb_list]
    best_cap = best_record(uniform)
    default = default_record(records, best_cap.point) or records[0]
    tried = []
    for k, cand in enumerate(recommend.cap_list_candidates(trace, plans, opts)):
        point = replace(best.point, bucket_cap_mb=None, bucket_cap_mb_list=cand.caps)
        inputs = build(sc, point, trace)
        p50 = point_metrics(sim(inputs.trace, inputs.plan, inputs.comm, inputs.config), inputs.plan)["iteration_p50_s"]
        same = [b.param_indices for b in inputs.plan.steady] == [b.param_indices for b in recommended.steady]
        tried.append((p50, k, cand, same))
    first = tried[0][2]
    p50, _, cand, same = tried[0] if first.exact else min(tried, key=lambda x: (x[0], x[1]))

    def gain(base: Any) -> float:
        return (base.metrics["iteration_p50_s"] - p50) / base.metrics["iteration_p50_s"]

    return {"bucket_cap_mb_list": list(cand.caps), "paste": cand.paste, "reproduces_recommended_plan": same,
            "reason": first.reason,
            "iteration_p50_s": p50, "gain_over_default": gain(default), "gain_over_best_cap": gain(best_cap),
            "best_cap_point": best_cap.point_id, "best_cap_mb": best_cap.point.bucket_cap_mb,
            "default_point": default.point_id,
            "candidates": [{"bucket_cap_mb_list": list(c.caps), "exact": c.exact, "iteration_p50_s": t}
                           for t, _, c, _ in tried]}


def _method_error_for(sc: Scenario, trace: Any, path: str | Path | None) -> tuple[Any, str | None]:
    """The residual file at ``path`` for scenario ``sc`` and a note on what differs, or
    (None, None) without one. Residuals hold for the backend and calibration they were measured
    with: another backend, or a scenario without a calibration, is refused."""
    if path is None:
        return None, None
    from ddpsim.pipeline.method_error import file_sha256, load_method_error

    me = load_method_error(path)
    backend = sc.build_point(sc.points()[0], trace=trace).backend
    if me.backend and backend != me.backend:
        raise InputError(f"--method-error: {str(path)!r} holds residuals measured on {me.backend}; scenario {sc.name!r} "
                         f"runs {backend}; expected residuals of the same backend (a zoo run where the scenario runs)")
    if sc.calibration_path is None:
        raise InputError(f"--method-error: scenario {sc.name!r} has no calibration; expected one (the residuals in "
                         f"{str(path)!r} hold for calibrated predictions: 'calibration: FILE' in the scenario)")
    return me, me.mismatch(calibration_sha256=file_sha256(sc.calibration_path))


def cost_terms(sc: Scenario, point: Any, inputs: Any) -> list[str]:
    """One line per GPU cost term in force at ``point`` (the report's setup): the contention
    prior's derivation when it is what the simulation used, the host costs."""
    out: list[str] = []
    if sc.cost_model.contention and sc.simulation.interference is None and sc.load_calibration() is None:
        prior = sc.contention_prior(sc.graph(point.nodes), inputs.comm)
        if prior is not None and inputs.config.interference == prior.interference:
            out.append(prior.explain())
    cfg = inputs.config
    if cfg.copy_kernel_floor_s > 0:
        out.append(f"gradient copies as kernels: {cfg.copy_bandwidth_bytes_per_s / 1e9:.0f} GB/s (HBM x "
                   f"{sc.cost_model.memory_efficiency:g}), at least {cfg.copy_kernel_floor_s * 1e6:g} us per parameter's "
                   "copy-in and copy-out (retime's roofline assumptions)")
    if cfg.host_costs is not None:
        out.append(cfg.host_costs.explain())
    if cfg.comm_hook == "powersgd" and getattr(inputs.comm, "backend", None) == "nccl":
        out.append("PowerSGD on NCCL: the hook's .then() chain runs at enqueue and its torch.cuda.synchronize stops "
                   "the backward until each bucket's three all-reduces are done (powerSGD_hook.py)")
    if cfg.sync_batchnorm:
        out.append("SyncBatchNorm: each BatchNorm layer's forward all-gather and backward all-reduce run on the "
                   "process group's stream with the buckets, and the layer waits for them (_functions.py)")
    return out


def sweep_figure(table: Any, title: str = ""):
    """The sweep plot of a sweep table (a matplotlib Figure)."""
    from ddpsim.report import plots

    return plots.sweep_figure(table, title)


def timeline_figure(result: Any, title: str = ""):
    """The overlap timeline of a SimResult (a matplotlib Figure)."""
    from ddpsim.report import plots

    return plots.timeline_figure(result, title)
