"""The method's error measured on other models (ddpsim/pipeline/method_error.py): conformal order
statistics worked out by hand, a model's own residuals left out, the hull with an interval, the
file's loader, and the zoo's leave-one-model-out coverage."""

import json

import pytest

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.validation.intervals import PredictionInterval
from ddpsim.schema import validate
from ddpsim.pipeline.method_error import (MethodError, ResidualPoint, conformal_band, load_method_error,
                                 widen)
from ddpsim.validation.zoo_driver import apply_method_error, method_error_of, method_totals, summary_row, write_summary


def test_conformal_order_statistics_by_hand():
    # n = 9 at 80 %: the floor(10 * 0.1) = 1st and the ceil(10 * 0.9) = 9th smallest
    rs = [0.05, -0.02, 0.01, 0.03, -0.04, 0.00, 0.02, 0.07, -0.01]
    assert conformal_band(rs, 0.8) == (-0.04, 0.07)
    # n = 19: the 2nd and the 18th smallest
    rs19 = [i / 100 for i in range(19)]
    assert conformal_band(rs19, 0.8) == (0.01, 0.17)
    # n = 29 at 90 %: floor(30 * 0.05) = 1st, ceil(30 * 0.95) = 29th
    assert conformal_band([i / 100 for i in range(29)], 0.9) == (0.0, 0.28)


def test_too_few_residuals_give_no_band():
    # the fewest residuals with both order statistics: 9 at 80 %, 19 at 90 %, 3 at 50 %
    for level, fewest in ((0.8, 9), (0.9, 19), (0.5, 3)):
        assert conformal_band([0.01] * (fewest - 1), level) is None
        assert conformal_band([0.01] * fewest, level) == (0.01, 0.01)
    assert conformal_band([0.01] * 8, 0.8) is None
    assert conformal_band([0.01] * 9, 0.8) == (0.01, 0.01)
    with pytest.raises(InputError, match="level"):
        conformal_band([0.0] * 20, 1.0)


def _me(per_model):
    return MethodError(points=tuple(ResidualPoint(model=m, point=f"cap={i}", predicted_s=1.0, measured_s=1.0 + r)
                                    for m, rs in per_model.items() for i, r in enumerate(rs)))


def test_a_models_own_residuals_never_inform_its_band():
    me = _me({"a": [0.5, 0.6, 0.7], "b": [0.01, 0.02, 0.03], "c": [-0.01, 0.0, 0.01], "d": [0.02, -0.02, 0.04]})
    # a's large residuals widen the others' bands, never its own
    assert me.band(0.8, exclude_model="a") == pytest.approx((-0.02, 0.04))
    assert me.band(0.8, exclude_model="b") == pytest.approx((-0.02, 0.7))
    assert me.band(0.8) == pytest.approx((-0.02, 0.7))
    assert me.band(0.8, exclude_model="a") == pytest.approx(conformal_band([0.01, 0.02, 0.03, -0.01, 0.0, 0.01, 0.02, -0.02, 0.04], 0.8))


def test_residual_is_measured_over_predicted_minus_one():
    p = ResidualPoint(model="m", point="cap=1", predicted_s=0.2, measured_s=0.25)
    assert p.residual == pytest.approx(0.25)


def test_widen_takes_the_hull_of_interval_and_band():
    iv = PredictionInterval(low_s=0.95, high_s=1.02, level=0.8, num_resamples=10, num_captures=3, num_iterations=20,
                            seed=0, center_s=1.0)
    w = widen(iv, (-0.02, 0.07))
    assert (w.low_s, w.high_s) == (pytest.approx(0.95), pytest.approx(1.07)) and w.method_band == (-0.02, 0.07)
    assert w.to_dict()["method_band"] == [-0.02, 0.07]
    assert widen(iv, None) is iv
    assert "method_band" not in iv.to_dict()


