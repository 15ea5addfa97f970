"""The method's own error, measured on other models: a conformal band around a prediction. A
prediction interval (:mod:`ddpsim.validation.intervals`) holds the trace's noise, not what the
engine gets wrong about a model. This module measures that error on validated models as each
point's residual ``r = measured_s / predicted_s - 1`` and turns the residuals of OTHER models into
a band ``[p * (1 + r_lo), p * (1 + r_hi)]`` around a new prediction ``p``, with ``r_lo``, ``r_hi``
the split-conformal order statistics (Vovk et al., *Algorithmic Learning in a Random World*; Lei et
al. 2018, "Distribution-free predictive inference for regression"): for ``n`` residuals at level
``L`` (tails ``a = (1 - L) / 2``), the ``floor((n + 1) a)``-th and ``ceil((n + 1) (1 - a))``-th
smallest; exchangeable residuals fall in it with probability >= ``L``, and with fewer than
``(1 + L) / (1 - L)`` residuals there is no band. :func:`widen` takes the hull with an interval's
own band; a model's own residuals never inform its band (``exclude_model``); residuals measured
with another calibration are used but said to be so (:meth:`MethodError.mismatch`). The file
(``ddpsim validate zoo``'s ``method_error.json``)::

    {"format": "ddpsim-method-error", "version": 1, "calibration": "...", "calibration_sha256": "...",
     "backend": "gloo", "device": "cpu",
     "points": [{"model": "zoo:resnet50", "point": "cap=1", "predicted_s": 0.259, "measured_s": 0.275}, ...]}
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal, Sequence

from pydantic import Field, model_validator

from ddpsim.errors import InputError, shorten
from ddpsim.io import read_json
from ddpsim.schema import Float, Str, format_version, record, validate

FORMAT = "ddpsim-method-error"
VERSION = 1


#: the bounds of a point's times (seconds): a step under a nanosecond or over 11.6 days is no measurement,
#: and within them every residual and ratio of two points stays a finite, non-zero number
MIN_SECONDS, MAX_SECONDS = 1e-9, 1e6
Seconds = Annotated[Float, Field(ge=MIN_SECONDS, le=MAX_SECONDS, allow_inf_nan=False)]


@record("")
class ResidualPoint:
    """One validated point: a model's prediction and the mean step measured for it (an entry of
    the file's ``points``; its ``residual`` is written for the reader and recomputed)."""

    model: Annotated[Str, Field(min_length=1)]
    point: Str = ""
    predicted_s: Seconds
    measured_s: Seconds

    @model_validator(mode="before")
    @classmethod
    def _residual_recomputed(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if k != "residual"} if isinstance(data, dict) else data

    @property
    def residual(self) -> float:
        """``measured_s / predicted_s - 1``: how far the measurement lies above the prediction."""
        return self.measured_s / self.predicted_s - 1.0


