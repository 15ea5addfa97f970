"""torch 2.13's DDP options from a scenario's ``ddp`` block and from ``ddpsim simulate --set``:
parsed into DDPOptions, bad values one line naming the key/flag (exit 2 on the CLI).

Numbers: the toy trace of tests/test_engine.py, 4 MiB/s network (1 MiB all-reduce = 0.25 s).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.plan.planner import DDPOptions, MixedPrecision
from ddpsim.pipeline.scenario import load_scenario
from ddpsim.trace.records import save_trace

from test_engine import toy_trace
from test_engine_cli import NET, sim


def _scenario(tmp_path: Path, tiny_trace_file, ddp: dict) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "trace": str(tiny_trace_file), "cluster": {"topology": "cpu-gloo"},
                                 "world_size": 2, "ddp": ddp}))
    return p


def test_scenario_ddp_keys(tmp_path, tiny_trace_file):
    s = load_scenario(_scenario(tmp_path, tiny_trace_file, {
        "batched_grad_copy": True, "skip_all_reduce_unused_params": True, "forward_sync_buffers": False,
        "mixed_precision": {"param_dtype": "bfloat16", "reduce_dtype": "float32"},
        "delay_all_reduce_named_params": ["fc1.weight"], "param_to_hook_all_reduce": "fc1.bias"}))
    o = s.ddp_options(s.points()[0])   # the sweep point keeps them
    assert (o.batched_grad_copy, o.skip_all_reduce_unused_params, o.forward_sync_buffers) == (True, True, False)
    assert o.mixed_precision == MixedPrecision(param_dtype="bfloat16", reduce_dtype="float32")
    assert (o.delay_all_reduce_named_params, o.param_to_hook_all_reduce) == (("fc1.weight",), "fc1.bias")
    inputs = s.build_point(s.points()[0])
    assert [b.param_indices for b in inputs.plan.initial] == [(1, 2, 3)]   # fc1.weight left out
    # a default ddp block gives DDP's defaults
    d = load_scenario(_scenario(tmp_path, tiny_trace_file, {}))
    assert d.ddp == DDPOptions() and d.ddp_options(d.points()[0]) == DDPOptions()


@pytest.mark.parametrize("ddp,match", [
    ({"batched_grad_copy": "yes"}, r"s\.yaml: ddp\.batched_grad_copy: 'yes' is not accepted; expected true or false"),
    ({"forward_sync_buffers": 1}, r"ddp\.forward_sync_buffers: 1 is not accepted; expected true or false"),
    ({"mixed_precision": {"param_dtype": "int8"}}, r"ddp\.mixed_precision\.param_dtype: 'int8' is not accepted; expected one of float16"),
    ({"mixed_precision": {"param": "float16"}}, r"ddp\.mixed_precision\.param: unknown key"),
    ({"delay_all_reduce_named_params": "fc1.weight", "param_to_hook_all_reduce": "fc1.bias"},
     r"ddp\.delay_all_reduce_named_params: 'fc1\.weight' is not accepted; expected a list of parameter names"),
    ({"delay_all_reduce_named_params": ["fc1.weight"]}, r"ddp\.param_to_hook_all_reduce: None is not accepted; expected a parameter name together with"),
])
def test_scenario_bad_ddp_keys(tmp_path, tiny_trace_file, ddp, match):
    with pytest.raises(InputError, match=match):
        load_scenario(_scenario(tmp_path, tiny_trace_file, ddp))


def test_scenario_unknown_delayed_name_names_the_key(tmp_path, tiny_trace_file):
    s = load_scenario(_scenario(tmp_path, tiny_trace_file, {"delay_all_reduce_named_params": ["fc9.weight"],
                                                            "param_to_hook_all_reduce": "fc1.bias"}))
    with pytest.raises(InputError, match=r"s\.yaml: ddp\.delay_all_reduce_named_params: 'fc9\.weight' is not a parameter"):
        s.build_point(s.points()[0])


@pytest.fixture()
def trace_file(tmp_path):
    return str(save_trace(toy_trace(), tmp_path / "toy.json"))


def test_simulate_ddp_keys(trace_file, capsys):
    base = ["--trace", trace_file, *NET, "--set", "world_size=2", "--set", "simulation.jitter=none",
            "--set", "simulation.iterations=1", "--format", "json"]
    rc, out, err = sim(capsys, *base, "--set", "ddp.mixed_precision={param_dtype: float16}",
                       "--set", "ddp.delay_all_reduce_named_params=[a]", "--set", "ddp.param_to_hook_all_reduce=b",
                       "--set", "ddp.batched_grad_copy=true")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["meta"]["plan"]["label"] == "cap=default,batched_grad_copy,mp=float16/-/-,delay_all_reduce=1"
    # iteration 1: one bucket [b, c] and a's delayed all-reduce
    assert doc["meta"]["plan"]["num_buckets_initial"] == 1 and doc["meta"]["num_collectives"] == 2
    rc, out, err = sim(capsys, *base, "--set", "ddp.skip_all_reduce_unused_params=true",
                       "--set", "ddp.forward_sync_buffers=false", "--set", "ddp.broadcast_buffers=true")
    assert rc == 0 and json.loads(out)["meta"]["skipped_buckets"] == {}


def test_simulate_models_every_parameter_delayed(trace_file, capsys):
    """No reducer (a sweep refuses the point): simulate runs it, one delayed all-reduce of a, b, c per iteration."""
    rc, out, err = sim(capsys, "--trace", trace_file, *NET, "--set", "world_size=2", "--set", "simulation.jitter=none",
                       "--set", "simulation.iterations=1", "--format", "json",
                       "--set", "ddp.delay_all_reduce_named_params=[a, b, c]", "--set", "ddp.param_to_hook_all_reduce=a")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["meta"]["plan"]["num_buckets_initial"], doc["meta"]["plan"]["num_buckets_steady"]) == (0, 0)
    assert doc["meta"]["num_collectives"] == 1 and doc["buckets"] == []


@pytest.mark.parametrize("args,message", [
    (["ddp.mixed_precision=fp16"], "--set ddp.mixed_precision: 'fp16' is not accepted"),
    (["ddp.mixed_precision={param_dtype: x}"], "--set ddp.mixed_precision.param_dtype: 'x' is not accepted"),
    (["ddp.forward_sync_buffers=maybe"], "--set ddp.forward_sync_buffers: 'maybe' is not accepted"),
    (["ddp.delay_all_reduce_named_params=[a]"], "ddp.param_to_hook_all_reduce: None is not accepted"),
    (["ddp.delay_all_reduce_named_params=[zz]", "ddp.param_to_hook_all_reduce=a"],
     "--set ddp.delay_all_reduce_named_params: 'zz' is not a parameter of trace 'toy'"),
    (["ddp.mixed_precision={param_dtype: float16}", "ddp.comm_hook=fp16"],
     "comm_hook: 'fp16' is not accepted with mixed_precision"),
])
def test_simulate_bad_ddp_keys_exit_2(trace_file, capsys, args, message):
    sets = [x for a in args for x in ("--set", a)]
    rc, out, err = sim(capsys, "--trace", trace_file, *NET, "--set", "world_size=2", *sets)
    assert rc == 2 and out == ""
    assert err.startswith("ddpsim: error: ") and message in err and err.count("\n") == 1, err


def test_plan_command_with_delayed_params(capsys):
    import tempfile

    path = save_trace(toy_trace(), Path(tempfile.mkdtemp()) / "toy.json")
    assert main(["plan", str(path), "--options", '{"delay_all_reduce_named_params": ["a"], "param_to_hook_all_reduce": "b"}',
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [b["param_indices"] for b in doc["buckets"]] == [[2], [1]]   # a is not the reducer's
    assert main(["plan", str(path), "--options",
                 '{"delay_all_reduce_named_params": ["a", "b", "c"], "param_to_hook_all_reduce": "a"}']) == 0
    assert "no buckets: every parameter is in delay_all_reduce_named_params" in capsys.readouterr().out


def test_run_with_delayed_params_recommends_reducer_buckets(tmp_path, tiny_trace_file, capsys):
    s = _scenario(tmp_path, tiny_trace_file, {"delay_all_reduce_named_params": ["fc1.weight"],
                                              "param_to_hook_all_reduce": "fc1.bias", "batched_grad_copy": True})
    assert main(["run", str(s), "--out-dir", str(tmp_path / "out"), "--quiet", "--jobs", "1"]) == 0
    rec = json.loads((tmp_path / "out" / "t" / "recommended_plan.json").read_text())
    assert sorted(i for b in rec["buckets"] for i in b["param_indices"]) == [1, 2, 3]
    every = _scenario(tmp_path, tiny_trace_file, {"delay_all_reduce_named_params": ["fc1.weight", "fc1.bias", "fc2.weight",
                                                                                    "fc2.bias"], "param_to_hook_all_reduce": "fc1.bias"})
    assert main(["run", str(every), "--out-dir", str(tmp_path / "out2"), "--quiet"]) == 2
    assert "ddp.delay_all_reduce_named_params: every parameter of trace 'tiny' is delayed" in capsys.readouterr().err
