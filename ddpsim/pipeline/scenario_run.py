"""A scenario run, computed end to end (``ddpsim run``): its points
(:func:`ddpsim.pipeline.sweep.run_sweep`), the timeline points' spans, the recommended plan, the
method's measured error, the eager comparison under ``torch.compile`` and the cost terms'
effects, in one :class:`ScenarioRun` that :mod:`ddpsim.report.scenario_report` renders.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.io import ensure_dir
from ddpsim.pipeline import run as steps
from ddpsim.pipeline.scenario import Scenario, load_scenario
from ddpsim.pipeline.inputs import build_point_inputs, run_engine
from ddpsim.pipeline.sweep import PointRecord, best_record, default_jobs, run_sweep
from ddpsim.pipeline.term_effects import term_effects
from ddpsim.trace.records import save_trace


@dataclass(frozen=True, kw_only=True)
class ScenarioRun:
    """What a report of the run is rendered from (:func:`run_scenario`)."""

    scenario: Scenario
    #: the report folder, ``<out_dir>/<name>/``
    out_dir: Path
    #: every point in sweep order, the timeline points' with spans
    records: tuple[PointRecord, ...]
    trace: Any = None
    recommendation: steps.Recommendation | None = None
    method_error: Any = None
    compiled: Any = None
    cost_terms: Sequence[str] = ()
    term_effects: Any = None
    warning: str | None = None
    #: files written here (the bundled model's trace)
    files: tuple[Path, ...] = ()
    #: every point's id and resume key as one hash (:func:`ddpsim.pipeline.run.kept_key`): what the
    #: report's files are kept under for a rerun; None: a stand-in simulate or build, nothing kept
    kept_key: str | None = None
    #: the run's processes: the report's PNGs are drawn by ``jobs`` - 1 beside this one
    #: (:mod:`ddpsim.report.workers`)
    jobs: int = 1
    #: what ``start_report`` returned (:func:`run_scenario`): the report's PNGs being drawn
    report_started: Any = None

    @property
    def best(self) -> PointRecord:
        """The fastest point (:func:`~ddpsim.pipeline.sweep.best_record`)."""
        return best_record(self.records)


def run_scenario(scenario: Scenario | str | Path | None = None, *, out_dir: str | Path = "reports",
                 jobs: int | None = None, progress: bool = True, simulate_fn: Callable | None = None,
                 build_fn: Callable | None = None, method_error: str | Path | None = None,
                 start_report: Callable | None = None) -> ScenarioRun:
    """Simulate a scenario's points into ``<out_dir>/<name>/points/`` and compute the rest of its
    answer (:func:`ddpsim.api.run_scenario` documents the arguments). ``start_report(scenario, report
    folder, records, best record, kept key, jobs)`` starts drawing once the points are in; what it
    returns is the run's ``report_started``, closed if the rest fails."""
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    rdir = ensure_dir(ensure_dir(out_dir, "--out-dir") / sc.name, "--out-dir")
    trace = sc.load_trace()
    me, me_note = steps.method_error_for(sc, trace, method_error)
    files = () if sc.model is None else (save_trace(trace, rdir / "trace.json"),)
    records = run_sweep(sc, out_dir=rdir, jobs=jobs, trace=trace, progress=progress, simulate=simulate_fn, build=build_fn)
    build = build_fn or build_point_inputs
    records, best = _with_timeline_spans(sc, records, best_record(records), trace, build, simulate_fn)
    # the engine's answer is kept beside the points; a stand-in simulate or build keeps nothing
    kept = rdir / "points" if simulate_fn is None and build_fn is None else None
    kept_key = None if kept is None else steps.kept_key(records)
    jobs = default_jobs() if jobs is None else jobs
    records = tuple(records)
    started = None if start_report is None else start_report(sc, rdir, records, best, kept_key, jobs)
    # the rest of the answer: the recommended plan, the method error, the eager comparison, the cost terms
    try:
        rec = steps.recommend(sc, records, trace, build, simulate_fn, kept_dir=kept)
        me_answer = None if me is None else steps.method_error_answer(me, me_note, method_error, records, best,
                                                                      rec.inputs, trace, simulate_fn)
        compiled = None if sc.compile is None else steps.eager_comparison(sc, records, trace, build,
                                                                          simulate_fn)
        terms = steps.cost_terms(sc, best.point, rec.inputs)
        effects = term_effects(sc, records, trace, build=build, simulate=simulate_fn) if terms else None
        return ScenarioRun(scenario=sc, out_dir=rdir, trace=trace, records=records, files=files,
                           recommendation=rec, method_error=me_answer, compiled=compiled, jobs=jobs,
                           cost_terms=terms, term_effects=effects, report_started=started,
                           warning=sc.calibration and sc.calibration.warning(), kept_key=kept_key)
    except BaseException:
        if started is not None:
            started.close()
        raise


def _with_timeline_spans(sc: Scenario, records: list[Any], best: Any, trace: Any, build: Callable,
                         sim: Callable) -> tuple[list[Any], Any]:
    """The records, each timeline point's with its spans: a point whose file holds none (only the
    timeline points need them) is simulated again, from the same inputs, with them, when they are
    first read (a rerun that keeps its traces and timelines reads none)."""
    from ddpsim.engine.result import LazyTuple

    points = sc.timeline_points(best.point)
    out = []
    for r in records:
        if r.point in points and not r.result.spans:
            r = replace(r, result=replace(r.result, spans=LazyTuple(_spans, sc, r.point, trace, build, sim)))
        out.append(r)
    return out, next(r for r in out if r.point == best.point)


def _spans(sc: Scenario, point: Any, trace: Any, build: Callable, sim: Callable) -> tuple:
    """The spans of ``point`` simulated again from its inputs."""
    return run_engine(sim, build(sc, point, trace)).spans
