"""The resume key: a stored point is reused only when the engine would receive the same inputs.

Every key of the scenario file is either changed here, one at a time, with the key asserted to
change (it reaches the engine), or named in NOT_ENGINE with the reason it does not reach the
engine (and the key is asserted to stay). A field added to the schema and in neither list fails
``test_every_scenario_key_is_covered``.
"""

from __future__ import annotations

import copy
import json
import shutil
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.pipeline.scenario_schema import ScenarioFile
from ddpsim.pipeline.sweep import point_key, run_sweep

ROOT = Path(__file__).resolve().parents[1]
GPU_TRACE = str(ROOT / "traces/mlp.measured.h100.json")
CPU_TRACE = str(ROOT / "traces/mlp.cpu.json")
CALIBRATION = ROOT / "reports/cpu-gloo-calibration.json"
COMPILED_TRACE = str(ROOT / "traces/bert-base.compiled.a100.json")

GPU_BASE = {"name": "k", "trace": GPU_TRACE, "cluster": {"topology": "dgx-h100", "nodes": 1}, "world_size": 4,
            "simulation": {"iterations": 4, "seed": 0, "jitter": "trace"}}
CPU_BASE = {"name": "k", "trace": CPU_TRACE, "cluster": {"topology": "cpu-gloo", "nodes": 1}, "world_size": 2,
            "simulation": {"iterations": 4, "seed": 0, "jitter": "trace"}}
PLAIN_BASE = {"name": "k", "trace": CPU_TRACE, "cluster": {"topology": None, "latency_us": 20.0, "bandwidth_gbps": 10.0},
              "world_size": 2, "simulation": {"iterations": 4, "seed": 0}}


def _set(doc: dict, dotted: str, value: typing.Any) -> dict:
    out = copy.deepcopy(doc)
    holder = out
    *parts, last = dotted.split(".")
    for part in parts:
        holder = holder.setdefault(part, {})
    holder[last] = value
    return out


def _key(doc: dict, base_point: bool = False) -> str:
    sc = scenario_from_dict(doc, source="test")
    # the scenario's own cap where it gives one (the sweep adds the default point first)
    point = sc.base_point() if base_point else sc.points()[-1]
    return point_key(sc, point, sc.build_point(point))


def _param(trace: str, i: int) -> str:
    return json.loads(Path(trace).read_text())["params"][i]["name"]


def _mutations(tmp: Path) -> list[tuple[str, dict, dict[str, typing.Any]]]:
    """(scenario key, a base that puts the key in force, the changes: the key's new value and
    any key that must change with it)."""
    return [(k, base, change if isinstance(change, dict) and k in change else {k: change})
            for k, base, change in _table(tmp)]


