"""Measuring a validation: calibrating, launching the executor round by round, predicting the
same points, and rebuilding a report from kept raw runs (:func:`validate`, :func:`reanalyze`); what is
measured and why: :mod:`ddpsim.validation`."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from os.path import isfile
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.calibration.loader import load_calibration
from ddpsim.errors import InputError
from ddpsim.formats import summarize
from ddpsim.io import ensure_dir, read_json, write_text_atomic
from ddpsim.plan.planner import cap_list_label, cap_point_id
from ddpsim.trace.capture import check_count
from ddpsim.trace.records import load_trace, pool_traces, save_trace
from ddpsim.validation.compare import PointOutcome, predicted_bucket_times, summary_figures
from ddpsim.validation.intervals import point_interval, validation_inputs
from ddpsim.validation.writer import INTERVAL_LEVEL, RUN_FIELDS, write_reports

log = logging.getLogger(__name__)

#: the longest one executor run may take by default, seconds (validate --timeout-s)
DEFAULT_TIMEOUT_S = 900.0


def calibrate(launch: Callable[[list[str]], None], cal_path: Path, raw: Path, *, label: str,
              attempts: int = 2) -> Any:
    """Calibrate with ``executor collectives`` into ``cal_path``; returns the loaded calibration. A probe
    fit at its bound (:func:`ddpsim.calibration.loader.clamped_fit_warning`: other load disturbed the probe)
    is measured again, up to ``attempts`` in all, each rejected one kept as ``<stem>.clamped<k>.json``."""
    progress = raw / "calibration.progress.json"
    for attempt in range(1, attempts + 1):
        log.info(f"validate: calibrating {label} -> {cal_path}" + (f" (attempt {attempt} of {attempts})" if attempt > 1 else ""))
        t = time.perf_counter()
        launch(["collectives", "--out", str(cal_path), "--progress", str(progress),
                "--max-bytes", "256MiB", "--repeats", "10", "--interference-repeats", "30"])
        log.info(f"validate: calibration done in {time.perf_counter() - t:.0f} s")
        cal = load_calibration(cal_path)
        if attempt == attempts or cal.warning() is None:
            break
        kept = cal_path.with_name(f"{cal_path.stem}.clamped{attempt}.json")
        cal_path.replace(kept)
        if progress.exists():
            progress.replace(progress.with_name(f"{progress.stem}.clamped{attempt}.json"))
        log.info(f"validate: {cal.warning()}; kept as {kept}, calibrating again")
    return _announce(cal)


def validate(scenario_spec: str | Path | None, *, calibration: str | Path | None = None, out_dir: str | Path = "reports",
             caps: Sequence[float | None] | None = None, iterations: int | None = None, warmup: int | None = None,
             repeats: int = 3, bucket_timing: bool = True, nproc: int | None = None, num_threads: int | None = None,
             timeout_s: float = DEFAULT_TIMEOUT_S, plots: bool = True, capture: bool = True, launch_mode: str = "point",
             intervals: bool = True, method_error: str | Path | None = None) -> dict[str, Any]:
    """Validate a scenario on this machine; returns ``{"rows": [...], "summary": {...}, "out": dir}``.
    ``launch_mode``: ``"point"``, a launch per run; ``"round"``, one ``executor round`` launch per round
    (docs/VALIDATION.md, "Launch layouts"). ``intervals``: :meth:`_Validation.intervals`, with ``method_error``'s
    band. InputError: a bad scenario, calibration or option, or a failing executor run."""
    from ddpsim.pipeline.method_error import load_method_error
    from ddpsim.pipeline.scenario import load_scenario

    check_count(repeats, "--repeats", 1)
    if launch_mode not in LAUNCH_MODES:
        raise InputError(f"--launch: {launch_mode!r} is not accepted; expected one of {', '.join(LAUNCH_MODES)}")
    scenario = load_scenario(scenario_spec)
    # a bad method-error file stops here, before anything runs
    me = None if method_error is None else load_method_error(method_error)
    trace = scenario.load_trace()
    setup = _run_setup(scenario, trace, caps=caps, iterations=iterations, warmup=warmup, num_threads=num_threads,
                       nproc=nproc, out_dir=out_dir, repeats=repeats, timeout_s=timeout_s)
    trace_path = scenario.trace_path
    if capture:  # 0. the trace, captured every round with every rank computing (it drifts with the load)
        trace_path = setup["raw"] / "trace.concurrent.json"
    elif trace_path is None:
        trace_path = save_trace(trace, setup["raw"] / "trace.json")
    run = _Validation(**setup, trace=trace, trace_path=trace_path, plots=plots,
                      launch_mode=_effective_launch_mode(launch_mode, capture=capture, points=setup["points"]))
    if capture and run.launch_mode == "point":
        run.capture_round(1)
    run.calibrate(calibration)  # 1. calibration
    if run.launch_mode == "round":  # 2. predictions and 3. measurements, round-robin
        run.run_round_launches()
    else:
        run.run_point_launches(capture=capture)
    if bucket_timing:
        run.run_hooked()
    return run.finish(intervals=intervals, method_error=me)


def _run_setup(scenario: Any, trace: Any, *, caps: Sequence[float | None] | None, iterations: int | None,
               warmup: int | None, num_threads: int | None, nproc: int | None, out_dir: str | Path, repeats: int,
               timeout_s: float) -> dict[str, Any]:
    """:class:`_Validation`'s setup fields from :func:`validate`'s options, else the scenario's ``validation``
    block, else the trace's environment; InputError for what local validation cannot do."""
    from ddpsim.pipeline.scenario_schema import ValidationSpec

    env = trace.environment or {}
    vs = scenario.validation or ValidationSpec()
    model = vs.model or (scenario.model.name if scenario.model else None) or trace.model
    batch_size = vs.batch_size or env.get("batch_size")
    if batch_size is None:
        raise InputError(f"{scenario.path}: validation.batch_size: missing and the trace has no environment.batch_size; expected an integer")
    iterations = iterations or vs.iterations
    warmup = warmup if warmup is not None else vs.warmup
    num_threads = num_threads or vs.num_threads or env.get("num_threads") or 1
    device = vs.device or env.get("device", "cpu")
    if device != "cpu":
        raise InputError(f"{scenario.path}: validation.device: {device!r} is not accepted by local validation; "
                         f"expected cpu (on GPU nodes run 'torchrun -m executor' yourself and compare)")
    if batch_size != env.get("batch_size", batch_size):
        log.warning(f"validate: WARNING: batch size {batch_size} differs from the trace's {env.get('batch_size')}")
    model_args = tuple(x for k, v in vs.options.items() for x in ("--model-arg", f"{k}={json.dumps(v)}"))
    caps = vs.bucket_cap_mb if caps is None else caps
    points = select_points(scenario, caps)
    if scenario.ddp.mixed_precision is not None:
        raise InputError(f"{scenario.path}: ddp.mixed_precision: {scenario.ddp.mixed_precision.label()!r} is not accepted by "
                         "local validation (gloo on CPU): torch's mixed-precision forward records device events, which the "
                         "CPU backend lacks; expected null (on GPU nodes run 'torchrun -m executor ddp --mixed-precision' yourself)")
    out = ensure_dir(Path(out_dir) / scenario.name, "--out-dir")
    raw = ensure_dir(out / "validation", "--out-dir")
    return dict(scenario=scenario, points=tuple(points), model=model, batch_size=batch_size, model_args=model_args,
                iterations=iterations, warmup=warmup, num_threads=num_threads,
                world_size=nproc or scenario.world_size or 2, repeats=repeats, timeout_s=timeout_s, out=out, raw=raw)


