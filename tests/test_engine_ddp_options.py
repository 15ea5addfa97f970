"""torch 2.13's DDP options in the engine: exact timed event logs on the tiny trace of
``tests/test_engine.py`` (three fp32 1 MiB parameters a, b, c; ready c 0.25, b 0.5, a 0.75;
forward 0.5, backward 1.0, optimizer 0.125; 4 MiB/s network: 1 MiB all-reduce = 0.25 s),
worked out by hand. Copy bandwidth 16 MiB/s where copies matter: 1 MiB moved = 0.0625 s.
"""

from __future__ import annotations

import pytest

from ddpsim.engine.simulate import simulate
from ddpsim.errors import InputError
from ddpsim.plan.planner import DDPOptions, MixedPrecision, explicit_plan, plan_ddp
from ddpsim.trace.records import BufferRecord
from test_engine import BW, MIB, cfg, log, net, toy_trace

CBW = 16 * MIB


def comm(res, rank=0, iteration=None):
    return [x for x in log(res, rank, iteration) if x[0] == "comm"]


# ---- batched_grad_copy -----------------------------------------------------------------------

def test_batched_grad_copy_flushes_each_bucket_when_it_is_ready():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2, 1], [0]], options=DDPOptions(batched_grad_copy=True))
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW))
    assert log(res) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "c", 0.5, 0.75),                  # no copy at c's hook: deferred
        ("compute", "backward", "b", 0.75, 1.0),                  # bucket 0 complete
        ("compute", "copy_in", "foreach_copy bucket 0", 1.0, 1.25),   # c + b: 2 * 2 MiB = 4 MiB
        ("compute", "copy_in", "div bucket 0", 1.25, 1.5),        # flat div_: read + write 2 MiB
        ("compute", "backward", "a", 1.5, 1.75),
        ("comm", "allreduce", "bucket 0", 1.5, 2.0),
        ("compute", "copy_in", "foreach_copy bucket 1", 1.75, 1.875),
        ("compute", "copy_in", "div bucket 1", 1.875, 2.0),
        ("compute", "backward", "backward tail", 2.0, 2.25),
        ("comm", "allreduce", "bucket 1", 2.0, 2.25),
        ("compute", "copy_out", "bucket 0", 2.25, 2.5),           # copy-out as without batching
        ("compute", "copy_out", "bucket 1", 2.5, 2.625),
        ("compute", "optimizer", "optimizer", 2.625, 2.75),
    ]
    assert [(b.bucket, b.ready_s, b.launch_s) for b in res.buckets if b.rank == 0] == [(0, 1.5, 1.5), (1, 2.0, 2.0)]


def test_batched_grad_copy_leaves_the_division_to_a_comm_hook():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2, 1, 0]], options=DDPOptions(batched_grad_copy=True))
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW, comm_hook="allreduce"))
    assert [x for x in log(res) if x[1] in ("copy_in", "compress")] == [
        ("compute", "copy_in", "foreach_copy bucket 0", 1.25, 1.625),   # 2 * 3 MiB; no flat div_
        ("compute", "compress", "div bucket 0", 1.625, 2.0),             # the hook's own div_
    ]


def test_batched_grad_copy_static_graph_iteration_1_flushes_before_each_launch():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1], [0]], options=DDPOptions(static_graph=True, batched_grad_copy=True))
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW))
    u = 3 * 4 / BW
    rows = [x for x in log(res) if x[1] in ("copy_in", "allreduce", "used_map_allreduce")]
    # after backward (1.5): used map, then per bucket: foreach copy (0.125) + div (0.125) + launch
    assert rows == [
        ("compute", "copy_in", "foreach_copy bucket 0", 1.5, 1.625),
        ("comm", "used_map_allreduce", "used_map", 1.5, 1.5 + u),
        ("compute", "copy_in", "div bucket 0", 1.625, 1.75),
        ("compute", "copy_in", "foreach_copy bucket 1", 1.75, 1.875),   # at equal starts: compute first
        ("comm", "allreduce", "bucket 0", 1.75, 2.0),
        ("compute", "copy_in", "div bucket 1", 1.875, 2.0),
        ("compute", "copy_in", "foreach_copy bucket 2", 2.0, 2.125),
        ("comm", "allreduce", "bucket 1", 2.0, 2.25),
        ("compute", "copy_in", "div bucket 2", 2.125, 2.25),
        ("comm", "allreduce", "bucket 2", 2.25, 2.5),
    ]


