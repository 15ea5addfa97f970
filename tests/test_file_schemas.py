"""The declared file formats (trace, plan, calibration, topology, method error): real files load
to the objects they describe, and hostile input is one InputError line naming the key path."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml

from ddpsim.calibration.loader import calibration_from_dict, load_calibration
from ddpsim.errors import InputError
from ddpsim.network.topology import build_preset, load_topology_yaml, resolve_topology
from ddpsim.pipeline.method_error import MethodError, load_method_error
from ddpsim.plan.planner import explicit_plan, load_plan
from ddpsim.schema import validate
from ddpsim.trace.records import Trace, load_trace

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted((ROOT / "traces").glob("*.json"))
CALIBRATIONS = sorted((ROOT / "tests" / "data").glob("calibration-*.json")) + [ROOT / "reports/zoo/lanes/zoo/calibration.json"]
METHOD_ERROR = ROOT / "reports/zoo/lanes/zoo/method_error.json"
#: reports whose scenario (and so trace) is committed beside them; default.yaml changes with the lead's edits
PLANS = ["cpu-gloo-mlp", "cpu-gloo-resnet50", "resnet50-a100-2n", "bert-base-pcie", "gpt2-1.5b-h100-8n"]
LONG_PATH = "x" * 5000


def refused(call, *args, match: str, **kwargs) -> str:
    with pytest.raises(InputError, match=match) as exc:
        call(*args, **kwargs)
    msg = str(exc.value)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


# ---- real files load to what they describe ----------------------------------------------------------


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_bundled_trace_loads_and_writes_back_the_same_json(path):
    t = load_trace(path)
    assert json.dumps(t.to_dict(), indent=1) + "\n" == path.read_text()
    assert t.num_params == len(json.loads(path.read_text())["params"])


@pytest.mark.parametrize("name", PLANS)
def test_report_plan_loads_to_its_buckets(name):
    trace = load_trace(ROOT / yaml.safe_load((ROOT / f"scenarios/{name}.yaml").read_text())["trace"])
    path = ROOT / f"reports/{name}/recommended_plan.json"
    raw = json.loads(path.read_text())
    plan = load_plan(path, trace)
    assert plan == explicit_plan(trace, [b["param_indices"] for b in raw["buckets"]], source=raw["source"])
    assert [b.to_dict() for b in plan.steady] == raw["buckets"]


def test_a_plan_as_a_list_of_bucket_names(tmp_path, tiny_trace):
    f = tmp_path / "p.json"
    f.write_text(json.dumps([[p.name for p in tiny_trace.params]]))
    assert [b.param_indices for b in load_plan(f, tiny_trace).steady] == [tuple(range(tiny_trace.num_params))]


@pytest.mark.parametrize("wrap", [lambda b: b, lambda b: {"buckets": b}], ids=["list", "document"])
def test_a_plan_past_the_bucket_bound_is_refused_by_count(tmp_path, tiny_trace, wrap):
    from ddpsim.plan.planner import MAX_PLAN_BUCKETS

    f = tmp_path / "p.json"
    f.write_text(json.dumps(wrap([[0]] * (MAX_PLAN_BUCKETS + 1))))
    with pytest.raises(InputError, match=rf"buckets: {MAX_PLAN_BUCKETS + 1} buckets .*at most {MAX_PLAN_BUCKETS}$"):
        load_plan(f, tiny_trace)


@pytest.mark.parametrize("path", CALIBRATIONS, ids=lambda p: p.parent.name + "/" + p.name)
def test_calibration_file_loads_its_figures(path):
    raw = json.loads(path.read_text())
    cal = load_calibration(path)
    assert [(p.size_bytes, p.time_s, p.num_samples) for p in cal.collectives.allreduce] == sorted(
        (p["size_bytes"], p["time_s"], p["num_samples"]) for p in raw["collectives"]["allreduce"])
    assert cal.ddp_iteration_overhead_measured_s == raw["ddp_iteration_overhead_s"]  # recomputed from ddp_overhead
    mb = cal.interference_microbenchmark
    assert (mb.compute_slowdown, mb.comm_slowdown) == (raw["interference"]["compute_slowdown"], raw["interference"]["comm_slowdown"])
    assert cal.probe_host_other_pct == raw["interference_probe"].get("host_other_pct")
    assert calibration_from_dict(raw) == cal


def test_method_error_file_loads_and_writes_back_the_same_document():
    assert load_method_error(METHOD_ERROR).to_dict() == json.loads(METHOD_ERROR.read_text())


def test_topology_yaml_of_a_preset_builds_the_preset(tmp_path):
    g = build_preset("cpu-gloo")
    doc = {"name": "cpu-gloo", "backend": "gloo", "description": g.graph["description"],
           "nodes": [{"id": "n0/loopback", "kind": "loopback"}] + [
               {"id": f"n0/cpu{i}", "kind": "cpu", "local_rank": i, "device_model": "cpu"} for i in range(2)],
           "links": [{"a": f"n0/cpu{i}", "b": "n0/loopback", "bandwidth_gbps": 4, "latency_us": 7.5,
                      "link_type": "loopback"} for i in range(2)]}
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(doc))
    y = load_topology_yaml(f)
    assert dict(y.nodes(data=True)) == dict(g.nodes(data=True))
    assert {frozenset(e[:2]): e[2] for e in y.edges(data=True)} == {frozenset(e[:2]): e[2] for e in g.edges(data=True)}


# ---- topology ---------------------------------------------------------------------------------------

GOOD_YAML = {"name": "two", "backend": "nccl",
             "nodes": [{"id": "g0", "kind": "gpu", "local_rank": 0}, {"id": "g1", "kind": "gpu", "local_rank": 1},
                       {"id": "sw", "kind": "nvswitch"}],
             "links": [{"a": "g0", "b": "sw", "bandwidth_gbps": 240, "latency_us": 0.6, "link_type": "nvlink"},
                       {"a": "g1", "b": "sw", "bandwidth_gbps": 240, "latency_us": 0.6, "link_type": "nvlink"}]}


def _yaml(tmp_path, edit) -> Path:
    doc = copy.deepcopy(GOOD_YAML)
    edit(doc)
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["links"][0].update(num_links=[1, 2]), r"links\[0\]\.num_links: \[1, 2\] is not accepted; expected a valid integer$"),
    (lambda d: d["links"][0].update(num_links=-3), r"links\[0\]\.num_links: -3 is not accepted; expected a value >= 1$"),
    (lambda d: d["links"][0].update(num_links=1.7), r"links\[0\]\.num_links: 1\.7 is not accepted; expected a valid integer$"),
    (lambda d: d["links"][0].update(bandwidth_gbps=1e300), r"links\[0\]\.bandwidth_gbps: 1e\+300 is not accepted; expected a value <= 1000000"),
    (lambda d: d["links"][0].update(latency_us=math.inf), r"links\[0\]\.latency_us: inf is not accepted; expected a finite number$"),
    (lambda d: d["nodes"][2].update(nvls="false"), r"nodes\[2\]\.nvls: 'false' is not accepted; expected a valid boolean$"),
    (lambda d: d["nodes"][0].update(local_rank="0"), r"nodes\[0\]\.local_rank: '0' is not accepted; expected a valid integer$"),
    (lambda d: d["nodes"][0].update(local_rank=5000), r"nodes\[0\]\.local_rank: 5000 is not accepted; expected a value <= 1024$"),
    (lambda d: d["nodes"][0].update(host=70000), r"nodes\[0\]\.host: 70000 is not accepted; expected a value <= 4096$"),
    (lambda d: d["nodes"][0].update(rail=1), r"nodes\[0\]\.rail: 1 is not accepted; expected no rail on a gpu node"),
    (lambda d: d["nodes"][0].pop("local_rank"), r"nodes\[0\]\.local_rank: None is not accepted; expected an integer in \[0, 1024\]"),
    (lambda d: d["nodes"][0].update(speed=1), r"nodes\[0\]\.speed: unknown key; expected one of id, kind, host"),
])
def test_topology_yaml_refusals(tmp_path, edit, match):
    f = _yaml(tmp_path, edit)
    assert refused(load_topology_yaml, f, match=match).startswith(f"topology '{f}': ")


@pytest.mark.parametrize("name,opts,match", [
    ("dgx-h100", {"gpus_per_node": 2000}, r"^topology dgx-h100: gpus_per_node: 2000 is not accepted; expected a value <= 1024$"),
    ("dgx-h100", {"gpus_per_node": 8.0}, r"gpus_per_node: 8\.0 is not accepted; expected a valid integer$"),
    ("dgx-a100", {"nic_gbit": math.inf}, r"nic_gbit: inf is not accepted; expected a finite number$"),
    ("dgx-a100", {"pcie_gen": True}, r"pcie_gen: True is not accepted; expected a valid integer$"),
    ("pcie", {"gpus_per_switch": [4]}, r"gpus_per_switch: \[4\] is not accepted; expected a valid integer$"),
    ("cpu-gloo", {"ranks_per_host": 1.5}, r"^topology cpu-gloo: ranks_per_host: 1\.5 is not accepted"),
    ("cpu-gloo", {"ethernet_gbit": "10"}, r"ethernet_gbit: '10' is not accepted; expected a valid number$"),
])
def test_preset_option_refusals(name, opts, match):
    refused(build_preset, name, match=match, **opts)


@pytest.mark.parametrize("n", [0, 70000, 2.0, True])
def test_num_nodes_is_a_bounded_integer(n):
    refused(build_preset, "dgx-a100", num_nodes=n,
            match=rf"^topology dgx-a100: num_nodes: {n!r} is not accepted; expected an integer in \[1, 4096\]$")


def test_binary_and_alias_bomb_topology_files(tmp_path):
    b = tmp_path / "bin.yaml"
    b.write_bytes(b"\xff\xfe\x00nodes")
    refused(load_topology_yaml, b, match=r"^topology: '.*bin\.yaml' is not UTF-8 text")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nnodes: [*c]\n")
    refused(load_topology_yaml, bomb, match=r"anchors and aliases are not accepted")


# ---- calibration ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cal_doc():
    return json.loads(CALIBRATIONS[0].read_text())


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["ddp_overhead"].update(ddp_step_s="fast"), r"^calibration: ddp_overhead\.ddp_step_s: 'fast' is not accepted; expected a valid number$"),
    (lambda d: d["ddp_overhead"].update(gradient_bytes=[1]), r"^calibration: ddp_overhead\.gradient_bytes: \[1\] is not accepted"),
    (lambda d: d["ddp_overhead"].update(copy_s=None, bare_step_s=math.nan), r"^calibration: ddp_overhead\.bare_step_s: nan is not accepted"),
    (lambda d: d.update(world_size=2.0), r"^calibration: world_size: 2\.0 is not accepted; expected a valid integer$"),
    (lambda d: d.update(version=True), r"^calibration: version: True is not accepted; expected a valid integer$"),
    (lambda d: d["collectives"]["allreduce"][0].update(time_s=1e300), r"collectives\.allreduce\[0\]\.time_s: 1e\+300 is not accepted"),
    (lambda d: d.update(calibrated_by="me"), r"^calibration: calibrated_by: unknown key"),
])
def test_calibration_refusals(cal_doc, edit, match):
    d = copy.deepcopy(cal_doc)
    edit(d)
    refused(calibration_from_dict, d, match=match)


def test_binary_calibration_file_and_long_paths(tmp_path):
    b = tmp_path / "c.json"
    b.write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    refused(load_calibration, b, match=r"^calibration: '.*c\.json' is not UTF-8 text")
    refused(load_calibration, LONG_PATH, match=r"^calibration: 'x{20}")
    refused(load_trace, LONG_PATH, match=r"^trace: 'x{20}")
    refused(load_method_error, LONG_PATH, match=r"^--method-error: 'x{20}")
    refused(resolve_topology, LONG_PATH + ".yaml", match=r"^topology: 'x{20}")
    refused(resolve_topology, LONG_PATH, match=r"is not a preset")


# ---- trace ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["iterations"][0].update(backward_s=1e300), r"^trace: iterations\[0\]\.backward_s: 1e\+300 is not accepted; expected a value <= 1000000$"),
    (lambda d: d["iterations"][0]["grad_ready_s"].__setitem__(0, 2e6), r"^trace: iterations\[0\]\.grad_ready_s\[0\]: 2000000\.0 is not accepted"),
    (lambda d: d["params"][0].update(shape=[1 << 51], size_bytes=1 << 53), r"^trace: params\[0\]\.shape\[0\]: 2251799813685248 is not accepted"),
    (lambda d: d["buffers"].append({"name": "b", "dtype": "float32", "size_bytes": 1 << 60}), r"^trace: buffers\[0\]\.size_bytes: 1152921504606846976 is not accepted"),
    (lambda d: d.update(version=True), r"^trace: version: True is not accepted; expected a valid integer$"),
    (lambda d: d.update(timelines=[0, 7]), r"^trace: timelines: unknown key; expected one of format, version"),
    (lambda d: d["iterations"][0].update(cuda_s=1.0), r"^trace: iterations\[0\]\.cuda_s: unknown key"),
    (lambda d: d.update(hook_overhead_frac=3.0), r"^trace: hook_overhead_frac: 3\.0 is not accepted; expected a value <= 1$"),
])
def test_trace_refusals(tiny_trace, edit, match):
    d = tiny_trace.to_dict()
    edit(d)
    refused(validate, Trace, d, "trace", match=match)


# ---- method error -----------------------------------------------------------------------------------


@pytest.mark.parametrize("edit,match", [
    (lambda p: p.update(predicted_s=1e308), r"^method error: points\[0\]\.predicted_s: 1e\+308 is not accepted; expected a value <= 1000000"),
    (lambda p: p.update(measured_s=1e-308), r"^method error: points\[0\]\.measured_s: 1e-308 is not accepted; expected a value >= 0\.000000001"),
    (lambda p: p.update(model=3), r"^method error: points\[0\]\.model: 3 is not accepted; expected a valid string$"),
    (lambda p: p.update(weight=1), r"^method error: points\[0\]\.weight: unknown key"),
])
def test_method_error_refusals(edit, match):
    doc = json.loads(METHOD_ERROR.read_text())
    edit(doc["points"][0])
    refused(lambda d: validate(MethodError, d, "method error"), doc, match=match)


def test_method_error_version_is_a_strict_integer():
    doc = {**json.loads(METHOD_ERROR.read_text()), "version": True}
    refused(lambda d: validate(MethodError, d, "method error"), doc, match=r"^method error: version: True is not accepted; expected a valid integer$")


# ---- plan -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc,match", [
    ({"buckets": [[0, 1]], "verison": 1}, r"^plan '.*p\.json': verison: unknown key; expected one of format, version"),
    ({"buckets": [[0, True]]}, r"^plan '.*p\.json': buckets\[0\]"),
    ({"buckets": [{"param_indices": [0], "extra": 1}]}, r"^plan '.*p\.json': buckets\[0\]"),
    ({"format": "ddpsim-plan", "version": True, "buckets": [[0]]}, r"^plan '.*p\.json': version: True is not accepted; expected a valid integer$"),
])
def test_plan_refusals(tmp_path, tiny_trace, doc, match):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    refused(load_plan, f, tiny_trace, match=match)
    f.write_bytes(b"\xff\xfe")
    refused(load_plan, f, tiny_trace, match=r"^plan: '.*p\.json' is not UTF-8 text")
