"""The SimPy DDP engine on tiny hand-made traces: exact timed event logs, worked out by hand.

Common setup (unless a test says otherwise):

* three fp32 parameters a, b, c of 1 MiB each (262144 elements); DDP order a, b, c;
* forward 0.5 s; gradients ready (after backward start) c at 0.25, b at 0.5, a at 0.75;
  backward 1.0 s (so 0.25 s of backward compute after the last hook); optimizer 0.125 s;
* network: AlphaBetaModel with no latency and 4 MiB/s, so a 1 MiB all-reduce takes 0.25 s;
* no jitter, free copies (copy bandwidth None).

All numbers are sums of powers of two, so the floating-point results are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.engine.simulate import simulate
from ddpsim.errors import InputError
from ddpsim.plan.planner import DDPOptions, explicit_plan, plan_ddp
from ddpsim.engine.config import PowerSGDState, SimConfig
from ddpsim.network.interference import Interference
from ddpsim.trace.records import BufferRecord, make_trace

MIB = 1024 * 1024
BW = 4 * MIB  # bytes per second: 1 MiB in 0.25 s
ELEMS = MIB // 4


def toy_trace(ready=(0.75, 0.5, 0.25), **kw):
    return make_trace(model="toy", params=[("a", (ELEMS,), "float32"), ("b", (ELEMS,), "float32"),
                                           ("c", (ELEMS,), "float32")],
                      ready_s=list(ready), forward_s=0.5, backward_s=1.0, optimizer_s=0.125, **kw)


def net(num_ranks=2, latency_s=0.0):
    return AlphaBetaModel(latency_s=latency_s, bandwidth_bytes_per_s=BW, num_ranks=num_ranks)


def cfg(**kw):
    kw.setdefault("world_size", 2)
    kw.setdefault("num_iterations", 1)
    kw.setdefault("jitter", "none")
    return SimConfig(**kw)


def log(res, rank=0, iteration=None):
    """(stream, kind, name, start, end) of one rank, in time order (by start; compute first)."""
    return [(s.stream, s.kind, s.name, s.start_s, s.end_s) for s in res.spans
            if s.rank == rank and (iteration is None or s.iteration == iteration)]


def bucket_log(res, rank=0, iteration=None):
    return [(b.iteration, b.bucket, b.ready_s, b.launch_s, b.start_s, b.end_s) for b in res.buckets
            if b.rank == rank and (iteration is None or b.iteration == iteration)]


def test_first_iteration_single_bucket():
    tr = toy_trace()
    plan = plan_ddp(tr)  # default: iteration 1 is one bucket of all 3 MiB
    res = simulate(tr, plan, net(), cfg())
    assert log(res) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "c", 0.5, 0.75),      # 0.5 + 0.25
        ("compute", "backward", "b", 0.75, 1.0),      # + (0.5 - 0.25)
        ("compute", "backward", "a", 1.0, 1.25),      # + (0.75 - 0.5): last hook -> bucket 0 ready
        ("compute", "backward", "backward tail", 1.25, 1.5),   # backward_s 1.0 - 0.75
        ("comm", "allreduce", "bucket 0", 1.25, 2.0),  # 3 MiB / 4 MiB/s = 0.75
        ("compute", "wait", "bucket 0", 1.5, 2.0),
        ("compute", "optimizer", "optimizer", 2.0, 2.125),
    ]
    assert log(res, rank=1) == log(res, rank=0)
    assert bucket_log(res) == [(1, 0, 1.25, 1.25, 1.25, 2.0)]
    (it0, it1) = res.iterations
    assert (it0.start_s, it0.end_s, it0.forward_s, it0.backward_compute_s) == (0.0, 2.125, 0.5, 1.0)
    assert it0.exposed_comm_s == 0.5          # 2.0 - 1.5 (end of backward compute)
    assert it0.comm_s == 0.75
    assert it0.overlap_ratio == 0.25 / 0.75   # only the backward tail [1.25, 1.5] overlaps
    assert it0.warmup and res.ranks == (0, 1)


def test_rebuild_in_iteration_2():
    tr = toy_trace()
    plan = plan_ddp(tr, DDPOptions(bucket_cap_mb=1))  # rebuilt: [c], [b], [a], 1 MiB each
    assert [b.param_indices for b in plan.steady] == [(2,), (1,), (0,)]
    res = simulate(tr, plan, net(), cfg(num_iterations=2))
    u1 = (3 + 1) * 4 / BW   # int32 index tensor of num_params + 1
    u2 = 3 * 4 / BW         # int32 bucket sizes, 3 buckets
    t0 = 2.125 + u1 + u2    # iteration 1 as in the test above, then the two blocking broadcasts
    assert log(res, iteration=2) == [
        ("compute", "wait", "rebuild:indices", 2.125, 2.125 + u1),
        ("comm", "rebuild", "rebuild:indices", 2.125, 2.125 + u1),
        ("compute", "wait", "rebuild:bucket_sizes", 2.125 + u1, t0),
        ("comm", "rebuild", "rebuild:bucket_sizes", 2.125 + u1, t0),
        ("compute", "forward", "forward", t0, t0 + 0.5),
        ("compute", "backward", "c", t0 + 0.5, t0 + 0.75),
        ("compute", "backward", "b", t0 + 0.75, t0 + 1.0),
        ("comm", "allreduce", "bucket 0", t0 + 0.75, t0 + 1.0),
        ("compute", "backward", "a", t0 + 1.0, t0 + 1.25),
        ("comm", "allreduce", "bucket 1", t0 + 1.0, t0 + 1.25),
        ("compute", "backward", "backward tail", t0 + 1.25, t0 + 1.5),
        ("comm", "allreduce", "bucket 2", t0 + 1.25, t0 + 1.5),
        ("compute", "optimizer", "optimizer", t0 + 1.5, t0 + 1.625),  # all comm hidden: no wait
    ]
    it2 = [it for it in res.iterations if it.rank == 0][1]
    assert it2.warmup  # default warm-up: up to and including the first rebuilt iteration
    assert it2.exposed_comm_s == 0.0
    assert it2.comm_s == 0.75 + u1 + u2


def test_static_graph_rebuilds_in_iteration_3():
    tr = toy_trace()
    plan = plan_ddp(tr, DDPOptions(bucket_cap_mb=1, static_graph=True))
    res = simulate(tr, plan, net(), cfg(num_iterations=3))
    rebuilds = [(s.iteration, s.name) for s in res.spans if s.rank == 0 and s.kind == "rebuild"]
    assert rebuilds == [(3, "rebuild:indices"), (3, "rebuild:bucket_sizes")]
    assert [it.warmup for it in res.iterations if it.rank == 0] == [True, True, True]


def test_ready_bucket_waits_for_its_predecessor():
    tr = toy_trace()
    # launch order: bucket 0 = [a] (ready last), bucket 1 = [c] (ready first), bucket 2 = [b]
    plan = explicit_plan(tr, [[0], [2], [1]])
    res = simulate(tr, plan, net(), cfg())
    # c ready at 0.75 and b at 1.0, but DDP launches in order: both wait for bucket 0 (a, 1.25)
    assert bucket_log(res) == [
        (1, 0, 1.25, 1.25, 1.25, 1.5),
        (1, 1, 0.75, 1.25, 1.5, 1.75),   # launched with bucket 0, starts when the stream is free
        (1, 2, 1.0, 1.25, 1.75, 2.0),
    ]
    assert [x for x in log(res) if x[1] in ("wait", "optimizer")] == [
        ("compute", "wait", "bucket 1", 1.5, 1.75),   # bucket 0 ended at 1.5: no wait for it
        ("compute", "wait", "bucket 2", 1.75, 2.0),
        ("compute", "optimizer", "optimizer", 2.0, 2.125),
    ]


def test_straggler_delays_the_collective_on_every_rank():
    tr = toy_trace()
    plan = explicit_plan(tr, [[0, 1, 2]])
    res = simulate(tr, plan, net(), cfg(stragglers={1: 2.0}))
    # rank 1 computes twice as slowly: forward [0, 1], hooks at 1.5, 2.0, 2.5, tail to 3.0
    assert log(res, rank=1) == [
        ("compute", "forward", "forward", 0.0, 1.0),
        ("compute", "backward", "c", 1.0, 1.5),
        ("compute", "backward", "b", 1.5, 2.0),
        ("compute", "backward", "a", 2.0, 2.5),
        ("compute", "backward", "backward tail", 2.5, 3.0),
        ("comm", "allreduce", "bucket 0", 2.5, 3.25),   # starts when the LAST rank launched it
        ("compute", "wait", "bucket 0", 3.0, 3.25),
        ("compute", "optimizer", "optimizer", 3.25, 3.5),
    ]
    # rank 0 launched at 1.25 but its all-reduce also starts at 2.5
    assert bucket_log(res, rank=0) == [(1, 0, 1.25, 1.25, 2.5, 3.25)]
    assert ("compute", "wait", "bucket 0", 1.5, 3.25) in log(res, rank=0)
    assert [it.iteration_s for it in res.iterations] == [3.375, 3.5]


def test_no_sync_accumulation_and_buffer_broadcast():
    tr = toy_trace(buffers=(BufferRecord(name="bn.running_mean", dtype="float32", size_bytes=MIB),))
    plan = explicit_plan(tr, [[0, 1, 2]])
    res = simulate(tr, plan, net(), cfg(no_sync_steps=2, num_iterations=2))
    assert log(res, iteration=1) == [
        ("compute", "wait", "broadcast", 0.0, 0.25),
        ("comm", "broadcast", "buffers[0]", 0.0, 0.25),   # 1 MiB of buffers, first forward only
        ("compute", "forward", "forward (no_sync 1)", 0.25, 0.75),
        ("compute", "backward", "backward (no_sync 1)", 0.75, 1.75),   # no hooks, no comm
        ("compute", "forward", "forward (no_sync 2)", 1.75, 2.25),
        ("compute", "backward", "backward (no_sync 2)", 2.25, 3.25),
        ("compute", "forward", "forward", 3.25, 3.75),     # after no_sync: no broadcast
        ("compute", "backward", "c", 3.75, 4.0),
        ("compute", "backward", "b", 4.0, 4.25),
        ("compute", "backward", "a", 4.25, 4.5),
        ("compute", "backward", "backward tail", 4.5, 4.75),
        ("comm", "allreduce", "bucket 0", 4.5, 5.25),
        ("compute", "wait", "bucket 0", 4.75, 5.25),
        ("compute", "optimizer", "optimizer", 5.25, 5.375),
    ]
    it1 = res.iterations[0]
    assert (it1.forward_s, it1.backward_compute_s, it1.iteration_s) == (1.5, 3.0, 5.375)
    # iteration 2 broadcasts again at its first micro-step
    assert [(s.name, s.start_s) for s in res.spans if s.rank == 0 and s.kind == "broadcast"] == [
        ("buffers[0]", 0.0), ("buffers[0]", 5.375)]
    assert "no_sync" in res.meta["iteration_unit"]


def test_buffer_copies_are_charged_per_buffer_after_the_broadcast():
    """A comm model with ``broadcast_per_tensor_s`` (a calibration that measured DDP's buffer
    flatten and copy-back) costs that much compute per buffer after each forward broadcast."""
    bufs = tuple(BufferRecord(name=f"bn{i}.running_mean", dtype="float32", size_bytes=MIB // 4) for i in range(4))
    tr = toy_trace(buffers=bufs)
    plan = explicit_plan(tr, [[0, 1, 2]])

    class Costed(AlphaBetaModel):
        broadcast_per_tensor_s = 0.03125

    costed = Costed(latency_s=0.0, bandwidth_bytes_per_s=BW, num_ranks=2)
    res = simulate(tr, plan, costed, cfg())
    assert log(res)[:4] == [
        ("compute", "wait", "broadcast", 0.0, 0.25),
        ("comm", "broadcast", "buffers[0]", 0.0, 0.25),          # 1 MiB in one bucket
        ("compute", "forward", "buffer copies", 0.25, 0.375),    # 4 buffers x 31.25 ms
        ("compute", "forward", "forward", 0.375, 0.875),
    ]
    assert res.iterations[0].iteration_s == simulate(tr, plan, net(), cfg()).iterations[0].iteration_s + 0.125
    # no broadcast (broadcast_buffers off): no copies either
    off = simulate(tr, explicit_plan(tr, [[0, 1, 2]], DDPOptions(broadcast_buffers=False)), costed, cfg())
    assert not [s for s in off.spans if s.name == "buffer copies"]
    with pytest.raises(InputError, match=r"^comm model Bad.broadcast_per_tensor_s: -1 is not accepted"):
        simulate(tr, plan, type("Bad", (AlphaBetaModel,), {"broadcast_per_tensor_s": -1})(
            latency_s=0.0, bandwidth_bytes_per_s=BW, num_ranks=2), cfg())


def test_fp16_hook_halves_the_bytes():
    tr = toy_trace()
    plan = explicit_plan(tr, [[0, 1, 2]])
    res = simulate(tr, plan, net(), cfg(comm_hook="fp16"))
    (ar,) = [s for s in res.spans if s.rank == 0 and s.stream == "comm"]
    # 3 * 262144 elements * 2 bytes = 1.5 MiB -> 0.375 s (instead of 0.75)
    assert (ar.size_bytes, ar.start_s, ar.end_s) == (3 * MIB // 2, 1.25, 1.625)
    assert res.buckets[0].size_bytes == 3 * MIB  # the bucket itself is still fp32


def test_copies_and_fp16_casts_use_the_compute_stream():
    tr = toy_trace()
    plan = explicit_plan(tr, [[0, 1, 2]])
    # copy bandwidth 16 MiB/s: copy-in of a 1 MiB gradient = 2 MiB / 16 MiB/s = 0.125 s
    res = simulate(tr, plan, net(), cfg(comm_hook="fp16", copy_bandwidth_bytes_per_s=16 * MIB))
    assert log(res) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "c", 0.5, 0.75),
        ("compute", "copy_in", "c", 0.75, 0.875),       # delays the next backward segment
        ("compute", "backward", "b", 0.875, 1.125),
        ("compute", "copy_in", "b", 1.125, 1.25),
        ("compute", "backward", "a", 1.25, 1.5),
        ("compute", "copy_in", "a", 1.5, 1.625),
        # cast: read 3 MiB, write 1.5 MiB, div_ on it: read+write 1.5 MiB each = 7.5 MiB / 16 MiB/s
        ("compute", "compress", "fp16 cast bucket 0", 1.625, 2.09375),
        ("compute", "backward", "backward tail", 2.09375, 2.34375),
        # 1.5 MiB: 0.375 s, then the hook's .then() decompress on the same stream: read 1.5 MiB,
        # write 3 MiB = 4.5 MiB -> 0.28125 s
        ("comm", "allreduce", "bucket 0", 2.09375, 2.75),
        ("compute", "wait", "bucket 0", 2.34375, 2.75),
        # copy-out 2 * 3 MiB -> 0.375
        ("compute", "copy_out", "bucket 0", 2.75, 3.125),
        ("compute", "optimizer", "optimizer", 3.125, 3.25),
    ]


def test_gradient_as_bucket_view_skips_copy_out_not_copy_in():
    tr = toy_trace()
    plan = explicit_plan(tr, [[0, 1, 2]], options=DDPOptions(gradient_as_bucket_view=True))
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=16 * MIB))
    kinds = [x[1] for x in log(res) if x[0] == "compute"]
    assert kinds.count("copy_in") == 3 and "copy_out" not in kinds


def test_a_bad_graph_search_cost_is_an_input_error():
    for bad in (-1, "fast", True):
        tr = toy_trace(environment={"graph_search_s_per_param": bad})
        with pytest.raises(InputError, match=r"^trace.environment.graph_search_s_per_param: .* is not accepted"):
            simulate(tr, plan_ddp(tr), net(), cfg())


def test_find_unused_parameters_adds_used_map_allreduce():
    # c gets no gradient; graph search 0.0625 s per parameter (trace environment)
    tr = toy_trace(ready=(0.75, 0.25, None), environment={"graph_search_s_per_param": 0.0625})
    plan = plan_ddp(tr, DDPOptions(find_unused_parameters=True))
    # limits [1 MiB, 25 MiB] in parameter order: [a] closes at 1 MiB, [b, c] left; reversed
    assert [b.param_indices for b in plan.initial] == [(1, 2), (0,)] and plan.rebuild_iteration is None
    res = simulate(tr, plan, net(), cfg())
    u = 3 * 4 / BW  # used map: 4 bytes per parameter
    assert log(res) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "graph_search", "graph_search", 0.5, 0.6875),    # 3 * 0.0625
        ("compute", "backward", "b", 0.6875, 0.9375),
        # first hook: unused c marked ready (zero-fill, free here) with b -> bucket 0 ready
        ("compute", "backward", "a", 0.9375, 1.4375),                # 0.75 - 0.25
        ("comm", "allreduce", "bucket 0", 0.9375, 1.4375),           # b + c = 2 MiB -> 0.5 s
        ("compute", "backward", "backward tail", 1.4375, 1.6875),
        ("comm", "allreduce", "bucket 1", 1.4375, 1.6875),           # launched at 1.4375 with a
        ("compute", "wait", "used_map", 1.6875, 1.6875 + u),          # lazily, at c's bucket
        ("comm", "used_map_allreduce", "used_map", 1.6875, 1.6875 + u),  # after the last bucket
        ("compute", "optimizer", "optimizer", 1.6875 + u, 1.8125 + u),
    ]


def test_static_graph_iteration_1_delays_every_bucket():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1], [0]], options=DDPOptions(static_graph=True))
    res = simulate(tr, plan, net(), cfg(num_iterations=2))
    u = 3 * 4 / BW
    assert log(res, iteration=1) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "c", 0.5, 0.75),       # hooks only count: nothing launched
        ("compute", "backward", "b", 0.75, 1.0),
        ("compute", "backward", "a", 1.0, 1.25),
        ("compute", "backward", "backward tail", 1.25, 1.5),
        ("compute", "wait", "bucket 0", 1.5, 1.75 + u),
        ("comm", "used_map_allreduce", "used_map", 1.5, 1.5 + u),   # first, then all buckets
        ("comm", "allreduce", "bucket 0", 1.5 + u, 1.75 + u),
        ("compute", "wait", "bucket 1", 1.75 + u, 2.0 + u),
        ("comm", "allreduce", "bucket 1", 1.75 + u, 2.0 + u),
        ("compute", "wait", "bucket 2", 2.0 + u, 2.25 + u),
        ("comm", "allreduce", "bucket 2", 2.0 + u, 2.25 + u),
        ("compute", "optimizer", "optimizer", 2.25 + u, 2.375 + u),
    ]
    t0 = 2.375 + u
    # iteration 2 overlaps as usual and has no used map
    assert [x for x in log(res, iteration=2) if x[0] == "comm"] == [
        ("comm", "allreduce", "bucket 0", t0 + 0.75, t0 + 1.0),
        ("comm", "allreduce", "bucket 1", t0 + 1.0, t0 + 1.25),
        ("comm", "allreduce", "bucket 2", t0 + 1.25, t0 + 1.5),
    ]


def test_interference_stretches_overlapped_work():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1, 0]])
    res = simulate(tr, plan, net(), cfg(interference=Interference(compute_slowdown=2.0, comm_slowdown=2.0)))
    assert log(res) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "c", 0.5, 0.75),
        # bucket 0 (1 MiB, 0.25 s of work) and segment b (0.25 s) overlap, each at half rate: 0.5 s
        ("compute", "backward", "b", 0.75, 1.25),
        ("comm", "allreduce", "bucket 0", 0.75, 1.25),
        ("compute", "backward", "a", 1.25, 1.5),            # alone: full rate
        # bucket 1 (2 MiB = 0.5 s of work) with the tail (0.25 s): both at half rate until the
        # tail ends at 2.0 (0.25 of comm done), then the comm alone at full rate: 0.25 s more
        ("compute", "backward", "backward tail", 1.5, 2.0),
        ("comm", "allreduce", "bucket 1", 1.5, 2.25),
        ("compute", "wait", "bucket 1", 2.0, 2.25),
        ("compute", "optimizer", "optimizer", 2.25, 2.375),
    ]


def test_interference_compute_only():
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1, 0]])
    res = simulate(tr, plan, net(), cfg(interference=Interference(compute_slowdown=2.0)))
    # segment b: 0.25 s at half rate while bucket 0 runs [0.75, 1.0] (0.125 done), then
    # 0.125 at full rate -> 1.125
    assert ("compute", "backward", "b", 0.75, 1.125) in log(res)
    assert ("comm", "allreduce", "bucket 0", 0.75, 1.0) in log(res)


def test_interference_none_equals_fast_path():
    tr = toy_trace()
    plan = plan_ddp(tr, DDPOptions(bucket_cap_mb=1))
    a = simulate(tr, plan, net(), cfg(num_iterations=3))
    b = simulate(tr, plan, net(), cfg(num_iterations=3, interference=Interference(compute_slowdown=1.0 + 1e-12)))
    assert [(x[0], x[1], x[2]) for x in log(a)] == [(x[0], x[1], x[2]) for x in log(b)]
    assert all(math.isclose(x[3], y[3], abs_tol=1e-9) and math.isclose(x[4], y[4], abs_tol=1e-9)
               for x, y in zip(log(a), log(b)))


def test_powersgd_chains_three_allreduces_per_bucket():
    tr = make_trace(model="psgd", params=[("w", (512, 512), "float32"), ("bias", (512,), "float32")],
                    ready_s=[0.5, 0.25], forward_s=0.5, backward_s=0.75, optimizer_s=0.125)
    plan = explicit_plan(tr, [[1], [0]])
    res = simulate(tr, plan, net(), cfg(comm_hook="powersgd"))
    comm = [(s.name, s.size_bytes) for s in res.spans if s.rank == 0 and s.stream == "comm"]
    # bias: 1-D, never compressed; w: 512 x 512, rank 1: P and Q are 512 x 1 fp32 = 2 KiB each
    assert comm == [
        ("bucket 0 powersgd:uncompressed", 2048), ("bucket 1 powersgd:uncompressed", 0),
        ("bucket 0 powersgd:P", 0), ("bucket 1 powersgd:P", 2048),
        ("bucket 0 powersgd:Q", 0), ("bucket 1 powersgd:Q", 2048),
    ]
    # before start_powerSGD_iter: the plain allreduce hook with the full bytes
    late = PowerSGDState(start_powerSGD_iter=1)
    res2 = simulate(tr, plan, net(), cfg(comm_hook="powersgd", powersgd=late))
    assert [(s.name, s.size_bytes) for s in res2.spans if s.rank == 0 and s.stream == "comm"] == [
        ("bucket 0", 2048), ("bucket 1", MIB)]


def test_determinism_and_seed():
    tr = toy_trace()
    plan = plan_ddp(tr, DDPOptions(bucket_cap_mb=1))
    c = cfg(world_size=64, num_iterations=4, jitter=0.1, seed=3)
    a = simulate(tr, plan, net(64), c)
    b = simulate(tr, plan, net(64), c)
    assert a == b
    other = simulate(tr, plan, net(64), cfg(world_size=64, num_iterations=4, jitter=0.1, seed=4))
    assert other.iterations != a.iterations


def _same_log(a, b):
    # equal up to float rounding: the folded ranks sum their work before scaling it
    return len(a) == len(b) and all(x[:3] == y[:3] and math.isclose(x[3], y[3], rel_tol=0, abs_tol=1e-12)
                                    and math.isclose(x[4], y[4], rel_tol=0, abs_tol=1e-12) for x, y in zip(a, b))


@pytest.mark.parametrize("seed,stragglers", [(1, {5: 1.5}), (0, {}), (3, {}), (4, {})])
def test_rest_representative_matches_full_simulation(seed, stragglers):
    tr = toy_trace()
    plan = plan_ddp(tr, DDPOptions(bucket_cap_mb=1))
    kw = dict(world_size=32, num_iterations=4, jitter=0.2, seed=seed, stragglers=stragglers)
    full = simulate(tr, plan, net(32), cfg(rank_group_size=1, **kw))       # all 32 ranks explicit
    folded = simulate(tr, plan, net(32), cfg(**kw))                        # samples + the rest
    assert full.ranks == tuple(range(32))
    assert folded.ranks == tuple(sorted({0, 4, 8, 12, 16, 20, 24, 28} | set(stragglers)))
    assert folded.meta["rest_representative"]
    # every collective starts and ends at the same time, so every shared rank's log is equal
    for r in folded.ranks:
        assert _same_log(log(folded, rank=r), log(full, rank=r))


def test_large_world_costs_a_handful_of_processes():
    tr = toy_trace()
    plan = plan_ddp(tr, DDPOptions(bucket_cap_mb=1))
    res = simulate(tr, plan, net(16384), cfg(world_size=16384, num_iterations=3, jitter=0.05, stragglers={9999: 1.25}))
    # rank 0, 8 evenly spaced samples (0, 2048, ...), the straggler; plus one 'rest' process
    assert res.ranks == (0, 2048, 4096, 6144, 8192, 9999, 10240, 12288, 14336)
    assert res.meta["rest_representative"]
    # the straggler's last-ready bucket gates every collective: no rank starts before it launched
    for b in res.buckets:
        assert b.start_s >= b.launch_s
    assert res.summary()["iteration_p50_s"] > 0


# ---- bad input ---------------------------------------------------------------------------

def test_plan_that_does_not_cover_the_trace():
    small = make_trace(model="small", params=[("a", (ELEMS,), "float32"), ("b", (ELEMS,), "float32")],
                       ready_s=[0.5, 0.25], forward_s=0.5, backward_s=1.0, optimizer_s=0.125)
    plan = explicit_plan(small, [[0, 1]])
    with pytest.raises(InputError, match=r"^plan.initial: parameters \[2\] of trace 'toy' are in no bucket; expected every parameter exactly once"):
        simulate(toy_trace(), plan, net(), cfg())


def test_world_size_bounds():
    tr = toy_trace()
    plan = plan_ddp(tr)
    with pytest.raises(InputError, match=r"^world_size: 4 is not accepted; expected at most 2"):
        simulate(tr, plan, net(2), cfg(world_size=4))
    with pytest.raises(InputError, match=r"^world_size: 0"):
        cfg(world_size=0)


class NanComm(AlphaBetaModel):
    def allreduce_s(self, size_bytes: int) -> float:
        return math.nan if size_bytes > 0 else 0.0


def test_negative_or_nan_durations():
    tr = toy_trace()
    with pytest.raises(InputError, match=r"comm model NanComm.allreduce_s\(3145728\): nan"):
        simulate(tr, plan_ddp(tr), NanComm(latency_s=0.0, num_ranks=2), cfg())
    with pytest.raises(InputError, match=r"forward_s: -0.5"):
        make_trace(model="bad", params=[("a", (4,), "float32")], ready_s=[0.1], forward_s=-0.5,
                   backward_s=0.1, optimizer_s=0.1)
    with pytest.raises(InputError, match=r"grad_ready_s\[0\]: nan"):
        make_trace(model="bad", params=[("a", (4,), "float32")], ready_s=[math.nan], forward_s=0.5,
                   backward_s=0.1, optimizer_s=0.1)


def test_unknown_comm_hook_and_unused_without_find_unused():
    with pytest.raises(InputError, match=r"^comm_hook: 'zip'"):
        cfg(comm_hook="zip")
    tr = toy_trace(ready=(0.75, 0.25, None))
    with pytest.raises(InputError, match=r"^find_unused_parameters: False is not accepted"):
        simulate(tr, explicit_plan(tr, [[0, 1, 2]]), net(), cfg())


def test_result_tables_hold_one_row_per_record():
    """The notebook tables (api.py's ``res.iterations_df()``) of the hand-worked first iteration."""
    res = simulate(toy_trace(), plan_ddp(toy_trace()), net(), cfg())
    spans, buckets, iters = res.spans_df(), res.buckets_df(), res.iterations_df()
    assert len(spans) == len(res.spans) and list(spans.columns[:3]) == ["rank", "stream", "kind"]
    assert buckets[["rank", "bucket", "ready_s", "end_s"]].values.tolist() == [[0, 0, 1.25, 2.0], [1, 0, 1.25, 2.0]]
    assert iters["iteration_s"].tolist() == [2.125, 2.125]


def test_spans_false_changes_nothing_else():
    tr = toy_trace()
    plan = plan_ddp(tr, DDPOptions(bucket_cap_mb=1))
    c = cfg(world_size=64, num_iterations=4, jitter=0.1, seed=3)
    full = simulate(tr, plan, net(64), c)
    lean = simulate(tr, plan, net(64), c, spans=False)
    assert lean.spans == () and full.spans
    assert (lean.iterations, lean.buckets, lean.summary()) == (full.iterations, full.buckets, full.summary())


def test_capture_hook_overhead_is_removed_from_backward():
    # the capture's hooks made backward twice as slow: ready 0.25/0.5/0.75 and backward 1.0
    # become 0.125/0.25/0.375 and 0.5
    tr = toy_trace(hook_overhead_frac=1.0)
    res = simulate(tr, explicit_plan(tr, [[0, 1, 2]]), net(), cfg())
    assert [x[1:] for x in log(res) if x[1] == "backward"] == [
        ("backward", "c", 0.5, 0.625), ("backward", "b", 0.625, 0.75), ("backward", "a", 0.75, 0.875),
        ("backward", "backward tail", 0.875, 1.0)]


def test_median_ready_times_out_of_order_never_step_back():
    from ddpsim.trace.records import IterationSample, Trace

    tr = toy_trace()
    # per-parameter medians can disagree with the recorded order: b's median (0.5) is later
    # than a's (0.375) although a is listed after b; a then fires at once after b
    its = (IterationSample(forward_s=0.5, backward_s=1.0, optimizer_s=0.125, grad_ready_s=(0.375, 0.5, 0.25)),)
    odd = Trace(model="toy", params=tr.params, grad_ready_order=(2, 1, 0), iterations=its)
    res = simulate(odd, explicit_plan(odd, [[0, 1, 2]]), net(), cfg())
    assert [x[1:] for x in log(res) if x[1] == "backward"] == [
        ("backward", "c", 0.5, 0.75), ("backward", "b", 0.75, 1.0),   # no span for a: 0 s
        ("backward", "backward tail", 1.0, 1.5)]                       # backward ends at 1.0 after start


@dataclass(frozen=True, kw_only=True)
class _OverheadNet(AlphaBetaModel):
    """The common network, plus DDP's calibrated per-iteration overhead (what a
    CalibratedCommModel offers when its calibration measured one)."""

    iteration_overhead_s: float = 0.0


def overhead_net(overhead_s):
    return _OverheadNet(latency_s=0.0, bandwidth_bytes_per_s=BW, num_ranks=2, iteration_overhead_s=overhead_s)


def test_ddp_iteration_overhead_from_the_comm_model():
    tr = toy_trace()
    plan = plan_ddp(tr)
    base = simulate(tr, plan, net(), cfg())
    res = simulate(tr, plan, overhead_net(0.125), cfg())
    # test_first_iteration_single_bucket's log, shifted by 0.125 s of DDP overhead after the forward
    assert log(res) == [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "forward", "ddp overhead", 0.5, 0.625),
        ("compute", "backward", "c", 0.625, 0.875),
        ("compute", "backward", "b", 0.875, 1.125),
        ("compute", "backward", "a", 1.125, 1.375),
        ("compute", "backward", "backward tail", 1.375, 1.625),
        ("comm", "allreduce", "bucket 0", 1.375, 2.125),
        ("compute", "wait", "bucket 0", 1.625, 2.125),
        ("compute", "optimizer", "optimizer", 2.125, 2.25),
    ]
    assert res.iterations[0].end_s == base.iterations[0].end_s + 0.125
    # zero overhead = no span, identical to the plain network
    res0 = simulate(tr, plan, overhead_net(0.0), cfg())
    assert log(res0) == log(base)
    # the same with interference (slow path): the overhead is compute-stream work
    inter = cfg(interference=Interference(compute_slowdown=1.0 + 2 ** -20, comm_slowdown=1.0))
    slow = simulate(tr, plan, overhead_net(0.125), inter)
    assert ("compute", "forward", "ddp overhead", 0.5, 0.625) in log(slow)


