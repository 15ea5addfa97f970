"""``ddpsim validate``: predicted versus measured iteration time, point by point.

For a scenario (the same YAML ``ddpsim run`` reads; its ``validation`` block says what to
run for real), :func:`validate`:

1. calibrates the machine once with ``executor collectives`` (all-reduce/broadcast curves,
   compute/comm interference, copy bandwidth) or reuses ``--calibration FILE``;
2. runs every validated point (local torchrun, gloo on CPUs) ``--repeats`` times, round-robin
   over the points so slow drift of a shared machine hits every point alike, each round's
   order rotated by one (:func:`round_order`), WITHOUT a comm hook (the iteration time that is
   compared). By default (``--launch point``) each round's trace is captured by ``executor
   trace`` in a launch of its own and each point runs in ``executor ddp`` launches of its own.
   With ``--launch round`` a round is ONE launch (``executor round``): before each point a
   slice of the trace (:data:`ROUND_TRACE_ITERS` lockstep steps), then the point under a fresh
   real DDP over the same module, so that the trace and the runs share the launch's speed and
   the moment. Then each point runs once more with the timing hook for per-bucket all-reduce
   times (a hook changes DDP's division path, so those runs are not used for the iteration
   time);
3. simulates the same points (``scenario.build_point`` + :func:`ddpsim.engine.simulate`)
   with the calibration's comm curves, interference and copy bandwidth, from the trace
   captured on all ranks at once, in lockstep (a barrier before every step and before its
   optimizer, as DDP's ranks run), in every round (the rounds' traces pooled), so that the
   trace sees the same load drift as the runs;
4. writes ``reports/<scenario>/validation.csv`` / ``.md`` / ``.json`` / ``.png``
   atomically, rewritten as each run completes, and every raw measurement under
   ``reports/<scenario>/validation/``.

Measured figures of a point pool the steady-state step times (per iteration, the mean over
ranks: ``executor.ddp_step.step_times``) of all its repeated runs: ``measured_s`` is their MEAN,
``measured_p10_s``/``p90_s`` the noise band; ``predicted_s`` is the simulated steady steps' mean
(``SimResult.summary()['iteration_mean_s']``). ``error_pct = 100 * (predicted - measured) / measured``.
The mean is compared because it is what adds up to a job's wall time (steps x mean step), and
because it is the statistic the calibration's costs are: every collective curve is the mean of
its samples (a median jumps between the two regimes of a bimodal CPU all-reduce), so the
engine predicts a mean step. A step dominated by ONE such all-reduce (the small mlp's) has a
median far from its mean (docs/VALIDATION.md, "What the figures mean"). The medians
are kept beside it (``measured_median_s``, ``predicted_p50_s``, ``error_p50_pct``).

The best-cap criterion (the predicted-best cap measured within 2 % of the measured best) is
also tested on the runs themselves: run k of every point ran in round k, so the two points'
runs pair by round, and :func:`paired_gap_ci_pct` gives the 95 % interval of the gap from
their log ratios; :func:`best_cap_verdict` says whether that interval decides the criterion
(``summary.best_cap_verdict``: met, missed or unresolved; per-run means in ``run_means_s``).

NOTE: the trace used for prediction must be captured under the run's conditions (same
model, batch size, threads per rank): a CPU trace captured with ``--num-threads 1`` is
validated with one thread per rank.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.calibration import clamped_fit_warning
from ddpsim.errors import InputError
from ddpsim.io import ensure_dir, write_text_atomic
from ddpsim.trace import quantile

CSV_COLUMNS = ("point", "bucket_cap_mb", "predicted_s", "measured_s", "measured_p10_s", "measured_p90_s",
               "error_pct", "in_band", "num_runs", "num_samples", "run_medians_s", "num_buckets_real",
               "plan_matches", "predicted_exposed_comm_s", "measured_hooked_s", "run_spread_pct",
               "measured_median_s", "predicted_p50_s", "error_p50_pct", "run_means_s",
               "host_other_pct", "host_steal_pct", "ranks_cpu_pct", "run_host_other_pct", "run_host_steal_pct")


@dataclass
class PointOutcome:
    """What is known about one validated point so far."""

    point_id: str
    bucket_cap_mb: float | None
    predicted_s: float | None = None                              # the simulated steady steps' mean
    predicted_p50_s: float | None = None                          # ... and their median
    predicted_buckets: list[dict[str, Any]] = field(default_factory=list)
    predicted_metrics: dict[str, Any] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)     # un-hooked executor measurements
    hooked: dict[str, Any] | None = None                          # the timing-hook run

    @property
    def samples(self) -> list[float]:
        return [s for r in self.runs for s in r["summary"]["step_times_s"]]

    @property
    def measured_s(self) -> float | None:
        """The mean of the pooled step times: the compared figure (see the module docstring)."""
        return statistics.fmean(self.samples) if self.samples else None

    @property
    def measured_median_s(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    def row(self) -> dict[str, Any]:
        xs = self.samples
        m = self.measured_s
        p10 = quantile(xs, 0.1) if xs else None
        p90 = quantile(xs, 0.9) if xs else None
        err = None if (m is None or self.predicted_s is None) else 100.0 * (self.predicted_s - m) / m
        med = self.measured_median_s
        err50 = None if (med is None or self.predicted_p50_s is None) else 100.0 * (self.predicted_p50_s - med) / med
        pm = [r.get("plan_matches") for r in self.runs]
        return {
            "point": self.point_id, "bucket_cap_mb": self.bucket_cap_mb, "predicted_s": self.predicted_s,
            "measured_s": m, "measured_p10_s": p10, "measured_p90_s": p90, "error_pct": err,
            "in_band": None if err is None else bool(p10 <= self.predicted_s <= p90),
            "num_runs": len(self.runs), "num_samples": len(xs),
            "run_medians_s": " ".join(f"{r['summary']['iteration_s']:.6g}" for r in self.runs),
            "num_buckets_real": len(self.runs[0]["real_buckets"]["sizes"]) if self.runs else None,
            "plan_matches": None if not pm else all(bool(x) for x in pm),
            "predicted_exposed_comm_s": self.predicted_metrics.get("exposed_comm_s"),
            "measured_hooked_s": None if self.hooked is None else self.hooked["summary"]["iteration_s"],
            "run_spread_pct": run_spread_pct([r["summary"]["iteration_s"] for r in self.runs], m),
            "measured_median_s": med, "predicted_p50_s": self.predicted_p50_s, "error_p50_pct": err50,
            # each run's mean step, in round order (run k of every point ran in round k)
            "run_means_s": " ".join(f"{statistics.fmean(r['summary']['step_times_s']):.6g}" for r in self.runs),
            **self.host_columns(),
        }

    def host_columns(self) -> dict[str, Any]:
        """The host's load during the measured steps (:func:`host_load`): pooled over the runs,
        and each run's, in round order; empty for measurements without host counters."""
        pooled = host_load(self.runs)
        per = [host_load([r]) for r in self.runs]
        if pooled is None or any(h is None for h in per):
            return {"host_other_pct": None, "host_steal_pct": None, "ranks_cpu_pct": None,
                    "run_host_other_pct": None, "run_host_steal_pct": None}
        return {"host_other_pct": pooled["other_pct"], "host_steal_pct": pooled["steal_pct"],
                "ranks_cpu_pct": pooled["ranks_pct"],
                "run_host_other_pct": " ".join(f"{h['other_pct']:.3g}" for h in per),
                "run_host_steal_pct": " ".join(f"{h['steal_pct']:.3g}" for h in per)}


