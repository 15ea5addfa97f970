"""Comm hooks and SyncBatchNorm on ProcessGroupNCCL: event timings worked out by hand.

Setup: ``w`` (512 x 512 fp32) and ``bias`` (512 fp32), each in its own bucket (bias first, as DDP
orders it); forward 0.5 s; gradients ready 0.25 s (bias) and 0.5 s (w) after backward start,
backward 0.75 s; optimizer 0.125 s. Network: no latency, 16 KiB/s, so 2 KiB (bias's all-reduce,
w's P and Q at PowerSGD rank 1: 512 fp32 each) take 0.125 s. Free copies and kernels.
"""

from __future__ import annotations

import pytest

from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.engine.simulate import simulate
from ddpsim.network.host_costs import HostCosts
from ddpsim.plan.planner import explicit_plan
from ddpsim.engine.config import SimConfig
from ddpsim.network.interference import Interference
from ddpsim.trace.records import make_trace


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


# ---- SyncBatchNorm ------------------------------------------------------------------------
# conv.weight (1024 fp32), bn.weight and bn.bias (256 each: C = 256), fc.weight (4096); buffers
# bn.running_mean/var (256 fp32) and bn.num_batches_tracked. Gradients ready: fc 0.25, bn 0.5,
# conv 0.75 after backward start; backward 1.0 (tail 0.25), forward 0.5. Buckets [fc] (16 KiB:
# 1.0 s) and [bn.weight, bn.bias, conv] (6 KiB: 0.375 s). No buffer broadcast.
# SyncBN: backward all-reduce of 2C fp32 = 2 KiB (0.125 s); forward all-gather of 2 x (2C + 1)
# fp32 = 4104 B, costed as half the all-reduce of those bytes: A = 2052 / 16384 = 513/4096 s.
# Its place: bn's first gradient at 0.5 of the 1.0 s backward -> halfway through the forward.

A = 513 / 4096


def bn_trace():
    from ddpsim.trace.records import BufferRecord

    return make_trace(model="bn", params=[("conv.weight", (1024,), "float32"), ("bn.weight", (256,), "float32"),
                                          ("bn.bias", (256,), "float32"), ("fc.weight", (4096,), "float32")],
                      ready_s=[0.75, 0.5, 0.5, 0.25], forward_s=0.5, backward_s=1.0, optimizer_s=0.125,
                      buffers=(BufferRecord(name="bn.running_mean", dtype="float32", size_bytes=1024),
                               BufferRecord(name="bn.running_var", dtype="float32", size_bytes=1024),
                               BufferRecord(name="bn.num_batches_tracked", dtype="int64", size_bytes=8)))


def bn_plan(tr):
    from ddpsim.plan.planner import DDPOptions

    return explicit_plan(tr, [[3], [1, 2, 0]], DDPOptions(broadcast_buffers=False))


def test_sync_batchnorm_collectives_queue_with_the_buckets():
    # forward 0-0.25, all-gather 0.25-(0.25+A) (the forward waits), forward till T0 = 0.5 + A.
    # fc T0-(T0+0.25): bucket 0 launched (1.0 s). bn T0+0.25-(T0+0.5): its all-reduce queues behind
    # bucket 0 (T0+1.25-(T0+1.375)); the backward waits for it. conv (T0+1.375)-(T0+1.625):
    # bucket 1 (T0+1.625)-(T0+2.0); tail till T0+1.875; wait; optimizer (T0+2.0)-(T0+2.125).
    tr = bn_trace()
    t0 = 0.5 + A
    got = log(simulate(tr, bn_plan(tr), net("nccl"), cfg(sync_batchnorm=True)))
    assert_log(got, [
        ("compute", "forward", "forward", 0.0, 0.25),
        ("comm", "syncbn_allgather", "syncbn forward bn", 0.25, 0.25 + A),
        ("compute", "wait", "syncbn forward bn", 0.25, 0.25 + A),
        ("compute", "forward", "forward", 0.25 + A, t0),
        ("compute", "backward", "fc.weight", t0, t0 + 0.25),
        ("comm", "allreduce", "bucket 0", t0 + 0.25, t0 + 1.25),
        ("compute", "backward", "bn.bias", t0 + 0.25, t0 + 0.5),
        ("compute", "wait", "syncbn backward bn", t0 + 0.5, t0 + 1.375),
        ("comm", "syncbn_allreduce", "syncbn backward bn", t0 + 1.25, t0 + 1.375),
        ("compute", "backward", "conv.weight", t0 + 1.375, t0 + 1.625),
        ("comm", "allreduce", "bucket 1", t0 + 1.625, t0 + 2.0),
        ("compute", "backward", "backward tail", t0 + 1.625, t0 + 1.875),
        ("compute", "wait", "bucket 1", t0 + 1.875, t0 + 2.0),
        ("compute", "optimizer", "optimizer", t0 + 2.0, t0 + 2.125),
    ])