@pytest.mark.parametrize("value", [-0.5, float("nan"), "1ms"])
def test_bad_ddp_iteration_overhead(value):
    tr = toy_trace()
    with pytest.raises(InputError, match=r"iteration_overhead_s: .* is not accepted; expected a finite number of seconds >= 0"):
        simulate(tr, plan_ddp(tr), overhead_net(value), cfg())


def test_bandwidth_weighting_slows_compute_by_the_collectives_share_of_moved_bytes():
    # latency 0.25 s: bucket 0 (1 MiB) takes 0.25 + 0.25 = 0.5 s, of which the byte-moving share is
    # f0 = 1 - t(1 byte)/t(1 MiB) = 1 - (0.25 + 2**-22)/0.5 ~ 1/2, so compute runs 1 + (2 - 1) * f0 = 1.5x
    # slower under it; bucket 1 (2 MiB): 0.25 + 0.5 = 0.75 s, f1 = 1 - 0.25/0.75 = 2/3 -> 5/3x slower.
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1, 0]])
    inter = Interference(compute_slowdown=2.0, weighting="bandwidth")
    got = log(simulate(tr, plan, net(latency_s=0.25), cfg(interference=inter)))
    a_end = 1.125 + 0.125 + (0.25 - 0.125 / 1.5)   # a: 0.125 s at 1/1.5 under bucket 0, the rest alone
    want = [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "c", 0.5, 0.75),
        ("compute", "backward", "b", 0.75, 0.75 + 0.25 * 1.5),          # 1.125, all of it under bucket 0
        ("comm", "allreduce", "bucket 0", 0.75, 1.25),                  # comm_slowdown 1: unchanged
        ("compute", "backward", "a", 1.125, a_end),
        ("compute", "backward", "backward tail", a_end, a_end + 0.25 * 5 / 3),
        ("comm", "allreduce", "bucket 1", a_end, a_end + 0.75),
        ("compute", "wait", "bucket 1", a_end + 0.25 * 5 / 3, a_end + 0.75),
        ("compute", "optimizer", "optimizer", a_end + 0.75, a_end + 0.875),
    ]
    assert [x[:3] for x in got] == [x[:3] for x in want]
    for g, w in zip(got, want):
        assert g[3] == pytest.approx(w[3], abs=1e-5) and g[4] == pytest.approx(w[4], abs=1e-5), (g, w)
    # the same slowdown applied uniformly: b runs 2x slower for the whole of bucket 0
    uni = log(simulate(tr, plan, net(latency_s=0.25), cfg(interference=Interference(compute_slowdown=2.0))))
    assert ("compute", "backward", "b", 0.75, 1.25) in uni


