"""A scenario run's report folder, rendered from a :class:`~ddpsim.pipeline.scenario_run.ScenarioRun`:
``sweep.csv``, ``buckets.csv``, the timeline points' Chrome/Kineto traces
(:mod:`ddpsim.report.perfetto`) and timeline plots, ``recommended_plan.json``, ``sweep.png``,
``bucket_sizes.png``, and :func:`ddpsim.report.summary.summarize`'s ``summary.json`` and
``summary.md``, written to ``<out_dir>/<name>/`` (the run wrote ``points/`` and, for a bundled
model, ``trace.json``). Every file is replaced atomically by a complete new one. A rerun keeps
the traces and PNGs whose points are all the same and whose files are unchanged
(:mod:`ddpsim.report.kept_files`) rather than drawing them again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ddpsim.io import file_id, json_text, write_text_atomic
from ddpsim.pipeline.scenario import Scenario
from ddpsim.pipeline.scenario_run import ScenarioRun
from ddpsim.pipeline.sweep import sweep_table
from ddpsim.report import perfetto
from ddpsim.report.kept_files import KeptFiles, report_key
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
    kept = KeptFiles(rdir, report_key(run.kept_key, sc.name))
    table, btable = sweep_table(records), report.buckets_table(records)
    files.append(report.write_csv(table, rdir / "sweep.csv"))
    files.append(report.write_csv(btable, rdir / "buckets.csv"))
    log.info("wrote %s and %s", rdir / "sweep.csv", rdir / "buckets.csv")
    overlaps, trace_files = _write_timelines(sc, records, best, rdir, plots, files, kept)
    log.info("wrote timelines for %s", ", ".join(trace_files) or "no point")
    files.append(write_text_atomic(rdir / "recommended_plan.json", json_text(rec.plan_doc, indent=1)))
    log.info("wrote %s", rdir / "recommended_plan.json")
    if plots:
        _write_plots(sc, records, best, table, rec.info, rdir, files, kept)
    summ = report.summarize(sc, records, trace=run.trace, overlaps=overlaps, trace_files=trace_files,
                            recommendation=rec.info, warnings=[run.warning] if run.warning else None,
                            cost_terms=run.cost_terms, method_error=run.method_error, compiled=run.compiled,
                            host_costs=rec.inputs.config.host_costs, term_effects=run.term_effects)
    files.append(write_text_atomic(rdir / "summary.json", json_text(summ, indent=1, sort_keys=True, default=str)))
    md = report.render_summary(summ)
    files.append(write_text_atomic(rdir / "summary.md", md + "\n"))
    _remove_stale(rdir, files)
    kept.save()
    return Report(scenario=sc, out_dir=rdir, summary=summ, sweep=table, buckets=btable, records=tuple(records),
                  files=tuple(files), summary_md=md, extra={"recommended_result": rec.result})


def _write_timelines(sc: Scenario, records: list[Any], best: Any, rdir: Path, plots: bool, files: list[Path],
                     kept: KeptFiles) -> tuple[dict[str, dict[int, float]], dict[str, list[str]]]:
    """The traces (and timeline plots) of the timeline points; their overlaps and file names."""
    overlaps: dict[str, dict[int, float]] = {}
    trace_files: dict[str, list[str]] = {}
    for point in sc.timeline_points(best.point):
        rec = next(r for r in records if r.point == point)
        written = _traces(rec, rdir, kept)
        files += [rdir / name for _, name, _ in written]
        trace_files[rec.point_id] = [name for _, name, _ in written]
        overlaps[rec.point_id] = {r: overlap for r, _, overlap in written}
        if plots:
            title = f"{sc.name}: {rec.point_id} (world size {rec.world_size}, {rec.backend})"
            _png(kept, rdir, f"timeline_{file_id(rec.point_id)}.png", title, files,
                 lambda P: P.timeline_figure(rec.result, title=title, warmup=True))
    if plots:
        _write_comparison(sc, records, best, rdir, files, kept)
    return overlaps, trace_files


def _traces(rec: Any, rdir: Path, kept: KeptFiles) -> list[tuple[int, str, float]]:
    """``(rank, file name, overlap)`` of each trace file of the point of ``rec``: kept, or written
    (:func:`ddpsim.report.perfetto.written_traces`) and its overlap computed."""
    name, what = f"traces {rec.point_id}", [rec.point_id, rec.key, rec.backend]
    got = kept.get(name, what)
    if got is not None:
        return [(int(r), f, float(o)) for r, f, o in got["data"]]
    written = perfetto.written_traces(rec.result, rdir, rec.point_id, backend=rec.backend)
    out = [(r, path.name, perfetto.comm_comp_overlap(d)) for r, path, d in written]
    kept.put(name, what, [path for _, path, _ in written], data=out)
    return out


def _png(kept: KeptFiles, rdir: Path, name: str, what: Any, files: list[Path], draw: Callable[[Any], Any]) -> None:
    """``rdir/name``: kept, or ``draw(plots module)``'s figure saved (matplotlib imported only then)."""
    path = rdir / name
    if kept.get(name, what) is None:
        from ddpsim.report import plots as P

        P.save_figure(draw(P), path)
        kept.put(name, what, [path])
    files.append(path)


def _write_comparison(sc: Scenario, records: list[Any], best: Any, rdir: Path, files: list[Path],
                      kept: KeptFiles) -> None:
    """``timeline_default_vs_best.png``: the default's and the best point's timelines on one time
    axis, where both are timeline points and differ."""
    base = sc.base_point()
    points = sc.timeline_points(best.point)
    if base == best.point or base not in points or best.point not in points:
        return
    pair = [next(r for r in records if r.point == p) for p in (base, best.point)]
    labels = [f"default ({pair[0].point_id})", f"best ({best.point_id})"]
    title = f"{sc.name}: the default against the best point (world size {best.world_size}, {best.backend})"
    _png(kept, rdir, "timeline_default_vs_best.png", [labels, title], files,
         lambda P: P.timeline_comparison_figure([(labels[0], pair[0].result), (labels[1], best.result)], title=title))


def _write_plots(sc: Scenario, records: list[Any], best: Any, table: Any, rec_info: dict[str, Any], rdir: Path,
                 files: list[Path], kept: KeptFiles) -> None:
    """``sweep.png`` and ``bucket_sizes.png``."""
    title = f"{sc.name}: step time vs bucket_cap_mb"
    _png(kept, rdir, "sweep.png", title, files, lambda P: P.sweep_figure(table, title=title))
    rows = [(f"default ({records[0].point_id})" if r.point.is_default_cap else r.point_id, r.metrics.get("bucket_sizes_bytes") or [],
             _cap_mb(sc, r.point)) for r in records if r.point in sc.timeline_points(best.point)]
    rows.append(("recommended explicit plan", list(rec_info["bucket_sizes_bytes"]), None))
    title = f"{sc.name}: bucket sizes (steady state)"
    _png(kept, rdir, "bucket_sizes.png", [rows, title], files, lambda P: P.bucket_sizes_figure(rows, title=title))


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