#: the least host CPU time (summed over CPUs, seconds) one run's steps must span for its host
#: figures to be given: ``/proc/stat`` counts in ticks of 10 ms, each charged to the state the
#: CPU is in at the tick, so a share measured over N ticks scatters by about sqrt(p(1-p)/N):
#: 500 ticks put a 95 % share within about 1 %; the mlp's millisecond runs (20-50 ticks)
#: scatter by about 10 % and get none.
MIN_HOST_CPU_S = 5.0


def host_load(runs: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """What the host's CPUs did during the measured steps of ``runs`` (executor measurements
    whose samples hold :func:`executor.runtime.host_counters` deltas), as percentages of all
    the host's CPU time in those steps: ``other_pct``, busy with anything but the ranks
    (other processes, the kernel's own work, the launcher); ``steal_pct``, taken by the
    hypervisor; ``ranks_pct``, the ranks' own CPU time (every thread). The host's counters are
    read by every rank around its own steps; their mean over ranks is used. None when the
    samples have no host counters (measurements from before they were recorded) or a run
    spans less than :data:`MIN_HOST_CPU_S` of the host's CPU time."""
    if not runs:  # a point not run yet (validate --launch point writes the report after every run)
        return None
    sums = {"host_busy_s": 0.0, "host_steal_s": 0.0, "host_all_s": 0.0}
    ours = 0.0
    for run in runs:
        ranks = [g["iterations"] for g in run.get("ranks") or []]
        if not ranks or any("host_all_s" not in s or "cpu_s" not in s for r in ranks for s in r):
            return None
        run_sums = {key: statistics.fmean(sum(s[key] for s in r) for r in ranks) for key in sums}
        if run_sums["host_all_s"] < MIN_HOST_CPU_S:
            return None
        for key in sums:
            sums[key] += run_sums[key]
        ours += sum(s["cpu_s"] for r in ranks for s in r)
    busy, steal, total = sums["host_busy_s"], sums["host_steal_s"], sums["host_all_s"]
    return {"other_pct": 100.0 * (busy - ours) / total, "steal_pct": 100.0 * steal / total,
            "ranks_pct": 100.0 * ours / total}


def run_spread_pct(run_medians: Sequence[float], measured: float | None) -> float | None:
    """How far apart repeated runs of ONE configuration land: 100 * (slowest run's median -
    fastest run's median) / the pooled mean (``measured_s``); None with fewer than 2 runs. The measurement's
    own noise floor: a prediction cannot be checked to better than about half of it."""
    if len(run_medians) < 2 or not measured:
        return None
    return 100.0 * (max(run_medians) - min(run_medians)) / measured


def best_pair_spread_pct(best_meas: dict[str, Any], best_pred: dict[str, Any]) -> float | None:
    """The larger run spread (:func:`run_spread_pct`) of the measured-best and the predicted-best
    points: a best-cap gap inside it is one the repeated runs cannot tell from noise. None when
    they are the same point or either has no spread (fewer than 2 runs)."""
    if best_meas["point"] == best_pred["point"]:
        return None
    a, b = best_meas.get("run_spread_pct"), best_pred.get("run_spread_pct")
    return None if a is None or b is None else max(a, b)


#: two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
#: the 97.5 % quantile of the standard normal
_Z975 = 1.959963984540054
#: the best-cap target: the predicted-best cap measured within 2 % of the measured best
BEST_CAP_TOLERANCE_PCT = 2.0


def t975(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom: the table to 30, then
    the Cornish-Fisher expansion about the normal's 1.95996 (within 1e-3 of the exact value)."""
    if df < 1:
        raise ValueError(f"df: {df!r}; expected an integer >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def run_means(row: dict[str, Any]) -> list[float]:
    """A row's per-run mean steps in round order (``run_means_s``: a space-separated string in
    the csv, absent in reports written before it was kept)."""
    v = row.get("run_means_s")
    if not v:
        return []
    return [float(x) for x in (v.split() if isinstance(v, str) else v)]


def _paired_log_ratios(slow: Sequence[float], fast: Sequence[float]) -> list[float]:
    """``ln(slow_k / fast_k)`` over the rounds both points reached (run k ran in round k)."""
    return [math.log(a / b) for a, b in zip(slow, fast)]


def paired_gap_ci_pct(slow: Sequence[float], fast: Sequence[float]) -> tuple[float, float, int] | None:
    """The 95 % interval of how much slower (in %) the point of ``slow`` runs than that of
    ``fast``, from their runs paired by round: ``d_k = ln(slow_k / fast_k)`` over the rounds
    both reached, interval ``exp(mean(d) +- t975(n-1) * sd(d) / sqrt(n)) - 1`` (Student's t on
    the log ratios). Pairing by round takes out what moved both points of a round alike (the
    host's slow drift); what is left is the runs' own scatter. None with fewer than 2 rounds."""
    d = _paired_log_ratios(slow, fast)
    n = len(d)
    if n < 2:
        return None
    m, h = statistics.fmean(d), t975(n - 1) * statistics.stdev(d) / math.sqrt(n)
    return 100.0 * math.expm1(m - h), 100.0 * math.expm1(m + h), n


#: the most rounds :func:`rounds_to_decide` looks for
MAX_ROUNDS_TO_DECIDE = 10_000


def rounds_to_decide(slow: Sequence[float], fast: Sequence[float],
                     tolerance_pct: float = BEST_CAP_TOLERANCE_PCT) -> int | None:
    """How many rounds would decide the best-cap criterion if the runs went on as they did:
    the smallest ``n >= 2`` with ``t975(n-1) * sd(d) / sqrt(n) < |mean(d) - ln(1 + tolerance)|``
    for the paired log ratios ``d`` of :func:`paired_gap_ci_pct` (so that the 95 % interval
    would leave the tolerance out). None with fewer than 2 paired rounds, or when it would take
    more than :data:`MAX_ROUNDS_TO_DECIDE` (a gap at the tolerance itself is never decided)."""
    d = _paired_log_ratios(slow, fast)
    if len(d) < 2:
        return None
    margin, sd = abs(statistics.fmean(d) - math.log1p(tolerance_pct / 100.0)), statistics.stdev(d)
    if margin <= 1e-12:  # the gap sits at the tolerance (to rounding): no number of rounds decides it
        return None
    if sd <= 1e-12:
        return 2
    if (_Z975 * sd / margin) ** 2 > MAX_ROUNDS_TO_DECIDE:
        return None
    n = 2
    while t975(n - 1) * sd / math.sqrt(n) >= margin:
        n += 1
    return n


def best_cap_verdict(gap_pct: float, ci: tuple[float, float, int] | None) -> str | None:
    """Whether the runs decide the best-cap criterion (the predicted best within
    :data:`BEST_CAP_TOLERANCE_PCT` of the measured best): ``"met"`` when the predicted best IS
    the measured best (``gap_pct`` 0) or the whole 95 % interval of the gap lies at or under
    the tolerance, ``"missed"`` when it lies above it, ``"unresolved"`` when the tolerance is
    inside it; None without an interval (fewer than 2 paired rounds)."""
    if gap_pct == 0.0:
        return "met"
    if ci is None:
        return None
    lo, hi, _ = ci
    if hi <= BEST_CAP_TOLERANCE_PCT:
        return "met"
    if lo > BEST_CAP_TOLERANCE_PCT:
        return "missed"
    return "unresolved"


def summary_figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Median |error|, points in band or within 10 %, measured-best vs predicted-best."""
    done = [r for r in rows if r["error_pct"] is not None]
    if not done:
        return {}
    abs_err = [abs(r["error_pct"]) for r in done]
    ok = [r for r in done if r["in_band"] or abs(r["error_pct"]) <= 10.0]
    best_meas = min(done, key=lambda r: r["measured_s"])
    # points whose predictions tie (the same plan, e.g. every cap above a model's gradient size)
    # are all predicted best: ddpsim cannot tell them apart, so it does not pick one of them
    low = min(r["predicted_s"] for r in done)
    tied = [r for r in done if r["predicted_s"] <= low * (1.0 + 1e-9)]
    best_pred = min(tied, key=lambda r: r["measured_s"])
    gap = 100.0 * (best_pred["measured_s"] - best_meas["measured_s"]) / best_meas["measured_s"]
    spreads = [r["run_spread_pct"] for r in done if r.get("run_spread_pct") is not None]
    err50 = [abs(r["error_p50_pct"]) for r in done if r.get("error_p50_pct") is not None]
    pair = best_pair_spread_pct(best_meas, best_pred)
    pred_runs, meas_runs = run_means(best_pred), run_means(best_meas)
    ci = None if best_pred["point"] == best_meas["point"] else paired_gap_ci_pct(pred_runs, meas_runs)
    verdict = best_cap_verdict(gap, ci)
    return {"num_points": len(done), "median_abs_error_pct": statistics.median(abs_err),
            "median_abs_error_p50_pct": statistics.median(err50) if err50 else None,
            "median_run_spread_pct": statistics.median(spreads) if spreads else None,
            "max_abs_error_pct": max(abs_err), "num_in_band": sum(bool(r["in_band"]) for r in done),
            "num_in_band_or_within_10pct": len(ok), "measured_best": best_meas["point"],
            "predicted_best": best_pred["point"], "predicted_best_gap_pct": gap,
            "predicted_best_tied": [r["point"] for r in tied] if len(tied) > 1 else [],
            "best_pair_run_spread_pct": pair,
            "predicted_best_gap_within_spread": None if pair is None else gap <= pair,
            "best_pair_rounds": None if ci is None else ci[2],
            "best_pair_gap_ci95_pct": None if ci is None else [ci[0], ci[1]],
            "best_cap_verdict": verdict,
            "best_pair_rounds_to_decide": rounds_to_decide(pred_runs, meas_runs) if verdict == "unresolved" else None,
            "plan_matches_all": all(r["plan_matches"] for r in done if r["plan_matches"] is not None),
            **host_summary(done)}


def host_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The host's load over the points (:func:`host_load` per point and per run): the mean over
    points, and the largest single run's; empty when the rows have no host counters."""
    if not rows or any(r.get("host_other_pct") is None for r in rows):
        return {}
    def per_run(key: str) -> list[float]:
        return [float(x) for r in rows for x in str(r[key]).split()]

    return {"host_other_pct": statistics.fmean(r["host_other_pct"] for r in rows),
            "host_other_pct_max_run": max(per_run("run_host_other_pct")),
            "host_steal_pct": statistics.fmean(r["host_steal_pct"] for r in rows),
            "host_steal_pct_max_run": max(per_run("run_host_steal_pct")),
            "ranks_cpu_pct": statistics.fmean(r["ranks_cpu_pct"] for r in rows)}


# ---- running the executor ----------------------------------------------------------------

Runner = Callable[[list[str]], Any]


def _launch(args: list[str], *, nproc: int, num_threads: int | None, timeout_s: float,
            log_dir: Path | None = None) -> None:
    from executor.launch import launch_local

    r = launch_local(args, nproc=nproc, num_threads=num_threads, timeout_s=timeout_s)
    if r.returncode != 0:
        if log_dir is not None:  # the whole output, for a post-mortem
            write_text_atomic(log_dir / f"failed-{args[0]}-{int(time.time())}.log",
                              " ".join(r.command) + "\n--- stdout\n" + r.stdout + "\n--- stderr\n" + r.stderr)
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
                         f"(command: {' '.join(r.command)})")


CALIBRATION_ATTEMPTS = 2


def calibrate(launch: Callable[[list[str]], None], cal_path: Path, raw: Path, echo: Callable[[str], None], *,
              label: str, attempts: int = CALIBRATION_ATTEMPTS) -> Any:
    """Calibrate with ``executor collectives`` into ``cal_path`` and return the loaded
    :class:`ddpsim.calibration.Calibration` (a last clamped one is said by :func:`_announce`). A probe fit at its bound
    (:func:`ddpsim.calibration.clamped_fit_warning`: the probe's DDP run was disturbed by other
    load on the host) is measured again, up to ``attempts`` calibrations in all; each rejected
    one is kept beside the file as ``<stem>.clamped<k>.json`` (its progress file likewise)."""
    from ddpsim.calibration import load_calibration

    progress = raw / "calibration.progress.json"
    for attempt in range(1, attempts + 1):
        echo(f"validate: calibrating {label} -> {cal_path}" + (f" (attempt {attempt} of {attempts})" if attempt > 1 else ""))
        t = time.perf_counter()
        launch(["collectives", "--out", str(cal_path), "--progress", str(progress),
                "--max-bytes", "256MiB", "--repeats", "10", "--interference-repeats", "30"])
        echo(f"validate: calibration done in {time.perf_counter() - t:.0f} s")
        cal = load_calibration(cal_path)
        if attempt == attempts or cal.warning() is None:
            break
        kept = cal_path.with_name(f"{cal_path.stem}.clamped{attempt}.json")
        cal_path.replace(kept)
        if progress.exists():
            progress.replace(progress.with_name(f"{progress.stem}.clamped{attempt}.json"))
        echo(f"validate: the calibration's probe fit hit its bound (a disturbed probe run); kept as {kept}, "
             f"calibrating again")
    return _announce(cal, echo)


def validate(scenario_spec: str | Path | None, *, calibration: str | Path | None = None, out_dir: str | Path = "reports",
             caps: Sequence[float | None] | None = None, iterations: int | None = None, warmup: int | None = None,
             repeats: int = 3, bucket_timing: bool = True, nproc: int | None = None, num_threads: int | None = None,
             timeout_s: float = 900.0, plots: bool = True, capture: bool = True, launch_mode: str = "point",
             echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Validate a scenario on this machine; returns ``{"rows": [...], "summary": {...}, "out": dir}``.

    ``launch_mode``: ``"point"`` (default) captures each round's trace in a launch of its own
    and runs every point in a launch of its own; ``"round"`` runs each round in ONE executor
    launch (``executor round``: before each point a slice of the trace, then the point under
    real DDP, in the same process pair; see :mod:`executor.round_step`). A round needs points
    that differ by their cap only and a captured trace; otherwise ``"point"`` is used and said.
    Why point is the default: docs/VALIDATION.md, "Launch layouts".

    Raises:
        InputError: bad scenario, calibration or option (one line); an executor run that fails.
    """
    from ddpsim.scenario import load_scenario

    if repeats < 1:
        raise InputError(f"--repeats: {repeats!r} is not accepted; expected an integer >= 1")
    if launch_mode not in LAUNCH_MODES:
        raise InputError(f"--launch: {launch_mode!r} is not accepted; expected one of {', '.join(LAUNCH_MODES)}")
    scenario = load_scenario(scenario_spec)
    trace = scenario.load_trace()
    env = trace.environment or {}
    vs = scenario.validation
    model = (vs.model if vs and vs.model else None) or (scenario.model.name if scenario.model else None) or trace.model
    batch_size = (vs.batch_size if vs and vs.batch_size else None) or env.get("batch_size")
    if batch_size is None:
        raise InputError(f"{scenario.path}: validation.batch_size: missing and the trace has no environment.batch_size; expected an integer")
    iterations = iterations or (vs.iterations if vs else 20)
    warmup = warmup if warmup is not None else (vs.warmup if vs else 5)
    threads = num_threads or (vs.num_threads if vs and vs.num_threads else None) or env.get("num_threads") or 1
    device = (vs.device if vs and vs.device else None) or env.get("device", "cpu")
    if device != "cpu":
        raise InputError(f"{scenario.path}: validation.device: {device!r} is not accepted by local validation; "
                         f"expected cpu (on GPU nodes run 'torchrun -m executor' yourself and compare)")
    if batch_size != env.get("batch_size", batch_size):
        echo(f"validate: WARNING: batch size {batch_size} differs from the trace's {env.get('batch_size')}")
    model_args = [f"{k}={json.dumps(v)}" for k, v in ((vs.options if vs else {}) or {}).items()]
    if caps is None and vs is not None and vs.bucket_cap_mb is not None:
        caps = vs.bucket_cap_mb
    points = _select_points(scenario, caps)
    world = scenario.world_size or 2
    nproc = nproc or world
    out = ensure_dir(Path(out_dir) / scenario.name, "--out-dir")
    raw = ensure_dir(out / "validation", "--out-dir")
    trace_path = scenario.trace_path
    if trace_path is None and not capture:
        from ddpsim.trace import save_trace

        trace_path = save_trace(trace, raw / "trace.json")

    def launch(args: list[str]) -> None:
        _launch(args, nproc=nproc, num_threads=threads, timeout_s=timeout_s, log_dir=raw)

    # 0. the trace, captured under the run's conditions: every rank computing at once, once per
    #    round (a shared host's load drifts; the trace must drift with the runs) -------------------
    captured: list[Any] = []

    def capture_round(rep: int):
        from ddpsim.trace import load_trace, pool_traces, save_trace

        path = raw / f"trace.round{rep}.json"
        echo(f"validate: capturing {model} (batch {batch_size}) on {nproc} ranks at once -> {path}")
        cap_args = ["trace", "--model", model, "--batch-size", str(batch_size), "--out", str(path),
                    "--iters", str(max(8, min(iterations, 20))), "--warmup", "3"]
        for a in model_args:
            cap_args += ["--model-arg", a]
        launch(cap_args)
        captured.append(load_trace(path))
        merged = pool_traces(captured)
        save_trace(merged, raw / "trace.concurrent.json")
        return merged

    if launch_mode == "round" and not capture:
        echo("validate: --scenario-trace: the scenario's trace is not captured in the runs' launches; "
             "one launch per point (--launch point)")
        launch_mode = "point"
    if launch_mode == "round" and not all(p.point_id == _cap_point_id(p.bucket_cap_mb) for p in points):
        echo("validate: the points differ by more than their cap; one launch per point (--launch point)")
        launch_mode = "point"
    if capture and launch_mode == "point":
        trace, trace_path = capture_round(1), raw / "trace.concurrent.json"
    elif capture:
        trace_path = raw / "trace.concurrent.json"

    # 1. calibration -------------------------------------------------------------------------
    cal_path = Path(calibration) if calibration else scenario.calibration_path
    if cal_path is None:
        cal_path = out / "calibration.json"
        cal = calibrate(launch, cal_path, raw, echo, label=f"{nproc} gloo ranks x {threads} thread(s)")
    else:
        cal = _load_calibration(cal_path, echo)

    # 2. predictions -------------------------------------------------------------------------
    outcomes: dict[str, PointOutcome] = {p.point_id: PointOutcome(point_id=p.point_id, bucket_cap_mb=p.bucket_cap_mb)
                                         for p in points}

    def flush() -> None:
        rows = [o.row() for o in outcomes.values()]
        write_reports(out, scenario, rows, outcomes, cal_path=cal_path, trace_path=trace_path, model=model, batch_size=batch_size,
                      threads=threads, nproc=nproc, iterations=iterations, warmup=warmup, repeats=repeats, plots=plots,
                      calibration=cal, malloc=(trace.environment or {}).get("malloc"), launch=launch_mode)

    # 3. measurements, round-robin -------------------------------------------------------------
    common = ["--model", model, "--batch-size", str(batch_size), "--iterations", str(iterations), "--warmup", str(warmup),
              "--timeout-s", str(min(timeout_s, 600.0))]
    for a in model_args:
        common += ["--model-arg", a]
    if not scenario.ddp.broadcast_buffers:
        common.append("--no-broadcast-buffers")

    def record(p: Any, rep: int, mpath: Path) -> None:
        o = outcomes[p.point_id]
        o.runs.append(json.loads(mpath.read_text()))
        r = o.row()
        echo(f"validate: {p.point_id:14s} run {rep}/{repeats}: measured {o.runs[-1]['summary']['iteration_s'] * 1e3:9.2f} ms"
             f"  plan_matches {str(o.runs[-1].get('plan_matches')).lower()}  (pooled {r['measured_s'] * 1e3:.2f} ms,"
             f" predicted {r['predicted_s'] * 1e3:.2f}, error {r['error_pct']:+.1f} %)")

    if launch_mode == "round":
        from ddpsim.trace import load_trace, pool_traces, save_trace

        for rep in range(1, repeats + 1):
            order = round_order(points, rep)
            echo(f"validate: round {rep}/{repeats} in one launch: a trace slice then real DDP at "
                 f"{', '.join(p.point_id for p in order)}")
            launch(["round", *common, "--caps", ",".join(_cap_arg(p.bucket_cap_mb) for p in order),
                    "--trace-iters", str(ROUND_TRACE_ITERS), "--round", str(rep), "--out-dir", str(raw),
                    *_options(scenario, points[0])])
            captured.append(load_trace(raw / f"trace.round{rep}.json"))
            trace = pool_traces(captured)
            save_trace(trace, trace_path)
            _predict(scenario, points, outcomes, trace, cal, echo)
            for p in order:
                record(p, rep, raw / f"{p.point_id}.run{rep}.json")
            flush()
    else:
        _predict(scenario, points, outcomes, trace, cal, echo)
        for rep in range(1, repeats + 1):
            if capture and rep > 1:
                trace = capture_round(rep)
                _predict(scenario, points, outcomes, trace, cal, echo)
            for p in round_order(points, rep):
                mpath = raw / f"{p.point_id}.run{rep}.json"
                launch(["ddp", *common, "--trace", str(trace_path), "--bucket-cap-mb", _cap_arg(p.bucket_cap_mb),
                        *_options(scenario, p), "--out", str(mpath)])
                record(p, rep, mpath)
                flush()
    common += ["--trace", str(trace_path)]
    if bucket_timing:
        for p in points:
            mpath = raw / f"{p.point_id}.hooked.json"
            try:
                launch(["ddp", *common, "--bucket-cap-mb", _cap_arg(p.bucket_cap_mb), *_options(scenario, p),
                        "--timing-hook", "--out", str(mpath)])
            except InputError as exc:  # per-bucket timing is extra: report it, keep the validation
                echo(f"validate: WARNING: {p.point_id}: the timing-hook run failed, no measured bucket times: {exc}")
                continue
            outcomes[p.point_id].hooked = json.loads(mpath.read_text())
            flush()
    rows = [o.row() for o in outcomes.values()]
    flush()
    return {"rows": rows, "summary": summary_figures(rows), "out": out}


#: how ``validate`` runs a round: ``round`` (one launch, :mod:`executor.round_step`) or ``point``
LAUNCH_MODES = ("round", "point")
#: recorded trace steps captured before each point of a one-launch round; over 5 points and 3
#: rounds that is 30 steps, more than the 8-20 of a round's own capture in ``point`` mode
ROUND_TRACE_ITERS = 2


def _cap_point_id(cap: float | None) -> str:
    from executor.round_step import point_id

    return point_id(cap)


def _cap_arg(cap: float | None) -> str:
    return "none" if cap is None else f"{cap:g}"


def round_order(points: Sequence[Any], rep: int) -> list[Any]:
    """The order of round ``rep`` (1-based): the points rotated by ``rep - 1``, so that over as
    many rounds as points each point runs once in each position. The first run after a round's
    trace capture can sit a few % off its round's median on a CPU host (4-6 % in some runs on
    the 2-vCPU host, slower for bert-base, faster for the other three); with a fixed order, whether that belongs to the
    position or to the point cannot be told."""
    k = (rep - 1) % len(points) if points else 0
    return list(points[k:]) + list(points[:k])


def _select_points(scenario: Any, caps: Sequence[float | None] | None) -> list[Any]:
    """The scenario's points at ``caps`` (all of them when None; a cap the sweep lacks is the
    base point at that cap)."""
    points = scenario.points()
    if caps is not None:
        wanted = list(caps)
        points = [p for p in points if p.bucket_cap_mb in wanted]
        missing = [c for c in wanted if c not in {p.bucket_cap_mb for p in points}]
        if missing:
            from dataclasses import replace

            base = scenario.base_point()
            points += [replace(base, bucket_cap_mb=c) for c in missing]
    return points


def _predict(scenario: Any, points: Sequence[Any], outcomes: dict[str, PointOutcome], trace: Any, cal: Any,
             echo: Callable[[str], None]) -> None:
    from ddpsim.engine import simulate

    for p in points:
        inputs = scenario.build_point(p, trace=trace, calibration=cal)
        res = simulate(inputs.trace, inputs.plan, inputs.comm, inputs.config)
        o = outcomes[p.point_id]
        o.predicted_metrics = res.summary()
        o.predicted_s = o.predicted_metrics["iteration_mean_s"]
        o.predicted_p50_s = o.predicted_metrics["iteration_p50_s"]
        o.predicted_buckets = predicted_bucket_times(res)
        echo(f"validate: {p.point_id:14s} predicted {o.predicted_s * 1e3:9.2f} ms  ({len(inputs.plan.steady)} buckets,"
             f" trace of {len(trace.iterations)} iterations)")


def reanalyze(scenario_spec: str | Path | None, *, calibration: str | Path | None = None, out_dir: str | Path = "reports",
              plots: bool = True, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Rebuild a validation report from the raw measurements a :func:`validate` run left under
    ``<out_dir>/<scenario>/validation/`` -- nothing is run: every run's step times are
    recomputed from its per-rank records with ``executor.ddp_step.summarize``, and the points
    are simulated again from the pooled trace (``trace.concurrent.json``, or the one
    ``validation.json`` names; when that path is gone, the file of the same name under
    ``validation/``, so a moved report folder still rebuilds) with the calibration
    ``validation.json`` names (or ``calibration``). For a changed engine, statistic or
    calibration, without measuring again.

    Raises:
        InputError: no earlier validation there, or a raw file missing or unreadable (one line).
    """
    from ddpsim.scenario import load_scenario
    from ddpsim.trace import load_trace
    from executor.ddp_step import summarize

    scenario = load_scenario(scenario_spec)
    out = Path(out_dir) / scenario.name
    raw = out / "validation"
    old_path = out / "validation.json"
    try:
        old = json.loads(old_path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"--reanalyze: {str(old_path)!r} is not readable ({exc}); expected the validation.json of an "
                         f"earlier 'ddpsim validate {scenario.name}' (run it first)") from None
    cal_path = Path(calibration) if calibration else Path(old["calibration"])
    cal = _load_calibration(cal_path, echo)
    trace_path = report_trace_path(old, raw)
    trace = load_trace(trace_path)
    points = _select_points(scenario, [r["bucket_cap_mb"] for r in old["rows"]])
    outcomes = {p.point_id: PointOutcome(point_id=p.point_id, bucket_cap_mb=p.bucket_cap_mb) for p in points}

    def measurement(path: Path) -> dict[str, Any]:
        try:
            m = json.loads(path.read_text())
            m["summary"] = {**m["summary"], **summarize([r["iterations"] for r in m["ranks"]])}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"--reanalyze: {str(path)!r} is not a readable executor measurement ({exc}); "
                             f"expected the ddp runs 'ddpsim validate' wrote") from None
        return m

    for p in points:
        o = outcomes[p.point_id]
        rep = 1
        while (raw / f"{p.point_id}.run{rep}.json").exists():
            o.runs.append(measurement(raw / f"{p.point_id}.run{rep}.json"))
            rep += 1
        if not o.runs:
            raise InputError(f"--reanalyze: {str(raw / (p.point_id + '.run1.json'))!r} is missing; expected the raw "
                             f"runs of every point of {str(old_path)!r}")
        if (raw / f"{p.point_id}.hooked.json").exists():
            o.hooked = measurement(raw / f"{p.point_id}.hooked.json")
    _predict(scenario, points, outcomes, trace, cal, echo)
    rows = [o.row() for o in outcomes.values()]
    write_reports(out, scenario, rows, outcomes, cal_path=cal_path, trace_path=trace_path, model=old["model"],
                  batch_size=old["batch_size"], threads=old["num_threads"], nproc=old["world_size"],
                  iterations=old["iterations"], warmup=old["warmup"], repeats=max(len(o.runs) for o in outcomes.values()),
                  plots=plots, calibration=cal, reanalyzed=True, malloc=(trace.environment or {}).get("malloc"),
                  launch=runs_launch_mode(outcomes.values()) or old.get("launch"))
    return {"rows": rows, "summary": summary_figures(rows), "out": out}