def test_table_weighting_slows_compute_by_the_share_listed_for_the_collectives_size():
    # the GPU prior's table: 1 MiB (bucket 0) takes half of compute_slowdown 2 (1.5x), 2 MiB and up
    # (bucket 1) all of it (2x). b (0.25 s) runs wholly under bucket 0 (0.75-1.25): 0.75 -> 1.125;
    # a: 0.125 s under bucket 0 at 1/1.5 (0.125/1.5 of work), the rest alone: ends 1.25 + 0.25 - 0.125/1.5;
    # the tail's 0.25 s runs under bucket 1 at 1/2: 0.5 s.
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1, 0]])
    inter = Interference(compute_slowdown=2.0, weighting="table", size_weights=((1 << 20, 0.5), (2 << 20, 1.0)))
    got = log(simulate(tr, plan, net(latency_s=0.25), cfg(interference=inter)))
    a_end = 1.25 + 0.25 - 0.125 / 1.5
    want = [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "c", 0.5, 0.75),
        ("compute", "backward", "b", 0.75, 1.125),
        ("comm", "allreduce", "bucket 0", 0.75, 1.25),
        ("compute", "backward", "a", 1.125, a_end),
        ("compute", "backward", "backward tail", a_end, a_end + 0.5),
        ("comm", "allreduce", "bucket 1", a_end, a_end + 0.75),
        ("compute", "wait", "bucket 1", a_end + 0.5, a_end + 0.75),
        ("compute", "optimizer", "optimizer", a_end + 0.75, a_end + 0.875),
    ]
    assert [x[:3] for x in got] == [x[:3] for x in want]
    for g, w in zip(got, want):
        assert g[3] == pytest.approx(w[3], abs=1e-9) and g[4] == pytest.approx(w[4], abs=1e-9), (g, w)


