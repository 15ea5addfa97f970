"""Scenario YAML loading: every key validated, errors name the file and the key path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ddpsim.errors import InputError
from ddpsim.pipeline.scenario import load_scenario, scenario_from_dict


def _write(tmp_path: Path, tiny_trace_file, **over) -> Path:
    data = {"name": "t", "trace": str(tiny_trace_file), "cluster": {"topology": "cpu-gloo"}, "world_size": 2,
            "sweep": {"bucket_cap_mb": [1, 25]}}
    data.update(over)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_minimal_scenario_adds_default_point(tmp_path, tiny_trace_file):
    s = load_scenario(_write(tmp_path, tiny_trace_file))
    assert s.name == "t" and s.world_size == 2
    assert [p.point_id for p in s.points()] == ["cap=default", "cap=1", "cap=25"]
    assert s.base_point().bucket_cap_mb is None
    assert s.ddp_options(s.points()[2]).bucket_cap_mb == 25


@pytest.mark.parametrize("ddp, ids", [({}, ["cap=default"]), ({"bucket_cap_mb": 50}, ["cap=default", "cap=50"]),
                                      ({"bucket_cap_mb_list": [1, 4]}, ["cap=default", "list=1+4"])])
def test_without_a_sweep_the_scenario_s_own_cap_is_simulated(tmp_path, tiny_trace_file, ddp, ids):
    s = load_scenario(_write(tmp_path, tiny_trace_file, sweep=None, ddp=ddp))
    assert [p.point_id for p in s.points()] == ids


def test_cap_range_log(tmp_path, tiny_trace_file):
    s = load_scenario(_write(tmp_path, tiny_trace_file, sweep={"bucket_cap_mb": {"min": 1, "max": 100, "points": 3}}))
    # log spacing 1, 10, 100, plus the default point first
    assert [p.bucket_cap_mb for p in s.points()] == [None, 1, 10, 100]


def test_product_and_point_ids(tmp_path, tiny_trace_file):
    s = load_scenario(_write(tmp_path, tiny_trace_file, sweep={"bucket_cap_mb": [5], "comm_hook": ["none", "fp16"]}))
    assert [p.point_id for p in s.points()] == ["cap=default,hook=none", "cap=default,hook=fp16",
                                                 "cap=5,hook=none", "cap=5,hook=fp16"]
    # every axis's name in the id, in the sweep's order (caps, find_unused, gabv, hook, nodes, pg)
    s = load_scenario(_write(tmp_path, tiny_trace_file, world_size=None, sweep={
        "process_groups": [2, 1], "nodes": [1, 2], "gradient_as_bucket_view": [True, False],
        "find_unused_parameters": [False, True]}))
    assert s.points()[1].point_id == "cap=default,find_unused=false,gabv=true,nodes=1,pg=1"
    assert len({p.point_id for p in s.points()}) == len(s.points()) == 16


def test_timelines_by_cap_and_best(tmp_path, tiny_trace_file):
    s = load_scenario(_write(tmp_path, tiny_trace_file, timelines=[None, 25, "best"]))
    best = s.points()[1]
    assert [p.point_id for p in s.timeline_points(best)] == ["cap=default", "cap=25", "cap=1"]


@pytest.mark.parametrize("over, match", [
    ({"ddp": {"bucket_cap_mb": "abc"}}, r"^\S*s\.yaml: ddp\.bucket_cap_mb: 'abc' is not accepted; expected a number > 0 or null \(MiB, at most 1000000; null: DDP's default\)$"),
    ({"ddp": {"bucket_cap": 5}}, r"ddp\.bucket_cap: unknown key; expected one of bucket_cap_mb"),
    ({"bogus": 1}, r"bogus: unknown key"),
    ({"world_size": "two"}, r"world_size: 'two' is not accepted; expected an integer >= 1"),
    ({"sweep": {"bucket_cap_mb": []}}, r"sweep\.bucket_cap_mb: \[\] is not accepted; expected at least one point"),
    ({"sweep": {"bucket_cap_mb": [1, -2]}}, r"sweep\.bucket_cap_mb\[1\]: -2 is not accepted"),
    ({"simulation": {"iterations": 3, "warmup": 3}}, r"simulation\.warmup: 3 is not accepted; expected fewer than"),
    ({"simulation": {"jitter": "lots"}}, r"simulation\.jitter: 'lots'"),
    ({"ddp": {"comm_hook": "zip"}}, r"ddp\.comm_hook: 'zip' is not accepted; expected one of none, allreduce"),
    ({"trace": "nope/missing.json"}, r"trace: 'nope/missing\.json' does not exist"),
    ({"timelines": [7]}, r"timelines\[0\]: 7 is not accepted; expected a bucket_cap_mb of the sweep"),
    ({"timelines": ["best", [2, 4]]}, r"timelines\[1\]: \[2, 4\] is not accepted; expected a bucket_cap_mb of the "
                                      r"sweep, a bucket_cap_mb_list of the sweep, 'best' or a point id"),
    ({"sweep": {"nodes": [1, 2]}}, r"world_size: 2 is not accepted; expected null"),
    ({"name": "a b"}, r"name: 'a b' is not accepted"),
    ({"simulation": {"stragglers": {5: 1.5}}}, r"simulation\.stragglers: 5 is not accepted; expected a rank in \[0, 2\)"),
    ({"simulation": {"copy_bandwidth_gbps": 0}}, r"simulation\.copy_bandwidth_gbps: 0 is not accepted; expected a number of GB/s > 0"),
    ({"cluster": {"latency_us": 5}}, r"cluster\.bandwidth_gbps: None is not accepted; expected a number of GB/s > 0"),
    ({"cluster": {"latency_us": -1, "bandwidth_gbps": 1}}, r"cluster\.latency_us: -1 is not accepted"),
    ({"cluster": {"topology": "cpu-gloo", "latency_us": 5}}, r"cluster\.latency_us: 5 is not accepted; expected no value with cluster\.topology"),
    ({"cluster": {"latency_us": 5, "bandwidth_gbps": 1}, "world_size": None}, r"world_size: None is not accepted; expected an integer >= 1 with cluster\.latency_us"),
    ({"plan": "nope/plan.json"}, r"plan: 'nope/plan\.json' does not exist or is not a file; expected a bucket plan JSON"),
])
def test_bad_input_names_key(tmp_path, tiny_trace_file, over, match):
    with pytest.raises(InputError, match=match):
        load_scenario(_write(tmp_path, tiny_trace_file, **over))


def test_trace_and_model_exclusive(tiny_trace_file):
    with pytest.raises(InputError, match=r"^x: trace: '.*' is not accepted; expected exactly one of 'trace' .* or 'model' .*, not both$"):
        scenario_from_dict({"trace": str(tiny_trace_file), "model": "mlp", "cluster": "cpu-gloo"}, source="x")


def test_invalid_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match=r"bad\.yaml'?: not valid YAML"):
        load_scenario(p)


def test_unknown_scenario_name():
    with pytest.raises(InputError, match=r"scenario: 'no-such-scenario' does not exist"):
        load_scenario("no-such-scenario")


def test_bundled_scenarios_are_valid():
    root = Path(__file__).resolve().parent.parent / "scenarios"
    for p in sorted(root.glob("*.yaml")):
        trace = yaml.safe_load(p.read_text()).get("trace")
        if trace and not (root.parent / trace).is_file():
            continue  # trace not shipped yet in this checkout
        s = load_scenario(p)
        assert s.points() and s.name == p.stem


def test_name_defaults_to_a_valid_file_stem(tmp_path, tiny_trace_file):
    """No ``name``: the file's stem names the report folder, refused when it is no folder name."""
    good = _write(tmp_path, tiny_trace_file, name=None)
    assert load_scenario(good).name == "s"
    bad = good.rename(tmp_path / "bad name.yaml")
    with pytest.raises(InputError, match=r"name: 'bad name' \(the file's stem\) is not accepted; expected a folder"):
        load_scenario(bad)


