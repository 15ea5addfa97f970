"""Comparing a validation's measurements (executor dicts read from the raw runs) with its predictions
(:class:`~ddpsim.engine.result.SimResult` s): what is compared (:class:`PointOutcome`'s row), the run
spread, the paired best-cap interval and its verdict, the host's load, and per-bucket times
(:mod:`ddpsim.validation`: what is measured and why these statistics)."""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ddpsim.formats import MIN_HOST_CPU_S, host_shares, quantile


@dataclass
class PointOutcome:
    """What is known about one validated point so far."""

    point_id: str
    bucket_cap_mb: float | tuple[float, ...] | None                 # a tuple: a bucket_cap_mb_list point
    predicted_s: float | None = None                              # the simulated steady steps' mean
    predicted_p50_s: float | None = None                          # ... and their median
    predicted_buckets: list[dict[str, Any]] = field(default_factory=list)
    predicted_metrics: dict[str, Any] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)     # un-hooked executor measurements
    hooked: dict[str, Any] | None = None                          # the timing-hook run
    #: the prediction's interval (:class:`ddpsim.validation.intervals.PredictionInterval`), or None
    interval: Any = None

    def row(self) -> dict[str, Any]:
        """The compared figures: ``measured_s`` is the mean of the pooled step times (module docstring)."""
        xs = [s for r in self.runs for s in r["summary"]["step_times_s"]]
        m, med = (statistics.fmean(xs), statistics.median(xs)) if xs else (None, None)
        p10, p90 = (quantile(xs, 0.1), quantile(xs, 0.9)) if xs else (None, None)
        err = None if (m is None or self.predicted_s is None) else 100.0 * (self.predicted_s - m) / m
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
            # the prediction interval (ddpsim.validation.intervals) and whether the measured mean lies inside
            "predicted_low_s": None if self.interval is None else self.interval.low_s,
            "predicted_high_s": None if self.interval is None else self.interval.high_s,
            "in_interval": None if (self.interval is None or m is None) else self.interval.covers(m),
        }

    def host_columns(self) -> dict[str, Any]:
        """The host's load during the measured steps (:func:`host_load`): pooled over the runs,
        and each run's, in round order; empty for measurements without host counters."""
        pooled = host_load(self.runs)
        per = [host_load([r]) for r in self.runs]
        if pooled is None or any(h is None for h in per):
            return dict.fromkeys(("host_other_pct", "host_steal_pct", "ranks_cpu_pct", "run_host_other_pct",
                                  "run_host_steal_pct"))
        return {"host_other_pct": pooled["other_pct"], "host_steal_pct": pooled["steal_pct"],
                "ranks_cpu_pct": pooled["ranks_pct"],
                "run_host_other_pct": " ".join(f"{h['other_pct']:.3g}" for h in per),
                "run_host_steal_pct": " ".join(f"{h['steal_pct']:.3g}" for h in per)}


def host_load(runs: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """The host's CPU time during the measured steps of ``runs`` (ranks' means of the
    :func:`executor.runtime.host_counters` deltas), in % (:func:`ddpsim.formats.host_shares`):
    ``other_pct`` (anything but the ranks), ``steal_pct`` (the hypervisor), ``ranks_pct``. None
    without runs or host counters, or when a run spans under :data:`MIN_HOST_CPU_S` of host CPU."""
    if not runs:
        return None
    keys, per_run, ours = ("host_busy_s", "host_steal_s", "host_all_s"), [], 0.0
    for run in runs:
        ranks = [g["iterations"] for g in run.get("ranks") or []]
        if not ranks or any("host_all_s" not in s or "cpu_s" not in s for r in ranks for s in r):
            return None
        per_run.append([statistics.fmean(sum(s[key] for s in r) for r in ranks) for key in keys])
        if per_run[-1][2] < MIN_HOST_CPU_S:  # host_all_s
            return None
        ours += sum(s["cpu_s"] for r in ranks for s in r)
    return host_shares(ours, *(sum(x) for x in zip(*per_run)))


def run_spread_pct(run_medians: Sequence[float], measured: float | None) -> float | None:
    """The noise floor: 100 * (slowest - fastest run's median) / the pooled mean; None under 2 runs."""
    if len(run_medians) < 2 or not measured:
        return None
    return 100.0 * (max(run_medians) - min(run_medians)) / measured


#: the best-cap target: the predicted-best cap measured within 2 % of the measured best
BEST_CAP_TOLERANCE_PCT = 2.0


def run_values(row: dict[str, Any], key: str = "run_means_s") -> list[float]:
    """A row's per-run figures in round order (``key``, default the mean steps: a string in the csv, a
    list, or absent)."""
    v = row.get(key) or []
    return [float(x) for x in (v.split() if isinstance(v, str) else v)]


def paired_gap_ci_pct(slow: Sequence[float], fast: Sequence[float]) -> tuple[float, float, int] | None:
    """The 95 % interval of how much slower (in %) ``slow``'s point runs than ``fast``'s, paired by
    round (the host's drift moves both alike): ``d_k = ln(slow_k / fast_k)``, interval
    ``exp(mean(d) +- t975(n-1) * sd(d) / sqrt(n)) - 1`` (``scipy.stats.ttest_1samp``). None under 2 rounds."""
    from scipy import stats  # slow to import: not at module level, every CLI verb imports this module

    d = [math.log(a / b) for a, b in zip(slow, fast)]
    if len(d) < 2:
        return None
    with warnings.catch_warnings():  # identical ratios: scipy warns of precision, the interval is the point
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = stats.ttest_1samp(d, 0.0).confidence_interval(confidence_level=0.95)
    return 100.0 * math.expm1(float(ci.low)), 100.0 * math.expm1(float(ci.high)), len(d)


#: the most rounds :func:`rounds_to_decide` looks for
MAX_ROUNDS_TO_DECIDE = 10_000


def rounds_to_decide(slow: Sequence[float], fast: Sequence[float],
                     tolerance_pct: float = BEST_CAP_TOLERANCE_PCT) -> int | None:
    """The rounds that would decide the best-cap criterion at the runs' scatter: the smallest ``n >= 2``
    with ``t975(n-1) * sd(d) / sqrt(n) < |mean(d) - ln(1 + tolerance)|`` (``d`` of :func:`paired_gap_ci_pct`);
    None under 2 paired rounds or beyond :data:`MAX_ROUNDS_TO_DECIDE`."""
    from scipy import stats

    d = [math.log(a / b) for a, b in zip(slow, fast)]
    if len(d) < 2:
        return None
    margin, sd = abs(statistics.fmean(d) - math.log1p(tolerance_pct / 100.0)), statistics.stdev(d)
    if margin <= 1e-12:  # the gap sits at the tolerance (to rounding): no number of rounds decides it
        return None
    if sd <= 1e-12:
        return 2
    n = np.arange(2, MAX_ROUNDS_TO_DECIDE + 1)
    decided = stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n) < margin  # the half-width only shrinks with n
    return int(n[decided.argmax()]) if decided.any() else None