# ---- skip_all_reduce_unused_params -------------------------------------------------------------

def unused_c_trace():
    return toy_trace(ready=(0.75, 0.25, None), environment={"graph_search_s_per_param": 0.0})


def test_skip_all_reduce_unused_params_skips_the_all_unused_bucket():
    tr = unused_c_trace()
    opts = DDPOptions(find_unused_parameters=True, skip_all_reduce_unused_params=True)
    res = simulate(tr, explicit_plan(tr, [[2], [1], [0]], options=opts), net(), cfg())
    u = 3 * 4 / BW
    assert log(res) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "b", 0.5, 0.75),          # first hook: c zero-filled, bucket 0 skipped
        ("compute", "backward", "a", 0.75, 1.25),
        ("comm", "allreduce", "bucket 1", 0.75, 1.0),
        ("compute", "backward", "backward tail", 1.25, 1.5),
        ("comm", "allreduce", "bucket 2", 1.25, 1.5),
        ("compute", "wait", "used_map", 1.5, 1.5 + u),   # no finalized bucket holds c: waited at the end
        ("comm", "used_map_allreduce", "used_map", 1.5, 1.5 + u),   # still all-reduced
        ("compute", "optimizer", "optimizer", 1.5 + u, 1.625 + u),
    ]
    assert [b.bucket for b in res.buckets if b.rank == 0] == [1, 2]
    assert res.meta["skipped_buckets"] == {"1": [0]}
    # without the option bucket 0 (c's zeros) is all-reduced first and the rest queue behind it
    plain = simulate(tr, explicit_plan(tr, [[2], [1], [0]], options=DDPOptions(find_unused_parameters=True)), net(), cfg())
    assert [x[2:] for x in comm(plain)] == [("bucket 0", 0.75, 1.0), ("bucket 1", 1.0, 1.25),
                                            ("bucket 2", 1.25, 1.5), ("used_map", 1.5, 1.5 + u)]
    assert "skipped_buckets" not in plain.meta


def test_skip_all_reduce_unused_params_with_static_graph_from_iteration_2():
    tr = unused_c_trace()
    opts = DDPOptions(static_graph=True, skip_all_reduce_unused_params=True)
    res = simulate(tr, explicit_plan(tr, [[2], [1], [0]], options=opts), net(), cfg(num_iterations=2))
    assert res.meta["skipped_buckets"] == {"2": [0]}   # iteration 1's delay_all_reduce launches all
    assert [x[2] for x in comm(res, iteration=1)] == ["used_map", "bucket 0", "bucket 1", "bucket 2"]
    assert [x[2] for x in comm(res, iteration=2)] == ["bucket 1", "bucket 2"]


def test_skip_without_unused_parameters_changes_nothing():
    tr = toy_trace()
    a = simulate(tr, plan_ddp(tr, DDPOptions(bucket_cap_mb=1)), net(), cfg(num_iterations=3))
    b = simulate(tr, plan_ddp(tr, DDPOptions(bucket_cap_mb=1, skip_all_reduce_unused_params=True)), net(),
                 cfg(num_iterations=3))
    assert a.spans == b.spans and b.meta["skipped_buckets"] == {}


# ---- forward_sync_buffers / broadcast_buffers ----------------------------------------------------

