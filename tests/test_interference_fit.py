"""The compute slowdown fitted to the calibration's DDP probe (ddpsim.calibration.interference_fit)."""

import copy

import pytest

from ddpsim.calibration.loader import calibration_from_dict
from ddpsim.calibration.schema import CALIBRATION_WEIGHTING
from ddpsim.errors import InputError
from ddpsim.calibration.interference_fit import MAX_SLOWDOWN, predict_probe
from ddpsim.network.interference import Interference
from ddpsim.trace.records import make_trace

CAL = {
    "format": "ddpsim-calibration", "version": 1, "backend": "gloo", "world_size": 2, "device": "cpu",
    "environment": {},
    # 1 ms + 1 ns per byte: a 4 MiB bucket takes 5.19 ms alone
    "collectives": {"allreduce": [{"size_bytes": 1 << 20, "time_s": 1e-3 + (1 << 20) * 1e-9},
                                  {"size_bytes": 1 << 24, "time_s": 1e-3 + (1 << 24) * 1e-9}]},
    "interference": {"compute_slowdown": 1.3, "comm_slowdown": 2.0, "details": {}},
    "copy_bandwidth_bytes_per_s": 1e10,
}


def probe_trace():
    # four 4 MiB layers; a 40 ms backward whose gradients are ready every 10 ms
    params = [(f"l{i}.weight", (1024, 1024), "float32") for i in range(4)]
    return make_trace(model="probe", params=params, ready_s=[0.040, 0.030, 0.020, 0.010], forward_s=0.02,
                      backward_s=0.040, optimizer_s=0.005, num_iterations=3)


def with_probe(step_s, trace=None):
    d = copy.deepcopy(CAL)
    d["interference_probe"] = {"model": "probe", "bucket_cap_mb": 4.0, "ddp_step_s": step_s,
                               "trace": (trace or probe_trace()).to_dict()}
    return d


def bare():
    return calibration_from_dict(CAL)


def test_the_fit_recovers_the_slowdown_that_produced_the_measurement():
    # the measured step is the engine's own prediction at compute_slowdown 2.5: the fit must
    # return 2.5 (the bisection's premise: the prediction grows with the slowdown)
    target = predict_probe(probe_trace(), bare(), 4.0, Interference(compute_slowdown=2.5, comm_slowdown=2.0, weighting=CALIBRATION_WEIGHTING))
    at_1 = predict_probe(probe_trace(), bare(), 4.0, Interference(compute_slowdown=1.0, comm_slowdown=2.0, weighting=CALIBRATION_WEIGHTING))
    assert target > at_1  # the probe's buckets overlap its backward, so the slowdown shows
    cal = calibration_from_dict(with_probe(target))
    assert cal.interference.compute_slowdown == pytest.approx(2.5, rel=1e-6)
    assert cal.interference.comm_slowdown == 2.0  # the microbenchmark's, kept
    assert (cal.interference_microbenchmark.compute_slowdown, cal.interference_microbenchmark.comm_slowdown) == (1.3, 2.0)
    fit = cal.interference_fit
    assert fit["clamped"] is False and fit["measured_step_s"] == target
    assert fit["predicted_step_s"] == pytest.approx(target, rel=1e-9)
    assert fit["predicted_without_interference_s"] == pytest.approx(at_1, rel=1e-12)


def test_prediction_is_nondecreasing_in_the_compute_slowdown():
    preds = [predict_probe(probe_trace(), bare(), 4.0, Interference(compute_slowdown=s, comm_slowdown=2.0, weighting=CALIBRATION_WEIGHTING))
             for s in (1.0, 1.5, 2.0, 3.0, 5.0, 8.0)]
    assert preds == sorted(preds) and preds[-1] > preds[0]


def test_a_step_faster_than_no_interference_clamps_at_1_and_a_slower_than_possible_one_at_the_max():
    at_1 = predict_probe(probe_trace(), bare(), 4.0, Interference(compute_slowdown=1.0, comm_slowdown=2.0, weighting=CALIBRATION_WEIGHTING))
    lo = calibration_from_dict(with_probe(0.5 * at_1))
    assert lo.interference.compute_slowdown == 1.0 and lo.interference_fit["clamped"] is True
    hi = calibration_from_dict(with_probe(100.0))
    assert hi.interference.compute_slowdown == MAX_SLOWDOWN and hi.interference_fit["clamped"] is True


def test_without_a_probe_the_microbenchmark_stands():
    cal = bare()
    assert cal.interference == Interference(compute_slowdown=1.3, comm_slowdown=2.0, weighting="uniform")
    assert cal.interference_fit is None and cal.interference_microbenchmark is None


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p.pop("ddp_step_s"), "calibration: interference_probe.ddp_step_s: missing; expected this key"),
    (lambda p: p.update(ddp_step_s=-1), "calibration: interference_probe.ddp_step_s: -1 is not accepted; expected a value > 0"),
    (lambda p: p.update(bucket_cap_mb="25"), "calibration: interference_probe.bucket_cap_mb: '25' is not accepted; expected a valid number"),
    (lambda p: p.update(trace={"format": "nope"}), "calibration: interference_probe.trace.format: 'nope' is not accepted; expected 'ddpsim-trace'"),
    (lambda p: p.update(ddp_phase_samples_s=[0.09]),
     "calibration: interference_probe.ddp_phase_samples_s: [0.09] is not accepted; expected a mapping"),
    (lambda p: p.update(ddp_phase_samples_s={"forward_s": [0.09, "x"]}),
     "calibration: interference_probe.ddp_phase_samples_s.forward_s[1]: 'x' is not accepted; expected a valid number"),
    (lambda p: p.update(ddp_phase_samples_s={"backward_s": [0.1]}),
     "calibration: interference_probe.ddp_phase_samples_s.forward_s: None is not accepted; expected a non-empty list"),
])
def test_a_bad_probe_is_one_line_naming_the_field(mutate, message):
    d = with_probe(0.1)
    mutate(d["interference_probe"])
    with pytest.raises(InputError) as ei:
        calibration_from_dict(d)
    assert str(ei.value).startswith(message) and "\n" not in str(ei.value)