def runs_launch_mode(outcomes: Any) -> str | None:
    """``"round"`` when the raw runs were measured by ``executor round`` (they carry
    ``launch.kind``), else None: a run of ``executor ddp`` does not say how it was launched."""
    runs = [r for o in outcomes for r in o.runs]
    if any((r.get("launch") or {}).get("kind") == "round" for r in runs):
        return "round"
    return None


def report_trace_path(data: dict[str, Any], raw: Path) -> Path:
    """The pooled trace a ``validation.json`` (``data``) names; when that path is gone and
    ``raw`` (the report's ``validation/`` folder) holds a file of the same name, that one: the
    report folder was moved (or cloned) with its own copy."""
    path = Path(data["trace"])
    if not path.is_file() and (raw / path.name).is_file():
        return raw / path.name
    return path


def _load_calibration(path: Path, echo: Callable[[str], None]) -> Any:
    """The calibration a validation predicts with; a probe fit at its bound is called out."""
    from ddpsim.calibration import load_calibration

    return _announce(load_calibration(path), echo)


def _announce(cal: Any, echo: Callable[[str], None]) -> Any:
    """``cal``, after echoing its warning (a probe fit at its bound), if any."""
    msg = cal.warning()
    if msg:
        echo(f"validate: WARNING: {msg}")
    return cal