@pytest.mark.parametrize("kw,synced", [
    ({}, True),
    ({"forward_sync_buffers": False}, False),
    ({"broadcast_buffers": False}, False),                                  # the deprecated spelling
    ({"broadcast_buffers": False, "forward_sync_buffers": True}, True),     # forward_sync_buffers wins
    ({"broadcast_buffers": True, "forward_sync_buffers": False}, False),
])
def test_forward_sync_buffers_maps_broadcast_buffers(kw, synced):
    tr = toy_trace(buffers=(BufferRecord(name="bn.running_mean", dtype="float32", size_bytes=MIB),))
    res = simulate(tr, explicit_plan(tr, [[0, 1, 2]], options=DDPOptions(**kw)), net(), cfg(num_iterations=2))
    assert [(x[2], x[3]) for x in comm(res) if x[1] == "broadcast"] == (
        [("buffers[0]", 0.0), ("buffers[0]", 2.375)] if synced else [])


# ---- mixed precision ------------------------------------------------------------------------------

def test_mixed_precision_casts_and_reduces_in_reduce_dtype():
    tr = toy_trace(buffers=(BufferRecord(name="bn.running_mean", dtype="float32", size_bytes=MIB),))
    mp = MixedPrecision(param_dtype="float16", reduce_dtype="float32", buffer_dtype="float16")
    plan = explicit_plan(tr, [[0, 1, 2]], options=DDPOptions(mixed_precision=mp))
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW))
    b0 = 0.125  # buffers cast to fp16 at construction: 0.5 MiB broadcast
    # parameter casts before forward: read 3 MiB fp32, write 1.5 MiB fp16 = 4.5 MiB -> 0.28125
    assert log(res) == [
        ("compute", "wait", "broadcast", 0.0, b0),
        ("comm", "broadcast", "buffers[0]", 0.0, b0),
        ("compute", "forward", "mixed precision cast", b0, b0 + 0.28125),
        ("compute", "forward", "forward", b0 + 0.28125, b0 + 0.78125),
        ("compute", "backward", "c", b0 + 0.78125, b0 + 1.03125),
        ("compute", "copy_in", "c", b0 + 1.03125, b0 + 1.09375),      # fp16 gradient: 2 * 0.5 MiB
        ("compute", "backward", "b", b0 + 1.09375, b0 + 1.34375),
        ("compute", "copy_in", "b", b0 + 1.34375, b0 + 1.40625),
        ("compute", "backward", "a", b0 + 1.40625, b0 + 1.65625),
        ("compute", "copy_in", "a", b0 + 1.65625, b0 + 1.71875),
        # the hook casts the fp16 bucket to fp32: read 1.5 MiB, write 3 MiB -> 0.28125; no div_
        ("compute", "compress", "mixed precision cast bucket 0", b0 + 1.71875, b0 + 2.0),
        ("compute", "backward", "backward tail", b0 + 2.0, b0 + 2.25),
        ("comm", "allreduce", "bucket 0", b0 + 2.0, b0 + 2.75),       # 3 MiB in fp32: 0.75 s
        ("compute", "wait", "bucket 0", b0 + 2.25, b0 + 2.75),
        # upcast stream: div_ of the fp32 buffer (2 * 3 MiB) + upcast of the fp16 grads (1.5 + 3 MiB)
        # = 10.5 MiB after the all-reduce; the compute stream waits for it
        ("compute", "wait", "mixed precision upcast", b0 + 2.75, b0 + 3.40625),
        ("compute", "copy_out", "bucket 0", b0 + 3.40625, b0 + 3.78125),   # 3 MiB fp32 read + write
        ("compute", "optimizer", "optimizer", b0 + 3.78125, b0 + 3.90625),
    ]
    assert res.buckets[0].size_bytes == 3 * MIB   # DDP lays buckets out by the fp32 sizes


