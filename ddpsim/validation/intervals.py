"""Prediction intervals: the trace's own variation carried through the engine. A seeded two-level
bootstrap (captures with replacement, then each drawn capture's iterations) is pooled and
predicted twice per resample, a measurement-like draw ``m*`` and a prediction-like one ``p*``;
the interval is the ``(1 ± level) / 2`` quantiles of ``center + (m* - p*)``, joined with the
bands around the calibration's alternative estimates (:func:`calibration_alternatives`). The
method's error on other models is joined by :func:`ddpsim.pipeline.method_error.widen`.
docs/VALIDATION.md, "What the figures mean"."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from ddpsim.errors import InputError
from ddpsim.formats import quantile
from ddpsim.trace.capture import check_count
from ddpsim.trace.records import Trace, pool_traces


#: how a report says what an interval is centred on (:func:`calibration_alternatives`), after
#: "resampled through the engine, "
ALTERNATIVES_TEXT = ("around the prediction with the calibration's probe-fitted compute slowdown and around those with "
                     "its microbenchmark's and with the probe's rounds fitted one by one, joined: `ddpsim.validation.intervals`")


@dataclass(frozen=True, kw_only=True)
class PredictionInterval:
    """The ``level`` interval ``[low_s, high_s]`` of a prediction and how it was drawn."""

    low_s: float
    high_s: float
    level: float
    num_resamples: int
    num_captures: int
    num_iterations: int
    seed: int
    #: the prediction from all captures pooled, and under each alternative (empty: none given)
    center_s: float | None = None
    alternative_centers_s: tuple[float, ...] = ()
    #: the method's error measured on other models, ``(r_lo, r_hi)`` around ``center_s``, when
    #: the interval was joined with it (:func:`ddpsim.pipeline.method_error.widen`)
    method_band: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise InputError(f"level: {self.level!r} is not accepted; expected a fraction in (0, 1)")
        if not self.low_s <= self.high_s:
            raise InputError(f"interval: low_s {self.low_s!r} above high_s {self.high_s!r}; expected low <= high")

    def covers(self, value_s: float) -> bool:
        """Whether ``value_s`` lies inside the interval (ends included)."""
        return self.low_s <= value_s <= self.high_s

    def to_dict(self) -> dict[str, Any]:
        d = {"low_s": self.low_s, "high_s": self.high_s, "level": self.level, "num_resamples": self.num_resamples,
             "num_captures": self.num_captures, "num_iterations": self.num_iterations, "seed": self.seed}
        if self.center_s is not None:
            d["center_s"] = self.center_s
        if self.alternative_centers_s:
            d["alternative_centers_s"] = list(self.alternative_centers_s)
        if self.method_band is not None:
            d["method_band"] = list(self.method_band)
        return d


def resample_trace(captures: Sequence[Trace], rng: random.Random, *, num_captures: int, num_iterations: int) -> Trace:
    """One bootstrap draw (module docstring): ``num_captures`` captures drawn with
    replacement, ``num_iterations`` iterations of each drawn with replacement, pooled."""
    drawn = []
    for _ in range(num_captures):
        cap = captures[rng.randrange(len(captures))]
        its = tuple(cap.iterations[rng.randrange(len(cap.iterations))] for _ in range(num_iterations))
        drawn.append(replace(cap, iterations=its, compiled_graph=None))
    return pool_traces(drawn)


def _resample_one(capture: Trace, rng: random.Random) -> Trace:
    """``capture`` with its own number of iterations drawn with replacement from it."""
    return resample_trace([capture], rng, num_captures=1, num_iterations=len(capture.iterations))


def prediction_interval(captures: Sequence[Trace], predict: Callable[[Trace], float], *, level: float = 0.8,
                        num_resamples: int = 40, num_captures: int | None = None, num_iterations: int | None = None,
                        seed: int = 0, alternatives: Sequence[Callable[[Trace], float]] = ()) -> PredictionInterval:
    """The ``level`` interval of the measured mean around ``predict``'s prediction from
    ``captures`` pooled, from ``num_resamples`` bootstrap draws (module docstring). ``num_captures`` defaults to ``len(captures)``,
    ``num_iterations`` to the fewest iterations of a capture. ``alternatives``: predictions
    under other estimates of an uncertain input; the interval joins the noise band around each
    one's centre (module docstring). Same inputs and seed, same interval.

    Raises:
        InputError: no captures, a count below 1, a level outside (0, 1).
    """
    if not captures:
        raise InputError("captures: [] is empty; expected at least one trace")
    if not 0.0 < level < 1.0:
        raise InputError(f"level: {level!r} is not accepted; expected a fraction in (0, 1)")
    k = len(captures) if num_captures is None else num_captures
    n = min(len(c.iterations) for c in captures) if num_iterations is None else num_iterations
    for value, name in ((num_resamples, "num_resamples"), (k, "num_captures"), (n, "num_iterations")):
        check_count(value, name, 1)
    rng = random.Random(seed)
    center = predict(pool_traces(captures))
    preds = []
    for _ in range(num_resamples):
        m = predict(resample_trace(captures, rng, num_captures=k, num_iterations=n))
        p = predict(pool_traces([_resample_one(captures[rng.randrange(len(captures))], rng) for _ in captures]))
        preds.append(center + m - p)
    pooled = pool_traces(captures) if alternatives else None
    others = tuple(float(alt(pooled)) for alt in alternatives)
    # the band around the lowest centre to the band around the highest (0 without alternatives)
    down, up = min((0.0, *(o - center for o in others))), max((0.0, *(o - center for o in others)))
    return PredictionInterval(low_s=quantile(preds, (1.0 - level) / 2) + down, high_s=quantile(preds, (1.0 + level) / 2) + up,
                              level=level, num_resamples=num_resamples, num_captures=k, num_iterations=n, seed=seed,
                              center_s=center, alternative_centers_s=others)


def validation_inputs(scenario: Any, point: Any, *, trace: Trace, calibration: Any = None) -> Any:
    """``scenario.build_point`` as a validation predicts it: with
    :data:`ddpsim.engine.config.VALIDATION_STATISTIC` (:meth:`ddpsim.engine.config.SimConfig.for_validation`)."""
    from ddpsim.pipeline.inputs import hook_call_s

    inputs = scenario.build_point(point, trace=trace, calibration=calibration)
    config = inputs.config.for_validation()
    if point.settings and config.comm_hook == "none":
        # the real run of an engine setting (round-robin groups, the one there is) deals the
        # buckets with a comm hook (executor.ddp_modes), which divides each bucket itself as
        # DDP's allreduce_hook does
        config = replace(config, comm_hook="allreduce", comm_hook_call_s=hook_call_s(calibration, "allreduce"))
    return replace(inputs, config=config)


def predict_mean(scenario: Any, point: Any, calibration: Any = None) -> Callable[[Trace], float]:
    """A ``predict`` for :func:`prediction_interval`: the simulated steady steps' mean
    (``SimResult.summary()['iteration_mean_s']``, the figure ``ddpsim validate`` compares) of
    ``point`` of ``scenario`` from a given trace, with ``calibration``, as a validation predicts
    it (:func:`validation_inputs`)."""
    from ddpsim.engine.simulate import simulate

    def predict(trace: Trace) -> float:
        inputs = validation_inputs(scenario, point, trace=trace, calibration=calibration)
        return simulate(inputs.trace, inputs.plan, inputs.comm, inputs.config).summary()["iteration_mean_s"]
    return predict


def predict_alternatives(scenario: Any, point: Any, calibration: Any = None) -> list[Callable[[Trace], float]]:
    """:func:`predict_mean` of ``point`` under each of :func:`calibration_alternatives`: what a
    point's interval takes as ``alternatives``."""
    return [predict_mean(scenario, point, c) for c in calibration_alternatives(calibration)]


def calibration_alternatives(calibration: Any) -> list[Any]:
    """The calibrations that differ from ``calibration`` only in its uncertain estimate, the
    compute slowdown fitted to real DDP on the probe: with the microbenchmark's slowdown
    (``Calibration.interference_microbenchmark``) and with the lowest and the highest fitted
    to one probe round alone (``Calibration.probe_round_fits``: how far the fit moves from one
    moment of the host to the next). Values equal to the fitted one are left out; empty when
    there is no other estimate."""
    mb = getattr(calibration, "interference_microbenchmark", None)
    fitted = getattr(calibration, "interference", None)
    if mb is None or fitted is None:
        return []
    rounds = calibration.probe_round_fits() if hasattr(calibration, "probe_round_fits") else ()
    slowdowns = [mb.compute_slowdown] + ([min(rounds), max(rounds)] if rounds else [])
    out, seen = [], {fitted.compute_slowdown}
    for sd in slowdowns:
        if sd in seen:
            continue
        seen.add(sd)
        out.append(replace(calibration, interference=mb if sd == mb.compute_slowdown else replace(fitted, compute_slowdown=sd)))
    return out
