"""Design spaces (``ddpsim explore``): points, one-line errors, figures against the sweep path,
the Pareto front against brute force, determinism across 1 and 2 processes and Ray, resume.

The small space is GPT-2 124M (the bundled H100 trace, batch 16 per rank) on DGX A100 and DGX
H100 presets x 1-2 nodes x 2 caps, 3 iterations: 8 points.
"""

from __future__ import annotations

import json
import math
import statistics
from functools import partial
from pathlib import Path

import pytest
import yaml

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.pipeline import explore as ex
from ddpsim.pipeline.explore import explore_table, pareto_front
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.pipeline.sweep import run_sweep
from ddpsim.report.explore_report import write_explore_report

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "gpt2-124m.h100.json"


def space_file(tmp_path: Path, axes: dict | None = None, **explore) -> Path:
    data = {"name": "tiny-space", "trace": str(TRACE), "cluster": {"topology": "dgx-h100"}, "world_size": None,
            "simulation": {"iterations": 3, "seed": 0},
            "explore": {"axes": axes or {"system": ["dgx-a100", "dgx-h100"], "nodes": [1, 2],
                                         "bucket_cap_mb": [None, 25]}, **explore}}
    p = tmp_path / "space.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_points_are_the_product_in_the_order_written_caps_and_lists_one_dimension(tmp_path):
    sp = ex.load_space(space_file(tmp_path, {"nodes": [1, 2], "bucket_cap_mb": [None, 5],
                                             "comm_hook": ["none", "bf16"], "bucket_cap_mb_list": [[1, 4]]}))
    ids = [p.point_id for p in ex.space_points(sp)]
    assert len(ids) == 2 * 3 * 2 == sp.size()
    assert ids[:6] == ["nodes=1,cap=default,comm_hook=none", "nodes=1,cap=default,comm_hook=bf16",
                       "nodes=1,cap=5,comm_hook=none", "nodes=1,cap=5,comm_hook=bf16",
                       "nodes=1,list=1+4,comm_hook=none", "nodes=1,list=1+4,comm_hook=bf16"]


def test_a_sample_is_seeded_a_subset_in_product_order(tmp_path):
    full = [p.point_id for p in ex.space_points(ex.load_space(space_file(tmp_path)))]
    a = [p.point_id for p in ex.space_points(ex.load_space(space_file(tmp_path, sample={"points": 3, "seed": 7})))]
    b = [p.point_id for p in ex.space_points(ex.load_space(space_file(tmp_path, sample={"points": 3, "seed": 7})))]
    assert a == b and len(set(a)) == 3 and set(a) <= set(full)
    assert a == [x for x in full if x in a]