def test_mixed_precision_upcast_stream_overlaps_backward():
    tr = toy_trace()
    mp = MixedPrecision(param_dtype="float16", reduce_dtype="float32")
    plan = explicit_plan(tr, [[2], [1, 0]], options=DDPOptions(mixed_precision=mp))
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW))
    assert log(res)[4:] == [
        ("compute", "compress", "mixed precision cast bucket 0", 1.09375, 1.1875),   # 0.5 + 1 MiB
        ("compute", "backward", "b", 1.1875, 1.4375),
        ("comm", "allreduce", "bucket 0", 1.1875, 1.4375),
        ("compute", "copy_in", "b", 1.4375, 1.5),
        ("compute", "backward", "a", 1.5, 1.75),
        ("compute", "copy_in", "a", 1.75, 1.8125),
        ("compute", "compress", "mixed precision cast bucket 1", 1.8125, 2.0),
        ("compute", "backward", "backward tail", 2.0, 2.25),
        ("comm", "allreduce", "bucket 1", 2.0, 2.5),
        ("compute", "wait", "bucket 1", 2.25, 2.5),
        # bucket 0's div_ + upcast (3.5 MiB) ran 1.4375 .. 1.65625, under backward; bucket 1's
        # (7 MiB, 0.4375 s) after its all-reduce: 2.5 .. 2.9375
        ("compute", "wait", "mixed precision upcast", 2.5, 2.9375),
        ("compute", "copy_out", "bucket 0", 2.9375, 3.0625),
        ("compute", "copy_out", "bucket 1", 3.0625, 3.3125),
        ("compute", "optimizer", "optimizer", 3.3125, 3.4375),
    ]


def test_mixed_precision_reduce_dtype_defaults_to_param_dtype():
    tr = toy_trace()
    plan = explicit_plan(tr, [[0, 1, 2]], options=DDPOptions(mixed_precision=MixedPrecision(param_dtype="bfloat16")))
    res = simulate(tr, plan, net(), cfg())
    assert [(x[2], x[4] - x[3]) for x in comm(res)] == [("bucket 0", 0.375)]   # 1.5 MiB of bf16


def test_mixed_precision_rejects_another_comm_hook():
    tr = toy_trace()
    plan = explicit_plan(tr, [[0, 1, 2]], options=DDPOptions(mixed_precision=MixedPrecision(param_dtype="float16")))
    with pytest.raises(InputError, match=r"^comm_hook: 'fp16' is not accepted with mixed_precision"):
        simulate(tr, plan, net(), cfg(comm_hook="fp16"))


# ---- delay_all_reduce_named_params ---------------------------------------------------------------

DELAY_A = {"delay_all_reduce_named_params": ("a",), "param_to_hook_all_reduce": "b"}


def test_delayed_params_leave_the_reducer():
    tr = toy_trace()
    plan = plan_ddp(tr, DDPOptions(**DELAY_A))
    assert [b.param_indices for b in plan.initial] == [(1, 2)]
    assert [b.param_indices for b in plan.steady] == [(2,), (1,)]   # rebuilt from the order c, b: c closes 1 MiB
    with pytest.raises(InputError, match=r"^plan.buckets: parameter 'a' is in delay_all_reduce_named_params"):
        explicit_plan(tr, [[2], [1], [0]], options=DDPOptions(**DELAY_A))


def test_delayed_all_reduce_is_launched_from_the_hook_param_and_never_waited():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1]], options=DDPOptions(**DELAY_A))
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW))
    assert log(res) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "zero_grad", "zero delayed grad buffer", 0.5, 0.5625),   # 1 MiB of float32 zeros
        ("compute", "backward", "c", 0.5625, 0.8125),
        ("compute", "copy_in", "c", 0.8125, 0.9375),
        ("compute", "backward", "b", 0.9375, 1.1875),
        ("comm", "allreduce", "bucket 0", 0.9375, 1.1875),
        # b's gradient computed: the tensor hook divides the flat buffer and launches it
        ("compute", "compress", "delayed_all_reduce div", 1.1875, 1.3125),
        ("compute", "copy_in", "b", 1.3125, 1.4375),          # then b's AccumulateGrad and DDP hook
        ("comm", "allreduce", "delayed_all_reduce", 1.3125, 1.5625),
        ("compute", "backward", "a", 1.4375, 1.6875),          # a: no DDP hook
        ("comm", "allreduce", "bucket 1", 1.5625, 1.8125),
        ("compute", "backward", "backward tail", 1.6875, 1.9375),
        ("compute", "copy_out", "bucket 0", 1.9375, 2.0625),
        ("compute", "copy_out", "bucket 1", 2.0625, 2.1875),   # bucket 1 ended at 1.8125: no wait
        ("compute", "optimizer", "optimizer", 2.1875, 2.3125),
    ]