def _table(tmp: Path) -> list[tuple[str, dict, typing.Any]]:
    powersgd = _set(GPU_BASE, "ddp.comm_hook", "powersgd")
    catalogue = _set(_set(GPU_BASE, "cluster.catalogue", str(ROOT / "tests/data/my-catalogue.yaml")),
                     "cluster.topology", "my-box")
    faster = tmp / "faster-catalogue.yaml"
    faster.write_text((ROOT / "tests/data/my-catalogue.yaml").read_text().replace("memory_gbps: 4000", "memory_gbps: 2000"))
    compiled = _set(_set(GPU_BASE, "trace", COMPILED_TRACE), "compile", {"ddp_optimizer": True})
    p0, p1 = _param(GPU_TRACE, 0), _param(GPU_TRACE, 1)
    swept = _set(GPU_BASE, "sweep", {"comm_hook": ["none"]})
    delayed = _set(_set(GPU_BASE, "ddp.delay_all_reduce_named_params", [p0, p1]), "ddp.param_to_hook_all_reduce", p0)
    plan = tmp / "plan.json"
    _write_plan(plan)
    return [
        ("trace", GPU_BASE, CPU_TRACE),
        ("cluster.topology", GPU_BASE, "dgx-a100"),
        ("cluster.nodes", GPU_BASE, 2),
        ("cluster.options", GPU_BASE, {"nvlinks_per_gpu": 9}),
        ("cluster.catalogue", catalogue, str(faster)),
        ("cluster.latency_us", PLAIN_BASE, 40.0),
        ("cluster.bandwidth_gbps", PLAIN_BASE, 20.0),
        ("world_size", GPU_BASE, 8),
        ("ddp.bucket_cap_mb", swept, 0.001),  # a sweep not given its caps takes ddp's
        ("ddp.bucket_cap_mb_list", swept, [0.001, 0.002]),
        ("ddp.find_unused_parameters", GPU_BASE, True),
        ("ddp.static_graph", GPU_BASE, True),
        ("ddp.gradient_as_bucket_view", GPU_BASE, True),
        ("ddp.broadcast_buffers", GPU_BASE, False),
        ("ddp.sync_batchnorm", GPU_BASE, True),
        ("ddp.batched_grad_copy", GPU_BASE, True),
        ("ddp.skip_all_reduce_unused_params", _set(GPU_BASE, "ddp.find_unused_parameters", True), True),
        ("ddp.forward_sync_buffers", GPU_BASE, False),
        ("ddp.mixed_precision.param_dtype", GPU_BASE, "bfloat16"),
        ("ddp.mixed_precision.reduce_dtype", GPU_BASE, "bfloat16"),
        ("ddp.mixed_precision.buffer_dtype", GPU_BASE, "bfloat16"),
        ("ddp.delay_all_reduce_named_params", GPU_BASE,
         {"ddp.delay_all_reduce_named_params": [p0], "ddp.param_to_hook_all_reduce": p0}),
        ("ddp.param_to_hook_all_reduce", delayed, p1),
        ("ddp.comm_hook", GPU_BASE, "fp16"),
        ("ddp.powersgd.matrix_approximation_rank", powersgd, 4),
        ("ddp.powersgd.start_powerSGD_iter", powersgd, 2),
        ("ddp.process_groups", GPU_BASE, 2),
        ("ddp.join", GPU_BASE, {"batches_per_rank": [4, 3, 4, 4]}),
        ("simulation.iterations", GPU_BASE, 6),
        ("simulation.warmup", GPU_BASE, 3),
        ("simulation.seed", GPU_BASE, 1),
        ("simulation.jitter", GPU_BASE, 0.1),
        ("simulation.stragglers", GPU_BASE, {1: 1.5}),
        ("simulation.no_sync_steps", GPU_BASE, 1),
        ("simulation.interference", CPU_BASE, {"compute_slowdown": 3.0, "comm_slowdown": 3.0}),
        ("simulation.compute_statistic", GPU_BASE, "mean"),
        ("simulation.copy_bandwidth_gbps", GPU_BASE, 100.0),
        ("calibration", CPU_BASE, str(CALIBRATION)),
        ("cost_model.contention", GPU_BASE, False),
        ("cost_model.memory_bound_fraction", GPU_BASE, 0.3),
        ("cost_model.memory_efficiency", GPU_BASE, 0.5),
        ("cost_model.copy_kernels", GPU_BASE, False),
        ("cost_model.min_kernel_s", GPU_BASE, 1e-5),
        ("cost_model.host", GPU_BASE, False),
        ("cost_model.pre_forward_s", GPU_BASE, 1e-3),
        ("cost_model.hook_s_per_param", GPU_BASE, 1e-5),
        ("cost_model.bucket_launch_s", GPU_BASE, 1e-4),
        ("cost_model.enqueue_s", GPU_BASE, 1e-4),
        ("cost_model.copy_back_s_per_param", GPU_BASE, 1e-4),
        ("cost_model.uncertainty", GPU_BASE, False),
        ("plan", GPU_BASE, str(plan)),
        ("compile.ddp_optimizer", compiled, False),
        ("compile.compiled_autograd", _set(compiled, "compile.ddp_optimizer", False), True),
    ]


#: scenario keys that never reach the engine, and why
NOT_ENGINE = {
    "name": "names the report folder",
    "description": "prose in the report",
    "sweep": "chooses which points exist; each point's own values are in its key",
    "timelines": "chooses which points get timeline plots",
    "validation": "read by 'ddpsim validate' only, which launches real runs",
    "explore": "chooses a design space's points; each point's own values are in its key",
    "model": "reaches the engine as the captured trace's content (test_trace_content_changes_the_key)",
}


