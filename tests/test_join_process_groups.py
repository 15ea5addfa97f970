"""Join (ddpsim.engine.join) and round-robin process groups (ddpsim.engine.process_groups):
hand-worked engine logs, the scenario keys' refusals, and short real gloo runs.

Setup as in test_engine_lanes.py: three 1 MiB fp32 parameters, gradients ready c 0.25, b 0.5,
a 0.75 s into backward (at 0.75, 1.0, 1.25 s: forward takes 0.5 s), backward 1.125 s,
optimizer 0.125 s, one bucket per parameter. The network moves 1 MiB/s and a 1-byte
collective costs only the latency, so every all-reduce asks the link's whole capacity.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddpsim.engine.config import SimConfig
from ddpsim.engine.simulate import simulate
from ddpsim.errors import InputError
from ddpsim.network.comm_model import CommModel
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.plan.planner import explicit_plan
from conftest import MIB, toy_trace


@dataclass(frozen=True)
class Net(CommModel):
    """``latency_s`` + 1 MiB/s beyond one byte: t(1) is the latency, every size's rate 1 MiB/s."""

    latency_s: float = 0.0
    backend: str = "nccl"
    num_ranks: int = 2

    def allreduce_s(self, size_bytes):
        return self.latency_s + (size_bytes / MIB if size_bytes > 1 else 0.0)

    def broadcast_s(self, size_bytes):
        return self.allreduce_s(size_bytes)

    def describe(self):
        return {"model": "join-pg-test"}


def run(net, **kw):
    tr = toy_trace()
    kw.setdefault("num_iterations", 1)
    kw.setdefault("num_warmup_iterations", 0)
    return simulate(tr, explicit_plan(tr, [[2], [1], [0]]), net, SimConfig(world_size=2, jitter="none", **kw))


def comm(res, rank=0, iteration=None):
    return [(s.name, s.start_s, s.end_s) for s in res.spans
            if s.rank == rank and s.stream == "comm" and (iteration is None or s.iteration == iteration)]


# ---- round-robin process groups ------------------------------------------------------------

def test_one_group_is_the_in_order_stream():
    assert comm(run(Net(), process_groups=1)) == [("bucket 0", 0.75, 1.75), ("bucket 1", 1.75, 2.75), ("bucket 2", 2.75, 3.75)]


def test_two_groups_share_the_link_and_bucket_2_waits_for_its_group():
    # bucket 0 (group 0) alone 0.75..1.0 (0.25 done); bucket 1 (group 1) starts at its launch, both at
    # half pace: bucket 0 ends 1.0 + 0.75 / 0.5 = 2.5; bucket 2 (group 0 again) waits for it, then
    # shares with bucket 1 (0.25 left: ends 3.0), then alone: 2.5 + 0.25 + 0.75 = 3.75 ... the
    # link's work is conserved: the last bucket ends when it does on one stream
    assert comm(run(Net(), process_groups=2)) == [("bucket 0", 0.75, 2.5), ("bucket 1", 1.0, 3.0), ("bucket 2", 2.5, 3.75)]


def test_two_groups_overlap_the_latency():
    # t = 0.5 + 1 = 1.5 s alone, w = 1 - 0.5 / 1.5 = 2/3 of it bytes; two in flight ask twice the link:
    # f = 1/2, pace = 1 / (1/3 + (2/3) / (1/2)) = 3/5. Bucket 0 alone 0.75..1.0 (0.25 done), then
    # 1.25 at 3/5: ends 1.0 + 25/12; bucket 1 has done 1.25 by then, 0.25 left at 3/5: ends 3.5;
    # bucket 2 from 1.0 + 25/12: 0.25 by 3.5, then 1.25 alone: 4.75 (one stream: 5.25)
    got = comm(run(Net(latency_s=0.5), process_groups=2))
    want = [("bucket 0", 0.75, 1.0 + 25 / 12), ("bucket 1", 1.0, 3.5), ("bucket 2", 1.0 + 25 / 12, 4.75)]
    assert [n for n, _, _ in got] == [n for n, _, _ in want]
    for (_, s, e), (_, ws, we) in zip(got, want):
        assert s == pytest.approx(ws, abs=1e-12) and e == pytest.approx(we, abs=1e-12)
    assert comm(run(Net(latency_s=0.5)))[-1][2] == 5.25


@dataclass(frozen=True)
class IdleNet(Net):
    """:class:`Net` with an idle-launch extra of ``extra_s`` per all-reduce (a CPU host's wake-up)."""

    extra_s: float = 0.5

    @property
    def idle_launch_extra_s(self):
        return lambda size_bytes: self.extra_s


