"""A scenario run end to end: its sweep, timelines, recommended plan and summary, written to
``<out_dir>/<name>/`` file by file (``ddpsim run``; :func:`ddpsim.api.run_scenario`).

The sweep (:func:`ddpsim.pipeline.sweep.run_sweep`) gives ``points/*.json``, ``sweep.csv`` and
``buckets.csv``; the timeline points get Chrome/Kineto traces (:mod:`ddpsim.report.perfetto`)
and timeline plots; :func:`ddpsim.pipeline.run.recommend` gives ``recommended_plan.json``;
:func:`ddpsim.report.summary.summarize` gives ``summary.json`` and ``summary.md``. Every file is
replaced atomically by a complete new one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ddpsim.io import ensure_dir, file_id, json_text, write_text_atomic
from ddpsim.pipeline import eager_comparison as steps_compiled
from ddpsim.pipeline import run as steps
from ddpsim.pipeline.scenario import Scenario, load_scenario
from ddpsim.pipeline.sweep import best_record, run_sweep, sweep_table
from ddpsim.pipeline.term_effects import term_effects
from ddpsim.report import perfetto
from ddpsim.report import summary as report

log = logging.getLogger(__name__)


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
                 method_error: str | Path | None = None) -> Report:
    """Run a scenario and write its report folder (:func:`ddpsim.api.run_scenario` documents it)."""
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    rdir = ensure_dir(ensure_dir(out_dir, "--out-dir") / sc.name, "--out-dir")
    files: list[Path] = []
    trace = sc.load_trace()
    me, me_note = steps.method_error_for(sc, trace, method_error)
    if sc.model is not None:
        from ddpsim.trace.records import save_trace

        files.append(save_trace(trace, rdir / "trace.json"))
    warning = sc.calibration_warning()
    records = run_sweep(sc, out_dir=rdir, jobs=jobs, trace=trace, progress=progress, simulate=simulate_fn, build=build_fn)
    table, btable = sweep_table(records), report.buckets_table(records)
    files.append(report.write_csv(table, rdir / "sweep.csv"))
    files.append(report.write_csv(btable, rdir / "buckets.csv"))
    log.info("wrote %s and %s", rdir / "sweep.csv", rdir / "buckets.csv")
    best = best_record(records)
    build = build_fn if build_fn is not None else (lambda s, p, t: s.build_point(p, trace=t))
    sim = simulate_fn
    if sim is None:
        from ddpsim.engine.simulate import simulate as sim
    records, best = _with_timeline_spans(sc, records, best, trace, build, sim)
    overlaps, trace_files = _write_timelines(sc, records, best, rdir, plots, files)
    log.info("wrote timelines for %s", ", ".join(trace_files) or "no point")

    rec = steps.recommend(sc, records, trace, build, sim)
    files.append(write_text_atomic(rdir / "recommended_plan.json", json_text(rec.plan_doc, indent=1)))
    log.info("wrote %s", rdir / "recommended_plan.json")
    if plots:
        _write_plots(sc, records, best, table, rec.info, rdir, files)
    me_answer = None if me is None else steps.method_error_answer(me, me_note, method_error, records, best, rec.inputs,
                                                                  trace, sim)
    compiled = None if sc.compile is None else steps_compiled.eager_comparison(sc, records, trace, build, sim)
    terms = steps.cost_terms(sc, best.point, rec.inputs)
    effects = term_effects(sc, records, trace, build=build, simulate=sim) if terms else None
    summ = report.summarize(sc, records, trace=trace, overlaps=overlaps, trace_files=trace_files, recommendation=rec.info,
                            warnings=[warning] if warning else None,
                            cost_terms=terms, method_error=me_answer,
                            compiled=compiled, host_costs=rec.inputs.config.host_costs, term_effects=effects)
    files.append(write_text_atomic(rdir / "summary.json", json_text(summ, indent=1, sort_keys=True, default=str)))
    md = report.render_summary(summ)
    files.append(write_text_atomic(rdir / "summary.md", md + "\n"))
    _remove_stale(rdir, files)
    return Report(scenario=sc, out_dir=rdir, summary=summ, sweep=table, buckets=btable, records=tuple(records),
                  files=tuple(files), summary_md=md, extra={"recommended_result": rec.result})


def _with_timeline_spans(sc: Scenario, records: list[Any], best: Any, trace: Any, build: Callable,
                         sim: Callable) -> tuple[list[Any], Any]:
    """The records, each timeline point's with its spans: a point whose file holds none (only the
    timeline points need them) is simulated again, from the same inputs, with them."""
    from dataclasses import replace

    points = sc.timeline_points(best.point)
    out = []
    for r in records:
        if r.point in points and not r.result.spans:
            inputs = build(sc, r.point, trace)
            r = replace(r, result=sim(inputs.trace, inputs.plan, inputs.comm, inputs.config))
        out.append(r)
    return out, next(r for r in out if r.point == best.point)


def _write_timelines(sc: Scenario, records: list[Any], best: Any, rdir: Path, plots: bool,
                     files: list[Path]) -> tuple[dict[str, dict[int, float]], dict[str, list[str]]]:
    """The traces (and timeline plots) of the timeline points; their overlaps and file names."""
    overlaps: dict[str, dict[int, float]] = {}
    trace_files: dict[str, list[str]] = {}
    for point in sc.timeline_points(best.point):
        rec = next(r for r in records if r.point == point)
        written = perfetto.written_traces(rec.result, rdir, rec.point_id, backend=rec.backend)
        files += [path for _, path, _ in written]
        trace_files[rec.point_id] = [path.name for _, path, _ in written]
        overlaps[rec.point_id] = {r: perfetto.comm_comp_overlap(d) for r, _, d in written}
        if plots:
            from ddpsim.report import plots as P

            fig = P.timeline_figure(rec.result, title=f"{sc.name}: {rec.point_id} (world size {rec.world_size}, {rec.backend})",
                                    warmup=True)
            files.append(P.save_figure(fig, rdir / f"timeline_{file_id(rec.point_id)}.png"))
    if plots:
        _write_comparison(sc, records, best, rdir, files)
    return overlaps, trace_files


def _write_comparison(sc: Scenario, records: list[Any], best: Any, rdir: Path, files: list[Path]) -> None:
    """``timeline_default_vs_best.png``: the default's and the best point's timelines on one time
    axis, where both are timeline points and differ."""
    from ddpsim.report import plots as P

    base = sc.base_point()
    points = sc.timeline_points(best.point)
    if base == best.point or base not in points or best.point not in points:
        return
    pair = [next(r for r in records if r.point == p) for p in (base, best.point)]
    fig = P.timeline_comparison_figure([(f"default ({pair[0].point_id})", pair[0].result), (f"best ({best.point_id})", best.result)],
                                       title=f"{sc.name}: the default against the best point (world size {best.world_size}, {best.backend})")
    files.append(P.save_figure(fig, rdir / "timeline_default_vs_best.png"))


def _write_plots(sc: Scenario, records: list[Any], best: Any, table: Any, rec_info: dict[str, Any], rdir: Path,
                 files: list[Path]) -> None:
    """``sweep.png`` and ``bucket_sizes.png``."""
    from ddpsim.report import plots as P

    files.append(P.save_figure(P.sweep_figure(table, title=f"{sc.name}: step time vs bucket_cap_mb"), rdir / "sweep.png"))
    rows = [(f"default ({records[0].point_id})" if r.point.is_default_cap else r.point_id, r.metrics.get("bucket_sizes_bytes") or [],
             _cap_mb(sc, r.point)) for r in records if r.point in sc.timeline_points(best.point)]
    rows.append(("recommended explicit plan", list(rec_info["bucket_sizes_bytes"]), None))
    files.append(P.save_figure(P.bucket_sizes_figure(rows, title=f"{sc.name}: bucket sizes (steady state)"), rdir / "bucket_sizes.png"))


def _cap_mb(sc: Scenario, point: Any) -> list[float]:
    """The per-bucket limits (MiB, the last reused) DDP's rebuild applies at ``point``
    (:func:`ddpsim.plan.planner.rebuilt_assignment`): its ``bucket_cap_mb_list``, else the first
    bucket's limit and the cap; the cap alone when small buckets go last."""
    from ddpsim.units import MIB

    opts = sc.ddp_options(point)
    if opts.list_bytes_caps:
        return [b / MIB for b in opts.list_bytes_caps]
    if opts.small_bucket_last or opts.first_bucket_bytes_cap == opts.bucket_bytes_cap:
        return [opts.bucket_bytes_cap / MIB]
    return [opts.first_bucket_bytes_cap / MIB, opts.bucket_bytes_cap / MIB]


def _remove_stale(rdir: Path, files: list[Path]) -> None:
    """After a successful run: remove the traces and timelines of points this run did not write
    (another best point's would mislead); only files of these patterns, never anything else."""
    written = {p.name for p in files}
    for pattern in ("trace_*_rank*.json", "trace_*_rank*.json.gz", "timeline_*.png"):
        for stale in rdir.glob(pattern):
            if stale.name not in written:
                stale.unlink()
