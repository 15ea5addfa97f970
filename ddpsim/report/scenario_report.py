"""A scenario run's report folder ``<out_dir>/<name>/``, from a
:class:`~ddpsim.pipeline.scenario_run.ScenarioRun`: ``sweep.csv``, ``buckets.csv``, the timeline
points' traces (:mod:`ddpsim.report.perfetto`) and timelines, ``recommended_plan.json``,
``sweep.png``, ``bucket_sizes.png``, ``summary.json`` and ``summary.md`` (the run wrote
``points/``), each replaced atomically; a rerun keeps the traces and PNGs whose points and files
are unchanged (:mod:`ddpsim.report.kept_files`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

from ddpsim.io import file_id, json_text, write_text_atomic
from ddpsim.pipeline.scenario import Scenario
from ddpsim.pipeline.scenario_run import ScenarioRun
from ddpsim.pipeline.sweep import sweep_rows, sweep_table
from ddpsim.report import perfetto
from ddpsim.report.kept_files import KeptFiles
from ddpsim.report.tables import to_csv_text
from ddpsim.report.workers import SideBySide
from ddpsim.report import summary as report

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Report(ScenarioRun):
    """A run with its report folder written (:func:`write_report`): ``files``, every file written;
    ``summary``, ``summary.json``'s document; ``summary_md``, ``summary.md``."""

    summary: dict[str, Any]
    summary_md: str

    @property
    def sweep(self) -> Any:
        """``sweep.csv`` as a pandas DataFrame."""
        return sweep_table(self.records)

    @property
    def buckets(self) -> Any:
        """``buckets.csv`` as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(report.bucket_rows(self.records), columns=report.BUCKET_FIELDS)


@dataclass
class Drawing:
    """The traces and PNGs that need only the points, being written beside this process."""

    made_for: tuple[Any, ...]  # (out_dir, records, kept_key, plots): the report it may serve
    kept: KeptFiles
    timeline: list[Any]
    traces: list["_Piece"]
    pngs: list["_Piece"]
    side: SideBySide
    used: bool = False

    def close(self) -> None:
        self.side.close()

    def serves(self, rdir: Path, records: tuple[Any, ...], kept_key: str | None, plots: bool) -> bool:
        """Made for this report: its folder, key and plots, and these very records (by identity:
        comparing records compares their results, whose spans would be simulated to compare)."""
        out_dir, made_records, key, made_plots = self.made_for
        return out_dir == rdir and made_records is records and key == kept_key and made_plots == plots


def start_drawing(sc: Scenario, rdir: Path, records: tuple[Any, ...], best: Any, kept_key: str | None, jobs: int, *,
                  plots: bool = True) -> Drawing:
    """Start the traces and PNGs that need only the points on ``jobs`` - 1 processes while this one
    searches the plan (:func:`ddpsim.pipeline.scenario_run.run_scenario`); :func:`write_report` finishes them."""
    kept = KeptFiles(rdir, kept_key, sc.name)
    timeline = [next(r for r in records if r.point == p) for p in sc.timeline_points(best.point)]
    traces = [_Piece(kept, f"traces {r.point_id}", [r.point_id, r.key, r.backend],
                     partial(_write_traces, r, rdir)) for r in timeline]
    pngs = _timelines(sc, timeline, best, rdir, kept) if plots else []
    if any(p.work is not None for p in traces + pngs):
        for r in timeline:
            len(r.result.spans)  # simulated here once, before the workers fork, rather than in each
    if any(p.work is not None for p in pngs):
        from ddpsim.report.plots import warm_up

        warm_up()  # likewise: this process draws too (the pieces no worker has taken)
    return Drawing(made_for=(rdir, records, kept_key, plots), kept=kept, timeline=timeline, traces=traces, pngs=pngs,
                   side=SideBySide([p.work for p in traces + pngs], jobs - 1))


def write_report(run: ScenarioRun, *, plots: bool = True) -> Report:
    """Write ``run``'s report folder (the PNGs with ``plots``); the traces and PNGs on ``run.jobs`` - 1
    processes (:mod:`ddpsim.report.workers`) while this one writes the tables and the summary."""
    sc, rdir, records, rec = run.scenario, run.out_dir, list(run.records), run.recommendation
    drawing = run.report_started  # started by ddpsim.api.run_scenario for this report, else now
    if not isinstance(drawing, Drawing) or drawing.used or not drawing.serves(rdir, run.records, run.kept_key, plots):
        if isinstance(drawing, Drawing):
            drawing.close()
        drawing = start_drawing(sc, rdir, run.records, run.best, run.kept_key, run.jobs, plots=plots)
    drawing.used = True
    kept, timeline, pngs, side = drawing.kept, drawing.timeline, drawing.pngs, drawing.side
    with side:
        rows, title = sweep_rows(records), f"{sc.name}: step time vs bucket_cap_mb"
        late = [_bucket_sizes(sc, records, timeline, rec.info, rdir, kept),
                _png(kept, rdir, "sweep.png", title, "sweep_figure", rows, title=title)] if plots else []
        for p in late:  # drawn from the plan and the table's rows, pickled to a worker
            pngs.append(p)
            side.submit(p.work)
        write_text_atomic(rdir / "sweep.csv", to_csv_text(rows))
        buckets = to_csv_text(report.bucket_rows(records), report.BUCKET_FIELDS)
        write_text_atomic(rdir / "buckets.csv", buckets)
        log.info("wrote %s and %s", rdir / "sweep.csv", rdir / "buckets.csv")
        write_text_atomic(rdir / "recommended_plan.json", json_text(rec.plan_doc, indent=1))
        log.info("wrote %s", rdir / "recommended_plan.json")
        written = {r.point_id: p.finish(side.result(i)) for i, (r, p) in enumerate(zip(timeline, drawing.traces))}
        log.info("wrote timelines for %s", ", ".join(written) or "no point")
        summ = report.summarize(run, overlaps={p: {r: o for r, _, o in w} for p, w in written.items()},
                                trace_files={p: [f for _, f, _ in w] for p, w in written.items()})
        write_text_atomic(rdir / "summary.json", json_text(summ, indent=1, sort_keys=True, default=str))
        md = report.render_summary(summ)
        write_text_atomic(rdir / "summary.md", md + "\n")
        for p, got in zip(pngs, side.results()[len(drawing.traces):]):
            p.finish(got)
    files = [*run.files, *(rdir / n for n in ("sweep.csv", "buckets.csv", "recommended_plan.json")),
             *(rdir / name for w in written.values() for _, name, _ in w), *(rdir / p.name for p in pngs),
             rdir / "summary.json", rdir / "summary.md"]
    names = {p.name for p in files}  # the traces and timelines of points not written now would mislead
    for pattern in ("trace_*_rank*.json", "trace_*_rank*.json.gz", "timeline_*.png"):
        for stale in rdir.glob(pattern):
            if stale.name not in names:
                stale.unlink()
    kept.save()
    ran = {f.name: getattr(run, f.name) for f in fields(ScenarioRun)
           if f.name not in ("files", "report_started")}  # the drawing is done
    return Report(**ran, files=tuple(files), summary=summ, summary_md=md)


@dataclass
class _Piece:
    """One trace set or PNG: its ``kept`` entry ``name`` drawn from ``what``, the one the last run
    kept (``got``), else ``work`` to run (writes the files; returns ``(paths, data)``)."""

    kept: KeptFiles
    name: str
    what: Any
    work: Any

    def __post_init__(self) -> None:
        self.got = self.kept.get(self.name, self.what)
        self.work = None if self.got is not None else self.work

    def finish(self, result: Any) -> Any:
        """The entry's data: kept, else its work's ``result`` (recorded as kept)."""
        if self.got is not None:
            return self.got["data"]
        paths, data = result
        self.kept.put(self.name, self.what, paths, data=data)
        return data


def _png(kept: KeptFiles, rdir: Path, name: str, what: Any, figure: str, *args: Any, **kwargs: Any) -> _Piece:
    """A PNG ``rdir/name`` drawn by ``plots.<figure>(*args, **kwargs)`` unless kept."""
    return _Piece(kept, name, what, partial(_saved, rdir / name, figure, *args, **kwargs))


def _saved(path: Path, figure: str, *args: Any, **kwargs: Any) -> tuple[list[Path], None]:
    """``plots.figure(*args, **kwargs)`` saved at ``path`` (matplotlib imported only then)."""
    from ddpsim.report import plots

    plots.save_figure(getattr(plots, figure)(*args, **kwargs), path)
    return [path], None


def _timelines(sc: Scenario, timeline: list[Any], best: Any, rdir: Path, kept: KeptFiles) -> list[_Piece]:
    """The timeline points' plots, and the default against the best where both are and differ."""
    pieces = []
    for rec in timeline:
        title = f"{sc.name}: {rec.point_id} (world size {rec.world_size}, {rec.backend})"
        name = f"timeline_{file_id(rec.point_id)}.png"
        pieces.append(_png(kept, rdir, name, title, "timeline_figure", rec.result, title=title, warmup=True))
    base = sc.base_point()
    pair = [next((r for r in timeline if r.point == p), None) for p in (base, best.point)]
    if base != best.point and None not in pair:
        labels = [f"default ({pair[0].point_id})", f"best ({best.point_id})"]
        title = f"{sc.name}: the default against the best point (world size {best.world_size}, {best.backend})"
        pair = [(labels[0], pair[0].result), (labels[1], pair[1].result)]
        pieces.append(_png(kept, rdir, "timeline_default_vs_best.png", [labels, title],
                           "timeline_comparison_figure", pair, title=title))
    return pieces


