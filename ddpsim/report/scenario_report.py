"""A scenario run's report folder, rendered from a :class:`~ddpsim.pipeline.scenario_run.ScenarioRun`:
``sweep.csv``, ``buckets.csv``, the timeline points' Chrome/Kineto traces
(:mod:`ddpsim.report.perfetto`) and timeline plots, ``recommended_plan.json``, ``sweep.png``,
``bucket_sizes.png``, and :func:`ddpsim.report.summary.summarize`'s ``summary.json`` and
``summary.md``, written to ``<out_dir>/<name>/`` (the run wrote ``points/`` and, for a bundled
model, ``trace.json``). Every file is replaced atomically by a complete new one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpsim.io import file_id, json_text, write_text_atomic
from ddpsim.pipeline.scenario import Scenario
from ddpsim.pipeline.scenario_run import ScenarioRun
from ddpsim.pipeline.sweep import sweep_table
from ddpsim.report import perfetto
from ddpsim.report import summary as report

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Report:
    """What :func:`write_report` produced: the data, and the files written (paths)."""

    scenario: Scenario
    out_dir: Path
    summary: dict[str, Any]
    sweep: Any                     # pandas DataFrame (sweep.csv)
    buckets: Any                   # pandas DataFrame (buckets.csv)
    records: tuple[Any, ...] = ()
    files: tuple[Path, ...] = ()
    summary_md: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def write_report(run: ScenarioRun, *, plots: bool = True) -> Report:
    """Write the report folder of ``run`` (module docstring); ``plots``: the PNGs too."""
    sc, rdir, records, best, rec = run.scenario, run.out_dir, list(run.records), run.best, run.recommendation
    files = list(run.files)
    table, btable = sweep_table(records), report.buckets_table(records)
    files.append(report.write_csv(table, rdir / "sweep.csv"))
    files.append(report.write_csv(btable, rdir / "buckets.csv"))
    log.info("wrote %s and %s", rdir / "sweep.csv", rdir / "buckets.csv")
    overlaps, trace_files = _write_timelines(sc, records, best, rdir, plots, files)
    log.info("wrote timelines for %s", ", ".join(trace_files) or "no point")
    files.append(write_text_atomic(rdir / "recommended_plan.json", json_text(rec.plan_doc, indent=1)))
    log.info("wrote %s", rdir / "recommended_plan.json")
    if plots:
        _write_plots(sc, records, best, table, rec.info, rdir, files)
    summ = report.summarize(sc, records, trace=run.trace, overlaps=overlaps, trace_files=trace_files,
                            recommendation=rec.info, warnings=[run.warning] if run.warning else None,
                            cost_terms=run.cost_terms, method_error=run.method_error, compiled=run.compiled,
                            host_costs=rec.inputs.config.host_costs, term_effects=run.term_effects)
    files.append(write_text_atomic(rdir / "summary.json", json_text(summ, indent=1, sort_keys=True, default=str)))
    md = report.render_summary(summ)
    files.append(write_text_atomic(rdir / "summary.md", md + "\n"))
    _remove_stale(rdir, files)
    return Report(scenario=sc, out_dir=rdir, summary=summ, sweep=table, buckets=btable, records=tuple(records),
                  files=tuple(files), summary_md=md, extra={"recommended_result": rec.result})


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