def test_one_bucket_pays_the_idle_extra_on_any_number_of_groups():
    # one 3 MiB bucket, ready at 1.25 (0.5 forward + 0.75): 3 s of work on an idle stream; backward
    # ends at 1.625, then every rank waits, so the extra 0.5 s is added: 1.25 + 3 + 0.5 = 4.75, the
    # same on one stream and on two groups (the second never gets a collective)
    tr = toy_trace()
    plan = explicit_plan(tr, [[2, 1, 0]])
    for n in (1, 2, 3):
        res = simulate(tr, plan, IdleNet(), SimConfig(world_size=2, jitter="none", num_iterations=1,
                                                      num_warmup_iterations=0, process_groups=n))
        assert comm(res) == [("bucket 0", 1.25, 4.75)], n


def test_idle_extra_only_for_a_group_that_was_idle():
    # two groups, one bucket each per group: bucket 0 (group 0) 0.75..1.0 alone, bucket 1 (group 1,
    # idle) from 1.0, both at half pace; bucket 2 waits for group 0. Every rank waits from 1.625:
    # bucket 0 (launched on its idle group) and bucket 1 each get 0.5 s more work; bucket 2 arrived
    # while group 0 was busy: none. Work conserved: 3 s of bytes + 2 x 0.5 s extra from 0.75 = 4.75
    got = comm(run(IdleNet(), process_groups=2))
    assert got[-1][0] == "bucket 2" and got[-1][2] == pytest.approx(4.75, abs=1e-12)
    assert comm(run(Net(), process_groups=2))[-1][2] == 3.75


def test_process_groups_refused_in_one_line():
    with pytest.raises(InputError, match=r"^process_groups: 0 is not accepted; expected an integer >= 1 and <= 64$"):
        SimConfig(process_groups=0)


# ---- Join ----------------------------------------------------------------------------------

def test_join_log_and_phases_hand_worked():
    # rank 0 has 3 batches, rank 1 has 2: iterations 1-2 (phase 0) both active, iteration 3 only rank
    # 0; rank 1 slowed 2x while active. Phase 0: rank 1's forward 1.0, its gradients at 1.5, 2.0, 2.5,
    # so the buckets run 1.5-2.5, 2.5-3.5, 3.5-4.5; rank 1 ends at 4.5 + 2 x 0.125 = 4.75 (rank 0 at
    # 4.625), the next count's last arrival: step 4.75. Iteration 3 begins on rank 0 at 9.375, on the
    # joined rank 1 at 9.5 (its count's last arrival); rank 0 alone runs 0.75-1.75 ... 2.75-3.75, its
    # optimizer to 9.375 + 3.875 = 13.25, where the exit's count arrives: phase 1's step is
    # 13.25 - 9.5 = 3.75, and the phases add up to the loop exactly (2 x 4.75 + 3.75 = 13.25).
    res = run(Net(), num_iterations=2, num_warmup_iterations=1, join_batches=(3, 2), stragglers={1: 2.0})
    j = res.meta["join"]
    assert [(p["active_ranks"], p["epoch_iterations"], p["step_s"]) for p in j["phases"]] == [(2, 2, 4.75), (1, 1, 3.75)]
    assert j["loop_s"] == 13.25 and j["epoch_mean_step_s"] == 13.25 / 3
    # iteration 3: Join's count and grad-sync flags (4 bytes each) once the joined rank has launched
    # them too, then the buckets as rank 0 makes them ready (the joined rank shadows them with no
    # compute), then the exit: the last count, the common rank (int64), the model's 3 MiB broadcast
    t, flag = 9.375, 4 / MIB
    end = 13.25
    assert comm(res, iteration=3) == [("join:count", 9.5, 9.5 + flag), ("join:grad_sync", 9.5 + flag, 9.5 + 2 * flag),
                                      ("bucket 0", t + 0.75, t + 1.75), ("bucket 1", t + 1.75, t + 2.75),
                                      ("bucket 2", t + 2.75, t + 3.75), ("join:exit_count", end, end + flag),
                                      ("join:final_common_rank", end + flag, end + flag + 8 / MIB),
                                      ("join:sync_final_model[0]", end + flag + 8 / MIB, end + flag + 8 / MIB + 3.0)]
    assert {s.kind for s in res.spans if s.rank == 1 and s.iteration == 3 and s.stream == "compute"} <= {"wait"}
    assert j["exit_s"] == pytest.approx(flag + 8 / MIB + 3.0, abs=1e-12)
    # the same 5 batches dealt evenly: 3 steps of the plain step (rank 1 still 2x slow: 4.75)
    assert j["even_epoch_iterations"] == 3 and j["even_step_s"] == 4.75
    assert j["epoch_cost_pct"] == pytest.approx(100 * (13.25 + j["exit_s"] - 3 * 4.75) / (3 * 4.75))
    assert res.summary()["iteration_mean_s"] == j["epoch_mean_step_s"]