def _effective_launch_mode(launch_mode: str, *, capture: bool, points: Sequence[Any]) -> str:
    """``launch_mode``, or ``"point"`` (said) where a one-launch round cannot run."""
    if launch_mode == "round" and not capture:
        log.info("validate: --scenario-trace: the scenario's trace is not captured in the runs' launches; "
             "one launch per point (--launch point)")
        return "point"
    if launch_mode == "round" and not all(p.point_id == cap_point_id(p.bucket_cap_mb, p.bucket_cap_mb_list) for p in points):
        log.info("validate: the points differ by more than their cap; one launch per point (--launch point)")
        return "point"
    return launch_mode


@dataclass(kw_only=True, eq=False)
class _Validation:
    """One :func:`validate` run while it goes: what it runs and where, the pooled trace, the rounds' captures,
    the calibration and every point's outcome (the report is rewritten after every run)."""

    scenario: Any
    points: tuple[Any, ...]
    model: str
    batch_size: int
    model_args: tuple[str, ...] = ()  # the model's options, as ``--model-arg name=<json>`` flags
    iterations: int
    warmup: int
    num_threads: int
    world_size: int
    repeats: int
    timeout_s: float = DEFAULT_TIMEOUT_S
    out: Path                        # the report folder, <out_dir>/<scenario>
    raw: Path                        # its raw runs, <out>/validation
    trace: Any
    trace_path: Path | None
    launch_mode: str | None
    plots: bool
    captured: list[Any] = field(default_factory=list)
    cal_path: Path | None = None
    cal: Any = None
    outcomes: dict[str, PointOutcome] = field(init=False)

    def __post_init__(self) -> None:
        self.outcomes = {p.point_id: PointOutcome(point_id=p.point_id, bucket_cap_mb=_point_cap(p))
                         for p in self.points}

    def launch(self, args: list[str]) -> None:
        from ddpsim.validation.launch import launch_local

        r = launch_local(args, nproc=self.world_size, num_threads=self.num_threads, timeout_s=self.timeout_s)
        if r.returncode != 0:  # the whole output into raw, for a post-mortem
            write_text_atomic(self.raw / f"failed-{args[0]}-{int(time.time())}.log",
                              " ".join(r.args) + "\n--- stdout\n" + r.stdout + "\n--- stderr\n" + r.stderr)
            lines = (r.stderr or "").strip().splitlines()
            picked = [ln for ln in lines if "executor: error" in ln]
            picked = picked or [ln for ln in lines if ln.startswith("[rank") and ("Error" in ln or "error" in ln)]
            # a rank killed by a signal: torchrun's banner ends in '=====' lines; C++ aborts print
            # 'terminate called ...' and torchrun 'exitcode : -6 (pid ...) (SIGABRT)'
            picked = picked or [ln for ln in lines if ln.startswith("terminate called")]
            picked = picked or [ln for ln in lines if ln.strip().startswith("exitcode") and "SIG" in ln]
            picked = picked or [ln for ln in lines if ln.strip().strip("=-")] [-1:] or ["no output"]
            msg = " ".join(picked[-1].split())[:400]
            raise InputError(f"executor {args[0]}: exit status {r.returncode} ({msg}); expected a clean run "
                             f"(command: {' '.join(r.args)})")

    def pool(self, path: Path) -> None:
        """Add the round's capture at ``path``; the trace becomes the captures so far pooled, saved."""
        self.captured.append(load_trace(path))
        self.trace = pool_traces(self.captured)
        save_trace(self.trace, self.trace_path)

    def capture_round(self, rep: int) -> None:
        """Capture round ``rep``'s trace on all ranks at once (``executor trace``) and :meth:`pool` it."""
        path = self.raw / f"trace.round{rep}.json"
        log.info(f"validate: capturing {self.model} (batch {self.batch_size}) on {self.world_size} ranks at once -> {path}")
        self.launch(["trace", "--model", self.model, "--batch-size", str(self.batch_size), "--out", str(path),
                     "--iterations", str(max(8, min(self.iterations, 20))), "--warmup", "3", *self.model_args])
        self.pool(path)

    def calibrate(self, calibration: str | Path | None) -> None:
        """Load ``calibration`` (else the scenario's), or calibrate the host into ``<out>/calibration.json``."""
        self.cal_path = Path(calibration) if calibration else self.scenario.calibration_path
        if self.cal_path is None:
            self.cal_path = self.out / "calibration.json"
            self.cal = calibrate(self.launch, self.cal_path, self.raw,
                                 label=f"{self.world_size} gloo ranks x {self.num_threads} thread(s)")
        else:
            self.cal = _announce(load_calibration(self.cal_path))

    def predict(self) -> None:
        predict_points(self.scenario, self.points, self.outcomes, self.trace, self.cal)

    def finish(self, *, intervals: bool, method_error: Any, reanalyzed: bool = False) -> dict[str, Any]:
        """Give the points their intervals, write the report; returns what :func:`validate` returns."""
        if intervals and self.captured:
            self.intervals(method_error)
        write_reports(self, reanalyzed=reanalyzed)
        rows = [o.row() for o in self.outcomes.values()]
        return {"rows": rows, "summary": summary_figures(rows), "out": self.out}

    def record(self, p: Any, rep: int, mpath: Path) -> None:
        """Add the run of point ``p`` in round ``rep`` (written to ``mpath``) and say how it compares."""
        o = self.outcomes[p.point_id]
        o.runs.append(json.loads(mpath.read_text()))
        r = o.row()
        log.info(f"validate: {p.point_id:14s} run {rep}/{self.repeats}: measured {o.runs[-1]['summary']['iteration_s'] * 1e3:9.2f} ms"
                  f"  plan_matches {str(o.runs[-1].get('plan_matches')).lower()}  (pooled {r['measured_s'] * 1e3:.2f} ms,"
                  f" predicted {r['predicted_s'] * 1e3:.2f}, error {r['error_pct']:+.1f} %)")

    def common_args(self) -> list[str]:
        """The model and step flags of every ``executor ddp`` / ``executor round`` launch."""
        return ["--model", self.model, "--batch-size", str(self.batch_size), "--iterations", str(self.iterations),
                "--warmup", str(self.warmup), "--timeout-s", str(min(self.timeout_s, 600.0)), *self.model_args]

    def run_round_launches(self) -> None:
        """``--launch round``: each round in one ``executor round`` launch, its trace slices pooled
        with the earlier rounds' and every point predicted again before its runs are recorded."""
        for rep in range(1, self.repeats + 1):
            order = round_order(self.points, rep)
            log.info(f"validate: round {rep}/{self.repeats} in one launch: a trace slice then real DDP at "
                      f"{', '.join(p.point_id for p in order)}")
            self.launch(["round", *self.common_args(), "--caps", ",".join(_cap_arg(_point_cap(p)) for p in order),
                         "--trace-iters", str(ROUND_TRACE_ITERS), "--round", str(rep), "--out-dir", str(self.raw),
                         *_options(self.scenario, self.points[0])])
            self.pool(self.raw / f"trace.round{rep}.json")
            self.predict()
            for p in order:
                self.record(p, rep, self.raw / f"{p.point_id}.run{rep}.json")
            write_reports(self)

    def run_point_launches(self, *, capture: bool) -> None:
        """``--launch point``: every run in an ``executor ddp`` launch of its own, each round after
        the first captured anew (``capture``) and every point predicted again from the pool."""
        self.predict()
        for rep in range(1, self.repeats + 1):
            if capture and rep > 1:
                self.capture_round(rep)
                self.predict()
            for p in round_order(self.points, rep):
                mpath = self.raw / f"{p.point_id}.run{rep}.json"
                self.launch(["ddp", *self.common_args(), "--trace", str(self.trace_path), *_cap_flags(p),
                             *_options(self.scenario, p), "--out", str(mpath)])
                self.record(p, rep, mpath)
                write_reports(self)

    def intervals(self, method_error: Any) -> None:
        """Give every point its :data:`~ddpsim.validation.writer.INTERVAL_LEVEL` interval
        (:func:`ddpsim.validation.intervals.point_interval` over the rounds' captures), widened by
        ``method_error``'s band without the model's own residuals (:func:`ddpsim.pipeline.method_error.widen`)."""
        from ddpsim.pipeline.method_error import file_sha256, widen

        band = None
        if method_error is not None:
            band = method_error.band(INTERVAL_LEVEL, exclude_model=self.model)
            left = len([q for q in method_error.points if q.model != self.model])
            if band is None:
                log.info(f"validate: the method error's {left} residuals of other models are too few for a {INTERVAL_LEVEL:.0%} "
                         "band; the intervals hold the trace's noise only")
            else:
                log.info(f"validate: method error of {len({q.model for q in method_error.points} - {self.model})} other models "
                         f"({left} points): {100 * band[0]:+.1f}..{100 * band[1]:+.1f} % around each prediction")
            # a local validation runs gloo on CPU, as the zoo's residuals were measured
            diff = method_error.mismatch(calibration_sha256=None if self.cal_path is None else file_sha256(self.cal_path),
                                         backend="gloo", device="cpu")
            if diff:
                log.info(f"validate: note: {diff}; its band holds for the conditions it was measured in")
        for p in self.points:
            o = self.outcomes[p.point_id]
            o.interval = widen(point_interval(self.scenario, p, self.captured, self.cal, num_runs=len(o.runs),
                                              iterations=self.iterations, level=INTERVAL_LEVEL), band)
            log.info(f"validate: {p.point_id:14s} {INTERVAL_LEVEL:.0%} interval {o.interval.low_s * 1e3:.2f} to "
                     f"{o.interval.high_s * 1e3:.2f} ms")

    def run_hooked(self) -> None:
        """One run per point with the timing comm hook, for the per-bucket times (a failed one is skipped)."""
        common = [*self.common_args(), "--trace", str(self.trace_path)]
        for p in self.points:
            mpath = self.raw / f"{p.point_id}.hooked.json"
            try:
                self.launch(["ddp", *common, *_cap_flags(p), *_options(self.scenario, p),
                             "--timing-hook", "--out", str(mpath)])
            except InputError as exc:  # per-bucket timing is extra: report it, keep the validation
                log.warning(f"validate: WARNING: {p.point_id}: the timing-hook run failed, no measured bucket times: {exc}")
                continue
            self.outcomes[p.point_id].hooked = json.loads(mpath.read_text())
            write_reports(self)


