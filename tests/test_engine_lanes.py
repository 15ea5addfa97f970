"""Lanes (ddpsim.engine.simulate): a process group worked by several threads (ProcessGroupGloo) runs
up to ``comm_lanes`` collectives side by side, started in launch order, each paced by the comm
model's ``concurrent_rate`` for the number in progress.

Setup as in test_engine_idle.py: three 1 MiB fp32 parameters, gradients ready c 0.25, b 0.5,
a 0.75 s into backward (at 0.75, 1.0, 1.25 s: forward takes 0.5 s), backward 1.125 s, one
bucket per parameter; every all-reduce takes 1 s alone (1 MiB at 1 MiB/s). Every number is a
sum of powers of two: the results are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ddpsim.engine.simulate import simulate
from ddpsim.network.comm_model import CommModel
from ddpsim.errors import InputError
from ddpsim.plan.planner import explicit_plan
from ddpsim.engine.config import SimConfig
from ddpsim.network.interference import Interference
from conftest import MIB, toy_trace


@dataclass(frozen=True)
class LaneNet(CommModel):
    """1 MiB/s collectives on ``lanes`` lanes, each at ``pace`` while two progress at once."""

    lanes: int = 2
    pace: float = 1.0
    backend: str = "gloo"
    num_ranks: int = 2

    def allreduce_s(self, size_bytes):
        return size_bytes / MIB

    def broadcast_s(self, size_bytes):
        return size_bytes / MIB

    def describe(self):
        return {"model": "lanes-test"}

    @property
    def comm_lanes(self):
        return self.lanes

    def concurrent_rate(self, kind, size_bytes, n):
        assert kind == "allreduce" and size_bytes == MIB and n == 2
        return self.pace


def comm(res, rank=0):
    return [(s.name, s.start_s, s.end_s) for s in res.spans if s.rank == rank and s.stream == "comm"]


def run(net, **kw):
    tr = toy_trace()
    return simulate(tr, explicit_plan(tr, [[2], [1], [0]]), net, SimConfig(world_size=2, num_iterations=1, jitter="none", **kw))


def test_one_lane_is_the_in_order_stream():
    assert comm(run(LaneNet(lanes=1))) == [("bucket 0", 0.75, 1.75), ("bucket 1", 1.75, 2.75), ("bucket 2", 2.75, 3.75)]


def test_two_lanes_at_full_pace_overlap_and_the_third_waits_for_a_lane():
    # bucket 1 starts at its launch beside bucket 0; bucket 2 (launched 1.25) waits for bucket 0's lane
    assert comm(run(LaneNet(pace=1.0))) == [("bucket 0", 0.75, 1.75), ("bucket 1", 1.0, 2.0), ("bucket 2", 1.75, 2.75)]


def test_two_lanes_sharing_one_pace_conserve_the_work():
    # pace 1/2 each while two run: bucket 0 alone 0.75..1.0 (0.25 done), then both at 1/2:
    # bucket 0 ends at 2.5; bucket 1 has 0.25 left, shares with bucket 2 until 3.0; bucket 2
    # has 0.75 left alone: 3.75 -- the one lane's end
    assert comm(run(LaneNet(pace=0.5))) == [("bucket 0", 0.75, 2.5), ("bucket 1", 1.0, 3.0), ("bucket 2", 2.5, 3.75)]


def test_a_pace_above_one_is_what_a_queue_worked_back_to_back_saves():
    # pace 2 while two run: bucket 0 0.25 done at 1.0, the rest at 2x: 1.375; bucket 1 then has
    # 0.75 done, bucket 2 starts at 1.375 beside it: bucket 1 ends 1.5; bucket 2 has 0.25 done, alone to 2.25
    assert comm(run(LaneNet(pace=2.0))) == [("bucket 0", 0.75, 1.375), ("bucket 1", 1.0, 1.5), ("bucket 2", 1.375, 2.25)]


def test_the_slow_path_agrees_when_interference_costs_nothing():
    none = Interference(compute_slowdown=1.0, comm_slowdown=1.0, weighting="bandwidth")  # slow path, no slowdown
    for pace in (0.5, 1.0, 2.0):
        assert comm(run(LaneNet(pace=pace), interference=none)) == comm(run(LaneNet(pace=pace)))


def test_with_interference_a_lane_slows_while_ranks_compute():
    # comm at half pace while any rank computes (backward compute ends at 1.625); two lanes at pace 1
    res = run(LaneNet(pace=1.0), interference=Interference(compute_slowdown=1.0, comm_slowdown=2.0))
    # bucket 0: 0.75..1.625 at 1/2 (0.4375 done), rest 0.5625 alone: 2.1875; bucket 1 from 1.0:
    # 0.3125 done by 1.625, 0.6875 left: 2.3125; bucket 2 starts at 2.1875, 1 s alone after 2.3125: 3.1875
    assert comm(res) == [("bucket 0", 0.75, 2.1875), ("bucket 1", 1.0, 2.3125), ("bucket 2", 2.1875, 3.1875)]


@pytest.mark.parametrize("lanes", [0, True, 1.5])
def test_bad_lanes(lanes):
    with pytest.raises(InputError, match=r"^comm model LaneNet.comm_lanes: .* is not accepted; expected an integer >= 1$"):
        run(LaneNet(lanes=lanes))


@pytest.mark.parametrize("pace", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_pace(pace):
    with pytest.raises(InputError, match=r"^comm model LaneNet.concurrent_rate\('allreduce', 1048576, 2\): .* is not "
                                         r"accepted; expected a finite number > 0$"):
        run(LaneNet(pace=pace))
