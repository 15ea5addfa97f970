"""``benchmarks/bench_validation.py --pairing``: the scatter figures, worked out by hand on a
report folder written here (two points, two rounds)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from executor.launch import REPO_ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench_validation", REPO_ROOT / "benchmarks" / "bench_validation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(folder: Path, *, round_launch: bool) -> dict:
    raw = folder / "validation"
    raw.mkdir(parents=True)
    e = math.exp
    # run forwards e^{+-0.02} (trace forward 1.0 in each round, or, by slice, 1.0 before cap=1 and
    # 2.0 before cap=5); run steps: cap=1 2e^{+0.01} then 2e^{-0.01}, cap=5 3.0 in both rounds
    forwards = {"cap=1": [e(0.02), e(-0.02)], "cap=5": [2 * e(0.02), 2 * e(-0.02)] if round_launch else [e(0.02), e(-0.02)]}
    steps = {"cap=1": [2 * e(0.01), 2 * e(-0.01)], "cap=5": [3.0, 3.0]}
    order = ["cap=1", "cap=5"]
    for k in (1, 2):
        its = ([1.0, 1.0, 2.0, 2.0] if round_launch else [1.0, 1.0])
        trace = {"iterations": [{"forward_s": f} for f in its],
                 "environment": {"interleaved_with": order} if round_launch else {}}
        (raw / f"trace.round{k}.json").write_text(json.dumps(trace))
        for p in order:
            run = {"summary": {"forward_s": forwards[p][k - 1], "step_times_s": [steps[p][k - 1]] * 2}}
            if round_launch:
                run["launch"] = {"kind": "round", "round": k, "order": order, "position": order.index(p) + 1}
            (raw / f"{p}.run{k}.json").write_text(json.dumps(run))
    rows = [{"point": p, "measured_s": sum(steps[p]) / 2} for p in order]
    return {"scenario": folder.name, "rows": rows, **({"launch": "round"} if round_launch else {})}


def test_pairing_figures_point_layout_by_hand(tmp_path):
    bench = _bench()
    d = _write(tmp_path / "s", round_launch=False)
    f = bench.pairing_figures(tmp_path / "s", d)
    # track: logs +-0.02 twice, mean 0: sample sd sqrt(4 * 0.02^2 / 3)
    assert f["track"] == pytest.approx(100 * math.sqrt(4 * 0.0004 / 3))
    assert f["bias"] == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(f["slice"]) and f["launch"] == "point" and (f["runs"], f["rounds"]) == (4, 2)
    # pair: ln(cap=1 / cap=5) per round = ln(2/3) +- 0.01: sd of two values 0.02 apart = 0.01 * sqrt 2
    assert f["pair"] == pytest.approx(100 * 0.01 * math.sqrt(2))
    # run: each run mean over its point's pooled mean; cap=1: +-0.01 - ln cosh 0.01, cap=5: 0, 0
    c = math.log(math.cosh(0.01))
    devs = [0.01 - c, -0.01 - c, 0.0, 0.0]
    m = sum(devs) / 4
    assert f["run"] == pytest.approx(100 * math.sqrt(sum((x - m) ** 2 for x in devs) / 3))


def test_pairing_figures_round_layout_compares_each_run_with_its_own_slice(tmp_path):
    bench = _bench()
    d = _write(tmp_path / "s", round_launch=True)
    f = bench.pairing_figures(tmp_path / "s", d)
    assert f["launch"] == "round"
    # against its own slice (1.0 before cap=1, 2.0 before cap=5) every run is e^{+-0.02}
    assert f["slice"] == pytest.approx(100 * math.sqrt(4 * 0.0004 / 3))
    # against the round's whole trace (median forward 1.5): cap=1 ln(e^{+-.02}/1.5), cap=5 ln(2e^{+-.02}/1.5)
    logs = [0.02 - math.log(1.5), -0.02 - math.log(1.5), 0.02 + math.log(2 / 1.5), -0.02 + math.log(2 / 1.5)]
    m = sum(logs) / 4
    assert f["bias"] == pytest.approx(100 * m)
    assert f["track"] == pytest.approx(100 * math.sqrt(sum((x - m) ** 2 for x in logs) / 3))


def test_pairing_figures_need_the_rounds_traces(tmp_path):
    bench = _bench()
    d = _write(tmp_path / "s", round_launch=False)
    (tmp_path / "s" / "validation" / "trace.round2.json").unlink()
    assert bench.pairing_figures(tmp_path / "s", d) is None