#: how ``validate`` runs a round: ``round`` (one launch, :mod:`executor.round_step`) or ``point``
LAUNCH_MODES = ("round", "point")
#: recorded trace steps captured before each point of a one-launch round; over 5 points and 3
#: rounds that is 30 steps, more than the 8-20 of a round's own capture in ``point`` mode
ROUND_TRACE_ITERS = 2


def _cap_arg(cap: float | tuple[float, ...] | None) -> str:
    """A point's cap as ``executor round --caps`` reads it: ``none``, ``5``, ``list=1+4+8``."""
    if isinstance(cap, tuple):  # its point id, which executor round --caps reads back
        return cap_point_id(None, cap)
    return "none" if cap is None else f"{cap:g}"


def _point_cap(point: Any) -> float | tuple[float, ...] | None:
    """A sweep point's cap: its ``bucket_cap_mb_list`` (a tuple) when it has one, else its ``bucket_cap_mb``."""
    return point.bucket_cap_mb_list or point.bucket_cap_mb


def _cap_flags(point: Any) -> list[str]:
    """``executor ddp``'s flag for a point's cap."""
    if point.bucket_cap_mb_list:
        return ["--bucket-cap-mb-list", cap_list_label(point.bucket_cap_mb_list).replace("+", ",")]
    return ["--bucket-cap-mb", _cap_arg(point.bucket_cap_mb)]


