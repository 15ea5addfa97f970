"""``ddpsim validate zoo``: validate every model of the zoo (:mod:`ddpsim.trace.models.zoo`),
unattended. :func:`run_zoo` writes each model's scenario (2 gloo ranks of one thread), validates
it (:func:`ddpsim.validation.measure.validate`, one calibration for all), predicts every point
from each round's capture alone on the wall clock and on the CPU clock
(:mod:`ddpsim.validation.stability`), gives each its prediction intervals, and rewrites
``<out>/zoo/summary.{md,csv,json}`` after every model; a model done is skipped, a failed one
reported, ``--reanalyze`` runs nothing. docs/VALIDATION.md, "Models never tuned on"."""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from os.path import isfile
from pathlib import Path
from typing import Any, Sequence

from ddpsim.calibration.loader import load_calibration
from ddpsim.errors import InputError
from ddpsim.io import ensure_dir, write_text_atomic
from ddpsim.validation import measure
from ddpsim.validation.intervals import (ALTERNATIVES_TEXT, PredictionInterval, point_interval,
                                         predict_mean)
from ddpsim.validation.stability import cpu_clock_trace, cpu_share, spread_pct
from ddpsim.validation.writer import csv_text

log = logging.getLogger(__name__)

#: the caps every zoo model is validated at (one bucket per ~MiB, several, DDP's default)
ZOO_CAPS: tuple[float, ...] = (1.0, 5.0, 25.0)

SUMMARY_COLUMNS = ("model", "status", "points", "median_abs_error_pct", "median_abs_error_cpu_pct",
                   "median_abs_error_load_pct", "coverage", "coverage_cpu", "coverage_method", "method_band_lo_pct",
                   "method_band_hi_pct", "stability_pct", "stability_cpu_pct", "median_run_spread_pct", "host_other_pct",
                   "wall_s")


def zoo_scenario_yaml(name: str, *, caps: Sequence[float | None], iterations: int, warmup: int) -> str:
    """The scenario of zoo model ``name``: 2 gloo ranks of one thread on one host, the zoo's batch size."""
    from ddpsim.trace.models.zoo import zoo_entry

    e = zoo_entry(name)
    cap_list = ", ".join("null" if c is None else f"{c:g}" for c in caps)
    return (f"# zoo:{e.name} on one CPU host: 2 gloo ranks, one thread each ('ddpsim validate zoo').\n"
            f"name: zoo-{e.name}\n"
            f"description: >\n  zoo:{e.name} ({e.shape}), batch {e.batch_size} per rank, never used to tune ddpsim.\n"
            f"model: {{name: 'zoo:{e.name}', batch_size: {e.batch_size}, device: cpu, iterations: 2, warmup: 1, num_threads: 1}}\n"
            f"cluster: {{topology: cpu-gloo, nodes: 1}}\n"
            f"world_size: 2\n"
            f"ddp: {{bucket_cap_mb: null, find_unused_parameters: {str(e.find_unused_parameters).lower()}}}\n"
            f"simulation: {{iterations: 10, seed: 0, jitter: trace}}\n"
            f"sweep:\n  bucket_cap_mb: [{cap_list}]\n"
            f"validation: {{model: 'zoo:{e.name}', batch_size: {e.batch_size}, iterations: {iterations}, "
            f"warmup: {warmup}, num_threads: 1}}\n")


