"""Idle launches (ddpsim.engine.simulate): an all-reduce launched onto an idle communication stream
pays the comm model's ``idle_launch_extra_s`` once every rank waits on a collective.

Setup as in test_engine.py (three 1 MiB fp32 parameters, gradients ready c 0.25, b 0.5,
a 0.75 s into backward, forward 0.5 s, optimizer 0.125 s), but backward takes 1.125 s, so
backward compute ends 0.375 s after the last hook, at 1.625 s. Extra: 0.125 s. Every number
is a sum of powers of two: the results are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ddpsim.network.comm_model import AlphaBetaModel, CommModel
from ddpsim.engine.simulate import simulate
from ddpsim.plan.planner import explicit_plan
from ddpsim.engine.config import SimConfig
from ddpsim.network.interference import Interference
from ddpsim.trace.records import make_trace

MIB = 1024 * 1024
EXTRA = 0.125


def trace():
    return make_trace(model="toy", params=[(n, (MIB // 4,), "float32") for n in "abc"], ready_s=[0.75, 0.5, 0.25],
                      forward_s=0.5, backward_s=1.125, optimizer_s=0.125)


@dataclass(frozen=True)
class IdleNet(CommModel):
    """AlphaBetaModel plus a constant idle-launch extra (as a calibration with an
    after-compute curve offers)."""

    bandwidth: float
    extra: float = EXTRA
    backend: str = "alpha-beta"
    num_ranks: int = 2

    def allreduce_s(self, size_bytes):
        return size_bytes / self.bandwidth

    def broadcast_s(self, size_bytes):
        return size_bytes / self.bandwidth

    def describe(self):
        return {"model": "idle-test"}

    @property
    def idle_launch_extra_s(self):
        return lambda size_bytes: self.extra


def cfg(**kw):
    return SimConfig(world_size=2, num_iterations=1, jitter="none", **kw)


def step(res):
    return max(it.end_s for it in res.iterations)


def comm(res, rank=0):
    return [(s.name, s.start_s, s.end_s) for s in res.spans if s.rank == rank and s.stream == "comm"]


def test_the_bucket_waited_for_at_the_end_of_backward_pays_the_extra():
    tr = trace()
    plan = explicit_plan(tr, [[0, 1, 2]])   # one 3 MiB bucket: launched at the last hook, 1.25 s
    res = simulate(tr, plan, IdleNet(4 * MIB), cfg())
    # idle stream at launch; ranks compute the tail until 1.625, then wait: + 0.125
    assert comm(res) == [("bucket 0", 1.25, 2.0 + EXTRA)]
    assert step(res) == 2.0 + EXTRA + 0.125   # the optimizer after the wait
    assert comm(simulate(tr, plan, AlphaBetaModel(latency_s=0.0, bandwidth_bytes_per_s=4 * MIB), cfg())) == [("bucket 0", 1.25, 2.0)]


def test_slow_path_adds_the_extra_when_the_ranks_stop_computing():
    tr = trace()
    plan = explicit_plan(tr, [[0, 1, 2]])
    inter = Interference(compute_slowdown=1.0, comm_slowdown=2.0)
    res = simulate(tr, plan, IdleNet(4 * MIB), cfg(interference=inter))
    # 1.25..1.625 at half rate: 0.1875 of 0.75 s done; then 0.5625 + 0.125 at full rate
    assert comm(res) == [("bucket 0", 1.25, 1.625 + 0.5625 + EXTRA)]
    base = simulate(tr, plan, AlphaBetaModel(latency_s=0.0, bandwidth_bytes_per_s=4 * MIB), cfg(interference=inter))
    assert comm(base) == [("bucket 0", 1.25, 1.625 + 0.5625)]


def test_all_reduces_that_overlap_backward_pay_nothing():
    tr = trace()
    plan = explicit_plan(tr, [[2], [1], [0]])   # 1 MiB each, 0.125 s at 8 MiB/s, all done before 1.625
    res = simulate(tr, plan, IdleNet(8 * MIB), cfg())
    assert comm(res) == [("bucket 0", 0.75, 0.875), ("bucket 1", 1.0, 1.125), ("bucket 2", 1.25, 1.375)]
    assert step(res) == 1.625 + 0.125


def test_a_bucket_queued_behind_another_pays_nothing():
    tr = trace()
    plan = explicit_plan(tr, [[1, 2], [0]])   # [c, b] 2 MiB ready at 1.0; [a] ready at 1.25, queued
    res = simulate(tr, plan, IdleNet(4 * MIB), cfg())
    # bucket 0 overlaps compute (ends 1.5 < 1.625); bucket 1 starts behind it and runs while
    # the ranks wait, but the stream was busy when it was launched: the loop's cost
    assert comm(res) == [("bucket 0", 1.0, 1.5), ("bucket 1", 1.5, 1.75)]
    assert step(res) == 1.75 + 0.125


def test_folded_ranks_count_among_the_waiting():
    tr = trace()
    plan = explicit_plan(tr, [[0, 1, 2]])
    # 32 jittered ranks: 8 simulated explicitly, 24 folded into one process that waits too
    res = simulate(tr, plan, IdleNet(4 * MIB, num_ranks=32), SimConfig(world_size=32, num_iterations=2, jitter=0.1, seed=1))
    assert len(res.ranks) == 8
    spans = comm(res)
    assert len(spans) == 2 and all(e - s == pytest.approx(0.75 + EXTRA) for _, s, e in spans)


@dataclass(frozen=True)
class SlowForwardNet(IdleNet):
    extra: float = 0.0
    forward_factor: float = 1.5

    @property
    def ddp_forward_factor(self):
        return self.forward_factor


def test_a_ddp_forward_factor_stretches_every_forward():
    tr = trace()
    plan = explicit_plan(tr, [[0, 1, 2]])
    res = simulate(tr, plan, SlowForwardNet(4 * MIB), cfg())
    fwd = [(s.start_s, s.end_s) for s in res.spans if s.rank == 0 and s.kind == "forward"]
    assert fwd == [(0.0, 0.75)]                       # 0.5 s x 1.5
    assert comm(res) == [("bucket 0", 1.5, 2.25)]     # everything after it 0.25 s later
