"""Comm hooks and SyncBatchNorm on ProcessGroupNCCL: event timings worked out by hand.

Setup: ``w`` (512 x 512 fp32) and ``bias`` (512 fp32), each in its own bucket (bias first, as DDP
orders it); forward 0.5 s; gradients ready 0.25 s (bias) and 0.5 s (w) after backward start,
backward 0.75 s; optimizer 0.125 s. Network: no latency, 16 KiB/s, so 2 KiB (bias's all-reduce,
w's P and Q at PowerSGD rank 1: 512 fp32 each) take 0.125 s. Free copies and kernels.
"""

from __future__ import annotations

import pytest

from ddpsim.comm_model import AlphaBetaModel
from ddpsim.engine import simulate
from ddpsim.hostcost import HostCosts
from ddpsim.plan import explicit_plan
from ddpsim.simconfig import Interference, SimConfig
from ddpsim.trace import make_trace


def psgd_trace():
    return make_trace(model="psgd", params=[("w", (512, 512), "float32"), ("bias", (512,), "float32")],
                      ready_s=[0.5, 0.25], forward_s=0.5, backward_s=0.75, optimizer_s=0.125)


def net(backend):
    return AlphaBetaModel(latency_s=0.0, bandwidth_bytes_per_s=16384.0, num_ranks=2, backend=backend)


def cfg(**kw):
    return SimConfig(world_size=2, num_iterations=1, jitter="none", **kw)


def _order(span):
    return span[3], span[4], span[0], span[2]


def log(res, rank=0):
    return [(s.stream, s.kind, s.name, s.start_s, s.end_s) for s in res.spans if s.rank == rank]


def assert_log(got, want):
    got, want = sorted(got, key=_order), sorted(want, key=_order)
    assert [g[:3] for g in got] == [w[:3] for w in want]
    for g, w in zip(got, want):
        assert g[3] == pytest.approx(w[3], abs=1e-12) and g[4] == pytest.approx(w[4], abs=1e-12), (g, w)


def test_powersgd_on_gloo_chains_after_backward():
    # gloo: the futures complete when the all-reduce is done; P and Q follow in finalize.
    # bias 0.5-0.75, U0 (2 KiB) 0.75-0.875; w 0.75-1.0, U1 (0 B) at 1.0; tail 1.0-1.25;
    # P0 (0 B) at 1.25, P1 1.25-1.375, Q0 (0 B) at 1.375, Q1 1.375-1.5; optimizer 1.5-1.625
    tr = psgd_trace()
    got = log(simulate(tr, explicit_plan(tr, [[1], [0]]), net("gloo"), cfg(comm_hook="powersgd")))
    assert_log(got, [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "bias", 0.5, 0.75),
        ("comm", "allreduce", "bucket 0 powersgd:uncompressed", 0.75, 0.875),
        ("compute", "backward", "w", 0.75, 1.0),
        ("comm", "allreduce", "bucket 1 powersgd:uncompressed", 1.0, 1.0),
        ("compute", "backward", "backward tail", 1.0, 1.25),
        ("comm", "allreduce", "bucket 0 powersgd:P", 1.25, 1.25),
        ("comm", "allreduce", "bucket 1 powersgd:P", 1.25, 1.375),
        ("compute", "wait", "bucket 1 powersgd:P", 1.25, 1.375),
        ("comm", "allreduce", "bucket 0 powersgd:Q", 1.375, 1.375),
        ("comm", "allreduce", "bucket 1 powersgd:Q", 1.375, 1.5),
        ("compute", "wait", "bucket 1", 1.375, 1.5),
        ("compute", "optimizer", "optimizer", 1.5, 1.625),
    ])


@pytest.mark.parametrize("interference", [Interference(), Interference(compute_slowdown=2.0, weighting="table",
                                                                       size_weights=((0, 0.0),))])
