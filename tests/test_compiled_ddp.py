"""Compiled DDP: ddpsim's DDPOptimizer split equals DDPOptimizer's own, exactly; the grouped
ready times and the python reducer's buckets by hand; the ``compile`` block's one-line refusals.

The oracle is torch itself: ``tests/compiled_ddp_worker.py`` (one process, a 1-rank gloo group)
compiles ``DDP(model)`` with ``backend="aot_eager"`` and ``optimize_ddp=True``, reads back
``DDPOptimizer.buckets`` after a real step, splits the same Dynamo graph again with
``DDPOptimizer(cap).compile_fn`` at each other cap, and fuses gradient sizes with inductor's
``_bucket_size_fusion``. ResNet-50 (slower to trace) is in ``studies/compiled_split.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpsim.errors import InputError
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.plan.autograd_order import graph_hook_order, run_order
from ddpsim.plan.compiled import (CompileOptions, compiled_point, compiled_ready_trace, compiled_subgraphs,
                                  ddp_optimizer_buckets, engine_hook_order, python_reducer_plan)
from ddpsim.plan.planner import DDPOptions, plan_ddp
from ddpsim.schema import to_plain, validate
from ddpsim.trace.compiled_graph import CompiledGraph, GraphWalk
from ddpsim.trace.records import Trace, load_trace, make_trace, save_trace
from ddpsim.units import MIB, mb_to_bytes

ROOT = Path(__file__).resolve().parents[1]
KIB = 1024
#: gradient sizes (ready order) fused by inductor in the worker and by ddpsim here
FUSE_SIZES = [4_000_000, 300_000, 800_000, 2_000_000, 500_000, 3_000_000, 64]
#: caps (MiB) at which the worker reads back real compiled DDP's rebuilt buckets (BERT: at 1 MiB the
#: split graph calls its q, k, v subgraphs out of forward order; at 2.5 MiB a subgraph returns a
#: view that aot_autograd regenerates outside it)
REBUILD_CAPS = "1,2.5"


@pytest.fixture(scope="module")
def torch_side():
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "compiled_ddp_worker.py"), "mlp,gpt2-124m,bert-base",
                          json.dumps(FUSE_SIZES), "--rebuild", REBUILD_CAPS], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("model", ["mlp", "gpt2-124m", "bert-base"])
def test_split_equals_ddp_optimizers_own_buckets(torch_side, model):
    case = torch_side["models"][model]
    graph = validate(CompiledGraph, case["graph"], "trace: compiled_graph").check(case["num_params"])
    assert len(case["buckets"]) == 5
    for cap, real in case["buckets"].items():
        cap_bytes = mb_to_bytes(25 if cap == "null" else float(cap))
        mine = [[{"params": list(s.param_indices), "size": s.size_bytes} for s in ddp_optimizer_buckets(g, cap_bytes)]
                for g in graph.graphs]
        assert mine == real, f"{model} at cap {cap}"
    assert len(case["buckets"]["1"][0]) > len(case["buckets"]["25"][0]) > 1  # the caps do cut differently


def test_gpt2s_tied_embedding_counted_twice_as_ddp_optimizer_does(torch_side):
    real = torch_side["models"]["gpt2-124m"]["buckets"]["5"][0]
    wte = 0  # transformer.wte.weight, tied to lm_head
    assert [k for k, b in enumerate(real) if wte in b["params"]] == [0, len(real) - 1]


@pytest.mark.parametrize("model", ["mlp", "gpt2-124m", "bert-base"])
def test_hooks_and_rebuilt_buckets_equal_real_compiled_ddps(torch_side, model):
    """The engine's hook order, and DDP's rebuild over it, equal real compiled DDP's
    (``rebuilt_per_bucket_param_indices``), parameter for parameter."""
    case = torch_side["models"][model]
    graph = validate(CompiledGraph, case["graph"], "trace: compiled_graph").check(case["num_params"])
    n = case["num_params"]
    trace = make_trace(model=model, params=[tuple(p) for p in case["params"]], ready_s=[float(n - i) for i in range(n)],
                       forward_s=1.0, backward_s=float(n), optimizer_s=0.0, num_iterations=3, compiled_graph=graph)
    for cap, real in torch_side["rebuild"][model].items():
        options = DDPOptions(bucket_cap_mb=float(cap))
        subgraphs = compiled_subgraphs(trace, options, CompileOptions())
        assert engine_hook_order(trace, subgraphs) == real["hook_order"], f"{model} at {cap} MiB"
        rebuilt = [[int(x) for x in b.split()] for b in real["rebuilt_per_bucket_param_indices"].split(",")]
        plan = plan_ddp(compiled_ready_trace(trace, subgraphs), options)
        assert [list(b.param_indices) for b in plan.steady] == rebuilt, f"{model} at {cap} MiB"


def test_python_reducer_buckets_equal_inductors_fusion(torch_side):
    n = len(FUSE_SIZES)
    trace = make_trace(model="fuse", params=[(f"p{i}", (s // 4,), "float32") for i, s in enumerate(FUSE_SIZES)],
                       ready_s=[float(i + 1) for i in range(n)], forward_s=1.0, backward_s=1.0, optimizer_s=0.0)
    order = list(trace.grad_ready_order)
    for cap_mb, fuse_mb in ((0.5, "0"), (1, "1"), (2.7, "2"), (25, "25")):
        plan = python_reducer_plan(trace, DDPOptions(bucket_cap_mb=cap_mb))
        assert [[order.index(i) for i in b.param_indices] for b in plan.steady] == torch_side["python_reducer"][fuse_mb]
        assert plan.rebuild_iteration is None and plan.initial == plan.steady


# ---- by hand --------------------------------------------------------------------------------

def _chain_trace() -> tuple:
    """4 parameters used by a chain of nodes (walk order: p3, p2, p1, p0, then a node without
    parameters), ready at 1..4 ms."""
    sizes = (1536 * KIB, 2 * MIB, 600 * KIB, 600 * KIB)
    walk = GraphWalk(users=(-1, 0, 1, 2, 3), uses=((0, 3, sizes[3]), (1, 2, sizes[2]), (2, 1, sizes[1]), (3, 0, sizes[0])))
    trace = make_trace(model="chain", params=[(f"p{i}", (s // 4,), "float32") for i, s in enumerate(sizes)],
                       ready_s=[4e-3, 3e-3, 2e-3, 1e-3], forward_s=1e-3, backward_s=5e-3, optimizer_s=0.0)
    return trace, walk


def test_split_by_hand_first_bucket_and_preamble():
    trace, walk = _chain_trace()
    subs = ddp_optimizer_buckets(walk, MIB)
    # p3+p2 = 1200 KiB >= the 1 MiB first cap; p1 alone (2 MiB); p0 (1.5 MiB), and the last node,
    # without parameters, opens a bucket of 0 bytes that is fused back into p0's
    assert [s.param_indices for s in subs] == [(0,), (1,), (3, 2)]
    assert [s.size_bytes for s in subs] == [1536 * KIB, 2 * MIB, 1200 * KIB]


def test_full_bucket_extended_until_a_node_is_used_outside_it():
    # node 1 (an in-place op: no users) cannot end a subgraph, so p0's node joins p1's subgraph
    walk = GraphWalk(users=(-1, None, 0), uses=((0, 2, 2 * MIB), (1, 1, 2 * MIB), (2, 0, 2 * MIB)))
    assert [s.param_indices for s in ddp_optimizer_buckets(walk, MIB)] == [(1, 0), (2,)]


def test_ready_when_the_subgraphs_backward_returns():
    trace, walk = _chain_trace()
    grouped = compiled_ready_trace(trace, ddp_optimizer_buckets(walk, MIB))
    # subgraph (p3, p2) ends with p2 at 2 ms; p1's at 3 ms; p0's at 4 ms
    assert grouped.iterations[0].grad_ready_s == (4e-3, 3e-3, 2e-3, 2e-3)
    assert grouped.grad_ready_order == (3, 2, 1, 0)  # ties kept in the eager order


def test_engine_order_by_hand_ties_leave_the_heap_in_sift_order():
    # forward: node a uses p0..p9, node b uses a and p10..p13 (walk: b, a); one subgraph each.
    # b's backward pushes [a's backward (lower), AG10, AG11, AG12, AG13]: the max-heap of tied
    # AccumulateGrads pops 10, then (hole to the right child on a tie) 11, 13, 12; then a's pushes
    # AG0..AG9 into an empty heap. Real compiled DDP on the 6-layer mlp fires its hooks so.
    walk = GraphWalk(users=(-1, 0), uses=(), inputs=((("node", 1),) + tuple(("param", i) for i in range(10, 14)),
                                                     tuple(("param", i) for i in range(10))))
    assert graph_hook_order(walk, [(1, 2), (0, 1)]) == [10, 11, 13, 12, 0, 2, 6, 9, 8, 5, 7, 4, 1, 3]
    # a view of a (node 2) returned beside a: regenerated outside a's subgraph, its node queued at
    # once and a's backward only after it (BERT's pooler slice at 2.5 MiB does this)
    view = GraphWalk(users=(-1, 0, 0), uses=(), alias_of=(None, 2, None),  # walk: b, the view, a
                     inputs=((("node", 1), ("param", 37), ("param", 38), ("node", 2))
                             + tuple(("param", i) for i in range(40, 44)), (("node", 2),), (("param", 0),)))
    assert graph_hook_order(view, [(1, 3), (0, 1)]) == [37, 38, 42, 43, 41, 40, 0]


def test_split_graph_calls_independent_subgraphs_in_split_modules_order():
    # forward: a (p0); b and c each use a; d uses b and c (walk: d, c, b, a). split_module's stack
    # takes a, then pushes its dependents b, c and pops c first: the calls run a, c, b, d
    walk = GraphWalk(users=(-1, 0, 0, 1), uses=(), inputs=((("node", 2), ("node", 1)), (("node", 3), ("param", 2)),
                                                           (("node", 3), ("param", 1)), (("param", 0),)))
    ranges = [(3, 4), (2, 3), (1, 2), (0, 1)]
    assert run_order(walk, ranges) == [0, 2, 1, 3]
    # d's backward queues b's and c's; b was called later (a higher sequence_nr), so its backward,
    # and p1's hook, runs first (in forward order c's would)
    assert graph_hook_order(walk, ranges) == [1, 2, 0]


def test_split_graph_waits_for_an_input_without_a_gradient():
    # forward: a (p0); b uses a; c uses a, and b's output only as data (a mask: no gradient); d uses
    # b and c (walk: d, c, b, a). split_module sorts by every input, so c waits for b: a, b, c, d
    walk = GraphWalk(users=(-1, 0, 0, 1), uses=(),
                     inputs=((("node", 2), ("node", 1)), (("node", 3), ("data", 2), ("param", 1)),
                             (("node", 3), ("param", 2)), (("param", 0),)))
    assert run_order(walk, [(3, 4), (2, 3), (1, 2), (0, 1)]) == [0, 1, 2, 3]


def test_without_ddp_optimizer_every_gradient_is_ready_at_the_end():
    trace, walk = _chain_trace()
    doc = {**trace.to_dict(), "compiled_graph": to_plain(CompiledGraph(graphs=(walk,)))}
    trace = validate(Trace, doc, "trace")
    grouped, plan = compiled_point(trace, DDPOptions(), CompileOptions(ddp_optimizer=False))
    assert set(grouped.iterations[0].grad_ready_s) == {4e-3}
    assert len(compiled_subgraphs(trace, DDPOptions(bucket_cap_mb=1), CompileOptions())) == 3


def test_trace_keeps_its_compiled_graph_and_refuses_a_bad_one(tmp_path):
    trace, walk = _chain_trace()
    doc = {**trace.to_dict(), "compiled_graph": to_plain(CompiledGraph(graphs=(walk,), torch_version="2.13.0"))}
    loaded = load_trace(save_trace(validate(Trace, doc, "trace"), tmp_path / "t.json"))
    assert loaded.compiled_graph.graphs == (walk,)
    assert "compiled_graph" not in trace.to_dict()  # traces without one are written as before
    bad = json.loads(json.dumps(doc))
    bad["compiled_graph"]["graphs"][0]["uses"][0] = [0, 9, 10]
    with pytest.raises(InputError, match=r"^trace: compiled_graph.graphs\[0\].uses\[0\]: \[0, 9, 10\] is not accepted; "
                                         r"expected \[node in \[0, 5\), parameter in \[0, 4\), bytes >= 0\]$"):
        validate(Trace, bad, "trace")


def test_a_graphs_inputs_and_views_kept_and_a_bad_one_refused(tmp_path):
    trace, walk = _chain_trace()
    walk = GraphWalk(users=walk.users, uses=walk.uses, alias_of=(None, None, None, None, 3),
                     inputs=((("node", 1), ("param", 3)), (("node", 2), ("param", 2)), (("node", 3), ("param", 1)),
                             (("node", 4), ("param", 0)), ()))
    doc = {**trace.to_dict(), "compiled_graph": to_plain(CompiledGraph(graphs=(walk,)))}
    saved = save_trace(validate(Trace, doc, "trace"), tmp_path / "t.json")
    assert load_trace(saved).compiled_graph.graphs == (walk,)
    bad = json.loads(json.dumps(doc))
    bad["compiled_graph"]["graphs"][0]["inputs"][1] = [["param", 7]]
    with pytest.raises(InputError, match=r"^trace: compiled_graph.graphs\[0\].inputs\[1\]: \['param', 7\] is not "
                                         r"accepted; expected \['param', index in \[0, 4\)\] or \['node' or 'data', another "):
        validate(Trace, bad, "trace")


# ---- the scenario's compile block ------------------------------------------------------------

def _scenario(**over) -> dict:
    data = {"name": "t", "trace": str(ROOT / "traces" / "bert-base.compiled.a100.json"), "cluster": {"topology": "pcie"},
            "world_size": 8, "compile": {}}
    data.update(over)
    return data


@pytest.mark.parametrize("compile_, sweep, expected", [
    ({"ddp_optimizer": True, "compiled_autograd": True}, None,
     "s: compile.ddp_optimizer: True is not accepted; expected false with compiled_autograd: true "
     "(optimize_ddp='python_reducer' replaces DDPOptimizer)"),
    ({}, {"bucket_cap_mb": [5, 0.5]},
     "s: sweep.bucket_cap_mb: 0.5 is not accepted; expected a cap >= 1 MiB with compile.ddp_optimizer (torch's "
     "DDPOptimizer asserts its 1 MiB first bucket is not larger)"),
    ({}, {"bucket_cap_mb_list": [[0.25, 0.5]]},
     "s: sweep.bucket_cap_mb_list: 0.5 is not accepted; expected a cap >= 1 MiB with compile.ddp_optimizer (torch's "
     "DDPOptimizer asserts its 1 MiB first bucket is not larger)"),
    ("yes", None, "s: compile: 'yes' is not accepted; expected a mapping of ddp_optimizer, compiled_autograd"),
    ({"ddp_optimizer": "no"}, None, "s: compile.ddp_optimizer: 'no' is not accepted; expected true or false"),
])
def test_bad_compile_values_refused_in_one_line(compile_, sweep, expected):
    with pytest.raises(InputError) as exc:
        scenario_from_dict(_scenario(compile=compile_, **({"sweep": sweep} if sweep else {})), source="s")
    assert str(exc.value) == expected


def test_a_trace_without_its_graph_refused_in_one_line():
    sc = scenario_from_dict(_scenario(trace=str(ROOT / "traces" / "bert-base.a100.json")), source="s")
    with pytest.raises(InputError, match=r"needs the trace's compiled_graph; expected a trace captured with "
                                         r"'ddpsim trace --compiled-graph' \(or compile.ddp_optimizer: false\)$"):
        sc.build_point(sc.points()[0])


def test_compiled_autograd_alone_turns_ddp_optimizer_off():
    sc = scenario_from_dict(_scenario(compile={"compiled_autograd": True}), source="s")
    assert sc.compile == CompileOptions(ddp_optimizer=False, compiled_autograd=True)
    assert sc.build_point(sc.points()[0]).plan.source == "python_reducer"


@pytest.mark.parametrize("compile_, mode", [({}, "ddp_optimizer"), ({"ddp_optimizer": False}, "no_optimization"),
                                            ({"compiled_autograd": True}, "python_reducer")])
def test_optimize_ddp_mode_read_from_the_compile_block(compile_, mode):
    assert scenario_from_dict(_scenario(compile=compile_), source="s").compile.mode == mode


def test_the_summary_answers_compiled_best_cap_beside_eager():
    from ddpsim.report.summary import compiled_answer_lines as answer_lines, compiled_table
    from ddpsim.report.figures import Compiled, typed

    c = typed(Compiled, {
        "mode": "ddp_optimizer", "eager_best": "cap=default", "eager_best_p50_s": 0.050,
        "points": [{"point": "cap=default", "compiled_p50_s": 0.052, "eager_p50_s": 0.050, "subgraphs": 14},
                   {"point": "cap=25", "compiled_p50_s": 0.051, "eager_p50_s": 0.051, "subgraphs": 14}]})
    line, = answer_lines(c, "cap=25")
    assert line.startswith("- **Compiled, the best cap is `cap=25`** (torch.compile with Dynamo's DDPOptimizer "
                           "splitting the graph at bucket boundaries, 14 compiled subgraph(s)): p50 step 51.000 ms, "
                           "0.0% against eager DDP at that cap (51.000 ms); eager DDP's best on this trace and cluster "
                           "is `cap=default` (50.000 ms; compiled there: 52.000 ms).")
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in compiled_table(c) if ln.startswith("| `")]
    assert ["`cap=default`", "14", "52.000 ms", "50.000 ms", "+4.0%"] in rows
    assert answer_lines(None, "cap=25") == [] == compiled_table(None)
