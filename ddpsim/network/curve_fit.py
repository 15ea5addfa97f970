"""Measured collective curves: a measured point and the curve fitted through such points, the lowest
layer of calibration (nothing of ddpsim above the trace imported), so that the executor
(:func:`executor.collectives_step.measure_ddp_overhead`) and :mod:`ddpsim.calibration.loader` share it.
:func:`fit_curve`: the medians made non-decreasing in size (``scipy.optimize.isotonic_regression``
weighted by ``num_samples``), then piecewise alpha-beta through consecutive points (every point
reproduced, continuous); above the largest size the last segment extends (the global fit's bandwidth if
its slope is not positive), below the smallest the time is the smallest size's. A global alpha-beta
(least squares on relative error, alpha >= 0, ``scipy.optimize.lsq_linear``) is also fitted and reported.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Annotated, Sequence

import numpy as np
from pydantic import Field

from ddpsim.schema import Float, Int, record
from ddpsim.trace.records import MAX_BYTES, MAX_SECONDS, Seconds


@record("calibration")
class CalibrationPoint:
    """One measured size of a curve as the calibration file holds it (``executor.runtime.stats``)."""

    size_bytes: Annotated[Int, Field(gt=0, le=MAX_BYTES)]
    time_s: Annotated[Float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
    median_s: Seconds | None = None
    p10_s: Seconds | None = None
    p90_s: Seconds | None = None
    num_samples: Annotated[Int, Field(ge=1, le=1 << 31)] | None = None
    ops_per_sample: Annotated[Int, Field(ge=1, le=1 << 31)] | None = None
    gap_ms: Annotated[Float, Field(ge=0, le=MAX_SECONDS * 1e3, allow_inf_nan=False)] | None = None


def fit_alpha_beta(sizes: Sequence[float], times: Sequence[float]) -> tuple[float, float]:
    """Least squares of ``time = alpha + size / beta`` on relative error (each point weighted
    by 1/time), subject to alpha >= 0. Returns (alpha_s, beta_bytes_per_s): beta infinite for
    a slope <= 0 and, with every size the same (no slope to fit), ``(min(times), inf)``."""
    assert len(sizes) == len(times) >= 2
    if len(set(sizes)) < 2:
        return (min(times), math.inf)
    s, t = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    # minimise sum ((alpha + slope * s_i - t_i) / t_i)^2: the rows [1, s_i] / t_i against 1
    from scipy.optimize import lsq_linear  # NOTE: on first use: slow to import, and every CLI verb imports this module

    fit = lsq_linear(np.column_stack([1.0 / t, s / t]), np.ones_like(t), bounds=([0.0, -np.inf], [np.inf, np.inf]),
                     method="bvls")
    alpha, slope = (float(v) for v in fit.x)
    return (alpha, 1.0 / slope if slope > 0 else math.inf)


@dataclass(frozen=True, kw_only=True)
class CalibratedCurve:
    """Piecewise alpha-beta through measured points (module docstring)."""

    sizes: tuple[int, ...]
    times_s: tuple[float, ...]
    alpha_s: float  # global least-squares fit, reported
    bandwidth_bytes_per_s: float  # global least-squares fit, reported

    def segment(self, size_bytes: float) -> tuple[float, float]:
        """(latency_s, seconds per byte) of the alpha-beta segment covering ``size_bytes``."""
        s, t = self.sizes, self.times_s
        if size_bytes <= s[0]:
            return (t[0], 0.0)
        # the segment [s[i], s[i + 1]] holding size_bytes; the last one beyond the largest size
        i = min(bisect.bisect_left(s, size_bytes, 1), len(s) - 1) - 1
        slope = (t[i + 1] - t[i]) / (s[i + 1] - s[i])
        if size_bytes > s[-1] and slope <= 0:
            slope = 1.0 / self.bandwidth_bytes_per_s if math.isfinite(self.bandwidth_bytes_per_s) else 0.0
            return (t[-1] - slope * s[-1], slope)
        return (t[i] - slope * s[i], slope)

    def time_s(self, size_bytes: float) -> float:
        a, per_byte = self.segment(size_bytes)
        return a + per_byte * size_bytes


def isotonic(values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """The non-decreasing sequence closest (weighted least squares) to ``values``
    (pool-adjacent-violators, ``scipy.optimize.isotonic_regression``). A larger message never
    takes less time; a noisy median that says so is pooled with its neighbour."""
    from scipy.optimize import isotonic_regression  # NOTE: on first use, as lsq_linear above

    return isotonic_regression(values, weights=weights).x.tolist()


def fit_curve(points: Sequence[CalibrationPoint]) -> CalibratedCurve:
    """Piecewise alpha-beta through the (isotonic) measured medians; see the module docstring."""
    pts = sorted(points, key=lambda p: p.size_bytes)
    sizes = tuple(p.size_bytes for p in pts)
    times = tuple(isotonic([p.time_s for p in pts], [p.num_samples or 1 for p in pts]))
    a, bw = fit_alpha_beta(sizes, times)
    return CalibratedCurve(sizes=sizes, times_s=times, alpha_s=a, bandwidth_bytes_per_s=bw)


def idle_extra_between(loop: CalibratedCurve, after: CalibratedCurve, size_bytes: int) -> float:
    """The after-compute curve minus the loop curve at ``size_bytes`` clamped to the largest
    after-compute size (beyond it the difference stays that of the largest: a wake-up latency,
    not a bandwidth), floored at 0; 0 for an empty all-reduce."""
    if size_bytes <= 0:
        return 0.0
    s = min(size_bytes, max(after.sizes))
    return max(0.0, after.time_s(s) - loop.time_s(s))