@pytest.mark.parametrize("interference", [Interference(), Interference(compute_slowdown=2.0, weighting="table",
                                                                       size_weights=((0, 0.0),))])
def test_host_costs_put_a_cpu_clock_in_front_of_the_device(interference):
    # CPU: 0.25 s pre-forward, 0.5 s per autograd hook, 0.0625 s per bucket, 0.125 s per collective.
    # Forward waits for the pre-forward (0.25 -> 0.75). c: 0.75 -> 1.0, its hook ends on the CPU at
    # 0.75, bucket 0 issued at 0.75 + 0.0625 + 0.125 = 0.9375 < 1.0: launched at 1.0. b: 1.0 -> 1.25,
    # its hook ends at 1.4375: the device idles till then. a: 1.4375 -> 1.6875, hook at 1.9375 (idle
    # again); bucket 1 issued at 1.9375 + 0.1875 = 2.125 (0.75 s: 2.875); the tail runs 1.9375 -> 2.1875.
    # The second parametrisation runs the same on the interference path (a table of zero shares).
    from ddpsim.network.host_costs import HostCosts

    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1, 0]])
    host = HostCosts(pre_forward_s=0.25, hook_s_per_param=0.5, bucket_launch_s=0.0625, enqueue_s=0.125)
    got = log(simulate(tr, plan, net(latency_s=0.25), cfg(host_costs=host, interference=interference)))
    want = [
        ("compute", "forward", "forward", 0.25, 0.75),
        ("compute", "backward", "c", 0.75, 1.0),
        ("compute", "backward", "b", 1.0, 1.25),
        ("comm", "allreduce", "bucket 0", 1.0, 1.5),
        ("compute", "backward", "a", 1.4375, 1.6875),
        ("compute", "backward", "backward tail", 1.9375, 2.1875),
        ("comm", "allreduce", "bucket 1", 2.125, 2.875),
        ("compute", "wait", "bucket 1", 2.1875, 2.875),
        ("compute", "optimizer", "optimizer", 2.875, 3.0),
    ]
    assert [x[:3] for x in got] == [x[:3] for x in want]
    for g, w in zip(got, want):
        assert g[3] == pytest.approx(w[3], abs=1e-9) and g[4] == pytest.approx(w[4], abs=1e-9), (g, w)