def _interference_record(raw: dict[str, Any], cal: Any) -> dict[str, Any] | None:
    """The slowdowns the prediction used: the probe-fitted ones when the calibration has a
    probe (``ddpsim/interference_fit.py``), with the microbenchmark's beside them."""
    if cal is None or cal.interference is None:
        return raw.get("interference")
    rec: dict[str, Any] = {"compute_slowdown": cal.interference.compute_slowdown,
                           "comm_slowdown": cal.interference.comm_slowdown}
    if cal.interference_fit is not None:
        mb = cal.interference_microbenchmark
        rec["fitted_to_probe"] = dict(cal.interference_fit)
        rec["microbenchmark"] = {"compute_slowdown": mb.compute_slowdown, "comm_slowdown": mb.comm_slowdown}
        if cal.probe_forward_factor is not None:
            rec["fitted_to_probe"]["probe_forward_factor"] = cal.probe_forward_factor
    return rec


def _options(scenario: Any, point: Any) -> list[str]:
    out = []
    if point.find_unused_parameters:
        out.append("--find-unused-parameters")
    if scenario.ddp.static_graph:
        out.append("--static-graph")
    if point.gradient_as_bucket_view:
        out.append("--gradient-as-bucket-view")
    if point.comm_hook != "none":
        raise InputError(f"sweep.comm_hook: {point.comm_hook!r} is not accepted by validate; expected none")
    return out


