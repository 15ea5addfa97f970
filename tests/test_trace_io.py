"""The trace loader (ddpsim.trace.records.load_trace / trace_from_dict): every bad input is one
InputError line naming the file and the field; save/load round trips byte for byte."""

from __future__ import annotations

import copy
import json
import math

import pytest

from ddpsim.errors import InputError
from ddpsim.trace.records import TRACE_FORMAT, TRACE_VERSION, load_trace, make_trace, save_trace, trace_from_dict


@pytest.fixture
def good(tiny_trace):
    return tiny_trace.to_dict()


def write(tmp_path, data, name="t.json"):
    f = tmp_path / name
    f.write_text(data if isinstance(data, str) else json.dumps(data))
    return f


def load_error(tmp_path, data) -> str:
    f = write(tmp_path, data)
    with pytest.raises(InputError) as exc:
        load_trace(f)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"trace {f}: ") or msg.startswith("trace: "), msg
    return msg


# ---- file level --------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"^trace: '.*nope\.json' does not exist or is not a file; expected a trace JSON"):
        load_trace(tmp_path / "nope.json")


def test_directory_is_not_a_trace(tmp_path):
    with pytest.raises(InputError, match="does not exist or is not a file"):
        load_trace(tmp_path)


@pytest.mark.parametrize("text", ["{not json", "", "\xff\xfe"])
def test_not_json(tmp_path, text):
    f = tmp_path / "t.json"
    f.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match=r"^trace .*t\.json: not valid JSON .*; expected a trace JSON written by 'ddpsim trace'$"):
        load_trace(f)


def test_top_level_must_be_an_object(tmp_path):
    assert "top level is list; expected a JSON object" in load_error(tmp_path, [1, 2])


@pytest.mark.parametrize("fmt", ["ddpsim-plan", None, 3])
def test_wrong_format(tmp_path, good, fmt):
    good["format"] = fmt
    assert f"trace.format: {fmt!r} is not accepted; expected {TRACE_FORMAT!r}" in load_error(tmp_path, good)


@pytest.mark.parametrize("version", [2, 0, "1", None, 1.5, True])
def test_wrong_version(tmp_path, good, version):
    good["version"] = version
    assert f"trace.version: {version!r} is not supported; expected {TRACE_VERSION}" in load_error(tmp_path, good)


def test_missing_format(tmp_path, good):
    del good["format"]
    assert "trace.format: None is not accepted" in load_error(tmp_path, good)


# ---- params ----------------------------------------------------------------------------------


def test_negative_size_bytes(tmp_path, good):
    good["params"][2]["size_bytes"] = -4
    assert "params[2].size_bytes: -4 is not accepted; expected an integer >= 0" in load_error(tmp_path, good)


def test_size_not_matching_shape_and_dtype(tmp_path, good):
    good["params"][1]["size_bytes"] = 128  # 64 x float32 = 256
    msg = load_error(tmp_path, good)
    assert "trace.params[1].size_bytes: 128 does not match shape [64] x float32; expected 256" in msg


def test_size_must_follow_dtype(tmp_path, good):
    good["params"][0]["dtype"] = "float16"  # 64 x 32 x 2 = 4096, file says 8192
    assert "trace.params[0].size_bytes: 8192 does not match shape [64, 32] x float16; expected 4096" in load_error(tmp_path, good)


def test_unknown_dtype(tmp_path, good):
    good["params"][3]["dtype"] = "float7"
    assert "params[3].dtype: 'float7' is not a known dtype" in load_error(tmp_path, good)


@pytest.mark.parametrize("key,field", [
    ("name", "trace.params[2].name: missing; expected a str"),
    ("shape", "trace.params[2].shape: missing; expected a list"),
    ("dtype", "trace.params[2].dtype: missing; expected a str"),
    ("size_bytes", "trace.params[2].size_bytes: missing; expected a int"),
    ("index", "trace.params[2].index: missing; expected a int"),
])
def test_missing_param_field(tmp_path, good, key, field):
    del good["params"][2][key]
    assert field in load_error(tmp_path, good)


def test_optional_param_fields_default(tmp_path, good):
    for p in good["params"]:
        del p["expect_sparse_gradient"], p["has_grad"]
    t = load_trace(write(tmp_path, good))
    assert all(p.has_grad and not p.expect_sparse_gradient for p in t.params)


@pytest.mark.parametrize("key,value,field", [
    ("size_bytes", 8192.0, "trace.params[0].size_bytes: 8192.0 is not accepted; expected a int"),
    ("size_bytes", True, "trace.params[0].size_bytes: True is not accepted; expected a int"),
    ("index", "0", "trace.params[0].index: '0' is not accepted; expected a int"),
    ("name", 7, "trace.params[0].name: 7 is not accepted; expected a str"),
    ("shape", "64x32", "trace.params[0].shape: '64x32' is not accepted; expected a list"),
    ("has_grad", 1, "trace.params[0].has_grad: 1 is not accepted; expected a bool"),
    ("expect_sparse_gradient", "no", "trace.params[0].expect_sparse_gradient: 'no' is not accepted; expected a bool"),
])
def test_wrong_param_types(tmp_path, good, key, value, field):
    good["params"][0][key] = value
    assert field in load_error(tmp_path, good)


