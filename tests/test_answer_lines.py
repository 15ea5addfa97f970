"""The answer's lines a reader acts on: what to paste, and what the answer rests on."""

from ddpsim.report.summary import PRACTICAL_GAIN, _cap_list_line, _trust_line


def _cap_list(gain_over_best_cap: float) -> dict:
    return {"iteration_p50_s": 0.05, "gain_over_default": 0.002, "gain_over_best_cap": gain_over_best_cap,
            "default_point": "cap=default", "best_cap_point": "cap=50", "best_cap_mb": 50,
            "reproduces_recommended_plan": True, "paste": "DDP(model, bucket_cap_mb_list=[1, 25])", "reason": ""}


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


def _summary(backend: str, model: str, synthetic: bool) -> dict:
    return {"backend": backend, "comm_model": {"model": model},
            "trace": {"synthetic": synthetic, "device_name": "AMD EPYC", "device": "cpu"}}


def test_trust_line_names_what_the_answer_rests_on():
    gpu = _trust_line(_summary("nccl", "nccl", True))
    assert "re-timed for the GPU from a CPU capture" in gpu and "NCCL's algorithm choice (tuning.cc) timed from its execution" in gpu
    cpu = _trust_line(_summary("gloo", "gloo-ring", False))
    assert "measured on AMD EPYC" in cpu and "not calibrated on this host" in cpu
    cal = _trust_line(_summary("gloo", "calibrated", False))
    assert "this host's calibration" in cal and "not calibrated" not in cal
    for line in (gpu, cpu, cal):
        assert line.startswith("- How sure:") and "\n" not in line
