"""Calibration files: validation, fit, and the calibrated comm model."""

from __future__ import annotations

import json
import re

import pytest

from ddpsim.calibration.loader import calibration_from_dict, load_calibration, save_calibration
from ddpsim.network.curve_fit import CalibrationPoint, fit_alpha_beta, fit_curve
from ddpsim.cli.main import main
from ddpsim.network.collective_cost import build_comm_model
from ddpsim.network.comm_model import CommModel
from ddpsim.errors import InputError
from ddpsim.network.interference import Interference
from ddpsim.network.topology import build_preset

ALPHA, BW = 40e-6, 2.5e9  # the known alpha-beta the synthetic points come from
SIZES = [4096 * 4 ** k for k in range(8)]  # 4 KiB .. 64 MiB


def synthetic(alpha=ALPHA, bw=BW, world_size=2, broadcast=True) -> dict:
    def pts(a, b):
        return [{"size_bytes": s, "time_s": a + s / b, "p10_s": 0.9 * (a + s / b), "p90_s": 1.1 * (a + s / b),
                 "num_samples": 20} for s in SIZES]

    return {"format": "ddpsim-calibration", "version": 1, "backend": "gloo", "world_size": world_size, "device": "cpu",
            "environment": {"torch_version": "2.13.0+cpu", "hostname_hash": "abc"},
            "collectives": {"allreduce": pts(alpha, bw), "broadcast": pts(alpha / 2, bw * 2) if broadcast else []},
            "interference": {"compute_slowdown": 1.35, "comm_slowdown": 1.2, "details": {}},
            "copy_bandwidth_bytes_per_s": 5.1e9}


def test_fit_recovers_known_alpha_beta():
    sizes = [float(s) for s in SIZES]
    a, bw = fit_alpha_beta(sizes, [ALPHA + s / BW for s in sizes])
    assert a == pytest.approx(ALPHA, rel=1e-9) and bw == pytest.approx(BW, rel=1e-9)
    m = build_comm_model(build_preset("cpu-gloo"), 2, calibration=calibration_from_dict(synthetic()))
    assert m.allreduce.alpha_s == pytest.approx(ALPHA, rel=1e-9)
    assert m.allreduce.bandwidth_bytes_per_s == pytest.approx(BW, rel=1e-9)
    assert m.broadcast.alpha_s == pytest.approx(ALPHA / 2, rel=1e-9)


def test_piecewise_curve_reproduces_points_interpolates_and_extrapolates():
    cal = calibration_from_dict(synthetic())
    m = build_comm_model(build_preset("cpu-gloo"), 2, calibration=cal)
    assert isinstance(m, CommModel) and m.backend == "gloo" and m.num_ranks == 2
    for s in SIZES + [10_000, 3 * 2 ** 20, 256 * 2 ** 20, 2 ** 30]:  # measured, between, beyond
        assert m.allreduce_s(s) == pytest.approx(ALPHA + s / BW, rel=1e-9)
    assert m.allreduce_s(100) == pytest.approx(ALPHA + 4096 / BW)  # below the smallest: its time
    assert m.allreduce_s(0) == 0.0
    assert m.broadcast_s(2 ** 20) == pytest.approx(ALPHA / 2 + 2 ** 20 / (2 * BW))
    e = m.estimate_allreduce(2 ** 20)
    assert (e.algorithm, e.protocol) == ("calibrated", "measured")
    d = m.describe()
    assert d["model"] == "calibrated" and d["allreduce_points"] == 8 and d["rescaled_to_num_ranks"] is False
    json.dumps(d)


def test_piecewise_segments_between_uneven_points():
    c = fit_curve([CalibrationPoint(size_bytes=1000, time_s=1e-4), CalibrationPoint(size_bytes=3000, time_s=2e-4),
                   CalibrationPoint(size_bytes=5000, time_s=6e-4)])
    assert c.time_s(2000) == pytest.approx(1.5e-4)  # midpoint of the first segment
    assert c.time_s(4000) == pytest.approx(4e-4)  # midpoint of the second
    assert c.time_s(7000) == pytest.approx(1e-3)  # last segment's line: 2e-7 s/byte


