"""``bucket_cap_mb_list``: DDP's layouts worked out by hand, lists derived from layouts, and
every bad input -> one line, exit 2. Real DDP is the oracle in tests/test_ddp_parity.py.

The tiny trace (tests/conftest.py): fp32 params 0: 8192 B, 1: 256 B, 2: 4096 B, 3: 64 B, ready
in order 3, 2, 1, 0. Limits below are whole bytes: 4096 B = 0.00390625 MiB, 8192 B = 0.0078125.
"""

from __future__ import annotations

import json
import random

import pytest
import yaml

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.plan.planner import DDPOptions, cap_list_for_buckets, explicit_plan, plan_ddp
from ddpsim.pipeline.scenario import load_scenario
from ddpsim.trace.records import make_trace, save_trace
from ddpsim.units import MIB

K4, K8 = 4096 / MIB, 8192 / MIB


def layout(buckets):
    return [(list(b.param_indices), b.size_bytes) for b in buckets]


# ---- DDP's layouts by hand --------------------------------------------------------------------


def test_list_shapes_construction_and_rebuild(tiny_trace):
    """Construction walks params 0..3 with [4096, 8192]: 8192 >= 4096 closes [0]; 256+4096+64 =
    4416 < 8192 is left over [1 2 3]; reversed: [1 2 3], [0]. Rebuild walks 3, 2, 1, 0: 64+4096 =
    4160 >= 4096 closes [3 2]; 256+8192 = 8448 >= 8192 closes [1 0]."""
    plan = plan_ddp(tiny_trace, DDPOptions(bucket_cap_mb_list=[K4, K8]))
    assert layout(plan.initial) == [([1, 2, 3], 4416), ([0], 8192)]
    assert [b.size_limit_bytes for b in plan.initial] == [8192, 4096]
    assert layout(plan.steady) == [([3, 2], 4160), ([1, 0], 8448)]
    assert [b.size_limit_bytes for b in plan.steady] == [4096, 8192]
    assert plan.rebuild_iteration == 2


def test_list_wins_over_bucket_cap_mb_and_caps_construction_with_find_unused_or_static_graph(tiny_trace):
    steady = [([3, 2], 4160), ([1, 0], 8448)]
    initial = [([1, 2, 3], 4416), ([0], 8192)]
    both = plan_ddp(tiny_trace, DDPOptions(bucket_cap_mb=25, bucket_cap_mb_list=[K4, K8]))
    assert (layout(both.initial), layout(both.steady)) == (initial, steady)
    unused = plan_ddp(tiny_trace, DDPOptions(find_unused_parameters=True, bucket_cap_mb_list=[K4, K8]))
    assert layout(unused.initial) == layout(unused.steady) == initial and unused.rebuild_iteration is None
    static = plan_ddp(tiny_trace, DDPOptions(static_graph=True, bucket_cap_mb_list=[K4, K8]))
    assert (layout(static.initial), layout(static.steady), static.rebuild_iteration) == (initial, steady, 3)


def test_last_limit_is_reused(tiny_trace):
    """[4096] only: construction [0] | [1 2] (4352) | [3] left over, reversed; rebuild [3 2] | [1 0]."""
    plan = plan_ddp(tiny_trace, DDPOptions(bucket_cap_mb_list=[K4]))
    assert layout(plan.initial) == [([3], 64), ([1, 2], 4352), ([0], 8192)]
    assert layout(plan.steady) == [([3, 2], 4160), ([1, 0], 8448)]


def mixed_trace():
    """a fp32 4000 B, b bf16 2000 B, c fp32 4000 B, d bf16 6000 B; ready d, c, b, a."""
    return make_trace(model="mixed", params=[("a", (1000,), "float32"), ("b", (1000,), "bfloat16"),
                                             ("c", (1000,), "float32"), ("d", (3000,), "bfloat16")],
                      ready_s=[0.004, 0.003, 0.002, 0.001], forward_s=0.01, backward_s=0.01, optimizer_s=0.001)


def test_each_dtype_walks_the_list_on_its_own():
    """Limits [5000, 100000] B. Rebuild: d 6000 >= 5000 closes [d] (bf16 moves to 100000); c 4000
    < 5000; b 2000 < 100000; a: 8000 >= 5000 closes [c a]; [b] is left over. Construction (0..3):
    c closes [a c] at 8000, d closes [b d] at 8000; reversed."""
    plan = plan_ddp(mixed_trace(), DDPOptions(bucket_cap_mb_list=[5000 / MIB, 100000 / MIB]))
    assert layout(plan.steady) == [([3], 6000), ([2, 0], 8000), ([1], 2000)]
    assert layout(plan.initial) == [([1, 3], 8000), ([0, 2], 8000)]