def analyse_model(scenario: Any, rows: Sequence[dict[str, Any]], captures: Sequence[Any], calibration: Any, *,
                  iterations: int, level: float, num_resamples: int, seed: int) -> dict[str, Any]:
    """Stability, CPU-clock predictions and intervals of a validated model's ``rows`` and ``captures``."""
    if not captures:
        raise InputError(f"{scenario.name}: no round traces (trace.round<k>.json); expected the captures of a validation")
    try:
        cpu_caps = [cpu_clock_trace(c) for c in captures]
    except InputError:  # a capture without its CPU time per phase, or of several threads
        cpu_caps = []
    points = {p.bucket_cap_mb: p for p in scenario.points()}  # the zoo scenario's sweep is the validated caps
    out = []
    for r in rows:
        point, m = points[r["bucket_cap_mb"]], r["measured_s"]
        predict = predict_mean(scenario, point, calibration)
        wall = [predict(c) for c in captures]
        rec: dict[str, Any] = {"point": r["point"], "bucket_cap_mb": r["bucket_cap_mb"], "measured_s": m,
                               "predicted_s": r["predicted_s"], "error_pct": r["error_pct"],
                               "run_spread_pct": r.get("run_spread_pct"), "per_capture_predicted_s": wall,
                               "stability_pct": spread_pct(wall)}

        def interval(caps: Sequence[Any]) -> Any:
            return point_interval(scenario, point, caps, calibration, num_runs=r["num_runs"], iterations=iterations,
                                  level=level, num_resamples=num_resamples, seed=seed)

        iv = interval(captures)
        rec["interval"] = iv.to_dict()
        rec["covered"] = None if m is None else iv.covers(m)
        if cpu_caps:
            cpu = [predict(c) for c in cpu_caps]
            ivc = interval(cpu_caps)
            pooled = ivc.center_s  # the prediction from the CPU-clock captures pooled
            rec.update({"predicted_cpu_s": pooled, "per_capture_predicted_cpu_s": cpu, "stability_cpu_pct": spread_pct(cpu),
                        "error_cpu_pct": None if m is None else 100.0 * (pooled - m) / m, "interval_cpu": ivc.to_dict(),
                        "covered_cpu": None if m is None else ivc.covers(m)})
            other = r.get("host_other_pct")
            if other is not None and m is not None and other < 100.0:
                # on an idle host the counters' noise can put the other load a little below 0
                share = cpu_share(max(0.0, other), num_cpus=int(captures[0].environment.get("num_cpus") or os.cpu_count() or 1),
                                  num_busy_threads=scenario.world_size or 2)
                rec.update({"cpu_share": share, "predicted_load_s": pooled / share,
                            "error_load_pct": 100.0 * (pooled / share - m) / m})
        out.append(rec)
    return {"points": out, "num_captures": len(captures), "cpu_clock": bool(cpu_caps)}


