"""Sweeps: per-point files, resume, determinism across job counts, hand-worked figures.

The engine is replaced by analytic_model.analytic_simulate (a closed-form model) and the
comm model by an AlphaBetaModel, so every number below is worked out by hand.

Tiny trace (conftest): params 0..3 of 8192, 256, 4096, 64 B, gradients ready at 4, 3, 2, 1 ms
after backward start; forward 10 ms, backward 20 ms, optimizer 5 ms.
Comm: 0.1 ms + bytes / 1e5 B/s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.errors import InputError
from ddpsim.plan.planner import plan_ddp
from analytic_model import analytic_simulate
from ddpsim.pipeline.inputs import PointInputs, sim_config
from ddpsim.pipeline.scenario import load_scenario
from ddpsim.pipeline.sweep import best_record, default_record, run_sweep, sweep_table

COMM = AlphaBetaModel(latency_s=1e-4, bandwidth_bytes_per_s=1e5, num_ranks=2, backend="gloo")
CALLS: list[str] = []


def fake_build(sc, point, trace):
    """Plan for real, comm from COMM, config from the scenario (no topology needed)."""
    return PointInputs(point=point, trace=trace, plan=plan_ddp(trace, sc.ddp_options(point)), comm=COMM,
                       config=sim_config(sc, point, world_size=2), backend="gloo")


def counting_simulate(trace, plan, comm, config):
    CALLS.append(plan.options.label())
    return analytic_simulate(trace, plan, comm, config)


def failing_simulate(trace, plan, comm, config):
    if plan.options.bucket_cap_mb == 25:
        raise KeyboardInterrupt  # as if the user pressed Ctrl-C during this point
    return analytic_simulate(trace, plan, comm, config)


def make_scenario(tmp_path, tiny_trace_file, caps=(0.004, 25), **over):
    data = {"name": "tiny", "trace": str(tiny_trace_file), "cluster": {"topology": "cpu-gloo"}, "world_size": 2,
            "simulation": {"iterations": 4, "jitter": "none"}, "sweep": {"bucket_cap_mb": list(caps)},
            "timelines": [None, "best"]}
    data.update(over)
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump(data))
    return load_scenario(p)


def test_hand_worked_points(tmp_path, tiny_trace_file):
    sc = make_scenario(tmp_path, tiny_trace_file)
    recs = run_sweep(sc, jobs=1, progress=False, simulate=analytic_simulate, build=fake_build)
    assert [r.point_id for r in recs] == ["cap=default", "cap=0.004", "cap=25"]
    d, small = recs[0].metrics, recs[1].metrics
    # default: one 12608 B bucket ready at 4 ms: ends 4 + 0.1 + 126.08 ms; exposed 130.18 - 20 ms
    assert d["num_buckets"] == 1
    assert d["exposed_comm_s"] == pytest.approx(0.11018)
    assert d["iteration_p50_s"] == pytest.approx(0.010 + 0.020 + 0.11018 + 0.005)
    # cap 0.004 MiB = 4194 B: rebuilt buckets [3, 2, 1] (4416 B, ready 3 ms) and [0] (8192 B):
    # ends 3 + 0.1 + 44.16 = 47.26 ms, then 47.26 + 0.1 + 81.92 = 129.28 ms
    assert small["bucket_sizes_bytes"] == [4416, 8192]
    assert small["exposed_comm_s"] == pytest.approx(0.10928)
    assert small["first_iteration_s"] == pytest.approx(0.14518)  # iteration 1: one bucket of everything
    best = best_record(recs)
    assert best.point_id == "cap=0.004"
    assert default_record(recs, best.point).point_id == "cap=default"
    t = sweep_table(recs)
    assert list(t["point"]) == ["cap=default", "cap=0.004", "cap=25"]


def test_point_files_and_resume(tmp_path, tiny_trace_file):
    sc = make_scenario(tmp_path, tiny_trace_file)
    out = tmp_path / "rep"
    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sc, out_dir=out, jobs=1, progress=False, simulate=failing_simulate, build=fake_build)
    kept = sorted(p.name for p in (out / "points").glob("*.json"))
    assert kept == ["cap-0.004.json", "cap-default.json"]  # finished points survive the interruption
    run_sweep(sc, out_dir=out, jobs=1, progress=False, simulate=counting_simulate, build=fake_build)
    assert CALLS == ["cap=25"]  # only the missing point was simulated again
    CALLS.clear()
    run_sweep(sc, out_dir=out, jobs=1, progress=False, simulate=counting_simulate, build=fake_build)
    assert CALLS == []
    # a changed scenario (another seed) invalidates the stored points
    sc2 = make_scenario(tmp_path, tiny_trace_file, simulation={"iterations": 4, "jitter": "none", "seed": 1})
    run_sweep(sc2, out_dir=out, jobs=1, progress=False, simulate=counting_simulate, build=fake_build)
    assert len(CALLS) == 3


def test_a_file_of_another_version_or_of_figures_only_is_simulated_again(tmp_path, tiny_trace_file):
    """A point file is reused only when it is of this format version and of a job of the same
    kind: an older version's, or a design space's figures-only record of the same point id in
    the same folder, is simulated again and replaced, never misread."""
    from ddpsim.pipeline.sweep import POINT_VERSION, Job, PointTask, run_points

    sc = make_scenario(tmp_path, tiny_trace_file)
    out = tmp_path / "rep"
    run_sweep(sc, out_dir=out, jobs=1, progress=False, simulate=counting_simulate, build=fake_build)
    old = out / "points" / "cap-25.json"
    doc = json.loads(old.read_text())
    old.write_text(json.dumps({**doc, "version": POINT_VERSION - 1}))
    CALLS.clear()
    run_sweep(sc, out_dir=out, jobs=1, progress=False, simulate=counting_simulate, build=fake_build)
    assert CALLS == ["cap=25"] and json.loads(old.read_text())["version"] == POINT_VERSION
    # figures only (an explore job's kind) into the same folder: same ids, other keys
    job = Job(scenarios=(sc,), traces={"": sc.load_trace()}, trace_hashes={},
              points=tuple(PointTask(point_id=p.point_id, point=p) for p in sc.points()), detail=False,
              simulate=counting_simulate, build=fake_build)
    lean = run_points(job, out_dir=out, progress=False)
    assert len(CALLS) == 4 and all(r.result is None for r in lean)
    CALLS.clear()
    full = run_sweep(sc, out_dir=out, jobs=1, progress=False, simulate=counting_simulate, build=fake_build)
    assert len(CALLS) == 3 and all(r.result is not None for r in full)
    assert [r.metrics["iteration_p50_s"] for r in full] == [r.metrics["iteration_p50_s"] for r in lean]
    assert {r.key for r in full}.isdisjoint(r.key for r in lean)
    assert [r.point for r in full] == [r.point for r in lean]


def test_same_bytes_whatever_the_jobs(tmp_path, tiny_trace_file):
    sc = make_scenario(tmp_path, tiny_trace_file, caps=(0.004, 0.01, 1, 25))
    a, b = tmp_path / "a", tmp_path / "b"
    run_sweep(sc, out_dir=a, jobs=1, progress=False, simulate=analytic_simulate, build=fake_build)
    run_sweep(sc, out_dir=b, jobs=2, progress=False, simulate=analytic_simulate, build=fake_build)
    names = sorted(p.name for p in (a / "points").glob("*.json"))
    assert len(names) == 5
    for n in names:
        assert (a / "points" / n).read_bytes() == (b / "points" / n).read_bytes()
    assert json.loads((a / "points" / names[0]).read_text())["format"] == "ddpsim-point"


def test_bad_jobs(tmp_path, tiny_trace_file):
    sc = make_scenario(tmp_path, tiny_trace_file)
    with pytest.raises(InputError, match=r"--jobs: 0 is not accepted; expected an integer >= 1"):
        run_sweep(sc, jobs=0, progress=False, simulate=analytic_simulate, build=fake_build)


def test_no_points(tmp_path, tiny_trace_file):
    sc = make_scenario(tmp_path, tiny_trace_file)
    with pytest.raises(InputError, match=r"sweep: 'tiny' has no points"):
        run_sweep(sc, points=[], progress=False, simulate=analytic_simulate, build=fake_build)


def test_progress_bar_on_a_terminal_only(tmp_path, tiny_trace_file, capsys, monkeypatch):
    sc = make_scenario(tmp_path, tiny_trace_file)
    run_sweep(sc, jobs=1, progress=True, simulate=analytic_simulate, build=fake_build)
    assert capsys.readouterr().err == ""  # not a terminal: no bar, no carriage returns
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    run_sweep(sc, jobs=1, progress=True, simulate=analytic_simulate, build=fake_build)
    err = capsys.readouterr().err
    assert "tiny: simulating" in err and "/3" in err


def test_sweep_over_nodes_and_comm_hook(tmp_path):
    """A scenario sweeping nodes x comm_hook: world size follows the cluster (8 GPUs per
    DGX H100 node), and fp16 compression moves less data than no hook at every node count."""
    import pandas as pd

    from ddpsim.cli.main import main

    repo = Path(__file__).resolve().parents[1]
    scenario = tmp_path / "nodes.yaml"
    scenario.write_text(
        f"name: nodes-check\ntrace: {repo / 'traces' / 'gpt2-124m.h100.json'}\n"
        "cluster: {topology: dgx-h100, nodes: 1}\nworld_size: null\n"
        "simulation: {iterations: 4, jitter: none}\n"
        "sweep: {bucket_cap_mb: [null], nodes: [1, 2], comm_hook: [none, fp16]}\ntimelines: []\n")
    assert main(["run", str(scenario), "--out-dir", str(tmp_path / "out"), "--quiet", "--no-plots", "--jobs", "1"]) == 0
    df = pd.read_csv(tmp_path / "out" / "nodes-check" / "sweep.csv")
    assert sorted(zip(df.nodes, df.world_size, df.comm_hook)) == [
        (1, 8, "fp16"), (1, 8, "none"), (2, 16, "fp16"), (2, 16, "none")]
    for nodes in (1, 2):
        rows = df[df.nodes == nodes].set_index("comm_hook")
        assert rows.loc["fp16", "comm_s"] < rows.loc["none", "comm_s"]


def test_default_jobs_are_the_usable_cpus(monkeypatch):
    """The default job count is the CPUs this process may use (its affinity), else every CPU."""
    import os

    from ddpsim.pipeline import sweep

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert sweep.default_jobs() == 3
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert sweep.default_jobs() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert sweep.default_jobs() == 1