def test_rescaling_to_another_world_size():
    cal = calibration_from_dict(synthetic(world_size=2))
    m4 = build_comm_model(build_preset("cpu-gloo", ranks_per_host=4), 4, calibration=cal)
    s = 2 ** 20
    # latency x (4-1)/(2-1), per-byte x (3/4)/(1/2)
    assert m4.allreduce_s(s) == pytest.approx(3 * ALPHA + 1.5 * s / BW)
    assert m4.describe()["rescaled_to_num_ranks"] is True


def test_interference_and_copy_bandwidth_are_kept():
    cal = calibration_from_dict(synthetic())
    # a file that names no weighting gets the calibration's, "uniform"; one that names it keeps it
    assert cal.interference == Interference(compute_slowdown=1.35, comm_slowdown=1.2, weighting="uniform")
    named = synthetic()
    named["interference"]["weighting"] = "bandwidth"
    assert calibration_from_dict(named).interference.weighting == "bandwidth"
    named["interference"]["weighting"] = "bytes"
    with pytest.raises(InputError, match=r"^calibration: interference.weighting: 'bytes' is not accepted"):
        calibration_from_dict(named)
    assert cal.copy_bandwidth_bytes_per_s == 5.1e9
    doc = synthetic()
    doc["interference"] = None
    doc["copy_bandwidth_bytes_per_s"] = None
    c2 = calibration_from_dict(doc)
    assert c2.interference is None and c2.copy_bandwidth_bytes_per_s is None


def test_save_load_roundtrip(tmp_path):
    cal = calibration_from_dict(synthetic())
    p = save_calibration(cal, tmp_path / "c.json")
    assert load_calibration(p) == cal


def _broken(path: str, value):
    doc = synthetic()
    cur = doc
    keys = path.split(".")
    for k in keys[:-1]:
        cur = cur[int(k)] if isinstance(cur, list) else cur[k]
    last = keys[-1]
    if value is KeyError:
        del cur[last]
    elif isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value
    return doc


@pytest.mark.parametrize("path,value,match", [
    ("format", "nope", r"calibration: format: 'nope' is not accepted; expected 'ddpsim-calibration'"),
    ("version", 2, r"calibration: version: 2 is not accepted; expected 1"),
    ("backend", "mpi", r"calibration: backend: 'mpi' is not accepted; expected 'nccl' or 'gloo'"),
    ("world_size", 1, r"calibration: world_size: 1 is not accepted; expected a value >= 2"),
    ("world_size", KeyError, r"calibration: world_size: missing; expected this key"),
    ("collectives", [], r"calibration: collectives: \[\] is not accepted"),
    ("collectives.allreduce", "x", r"calibration: collectives.allreduce: 'x' is not accepted; expected a valid list"),
    ("collectives.allreduce.1.time_s", -1.0,
     r"calibration: collectives.allreduce\[1\].time_s: -1.0 is not accepted; expected a value > 0"),
    ("collectives.allreduce.2.size_bytes", 0,
     r"calibration: collectives.allreduce\[2\].size_bytes: 0 is not accepted; expected a value > 0"),
    ("collectives.allreduce.0.size_bytes", KeyError, r"calibration: collectives.allreduce\[0\].size_bytes: missing; expected this key"),
    ("collectives.allreduce.3", 7, r"calibration: collectives.allreduce\[3\]: 7 is not accepted"),
    ("collectives.broadcast.0.num_samples", 0, r"calibration: collectives.broadcast\[0\].num_samples: 0"),
    ("collectives.reduce", [], r"calibration: collectives.reduce: unknown key; expected one of allreduce, broadcast"),
    ("interference.comm_slowdown", 0.5, r"calibration: interference.comm_slowdown: 0.5 is not accepted"),
    ("interference", 3, r"calibration: interference: 3 is not accepted"),
    ("copy_bandwidth_bytes_per_s", 0, r"calibration: copy_bandwidth_bytes_per_s: 0 is not accepted"),
])
def test_malformed_calibration_names_the_field(path, value, match):
    with pytest.raises(InputError, match=match):
        calibration_from_dict(_broken(path, value))