def round_order(points: Sequence[Any], rep: int) -> list[Any]:
    """The order of round ``rep`` (1-based): the points rotated by ``rep - 1``, so that each point runs
    in each position (the first run after a capture can sit a few % off: the position's, not the point's)."""
    k = (rep - 1) % len(points) if points else 0
    return list(points[k:]) + list(points[:k])


def select_points(scenario: Any, caps: Sequence[float | tuple[float, ...] | list | None] | None) -> list[Any]:
    """The scenario's points at ``caps`` (all of them when None; a cap the sweep lacks is the
    base point at that cap; a tuple or list is a bucket_cap_mb_list)."""
    points = scenario.points()
    if caps is not None:
        wanted = [tuple(c) if isinstance(c, list) else c for c in caps]
        points = [p for p in points if _point_cap(p) in wanted]
        have = {_point_cap(p) for p in points}
        points += [scenario.point_at(None if isinstance(c, tuple) else c, c if isinstance(c, tuple) else None)
                   for c in wanted if c not in have]
    return points


def predict_points(scenario: Any, points: Sequence[Any], outcomes: dict[str, PointOutcome], trace: Any, cal: Any) -> None:
    """Simulate each of ``points`` as a validation predicts it and write the prediction into its outcome."""
    from ddpsim.engine.simulate import simulate

    for p in points:
        inputs = validation_inputs(scenario, p, trace=trace, calibration=cal)
        res = simulate(inputs.trace, inputs.plan, inputs.comm, inputs.config)
        o = outcomes[p.point_id]
        o.predicted_metrics = res.summary()
        o.predicted_s = o.predicted_metrics["iteration_mean_s"]
        o.predicted_p50_s = o.predicted_metrics["iteration_p50_s"]
        o.predicted_buckets = predicted_bucket_times(res)
        log.info(f"validate: {p.point_id:14s} predicted {o.predicted_s * 1e3:9.2f} ms  ({len(inputs.plan.steady)} buckets,"
             f" trace of {len(trace.iterations)} iterations)")