def test_join_refusals_in_one_line():
    with pytest.raises(InputError, match=r"^join_batches: \(3,\) is not accepted; expected 2 batch counts"):
        SimConfig(world_size=2, join_batches=(3,))
    with pytest.raises(InputError, match=r"^join_batches: \[3, 2\] is not accepted with no_sync_steps 1"):
        SimConfig(world_size=2, join_batches=(3, 2), no_sync_steps=1)


BASE = {"trace": "traces/mlp.cpu.json", "cluster": {"topology": "cpu-gloo"}, "world_size": 2}


@pytest.mark.parametrize("ddp, sweep, match", [
    ({"process_groups": 0}, None, r"ddp\.process_groups: 0 is not accepted; expected an integer >= 1 and <= 64"),
    ({"process_groups": 2.5}, None, r"ddp\.process_groups: 2\.5 is not accepted"),
    ({}, {"process_groups": [1, 0]}, r"sweep\.process_groups\[1\]: 0 is not accepted; expected an integer >= 1 and <= 64$"),
    ({"join": {}}, None, r"ddp\.join\.batches_per_rank: None is not accepted; expected either batches_per_rank or mean_batches"),
    ({"join": {"batches_per_rank": [3, 0]}}, None, r"ddp\.join\.batches_per_rank\[1\]: 0 is not accepted"),
    ({"join": {"mean_batches": 10, "spread": 2}}, None, r"ddp\.join\.spread: 2 is not accepted; expected a number >= 0 and <= 1"),
])
def test_scenario_keys_refused_in_one_line(ddp, sweep, match):
    data = dict(BASE, ddp=ddp, **({"sweep": sweep} if sweep else {}))
    with pytest.raises(InputError, match=match) as e:
        scenario_from_dict(data)
    assert "\n" not in str(e.value)


def test_batches_per_rank_must_fit_the_world():
    sc = scenario_from_dict(dict(BASE, ddp={"join": {"batches_per_rank": [3, 2, 1]}}))
    with pytest.raises(InputError, match=r"^ddp\.join\.batches_per_rank: 3 counts are not accepted; expected 2, one per rank$"):
        sc.build_point(sc.base_point())


def test_sweep_over_process_groups_names_its_points():
    sc = scenario_from_dict(dict(BASE, sweep={"bucket_cap_mb": [1], "process_groups": [1, 3]}))
    assert [p.point_id for p in sc.points()] == ["cap=default,pg=1", "cap=default,pg=3", "cap=1,pg=1", "cap=1,pg=3"]
    assert sc.build_point(sc.points()[1]).config.process_groups == 3
    # a finished point's file reads back as the same point (resume finds it), one group or three
    from ddpsim.pipeline.specs import Point

    assert [Point.from_dict(p.as_dict(), p.named) for p in sc.points()] == sc.points()
    assert [p.as_dict()["process_groups"] for p in sc.points()] == [1, 3, 1, 3]
    assert [p.settings for p in sc.points()] == [(), (("process_groups", 3),)] * 2  # the default left out


def test_validate_hands_the_run_modes_to_the_executor_in_its_options_document():
    import argparse

    from ddpsim.validation.measure import _options
    from executor.ddp_step import check_groups, check_join_batches, ddp_options, run_modes

    sc = scenario_from_dict(dict(BASE, ddp={"join": {"batches_per_rank": [3, 2]}}, sweep={"process_groups": [1, 3]}))
    argv = [_options(sc, p) for p in sc.points()]
    assert all(a[0] == "--options" and len(a) == 2 for a in argv)
    args = [argparse.Namespace(options=a[1]) for a in argv]
    # the point's engine setting (left out at its default) and Join's batches, by their names
    assert [run_modes(a) for a in args] == [{"join_batches": [3, 2]}, {"process_groups": 3, "join_batches": [3, 2]}]
    assert [ddp_options(a) for a in args] == [sc.ddp_options(p) for p in sc.points()]
    with pytest.raises(InputError, match=r"^--options: process_groups 0 is not accepted; expected an integer >= 1$"):
        check_groups(0)
    with pytest.raises(InputError, match=r"^--options: join_batches \[3\] is not accepted; expected a list of 2 batch"):
        check_join_batches([3], 2)


# ---- real gloo runs (seconds) ------------------------------------------------------------------

