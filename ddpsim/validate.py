"""``ddpsim validate``'s names, kept importable here: the code lives in :mod:`ddpsim.validation`
(:mod:`~ddpsim.validation.measure`, :mod:`~ddpsim.validation.compare`,
:mod:`~ddpsim.validation.report`)."""

from __future__ import annotations

from ddpsim.validation.compare import (BEST_CAP_TOLERANCE_PCT, MAX_ROUNDS_TO_DECIDE, MIN_HOST_CPU_S, PointOutcome,
                                       best_cap_verdict, best_pair_spread_pct, bucket_figures, bucket_service_s,
                                       host_load, host_summary, measured_bucket_times, paired_gap_ci_pct,
                                       predicted_bucket_times, rounds_to_decide, run_means, run_spread_pct,
                                       summary_figures, t975)
from ddpsim.validation.measure import (CALIBRATION_ATTEMPTS, LAUNCH_MODES, ROUND_TRACE_ITERS, Runner, calibrate,
                                       reanalyze, report_trace_path, round_order, runs_launch_mode, validate)
from ddpsim.validation.report import CSV_COLUMNS, markdown, validation_figure, write_reports

__all__ = ["BEST_CAP_TOLERANCE_PCT", "CALIBRATION_ATTEMPTS", "CSV_COLUMNS", "LAUNCH_MODES", "MAX_ROUNDS_TO_DECIDE",
           "MIN_HOST_CPU_S", "PointOutcome", "ROUND_TRACE_ITERS", "Runner", "best_cap_verdict", "best_pair_spread_pct",
           "bucket_figures", "bucket_service_s", "calibrate", "host_load", "host_summary", "markdown",
           "measured_bucket_times", "paired_gap_ci_pct", "predicted_bucket_times", "reanalyze", "report_trace_path",
           "round_order", "rounds_to_decide", "run_means", "run_spread_pct", "runs_launch_mode", "summary_figures",
           "t975", "validate", "validation_figure", "write_reports"]