@pytest.mark.parametrize("shape", [[64, -32], [64, 2.5], [64, True], [64, "32"]])
def test_bad_shape_entries(tmp_path, good, shape):
    good["params"][0]["shape"] = shape
    assert "params[0].shape: " in load_error(tmp_path, good)


def test_param_entry_not_an_object(tmp_path, good):
    good["params"][1] = [1, 2]
    assert "trace.params[1]: [1, 2] is not accepted; expected an object" in load_error(tmp_path, good)


def test_params_out_of_order(tmp_path, good):
    good["params"][0]["index"], good["params"][1]["index"] = 1, 0
    assert "trace.params[0].index: 1 is out of order; expected 0 (DDP parameter order)" in load_error(tmp_path, good)


def test_no_params(tmp_path, good):
    good["params"] = []
    assert "trace.params: [] is empty; expected at least one trainable parameter" in load_error(tmp_path, good)


# ---- grad_ready_order ------------------------------------------------------------------------


@pytest.mark.parametrize("order,bad", [([3, 2, 2, 0], 2), ([3, 2, 1, 4], 4), ([3, 2, 1, -1], -1),
                                       ([3, 2, 1, 0.0], 0.0), ([3, 2, 1, True], True), ([3, 2, 1, "0"], "'0'")])
def test_grad_ready_order_bad_entries(tmp_path, good, order, bad):
    good["grad_ready_order"] = order
    msg = load_error(tmp_path, good)
    assert f"trace.grad_ready_order: {bad} is not accepted; expected distinct parameter indices in [0, 4)" in msg


def test_grad_ready_order_missing_a_parameter_with_a_gradient(tmp_path, good):
    good["grad_ready_order"] = [3, 2, 1]
    msg = load_error(tmp_path, good)
    assert "trace.grad_ready_order: parameter 0 (fc1.weight) has a gradient but is missing" in msg


def test_grad_ready_order_lists_a_parameter_without_gradient(tmp_path, good):
    good["params"][0]["has_grad"] = False
    assert "trace.grad_ready_order: parameter 0 (fc1.weight) has has_grad=false but is listed" in load_error(tmp_path, good)


def test_grad_ready_order_missing_or_not_a_list(tmp_path, good):
    g2 = copy.deepcopy(good)
    del good["grad_ready_order"]
    assert ": trace.grad_ready_order: missing; expected a list" in load_error(tmp_path, good)
    g2["grad_ready_order"] = "3,2,1,0"
    assert ": trace.grad_ready_order: '3,2,1,0' is not accepted; expected a list" in load_error(tmp_path, g2)


def test_unused_parameter_is_consistent(tmp_path, good):
    good["params"][0]["has_grad"] = False
    good["grad_ready_order"] = [3, 2, 1]
    for it in good["iterations"]:
        it["grad_ready_s"][0] = None
    t = load_trace(write(tmp_path, good))
    assert t.grad_ready_order == (3, 2, 1) and t.median_grad_ready_s()[0] is None


# ---- iterations and times --------------------------------------------------------------------


@pytest.mark.parametrize("key", ["forward_s", "backward_s", "optimizer_s", "zero_grad_s"])
@pytest.mark.parametrize("value", [-0.001, math.nan, math.inf, True])
def test_bad_phase_times(tmp_path, good, key, value):
    good["iterations"][1][key] = value
    msg = load_error(tmp_path, good)
    assert f"trace.iterations[1].{key}: {value!r} is not accepted; expected " in msg


@pytest.mark.parametrize("key", ["forward_s", "optimizer_s"])
@pytest.mark.parametrize("value", ["0.1", None, [0.1]])
def test_phase_times_of_wrong_type(tmp_path, good, key, value):
    good["iterations"][0][key] = value
    assert f"trace.iterations[0].{key}: {value!r} is not accepted; expected a number" in load_error(tmp_path, good)


def test_nan_literal_in_file_is_rejected(tmp_path, good):
    text = json.dumps(good).replace('"backward_s": 0.02', '"backward_s": NaN', 1)
    assert "NaN" in text
    assert "trace.iterations[0].backward_s: nan is not accepted; expected a finite number of seconds >= 0" in load_error(tmp_path, text)


@pytest.mark.parametrize("value", [-1.0, math.inf, "x", True])
def test_bad_grad_ready_time(tmp_path, good, value):
    good["iterations"][0]["grad_ready_s"][2] = value
    msg = load_error(tmp_path, good)
    assert f"trace.iterations[0].grad_ready_s[2]: {value!r} is not accepted; expected a finite number of seconds >= 0" in msg


def test_grad_ready_s_length(tmp_path, good):
    good["iterations"][1]["grad_ready_s"] = [0.1, 0.2]
    assert "trace.iterations[1].grad_ready_s: has 2 entries; expected 4 (one per parameter)" in load_error(tmp_path, good)


def test_missing_iteration_fields(tmp_path, good):
    del good["iterations"][0]["optimizer_s"]
    assert "trace.iterations[0].optimizer_s: missing; expected a number" in load_error(tmp_path, good)


def test_zero_grad_defaults_to_zero(tmp_path, good):
    for it in good["iterations"]:
        del it["zero_grad_s"]
    assert load_trace(write(tmp_path, good)).iterations[0].zero_grad_s == 0.0


def test_no_iterations(tmp_path, good):
    good["iterations"] = []
    assert "trace.iterations: [] is empty; expected at least one measured iteration" in load_error(tmp_path, good)


def test_negative_hook_overhead(tmp_path, good):
    good["hook_overhead_frac"] = -0.1
    assert "trace.hook_overhead_frac: -0.1 is not accepted" in load_error(tmp_path, good)


# ---- top-level fields ------------------------------------------------------------------------


@pytest.mark.parametrize("key,value,typ", [("model", 3, "str"), ("params", {}, "list"), ("iterations", {}, "list"),
                                           ("environment", [], "dict"), ("buffers", {}, "list")])
def test_wrong_top_level_types(tmp_path, good, key, value, typ):
    good[key] = value
    assert f": trace.{key}: {value!r} is not accepted; expected a {typ}" in load_error(tmp_path, good)


@pytest.mark.parametrize("key,typ", [("model", "str"), ("params", "list"), ("iterations", "list"),
                                     ("grad_ready_order", "list")])
def test_missing_top_level_fields(tmp_path, good, key, typ):
    del good[key]
    assert f": trace.{key}: missing; expected a {typ}" in load_error(tmp_path, good)


def test_synthetic_must_be_an_object(tmp_path, good):
    good["synthetic"] = "retimed"
    assert "trace.synthetic: 'retimed' is not accepted; expected null or an object" in load_error(tmp_path, good)


def test_bad_buffer(tmp_path, good):
    good["buffers"] = [{"name": "bn.running_mean", "dtype": "float32", "size_bytes": -1}]
    assert "buffers[bn.running_mean].size_bytes: -1 is not accepted" in load_error(tmp_path, good)


def test_trace_from_dict_has_no_file_prefix(good):
    good["version"] = 2
    with pytest.raises(InputError, match=r"^trace\.version: 2 is not supported; expected 1$"):
        trace_from_dict(good)


# ---- round trip ------------------------------------------------------------------------------


def test_save_load_round_trip_is_byte_identical(tmp_path):
    t = make_trace(model="rt", params=[("emb.weight", (10, 3), "bfloat16"), ("w", (3, 3), "float64"), ("b", (3,), "float32"),
                                       ("dead", (2,), "float16")],
                   ready_s=[0.3, 0.1, 0.2, None], forward_s=0.012345678901234, backward_s=1e-7, optimizer_s=0.0,
                   num_iterations=3, environment={"device": "cpu", "batch_size": 2}, hook_overhead_frac=0.004,
                   command="ddpsim trace --model rt")
    a = save_trace(t, tmp_path / "a.json")
    t2 = load_trace(a)
    assert t2 == t
    b = save_trace(t2, tmp_path / "b.json")
    assert a.read_bytes() == b.read_bytes()
    assert t2.grad_ready_order == (1, 2, 0)
    assert t2.params[3].has_grad is False and t2.iterations[2].grad_ready_s[3] is None
    assert load_trace(b).to_dict() == t.to_dict()


def test_round_trip_of_fixture(tmp_path, tiny_trace):
    a = save_trace(tiny_trace, tmp_path / "a.json")
    b = save_trace(load_trace(a), tmp_path / "b.json")
    assert a.read_bytes() == b.read_bytes()
    assert json.loads(a.read_text())["format"] == TRACE_FORMAT


def test_pool_traces_concatenates_rounds_in_order(tiny_trace):
    from dataclasses import replace

    from ddpsim.trace.records import pool_traces

    slow = replace(tiny_trace, iterations=tuple(replace(it, backward_s=0.03) for it in tiny_trace.iterations[:1]))
    pooled = pool_traces([tiny_trace, slow])
    assert [it.backward_s for it in pooled.iterations] == [0.02, 0.02, 0.03]
    assert pooled.params == tiny_trace.params and pooled.model == "tiny"
    pooled.environment["x"] = 1            # the pooled trace's environment is its own
    assert "x" not in tiny_trace.environment


def test_pool_traces_refuses_different_models(tiny_trace):
    from ddpsim.trace.records import make_trace, pool_traces

    other = make_trace(model="other", params=[("w", (4,), "float32")], ready_s=[0.001],
                       forward_s=0.01, backward_s=0.02, optimizer_s=0.005)
    with pytest.raises(InputError, match=r"^traces\[1\]\.model: 'other' \(1 parameters\) differs"):
        pool_traces([tiny_trace, other])
    with pytest.raises(InputError, match=r"^traces: \[\] is empty"):
        pool_traces([])
