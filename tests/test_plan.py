"""``ddpsim plan``: output worked out by hand on the tiny trace, and every user error -> exit 2.

The tiny trace (tests/conftest.py): fp32 fc1.weight 8192 B, fc1.bias 256 B, fc2.weight
4096 B, fc2.bias 64 B (12,608 B); gradients ready in order 3, 2, 1, 0.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.plan.planner import DDPOptions, plan_ddp
from ddpsim.trace.records import make_trace, save_trace


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def fail_cli(capsys, *argv: str) -> str:
    """Run a command that must fail with exit status 2 and a one-line message; return it."""
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert out == ""
    assert err.startswith("ddpsim: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# ---- table / csv / json ---------------------------------------------------------------------


def test_table_default_options(capsys, tiny_trace_file):
    rc, out, err = run_cli(capsys, "plan", str(tiny_trace_file))
    assert rc == 0 and err == ""
    # first rebuilt cap 1 MiB > 12608 B: one bucket in ready order; construction: one bucket too
    assert out == (
        f"trace: {tiny_trace_file} (model tiny, 4 parameters, 12608 B = 12.31 KiB)\n"
        "options: bucket_cap_mb=not given (25 MiB), no other options, semantics=modern\n"
        "\n"
        "steady-state buckets (from iteration 2), in launch order:\n"
        "bucket  params  size_bytes       size  dtype    first .. last parameter  from_iter\n"
        "     0       4       12608  12.31 KiB  float32  fc2.bias .. fc1.weight           2\n"
        "\n"
        "first iteration layout (iteration 1): 1 bucket: 12608 B (12.31 KiB)\n"
        "rebuild: at the start of iteration 2, in gradient-ready order\n")


def test_table_small_cap_splits_in_ready_order(capsys, tiny_trace_file):
    # cap 0.004 MiB = int(0.004 * 1048576) = 4194 B, explicit -> first cap 4194 B too.
    # ready order 3 (64 B), 2 (4096 B): 4160 < 4194; + 1 (256 B) = 4416 >= 4194 closes [3, 2, 1];
    # [0] (8192 B) is left over.
    rc, out, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--options", '{"bucket_cap_mb": 0.004}')
    assert rc == 0
    lines = out.splitlines()
    assert lines[1] == "options: bucket_cap_mb=0.004 MiB, no other options, semantics=modern"
    assert lines[4:7] == [
        "bucket  params  size_bytes       size  dtype    first .. last parameter  from_iter",
        "     0       3        4416  4.312 KiB  float32  fc2.bias .. fc1.bias             2",
        "     1       1        8192      8 KiB  float32  fc1.weight                       2",
    ]


def test_table_find_unused_is_never_rebuilt(capsys, tiny_trace_file):
    # limits [4194] in parameter order: [0] 8192 closes; [1, 2] 4352 closes; [3] left over;
    # sorted by lowest index then reversed: [3], [1, 2], [0]
    rc, out, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--options",
                         '{"bucket_cap_mb": 0.004, "find_unused_parameters": true}')
    assert rc == 0
    lines = out.splitlines()
    assert lines[3] == "buckets (from iteration 1), in launch order:"
    assert lines[4:8] == [
        "bucket  params  size_bytes      size  dtype    first .. last parameter  from_iter",
        "     0       1          64      64 B  float32  fc2.bias                         1",
        "     1       2        4352  4.25 KiB  float32  fc1.bias .. fc2.weight           1",
        "     2       1        8192     8 KiB  float32  fc1.weight                       1",
    ]
    assert lines[-1].startswith("rebuild: never (find_unused_parameters without static_graph)")


def test_static_graph_rebuilds_from_iteration_3(capsys, tiny_trace_file):
    rc, out, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--options", '{"static_graph": true, "bucket_cap_mb": 0.004}')
    assert rc == 0
    assert "steady-state buckets (from iteration 3), in launch order:" in out
    assert "first iteration layout (iteration 1..2): 1 bucket: 12608 B (12.31 KiB)\n" in out
    assert out.endswith("rebuild: at the start of iteration 3, in gradient-ready order\n")


def test_csv_lists_both_layouts(capsys, tiny_trace_file):
    rc, out, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--options", '{"bucket_cap_mb": 0.004}', "--format", "csv")
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["layout"], r["index"], r["param_indices"], r["size_bytes"], r["from_iteration"]) for r in rows] == [
        ("steady", "0", "3 2 1", "4416", "2"),
        ("steady", "1", "0", "8192", "2"),
        ("first_iteration", "0", "0 1 2 3", "12608", "1"),
    ]
    assert rows[0]["first_param"] == "fc2.bias" and rows[0]["last_param"] == "fc1.bias"
    assert rows[0]["dtype"] == "float32" and rows[0]["num_params"] == "3"


def test_json_is_exactly_plan_to_dict(capsys, tiny_trace_file, tiny_trace):
    rc, out, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--options", '{"bucket_cap_mb": 0.004}', "--format", "json")
    assert rc == 0
    data = json.loads(out)
    assert data == plan_ddp(tiny_trace, DDPOptions(bucket_cap_mb=0.004)).to_dict()
    assert [b["param_indices"] for b in data["buckets"]] == [[3, 2, 1], [0]]
    assert [b["size_bytes"] for b in data["buckets"]] == [4416, 8192]
    assert [b["size_limit_bytes"] for b in data["buckets"]] == [4194, 4194]
    assert data["first_iteration"]["buckets"] == [
        {"index": 0, "param_indices": [0, 1, 2, 3], "size_bytes": 12608, "dtype": "float32",
         "size_limit_bytes": 9223372036854775807}]
    assert data["rebuild_iteration"] == 2
    assert data["options"] == {"bucket_cap_mb": 0.004, "find_unused_parameters": False, "static_graph": False,
                               "gradient_as_bucket_view": False, "semantics": "modern"}


def test_integral_cap_is_an_int_in_json(capsys, tiny_trace_file):
    rc, out, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--format", "json", "--options",
                         '{"bucket_cap_mb": 25, "gradient_as_bucket_view": true, "semantics": "legacy"}')
    assert rc == 0
    o = json.loads(out)["options"]
    assert o["bucket_cap_mb"] == 25 and isinstance(o["bucket_cap_mb"], int)
    assert o["gradient_as_bucket_view"] is True and o["semantics"] == "legacy"


def test_out_writes_the_json_and_output_is_deterministic(capsys, tiny_trace_file, tmp_path):
    target = tmp_path / "sub" / "p.json"
    rc, out, err = run_cli(capsys, "plan", str(tiny_trace_file), "--format", "json", "--out", str(target))
    assert rc == 0 and err == f"ddpsim: wrote {target}\n"
    assert target.read_text() == out
    rc, out2, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--format", "json", "--out", str(target))
    assert out2 == out and target.read_text() == out
    assert [p.name for p in target.parent.iterdir()] == ["p.json"]  # no temp file left behind
    # table + --out: the file is still the JSON
    rc, table, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--out", str(target))
    assert table.startswith("trace: ") and target.read_text() == out


def test_plan_round_trip_through_plan_option(capsys, tiny_trace_file, tmp_path):
    saved = tmp_path / "p.json"
    run_cli(capsys, "plan", str(tiny_trace_file), "--options", '{"bucket_cap_mb": 0.004}', "--out", str(saved))
    rc, out, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--plan", str(saved), "--format", "json")
    assert rc == 0
    data = json.loads(out)
    assert [b["param_indices"] for b in data["buckets"]] == [[3, 2, 1], [0]]
    assert data["first_iteration"]["buckets"] == data["buckets"] and data["rebuild_iteration"] is None
    assert data["source"] == "ddp"


def test_explicit_plan_by_names_and_indices(capsys, tiny_trace_file, tmp_path):
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({"buckets": [["fc2.bias", "fc2.weight"], [1, 0]]}))
    rc, out, _ = run_cli(capsys, "plan", str(tiny_trace_file), "--plan", str(f))
    assert rc == 0
    lines = out.splitlines()
    assert lines[1] == f"plan: explicit, from {f} (validated; applies from iteration 1, never rebuilt)"
    assert lines[3] == "buckets (from iteration 1), in launch order:"
    assert [ln.split()[:3] for ln in lines[5:7]] == [["0", "2", "4160"], ["1", "2", "8448"]]
    assert "fc2.bias .. fc2.weight" in lines[5] and "fc1.bias .. fc1.weight" in lines[6]
    assert len(lines) == 8 and lines[7] == ""


# ---- user errors: one line, exit 2 ----------------------------------------------------------


@pytest.mark.parametrize("cap,msg", [
    ('"abc"', r"--options: bucket_cap_mb: 'abc' is not accepted; expected a number > 0 or null \(MiB"),
    ("0", r"--options: bucket_cap_mb: 0 is not accepted; expected a number > 0 or null \(MiB"),
    ("-1", r"--options: bucket_cap_mb: -1 is not accepted"),
    ("NaN", r"--options: bucket_cap_mb: nan is not accepted"),
    ("1e999", r"--options: bucket_cap_mb: inf is not accepted"),
    ("1" + "0" * 400, r"--options: bucket_cap_mb: 1000+.* is not accepted; expected a number > 0 or null \(MiB"),
])
def test_bad_cap(capsys, tiny_trace_file, cap, msg):
    import re

    err = fail_cli(capsys, "plan", str(tiny_trace_file), "--options", f'{{"bucket_cap_mb": {cap}}}')
    assert re.search(msg, err), err


def test_missing_trace(capsys, tmp_path):
    err = fail_cli(capsys, "plan", str(tmp_path / "nope.json"))
    assert "does not exist or is not a file" in err and "nope.json" in err


def test_trace_not_json(capsys, tmp_path):
    f = tmp_path / "bad.json"
    f.write_text("{not json")
    err = fail_cli(capsys, "plan", str(f))
    assert "not valid JSON" in err and "bad.json" in err


def test_trace_invalid_field(capsys, tmp_path, tiny_trace):
    d = tiny_trace.to_dict()
    d["params"][2]["size_bytes"] = -4
    f = tmp_path / "neg.json"
    f.write_text(json.dumps(d))
    err = fail_cli(capsys, "plan", str(f))
    assert "params[2].size_bytes: -4" in err


def test_bad_format_and_semantics(capsys, tiny_trace_file):
    assert "--format: 'xml' is not accepted; expected one of table, csv, json" in \
        fail_cli(capsys, "plan", str(tiny_trace_file), "--format", "xml")
    assert "--options: semantics: 'old' is not accepted; expected 'modern' or 'legacy'" in \
        fail_cli(capsys, "plan", str(tiny_trace_file), "--options", '{"semantics": "old"}')
    assert "--options: semantic: unknown key; expected one of bucket_cap_mb" in \
        fail_cli(capsys, "plan", str(tiny_trace_file), "--options", '{"semantic": "legacy"}')


def test_unused_parameter_needs_find_unused(capsys, tmp_path):
    t = make_trace(model="u", params=[("a.weight", (4, 4), "float32"), ("b.weight", (4, 4), "float32")],
                   ready_s=[0.1, None], forward_s=0.1, backward_s=0.2, optimizer_s=0.0)
    f = save_trace(t, tmp_path / "u.json")
    err = fail_cli(capsys, "plan", str(f))
    assert "find_unused_parameters: False is not accepted" in err and "b.weight" in err
    rc, out, _ = run_cli(capsys, "plan", str(f), "--options", '{"find_unused_parameters": true}')
    assert rc == 0 and "rebuild: never" in out
    rc, out, _ = run_cli(capsys, "plan", str(f), "--options", '{"static_graph": true}')
    assert rc == 0 and "rebuild: at the start of iteration 3" in out


@pytest.mark.parametrize("content,msg", [
    (None, "does not exist or is not a file"),
    ("[[0, 1], [2]", "not valid JSON"),
    ('{"nothing": 1}', "buckets: missing; expected this key"),
    ('{"buckets": [[0, 1], [2]]}', "plan.buckets: parameters [3] of trace 'tiny' are in no bucket; expected every parameter exactly once"),
    ('{"buckets": [[0, 1], [1, 2, 3]]}', "parameter 1 (fc1.bias) is already in bucket 0"),
    ('{"buckets": [[0, 1, 2, 3, 4]]}', "4 is not accepted; expected a parameter index in [0, 4)"),
    ('{"buckets": [["fc9.weight", 0, 1, 2, 3]]}', "parameter name 'fc9.weight' is not in the trace"),
    ('{"buckets": [[0, 1, 2, 3], []]}', "plan.buckets[1]: [] is not accepted"),
    ('{"format": "other", "buckets": [[0, 1, 2, 3]]}', "format: 'other' is not accepted; expected 'ddpsim-plan'"),
])
def test_bad_plan_file(capsys, tiny_trace_file, tmp_path, content, msg):
    f = tmp_path / "plan.json"
    if content is not None:
        f.write_text(content)
    err = fail_cli(capsys, "plan", str(tiny_trace_file), "--plan", str(f))
    assert msg in err and str(f) in err, err


def test_mixed_dtype_plan_is_rejected(capsys, tmp_path):
    t = make_trace(model="m", params=[("a", (4,), "float32"), ("b", (4,), "float16")],
                   ready_s=[0.2, 0.1], forward_s=0.1, backward_s=0.2, optimizer_s=0.0)
    tf = save_trace(t, tmp_path / "m.json")
    pf = tmp_path / "p.json"
    pf.write_text('{"buckets": [[1, 0]]}')
    err = fail_cli(capsys, "plan", str(tf), "--plan", str(pf))
    assert "plan.buckets[0]: mixes dtypes ['float16', 'float32']; expected one dtype per bucket" in err


def test_subprocess_exit_2_without_traceback(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"format": "ddpsim-trace", "version": 99}')
    proc = subprocess.run([sys.executable, "-m", "ddpsim", "plan", str(f)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"ddpsim: error: trace '{f}': version: 99 is not accepted; expected 1\n"