def test_too_few_or_repeated_points():
    doc = synthetic()
    doc["collectives"]["allreduce"] = doc["collectives"]["allreduce"][:1]
    with pytest.raises(InputError, match=r"calibration: collectives.allreduce: '1 point\(s\)'.*at least 2"):
        calibration_from_dict(doc)
    doc = synthetic()
    doc["collectives"]["allreduce"][1]["size_bytes"] = doc["collectives"]["allreduce"][0]["size_bytes"]
    with pytest.raises(InputError, match=r"repeated size_bytes"):
        calibration_from_dict(doc)


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match=r"calibration: '.*missing.json' does not exist or is not a file"):
        load_calibration(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"calibration '.*bad.json': not valid JSON"):
        load_calibration(bad)


def test_backend_mismatch():
    cal = calibration_from_dict(synthetic())
    with pytest.raises(InputError, match=r"calibration.backend: 'gloo' does not match the topology's backend 'nccl'"):
        build_comm_model(build_preset("dgx-a100"), 8, calibration=cal)


def test_cli_with_calibration(tmp_path, capsys):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(synthetic()))
    assert main(["collectives", "--topology", "cpu-gloo", "--calibration", str(p), "--sizes", "1MiB",
                 "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["time_s"] == pytest.approx(ALPHA + 2 ** 20 / BW)
    p.write_text(json.dumps(_broken("collectives.allreduce.1.time_s", "fast")))
    assert main(["collectives", "--topology", "cpu-gloo", "--calibration", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert re.search(r"calibration '.*c\.json': collectives.allreduce\[1\].time_s: 'fast' is not accepted", err)


def test_noisy_dip_is_pooled_isotonic():
    from ddpsim.network.curve_fit import isotonic

    # 64 KiB measured slower than 256 KiB: the two are pooled to their weighted mean
    assert isotonic([1.0, 3.0, 2.0, 4.0], [1, 1, 1, 1]) == [1.0, 2.5, 2.5, 4.0]
    assert isotonic([1.0, 3.0, 2.0], [1, 1, 3]) == [1.0, 2.25, 2.25]
    c = fit_curve([CalibrationPoint(size_bytes=1000, time_s=1e-4), CalibrationPoint(size_bytes=2000, time_s=3e-4),
                   CalibrationPoint(size_bytes=3000, time_s=2e-4), CalibrationPoint(size_bytes=4000, time_s=4e-4)])
    assert c.times_s == pytest.approx((1e-4, 2.5e-4, 2.5e-4, 4e-4))
    assert all(c.time_s(s) <= c.time_s(s + 100) for s in range(500, 5000, 100))


def test_ddp_iteration_overhead_is_optional_and_reaches_the_comm_model(tmp_path):
    old = calibration_from_dict(synthetic())  # a file from before the field existed
    assert old.ddp_iteration_overhead_s is None
    graph = build_preset("cpu-gloo")
    assert build_comm_model(graph, 2, calibration=old).iteration_overhead_s == 0.0
    doc = synthetic()
    doc["ddp_iteration_overhead_s"] = 2.5e-3
    doc["ddp_overhead"] = {"bare_step_s": 5e-4}  # the executor's details: kept in the file, not read
    cal = calibration_from_dict(doc)
    assert cal.ddp_iteration_overhead_s == 2.5e-3
    m = build_comm_model(graph, 2, calibration=cal)
    assert m.iteration_overhead_s == 2.5e-3 and m.describe()["ddp_iteration_overhead_s"] == 2.5e-3
    assert load_calibration(save_calibration(cal, tmp_path / "c.json")) == cal
    doc["ddp_iteration_overhead_s"] = None
    assert calibration_from_dict(doc).ddp_iteration_overhead_s is None


def test_broadcast_per_tensor_is_optional_and_reaches_the_comm_model(tmp_path):
    graph = build_preset("cpu-gloo")
    old = calibration_from_dict(synthetic())  # a file without it: nothing charged
    assert old.broadcast_per_tensor_s is None and build_comm_model(graph, 2, calibration=old).broadcast_per_tensor_s == 0.0
    doc = synthetic()
    doc["broadcast_per_tensor_s"] = 3e-5
    doc["buffer_broadcast"] = {"tensors": 96}  # the executor's details: kept in the file, not read
    cal = calibration_from_dict(doc)
    m = build_comm_model(graph, 2, calibration=cal)
    assert m.broadcast_per_tensor_s == 3e-5 and m.describe()["broadcast_per_tensor_s"] == 3e-5
    assert load_calibration(save_calibration(cal, tmp_path / "c.json")) == cal
    doc["broadcast_per_tensor_s"] = -1e-5
    with pytest.raises(InputError, match=r"^calibration: broadcast_per_tensor_s: -1e-05 is not accepted; expected (a value >= 0|a valid number|a finite number)$"):
        calibration_from_dict(doc)


def test_ddp_overhead_is_recomputed_against_the_idle_launch_charge(tmp_path):
    """With an after-compute curve, the overhead is what makes the engine's charge for the
    executor's tiny DDP step (bare step + copies + loop + idle-launch extra + overhead) equal
    the measured DDP step; the file's residue, taken against the loop curve alone, is kept aside."""
    doc = synthetic()
    doc["ddp_iteration_overhead_s"] = 2.0e-3
    n = 4096 + 30720  # halfway: the after-compute curve is 1.0 ms over the loop there
    doc["ddp_overhead"] = {"gradient_bytes": n, "ddp_step_s": 3.0e-3, "bare_step_s": 0.5e-3, "copy_s": 0.1e-3}
    assert calibration_from_dict(doc).ddp_iteration_overhead_s == 2.0e-3   # no after-compute curve: as measured
    doc["allreduce_after_compute"] = [{"size_bytes": s, "time_s": ALPHA + s / BW + d, "num_samples": 30}
                                      for s, d in ((4096, 0.5e-3), (65536, 1.5e-3))]
    cal = calibration_from_dict(doc)
    loop = ALPHA + n / BW  # 53.93 us
    assert cal.ddp_iteration_overhead_s == pytest.approx(3.0e-3 - 0.5e-3 - 0.1e-3 - (loop + 1.0e-3))  # 1.346 ms
    assert cal.ddp_iteration_overhead_measured_s == 2.0e-3
    m = build_comm_model(build_preset("cpu-gloo"), 2, calibration=cal)
    assert m.iteration_overhead_s == pytest.approx(1.3460736e-3)
    assert m.describe()["ddp_iteration_overhead_measured_s"] == 2.0e-3
    assert loop + m.idle_launch_extra_s(n) + m.iteration_overhead_s + 0.6e-3 == pytest.approx(3.0e-3)
    # a DDP step the charge already exceeds: 0, not negative
    doc["ddp_overhead"]["ddp_step_s"] = 1.0e-3
    assert calibration_from_dict(doc).ddp_iteration_overhead_s == 0.0
    # an after-compute curve below the loop: the loop is the charge
    doc["ddp_overhead"]["ddp_step_s"] = 3.0e-3
    doc["allreduce_after_compute"] = [{"size_bytes": s, "time_s": (ALPHA + s / BW) / 2} for s in (4096, 65536)]
    assert calibration_from_dict(doc).ddp_iteration_overhead_s == pytest.approx(3.0e-3 - 0.6e-3 - loop)
    # details without the step figures (older files): as measured
    doc["ddp_overhead"] = {"bare_step_s": 5e-4}
    assert calibration_from_dict(doc).ddp_iteration_overhead_s == 2.0e-3
    assert calibration_from_dict(doc).ddp_iteration_overhead_measured_s is None


@pytest.mark.parametrize("value", [-1e-3, "2ms", float("inf"), True])
def test_bad_ddp_iteration_overhead(value):
    doc = synthetic()
    doc["ddp_iteration_overhead_s"] = value
    with pytest.raises(InputError, match=r"^calibration: ddp_iteration_overhead_s: .* is not accepted; expected (a value >= 0|a valid number|a finite number)$"):
        calibration_from_dict(doc)


def test_allreduce_after_compute_gives_the_idle_launch_extra(tmp_path):
    graph = build_preset("cpu-gloo")
    assert build_comm_model(graph, 2, calibration=calibration_from_dict(synthetic())).idle_launch_extra_s is None
    doc = synthetic()
    # after-compute = loop + 0.5 ms at 4 KiB, + 1.5 ms at 64 KiB (loop: ALPHA + s / BW)
    doc["allreduce_after_compute"] = [{"size_bytes": s, "time_s": ALPHA + s / BW + d, "num_samples": 30}
                                      for s, d in ((65536, 1.5e-3), (4096, 0.5e-3))]
    cal = calibration_from_dict(doc)
    assert [p.size_bytes for p in cal.allreduce_after_compute] == [4096, 65536]   # sorted
    f = build_comm_model(graph, 2, calibration=cal).idle_launch_extra_s
    assert f(4096) == pytest.approx(0.5e-3) and f(65536) == pytest.approx(1.5e-3)
    # between the points both curves are straight lines: the difference is too
    assert f(4096 + 30720) == pytest.approx(1.0e-3)
    assert f(1024) == pytest.approx(0.5e-3)          # below: both curves flat at their smallest size
    assert f(64 << 20) == pytest.approx(1.5e-3)      # above: the largest size's difference, a latency
    assert f(0) == 0.0
    assert load_calibration(save_calibration(cal, tmp_path / "c.json")) == cal
    # an after-compute curve below the loop gives no negative extra
    doc["allreduce_after_compute"] = [{"size_bytes": s, "time_s": (ALPHA + s / BW) / 2} for s in (4096, 65536)]
    assert build_comm_model(graph, 2, calibration=calibration_from_dict(doc)).idle_launch_extra_s(4096) == 0.0


@pytest.mark.parametrize("value, match", [
    ([{"size_bytes": 4096, "time_s": 1e-3}], r"^calibration: allreduce_after_compute: '1 point\(s\)' is not accepted; expected none or at least 2 measured sizes$"),
    ("fast", r"^calibration: allreduce_after_compute: 'fast' is not accepted; expected a valid list$"),
    ([{"size_bytes": 4096}, {"size_bytes": 8192, "time_s": 1e-3}], r"^calibration: allreduce_after_compute\[0\].time_s: missing"),
])
def test_bad_allreduce_after_compute(value, match):
    doc = synthetic()
    doc["allreduce_after_compute"] = value
    with pytest.raises(InputError, match=match):
        calibration_from_dict(doc)


def test_allreduce_queued_gives_lanes_and_their_pace(tmp_path):
    graph = build_preset("cpu-gloo")
    plain = build_comm_model(graph, 2, calibration=calibration_from_dict(synthetic()))
    assert plain.comm_lanes == 1 and plain.concurrent_rate("allreduce", 4096, 2) == 1.0
    doc = synthetic()
    # queued per op: 1/4 of the loop at 4 KiB (latency hidden), 3/4 at 64 KiB and above
    doc["allreduce_queued"] = [{"size_bytes": s, "time_s": (ALPHA + s / BW) * f, "num_samples": 10}
                               for s, f in ((65536, 0.75), (4096, 0.25), (1 << 20, 0.75))]
    doc["comm_threads"] = 2
    cal = calibration_from_dict(doc)
    assert [p.size_bytes for p in cal.allreduce_queued] == [4096, 65536, 1 << 20] and cal.comm_threads == 2
    m = build_comm_model(graph, 2, calibration=cal)
    assert m.comm_lanes == 2
    # b / (n q): 1 / (2 x 1/4) = 2 at 4 KiB; 1 / (2 x 3/4) = 2/3 at 64 KiB
    assert m.concurrent_rate("allreduce", 4096, 2) == pytest.approx(2.0)
    assert m.concurrent_rate("allreduce", 65536, 2) == pytest.approx(2 / 3)
    assert m.concurrent_rate("allreduce", 64 << 20, 2) == pytest.approx(2 / 3)   # beyond: the largest's ratio
    assert m.concurrent_rate("broadcast", 65536, 2) == pytest.approx(2 / 3)      # any kind: as an all-reduce
    assert m.concurrent_rate("allreduce", 65536, 1) == 1.0
    d = m.describe()
    assert (d["comm_lanes"], d["allreduce_queued_points"]) == (2, 3)
    # a queued op slower than half a blocking one (noise): never below sharing one lane
    doc["allreduce_queued"] = [{"size_bytes": s, "time_s": 2 * (ALPHA + s / BW)} for s in (4096, 65536)]
    assert build_comm_model(graph, 2, calibration=calibration_from_dict(doc)).concurrent_rate("allreduce", 4096, 2) == 0.5
    assert load_calibration(save_calibration(cal, tmp_path / "c.json")) == cal


@pytest.mark.parametrize("queued, threads, match", [
    ([{"size_bytes": 4096, "time_s": 1e-3}], 2, r"^calibration: allreduce_queued: '1 point\(s\)' is not accepted; expected none or at least 2 measured sizes$"),
    ([{"size_bytes": 4096, "time_s": 1e-3}, {"size_bytes": 8192, "time_s": 1e-3}], None,
     r"^calibration: comm_threads: None is not accepted; expected the process group's worker threads beside allreduce_queued$"),
    ([], 0, r"^calibration: comm_threads: 0 is not accepted; expected a value >= 1$"),
    ([], "2", r"^calibration: comm_threads: '2' is not accepted; expected a valid integer$"),
])
def test_bad_allreduce_queued(queued, threads, match):
    doc = synthetic()
    doc["allreduce_queued"] = queued
    if threads is not None:
        doc["comm_threads"] = threads
    with pytest.raises(InputError, match=match):
        calibration_from_dict(doc)


def test_comm_hook_call_s_reaches_only_points_with_a_python_hook():
    from ddpsim.pipeline.inputs import hook_call_s
    from ddpsim.pipeline.scenario import scenario_from_dict
    from ddpsim.validation.intervals import validation_inputs

    cal = calibration_from_dict({**synthetic(), "comm_hook_call_s": 7e-5})
    assert cal.comm_hook_call_s == 7e-5 and cal.doc.model_dump()["comm_hook_call_s"] == 7e-5
    assert calibration_from_dict(synthetic()).comm_hook_call_s is None
    assert (hook_call_s(cal, "none"), hook_call_s(cal, "allreduce"), hook_call_s(None, "fp16")) == (0.0, 7e-5, 0.0)
    with pytest.raises(InputError, match=r"comm_hook_call_s"):
        calibration_from_dict({**synthetic(), "comm_hook_call_s": -1.0})
    # validate predicts round-robin groups with the dealing hook, whose call the calibration costs
    sc = scenario_from_dict({"name": "t", "model": "mlp", "world_size": 2, "cluster": {"topology": "cpu-gloo"},
                             "ddp": {"bucket_cap_mb": 0.25}, "sweep": {"bucket_cap_mb": [0.25], "process_groups": [1, 2]}})
    from ddpsim.trace.records import load_trace

    tr = load_trace("traces/mlp.cpu.json")
    one, two = (validation_inputs(sc, p, trace=tr, calibration=cal).config for p in sc.points()[-2:])
    assert (one.comm_hook, one.comm_hook_call_s) == ("none", 0.0)
    assert (two.comm_hook, two.comm_hook_call_s) == ("allreduce", 7e-5)


def test_save_writes_the_file_itself_probe_and_host_costs_kept(tmp_path):
    """The saved file is the validated document: the probe, the host costs and the measured
    overhead come back as read, so the reload derives the same fitted model."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "reports/zoo/lanes/zoo/calibration.json"
    cal = load_calibration(path)
    again = load_calibration(save_calibration(cal, tmp_path / "c.json"))
    assert again == cal and again.interference_probe is not None
    assert again.interference_fit == cal.interference_fit and again.doc.ddp_iteration_overhead_s == json.loads(
        path.read_text())["ddp_iteration_overhead_s"]
    doc = {**synthetic(), "host_costs": {"enqueue_s": 2.5e-5}}
    kept = load_calibration(save_calibration(calibration_from_dict(doc), tmp_path / "h.json"))
    assert kept.host_costs.enqueue_s == 2.5e-5