def _leaf_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        subs = [a for a in _flat_args(field.annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        if subs and prefix + name not in ("ddp.join", "simulation.interference"):
            for sub in subs:
                out |= _leaf_keys(sub, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def _flat_args(ann: typing.Any) -> list[typing.Any]:
    args = typing.get_args(ann)
    if not args:
        return [ann]
    return [x for a in args for x in _flat_args(a)]


def _write_plan(path: Path) -> None:
    from ddpsim.plan.planner import DDPOptions, plan_ddp
    from ddpsim.trace.records import load_trace

    trace = load_trace(GPU_TRACE)
    path.write_text(json.dumps(plan_ddp(trace, DDPOptions(bucket_cap_mb=0.001)).to_dict(), indent=1))


def test_every_scenario_key_is_covered(tmp_path):
    covered = {k for k, _, _ in _mutations(tmp_path)}
    missing = {k for k in _leaf_keys(ScenarioFile) if k not in covered and k.split(".")[0] not in NOT_ENGINE}
    assert not missing, f"scenario keys neither changed in test_key_changes nor named in NOT_ENGINE: {sorted(missing)}"


def test_key_changes_with_every_engine_input(tmp_path):
    unchanged = []
    for dotted, base, changes in _mutations(tmp_path):
        changed = base
        for k, v in changes.items():
            changed = _set(changed, k, v)
        if _key(base) == _key(changed):
            unchanged.append(dotted)
    assert not unchanged, f"the resume key ignores: {unchanged}"


@pytest.mark.parametrize("dotted, value", [("name", "other"), ("description", "other words"),
                                           ("timelines", [None])])
def test_key_stays_when_nothing_the_engine_reads_changes(dotted, value):
    assert _key(GPU_BASE, base_point=True) == _key(_set(GPU_BASE, dotted, value), base_point=True)


def test_key_stays_across_sweeps_of_several_points():
    two = _set(GPU_BASE, "sweep", {"bucket_cap_mb": [None, 1]})
    assert _key(two, base_point=True) == _key(_set(GPU_BASE, "sweep", {"bucket_cap_mb": [None, 1, 25]}), base_point=True)
    # a point alone has no best cap for the cost terms to move: it has no runs with them off
    # (ddpsim.pipeline.term_effects), which a sweep of several points adds to each point
    assert _key(GPU_BASE, base_point=True) != _key(two, base_point=True)


def test_trace_content_changes_the_key(tmp_path):
    trace = tmp_path / "t.json"
    shutil.copy(CPU_TRACE, trace)
    before = _key(_set(CPU_BASE, "trace", str(trace)))
    doc = json.loads(trace.read_text())
    for it in doc["iterations"]:
        it["backward_s"] *= 2
    trace.write_text(json.dumps(doc))
    assert _key(_set(CPU_BASE, "trace", str(trace))) != before


def test_calibration_content_changes_the_key(tmp_path):
    cal = tmp_path / "cal.json"
    shutil.copy(CALIBRATION, cal)
    doc = _set(CPU_BASE, "calibration", str(cal))
    before = _key(doc)
    data = json.loads(cal.read_text())
    data["comm_hook_call_s"] = (data.get("comm_hook_call_s") or 0.0) + 1e-4
    data["copy_bandwidth_bytes_per_s"] = data["copy_bandwidth_bytes_per_s"] * 2
    cal.write_text(json.dumps(data))
    assert _key(doc) != before


# ---- the stale results a rerun into the same folder used to report -----------------------------

def _p50(doc: dict, out: Path) -> float:
    sc = scenario_from_dict(doc, source="test")
    (rec,) = run_sweep(sc, out_dir=out, jobs=1, progress=False, points=[sc.base_point()])
    return rec.metrics["iteration_p50_s"]


@pytest.mark.parametrize("dotted, value", [
    ("simulation.interference", {"compute_slowdown": 3.0, "comm_slowdown": 3.0}),
    ("ddp.powersgd.matrix_approximation_rank", 4),
])
def test_rerun_into_the_same_folder_gives_the_new_figures(tmp_path, dotted, value):
    base = _set(CPU_BASE, "ddp.comm_hook", "powersgd") if "powersgd" in dotted else CPU_BASE
    changed = _set(base, dotted, value)
    _p50(base, tmp_path / "same")
    assert _p50(changed, tmp_path / "same") == _p50(changed, tmp_path / "fresh")
    assert _p50(changed, tmp_path / "same") != _p50(base, tmp_path / "base")


def test_rerun_after_the_calibration_file_changed_gives_the_new_figures(tmp_path):
    cal = tmp_path / "cal.json"
    shutil.copy(CALIBRATION, cal)
    doc = _set(CPU_BASE, "calibration", str(cal))
    old = _p50(doc, tmp_path / "same")
    data = json.loads(cal.read_text())
    for row in data["collectives"]["allreduce"]:
        for k in ("time_s", "median_s", "p10_s", "p90_s"):
            row[k] *= 3
    cal.write_text(json.dumps(data))
    new = _p50(doc, tmp_path / "same")
    assert new == _p50(doc, tmp_path / "fresh")
    assert new != old


def test_an_unchanged_rerun_reuses_the_stored_point(tmp_path):
    sc = scenario_from_dict(CPU_BASE, source="test")

    def refuse(*args, **kwargs):
        raise AssertionError("simulated again although nothing changed")

    run_sweep(sc, out_dir=tmp_path, jobs=1, progress=False, points=[sc.base_point()])
    run_sweep(sc, out_dir=tmp_path, jobs=1, progress=False, points=[sc.base_point()], simulate=refuse)


def test_explore_rerun_into_the_same_folder_gives_the_new_figures(tmp_path):
    from ddpsim.pipeline.explore import run_explore, space_from_dict

    def figures(doc: dict, out: Path) -> list:
        recs, _, _ = run_explore(space_from_dict(doc, source="test"), out_dir=out, jobs=1, progress=False)
        return [r.metrics["iteration_p50_s"] for r in recs]

    base = {**CPU_BASE, "explore": {"axes": {"bucket_cap_mb": [None, 0.01]}}}
    changed = _set(base, "simulation.interference", {"compute_slowdown": 3.0, "comm_slowdown": 3.0})
    old = figures(base, tmp_path / "same")
    new = figures(changed, tmp_path / "same")
    assert new == figures(changed, tmp_path / "fresh") and new != old