def test_sync_batchnorm_in_a_no_sync_step():
    # no_sync forward as above (0-(0.5+A)); its backward: 0.5 s, the all-reduce (0.125 s, the stream
    # is free), 0.5 s -> ends at 1.625 + A. The synchronised step then starts there.
    tr = bn_trace()
    res = simulate(tr, bn_plan(tr), net("nccl"), cfg(sync_batchnorm=True, no_sync_steps=1))
    comm = [(s.name, s.start_s, s.end_s) for s in res.spans if s.rank == 0 and s.stream == "comm"]
    assert [c[0] for c in comm] == ["syncbn forward bn", "syncbn backward bn", "syncbn forward bn", "bucket 0",
                                    "syncbn backward bn", "bucket 1"]
    assert comm[1][1:] == pytest.approx((1.0 + A, 1.125 + A), abs=1e-12)
    assert comm[2][1] == pytest.approx(1.625 + A + 0.25, abs=1e-12)


def test_sync_batchnorm_needs_batchnorm_layers():
    from ddpsim.errors import InputError

    tr = psgd_trace()
    with pytest.raises(InputError, match=r"^sync_batchnorm: True is not accepted for trace 'psgd': it lists no BatchNorm"):
        simulate(tr, explicit_plan(tr, [[1], [0]]), net("nccl"), cfg(sync_batchnorm=True))
    with pytest.raises(InputError, match=r"^sync_batchnorm: 'yes' is not accepted; expected true or false"):
        cfg(sync_batchnorm="yes")


def test_scenario_key_sync_batchnorm(tmp_path):
    # ResNet-50 has 53 BatchNorm layers: the stem's, 3 in each of its 16 bottlenecks, 4 downsamples
    from pathlib import Path

    from ddpsim.errors import InputError
    from ddpsim.pipeline.scenario import scenario_from_dict

    trace = str(Path(__file__).resolve().parents[1] / "traces" / "resnet50.h100.json")
    base = {"name": "bn", "trace": trace, "cluster": "dgx-h100", "world_size": 8,
            "simulation": {"iterations": 2, "jitter": "none"}}
    sc = scenario_from_dict({**base, "ddp": {"sync_batchnorm": True}})
    point = sc.base_point()
    pi = sc.build_point(point)
    assert pi.config.sync_batchnorm is True and sc.doc.ddp.sync_batchnorm is True
    res = simulate(pi.trace, pi.plan, pi.comm, pi.config)
    kinds = [s.kind for s in res.spans if s.rank == 0 and s.stream == "comm" and s.iteration == 2]
    assert kinds.count("syncbn_allgather") == 53 and kinds.count("syncbn_allreduce") == 53
    plain = scenario_from_dict(base)
    pp = plain.build_point(plain.base_point())
    assert plain.doc.ddp.sync_batchnorm is False and pp.config.sync_batchnorm is False
    ref = simulate(pp.trace, pp.plan, pp.comm, pp.config)
    assert [i.iteration_s for i in res.iterations if i.rank == 0][-1] > [i.iteration_s for i in ref.iterations if i.rank == 0][-1]
    with pytest.raises(InputError, match=r"^s: ddp.sync_batchnorm: 'yes' is not accepted; expected true or false$"):
        scenario_from_dict({**base, "ddp": {"sync_batchnorm": "yes"}}, source="s")


