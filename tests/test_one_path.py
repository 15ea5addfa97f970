"""One path from inputs to a simulation: ``ddpsim simulate``, ``ddpsim sweep``, ``ddpsim run`` and
:mod:`ddpsim.api` build a point's engine inputs with the same builder
(:func:`ddpsim.pipeline.inputs.build_point_inputs`), so at the same point of a bundled scenario
(same iterations, seed and jitter) they predict the same step time, to the bit.

GPU: resnet50-a100-2n (16 NCCL ranks on 2 DGX A100 nodes, where the contention prior, DDP's host
costs and the gradient copies as kernels apply). CPU: cpu-gloo-mlp (2 gloo ranks, none of them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpsim import api
from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.pipeline.sweep import POINT_FORMAT

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not (ROOT / "traces" / "resnet50.a100.json").is_file(), reason="bundled traces missing")


def _run_points(tmp_path: Path, name: str, capsys) -> dict[str, float]:
    """``ddpsim run NAME``'s p50 step per point id (its points/*.json)."""
    assert main(["run", name, "--out-dir", str(tmp_path), "--no-plots", "--quiet", "--jobs", "1"]) == 0
    capsys.readouterr()
    out = {}
    for f in sorted((tmp_path / name / "points").glob("*.json")):
        d = json.loads(f.read_text())
        if d["format"] != POINT_FORMAT:  # the run's kept answer and report files beside the points
            continue
        out[d["point"]["point"]] = d["metrics"]["iteration_p50_s"]
    return out


def _cli_json(capsys, *args: str) -> dict:
    assert main([*args, "--format", "json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name,trace,topology,nodes,world,iterations,caps", [
    ("resnet50-a100-2n", "traces/resnet50.a100.json", "dgx-a100", 2, 16, 6, [None, 25]),
    ("cpu-gloo-mlp", "traces/mlp.cpu.json", "cpu-gloo", 1, 2, 10, [None, 1]),
])
def test_simulate_sweep_api_and_run_agree(tmp_path, capsys, monkeypatch, name, trace, topology, nodes, world, iterations,
                                          caps):
    monkeypatch.chdir(ROOT)
    run = _run_points(tmp_path, name, capsys)
    net = ["--topology", topology, "--set", f"cluster.nodes={nodes}", "--set", f"world_size={world}"]
    sim_flags = ["--set", f"simulation.iterations={iterations}", "--set", "simulation.seed=0", "--set", "simulation.jitter=trace"]
    swept = _cli_json(capsys, "sweep", "--trace", trace, *net, *sim_flags[:4],
                      "--set", f"sweep.bucket_cap_mb={json.dumps(caps)}", "--jobs", "1")
    swept = {p["point"]: p["iteration_p50_s"] for p in swept["points"]}
    for cap in caps:
        pid = "cap=default" if cap is None else f"cap={cap}"
        cap_flag = [] if cap is None else ["--set", f"ddp.bucket_cap_mb={cap}"]
        doc = _cli_json(capsys, "simulate", "--trace", trace, *net, *cap_flag, *sim_flags)
        assert doc["summary"]["iteration_p50_s"] == run[pid], pid
        assert swept[pid] == run[pid], pid
        res = api.simulate(trace, topology=topology, nodes=nodes, world_size=world, bucket_cap_mb=cap,
                           iterations=iterations, seed=0)
        assert res.summary()["iteration_p50_s"] == run[pid], pid


@pytest.mark.parametrize("call,key", [
    (lambda: api.simulate("traces/mlp.cpu.json", comm_hook="bogus"), "ddp.comm_hook"),
    (lambda: api.simulate("traces/mlp.cpu.json", bucket_cap_mb=2e6), "sweep.bucket_cap_mb[0]"),   # over MAX_CAP_MB
    (lambda: api.sweep("traces/mlp.cpu.json", bucket_cap_mb=[None, 0]), "sweep.bucket_cap_mb[1]"),
    (lambda: api.simulate("traces/mlp.cpu.json", ddp={"bucket_cap_mb": -1}), "ddp.bucket_cap_mb"),
])
def test_api_checks_its_scenario_as_a_file(monkeypatch, call, key):
    """api.simulate / api.sweep build a scenario file: its checks and bounds apply, the error names the key."""
    monkeypatch.chdir(ROOT)
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value).startswith(f"api: {key}: ")


def test_api_simulate_and_sweep_take_the_scenarios_other_sections(monkeypatch):
    """Sections beyond the named keywords (here ``ddp``) reach the point, as a scenario file's do."""
    monkeypatch.chdir(ROOT)
    res = api.simulate("traces/mlp.cpu.json", ddp={"gradient_as_bucket_view": True})
    assert res.meta["plan"]["label"] == "cap=default,grad_as_bucket_view"
    table = api.sweep("traces/mlp.cpu.json", bucket_cap_mb=[None], ddp={"gradient_as_bucket_view": True})
    assert table["iteration_p50_s"].tolist() == [res.summary()["iteration_p50_s"]]


def test_a_section_keeps_the_keys_the_keywords_set():
    """``simulation={...}`` adds to the section ``iterations`` / ``seed`` make, ``cluster={...}`` to
    ``topology`` / ``nodes``'s, ``ddp={...}`` to ``comm_hook``'s: none is dropped."""
    sc = api.adhoc_scenario(trace=ROOT / "traces/mlp.cpu.json", iterations=9, seed=3, comm_hook="fp16",
                            simulation={"jitter": "none"}, cluster={"nodes": 2}, ddp={"bucket_cap_mb": 5})
    sim, cluster, ddp = sc.doc.simulation, sc.doc.cluster, sc.doc.ddp
    assert (sim.iterations, sim.seed, sim.jitter) == (9, 3, "none")
    assert (cluster.topology, cluster.nodes) == ("cpu-gloo", 2)
    assert (ddp.comm_hook, ddp.bucket_cap_mb) == ("fp16", 5)


def test_simulate_applies_the_gpu_cost_terms(capsys, monkeypatch):
    """The terms ``ddpsim run`` applies on an analytical NCCL model reach ``ddpsim simulate``'s config."""
    monkeypatch.chdir(ROOT)
    doc = _cli_json(capsys, "simulate", "--trace", "traces/resnet50.a100.json", "--topology", "dgx-a100", "--set",
                    "cluster.nodes=2", "--set", "ddp.bucket_cap_mb=25", "--set", "simulation.iterations=2")
    cfg = doc["meta"]["config"]
    assert cfg["world_size"] == 16                            # no world_size given: every device, 2 nodes x 8 GPUs
    assert cfg["interference"]["weighting"] == "table"        # the contention prior
    assert cfg["host_costs"] not in (None, {})                # DDP's host costs
    assert cfg["copy_kernel_floor_s"] > 0                     # gradient copies as kernels
    cpu = _cli_json(capsys, "simulate", "--trace", "traces/mlp.cpu.json", "--topology", "cpu-gloo", "--set", "world_size=2",
                    "--set", "simulation.iterations=2")["meta"]["config"]
    # gloo: none of them (the engine's meta leaves out the terms that are off)
    assert cpu["interference"]["weighting"] == "uniform" and not cpu.get("copy_kernel_floor_s") and not cpu.get("host_costs")