def conformal_band(residuals: Sequence[float], level: float) -> tuple[float, float] | None:
    """``(r_lo, r_hi)``: the split-conformal order statistics of ``residuals`` at ``level``
    (module docstring); None when there are too few for a finite band."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise InputError(f"level: {level!r} is not accepted; expected a fraction in (0, 1)")
    xs = sorted(float(r) for r in residuals)
    a = (1.0 - level) / 2.0
    # the 1-based ranks, with a hair of tolerance so that 10 * 0.9 is 9 whatever the float rounding
    lo_k, hi_k = math.floor((len(xs) + 1) * a + 1e-9), math.ceil((len(xs) + 1) * (1.0 - a) - 1e-9)
    return (xs[lo_k - 1], xs[hi_k - 1]) if lo_k >= 1 and hi_k <= len(xs) else None


@record("")
class MethodError:
    """Residuals of validated points and what they were measured with: the file (module docstring)."""

    format: Literal["ddpsim-method-error"] = FORMAT
    version: format_version(VERSION) = VERSION
    points: tuple[ResidualPoint, ...]
    calibration: Str | None = None
    calibration_sha256: Str | None = None
    backend: Str | None = None
    device: Str | None = None

    @model_validator(mode="before")
    @classmethod
    def _a_file_names_its_format(cls, data: Any) -> Any:
        """A file must name ``format`` and ``version`` (the code's residuals take their defaults)."""
        if isinstance(data, dict) and (key := next((k for k in ("format", "version") if k not in data), None)):
            raise InputError(f"{key}: missing; expected this key (it is required)")
        return data

    def band(self, level: float, *, exclude_model: str | None = None) -> tuple[float, float] | None:
        """The conformal band of every point's residual but ``exclude_model``'s."""
        return conformal_band([p.residual for p in self.points if p.model != exclude_model], level)

    def trend_residuals(self, *, exclude_model: str | None = None) -> list[float]:
        """Per model, for every pair of its points ``a, b``: how far the measured ratio of their
        steps lies from the predicted one, ``(measured_a / measured_b) / (predicted_a / predicted_b) - 1``,
        each pair both ways (the error of a *difference* between two settings of one model, what
        ranking caps rests on)."""
        by: dict[str, list[ResidualPoint]] = {}
        for p in self.points:
            if p.model != exclude_model:
                by.setdefault(p.model, []).append(p)
        out = []
        for pts in by.values():
            for i, a in enumerate(pts):
                for b in pts[i + 1:]:
                    t = (a.measured_s / b.measured_s) / (a.predicted_s / b.predicted_s)
                    out += [t - 1.0, 1.0 / t - 1.0]
        return out

    def trend_band(self, level: float, *, exclude_model: str | None = None) -> tuple[float, float] | None:
        """The conformal band of :meth:`trend_residuals` (pairs counted once each way, so the
        band is near symmetric); None when too few."""
        return conformal_band(self.trend_residuals(exclude_model=exclude_model), level)

    def mismatch(self, *, calibration_sha256: str | None = None, backend: str | None = None,
                 device: str | None = None) -> str | None:
        """What differs between the residuals' conditions and a prediction's, in words; None
        when nothing known differs."""
        pairs = (("backend", self.backend, backend), ("device", self.device, device))
        diffs = [f"{what} {mine} (the prediction's: {theirs})" for what, mine, theirs in pairs
                 if mine and theirs and mine != theirs]
        if calibration_sha256 and self.calibration_sha256 and calibration_sha256 != self.calibration_sha256:
            diffs.append(f"another calibration ({self.calibration or 'unnamed'})")
        return None if not diffs else "the residuals were measured with " + ", ".join(diffs)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "calibration": self.calibration,
                "calibration_sha256": self.calibration_sha256, "backend": self.backend, "device": self.device,
                "points": [{"model": p.model, "point": p.point, "predicted_s": p.predicted_s, "measured_s": p.measured_s,
                            "residual": p.residual} for p in self.points]}


def file_sha256(path: str | Path) -> str | None:
    """The SHA-256 of a file's bytes (how a residual file names its calibration); None if unreadable."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def load_method_error(path: str | Path) -> MethodError:
    """The :class:`MethodError` of a JSON file; InputError (one line naming the key) when the file
    is missing or not JSON, or has a wrong format or version, a point without a model or with a
    time outside ``[MIN_SECONDS, MAX_SECONDS]``."""
    doc = read_json(path, "--method-error", "the method_error.json of a 'ddpsim validate zoo' run")
    return validate(MethodError, doc, f"--method-error {shorten(str(path))}")


def widen(interval: Any, band: tuple[float, float] | None) -> Any:
    """``interval`` (a :class:`ddpsim.validation.intervals.PredictionInterval` with its ``center_s``) joined
    with ``band`` around its centre: the hull of both. Unchanged without a band or a centre."""
    if band is None or interval.center_s is None:
        return interval
    c = interval.center_s
    return replace(interval, low_s=min(interval.low_s, c * (1.0 + band[0])), high_s=max(interval.high_s, c * (1.0 + band[1])),
                   method_band=band)


def answer(me: MethodError, *, points: Sequence[tuple[str, float]], best: str, level: float, source: str,
           model: str | None = None, note: str | None = None, best_mean_s: float | None = None) -> dict[str, Any]:
    """What a sweep's report says with residuals ``me`` (``ddpsim run --method-error``): ``points``
    are ``(point id, predicted step)``, ``best`` the best point's id. The band around the best
    point's mean step (``best_mean_s``, predicted as the residuals' predictions were; default: its
    step in ``points``), and the points whose predicted step lies so close to the best that the
    measured error of a step ratio between two settings (:meth:`MethodError.trend_band`) could
    reverse their order: a tie by the method's measured error. ``model``'s own residuals are left
    out."""
    steps = dict(points)
    if best not in steps:
        raise InputError(f"best: {best!r} is not one of the points {sorted(steps)}; expected a point of the sweep")
    others = [p for p in me.points if p.model != model]
    band = me.band(level, exclude_model=model)
    trend = me.trend_band(level, exclude_model=model)
    b = steps[best]
    tied = [] if trend is None else [pid for pid, s in points if pid != best and (s / b) * (1.0 + trend[0]) <= 1.0]
    m = b if best_mean_s is None else best_mean_s
    return {"source": source, "level": level, "models": len({p.model for p in others}), "points": len(others),
            "band": None if band is None else list(band), "trend_band": None if trend is None else list(trend),
            "best": best, "best_mean_s": m, "best_range_s": None if band is None else [m * (1.0 + band[0]), m * (1.0 + band[1])],
            "tied": tied, "note": note}
