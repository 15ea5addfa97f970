"""Measured collective curves: a measured point and the curve fitted through such points.

The lowest layer of calibration: stdlib only, so that the executor (which fits its own
all-reduce points, :func:`executor.collectives_step.measure_ddp_overhead`) and
:mod:`ddpsim.calibration.loader` share it.

**Piecewise alpha-beta between measured sizes** (:func:`fit_curve`). The medians
are first made non-decreasing in size (isotonic regression, weighted by ``num_samples``: a
larger message never takes less time, so a noisy dip is pooled with its neighbour). Between two
consecutive measured sizes the time is the straight line ``alpha_i + size / beta_i`` through
both points (so every measured point is reproduced exactly and the model is continuous).
Above the largest size the last segment's line extends (a bandwidth-bound regime); if that
segment's slope is not positive, the global least-squares alpha-beta's bandwidth is used.
Below the smallest size the time is that of the smallest size (latency-bound: smaller
messages are not faster than the latency floor). A global alpha-beta (least squares on
relative error) is also fitted and reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from ddpsim.errors import InputError


@dataclass(frozen=True, kw_only=True)
class CalibrationPoint:
    """One measured size: median time and spread."""

    size_bytes: int
    time_s: float
    p10_s: float | None = None
    p90_s: float | None = None
    num_samples: int | None = None

    def __post_init__(self) -> None:
        _req(isinstance(self.size_bytes, int) and not isinstance(self.size_bytes, bool) and self.size_bytes > 0,
             "size_bytes", self.size_bytes, "an integer > 0")
        _req(_num(self.time_s) and self.time_s > 0, "time_s", self.time_s, "a number > 0 (seconds)")
        for name in ("p10_s", "p90_s"):
            v = getattr(self, name)
            _req(v is None or (_num(v) and v >= 0), name, v, "a number >= 0 or null")
        _req(self.num_samples is None or (isinstance(self.num_samples, int) and not isinstance(self.num_samples, bool)
                                          and self.num_samples >= 1), "num_samples", self.num_samples,
             "an integer >= 1 or null")


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _req(ok: bool, field_name: str, value: Any, accepted: str) -> None:
    if not ok:
        raise InputError(f"calibration.{field_name}: {value!r} is not accepted; expected {accepted}")


def fit_alpha_beta(sizes: Sequence[float], times: Sequence[float]) -> tuple[float, float]:
    """Least squares of ``time = alpha + size / beta`` on relative error (each point weighted
    by 1/time). Returns (alpha_s, beta_bytes_per_s); alpha clamped at >= 0."""
    assert len(sizes) == len(times) >= 2
    w = [1.0 / t for t in times]
    # minimise sum (w_i (a + b s_i - t_i))^2
    sww = sum(x * x for x in w)
    sws = sum(x * x * s for x, s in zip(w, sizes))
    swss = sum(x * x * s * s for x, s in zip(w, sizes))
    swt = sum(x * x * t for x, t in zip(w, times))
    swst = sum(x * x * s * t for x, s, t in zip(w, sizes, times))
    det = sww * swss - sws * sws
    if det <= 0:
        return (min(times), math.inf)
    a = (swt * swss - sws * swst) / det
    b = (sww * swst - sws * swt) / det
    if a < 0:  # refit through the origin
        a = 0.0
        b = swst / swss
    return (a, 1.0 / b if b > 0 else math.inf)


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
        i = len(s) - 2
        for k in range(len(s) - 1):
            if size_bytes <= s[k + 1]:
                i = k
                break
        slope = (t[i + 1] - t[i]) / (s[i + 1] - s[i])
        if size_bytes > s[-1] and slope <= 0:
            slope = 1.0 / self.bandwidth_bytes_per_s if math.isfinite(self.bandwidth_bytes_per_s) else 0.0
            return (t[-1] - slope * s[-1], slope)
        return (t[i] - slope * s[i], slope)

    def time_s(self, size_bytes: float) -> float:
        a, per_byte = self.segment(size_bytes)
        return a + per_byte * size_bytes


def isotonic(values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Pool-adjacent-violators: the non-decreasing sequence closest (weighted least squares)
    to ``values``. A larger message never takes less time; a noisy median that says so is
    pooled with its neighbour."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([float(v), float(w), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    out: list[float] = []
    for m, _, c in blocks:
        out.extend([m] * c)
    return out


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