def test_topology_yaml_path_resolved_from_the_scenario_folder(tmp_path, tiny_trace_file):
    """A topology YAML path is resolved like the other file keys; a preset name is left as written."""
    (tmp_path / "topo.yaml").write_text("name: t\n")
    s = load_scenario(_write(tmp_path, tiny_trace_file, cluster={"topology": "topo.yaml"}))
    assert s.cluster.topology == str(tmp_path / "topo.yaml") and s.trace_path == Path(str(tiny_trace_file))
    assert load_scenario(_write(tmp_path, tiny_trace_file)).cluster.topology == "cpu-gloo"
    with pytest.raises(InputError, match=r"cluster\.topology: 'gone\.yaml' does not exist or is not a file; expected a "
                                         r"preset name or a topology YAML path"):
        load_scenario(_write(tmp_path, tiny_trace_file, cluster={"topology": "gone.yaml"}))


def test_latency_bandwidth_cluster_and_copy_bandwidth(tmp_path, tiny_trace_file):
    """``cluster: {latency_us, bandwidth_gbps}`` builds the plain latency + bandwidth model;
    ``simulation.copy_bandwidth_gbps`` sets the copies' bandwidth (what ``ddpsim simulate``'s
    --latency-us/--bandwidth-gbps and --copy-bandwidth-gbps write)."""
    s = load_scenario(_write(tmp_path, tiny_trace_file, cluster={"latency_us": 100, "bandwidth_gbps": 0.0001},
                             simulation={"copy_bandwidth_gbps": 2}))
    assert s.graph() is None and s.cluster.label == "100 us + bytes / 0.0001 GB/s"
    inputs = s.build_point(s.base_point())
    assert (inputs.comm.latency_s, inputs.comm.bandwidth_bytes_per_s, inputs.comm.num_ranks) == (pytest.approx(1e-4), 1e5, 2)
    assert inputs.config.copy_bandwidth_bytes_per_s == 2e9 and inputs.config.world_size == 2
    assert (s.cluster.latency_us, s.cluster.bandwidth_gbps, s.cluster.nodes) == (100.0, 0.0001, 1)
    assert s.simulation.copy_bandwidth_gbps == 2.0