def best_cap_verdict(gap_pct: float, ci: tuple[float, float, int] | None) -> str | None:
    """The best-cap criterion (predicted best within :data:`BEST_CAP_TOLERANCE_PCT` of the measured best):
    ``"met"`` (the same point, or the gap's 95 % interval at or under it), ``"missed"`` (above it),
    ``"unresolved"`` (across it); None without an interval."""
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
    # the larger run spread of the two best points: a gap inside it is one the runs cannot tell from noise
    a, b = best_meas.get("run_spread_pct"), best_pred.get("run_spread_pct")
    pair = None if best_meas["point"] == best_pred["point"] or a is None or b is None else max(a, b)
    pred_runs, meas_runs = run_values(best_pred), run_values(best_meas)
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
            "num_in_interval": sum(bool(r.get("in_interval")) for r in done),
            "num_with_interval": sum(r.get("in_interval") is not None for r in done),
            **host_summary(done)}


def host_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The host's load (:func:`host_load`): the points' mean and the largest run's; {} without counters."""
    if not rows or any(r.get("host_other_pct") is None for r in rows):
        return {}
    return {"host_other_pct": statistics.fmean(r["host_other_pct"] for r in rows),
            "host_other_pct_max_run": max(x for r in rows for x in run_values(r, "run_host_other_pct")),
            "host_steal_pct": statistics.fmean(r["host_steal_pct"] for r in rows),
            "host_steal_pct_max_run": max(x for r in rows for x in run_values(r, "run_host_steal_pct")),
            "ranks_cpu_pct": statistics.fmean(r["ranks_cpu_pct"] for r in rows)}


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
    """Each bucket's own all-reduce time in bucket order: ``end - max(start, the previous bucket's end)``
    (``start``: the last rank's launch, else ``launch``): one stream runs them in order, and none begins
    before every rank launched it. (Medians: one behind a large one can come out slightly negative.)"""
    out, prev = [], float("-inf")
    for b in sorted(buckets, key=lambda b: b["bucket"]):
        out.append(b["end_s"] - max(b.get("start_s", b["launch_s"]), prev))
        prev = b["end_s"]
    return out


def bucket_figures(buckets: list[dict[str, Any]]) -> dict[str, float] | None:
    """One iteration's buckets: ``span_s`` from the first one's start to the last one's (the backward under
    the overlap); ``allreduce_sum_s`` and ``last_s`` of :func:`bucket_service_s`. None without buckets."""
    if not buckets:
        return None
    starts = [b.get("start_s", b["launch_s"]) for b in buckets]
    service = bucket_service_s(buckets)
    return {"span_s": max(starts) - min(starts), "allreduce_sum_s": sum(service), "last_s": service[-1]}


def measured_bucket_times(hooked: dict[str, Any]) -> list[dict[str, Any]]:
    """Per bucket, medians over the hooked run's measured iterations of rank 0's launch and end, and of
    the LAST rank's launch (``start_s``, each from its own iteration start: the all-reduce begins then)."""
    recs = [b for b in hooked["ranks"][0]["buckets"] if b["iteration"] > hooked["warmup"]]
    last: dict[tuple[int, int], float] = {}  # (iteration, bucket) -> the last rank's launch
    for b in (b for r in hooked["ranks"] for b in r["buckets"]):
        last[b["iteration"], b["bucket"]] = max(last.get((b["iteration"], b["bucket"]), float("-inf")), b["launch_s"])
    out = []
    for k in sorted({b["bucket"] for b in recs}):
        bs = [b for b in recs if b["bucket"] == k]
        out.append({"bucket": k, "size_bytes": bs[0]["size_bytes"],
                    "launch_s": statistics.median(b["launch_s"] for b in bs),
                    "start_s": statistics.median(last[(b["iteration"], k)] for b in bs),
                    "end_s": statistics.median(b["end_s"] for b in bs)})
    return out