@pytest.mark.parametrize("axes, extra, needle", [
    ({"frobnicate": [1]}, {}, "explore.axes: "),
    ({"comm_hook": ["nope"]}, {}, "explore.axes.comm_hook[0]: 'nope' is not accepted"),
    ({"nodes": [1, 0]}, {}, "explore.axes.nodes[1]: 0 is not accepted"),
    ({"batch_size": [8]}, {}, "explore.axes.batch_size: [8] is not accepted without explore.retime"),
    ({"nodes": [1]}, {"sample": {"points": 5}}, "explore.sample.points: 5 is not accepted; expected at most 1"),
])
def test_bad_design_spaces_give_one_line(tmp_path, axes, extra, needle):
    with pytest.raises(InputError) as err:
        ex.load_space(space_file(tmp_path, axes, **extra))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_scenario_without_explore_is_refused_by_the_cli_in_one_line(tmp_path, capsys):
    p = tmp_path / "plain.yaml"
    p.write_text(yaml.safe_dump({"trace": str(TRACE), "cluster": "dgx-h100"}))
    assert main(["explore", str(p), "--out-dir", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "explore: no design space given" in err[0]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("space")
    sp = ex.load_space(space_file(tmp))
    recs, info, job = ex.run_explore(sp, out_dir=tmp / "out", jobs=1, progress=False)
    return tmp, sp, recs, info, job


def test_each_point_is_what_a_sweep_of_its_scenario_predicts(small):
    """Oracle: the sweep path (run_sweep on the point's system and nodes, spans on) gives the same
    p50 step and exposed communication, to the last bit."""
    tmp, sp, recs, info, job = small
    table = explore_table(sp, recs, job, info)
    for system in ("dgx-a100", "dgx-h100"):
        sc = scenario_from_dict({"trace": str(TRACE), "cluster": {"topology": system, "nodes": 2}, "world_size": None,
                                 "simulation": {"iterations": 3, "seed": 0}, "sweep": {"bucket_cap_mb": [None, 25]}})
        for r in run_sweep(sc, jobs=1, progress=False):
            row = table[table["point"] == f"system={system},nodes=2,{r.point_id}"].iloc[0]
            assert row["iteration_p50_s"] == r.metrics["iteration_p50_s"]
            assert row["exposed_comm_s"] == r.metrics["exposed_comm_s"]
            assert row["world_size"] == r.world_size == 16


def test_throughput_efficiency_and_cost_by_hand(small):
    tmp, sp, recs, info, job = small
    table = explore_table(sp, recs, job, info, prices={"dgx-h100": 3.0})
    trace = json.loads(TRACE.read_text())
    batch = trace["environment"]["batch_size"]
    # one GPU without DDP: the medians over the trace's iterations of forward + backward + optimizer + zero_grad
    one_step = sum(statistics.median(it[f"{k}_s"] for it in trace["iterations"])
                   for k in ("forward", "backward", "optimizer", "zero_grad"))
    for _, r in table.iterrows():
        thr = batch * r["world_size"] / r["iteration_p50_s"]
        assert r["throughput_samples_per_s"] == pytest.approx(thr, rel=1e-12)
        gpu_h = r["world_size"] * r["iteration_p50_s"] / 3600 / (batch * r["world_size"]) * 1000
        assert r["gpu_hours_per_1k_samples"] == pytest.approx(gpu_h, rel=1e-12)
        if r["system"] == "dgx-h100":
            assert r["cost_per_1k_samples"] == pytest.approx(3.0 * gpu_h, rel=1e-12)
        else:
            assert r["cost_per_1k_samples"] is None or math.isnan(r["cost_per_1k_samples"])
        assert r["scaling_efficiency"] == pytest.approx(thr / (r["world_size"] * batch / one_step), rel=1e-12)
        assert 0 < r["scaling_efficiency"] <= 1


def test_pareto_front_matches_brute_force():
    import random

    rng = random.Random(3)
    thr = [rng.choice([1.0, 2.0, 3.0, 4.0]) for _ in range(60)] + [None, 5.0]
    cost = [rng.choice([1.0, 2.0, 3.0]) for _ in range(60)] + [1.0, None]
    got = pareto_front(thr, cost)
    for i in range(len(thr)):
        if thr[i] is None or cost[i] is None:
            assert not got[i]
            continue
        beaten = any(thr[j] is not None and cost[j] is not None and thr[j] >= thr[i] and cost[j] <= cost[i]
                     and (thr[j] > thr[i] or cost[j] < cost[i]) for j in range(len(thr)))
        assert got[i] == (not beaten), i


def _report_bytes(tmp: Path, sp, recs, info, job, name: str) -> dict[str, bytes]:
    table = explore_table(sp, recs, job, info, prices={"dgx-a100": 2.0, "dgx-h100": 3.5})
    out = tmp / name
    write_explore_report(table, out, title=sp.name, cost_label="USD", plots=False)
    return {f: (out / f).read_bytes() for f in ("table.csv", "table.parquet", "front.csv", "report.md")}


def test_the_same_bytes_from_one_and_two_processes_and_a_rerun_resumes(small, monkeypatch):
    tmp, sp, recs, info, job = small
    one = _report_bytes(tmp, sp, recs, info, job, "r1")
    recs2, info2, job2 = ex.run_explore(sp, out_dir=tmp / "out2", jobs=2, progress=False)
    assert _report_bytes(tmp, sp, recs2, info2, job2, "r2") == one
    # a rerun simulates only the point whose file is gone
    victim = sorted((tmp / "out2" / "points").glob("*.json"))[3]
    victim.unlink()
    calls = []
    import ddpsim.engine.simulate as engine

    real = engine.simulate
    monkeypatch.setattr(engine, "simulate", lambda *a, **k: calls.append(a) or real(*a, **k))
    recs3, info3, job3 = ex.run_explore(sp, out_dir=tmp / "out2", jobs=1, progress=False)
    assert len(calls) == 1 and victim.is_file()
    assert _report_bytes(tmp, sp, recs3, info3, job3, "r3") == one


@pytest.mark.slow
def test_a_local_ray_gives_the_same_bytes(small):
    ray = pytest.importorskip("ray")
    from ddpsim.pipeline.sweep import run_on_ray

    tmp, sp, recs, info, job = small
    one = _report_bytes(tmp, sp, recs, info, job, "r1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        recs_r, info_r, job_r = ex.run_explore(sp, out_dir=tmp / "out-ray", ray=partial(run_on_ray, None), progress=False)
    finally:
        ray.shutdown()
    assert len(list((tmp / "out-ray" / "points").glob("*.json"))) == len(recs)
    assert _report_bytes(tmp, sp, recs_r, info_r, job_r, "r-ray") == one


def test_cli_writes_table_front_and_plots(tmp_path, capsys):
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"currency": "USD", "gpu_hour": {"dgx-a100": 2, "dgx-h100": 3.5}}))
    p = space_file(tmp_path, {"system": ["dgx-a100", "dgx-h100"], "nodes": [1]}, prices=str(prices))
    assert main(["explore", str(p), "--out-dir", str(tmp_path / "o"), "--jobs", "1", "--quiet"]) == 0
    out = tmp_path / "o" / "tiny-space"
    for f in ("table.csv", "table.parquet", "front.csv", "scaling.png", "front.png", "report.md"):
        assert (out / f).is_file(), f
    assert "2 points" in capsys.readouterr().out


