"""Prediction intervals (ddpsim/validation/intervals.py): the bootstrap of captures and iterations, with
outcomes that can be worked out by hand."""

import random
import statistics
from dataclasses import replace

import pytest

from ddpsim.errors import InputError
from ddpsim.validation.intervals import PredictionInterval, predict_mean, prediction_interval, resample_trace
from ddpsim.trace.records import IterationSample, make_trace, save_trace


def _capture(backwards):
    t = make_trace(model="toy", params=[("a", (256,), "float32")], ready_s=[0.001], forward_s=0.01,
                   backward_s=0.02, optimizer_s=0.001)
    its = tuple(IterationSample(forward_s=0.01, backward_s=b, optimizer_s=0.001, grad_ready_s=(0.001,)) for b in backwards)
    return replace(t, iterations=its)


def _median_backward(trace):
    return statistics.median(it.backward_s for it in trace.iterations)


def test_two_constant_captures_carry_both_noises():
    # captures of constant backward 1.0 and 2.0: the prediction from both pooled (median) is 1.5;
    # a measurement-like draw (one capture) is 1.0 or 2.0, a prediction-like draw (two captures)
    # 1.0, 1.5 or 2.0, so center + m - p lies in {0.5, 1.0, 1.5, 2.0, 2.5}; the extremes come
    # up 1/2 x 1/4 = 12.5 % of the time each, so the 90 % interval is exactly [0.5, 2.5]
    iv = prediction_interval([_capture([1.0] * 3), _capture([2.0] * 3)], _median_backward, level=0.9,
                             num_resamples=100, num_captures=1, seed=0)
    assert (iv.low_s, iv.high_s) == (0.5, 2.5)
    assert (iv.num_captures, iv.num_iterations, iv.num_resamples) == (1, 3, 100)
    assert iv.covers(0.5) and not iv.covers(2.51)


def test_same_seed_same_interval():
    caps = [_capture([1.0, 1.2, 1.5, 0.9]), _capture([2.0, 1.1, 1.3])]
    a = prediction_interval(caps, _median_backward, seed=7)
    b = prediction_interval(caps, _median_backward, seed=7)
    assert a == b and a.num_captures == 2 and a.num_iterations == 3  # the fewest iterations of a capture


def test_resample_draws_whole_iterations_of_the_drawn_captures():
    a, b = _capture([1.0, 2.0]), _capture([10.0, 20.0, 30.0])
    t = resample_trace([a, b], random.Random(3), num_captures=3, num_iterations=4)
    assert len(t.iterations) == 12
    # each block of 4 comes from ONE capture (the two captures' values never mix inside a block)
    for k in range(3):
        block = {it.backward_s for it in t.iterations[4 * k:4 * k + 4]}
        assert block <= {1.0, 2.0} or block <= {10.0, 20.0, 30.0}


def test_a_trace_without_variation_has_a_zero_width_interval_at_the_point_prediction(tmp_path):
    from ddpsim.pipeline.scenario import scenario_from_dict

    cap = _capture([0.02] * 4)
    path = save_trace(cap, tmp_path / "t.json")
    sc = scenario_from_dict({"name": "iv", "trace": str(path), "cluster": {"topology": "cpu-gloo", "nodes": 1},
                             "world_size": 2, "simulation": {"iterations": 4, "seed": 0, "jitter": "trace"}})
    predict = predict_mean(sc, sc.base_point())
    point = predict(cap)
    iv = prediction_interval([cap, cap], predict, num_resamples=5)
    assert iv.low_s == iv.high_s == pytest.approx(point)
    assert point > 0.02 + 0.01  # forward + backward at least


def test_an_interval_covers_its_ends_and_what_lies_between():
    iv = PredictionInterval(low_s=1, high_s=2, level=0.8, num_resamples=1, num_captures=1, num_iterations=1, seed=0)
    assert [iv.covers(m) for m in (0.999, 1.0, 1.5, 2.0, 2.001)] == [False, True, True, True, False]