def predicted_bucket_times(result: Any) -> list[dict[str, Any]]:
    """Per bucket of the first steady iteration (rank 0): launch, start (the collective began:
    every rank had launched it and the stream was free) and end, from the iteration start."""
    steady = result.steady_iterations()
    if not steady:
        return []
    it = min(steady, key=lambda s: (s.iteration, s.rank))
    return [{"bucket": b.bucket, "size_bytes": b.size_bytes, "launch_s": b.launch_s - it.start_s,
             "start_s": b.start_s - it.start_s, "end_s": b.end_s - it.start_s}
            for b in sorted(result.buckets, key=lambda b: b.bucket) if b.iteration == it.iteration and b.rank == it.rank]


def bucket_service_s(buckets: list[dict[str, Any]]) -> list[float]:
    """Each bucket's own all-reduce time, in bucket order (the output of
    :func:`predicted_bucket_times` or :func:`measured_bucket_times`): ``end - max(start, the
    previous bucket's end)``, ``start`` being the last rank's launch (``launch`` where a record
    has no ``start_s``) -- one communication stream runs them in bucket order, so a bucket
    launched while the one before it still runs waits for it first, and no all-reduce begins
    before every rank launched it. The raw ``end - launch`` counts both waits; this does not.
    (Measured times are per-bucket medians over iterations, so a small bucket right behind a
    large one can come out slightly negative.)"""
    out, prev = [], float("-inf")
    for b in sorted(buckets, key=lambda b: b["bucket"]):
        out.append(b["end_s"] - max(b.get("start_s", b["launch_s"]), prev))
        prev = b["end_s"]
    return out