def test_the_probe_forward_under_ddp_gives_the_forward_factor_and_the_fit_sees_it():
    from ddpsim.calibration.loader import probe_forward_factor
    from ddpsim.calibration.schema import ProbeDoc
    from ddpsim.network.collective_cost import build_comm_model
    from ddpsim.network.topology import build_preset

    d = with_probe(0.2)
    assert calibration_from_dict(d).probe_forward_factor is None    # no phases kept: no factor
    tr = d["interference_probe"]["trace"]
    zg = tr["iterations"][0].get("zero_grad_s", 0.0)
    # forward under DDP: 25 ms (median of 3) over the trace's 20 ms forward + zero_grad
    d["interference_probe"]["ddp_phase_samples_s"] = {"forward_s": [0.024, 0.025, 0.030], "backward_s": [0.05] * 3,
                                                      "optimizer_s": [0.005] * 3}
    expected = 0.025 / (0.02 + zg)
    assert probe_forward_factor(ProbeDoc.model_validate(d["interference_probe"]), 0.0) == pytest.approx(expected)
    d["ddp_iteration_overhead_s"] = 0.002                           # the overhead is charged on its own
    assert probe_forward_factor(ProbeDoc.model_validate(d["interference_probe"]), 0.002) == pytest.approx(0.023 / (0.02 + zg))
    cal = calibration_from_dict(d)
    assert cal.probe_forward_factor == pytest.approx(0.023 / (0.02 + zg))
    # only the probe fit uses it: a model simulated with this calibration keeps its trace's forward
    m = build_comm_model(build_preset("cpu-gloo"), 2, calibration=cal)
    assert m.ddp_forward_factor == 1.0 and "ddp_forward_factor" not in m.describe()
    assert m.describe()["probe_forward_factor"] == cal.probe_forward_factor
    # a DDP forward faster than the trace's is noise: floored at 1
    d["interference_probe"]["ddp_phase_samples_s"]["forward_s"] = [0.001] * 3
    assert probe_forward_factor(ProbeDoc.model_validate(d["interference_probe"]), 0.0) == 1.0
    # the fit predicts the probe with the factor: a slower forward leaves less to the slowdown
    target = predict_probe(probe_trace(), bare(), 4.0, Interference(compute_slowdown=2.5, comm_slowdown=2.0, weighting=CALIBRATION_WEIGHTING))
    d2, d3 = with_probe(target), with_probe(target)
    d3["interference_probe"]["ddp_phase_samples_s"] = {"forward_s": [0.03] * 3}
    f2, f3 = calibration_from_dict(d2).interference_fit, calibration_from_dict(d3).interference_fit
    assert f2["compute_slowdown"] == pytest.approx(2.5, rel=1e-6) and not f3["clamped"]
    assert f3["compute_slowdown"] < 2.5
    assert f3["predicted_without_interference_s"] > f2["predicted_without_interference_s"]


def test_a_probe_run_on_a_busy_host_is_called_out():
    from ddpsim.calibration.loader import PROBE_MAX_OTHER_PCT

    def cal(other):
        d = with_probe(0.100)
        d["interference_probe"]["host_other_pct"] = other
        return calibration_from_dict(d)
    busy = cal(40.0)
    assert busy.probe_host_other_pct == 40.0
    assert busy.warning() == ("the calibration's DDP probe ran while other work held 40 % of the host's CPUs (more than "
                              f"{PROBE_MAX_OTHER_PCT:g} %): its fitted compute slowdown is that load's, not this host's; "
                              "re-calibrate (executor collectives) on a quiet host before trusting these predictions")
    assert cal(PROBE_MAX_OTHER_PCT).warning() is None and cal(-0.3).warning() is None  # a quiet host's counter noise
    assert cal(None).warning() is None and calibration_from_dict(with_probe(0.100)).probe_host_other_pct is None
    with pytest.raises(InputError, match=r"interference_probe.host_other_pct: 'x' is not accepted; expected a valid number"):
        cal("x")


def test_validate_calibrates_again_when_the_probe_ran_on_a_busy_host(tmp_path, caplog):
    import json
    import logging
    import shutil
    from pathlib import Path

    from ddpsim.validation.measure import calibrate

    data = Path(__file__).parent / "data"
    busy = json.loads((data / "calibration-probe-fit.json").read_text())
    busy["interference_probe"]["host_other_pct"] = 35.0
    (tmp_path / "busy.json").write_text(json.dumps(busy))
    outputs = [tmp_path / "busy.json", data / "calibration-probe-fit.json"]
    calls = []

    def fake_launch(args):
        calls.append(args)
        shutil.copyfile(outputs[len(calls) - 1], args[args.index("--out") + 1])
        Path(args[args.index("--progress") + 1]).write_text("p\n")
    with caplog.at_level(logging.INFO, logger="ddpsim"):
        cal = calibrate(fake_launch, tmp_path / "calibration.json", tmp_path, label="2 gloo ranks")
    said = [r.getMessage() for r in caplog.records]
    assert len(calls) == 2 and cal.warning() is None
    assert any("other work held 35 % of the host's CPUs" in m and "calibrating again" in m for m in said)
    assert json.loads((tmp_path / "calibration.clamped1.json").read_text())["interference_probe"]["host_other_pct"] == 35.0