def test_file_round_trip_and_bad_input(tmp_path):
    me = _me({"a": [0.1, 0.2], "b": [0.0]})
    doc = me.to_dict()
    assert [p["residual"] for p in doc["points"]] == pytest.approx([0.1, 0.2, 0.0])
    f = tmp_path / "me.json"
    f.write_text(json.dumps(doc))
    assert load_method_error(f) == me
    for bad, match in [({**doc, "format": "x"}, "format: 'x' is not accepted"), ({**doc, "version": 2}, "version: 2 "),
                       ({**doc, "points": [{"model": "a", "predicted_s": 0, "measured_s": 1}]}, r"points\[0\].predicted_s: 0 "),
                       ({**doc, "points": [{"model": "", "predicted_s": 1, "measured_s": 1}]}, r"points\[0\].model"),
                       ({**doc, "points": [{"model": "a", "predicted_s": 1, "measured_s": float("nan")}]}, "measured_s: nan"),
                       ({**doc, "backend": 3}, "backend: 3 ")]:
        with pytest.raises(InputError, match=match):
            validate(MethodError, bad, "method error")
    with pytest.raises(InputError, match="does not exist or is not a file"):
        load_method_error(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        load_method_error(tmp_path / "bad.json")


def test_mismatch_names_what_differs():
    me = MethodError(points=(), calibration="cal.json", calibration_sha256="aa", backend="gloo", device="cpu")
    assert me.mismatch(calibration_sha256="aa", backend="gloo", device="cpu") is None
    assert "another calibration (cal.json)" in me.mismatch(calibration_sha256="bb")
    assert "backend gloo (the prediction's: nccl)" in me.mismatch(backend="nccl")
    assert me.mismatch(calibration_sha256="bb", backend="nccl", device="cuda") == (
        "the residuals were measured with backend gloo (the prediction's: nccl), device cpu (the prediction's: "
        "cuda), another calibration (cal.json)")


def _result(residuals, half_width):
    pts = []
    for i, r in enumerate(residuals):
        pred = 0.1
        pts.append({"point": f"cap={i}", "bucket_cap_mb": i, "measured_s": pred * (1 + r), "predicted_s": pred,
                    "error_pct": 100 * (pred - pred * (1 + r)) / (pred * (1 + r)),
                    "interval": {"low_s": pred * (1 - half_width), "high_s": pred * (1 + half_width), "level": 0.8,
                                 "num_resamples": 5, "num_captures": 3, "num_iterations": 4, "seed": 0, "center_s": pred},
                    "covered": abs(r) <= half_width})
    return {"status": "done", "analysis": {"points": pts}}


def test_zoo_scores_each_model_with_the_other_models_band(tmp_path):
    # four models under-predicted by 3-6 % with narrow noise intervals (+-1 %): none covered alone
    res = {f"zoo:m{k}": _result([0.03 + 0.01 * k, 0.04, 0.05], 0.01) for k in range(4)}
    res["zoo:odd"] = _result([0.30, 0.31, 0.32], 0.01)  # one model far off: its band is the others'
    rows = [summary_row(n, r) for n, r in res.items()]
    assert all(r["coverage"] == "0/3" for r in rows)
    me = method_error_of(res, calibration=None)
    assert len(me.points) == 15 and me.backend == "gloo"
    detail = apply_method_error(rows, res, me, level=0.8)
    by = {r["model"]: r for r in rows}
    # m0's band: the 12 residuals of m1..m3 and odd (n = 12: the 1st and the 12th smallest)
    others = sorted([0.03 + 0.01 * k for k in (1, 2, 3)] + [0.04, 0.05] * 3 + [0.30, 0.31, 0.32])
    lo, hi = conformal_band(others, 0.8)
    assert (by["zoo:m0"]["method_band_lo_pct"], by["zoo:m0"]["method_band_hi_pct"]) == (pytest.approx(100 * lo), pytest.approx(100 * hi))
    assert by["zoo:m0"]["coverage_method"] == "3/3"
    # odd's residuals lie beyond every other model's: its own band does not reach them
    assert by["zoo:odd"]["coverage_method"] == "0/3" and by["zoo:odd"]["method_band_hi_pct"] < 10
    assert detail["zoo:m0"]["points"][0]["covered"] is True
    tot = method_totals(rows)
    assert tot == {"models": 5, "within_5pct": 4, "covered": 0, "covered_method": 12, "points": 15, "points_method": 15}
    write_summary(tmp_path, rows, level=0.8, results=res, calibration=None)
    assert len(load_method_error(tmp_path / "method_error.json").points) == 15
    md = (tmp_path / "summary.md").read_text()
    assert "| zoo:m0 | done | 3 |" in md and "All models: 4 of 5 within 5 % median |error|; 0/15" in md
    assert "12/15 with the method error of the other models" in md
    assert json.loads((tmp_path / "summary.json").read_text())["method_error"]["zoo:odd"]["band"] == pytest.approx([0.03, 0.06])


def test_cli_method_error_refusals(tmp_path, capsys):
    assert main(["validate", "zoo", "--method-error", str(tmp_path / "x.json")]) == 2  # the zoo writes its own
    assert capsys.readouterr().err.startswith("ddpsim: error: --method-error: ")
    assert main(["validate", "cpu-gloo-mlp", "--reanalyze", "--out-dir", str(tmp_path),
                 "--method-error", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.json" in err[0] and "does not exist or is not a file" in err[0]


def test_trend_residuals_are_the_ratio_errors_of_pairs_of_one_model_both_ways():
    me = MethodError(points=(ResidualPoint(model="a", point="cap=1", predicted_s=1.0, measured_s=1.10),
                             ResidualPoint(model="a", point="cap=25", predicted_s=1.0, measured_s=1.0),
                             ResidualPoint(model="b", point="cap=1", predicted_s=2.0, measured_s=2.0)))
    # a: measured 1.10 / 1.0 against predicted 1.0 / 1.0 -> +10 %, and 1 / 1.1 - 1 the other way; b alone has no pair
    assert me.trend_residuals() == pytest.approx([0.10, 1 / 1.1 - 1])
    assert me.trend_residuals(exclude_model="a") == []
    assert me.trend_band(0.8) is None


def test_answer_names_the_band_and_the_ties():
    from ddpsim.pipeline.method_error import answer

    # 10 models, each predicted 2 % low and with a cap ratio right to within +-1 %
    pts = []
    for k in range(10):
        e = 0.01 if k % 2 else -0.01
        pts += [ResidualPoint(model=f"m{k}", point="cap=1", predicted_s=1.0, measured_s=1.02 * (1 + e)),
                ResidualPoint(model=f"m{k}", point="cap=25", predicted_s=1.0, measured_s=1.02)]
    me = MethodError(points=tuple(pts))
    a = answer(me, points=[("cap=1", 0.100), ("cap=5", 0.1005), ("cap=25", 0.103)], best="cap=1", level=0.8,
               source="me.json", model="m0")
    assert a["models"] == 9 and a["points"] == 18
    lo, hi = a["band"]
    assert a["best_range_s"] == pytest.approx([0.1 * (1 + lo), 0.1 * (1 + hi)])
    t_lo, t_hi = a["trend_band"]
    # 18 ratio errors (9 models, one pair each, both ways): +-0.01 and 1/1.01 - 1, 1/0.99 - 1; the 1st and the 18th
    assert t_lo == pytest.approx(-0.01) and t_hi == pytest.approx(1 / 0.99 - 1)
    # cap=5 is 0.5 % slower than the best: inside the -1 % a ratio was off by; cap=25 3 % slower: outside
    assert a["tied"] == ["cap=5"]
    with pytest.raises(InputError, match="best: 'cap=9'"):
        answer(me, points=[("cap=1", 0.1)], best="cap=9", level=0.8, source="me.json")


def test_run_states_the_method_error_and_refuses_what_it_does_not_hold_for(tmp_path, capsys):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cal = root / "tests" / "data" / "calibration-probe-fit.json"
    me = MethodError(points=tuple(ResidualPoint(model=f"m{k}", point=f"cap={c}", predicted_s=0.1, measured_s=0.1 * (1 + 0.01 * k + 0.002 * c))
                                  for k in range(5) for c in (1, 5)), backend="gloo", device="cpu")
    f = tmp_path / "me.json"
    f.write_text(json.dumps(me.to_dict()))
    text = (root / "scenarios" / "cpu-gloo-mlp.yaml").read_text().replace("trace: traces/", f"trace: {root / 'traces'}/")
    text += f"calibration: {cal}\n"
    scn = tmp_path / "calibrated.yaml"
    scn.write_text(text)
    assert main(["run", str(scn), "--method-error", str(f), "--out-dir", str(tmp_path / "out"), "--no-plots", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Measured error of the method" in out and "10 points of 5 other models" in out
    summ = json.loads((tmp_path / "out" / "cpu-gloo-mlp" / "summary.json").read_text())
    assert summ["method_error"]["band"] == pytest.approx(list(me.band(0.8)))
    assert summ["method_error"]["note"] is None  # the file names no calibration: nothing known differs
    f2 = tmp_path / "me2.json"
    f2.write_text(json.dumps({**me.to_dict(), "calibration": "elsewhere.json", "calibration_sha256": "0" * 64}))
    assert main(["run", str(scn), "--method-error", str(f2), "--out-dir", str(tmp_path / "out"), "--no-plots", "--quiet"]) == 0
    assert "another calibration (elsewhere.json)" in capsys.readouterr().out
    # refused: a scenario without a calibration, another backend, a bad file
    assert main(["run", "cpu-gloo-mlp", "--method-error", str(f), "--out-dir", str(tmp_path / "o2"), "--quiet"]) == 2
    assert "has no calibration" in capsys.readouterr().err
    assert main(["run", "gpt2-1.5b-h100-1n", "--method-error", str(f), "--out-dir", str(tmp_path / "o3"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "measured on gloo" in err[0] and "runs nccl" in err[0]