def reanalyze(scenario_spec: str | Path | None, *, calibration: str | Path | None = None, out_dir: str | Path = "reports",
              plots: bool = True, intervals: bool = True, method_error: str | Path | None = None) -> dict[str, Any]:
    """Rebuild a validation report from its raw runs (``<out_dir>/<scenario>/validation/``), running nothing,
    with ``validation.json``'s calibration (or ``calibration``). InputError: a raw file missing or unreadable."""
    from ddpsim.pipeline.method_error import load_method_error
    from ddpsim.pipeline.scenario import load_scenario

    scenario = load_scenario(scenario_spec)
    me = None if method_error is None else load_method_error(method_error)
    out = Path(out_dir) / scenario.name
    raw, old_path = out / "validation", out / "validation.json"
    old = read_json(old_path, "--reanalyze", f"the validation.json of an earlier 'ddpsim validate {scenario.name}' "
                    "(run it first)")
    trace_path = report_trace_path(old, raw)
    points = select_points(scenario, [r["bucket_cap_mb"] for r in old["rows"]])
    run = _Validation(scenario=scenario, points=tuple(points), **{k: old[k] for k in RUN_FIELDS}, out=out, raw=raw,
                      trace=load_trace(trace_path), trace_path=trace_path, plots=plots,
                      launch_mode=old.get("launch"))
    run.calibrate(calibration or old["calibration"])
    for o in run.outcomes.values():
        _read_runs(o, raw, old_path)
    run.repeats = max(len(o.runs) for o in run.outcomes.values())
    # "round" when the raw runs were measured by ``executor round`` (their ``launch.kind``)
    if any((r.get("launch") or {}).get("kind") == "round" for o in run.outcomes.values() for r in o.runs):
        run.launch_mode = "round"
    run.predict()
    run.captured = round_traces(raw, old["repeats"])
    return run.finish(intervals=intervals, method_error=me, reanalyzed=True)