@pytest.mark.parametrize("kw", [dict(comm_hook="powersgd"), dict(sync_batchnorm=True)])
def test_folded_ranks_match_explicit_ones(kw):
    # 32 ranks with jitter: the folded 'rest' process issues the hook's synchronize and the
    # SyncBatchNorm collectives like every explicit rank (same logs as all 32 explicit)
    import math

    tr = bn_trace()
    plan = bn_plan(tr)
    comm = AlphaBetaModel(latency_s=0.0, bandwidth_bytes_per_s=16384.0, num_ranks=32, backend="nccl")
    base = dict(world_size=32, num_iterations=3, jitter=0.2, seed=1, **kw)
    full = simulate(tr, plan, comm, SimConfig(rank_group_size=1, **base))
    folded = simulate(tr, plan, comm, SimConfig(**base))
    assert folded.meta["rest_representative"]
    for r in folded.ranks:
        a, b = log(folded, r), log(full, r)
        assert len(a) == len(b) and all(x[:3] == y[:3] and math.isclose(x[3], y[3], abs_tol=1e-12)
                                        and math.isclose(x[4], y[4], abs_tol=1e-12) for x, y in zip(a, b))


def test_simulate_cli_sync_batchnorm_key(tmp_path, capsys):
    # the SyncBatchNorm toy trace through 'ddpsim simulate' (DDP's plan: the buckets go after
    # backward); on a trace without BatchNorm: one line, exit 2
    import json

    from ddpsim.cli.main import main
    from ddpsim.trace.records import save_trace

    path = str(save_trace(bn_trace(), tmp_path / "bn.json"))
    args = ["simulate", "--trace", path, "--set", "cluster.latency_us=0", "--set", "cluster.bandwidth_gbps=1",
            "--set", "world_size=2", "--set", "simulation.jitter=none", "--set", "simulation.iterations=2", "--format", "json"]
    assert main(args + ["--set", "ddp.sync_batchnorm=true"]) == 0
    out = capsys.readouterr().out
    assert main(args) == 0
    plain = capsys.readouterr().out
    # at 1 GB/s and nothing else on the stream then: the all-gather's 2052 B and the all-reduce's 2048 B
    got = json.loads(out)["summary"]["iteration_p50_s"] - json.loads(plain)["summary"]["iteration_p50_s"]
    assert got == pytest.approx((2052 + 2048) / 1e9, rel=1e-6)
    bad = str(save_trace(psgd_trace(), tmp_path / "p.json"))
    assert main(["simulate", "--trace", bad] + args[3:] + ["--set", "ddp.sync_batchnorm=true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sync_batchnorm: True is not accepted for trace 'psgd'" in err


def test_report_setup_names_the_terms():
    from pathlib import Path

    from ddpsim.api import cost_terms
    from ddpsim.pipeline.scenario import scenario_from_dict

    trace = str(Path(__file__).resolve().parents[1] / "traces" / "resnet50.h100.json")
    sc = scenario_from_dict({"name": "bn", "trace": trace, "cluster": "dgx-h100", "world_size": 8,
                             "ddp": {"sync_batchnorm": True, "comm_hook": "powersgd"}})
    lines = cost_terms(sc, sc.base_point(), sc.build_point(sc.base_point()))
    assert any(x.startswith("PowerSGD on NCCL:") for x in lines) and any(x.startswith("SyncBatchNorm:") for x in lines)
    gloo = scenario_from_dict({"name": "c", "trace": trace.replace("resnet50.h100", "mlp.cpu"), "cluster": "cpu-gloo",
                               "ddp": {"comm_hook": "powersgd"}})
    assert not any(x.startswith("PowerSGD") for x in cost_terms(gloo, gloo.base_point(), gloo.build_point(gloo.base_point())))