def bucket_figures(buckets: list[dict[str, Any]]) -> dict[str, float] | None:
    """Figures of one iteration's buckets (records as :func:`bucket_service_s` takes):
    ``first_start_s``, the first bucket's start; ``span_s``, from there to the last bucket's
    start (backward compute under the overlap, on the rank that launches last);
    ``allreduce_sum_s``, the buckets' own all-reduce times added up; ``last_s``, the last
    bucket's. None without buckets."""
    if not buckets:
        return None
    starts = [b.get("start_s", b["launch_s"]) for b in buckets]
    service = bucket_service_s(buckets)
    return {"first_start_s": min(starts), "span_s": max(starts) - min(starts), "allreduce_sum_s": sum(service),
            "last_s": service[-1]}


def measured_bucket_times(hooked: dict[str, Any]) -> list[dict[str, Any]]:
    """Per bucket, the median launch and end over the hooked run's measured iterations (rank 0),
    and the median of the LAST rank's launch (``start_s``; each rank's times are from its own
    iteration start): an all-reduce begins once every rank has launched it, so on a host where
    one rank falls behind in backward, rank 0's ``end - launch`` also holds its wait for the
    other rank."""
    recs = [b for b in hooked["ranks"][0]["buckets"] if b["iteration"] > hooked["warmup"]]
    last: dict[tuple[int, int], float] = {}
    for r in hooked["ranks"]:
        for b in r["buckets"]:
            key = (b["iteration"], b["bucket"])
            last[key] = max(last.get(key, float("-inf")), b["launch_s"])
    out = []
    for k in sorted({b["bucket"] for b in recs}):
        bs = [b for b in recs if b["bucket"] == k]
        out.append({"bucket": k, "size_bytes": bs[0]["size_bytes"],
                    "launch_s": statistics.median(b["launch_s"] for b in bs),
                    "start_s": statistics.median(last[(b["iteration"], k)] for b in bs),
                    "end_s": statistics.median(b["end_s"] for b in bs)})
    return out