@pytest.mark.slow
def test_real_join_run_has_one_step_per_iteration_of_the_longest_rank(tmp_path):
    from ddpsim.validation.launch import launch_local

    out = tmp_path / "join.json"
    r = launch_local(["ddp", "--model", "mlp", "--warmup", "2", "--options", '{"join_batches": [4, 2]}', "--out", str(out)], nproc=2,
                     timeout_s=240)
    assert r.returncode == 0, r.stderr[-2000:]
    rec = json.loads(out.read_text())
    assert len(rec["summary"]["step_times_s"]) == 4 and rec["options"]["join_batches"] == [4, 2]
    # rank 1 trained 2 batches, then shadowed 2 iterations with no compute of its own
    r1 = next(x for x in rec["ranks"] if x["rank"] == 1)["iterations"]
    assert [s["forward_s"] > 0 for s in r1] == [True, True, False, False]
    assert all(x["join_epoch_s"] >= sum(s["iteration_s"] for s in x["iterations"]) * 0.5 for x in rec["ranks"])


@pytest.mark.slow
def test_real_round_robin_run_deals_buckets_to_two_groups(tmp_path):
    from ddpsim.validation.launch import launch_local

    out = tmp_path / "pg.json"
    r = launch_local(["ddp", "--model", "mlp", "--warmup", "2", "--iterations", "3", "--bucket-cap-mb", "0.25",
                      "--options", '{"process_groups": 2}', "--timing-hook", "--out", str(out)], nproc=2, timeout_s=240)
    assert r.returncode == 0, r.stderr[-2000:]
    rec = json.loads(out.read_text())
    assert rec["options"]["process_groups"] == 2 and len(rec["real_buckets"]["sizes"]) > 1
    assert rec["ranks"][0]["buckets"], "the hook ran"


def test_join_at_scale_keeps_the_active_ranks_when_rank_0_joins_first():
    # 16 ranks without jitter are folded into rank 0 plus one representative; under Join the
    # folded ranks are still active after rank 0 has joined, so every phase runs the full step
    # (0.75 + 3 x 1 s of buckets + 0.125 = 3.875 s), never rank 0's empty one
    tr = toy_trace()
    res = simulate(tr, explicit_plan(tr, [[2], [1], [0]]), Net(num_ranks=16),
                   SimConfig(world_size=16, num_iterations=2, num_warmup_iterations=1, jitter="none",
                             join_batches=(1,) + (3,) * 15))
    assert [(p["active_ranks"], p["step_s"]) for p in res.meta["join"]["phases"]] == [(16, 3.875), (15, 3.875)]


# ---- the answers -------------------------------------------------------------------------------

def test_summary_leads_with_the_round_robin_and_join_answers():
    from ddpsim.pipeline.sweep import run_sweep
    from ddpsim.pipeline.scenario_run import ScenarioRun
    from ddpsim.report.summary import render_summary, summarize

    cluster = {"latency_us": 500, "bandwidth_gbps": 0.5}
    sc = scenario_from_dict(dict(BASE, cluster=cluster, ddp={"bucket_cap_mb": 0.25}, timelines=[],
                                 simulation={"iterations": 4, "jitter": "none"},
                                 sweep={"bucket_cap_mb": [0.25], "process_groups": [1, 2]}))
    recs = run_sweep(sc, jobs=1, progress=False)
    step = {r.point_id: r.metrics["iteration_p50_s"] for r in recs}
    # four 0.25 MiB buckets queue behind 0.5 ms latencies: a second communicator overlaps them
    assert step["cap=0.25,pg=2"] < step["cap=0.25,pg=1"]
    # the best point is the default cap's single bucket, where a second communicator has nothing to overlap
    s = summarize(ScenarioRun(scenario=sc, out_dir=Path(), records=tuple(recs)))
    assert s["process_groups"]["cap"] == "default" and s["process_groups"]["gain_over_one"] == 0.0
    answer = render_summary(s).split("## Answer\n\n")[1].splitlines()[0]
    assert answer.startswith("- **Round-robin process groups do not help here**: one communicator is fastest at cap=default")

    sc = scenario_from_dict(dict(BASE, cluster=cluster, timelines=[], simulation={"iterations": 4, "jitter": "none"},
                                 ddp={"join": {"batches_per_rank": [12, 9]}}))
    s = summarize(ScenarioRun(scenario=sc, out_dir=Path(),
                              records=tuple(run_sweep(sc, jobs=1, progress=False))))
    j = s["join"]
    assert j["batches_min"] == 9 and j["batches_max"] == 12 and j["even_epoch_iterations"] == 11
    assert render_summary(s).split("## Answer\n\n")[1].startswith(f"- **Uneven inputs cost {j['epoch_cost_pct']:.1f} % per epoch**")
    # the typed summary reads the top-level keys, their types checked
    import pydantic

    from ddpsim.report.figures import Summary, typed

    summ = typed(Summary, s)
    assert summ.join.batches_min == 9 and summ.process_groups is None
    with pytest.raises(pydantic.ValidationError, match="batches_min"):
        typed(Summary, dict(s, join=dict(j, batches_min="nine")))