def _write_traces(rec: Any, rdir: Path) -> tuple[list[Path], list[tuple[int, str, float]]]:
    """The trace files of ``rec``'s point written, each ``(rank, file name, overlap)``."""
    written = perfetto.written_traces(rec.result, rdir, rec.point_id, backend=rec.backend)
    return [path for _, path, _ in written], [(r, path.name, perfetto.comm_comp_overlap(d)) for r, path, d in written]


def _bucket_sizes(sc: Scenario, records: list[Any], timeline: list[Any], rec_info: dict[str, Any], rdir: Path,
                  kept: KeptFiles) -> _Piece:
    """``bucket_sizes.png``: the timeline points' buckets and the recommended plan's, each against
    the per-bucket limits (MiB, the last reused) DDP's rebuild applies at its point
    (:func:`ddpsim.plan.planner.assign_in_ready_order`): its ``bucket_cap_mb_list``, else the first
    bucket's limit and the cap; the cap alone when small buckets go last or the two are equal."""
    from ddpsim.units import MIB

    rows = []
    for r in records:
        if any(r is t for t in timeline):  # in sweep order
            opts = sc.ddp_options(r.point)
            first = [] if opts.small_bucket_last else [opts.first_bucket_bytes_cap]
            caps = opts.list_bytes_caps or dict.fromkeys([*first, opts.bucket_bytes_cap])
            rows.append((f"default ({records[0].point_id})" if r.point.is_default_cap else r.point_id,
                         r.metrics.get("bucket_sizes_bytes") or [], [b / MIB for b in caps]))
    rows.append(("recommended explicit plan", list(rec_info["bucket_sizes_bytes"]), None))
    title = f"{sc.name}: bucket sizes (steady state)"
    return _png(kept, rdir, "bucket_sizes.png", [rows, title], "bucket_sizes_figure", rows, title=title)