def _read_runs(o: PointOutcome, raw: Path, report_path: Path) -> None:
    """Give ``o`` its point's raw runs under ``raw`` (``<point>.run<k>.json``, k = 1, 2, ...; the hooked
    run's) with step times recomputed from the per-rank records (:func:`ddpsim.formats.summarize`)."""
    def measurement(path: Path) -> dict[str, Any]:
        try:
            m = json.loads(path.read_text())
            m["summary"] = {**m["summary"], **summarize([r["iterations"] for r in m["ranks"]])}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"--reanalyze: {str(path)!r} is not a readable executor measurement ({exc}); "
                             f"expected the ddp runs 'ddpsim validate' wrote") from None
        return m

    rep = 1
    while (raw / f"{o.point_id}.run{rep}.json").exists():
        o.runs.append(measurement(raw / f"{o.point_id}.run{rep}.json"))
        rep += 1
    if not o.runs:
        raise InputError(f"--reanalyze: {str(raw / (o.point_id + '.run1.json'))!r} is missing; expected the raw "
                         f"runs of every point of {str(report_path)!r}")
    if (raw / f"{o.point_id}.hooked.json").exists():
        o.hooked = measurement(raw / f"{o.point_id}.hooked.json")


def round_traces(raw: Path, repeats: int) -> list[Any]:
    """The traces a validation captured, one per round (``trace.round<k>.json`` under ``raw``)."""
    return [load_trace(raw / f"trace.round{k}.json") for k in range(1, repeats + 1) if (raw / f"trace.round{k}.json").is_file()]


def report_trace_path(data: dict[str, Any], raw: Path) -> Path:
    """The pooled trace ``validation.json`` (``data``) names, else its namesake in ``raw`` (moved)."""
    path = Path(data["trace"])
    return raw / path.name if not isfile(path) and isfile(raw / path.name) else path


def _announce(cal: Any) -> Any:
    """The calibration a validation predicts with; a probe fit at its bound is called out."""
    msg = cal.warning()
    if msg:
        log.warning(f"validate: WARNING: {msg}")
    return cal


def _options(scenario: Any, point: Any) -> list[str]:
    """``executor ddp`` / ``round``'s ``--options`` of the point: its :class:`ddpsim.plan.planner.DDPOptions`
    less the cap, with the run modes that are no DDP options (``executor.ddp_step.RUN_MODES``): the
    point's engine settings and the batches of uneven inputs."""
    if point.comm_hook != "none":
        raise InputError(f"sweep.comm_hook: {point.comm_hook!r} is not accepted by validate; expected none")
    doc = {k: v for k, v in asdict(scenario.ddp_options(point)).items()
           if k not in ("bucket_cap_mb", "bucket_cap_mb_list")}
    doc.update(point.settings)
    if scenario.join is not None:
        doc["join_batches"] = scenario.join.batches(scenario.world_size or 2, scenario.simulation.seed)
    return ["--options", json.dumps(doc, sort_keys=True, separators=(",", ":"))]
