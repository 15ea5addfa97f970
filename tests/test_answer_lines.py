"""The answer's lines a reader acts on: what to paste, and what the answer rests on."""

from ddpsim.report.figures import CapList, TraceFigures, typed
from ddpsim.report.summary import PRACTICAL_GAIN, _cap_list_line, _trust_line


def _cap_list(gain_over_best_cap: float) -> CapList:
    return CapList(**{"iteration_p50_s": 0.05, "gain_over_default": 0.002, "gain_over_best_cap": gain_over_best_cap,
            "default_point": "cap=default", "best_cap_point": "cap=50", "best_cap_mb": 50,
            "reproduces_recommended_plan": True, "paste": "DDP(model, bucket_cap_mb_list=[1, 25])", "reason": ""})


def test_a_tie_with_the_default_pastes_the_default():
    line = _cap_list_line(_cap_list(0.0), cap_gain=PRACTICAL_GAIN / 2)
    assert "`DDP(model)` (`cap=default`)" in line and "`cap=50`" in line
    assert "bucket_cap_mb=50" not in line


def test_a_clear_gain_pastes_the_cap():
    line = _cap_list_line(_cap_list(0.0), cap_gain=2 * PRACTICAL_GAIN)
    assert "`DDP(model, bucket_cap_mb=50)` (`cap=50`)" in line


def test_a_clearly_faster_list_is_pasted_whatever_the_cap_gain():
    line = _cap_list_line(_cap_list(2 * PRACTICAL_GAIN), cap_gain=0.0)
    assert "bucket_cap_mb_list=[1, 25]" in line


def _trust(backend: str, model: str, synthetic: bool) -> str | None:
    trace = typed(TraceFigures, {"model": "m", "num_params": 1, "param_bytes": 4, "device": "cpu", "device_name": "AMD EPYC",
                                 "batch_size": None, "synthetic": synthetic, "forward_s": 1.0, "backward_s": 1.0,
                                 "optimizer_s": 1.0})
    return _trust_line(backend, {"model": model}, trace)


def test_trust_line_names_what_the_answer_rests_on():
    gpu = _trust("nccl", "nccl", True)
    assert "re-timed for the GPU from a CPU capture" in gpu and "NCCL's algorithm choice (tuning.cc) timed from its execution" in gpu
    cpu = _trust("gloo", "gloo-ring", False)
    assert "measured on AMD EPYC" in cpu and "not calibrated on this host" in cpu
    cal = _trust("gloo", "calibrated", False)
    assert "this host's calibration" in cal and "not calibrated" not in cal
    for line in (gpu, cpu, cal):
        assert line.startswith("- How sure:") and "\n" not in line