# ---- reports ---------------------------------------------------------------------------------

def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def write_reports(out: Path, scenario: Any, rows: list[dict[str, Any]], outcomes: dict[str, PointOutcome], *,
                  cal_path: Path, trace_path: Path, model: str, batch_size: int, threads: int, nproc: int, iterations: int, warmup: int,
                  repeats: int, plots: bool, calibration: Any = None, reanalyzed: bool = False,
                  malloc: str | None = None, launch: str | None = None) -> None:
    """Write ``validation.{csv,json,md}`` (and the plot). ``malloc``: the allocator mode the
    executor recorded in the prediction trace (``environment.malloc``); traces captured before
    the executor's ``--malloc`` have none, and then the reports do not mention it."""
    csv = ",".join(CSV_COLUMNS) + "\n" + "".join(",".join(_fmt(r[c]) for c in CSV_COLUMNS) + "\n" for r in rows)
    write_text_atomic(out / "validation.csv", csv)
    summ = summary_figures(rows)
    cal = json.loads(Path(cal_path).read_text())
    data = {"format": "ddpsim-validation", "version": 1, "scenario": scenario.name, "model": model,
            "batch_size": batch_size, "num_threads": threads, "world_size": nproc, "iterations": iterations,
            "warmup": warmup, "repeats": repeats, "calibration": str(cal_path), "trace": str(trace_path),
            "interference": _interference_record(cal, calibration), "copy_bandwidth_bytes_per_s": cal.get("copy_bandwidth_bytes_per_s"),
            # the loaded calibration's (recomputed against the idle-launch charge when it can be:
            # ddpsim.calibration.consistent_ddp_overhead), and the file's own figure beside it
            "ddp_iteration_overhead_s": (cal.get("ddp_iteration_overhead_s") if calibration is None
                                         else calibration.ddp_iteration_overhead_s),
            "ddp_iteration_overhead_measured_s": cal.get("ddp_iteration_overhead_s"),
            "reanalyzed": reanalyzed, "summary": summ, "rows": rows,
            "buckets": {k: {"predicted": o.predicted_buckets,
                            "measured": measured_bucket_times(o.hooked) if o.hooked else []} for k, o in outcomes.items()}}
    if malloc is not None:
        data["malloc"] = malloc
    if launch is not None:
        data["launch"] = launch
    write_text_atomic(out / "validation.json", json.dumps(data, indent=1) + "\n")
    write_text_atomic(out / "validation.md", markdown(data))
    if plots and any(r["measured_s"] is not None for r in rows):
        from ddpsim.plots import save_figure

        save_figure(validation_figure(data), out / "validation.png")