def test_powersgd_on_nccl_synchronizes_inside_the_hook(interference):
    # NCCL: the hook enqueues U, P, Q at once and torch.cuda.synchronize blocks the CPU until they
    # are done; the backward after the hook waits for it. CPU: 0.5 s per autograd hook, 0.0625 s
    # per collective. bias 0.5-0.75 (its hook ends on the CPU at 0.5); U0 0.75-0.875, P0 and Q0
    # (0 B) at 0.875; the synchronize returns at 0.875. w 0.875-1.125; its hook ends on the CPU at
    # 0.875 + 0.5 = 1.375 (the device idles till then); U1 (0 B) issued at 1.4375, P1 at 1.5
    # (1.5-1.625), Q1 at 1.5625 (queued: 1.625-1.75); synchronize till 1.75; tail 1.75-2.0.
    # Second parametrisation: the same on the interference path (a table of zero shares).
    tr = psgd_trace()
    host = HostCosts(pre_forward_s=0.0, hook_s_per_param=0.5, bucket_launch_s=0.0, enqueue_s=0.0625)
    res = simulate(tr, explicit_plan(tr, [[1], [0]]), net("nccl"),
                   cfg(comm_hook="powersgd", host_costs=host, interference=interference))
    assert_log(log(res), [
        ("compute", "forward", "forward", 0.0, 0.5),
        ("compute", "backward", "bias", 0.5, 0.75),
        ("comm", "allreduce", "bucket 0 powersgd:uncompressed", 0.75, 0.875),
        ("compute", "wait", "powersgd synchronize bucket 0", 0.75, 0.875),
        ("comm", "allreduce", "bucket 0 powersgd:P", 0.875, 0.875),
        ("comm", "allreduce", "bucket 0 powersgd:Q", 0.875, 0.875),
        ("compute", "backward", "w", 0.875, 1.125),
        ("compute", "wait", "powersgd synchronize bucket 1", 1.375, 1.75),
        ("comm", "allreduce", "bucket 1 powersgd:uncompressed", 1.4375, 1.4375),
        ("comm", "allreduce", "bucket 1 powersgd:P", 1.5, 1.625),
        ("comm", "allreduce", "bucket 1 powersgd:Q", 1.625, 1.75),
        ("compute", "backward", "backward tail", 1.75, 2.0),
        ("compute", "optimizer", "optimizer", 2.0, 2.125),
    ])
    # the bucket's launch is when its first all-reduce was issued, before the synchronize
    assert [(b.bucket, b.launch_s) for b in res.buckets if b.rank == 0] == [(0, 0.75), (1, 1.375)]


def test_powersgd_on_nccl_callback_kernels_run_behind_p_and_q():
    # compute_qs's kernels follow P, decompress's follow Q on the collective's stream: with copies
    # at 1 GiB/s they are part of P's and Q's spans, and the hook's synchronize waits for them.
    tr = psgd_trace()
    bw = float(1 << 30)
    res = simulate(tr, explicit_plan(tr, [[1], [0]]), net("nccl"),
                   cfg(comm_hook="powersgd", copy_bandwidth_bytes_per_s=bw))
    n, r = 512 * 512, 512
    qs_s = (n + r + r) * 4 / bw            # Q = M^T P: reads M and P, writes Q
    dec_s = (n + r + r + 3 * n) * 4 / bw   # M = P Q^T, then error feedback (no uncompressed part in w)
    spans = {s.name: s for s in res.spans if s.rank == 0 and s.stream == "comm"}
    assert spans["bucket 1 powersgd:P"].end_s - spans["bucket 1 powersgd:P"].start_s == pytest.approx(0.125 + qs_s)
    assert spans["bucket 1 powersgd:Q"].end_s - spans["bucket 1 powersgd:Q"].start_s == pytest.approx(0.125 + dec_s)
    sync = next(s for s in res.spans if s.rank == 0 and s.name == "powersgd synchronize bucket 1")
    assert sync.end_s == pytest.approx(spans["bucket 1 powersgd:Q"].end_s)
    # finalize has nothing left to decompress
    assert not any(s.name.startswith("powersgd decompress") for s in res.spans)
