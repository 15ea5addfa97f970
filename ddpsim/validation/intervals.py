"""Prediction intervals: the trace's own variation carried through the engine. A seeded two-level
bootstrap (captures with replacement, then each drawn capture's iterations) is pooled and
predicted twice per resample, a measurement-like draw ``m*`` and a prediction-like one ``p*``;
the interval is the ``(1 ± level) / 2`` quantiles of ``center + (m* - p*)``, joined with the
bands around the calibration's alternative estimates (:func:`calibration_alternatives`). The
method's error on other models is joined by :func:`ddpsim.pipeline.method_error.widen`.
docs/VALIDATION.md, "What the figures mean"."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
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

    def covers(self, value_s: float) -> bool:
        return self.low_s <= value_s <= self.high_s

    def to_dict(self) -> dict[str, Any]:
        """The fields, tuples as lists; the optional ones only when set."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()
                if v is not None and v != ()}


def resample_trace(captures: Sequence[Trace], rng: random.Random, *, num_captures: int, num_iterations: int) -> Trace:
    """One bootstrap draw: ``num_captures`` captures, then ``num_iterations`` of each one's iterations,
    drawn with replacement and pooled."""
    drawn = []
    for _ in range(num_captures):
        cap = captures[rng.randrange(len(captures))]
        its = tuple(cap.iterations[rng.randrange(len(cap.iterations))] for _ in range(num_iterations))
        drawn.append(replace(cap, iterations=its, compiled_graph=None))
    return pool_traces(drawn)


def prediction_interval(captures: Sequence[Trace], predict: Callable[[Trace], float], *, level: float = 0.8,
                        num_resamples: int = 40, num_captures: int | None = None, num_iterations: int | None = None,
                        seed: int = 0, alternatives: Sequence[Callable[[Trace], float]] = ()) -> PredictionInterval:
    """The ``level`` interval of the measured mean around ``predict``'s prediction from ``captures`` pooled,
    from ``num_resamples`` draws (module docstring; ``num_captures``: default all, ``num_iterations``: the
    fewest of a capture), joined with the band around each of the ``alternatives``' centres. InputError:
    no captures, a count below 1, a level outside (0, 1)."""
    if not captures:
        raise InputError("captures: [] is empty; expected at least one trace")
    if not 0.0 < level < 1.0:
        raise InputError(f"level: {level!r} is not accepted; expected a fraction in (0, 1)")
    k = len(captures) if num_captures is None else num_captures
    n = min(len(c.iterations) for c in captures) if num_iterations is None else num_iterations
    for value, name in ((num_resamples, "num_resamples"), (k, "num_captures"), (n, "num_iterations")):
        check_count(value, name, 1)
    rng = random.Random(seed)
    pooled = pool_traces(captures)
    center = predict(pooled)
    preds = []
    for _ in range(num_resamples):
        m = predict(resample_trace(captures, rng, num_captures=k, num_iterations=n))
        # each capture drawn, then its own number of iterations drawn from it (one rng, in this order)
        p = predict(pool_traces([resample_trace([c], rng, num_captures=1, num_iterations=len(c.iterations))
                                 for c in (captures[rng.randrange(len(captures))] for _ in captures)]))
        preds.append(center + m - p)
    others = tuple(float(alt(pooled)) for alt in alternatives)
    # the band around the lowest centre to the band around the highest (0 without alternatives)
    down, up = min((0.0, *(o - center for o in others))), max((0.0, *(o - center for o in others)))
    return PredictionInterval(low_s=quantile(preds, (1.0 - level) / 2) + down, high_s=quantile(preds, (1.0 + level) / 2) + up,
                              level=level, num_resamples=num_resamples, num_captures=k, num_iterations=n, seed=seed,
                              center_s=center, alternative_centers_s=others)


def validation_inputs(scenario: Any, point: Any, *, trace: Trace, calibration: Any = None) -> Any:
    """``scenario.build_point`` as a validation predicts it (``SimConfig.for_validation``)."""
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
    """A ``predict`` for :func:`prediction_interval`: the simulated steady steps' mean of ``point`` from a
    trace, as a validation predicts it (:func:`validation_inputs`)."""
    from ddpsim.engine.simulate import simulate

    def predict(trace: Trace) -> float:
        inputs = validation_inputs(scenario, point, trace=trace, calibration=calibration)
        return simulate(inputs.trace, inputs.plan, inputs.comm, inputs.config).summary()["iteration_mean_s"]
    return predict


def point_interval(scenario: Any, point: Any, captures: Sequence[Trace], calibration: Any, *, num_runs: int,
                   iterations: int, level: float, num_resamples: int = 40, seed: int = 0) -> PredictionInterval:
    """:func:`prediction_interval` of ``point`` (:func:`predict_mean`) measured in ``num_runs`` runs (none: as
    many as ``captures``), joined with :func:`predict_mean` under each of :func:`calibration_alternatives`."""
    return prediction_interval(captures, predict_mean(scenario, point, calibration), level=level,
                               num_resamples=num_resamples, num_captures=max(1, num_runs or len(captures)),
                               num_iterations=iterations, seed=seed,
                               alternatives=[predict_mean(scenario, point, c) for c in calibration_alternatives(calibration)])


def calibration_alternatives(calibration: Any) -> list[Any]:
    """``calibration`` with its uncertain estimate, the probe-fitted compute slowdown, replaced by the
    microbenchmark's and by the lowest and highest fitted to one probe round alone
    (``Calibration.probe_round_fits``); values equal to the fitted one left out."""
    mb = getattr(calibration, "interference_microbenchmark", None)
    fitted = getattr(calibration, "interference", None)
    if mb is None or fitted is None:
        return []
    rounds = getattr(calibration, "probe_round_fits", ())
    slowdowns = [mb.compute_slowdown] + ([min(rounds), max(rounds)] if rounds else [])
    return [replace(calibration, interference=mb if sd == mb.compute_slowdown else replace(fitted, compute_slowdown=sd))
            for sd in dict.fromkeys(slowdowns) if sd != fitted.compute_slowdown]