def markdown(data: dict[str, Any]) -> str:
    s = data["summary"]
    inter = data.get("interference") or {}
    lines = [f"# Validation: {data['scenario']}", "",
             f"Real DDP ({data['world_size']} gloo ranks on this CPU host, {data['num_threads']} thread(s) per rank; "
             f"model `{data['model']}`, batch {data['batch_size']} per rank; {data['warmup']} warm-up + "
             f"{data['iterations']} measured iterations x {data['repeats']} runs per point, round-robin) against "
             f"ddpsim's prediction from the scenario's trace and ONE machine calibration (`{data['calibration']}`: "
             f"compute_slowdown {inter.get('compute_slowdown', 1.0):.3f}"
             + (f" (fitted to the calibration's DDP probe"
                + (f", whose forward ran {inter['fitted_to_probe']['probe_forward_factor']:.3f}x its trace's under DDP"
                   if "probe_forward_factor" in inter.get("fitted_to_probe", {}) else "")
                + f"; the microbenchmark's: {inter['microbenchmark']['compute_slowdown']:.3f})"
                if inter.get("fitted_to_probe") else "")
             + f", comm_slowdown {inter.get('comm_slowdown', 1.0):.3f}"
             + ("" if data.get("ddp_iteration_overhead_s") is None else
                f", DDP overhead {data['ddp_iteration_overhead_s'] * 1e3:.3f} ms per iteration"
                + ("" if data.get("ddp_iteration_overhead_measured_s") in (None, data["ddp_iteration_overhead_s"]) else
                   f" (the executor's residue against the loop curve: {data['ddp_iteration_overhead_measured_s'] * 1e3:.3f} ms)"))
             + ").",
             "", f"Prediction trace: `{data['trace']}`.", ""]
    warn = clamped_fit_warning(inter.get("fitted_to_probe"))
    if warn:
        lines += [f"**WARNING: {warn}.**", ""]
    lines += ["Measured = mean of the pooled steady-state step times (per iteration, the mean over ranks) of all runs, "
              "predicted = mean of the simulated steady steps: the mean is what adds up to a job's wall time, and the "
              "calibration's costs are means; band = the measured p10..p90. The medians (`measured_median_s`, "
              "`predicted_p50_s`, `error_p50_pct` in `validation.csv`) are compared too. No GPU was used: gloo on CPU."
              + ("" if data.get("malloc") is None else
                 f" Allocator of every rank, trace capture and runs alike: {data['malloc']} (the executor's `--malloc`).")
              + {None: "", "point": " Launches: one per point and run, the round's trace in a launch of its own (`--launch point`).",
                 "round": " Launches: one per round (`executor round`): before each point a slice of the trace, then the "
                          "point under a fresh real DDP, in the same process pair (`--launch round`)."}[data.get("launch")],
              ""]
    if data.get("reanalyzed"):
        lines += ["Rebuilt from the raw runs under `validation/` by `ddpsim validate --reanalyze` (nothing run again: "
                        "step times recomputed from the per-rank records, every point simulated again).", ""]
    if s:
        lines += [f"* median |error|: **{s['median_abs_error_pct']:.1f} %** (max {s['max_abs_error_pct']:.1f} %) over {s['num_points']} points"
                  + ("" if s.get("median_abs_error_p50_pct") is None else
                     f"; medians against medians: {s['median_abs_error_p50_pct']:.1f} %"),
                  f"* inside the measured band: {s['num_in_band']}/{s['num_points']}; in band or within 10 %: "
                  f"{s['num_in_band_or_within_10pct']}/{s['num_points']}",
                  f"* measured best: `{s['measured_best']}`; predicted best: `{s['predicted_best']}` "
                  + (f"(tied in the prediction with {', '.join('`' + p + '`' for p in s['predicted_best_tied'] if p != s['predicted_best'])}, "
                     f"the fastest measured of them named; " if s.get("predicted_best_tied") else "(")
                  + f"its measured time is {s['predicted_best_gap_pct']:.1f} % above the measured best"
                  + ("" if s.get("best_pair_run_spread_pct") is None else
                     f"; {'inside' if s['predicted_best_gap_within_spread'] else 'beyond'} the two points' run spread of "
                     f"{s['best_pair_run_spread_pct']:.1f} %"
                     + (": the repeated runs cannot tell them apart" if s["predicted_best_gap_within_spread"] else ""))
                  + ("" if s.get("best_pair_gap_ci95_pct") is None else
                     f"; paired by round over {s['best_pair_rounds']} rounds, the gap's 95 % interval is "
                     f"{s['best_pair_gap_ci95_pct'][0]:+.1f} to {s['best_pair_gap_ci95_pct'][1]:+.1f} %: "
                     + {"met": f"the best-cap criterion (within {BEST_CAP_TOLERANCE_PCT:g} %) is met",
                        "missed": f"the predicted best is slower than the measured best by more than {BEST_CAP_TOLERANCE_PCT:g} %",
                        "unresolved": f"these runs do not decide the best-cap criterion (within {BEST_CAP_TOLERANCE_PCT:g} %)"
                        + ("" if s.get("best_pair_rounds_to_decide") is None else
                           f"; at the runs' scatter, about {s['best_pair_rounds_to_decide']} rounds would")
                        }[s["best_cap_verdict"]])
                  + ")",
                  f"* real DDP's rebuilt buckets equal ddpsim's plan at every point: {str(s['plan_matches_all']).lower()}"]
        if s.get("median_run_spread_pct") is not None:
            lines.append(f"* run-to-run spread (slowest minus fastest run's median at one point, over the measured): "
                         f"median {s['median_run_spread_pct']:.1f} % over the points -- the measurement's own noise floor")
        if s.get("host_other_pct") is not None:
            lines.append(f"* the host's CPUs during the measured steps (`/proc/stat`, read by every rank around each step): "
                         f"the ranks {s['ranks_cpu_pct']:.1f} % of their time, other work {s['host_other_pct']:.1f} % "
                         f"(the busiest run {s['host_other_pct_max_run']:.1f} %), stolen by the hypervisor "
                         f"{s['host_steal_pct']:.1f} % (the most in one run {s['host_steal_pct_max_run']:.1f} %); "
                         "per point in the table, per run in `validation.csv`")
        lines.append("")
    host = any(r.get("host_other_pct") is not None for r in data["rows"])
    lines += ["| point | predicted | measured | p10 | p90 | error | in band | runs | run spread | buckets | plan matches |"
              + (" other load | steal |" if host else ""),
              "|---|---:|---:|---:|---:|---:|:-:|---:|---:|---:|:-:|" + ("---:|---:|" if host else "")]
    def ms(v: Any) -> str:
        return "" if v is None else f"{v * 1e3:.2f} ms"

    for r in data["rows"]:
        err = "" if r["error_pct"] is None else f"{r['error_pct']:+.1f} %"
        band = "" if r["in_band"] is None else ("yes" if r["in_band"] else "no")
        pm = "" if r["plan_matches"] is None else str(r["plan_matches"]).lower()
        lines.append(f"| {r['point']} | {ms(r['predicted_s'])} | {ms(r['measured_s'])} | {ms(r['measured_p10_s'])} | "
                     f"{ms(r['measured_p90_s'])} | {err} | {band} | {r['num_runs']} | "
                     f"{'' if r.get('run_spread_pct') is None else format(r['run_spread_pct'], '.1f') + ' %'} | "
                     f"{_fmt(r['num_buckets_real'])} | {pm} |"
                     + ("" if not host else
                        f" {'' if r.get('host_other_pct') is None else format(r['host_other_pct'], '.1f') + ' %'} | "
                        f"{'' if r.get('host_steal_pct') is None else format(r['host_steal_pct'], '.1f') + ' %'} |"))
    lines += ["", "Per-bucket launch, start and end times (from the iteration's start; predicted: the first steady "
              "iteration; measured: medians over the hooked run's iterations) are in "
              "`validation.json` and `validation.png`; the measured ones come from a separate run with a timing comm "
              "hook (a hook makes DDP skip the fused division, so that run's iteration time is not the one compared: "
              "column `measured_hooked_s` of `validation.csv`).", ""]
    timed = [(k, bucket_figures(b["measured"]), bucket_figures(b["predicted"]), len(b["measured"]))
             for k, b in (data.get("buckets") or {}).items() if b.get("measured") and b.get("predicted")]
    if timed:
        lines += ["Per bucket, measured (the hooked run: medians over its iterations) / predicted, in ms. Each bucket's "
                  "times count from its start, the last rank's launch: `backward span` runs from the first bucket's "
                  "start to the last one's (backward compute under the overlap, on the rank that launches last); the "
                  "all-reduce times leave out the waits for that rank and for the previous bucket.", "",
                  "| point | buckets | backward span | all-reduce time, summed | last bucket's all-reduce |",
                  "|---|---:|---:|---:|---:|"]
        for k, m, p, n in timed:
            lines.append(f"| {k} | {n} | {m['span_s'] * 1e3:.1f} / {p['span_s'] * 1e3:.1f} | "
                         f"{m['allreduce_sum_s'] * 1e3:.1f} / {p['allreduce_sum_s'] * 1e3:.1f} | "
                         f"{m['last_s'] * 1e3:.1f} / {p['last_s'] * 1e3:.1f} |")
        lines.append("")
    return "\n".join(lines)


def validation_figure(data: dict[str, Any]) -> Any:
    from ddpsim.plots import _plt

    plt = _plt()
    rows = [r for r in data["rows"] if r["measured_s"] is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    x = list(range(len(rows)))
    meas = [r["measured_s"] * 1e3 for r in rows]
    # the mean may lie outside p10..p90 when a few steps are far out: the bar then starts at the mean
    lo = [max(0.0, r["measured_s"] - r["measured_p10_s"]) * 1e3 for r in rows]
    hi = [max(0.0, r["measured_p90_s"] - r["measured_s"]) * 1e3 for r in rows]
    ax1.errorbar(x, meas, yerr=[lo, hi], fmt="o", color="#4c72b0", capsize=4, label="measured (mean, p10-p90)")
    ax1.plot(x, [r["predicted_s"] * 1e3 for r in rows], "s--", color="#dd8452", label="predicted (mean)")
    ax1.set_xticks(x, [r["point"] for r in rows], rotation=20)
    ax1.set_ylabel("iteration time (ms)")
    ax1.set_title(f"{data['scenario']}: iteration time per point")
    ax1.legend()
    ax1.set_ylim(bottom=0)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (k, b) in enumerate(data["buckets"].items()):
        c = colors[i % len(colors)]
        if b["predicted"]:
            ax2.plot([d["bucket"] for d in b["predicted"]], [d["end_s"] * 1e3 for d in b["predicted"]], "--", color=c, marker="s", ms=3)
        if b["measured"]:
            ax2.plot([d["bucket"] for d in b["measured"]], [d["end_s"] * 1e3 for d in b["measured"]], "-", color=c, marker="o", ms=3, label=k)
    ax2.set_xlabel("bucket (launch order)")
    ax2.set_ylabel("all-reduce end from iteration start (ms)")
    ax2.set_title("bucket all-reduce end: measured (solid) vs predicted (dashed)", fontsize=10)
    if any(b["measured"] for b in data["buckets"].values()):
        ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig
