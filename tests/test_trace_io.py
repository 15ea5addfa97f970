"""The trace loader (ddpsim.trace.records.load_trace, a Trace validated): every bad input is one
InputError line naming the file and the field; save/load round trips byte for byte."""

from __future__ import annotations

import copy
import json
import math

import pytest

from ddpsim.errors import InputError, shorten
from ddpsim.schema import validate
from ddpsim.trace.records import TRACE_FORMAT, Trace, load_trace, make_trace, save_trace


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
    prefix = f"trace {shorten(str(f))}: "
    assert msg.startswith(prefix), msg
    return msg.removeprefix(prefix)


# ---- file level --------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"^trace: '.*nope\.json' does not exist or is not a file; expected a trace JSON"):
        load_trace(tmp_path / "nope.json")


def test_directory_is_not_a_trace(tmp_path):
    with pytest.raises(InputError, match="does not exist or is not a file"):
        load_trace(tmp_path)


@pytest.mark.parametrize("text,problem", [("{not json", "not valid JSON"), ("", "not valid JSON"),
                                          ("\xff\xfe", "is not UTF-8 text")])
def test_not_json(tmp_path, text, problem):
    f = tmp_path / "t.json"
    f.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match=rf"^trace:? '.*t\.json':? {problem} .*; expected a trace JSON written by 'ddpsim trace'$"):
        load_trace(f)


def test_top_level_must_be_an_object(tmp_path):
    assert "[1, 2] is not accepted; expected a mapping" in load_error(tmp_path, [1, 2])


@pytest.mark.parametrize("fmt", ["ddpsim-plan", None, 3])
def test_wrong_format(tmp_path, good, fmt):
    good["format"] = fmt
    assert f"format: {fmt!r} is not accepted; expected {TRACE_FORMAT!r}" in load_error(tmp_path, good)


@pytest.mark.parametrize("version,expected", [(2, "1"), (0, "1"), ("1", "a valid integer"), (None, "a valid integer"),
                                              (1.5, "a valid integer"), (True, "a valid integer")])
def test_wrong_version(tmp_path, good, version, expected):
    good["version"] = version
    assert load_error(tmp_path, good) == f"version: {version!r} is not accepted; expected {expected}"


def test_a_profile_given_as_a_trace_names_the_import(tmp_path):
    # a torch.profiler (Kineto) file where a ddpsim trace is expected: one line naming the command that converts it
    f = tmp_path / "rank0.json"
    f.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "ProfilerStep#1"}]}))
    with pytest.raises(InputError) as exc:
        load_trace(f)
    assert str(exc.value) == (f"trace: {shorten(str(f))} is a Chrome/Kineto trace (traceEvents), not a ddpsim trace; "
                              "expected a trace JSON written by 'ddpsim trace' (a torch.profiler trace becomes one with "
                              f"'ddpsim trace --from-profile {shorten(str(f))} --out trace.json')")


def test_missing_format(tmp_path, good):
    del good["format"]
    assert "format: missing; expected this key" in load_error(tmp_path, good)


# ---- params ----------------------------------------------------------------------------------


def test_negative_size_bytes(tmp_path, good):
    good["params"][2]["size_bytes"] = -4
    assert "params[2].size_bytes: -4 is not accepted; expected a value >= 0" in load_error(tmp_path, good)


def test_size_not_matching_shape_and_dtype(tmp_path, good):
    good["params"][1]["size_bytes"] = 128  # 64 x float32 = 256
    msg = load_error(tmp_path, good)
    assert "params[1].size_bytes: 128 is not accepted; expected 256 (shape [64] x float32)" in msg


def test_size_must_follow_dtype(tmp_path, good):
    good["params"][0]["dtype"] = "float16"  # 64 x 32 x 2 = 4096, file says 8192
    assert "params[0].size_bytes: 8192 is not accepted; expected 4096 (shape [64, 32] x float16)" in load_error(tmp_path, good)


def test_unknown_dtype(tmp_path, good):
    good["params"][3]["dtype"] = "float7"
    assert "params[3].dtype: 'float7' is not accepted; expected one of float64, float32" in load_error(tmp_path, good)


@pytest.mark.parametrize("key,field", [
    ("name", "params[2].name: missing; expected this key (it is required)"),
    ("shape", "params[2].shape: missing; expected this key (it is required)"),
    ("dtype", "params[2].dtype: missing; expected this key (it is required)"),
    ("size_bytes", "params[2].size_bytes: missing; expected this key (it is required)"),
    ("index", "params[2].index: missing; expected this key (it is required)"),
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
    ("size_bytes", 8192.0, "params[0].size_bytes: 8192.0 is not accepted; expected a valid integer"),
    ("size_bytes", True, "params[0].size_bytes: True is not accepted; expected a valid integer"),
    ("index", "0", "params[0].index: '0' is not accepted; expected a valid integer"),
    ("name", 7, "params[0].name: 7 is not accepted; expected a valid string"),
    ("shape", "64x32", "params[0].shape: '64x32' is not accepted; expected a valid list"),
    ("has_grad", 1, "params[0].has_grad: 1 is not accepted; expected a valid boolean"),
    ("expect_sparse_gradient", "no", "params[0].expect_sparse_gradient: 'no' is not accepted; expected a valid boolean"),
])
def test_wrong_param_types(tmp_path, good, key, value, field):
    good["params"][0][key] = value
    assert field in load_error(tmp_path, good)


@pytest.mark.parametrize("shape", [[64, -32], [64, 2.5], [64, True], [64, "32"]])
def test_bad_shape_entries(tmp_path, good, shape):
    good["params"][0]["shape"] = shape
    assert load_error(tmp_path, good)


def test_param_entry_not_an_object(tmp_path, good):
    good["params"][1] = [1, 2]
    assert "params[1]: [1, 2] is not accepted; expected a mapping" in load_error(tmp_path, good)


def test_params_out_of_order(tmp_path, good):
    good["params"][0]["index"], good["params"][1]["index"] = 1, 0
    assert "params[0].index: 1 is out of order; expected 0 (DDP parameter order)" in load_error(tmp_path, good)


def test_no_params(tmp_path, good):
    good["params"] = []
    assert "params: [] is not accepted; expected at least one trainable parameter" in load_error(tmp_path, good)


# ---- grad_ready_order ------------------------------------------------------------------------


@pytest.mark.parametrize("order,where,bad,expected", [
    ([3, 2, 2, 0], 2, 2, "distinct parameter indices in [0, 4)"), ([3, 2, 1, 4], 3, 4, "distinct parameter indices in [0, 4)"),
    ([3, 2, 1, -1], 3, -1, "distinct parameter indices in [0, 4)"), ([3, 2, 1, 0.0], 3, 0.0, "a valid integer"),
    ([3, 2, 1, True], 3, True, "a valid integer"), ([3, 2, 1, "0"], 3, "'0'", "a valid integer")])
def test_grad_ready_order_bad_entries(tmp_path, good, order, where, bad, expected):
    good["grad_ready_order"] = order
    assert load_error(tmp_path, good) == f"grad_ready_order[{where}]: {bad} is not accepted; expected {expected}"


def test_grad_ready_order_missing_a_parameter_with_a_gradient(tmp_path, good):
    good["grad_ready_order"] = [3, 2, 1]
    msg = load_error(tmp_path, good)
    assert "grad_ready_order: parameter 0 (fc1.weight) has a gradient but is missing" in msg


def test_grad_ready_order_lists_a_parameter_without_gradient(tmp_path, good):
    good["params"][0]["has_grad"] = False
    assert "grad_ready_order: parameter 0 (fc1.weight) has has_grad=false but is listed" in load_error(tmp_path, good)


def test_grad_ready_order_missing_or_not_a_list(tmp_path, good):
    g2 = copy.deepcopy(good)
    del good["grad_ready_order"]
    assert "grad_ready_order: missing; expected this key (it is required)" in load_error(tmp_path, good)
    g2["grad_ready_order"] = "3,2,1,0"
    assert "grad_ready_order: '3,2,1,0' is not accepted; expected a valid list" in load_error(tmp_path, g2)


def test_unused_parameter_is_consistent(tmp_path, good):
    good["params"][0]["has_grad"] = False
    good["grad_ready_order"] = [3, 2, 1]
    for it in good["iterations"]:
        it["grad_ready_s"][0] = None
    t = load_trace(write(tmp_path, good))
    assert t.grad_ready_order == (3, 2, 1) and t.grad_ready_stat_s("median")[0] is None


# ---- iterations and times --------------------------------------------------------------------


@pytest.mark.parametrize("key", ["forward_s", "backward_s", "optimizer_s", "zero_grad_s"])
@pytest.mark.parametrize("value", [-0.001, math.nan, math.inf, True])
def test_bad_phase_times(tmp_path, good, key, value):
    good["iterations"][1][key] = value
    msg = load_error(tmp_path, good)
    assert f"iterations[1].{key}: {value!r} is not accepted; expected " in msg


@pytest.mark.parametrize("key", ["forward_s", "optimizer_s"])
@pytest.mark.parametrize("value", ["0.1", None, [0.1]])
def test_phase_times_of_wrong_type(tmp_path, good, key, value):
    good["iterations"][0][key] = value
    assert f"iterations[0].{key}: {value!r} is not accepted; expected a valid number" in load_error(tmp_path, good)


def test_nan_literal_in_file_is_rejected(tmp_path, good):
    text = json.dumps(good).replace('"backward_s": 0.02', '"backward_s": NaN', 1)
    assert "NaN" in text
    assert "iterations[0].backward_s: nan is not accepted; expected a finite number" in load_error(tmp_path, text)


@pytest.mark.parametrize("value,expected", [(-1.0, "a value >= 0"), (math.inf, "a finite number"), ("x", "a valid number"),
                                            (True, "a valid number"), (1e300, "a value <= 1000000")])
def test_bad_grad_ready_time(tmp_path, good, value, expected):
    good["iterations"][0]["grad_ready_s"][2] = value
    assert load_error(tmp_path, good) == f"iterations[0].grad_ready_s[2]: {value!r} is not accepted; expected {expected}"


def test_grad_ready_s_length(tmp_path, good):
    good["iterations"][1]["grad_ready_s"] = [0.1, 0.2]
    assert "iterations[1].grad_ready_s: has 2 entries; expected 4 (one per parameter)" in load_error(tmp_path, good)


def test_missing_iteration_fields(tmp_path, good):
    del good["iterations"][0]["optimizer_s"]
    assert "iterations[0].optimizer_s: missing; expected this key (it is required)" in load_error(tmp_path, good)


def test_zero_grad_defaults_to_zero(tmp_path, good):
    for it in good["iterations"]:
        del it["zero_grad_s"]
    assert load_trace(write(tmp_path, good)).iterations[0].zero_grad_s == 0.0


def test_no_iterations(tmp_path, good):
    good["iterations"] = []
    assert "iterations: [] is not accepted; expected at least one measured iteration" in load_error(tmp_path, good)


def test_negative_hook_overhead(tmp_path, good):
    good["hook_overhead_frac"] = -0.1
    assert "hook_overhead_frac: -0.1 is not accepted" in load_error(tmp_path, good)


# ---- top-level fields ------------------------------------------------------------------------


@pytest.mark.parametrize("key,value,typ", [("model", 3, "string"), ("params", {}, "list"), ("iterations", {}, "list"),
                                           ("environment", [], "mapping"), ("buffers", {}, "list")])
def test_wrong_top_level_types(tmp_path, good, key, value, typ):
    good[key] = value
    expected = "a mapping" if typ == "mapping" else f"a valid {typ}"
    assert f"{key}: {value!r} is not accepted; expected {expected}" in load_error(tmp_path, good)


@pytest.mark.parametrize("key,typ", [("model", "str"), ("params", "list"), ("iterations", "list"),
                                     ("grad_ready_order", "list")])
def test_missing_top_level_fields(tmp_path, good, key, typ):
    del good[key]
    assert f"{key}: missing; expected this key (it is required)" in load_error(tmp_path, good)


def test_synthetic_must_be_an_object(tmp_path, good):
    good["synthetic"] = "retimed"
    assert "synthetic: 'retimed' is not accepted; expected a mapping" in load_error(tmp_path, good)


def test_bad_buffer(tmp_path, good):
    good["buffers"] = [{"name": "bn.running_mean", "dtype": "float32", "size_bytes": -1}]
    assert "buffers[0].size_bytes: -1 is not accepted; expected a value >= 0" in load_error(tmp_path, good)


def test_a_validated_dict_has_no_file_prefix(good):
    good["version"] = 2
    with pytest.raises(InputError, match=r"^trace: version: 2 is not accepted; expected 1$"):
        validate(Trace, good, "trace")


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


def test_a_traces_statistics_are_computed_once_and_are_no_field(monkeypatch):
    # every simulation of a trace reads its phases and ready times: computed at the first read,
    # the same values afterwards, and outside the fields (equality and the resume key)
    from pathlib import Path

    from ddpsim.pipeline.fingerprint import digest
    from ddpsim.trace import records

    trace = load_trace(Path(__file__).resolve().parents[1] / "traces" / "gpt2-124m.h100.json")
    key = digest(trace)
    made = []
    real = records.PhaseStats.of
    monkeypatch.setattr(records.PhaseStats, "of", classmethod(lambda cls, xs: made.append(1) or real(xs)))
    first = trace.phase("backward")
    assert trace.phase("backward") is first and len(made) == 1
    assert first == real([it.backward_s for it in trace.iterations])
    ready = trace.grad_ready_stat_s("median")
    assert trace.grad_ready_stat_s("median") is ready
    assert digest(trace) == key and trace == copy.copy(trace)