def test_list_options_in_plan_json_and_label(tiny_trace):
    o = DDPOptions(bucket_cap_mb_list=[1, 2.5, 0.0400390625])
    assert o.bucket_cap_mb_list == (1, 2.5, 0.0400390625)
    assert o.label() == "list=1+2.5+0.0400390625"
    assert plan_ddp(tiny_trace, o).to_dict()["options"]["bucket_cap_mb_list"] == [1, 2.5, 0.0400390625]
    assert "bucket_cap_mb_list" not in plan_ddp(tiny_trace, DDPOptions()).to_dict()["options"]
    assert o.bucket_bytes_cap == o.first_bucket_bytes_cap == int(2.5 * MIB)


@pytest.mark.parametrize("bad", [[], [0], [-1], [float("nan")], [float("inf")], [1, None, 2], "1,2", [True]])
def test_bad_lists_are_rejected(bad):
    with pytest.raises(InputError, match=r"^bucket_cap_mb_list: .* is not accepted; expected a non-empty list of numbers of MiB > 0"):
        DDPOptions(bucket_cap_mb_list=bad)


def test_legacy_semantics_has_no_list():
    with pytest.raises(InputError, match=r"bucket_cap_mb_list: \[1\] is not accepted with semantics 'legacy'"):
        DDPOptions(bucket_cap_mb_list=[1], semantics="legacy")


# ---- a list that reproduces a layout ----------------------------------------------------------


@pytest.mark.parametrize("target,expected", [
    # [3 2] = 4160 B, last 4096: limit in (64, 4160]: 0.003 MiB = 3145 B. [1 0] = 8448 B, the last
    # bucket: a limit >= its size: 0.009 MiB = 9437 B.
    ([[3, 2], [1, 0]], (0.003, 0.009)),
    # [3] = 64 B: (0, 64]: 6e-05 MiB = 62 B; [2] = 4096 B: (0, 4096]: 0.003; [1 0] as above
    ([[3], [2], [1, 0]], (6e-05, 0.003, 0.009)),
    ([[3, 2, 1, 0]], (0.02,)),     # 12608 B: 0.02 MiB = 20971 B >= it
])
def test_cap_list_for_buckets_by_hand(tiny_trace, target, expected):
    caps, reason = cap_list_for_buckets(tiny_trace, explicit_plan(tiny_trace, target).steady)
    assert (caps, reason) == (expected, "")
    assert [list(b.param_indices) for b in plan_ddp(tiny_trace, DDPOptions(bucket_cap_mb_list=caps)).steady] == target


def test_cap_list_for_mixed_dtypes_closes_last_buckets_when_leftovers_would_reorder():
    """All single buckets [d] [c] [b] [a]: limit 0 must be <= 4000 (c) and limit 1 any. Left over,
    [a] and [b] would come last in the other order, so limit 1 closes both: (0, 2000]: 0.001."""
    t = mixed_trace()
    caps, reason = cap_list_for_buckets(t, explicit_plan(t, [[3], [2], [1], [0]]).steady)
    assert (caps, reason) == ((0.003, 0.001), "")


def test_cap_list_for_buckets_says_why_not():
    t = mixed_trace()
    # bf16 [d b] needs limit 0 > 6000 - 0 ... > 8000 - 2000 = 6000; fp32 [c] needs <= 4000
    caps, reason = cap_list_for_buckets(t, explicit_plan(t, [[3, 1], [2], [0]]).steady)
    assert caps is None and "do not meet" in reason
    # a fp32 bucket against the ready order (c is ready before a)
    caps, reason = cap_list_for_buckets(t, explicit_plan(t, [[3], [0, 2], [1]]).steady)
    assert caps is None and "not a run of consecutive float32 gradients" in reason


def random_trace(rng: random.Random):
    n = rng.randint(1, 14)
    dtypes = rng.choice([["float32"], ["float32", "bfloat16"], ["float32", "bfloat16", "float16", "float64"]])
    params = [(f"p{i}", (rng.choice([rng.randint(1, 300), rng.randint(300, 40000)]),), rng.choice(dtypes)) for i in range(n)]
    ready = [rng.random() for _ in range(n)]
    return make_trace(model="r", params=params, ready_s=ready, forward_s=0.01, backward_s=0.01, optimizer_s=0.001)