def summary_row(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """One model's row of the zoo summary (:data:`SUMMARY_COLUMNS`) from its ``zoo.json``."""
    row: dict[str, Any] = {c: None for c in SUMMARY_COLUMNS}
    row.update({"model": name, "status": result.get("status", "done"), "wall_s": result.get("wall_s")})
    pts = [p for p in (result.get("analysis") or {}).get("points", []) if p.get("error_pct") is not None]
    if not pts:
        return row

    def med(key: str, absolute: bool = False) -> float | None:
        xs = [abs(p[key]) if absolute else p[key] for p in pts if p.get(key) is not None]
        return statistics.median(xs) if xs else None

    def frac(key: str) -> str | None:
        xs = [p[key] for p in pts if p.get(key) is not None]
        return f"{sum(xs)}/{len(xs)}" if xs else None

    row.update({"points": len(pts), "median_abs_error_pct": med("error_pct", True),
                "median_abs_error_cpu_pct": med("error_cpu_pct", True), "median_abs_error_load_pct": med("error_load_pct", True),
                "coverage": frac("covered"), "coverage_cpu": frac("covered_cpu"), "stability_pct": med("stability_pct"),
                "stability_cpu_pct": med("stability_cpu_pct"), "median_run_spread_pct": med("run_spread_pct"),
                "host_other_pct": (result.get("summary") or {}).get("host_other_pct")})
    return row


def summary_markdown(rows: Sequence[dict[str, Any]], *, level: float) -> str:
    def f(v: Any, unit: str = "") -> str:
        return "" if v is None else f"{v:.1f}{unit}" if isinstance(v, float) else str(v)

    lines = ["# ddpsim model zoo: validation summary", "",
             "One row per zoo model (`ddpsim validate zoo`): 2 gloo ranks on this CPU host, one thread each. "
             "`error` = median over the points of |predicted - measured| / measured, predicted from the rounds' "
             "captures pooled on the wall clock (as `ddpsim validate`) and on the CPU clock (each phase scaled to the "
             "ranks' CPU time in it: the host's other load taken out). `coverage`: points whose measured mean lies "
             f"inside the {level:.0%} prediction interval (the captures and their iterations resampled through the "
             f"engine, {ALTERNATIVES_TEXT}; on a host busy with other work the CPU clock's leaves that load out and covers only what a quiet "
             "host would measure). `at load`: the CPU-clock prediction stretched by the share of a CPU each rank held while the "
             "runs ran (`ddpsim.validation.stability.cpu_share`, from the host's other load the runs' `/proc/stat` counters "
             "measured). `stability`: median over the points of (max - min) / median of the predictions from each "
             "round's capture alone: how far two validations' predictions land apart (the CPU clock's holds for the "
             "prediction at load too). `run spread`: the measured runs' own (slowest minus fastest run's median). "
             "`other load`: the host's CPUs busy with other work during the runs. `with method error`: coverage of "
             "the wall-clock interval joined with the method's error measured on the OTHER models of this zoo (the "
             f"split-conformal {level:.0%} band of their residuals measured / predicted - 1, shown as `band`; the "
             "model's own points never inform it: `ddpsim.pipeline.method_error`).", "",
             "| model | status | points | error (wall) | error (CPU clock) | error (at load) | coverage (wall) | "
             "coverage (CPU) | with method error | band | stability (wall) | stability (CPU) | run spread | other load | time |",
             "|---|---|---:|---:|---:|---:|:-:|:-:|:-:|:-:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lo, hi = r.get("method_band_lo_pct"), r.get("method_band_hi_pct")
        band = "" if lo is None or hi is None else f"{lo:+.1f}..{hi:+.1f} %"
        lines.append(f"| {r['model']} | {r['status']} | {f(r['points'])} | {f(r['median_abs_error_pct'], ' %')} | "
                     f"{f(r['median_abs_error_cpu_pct'], ' %')} | {f(r['median_abs_error_load_pct'], ' %')} | "
                     f"{f(r['coverage'])} | {f(r['coverage_cpu'])} | {f(r['coverage_method'])} | {band} | "
                     f"{f(r['stability_pct'], ' %')} | {f(r['stability_cpu_pct'], ' %')} | "
                     f"{f(r['median_run_spread_pct'], ' %')} | {f(r['host_other_pct'], ' %')} | "
                     f"{'' if r['wall_s'] is None else format(r['wall_s'] / 60, '.1f') + ' min'} |")
    tot = method_totals(rows)
    if tot:
        lines += ["", f"All models: {tot['within_5pct']} of {tot['models']} within 5 % median |error|; "
                      f"{_method_text(tot, level)}."]
    return "\n".join(lines) + "\n"


def method_totals(rows: Sequence[dict[str, Any]]) -> dict[str, int] | None:
    """Over the models with figures: how many within 5 % median |error|, and the points inside their
    interval without and with the method error (``"k/n"`` cells added up)."""
    done = [r for r in rows if r.get("median_abs_error_pct") is not None]
    if not done:
        return None

    def add(key: str) -> tuple[int, int]:
        ks = [tuple(int(x) for x in r[key].split("/")) for r in done if r.get(key)]
        return sum(k for k, _ in ks), sum(n for _, n in ks)

    cov, pts = add("coverage")
    covm, ptsm = add("coverage_method")
    return {"models": len(done), "within_5pct": sum(r["median_abs_error_pct"] <= 5.0 for r in done),
            "covered": cov, "covered_method": covm, "points": pts, "points_method": ptsm}


def _method_text(tot: dict[str, int], level: float) -> str:
    return (f"{tot['covered']}/{tot['points']} measured means inside their {level:.0%} interval, "
            + (f"{tot['covered_method']}/{tot['points_method']} with the method error of the other models"
               if tot["points_method"] else "no method-error band yet (too few residuals of other models)"))


def method_error_of(results: dict[str, dict[str, Any]], *, calibration: str | Path | None) -> Any:
    """The residuals of the models done, and their calibration (``method_error.MethodError``)."""
    from ddpsim.pipeline.method_error import MethodError, ResidualPoint, file_sha256

    pts = [ResidualPoint(model=name, point=p["point"], predicted_s=p["predicted_s"], measured_s=p["measured_s"])
           for name, res in results.items() for p in (res.get("analysis") or {}).get("points", [])
           if p.get("measured_s") and p.get("predicted_s")]
    cal = None if calibration is None else str(calibration)
    return MethodError(points=tuple(pts), calibration=cal, calibration_sha256=None if cal is None else file_sha256(cal),
                       backend="gloo", device="cpu")


def apply_method_error(rows: Sequence[dict[str, Any]], results: dict[str, dict[str, Any]], me: Any, *,
                       level: float) -> dict[str, Any]:
    """Give each row of a model done the conformal band of the OTHER models' residuals
    (:meth:`ddpsim.pipeline.method_error.MethodError.band`) and its intervals' coverage joined with it;
    returns the per-point detail for ``summary.json``."""
    from ddpsim.pipeline.method_error import widen

    detail: dict[str, Any] = {}
    for row in rows:
        res = results.get(row["model"])
        pts = [p for p in ((res or {}).get("analysis") or {}).get("points", [])
               if p.get("measured_s") and p.get("predicted_s") and p.get("interval")]
        band = me.band(level, exclude_model=row["model"])
        if not pts or band is None:
            continue
        out = []
        for p in pts:
            kept = ("low_s", "high_s", "level", "num_resamples", "num_captures", "num_iterations", "seed")
            w = widen(PredictionInterval(**{k: p["interval"][k] for k in kept}, center_s=p["predicted_s"]), band)
            out.append({"point": p["point"], "measured_s": p["measured_s"], "predicted_s": p["predicted_s"],
                        "low_s": w.low_s, "high_s": w.high_s, "covered": w.covers(p["measured_s"])})
        row.update({"coverage_method": f"{sum(o['covered'] for o in out)}/{len(out)}",
                    "method_band_lo_pct": 100.0 * band[0], "method_band_hi_pct": 100.0 * band[1]})
        detail[row["model"]] = {"band": list(band), "points": out}
    return detail


def write_summary(zoo_dir: Path, rows: Sequence[dict[str, Any]], *, level: float,
                  results: dict[str, dict[str, Any]] | None = None, calibration: str | Path | None = None) -> None:
    """``summary.{csv,md,json}``; with ``results``, :func:`apply_method_error` and ``method_error.json``."""
    detail: dict[str, Any] = {}
    if results:
        me = method_error_of(results, calibration=calibration)
        detail = apply_method_error(rows, results, me, level=level)
        write_text_atomic(zoo_dir / "method_error.json", json.dumps(me.to_dict(), indent=1) + "\n")
    write_text_atomic(zoo_dir / "summary.csv", csv_text(SUMMARY_COLUMNS, rows))
    write_text_atomic(zoo_dir / "summary.md", summary_markdown(rows, level=level))
    write_text_atomic(zoo_dir / "summary.json", json.dumps({"format": "ddpsim-zoo-summary", "version": 1, "level": level,
                                                            "rows": list(rows), "method_error": detail}, indent=1) + "\n")


def run_zoo(*, models: Sequence[str] | None = None, out_dir: str | Path = "reports", caps: Sequence[float | None] | None = None,
            repeats: int = 3, iterations: int = 20, warmup: int = 5, calibration: str | Path | None = None,
            level: float = 0.8, num_resamples: int = 40, seed: int = 0, timeout_s: float = 900.0,
            reanalyze: bool = False) -> dict[str, Any]:
    """Validate the zoo's ``models`` (default: all) under ``<out_dir>/zoo/``; returns ``{"rows", "out"}``.
    InputError: an unknown model or a bad count; a model's failing validation is reported in its row."""
    from ddpsim.trace.capture import check_count
    from ddpsim.trace.models.zoo import ZOO_PREFIX, zoo_entry, zoo_names

    names = list(models) if models else zoo_names()
    entries = [zoo_entry(n if n.startswith(ZOO_PREFIX) else ZOO_PREFIX + n) for n in names]
    for value, flag in ((repeats, "--repeats"), (iterations, "--iterations"), (num_resamples, "num_resamples")):
        check_count(value, flag, 1)
    zoo_dir = ensure_dir(Path(out_dir) / "zoo", "--out-dir")
    zoo = _Zoo(zoo_dir, calibration=calibration, level=level, num_resamples=num_resamples, seed=seed,
               run=dict(caps=list(ZOO_CAPS if caps is None else caps), repeats=repeats, iterations=iterations,
                        warmup=warmup, timeout_s=timeout_s))
    t_start, timed = time.perf_counter(), []
    for i, e in enumerate(entries, start=1):
        tag = f"zoo: [{i}/{len(entries)}] {ZOO_PREFIX + e.name}"
        if reanalyze:
            zoo.reanalyse_model(e, tag)
        elif not zoo.skip_model(e, tag):
            t0 = time.perf_counter()
            zoo.validate_model(e, tag)
            timed.append(time.perf_counter() - t0)
            left = len(entries) - i
            log.info("%s", _progress_line(tag, zoo.rows[-1], timed[-1])
                     + f"; elapsed {(time.perf_counter() - t_start) / 60:.1f} min"
                     + (f", about {statistics.fmean(timed) * left / 60:.0f} min left" if left else ""))
    zoo.write_summary()
    tot = method_totals(zoo.rows)
    if tot:
        log.info(f"zoo: {tot['within_5pct']} of {tot['models']} models within 5 % median |error|; {_method_text(tot, level)}")
    return {"rows": zoo.rows, "out": zoo_dir}


def _progress_line(tag: str, r: dict[str, Any], wall_s: float) -> str:
    """A validated model's line: its status, time and figures (:func:`summary_row`'s ``r``)."""
    return (f"{tag}: {r['status']} in {wall_s / 60:.1f} min"
            + ("" if r["median_abs_error_pct"] is None else
               f" (median |error| {r['median_abs_error_pct']:.1f} % wall"
               + ("" if r["median_abs_error_cpu_pct"] is None else f", {r['median_abs_error_cpu_pct']:.1f} % CPU clock")
               + ("" if r["median_abs_error_load_pct"] is None else f", {r['median_abs_error_load_pct']:.1f} % at load")
               + f"; coverage {r['coverage']}"
               + ("" if r["stability_pct"] is None else f"; stability {r['stability_pct']:.1f} % wall")
               + ("" if r["stability_cpu_pct"] is None else f", {r['stability_cpu_pct']:.1f} % CPU clock") + ")"))


class _Zoo:
    """One :func:`run_zoo` while it goes: its options (``run``: each validation's), the summary rows so far and
    the results of the models done (their residuals give the others their method error)."""

    def __init__(self, zoo_dir: Path, *, calibration: str | Path | None, level: float, num_resamples: int, seed: int,
                 run: dict[str, Any]) -> None:
        self.zoo_dir, self.calibration = zoo_dir, calibration
        self.scn_dir = ensure_dir(zoo_dir / "scenarios", "--out-dir")
        self.shared_cal = Path(calibration) if calibration else zoo_dir / "calibration.json"
        self.level, self.num_resamples, self.seed, self.run = level, num_resamples, seed, run
        self.rows: list[dict[str, Any]] = []
        self.results: dict[str, dict[str, Any]] = {}  # the models done, for the method error of the others

    def paths(self, e: Any) -> tuple[str, Path, Path]:
        """Model ``e``'s zoo name, report folder and scenario file."""
        from ddpsim.trace.models.zoo import ZOO_PREFIX

        return ZOO_PREFIX + e.name, self.zoo_dir / f"zoo-{e.name}", self.scn_dir / f"zoo-{e.name}.yaml"

    def write_summary(self) -> None:
        """The summary, with the calibration the models done were predicted with when they share one."""
        used = {r.get("calibration") for r in self.results.values() if r.get("calibration")}
        cal = Path(used.pop()) if len(used) == 1 else self.shared_cal if isfile(self.shared_cal) else None
        write_summary(self.zoo_dir, self.rows, level=self.level, results=self.results, calibration=cal)

    def add_done(self, name: str, result: dict[str, Any]) -> None:
        self.rows.append(summary_row(name, result))
        self.results[name] = result

    def keep(self, e: Any, result: dict[str, Any], rows: Sequence[dict[str, Any]], cal_path: Path,
             t0: float | None = None) -> None:
        """Give ``result`` the :func:`analyse_model` of ``rows`` (and ``wall_s`` since ``t0``); write it."""
        from ddpsim.pipeline.scenario import load_scenario

        name, mdir, scn_path = self.paths(e)
        result["analysis"] = analyse_model(
            load_scenario(str(scn_path)), rows, measure.round_traces(mdir / "validation", result["repeats"]),
            load_calibration(cal_path) if cal_path.is_file() else None,
            iterations=result["iterations"], level=self.level, num_resamples=self.num_resamples, seed=self.seed)
        if t0 is not None:
            result["wall_s"] = time.perf_counter() - t0
        write_text_atomic(mdir / "zoo.json", json.dumps(result, indent=1) + "\n")
        self.add_done(name, result)

    def reanalyse_model(self, e: Any, tag: str) -> None:
        """``--reanalyze``: a model done predicted again over the same runs (with the given calibration,
        else its recorded one when that file is there) and analysed again."""
        _, mdir, scn_path = self.paths(e)
        if not (mdir / "zoo.json").is_file():
            log.info(f"{tag}: not validated yet, nothing to analyse")
            return
        result = json.loads((mdir / "zoo.json").read_text())
        val = json.loads((mdir / "validation.json").read_text())
        cal_path = Path(self.calibration) if self.calibration else Path(val["calibration"])
        if self.calibration or cal_path.is_file():
            val = {"rows": measure.reanalyze(str(scn_path), calibration=cal_path, out_dir=self.zoo_dir,
                                           plots=False, intervals=False)["rows"]}
            result["calibration"] = str(cal_path)
        else:
            log.info(f"{tag}: its calibration {str(cal_path)!r} is gone: the recorded "
                     "predictions are kept (give --calibration to predict them again)")
        self.keep(e, result, val["rows"], cal_path)
        log.info(f"{tag}: analysed again")

    def skip_model(self, e: Any, tag: str) -> bool:
        """Whether model ``e`` is skipped: done earlier (its ``zoo.json``), or torchvision's without it."""
        from ddpsim.trace.models.zoo import torchvision_available

        name, mdir, _ = self.paths(e)
        if (mdir / "zoo.json").is_file():
            self.add_done(name, json.loads((mdir / "zoo.json").read_text()))
            log.info(f"{tag}: done earlier ({mdir / 'zoo.json'}), skipped")
            return True
        if e.source != "torchvision" or torchvision_available():
            return False
        self.rows.append(summary_row(name, {"status": "skipped: torchvision not installed"}))
        log.info(f"{tag}: skipped, torchvision is not installed (pip install \"ddpsim[zoo]\")")
        self.write_summary()
        return True

    def validate_model(self, e: Any, tag: str) -> None:
        """Write model ``e``'s scenario, validate it (the first calibrates for all) and :meth:`keep` it."""
        name, mdir, scn_path = self.paths(e)
        run = self.run
        write_text_atomic(scn_path, zoo_scenario_yaml(name, caps=run["caps"], iterations=run["iterations"],
                                                      warmup=run["warmup"]))
        log.info(f"{tag}: validating at caps {', '.join('none' if c is None else f'{c:g}' for c in run['caps'])}, "
                 f"{run['repeats']} rounds, batch {e.batch_size} per rank")
        t0 = time.perf_counter()
        try:
            res = measure.validate(str(scn_path), calibration=self.shared_cal if isfile(self.shared_cal) else None,
                                   out_dir=self.zoo_dir, **run, bucket_timing=False, num_threads=1,
                                   plots=False, intervals=False)  # analyse_model gives the intervals, on both clocks
            if not isfile(self.shared_cal) and (mdir / "calibration.json").is_file():
                write_text_atomic(self.shared_cal, (mdir / "calibration.json").read_text())
            result = {"format": "ddpsim-zoo-model", "version": 1, "model": name, "status": "done",
                      "batch_size": e.batch_size, **{k: run[k] for k in ("caps", "repeats", "iterations", "warmup")},
                      "summary": res["summary"], "analysis": None, "wall_s": None}
            self.keep(e, result, res["rows"], self.shared_cal, t0)
        except InputError as exc:
            failed = {"status": f"failed: {exc}", "wall_s": time.perf_counter() - t0}
            self.rows.append(summary_row(name, failed))
            log.warning(f"{tag}: FAILED: {exc}")
        self.write_summary()