def test_delayed_all_reduce_fires_in_no_sync_backwards_too():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1]], options=DDPOptions(**DELAY_A))
    res = simulate(tr, plan, net(), cfg(no_sync_steps=1))
    assert log(res)[:5] == [
        ("compute", "forward", "forward (no_sync 1)", 0.0, 0.5),
        ("compute", "backward", "backward (no_sync 1)", 0.5, 1.0),    # up to b's gradient (0.5)
        ("compute", "backward", "backward (no_sync 1)", 1.0, 1.5),
        ("comm", "allreduce", "delayed_all_reduce", 1.0, 1.25),
        ("compute", "forward", "forward", 1.5, 2.0),
    ]
    assert [x[2] for x in comm(res)] == ["delayed_all_reduce", "bucket 0", "delayed_all_reduce", "bucket 1"]


def test_every_parameter_delayed_means_no_reducer():
    tr = toy_trace(buffers=(BufferRecord(name="bn.running_mean", dtype="float32", size_bytes=MIB),))
    opts = DDPOptions(delay_all_reduce_named_params=("a", "b", "c"), param_to_hook_all_reduce="a",
                      mixed_precision=MixedPrecision(param_dtype="float16"))
    plan = plan_ddp(tr, opts)
    assert plan.initial == plan.steady == () and plan.rebuild_iteration is None
    res = simulate(tr, plan, net(), cfg(num_iterations=2))
    # no buffer broadcast, no casts, no buckets: only the 3 MiB delayed all-reduce after a's gradient
    assert [x[1:] for x in log(res, iteration=1)] == [
        ("forward", "forward", 0.0, 0.5),
        ("backward", "c", 0.5, 0.75),
        ("backward", "b", 0.75, 1.0),
        ("backward", "a", 1.0, 1.25),
        ("backward", "backward tail", 1.25, 1.5),
        ("allreduce", "delayed_all_reduce", 1.25, 2.0),
        ("optimizer", "optimizer", 1.5, 1.625),
    ]
    # the step ends at 1.625 while its all-reduce runs on to 2.0: DDP never waits for it
    assert [(it.iteration, it.end_s) for it in res.iterations if it.rank == 0] == [(1, 1.625), (2, 3.25)]
    assert [x[2:] for x in comm(res, iteration=2)] == [("delayed_all_reduce", 2.875, 3.625)]


# ---- validation ------------------------------------------------------------------------------------

_BOTH = r" .* expected a parameter name together with delay_all_reduce_named_params \(both set or neither\)"


@pytest.mark.parametrize("kw,match", [
    ({"batched_grad_copy": "yes"}, r"^batched_grad_copy: 'yes' is not accepted"),
    ({"skip_all_reduce_unused_params": 1}, r"^skip_all_reduce_unused_params: 1 is not accepted"),
    ({"forward_sync_buffers": "no"}, r"^forward_sync_buffers: 'no' is not accepted"),
    ({"delay_all_reduce_named_params": ("a",)}, r"^param_to_hook_all_reduce: None" + _BOTH),
    ({"param_to_hook_all_reduce": "a"}, r"^param_to_hook_all_reduce: 'a'" + _BOTH),
    ({"delay_all_reduce_named_params": "a", "param_to_hook_all_reduce": "a"}, r"^delay_all_reduce_named_params: 'a'"),
    ({"mixed_precision": "fp16"}, r"^mixed_precision: 'fp16' is not accepted"),
])
def test_bad_options(kw, match):
    with pytest.raises(InputError, match=match):
        DDPOptions(**kw)


def test_bad_mixed_precision_dtype_and_unknown_names():
    with pytest.raises(InputError, match=r"^mixed_precision: param_dtype: 'int8' is not accepted; expected one of float16"):
        MixedPrecision(param_dtype="int8")
    tr = toy_trace()
    with pytest.raises(InputError, match=r"^delay_all_reduce_named_params: 'zz' is not a parameter of trace 'toy'"):
        plan_ddp(tr, DDPOptions(delay_all_reduce_named_params=("zz",), param_to_hook_all_reduce="a"))
    with pytest.raises(InputError, match=r"^param_to_hook_all_reduce: 'zz' is not a parameter"):
        plan_ddp(tr, DDPOptions(delay_all_reduce_named_params=("a",), param_to_hook_all_reduce="zz"))