@pytest.mark.parametrize("gabv, optimizer_start", [(False, 3.0), (True, 2.0)])
def test_copy_back_at_finalize_is_cpu_work_per_gradient(gabv, optimizer_start):
    # CPU costs only at finalize: 1 s per gradient's copy back (copy_bucket_to_grad). The CPU has
    # enqueued the whole step by t = 0 (every other cost 0); finalize copies bucket 0 (c: CPU 0 ->
    # 1) and bucket 1 (b, a: 1 -> 3). The device, done with bucket 1's all-reduce at 2.0, idles
    # until the CPU has enqueued the last copy: the optimizer runs 3.0 -> 3.125. With
    # gradient_as_bucket_view the gradients are the bucket's views: no copy back, optimizer at 2.0.
    from ddpsim.network.host_costs import HostCosts

    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1, 0]], options=DDPOptions(gradient_as_bucket_view=gabv))
    host = HostCosts(pre_forward_s=0.0, hook_s_per_param=0.0, bucket_launch_s=0.0, enqueue_s=0.0, copy_back_s_per_param=1.0)
    got = log(simulate(tr, plan, net(latency_s=0.25), cfg(host_costs=host)))
    assert got[-1][:3] == ("compute", "optimizer", "optimizer")
    assert got[-1][3] == pytest.approx(optimizer_start, abs=1e-9) and got[-1][4] == pytest.approx(optimizer_start + 0.125, abs=1e-9)