def test_explicit_plan_key(tmp_path, tiny_trace_file):
    """``plan: FILE`` replaces DDP's buckets at every point (``ddpsim simulate --set plan=FILE``)."""
    import json

    from ddpsim.plan.planner import explicit_plan
    from ddpsim.trace.records import load_trace

    plan = explicit_plan(load_trace(tiny_trace_file), [[0], [1, 2, 3]], source="test")
    pf = tmp_path / "plan.json"
    pf.write_text(json.dumps(plan.to_dict()))
    s = load_scenario(_write(tmp_path, tiny_trace_file, plan=str(pf)))
    for p in s.points():
        assert [b.param_indices for b in s.build_point(p).plan.steady] == [(0,), (1, 2, 3)]
    assert s.plan_path == pf


def test_scenario_is_a_view_of_its_file_model(tmp_path, tiny_trace_file):
    """Scenario declares no key of its own: it holds the validated file, reads it, and updated() makes a new one."""
    import dataclasses

    from ddpsim.pipeline.scenario import Scenario

    assert [f.name for f in dataclasses.fields(Scenario)] == ["doc", "path"]
    s = load_scenario(_write(tmp_path, tiny_trace_file, ddp={"powersgd": {"matrix_approximation_rank": 3},
                                                            "comm_hook": "powersgd"}))
    assert s.doc.trace == str(tiny_trace_file) and s.trace_path == tiny_trace_file   # resolved, kept in the file model
    assert (s.doc.ddp.powersgd.matrix_approximation_rank, s.doc.ddp.comm_hook, s.ddp.bucket_cap_mb) == (3, "powersgd", None)
    off = s.updated(cost_model={"contention": False}, simulation=s.simulation.model_copy(update={"seed": 7}))
    assert off.cost_model.contention is False and s.cost_model.contention is True   # s is unchanged
    assert off.simulation.seed == 7 and off.doc.ddp == s.doc.ddp and off.path == s.path
    assert [p.point_id for p in off.points()] == [p.point_id for p in s.points()]
    with pytest.raises(AssertionError):
        s.updated(cost_model={"no_such_term": False})
