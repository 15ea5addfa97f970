"""The collective score (:mod:`ddpsim.network.curve_score`, printed by
``benchmarks/bench_collective_score.py``) describes every public curve or says why it cannot, and
the uncertainty band's collective term is the residuals' spread, recomputed from the curves."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pytest

from ddpsim.network import nccl_exec
from ddpsim.network import curve_score
from ddpsim.pipeline import resampling

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "nccl-curves"
MiB = 1 << 20


def test_every_scorable_curve_has_a_description_or_a_reason():
    meta, points = curve_score.load(DATA)
    assert len(meta) == 43 and all(points[m["curve_id"]] for m in meta)
    for m in meta:
        if m["category"] in ("normal", "forced_algo"):
            case = curve_score.CASES[m["curve_id"]]
            assert case.preset is not None or case.note, m["curve_id"]


def test_suspect_and_pathological_curves_never_fit():
    meta, points = curve_score.load(DATA)
    fitted = {id(model) for model, _, _, _ in curve_score.fit_points(meta, points)}
    scored = {m["curve_id"]: m["category"] for m, _ in curve_score.scored(meta)}
    assert set(scored.values()) <= {"normal", "forced_algo"}
    assert len(fitted) == sum(1 for m, c in curve_score.scored(meta) if m["category"] == "normal" and not c.transport)


def test_band_stats_by_hand():
    # model 10 % fast at 1 KiB, 20 % slow at 2 MiB and 4 MiB, exact at 1 GiB
    res = [(1024, 10.0, 9.0, ""), (2 << 20, 100.0, 120.0, ""), (4 << 20, 200.0, 240.0, ""), (1 << 30, 5.0, 5.0, "")]
    b = curve_score.band_stats(res)
    assert b["<1MiB"] == pytest.approx((0.1, -0.1, 1))
    assert b["1-128MiB"] == pytest.approx((0.2, 0.2, 2))
    assert b[">=256MiB"] == pytest.approx((0.0, 0.0, 1))


def test_band_factors_are_the_quantiles_of_measured_over_model():
    meta, points = curve_score.load(DATA)
    ratios = curve_score.mid_size_ratios(meta, points)
    deciles = statistics.quantiles(ratios, n=10, method="inclusive")
    assert nccl_exec.MID_SIZE_RATIOS == pytest.approx((deciles[0], deciles[-1]), abs=5e-4)


def test_resampling_uses_the_residual_band():
    assert resampling.MID_SIZE_RATIOS == nccl_exec.MID_SIZE_RATIOS
    lo, hi = resampling.MID_SIZE_RATIOS
    assert lo < 1 < hi


def test_a_timed_torch_call_holds_its_host_path():
    # all_reduce_bench.py times one torch.distributed.all_reduce from the host's call on an idle device:
    # every size pays the host path once on top of the kernel; nccl-tests' back-to-back kernels do not
    points = [(1 << 10, 50.0), (1 << 20, 60.0), (1 << 30, 3000.0)]
    kernel = curve_score.residuals(curve_score.Case("dgx-b200", 1, 8), points)
    torch_call = curve_score.residuals(curve_score.Case("dgx-b200", 1, 8, torch_call=True), points)
    assert [t - k for (_, _, k, _), (_, _, t, _) in zip(kernel, torch_call)] == pytest.approx(
        [curve_score.TORCH_CALL_US] * 3)
    assert curve_score.CASES["b200_8g_stas00_torch"].torch_call and not curve_score.CASES["a100_8g_stas00"].torch_call


def test_markdown_table_lists_other_transports_last():
    b = {"<1MiB": None, "1-128MiB": (0.2, -0.2, 3), ">=256MiB": (0.05, 0.01, 2)}
    rows = [({"curve_id": "z_ib", "category": "forced_algo"}, curve_score.Case("dgx-a100", 2, 16, algorithm="ring"), b),
            ({"curve_id": "a_efa", "category": "normal"}, curve_score.Case("dgx-a100", 2, 16, transport=curve_score.EFA), b),
            ({"curve_id": "m_nvl", "category": "normal"}, curve_score.Case("dgx-h100", 1, 8, {"nic_gbit": 400}), b)]
    lines = curve_score.markdown_lines(rows)[2:]
    assert [ln.split("`")[1] for ln in lines] == ["m_nvl", "z_ib", "a_efa"]
    assert lines[0] == "| `m_nvl` | normal | dgx-h100, 1, 8, `nic_gbit=400`, choice | – | 20.0 (-20.0) | 5.0 (+1.0) |"
    assert "other transport: apart" in lines[2]


def test_diagnose_splits_the_mid_band_by_protocol():
    res = [(MiB, 10.0, 9.0, "ring/ll"), (2 * MiB, 10.0, 11.0, "ring/ll128"), (4 * MiB, 10.0, 13.0, "ring/ll128"),
           (1 << 30, 100.0, 95.0, "ring/simple")]
    out = curve_score.diagnose_line(res)
    assert "ring/ll -10% (1), ring/ll128 +20% (2)" in out and "largest size 1024 MiB -5.0% ring/simple" in out


def test_fit_keeps_only_constants_that_hold_the_published_checks(monkeypatch):
    # one curve whose run a Simple step of 4 us matches exactly; that value breaks a (stand-in) check,
    # so the fit takes the best of the rest (2 us), and with every value breaking one it says so
    class Estimate:
        def __init__(self, time_s: float) -> None:
            self.time_s = time_s

    class Model:
        def estimate_allreduce(self, size: int) -> Estimate:
            return Estimate((10.0 + nccl_exec.STEP_OVERHEAD_US["simple"]) * 1e-6)

    curves = [(Model(), curve_score.Case("dgx-a100"), [(1 << 20, 14.0)], 1.0)]
    monkeypatch.setattr(curve_score, "GRID", {"simple": (1.0, 2.0, 4.0)})
    monkeypatch.setattr(curve_score, "check_errors", lambda: [0.2 if nccl_exec.STEP_OVERHEAD_US["simple"] == 4.0 else 0.0])
    saved = curve_score.constants()
    assert curve_score.fit_overheads(curves) == {"simple": 2.0}
    assert curve_score.constants() == saved
    # a torch-timed curve is fitted as its tool times it: the same run plus the call's host path
    # (12 us + the host path: 2 us with it; without it the grid's nearest would be 4 us)
    timed = [(Model(), curve_score.Case("dgx-b200", torch_call=True), [(1 << 20, 12.0 + curve_score.TORCH_CALL_US)], 1.0)]
    monkeypatch.setattr(curve_score, "check_errors", lambda: [0.0])
    assert curve_score.fit_overheads(timed) == {"simple": 2.0}
    monkeypatch.setattr(curve_score, "check_errors", lambda: [0.11])
    with pytest.raises(ValueError, match="no point of the grid keeps every published check within 10%"):
        curve_score.fit_overheads(curves)


def test_a_fold_without_the_generation_keeps_the_common_value(monkeypatch):
    # no curve of the fold runs Blackwell LL, so every value of its round trip costs the same: the tie
    # keeps the grid's first value, the common round trip
    class Model:
        def estimate_allreduce(self, size: int):
            return type("Estimate", (), {"time_s": 12e-6})()

    grid = {"blackwell_ll_round_trip": curve_score.GRID["blackwell_ll_round_trip"]}
    monkeypatch.setattr(curve_score, "GRID", grid)
    monkeypatch.setattr(curve_score, "check_errors", lambda: [0.0])
    fit = curve_score.fit_overheads([(Model(), curve_score.Case("dgx-a100"), [(1 << 20, 14.0)], 1.0)])
    assert fit == {"blackwell_ll_round_trip": nccl_exec.LL_ROUND_TRIP_US}


def test_same_system_spread_is_slowest_over_fastest_at_common_sizes(monkeypatch):
    meta, points = curve_score.load(DATA)
    groups = {key: (ids, dict(r)) for key, ids, r in curve_score.same_system_spread(meta, points)}
    ids, ratios = groups[("dgx-a100", 1, 8, ())]
    assert sorted(ids) == ["a100_1x8_abci_anode", "a100_8g_azure_ndv4", "a100_8g_stas00"]
    at_1mib = [dict(points[i])[1 << 20] for i in ids]
    assert ratios[1 << 20] == pytest.approx(max(at_1mib) / min(at_1mib))
    assert min(ratios) == 1 << 20 and max(ratios) == 32 << 20  # the ABCI run stops at 32 MiB
    # a torch-timed curve's times hold a host path: it joins no group
    torch_timed = dataclasses.replace(curve_score.CASES["a100_8g_stas00"], torch_call=True)
    monkeypatch.setitem(curve_score.CASES, "a100_8g_stas00", torch_timed)
    groups = {key: ids for key, ids, _ in curve_score.same_system_spread(meta, points)}
    assert sorted(groups[("dgx-a100", 1, 8, ())]) == ["a100_1x8_abci_anode", "a100_8g_azure_ndv4"]


# An 8 x H200 node timed by the same tool as the B200 curves, outside the scored data:
# stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md @ c53741b (all_reduce_bench.py
# there times one call after a barrier; torch 2.9.1, NCCL 2.27.7): algbw GB/s per size
H200_TORCH_ALGBW = {1 * MiB: 22.82, 2 * MiB: 36.87, 4 * MiB: 61.23, 8 * MiB: 88.87, 16 * MiB: 125.65,
                    32 * MiB: 157.62, 64 * MiB: 198.01, 128 * MiB: 229.67}


def test_torch_timed_8xh200_outside_the_data_within_10_percent_and_nccls_switch():
    points = [(s, s / (a * 1e3)) for s, a in sorted(H200_TORCH_ALGBW.items())]
    res = curve_score.residuals(curve_score.Case("dgx-h200", 1, 8, torch_call=True), points)
    assert curve_score.band_stats(res)["1-128MiB"][0] <= 0.10
    # the source's NCCL_DEBUG=INFO: Ring with LL up to 1 MiB, NVLS with Simple from 2 MiB
    assert [ap for _, _, _, ap in res[:3]] == ["ring/ll", "nvls/simple", "nvls/simple"]