def test_copy_kernel_floor_per_parameter():
    # copy bandwidth 8 MiB/s: a's copy-in moves 2 MiB -> 0.25 s; a floor of 0.375 s lifts every
    # copy kernel to 0.375 s. Copy-out (one kernel per parameter) of bucket [b, a]: 2 x 0.375 s.
    from ddpsim.network.kernel_costs import copy_kernel_s

    assert copy_kernel_s(2 * MIB, 8 * MIB, 0.375) == 0.375
    assert copy_kernel_s(8 * MIB, 8 * MIB, 0.375) == 1.0
    assert copy_kernel_s(0, 8 * MIB, 0.375) == 0.0
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1, 0]])
    res = simulate(tr, plan, net(), cfg(copy_bandwidth_bytes_per_s=8 * MIB, copy_kernel_floor_s=0.375))
    spans = [(s.kind, s.name, s.end_s - s.start_s) for s in res.spans if s.rank == 0 and s.kind in ("copy_in", "copy_out")]
    assert [(k, n) for k, n, _ in spans] == [("copy_in", "c"), ("copy_in", "b"), ("copy_in", "a"),
                                             ("copy_out", "bucket 0"), ("copy_out", "bucket 1")]
    assert [d for _, _, d in spans] == pytest.approx([0.375, 0.375, 0.375, 0.375, 0.75])
    with pytest.raises(InputError, match=r"^copy_kernel_floor_s: -1 is not accepted"):
        cfg(copy_kernel_floor_s=-1)


def test_host_costs_rejected_when_negative():
    from ddpsim.network.host_costs import HostCosts

    with pytest.raises(InputError, match=r"^cost_model.enqueue_s: -1 is not accepted; expected a finite number of seconds >= 0$"):
        HostCosts(enqueue_s=-1)


def test_bandwidth_weighting_leaves_a_latency_only_collective_harmless():
    # no bandwidth term to speak of (2**50 B/s): every all-reduce is latency, f < 2**-27, compute at full rate
    tr = toy_trace()
    plan = explicit_plan(tr, [[2], [1, 0]])
    fast = AlphaBetaModel(latency_s=0.25, bandwidth_bytes_per_s=2.0 ** 50, num_ranks=2)
    res = simulate(tr, plan, fast, cfg(interference=Interference(compute_slowdown=8.0, weighting="bandwidth")))
    plain = simulate(tr, plan, fast, cfg())
    assert res.summary()["iteration_p50_s"] == pytest.approx(plain.summary()["iteration_p50_s"], abs=1e-7)