@pytest.mark.parametrize("kwargs,match", [
    ({"level": 1.0}, "level: 1.0 is not accepted"),
    ({"num_resamples": 0}, "num_resamples: 0 is not accepted"),
    ({"num_captures": 0}, "num_captures: 0 is not accepted"),
])
def test_bad_interval_input(kwargs, match):
    with pytest.raises(InputError, match=match):
        prediction_interval([_capture([1.0])], _median_backward, **kwargs)
    with pytest.raises(InputError, match="captures: \\[\\] is empty"):
        prediction_interval([], _median_backward)


def test_alternatives_join_the_noise_band_around_each_centre():
    # the two constant captures of the first test: the 90 % band is [0.5, 2.5] around the centre 1.5;
    # an alternative estimate predicting 1.0 more moves the upper end by 1.0, one predicting 0.25
    # less moves the lower end by 0.25, and both together do both
    caps = [_capture([1.0] * 3), _capture([2.0] * 3)]
    kw = dict(level=0.9, num_resamples=100, num_captures=1, seed=0)
    up = prediction_interval(caps, _median_backward, alternatives=[lambda t: _median_backward(t) + 1.0], **kw)
    assert (up.low_s, up.high_s) == (0.5, 3.5) and (up.center_s, up.alternative_centers_s) == (1.5, (2.5,))
    down = prediction_interval(caps, _median_backward, alternatives=[lambda t: _median_backward(t) - 0.25], **kw)
    assert (down.low_s, down.high_s) == (0.25, 2.5)
    both = prediction_interval(caps, _median_backward, alternatives=[lambda t: _median_backward(t) - 0.25,
                                                                     lambda t: _median_backward(t) + 1.0], **kw)
    assert (both.low_s, both.high_s) == (0.25, 3.5)
    assert both.to_dict()["alternative_centers_s"] == [1.25, 2.5]
    # without alternatives the band is the bootstrap's alone, as before
    plain = prediction_interval(caps, _median_backward, **kw)
    assert (plain.low_s, plain.high_s, plain.alternative_centers_s) == (0.5, 2.5, ())


def test_the_calibrations_alternative_is_its_microbenchmark_slowdown():
    from tests.test_interference_fit import bare, with_probe

    from ddpsim.calibration.loader import calibration_from_dict
    from ddpsim.validation.intervals import calibration_alternatives

    fitted = calibration_from_dict(with_probe(0.100))
    alts = calibration_alternatives(fitted)
    assert len(alts) == 1 and alts[0].interference == fitted.interference_microbenchmark
    assert alts[0].interference.compute_slowdown != fitted.interference.compute_slowdown
    assert alts[0].collectives == fitted.collectives  # nothing else differs
    assert calibration_alternatives(bare()) == []  # no probe: one estimate only
    assert calibration_alternatives(None) == []


def test_the_probes_rounds_fitted_one_by_one_are_alternatives_too():
    import copy

    from tests.test_interference_fit import probe_trace, with_probe

    from ddpsim.calibration.loader import calibration_from_dict
    from ddpsim.calibration.interference_fit import fit_probe
    from ddpsim.validation.intervals import calibration_alternatives

    d = with_probe(0.100, replace(probe_trace(), iterations=probe_trace().iterations * 2))  # 6 iterations, 3 a round
    d["interference_probe"].update(rounds=2, ddp_step_samples_s=[0.095, 0.1, 0.097, 0.11, 0.12, 0.115])
    cal = calibration_from_dict(d)
    trace, cap = cal.interference_probe.trace, cal.interference_probe.bucket_cap_mb
    half = replace(trace, iterations=trace.iterations[:3])
    want = (fit_probe(half, 0.097, cal, cap, cal.interference_microbenchmark)["compute_slowdown"],
            fit_probe(half, 0.115, cal, cap, cal.interference_microbenchmark)["compute_slowdown"])
    assert cal.probe_round_fits == want and want[0] < want[1]
    alts = [a.interference.compute_slowdown for a in calibration_alternatives(cal)]
    assert alts == [cal.interference_microbenchmark.compute_slowdown, want[0], want[1]]
    # one round (or none recorded): the microbenchmark's alone
    one = copy.deepcopy(d)
    one["interference_probe"]["rounds"] = 1
    assert calibration_from_dict(one).probe_round_fits == ()