def test_derived_lists_rebuild_the_layout_by_torchs_own_assignment():
    """Layouts DDP builds (random caps and lists over random mixed-dtype traces): the derived
    list, given to torch's own ``_compute_bucket_assignment_by_size`` in ready order, gives
    the same buckets; a list is found for every single-dtype trace."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    from ddpsim.units import mb_to_bytes

    rng = random.Random(7)
    found = single = 0
    for _ in range(300):
        t = random_trace(rng)
        opts = rng.choice([DDPOptions(bucket_cap_mb=rng.choice([0.01, 0.05, 0.2])),
                           DDPOptions(bucket_cap_mb_list=[round(rng.uniform(0.001, 0.2), 3) for _ in range(rng.randint(1, 4))])])
        target = plan_ddp(t, opts).steady
        caps, reason = cap_list_for_buckets(t, target)
        one_dtype = len({p.dtype for p in t.params}) == 1
        single += one_dtype
        if caps is None:
            assert not one_dtype, reason
            continue
        found += 1
        order = list(t.grad_ready_order)
        tensors = [torch.empty(t.params[i].size_bytes // {"float32": 4, "float64": 8}.get(t.params[i].dtype, 2),
                               dtype=getattr(torch, t.params[i].dtype)) for i in order]
        groups, _ = dist._compute_bucket_assignment_by_size(tensors, [mb_to_bytes(c) for c in caps], [], order)
        assert groups == [list(b.param_indices) for b in target]
    assert found > 200 and single > 50


# ---- CLI and scenario ---------------------------------------------------------------------------


def fail_cli(capsys, *argv: str) -> str:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (rc, out, err)
    return err


BAD = ["[]", "[0]", "[-1]", "[1, null]", '"1,2"']


@pytest.mark.parametrize("value", BAD)
def test_bad_option_values_exit_2(capsys, tiny_trace_file, value):
    err = fail_cli(capsys, "plan", str(tiny_trace_file), "--options", f'{{"bucket_cap_mb_list": {value}}}')
    assert err.startswith("ddpsim: error: --options: bucket_cap_mb_list: ") and "is not accepted" in err


@pytest.mark.parametrize("value", ["[]", "[0]", "[-1]", "[.nan]", "[.inf]", "[1, null]"])
@pytest.mark.parametrize("command", ["simulate", "sweep"])
def test_bad_cap_list_keys_exit_2(capsys, tiny_trace_file, command, value):
    key = {"simulate": "ddp.bucket_cap_mb_list", "sweep": "sweep.bucket_cap_mb_list"}[command]
    value = value if command == "simulate" else f"[{value}]"
    err = fail_cli(capsys, command, "--trace", str(tiny_trace_file), "--topology", "cpu-gloo", "--set", "world_size=2",
                   "--set", f"{key}={value}")
    assert err.startswith(f"ddpsim: error: --set {key}")


def test_plan_cli_list_and_cap_says_the_list_wins(capsys, tiny_trace_file):
    rc = main(["plan", str(tiny_trace_file), "--options",
               '{"bucket_cap_mb": 5, "bucket_cap_mb_list": [0.00390625, 0.0078125]}', "--format", "json"])
    out, err = capsys.readouterr()
    assert rc == 0
    assert err == ("ddpsim plan: bucket_cap_mb 5 is ignored: bucket_cap_mb_list is given "
                   "(torch ignores bucket_cap_mb when bucket_cap_mb_list is given)\n")
    d = json.loads(out)
    assert [b["param_indices"] for b in d["buckets"]] == [[3, 2], [1, 0]]
    assert [b["param_indices"] for b in d["first_iteration"]["buckets"]] == [[1, 2, 3], [0]]
    assert d["options"]["bucket_cap_mb_list"] == [0.00390625, 0.0078125]
    rc = main(["plan", str(tiny_trace_file), "--format", "json"])
    plain = json.loads(capsys.readouterr()[0])
    assert list(plain["options"]) == ["bucket_cap_mb", "find_unused_parameters", "static_graph",
                                      "gradient_as_bucket_view", "semantics"]


def write_scenario(tmp_path, tiny_trace_file, **over):
    data = {"name": "t", "trace": str(tiny_trace_file), "cluster": {"topology": "cpu-gloo"}, "world_size": 2,
            "sweep": {"bucket_cap_mb": [1]}}
    data.update(over)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_scenario_list_points(tmp_path, tiny_trace_file):
    s = load_scenario(write_scenario(tmp_path, tiny_trace_file, sweep={"bucket_cap_mb": [1], "bucket_cap_mb_list": [[0.003, 0.009], [2]]},
                                     timelines=[None, [2], "list=0.003+0.009"]))
    pts = s.points()
    assert [p.point_id for p in pts] == ["cap=default", "cap=1", "list=0.003+0.009", "list=2"]
    assert s.ddp_options(pts[2]).bucket_cap_mb_list == (0.003, 0.009) and s.ddp_options(pts[2]).bucket_cap_mb is None
    assert pts[2].with_value("cap", (None, None)) == pts[0] and s.base_point() == pts[0]
    assert [p.point_id for p in s.timeline_points()] == ["cap=default", "list=2", "list=0.003+0.009"]
    own = load_scenario(write_scenario(tmp_path, tiny_trace_file, ddp={"bucket_cap_mb_list": [0.5, 4]}))
    assert [p.point_id for p in own.points()] == ["cap=default", "cap=1", "list=0.5+4"]


@pytest.mark.parametrize("value", ["", 0, [], [0], [-1], [float("nan")], [float("inf")], [1, None, 2], ["a"]])
@pytest.mark.parametrize("where", ["ddp", "sweep"])
def test_bad_yaml_lists_name_the_key(tmp_path, tiny_trace_file, where, value):
    if where == "ddp":
        p, key = write_scenario(tmp_path, tiny_trace_file, ddp={"bucket_cap_mb_list": value}), r"ddp\.bucket_cap_mb_list"
    else:
        p = write_scenario(tmp_path, tiny_trace_file, sweep={"bucket_cap_mb_list": [[1], value]})
        key = r"sweep\.bucket_cap_mb_list\[1\]"
    with pytest.raises(InputError, match=rf"s\.yaml: {key}: .* is not accepted; expected a non-empty list of numbers of MiB > 0"):
        load_scenario(p)
    rc = main(["run", str(p), "--out-dir", str(tmp_path / "r")])
    assert rc == 2


def test_sweep_cli_list_points(capsys, tiny_trace_file):
    rc = main(["sweep", "--trace", str(tiny_trace_file), "--set", "sweep.bucket_cap_mb=[null]", "--set",
               "sweep.bucket_cap_mb_list=[[0.003, 0.009], [2]]", "--set", "simulation.iterations=3", "--jobs", "1",
               "--format", "csv"])
    out = capsys.readouterr()[0]
    assert rc == 0
    rows = out.splitlines()
    assert rows[0].startswith("point,bucket_cap_mb,bucket_cap_mb_list,")
    assert [r.split(",")[0] for r in rows[1:]] == ["cap=default", "list=0.003+0.009", "list=2"]
    assert [r.split(",")[2] for r in rows[1:]] == ["", "0.003+0.009", "2"]


def test_inexpressible_plan_gets_an_approximate_list_and_the_reason():
    """[d b] [c] [a] (mixed_trace): no list (limit 0 > 6000 for bf16, <= 4000 for fp32). The
    starting point takes each bucket's own range: [d b] 8000 B, last 2000: (6000, 8000] -> 0.007
    MiB = 7340 B; [c], [a] 4000 B: 0.003 MiB = 3145 B. Under it DDP walks d 6000, c 4000, b: 8000
    >= 7340 closes [d b], a: 8000 >= 7340 closes [c a]."""
    from ddpsim.pipeline.recommend import cap_list_candidates

    t = mixed_trace()
    (cand,) = cap_list_candidates(t, [explicit_plan(t, [[3, 1], [2], [0]])])
    assert not cand.exact and "do not meet" in cand.reason
    assert cand.caps == (0.007, 0.003, 0.003)
    assert cand.paste == "DDP(model, bucket_cap_mb_list=[0.007, 0.003, 0.003])"
    assert layout(plan_ddp(t, DDPOptions(bucket_cap_mb_list=cand.caps)).steady) == [([3, 1], 8000), ([2, 0], 8000)]


def test_validate_runs_list_points(tmp_path, tiny_trace_file):
    """``validate --caps none,list=0.003+0.009,list=2``: the scenario's list point, a list the
    sweep lacks (the base point with it), the flags executor ddp / round get, and lists read
    back from validation.json rows (reanalyze)."""
    from ddpsim.units import parse_caps
    from ddpsim.validation.measure import _cap_arg, _cap_flags, _point_cap, select_points

    s = load_scenario(write_scenario(tmp_path, tiny_trace_file, sweep={"bucket_cap_mb": [1], "bucket_cap_mb_list": [[0.003, 0.009]]}))
    caps = parse_caps("none,list=0.003+0.009,list=2")
    assert caps == [None, (0.003, 0.009), (2,)]
    pts = select_points(s, caps)
    assert [p.point_id for p in pts] == ["cap=default", "list=0.003+0.009", "list=2"]
    assert [_cap_flags(p) for p in pts] == [["--bucket-cap-mb", "none"], ["--bucket-cap-mb-list", "0.003,0.009"],
                                            ["--bucket-cap-mb-list", "2"]]
    assert [_cap_arg(_point_cap(p)) for p in pts] == ["none", "list=0.003+0.009", "list=2"]
    assert [p.point_id for p in select_points(s, [None, [0.003, 0.009]])] == ["cap=default", "list=0.003+0.009"]


@pytest.mark.parametrize("item", ["list=", "list=1++2", "list=0", "list=nan"])
def test_bad_list_point_in_caps(capsys, item):
    assert main(["validate", "default", "--caps", f"1,{item}"]) == 2
    err = capsys.readouterr().err
    assert err == (f"ddpsim: error: --caps: {item!r} is not accepted; expected a comma list of "
                   "MiB > 0, 'none', or list=X+Y+... (a bucket_cap_mb_list)\n")