# ---- the slow path (interference) and the folded ranks run the same program ----------------------

OPTION_SETS = [
    ("batched", DDPOptions(bucket_cap_mb=1, batched_grad_copy=True), {}),
    ("skip", DDPOptions(find_unused_parameters=True, bucket_cap_mb=1, skip_all_reduce_unused_params=True), {"unused": True}),
    ("mixed_precision", DDPOptions(bucket_cap_mb=1, mixed_precision=MixedPrecision(param_dtype="float16")), {}),
    ("delay", DDPOptions(bucket_cap_mb=1, **DELAY_A), {"no_sync_steps": 1}),
]


def _close(a, b):
    """Equal up to float rounding (which may swap spans that start together)."""
    a, b = (sorted(x, key=lambda r: (round(r[3], 6), r[0], r[1], r[2])) for x in (a, b))
    return len(a) == len(b) and all(x[:3] == y[:3] and abs(x[3] - y[3]) < 1e-9 and abs(x[4] - y[4]) < 1e-9
                                    for x, y in zip(a, b))


@pytest.mark.parametrize("name,opts,extra", OPTION_SETS, ids=[o[0] for o in OPTION_SETS])
def test_options_take_the_same_path_with_interference_and_folded_ranks(name, opts, extra):
    from ddpsim.network.interference import Interference

    tr = unused_c_trace() if extra.get("unused") else toy_trace()
    plan = plan_ddp(tr, opts)
    kw = dict(num_iterations=3, copy_bandwidth_bytes_per_s=CBW, no_sync_steps=extra.get("no_sync_steps", 0))
    fast = simulate(tr, plan, net(), cfg(**kw))
    slow = simulate(tr, plan, net(), cfg(interference=Interference(compute_slowdown=1.0 + 1e-12), **kw))
    assert _close(log(fast), log(slow))
    kw32 = dict(kw, world_size=32, jitter=0.2, seed=1)
    full = simulate(tr, plan, net(32), cfg(rank_group_size=1, **kw32))
    folded = simulate(tr, plan, net(32), cfg(**kw32))
    assert folded.meta["rest_representative"]
    for r in folded.ranks:
        assert _close(log(folded, rank=r), log(full, rank=r))


# ---- a Python comm hook's call cost (a calibration's comm_hook_call_s) ----------------------

def test_python_hook_call_charged_per_bucket_before_its_division():
    # one 3 MiB bucket: each gradient's copy-in takes 0.125 s (2 MiB at 16 MiB/s), so a's ends at
    # 1.625; then the hook's call (0.125 s) and its div_ (2 * 3 MiB = 0.375 s) on the compute
    # stream, then the launch: the all-reduce (3 MiB at 4 MiB/s) 2.125 .. 2.875
    tr = toy_trace()
    plan = explicit_plan(tr, [[2, 1, 0]])
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW, comm_hook="allreduce", comm_hook_call_s=0.125))
    rows = [x for x in log(res) if x[1] in ("compress", "allreduce")]
    assert rows == [("compute", "compress", "comm hook call bucket 0", 1.625, 1.75),
                    ("compute", "compress", "div bucket 0", 1.75, 2.125),
                    ("comm", "allreduce", "bucket 0", 2.125, 2.875)]


def test_python_hook_call_not_charged_without_a_hook():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2, 1, 0]])
    plain = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW))
    charged = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=CBW, comm_hook_call_s=0.125))
    assert log(plain) == log(charged)


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), True, "1"])
def test_comm_hook_call_s_refused_in_one_line(bad):
    from ddpsim.engine.config import SimConfig

    with pytest.raises(InputError, match=r"^comm_hook_call_s: .* is not accepted; expected a finite number of seconds >= 0$"):
        SimConfig(comm_hook_call_s=bad)
