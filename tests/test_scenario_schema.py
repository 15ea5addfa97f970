"""The scenario file's declared schema: scenarios/schema.json is current and accepts every
bundled scenario, unknown keys / out-of-bound counts / loose types are refused by both the
JSON Schema and the loader (one line each), old spellings among them."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
import yaml

from ddpsim.errors import InputError
from ddpsim.io import read_yaml
from ddpsim.pipeline import scenario_schema as ss
from ddpsim.pipeline.scenario import load_scenario, scenario_from_dict
from ddpsim.plan.planner import DDPOptions
from ddpsim.value_types import MAX_JITTER

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_FILE = ROOT / "scenarios" / "schema.json"
TRACE = str(ROOT / "traces" / "mlp.cpu.json")


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _base(**over) -> dict:
    data = {"name": "t", "trace": TRACE, "cluster": {"topology": "cpu-gloo"}, "world_size": 2}
    data.update(over)
    return data


def _write(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_schema_file_is_current():
    assert SCHEMA_FILE.read_text() == ss.json_schema(), \
        "regenerate: python -m ddpsim.pipeline.scenario_schema > scenarios/schema.json"


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_bundled_scenario_validates_against_the_schema(validator, path):
    data = read_yaml(path, "scenario", "a scenario YAML")
    assert [e.message for e in validator.iter_errors(data)] == []
    assert load_scenario(path).name == path.stem


def test_unknown_key_refused_by_both_with_the_one_line(validator, tmp_path):
    data = _base(ddp={"bucket_cap": 3})
    assert not validator.is_valid(data)
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as exc:
        load_scenario(path)
    assert str(exc.value) == (
        f"{path}: ddp.bucket_cap: unknown key; expected one of bucket_cap_mb, bucket_cap_mb_list, "
        "find_unused_parameters, static_graph, gradient_as_bucket_view, broadcast_buffers, batched_grad_copy, "
        "skip_all_reduce_unused_params, forward_sync_buffers, mixed_precision, delay_all_reduce_named_params, "
        "param_to_hook_all_reduce, sync_batchnorm, comm_hook, powersgd, process_groups, join")


@pytest.mark.parametrize("old, line", [
    ({"model": {"name": "mlp", "iters": 7}}, "old.yaml: model.iters: unknown key; expected one of name, batch_size, device, "
                                             "iterations, warmup, num_threads, options"),
    ({"model": "mlp", "comm_hook": "powersgd"}, "old.yaml: comm_hook: unknown key; expected one of name, description, "),
    ({"model": "mlp", "ddp": {"powersgd": {"rank": 2}}}, "old.yaml: ddp.powersgd.rank: unknown key; expected one of "
                                                         "matrix_approximation_rank, start_powerSGD_iter"),
])
def test_no_old_spelling_is_kept(old, line):
    # version 0.1 keeps no deprecated key: the old names are unknown keys, refused in one line
    with pytest.raises(InputError) as exc:
        scenario_from_dict({"name": "t", "cluster": "cpu-gloo", **old}, source="old.yaml")
    assert str(exc.value).startswith(line) and "\n" not in str(exc.value)


#: (key path, the largest value accepted); bound + 1 is refused with the bound in the line
BOUNDS = [
    ("world_size", ss.MAX_WORLD_SIZE),
    ("cluster.nodes", ss.MAX_NODES),
    ("simulation.iterations", ss.MAX_ITERATIONS),
    ("simulation.no_sync_steps", ss.MAX_ITERATIONS),
    ("simulation.jitter", MAX_JITTER),
    ("simulation.stragglers.1", ss.MAX_SLOWDOWN),
    ("simulation.copy_bandwidth_gbps", ss.MAX_GBPS),
    ("ddp.bucket_cap_mb", ss.MAX_CAP_MB),
    ("ddp.powersgd.matrix_approximation_rank", ss.MAX_POWERSGD_RANK),
    ("ddp.powersgd.start_powerSGD_iter", ss.MAX_ITERATIONS),
    ("sweep.bucket_cap_mb.points", ss.MAX_POINTS),
    ("validation.iterations", ss.MAX_ITERATIONS),
    ("validation.warmup", ss.MAX_ITERATIONS),
    ("validation.batch_size", ss.MAX_BATCH_SIZE),
]


def _set(data: dict, key: str, value) -> dict:
    *parents, last = key.split(".")
    d = data
    for k in parents:
        d = d.setdefault(k, {})
    d[int(last) if last.isdigit() else last] = value
    return data


def _with(key: str, value) -> dict:
    data = _base(world_size=None) if key in ("cluster.nodes", "world_size") else _base()
    if key == "world_size":
        data["cluster"] = {"latency_us": 1, "bandwidth_gbps": 1}
    if key == "sweep.bucket_cap_mb.points":
        data["sweep"] = {"bucket_cap_mb": {"min": 1, "max": 2}}
    if key == "simulation.copy_bandwidth_gbps":
        value = float(value)
    return _set(data, key, value)


@pytest.mark.parametrize("key, bound", BOUNDS, ids=[k for k, _ in BOUNDS])
def test_each_bound_refuses_bound_plus_one(validator, key, bound):
    assert validator.is_valid(_with(key, bound))
    assert not validator.is_valid(_with(key, bound + 1))
    if key != "sweep.bucket_cap_mb.points":  # 10,000 caps between 1 and 2 MiB: fine, but slow to build the points of
        scenario_from_dict(_with(key, bound), source="s")
    with pytest.raises(InputError) as exc:
        scenario_from_dict(_with(key, bound + 1), source="s")
    line = str(exc.value)
    where = key.replace(".1", "[1]")  # a straggler's rank is a mapping key: simulation.stragglers[1]
    assert line.startswith(f"s: {where}: {bound + 1!r} is not accepted; expected ") and f"{bound:g}" in line.replace(
        str(bound), f"{bound:g}"), line


@pytest.mark.parametrize("key", ["sweep.nodes", "sweep.comm_hook", "sweep.bucket_cap_mb", "ddp.bucket_cap_mb_list",
                                 "timelines"])
def test_lists_are_bounded(validator, key):
    item = {"sweep.comm_hook": "none", "timelines": "best"}.get(key, 1)
    data = _set(_base(world_size=None), key, [item] * (ss.MAX_LIST + 1))
    assert not validator.is_valid(data)
    with pytest.raises(InputError, match=rf"^s: {re.escape(key)}: .* is not accepted; expected .*{ss.MAX_LIST}"):
        scenario_from_dict(data, source="s")


@pytest.mark.parametrize("key, value, expected", [
    ("ddp.static_graph", "false", "true or false"),
    ("cost_model.contention", "false", "true or false"),
    ("simulation.iterations", 1.0, "an integer >= 1"),
    ("cluster.nodes", True, "an integer >= 1"),
    ("simulation.seed", "0", "an integer >= 0"),
    ("ddp.bucket_cap_mb", True, "a number > 0 or null"),
    ("cluster.latency_us", float("nan"), "a number of microseconds >= 0"),
    ("simulation.stragglers.1", float("inf"), "a number >= 1"),
    ("simulation.jitter", float("inf"), "'trace', 'none' or a coefficient of variation"),
])
def test_loose_types_and_non_finite_numbers_refused(validator, key, value, expected):
    data = _set(_base(), key, value)
    if key == "cluster.latency_us":
        data["cluster"] = {"latency_us": value, "bandwidth_gbps": 1}
    if not isinstance(value, float):  # JSON Schema reads 1.0 as an integer and cannot say nan / inf
        assert not validator.is_valid(data)
    with pytest.raises(InputError, match=rf"^s: {re.escape(key.replace('.1', '[1]'))}: .* is not accepted; expected {expected}"):
        scenario_from_dict(data, source="s")


@pytest.mark.parametrize("text, why", [
    ("name: a\nname: b\n", "duplicate key"),
    ("a: &x {topology: cpu-gloo}\ncluster: *x\n", "anchors and aliases"),
])
def test_yaml_duplicates_and_aliases_refused(tmp_path, text, why):
    p = tmp_path / "s.yaml"
    p.write_text(f"trace: {TRACE}\n" + text)
    with pytest.raises(InputError, match=why):
        load_scenario(p)


def test_defaults_are_the_runtime_classes_defaults():
    s = scenario_from_dict(_base(), source="s")
    assert s.ddp == DDPOptions() and s.cost_model == ss.CostModelSection().spec()
    assert s.simulation == ss.SimulationSpec() and s.timelines == (None,)
    assert replace(s, path=None) == scenario_from_dict(_base(), source="other")


def test_strings_for_model_and_cluster_and_a_cap_range():
    s = scenario_from_dict({"model": "mlp", "cluster": "cpu-gloo", "sweep": {"bucket_cap_mb": {"min": 1, "max": 100,
                                                                                               "points": 3}}})
    assert s.model.name == "mlp" and s.cluster.topology == "cpu-gloo" and s.doc.sweep.caps(s.doc.ddp) == (None, 1, 10, 100)
    with pytest.raises(InputError, match=r"^s: sweep\.bucket_cap_mb\.max: 1 is not accepted; expected a number >= min \(5\)$"):
        scenario_from_dict(_base(sweep={"bucket_cap_mb": {"min": 5, "max": 1, "points": 2}}), source="s")


def test_every_generic_sweep_axis_is_a_ddp_key_and_an_engine_setting():
    # a sweep axis that no engine input reads by name is carried generically (Point.settings) from
    # the ddp section to the SimConfig field of its name: both must exist
    from ddpsim.engine.config import SimConfig
    from ddpsim.pipeline.specs import is_setting

    generic = [k for k in ss.SweepSection.model_fields if is_setting(k)]
    assert generic == ["process_groups"]
    assert all(k in ss.DdpSection.model_fields and k in SimConfig.__dataclass_fields__ for k in generic)