def test_the_progress_bar_shows_points_done_rate_and_time_left(monkeypatch):
    import io
    import sys

    from ddpsim.pipeline.sweep import progress_bar

    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    with progress_bar(4, "space: exploring", True) as bar:
        bar.mininterval = 0
        for _ in range(2):
            bar.update(1)
    text = err.getvalue()
    assert "2/4" in text and "point/s" in text and "<" in text  # done/total [elapsed<left, rate]


@pytest.mark.slow
def test_batch_size_retimes_the_trace_per_system_and_keeps_it(tmp_path, monkeypatch):
    """explore.retime: each (GPU, batch) trace is the roofline re-timing of 'ddpsim retime' (the
    oracle: retime_trace_file called directly), written once under <out>/traces/ and read back."""
    pytest.importorskip("torch")
    from ddpsim.trace.retime import retime_trace_file

    sp = ex.load_space(space_file(tmp_path, {"system": ["dgx-a100"], "nodes": [1], "batch_size": [4, 8]}, retime=True))
    recs, info, job = ex.run_explore(sp, out_dir=tmp_path / "out", jobs=1, progress=False)
    table = explore_table(sp, recs, job, info)
    assert list(table["batch_size_per_rank"]) == [4, 8]
    direct = retime_trace_file(TRACE, gpu="a100", batch_size=8)
    assert job.traces[job.points[1].trace].to_dict()["iterations"] == direct.to_dict()["iterations"]
    kept = sorted((tmp_path / "out" / "traces").glob("*.json"))
    assert len(kept) == 2
    import ddpsim.trace.retime as retime

    monkeypatch.setattr(retime, "retime_trace_file", lambda *a, **k: pytest.fail("re-timed again"))
    again = ex.prepare(sp, ex.space_points(sp), out_dir=tmp_path / "out")[0]
    assert again.traces[again.points[0].trace].to_dict() == job.traces[job.points[0].trace].to_dict()


def test_an_engine_setting_axis_reaches_each_points_engine_config(tmp_path):
    # ddp.process_groups is a generic axis: each point's engine Point carries it, and its inputs
    # give the engine that many round-robin communicators (the point named 1 keeps the default)
    sp = ex.load_space(space_file(tmp_path, {"ddp.process_groups": [1, 3], "bucket_cap_mb": [None, 25]}))
    job, _ = ex.prepare(sp, ex.space_points(sp))
    got = {jp.point_id: job.scenarios[jp.group].build_point(jp.point, trace=job.traces[jp.trace]).config.process_groups
           for jp in job.points}
    assert got == {"process_groups=1,cap=default": 1, "process_groups=1,cap=25": 1,
                   "process_groups=3,cap=default": 3, "process_groups=3,cap=25": 3}


def test_report_tables_best_per_system_and_a_front_cut_at_its_rows(monkeypatch):
    """report.md's tables from a hand-made table: each system's highest throughput, the front
    cheapest first, cut after FRONT_ROWS with a row naming how many more front.csv holds."""
    import pandas as pd

    from ddpsim.report import explore_report

    t = pd.DataFrame({"system": ["a", "a", "b"], "point": ["a1", "a2", "b1"], "world_size": [8, 16, 8],
                      "iteration_p50_s": [0.1, 0.2, 0.3], "exposed_comm_s": [0.001, 0.002, 0.003],
                      "throughput_samples_per_s": [80.0, 81.0, 20.0], "scaling_efficiency": [1.0, 0.5, 0.9],
                      "gpu_hours_per_1k_samples": [0.003, 0.006, 0.01], "on_front": [True, True, False]})
    monkeypatch.setattr(explore_report, "FRONT_ROWS", 1)
    md = explore_report.render_report(t, t[t["on_front"]], "s", "gpu_hours_per_1k_samples", "GPU-hours", [], plots=False)
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in md.splitlines() if ln.startswith("| ")]
    # best per system: a2 (81 samples/s, 16 GPUs, 200 ms), b1; then the front's a1 and the cut
    assert rows[1] == ["a", "a2", "16", "200.0 ms", "81", "0.5", "0.006"]
    assert rows[2][:2] == ["b", "b1"]
    assert rows[4] == ["a1", "8", "100.0 ms", "1.00 ms", "80", "1", "0.003"]
    assert rows[5] == ["... 1 more in front.csv"] + [""] * 6


def test_sweeps_and_design_spaces_cross_their_axes_alike():
    """specs.crossed: the first axis outermost (itertools.product's order); indices pick flat positions."""
    import itertools

    from ddpsim.pipeline.specs import crossed

    dims = [("a", [1, 2]), ("b", ["x", "y", "z"])]
    assert [tuple(v for _, v in p) for p in crossed(dims)] == list(itertools.product([1, 2], ["x", "y", "z"]))
    assert crossed(dims, [1, 4]) == [(("a", 1), ("b", "y")), (("a", 2), ("b", "y"))]   # 4 = 1 * 3 + 1
    assert crossed([("a", [1]), ("b", [])]) == []


@pytest.mark.parametrize("override,key", [("explore.prices=nope.yaml", "explore.prices"),
                                          ("explore.traces={dgx-h100: nope.json}", "explore.traces.dgx-h100")])
def test_missing_explore_file_names_its_key(override, key):
    from ddpsim.pipeline.explore import load_prices

    space = ex.load_space("gpt2-1.5b-design-space", [override])
    with pytest.raises(InputError, match=rf"{key}: 'nope\.\w+' does not exist or is not a file; expected a"):
        load_prices(space)
        ex.prepare(space, [p for p in ex.space_points(space) if p.value("system") == "dgx-h100"][:1])
