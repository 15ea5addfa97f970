"""``simulate(..., steps_only=True)``: only the step times, what an uncertainty sample or a run
with cost terms off reads. The oracle is the full simulation of the same inputs: the same
iterations' start and end (to the bit without interference, where the arithmetic is the same;
to rounding with it, where a rank's works between two interactions run as one), nothing else."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import ddpsim.engine.simulate as engine
from ddpsim.engine.config import SimConfig
from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.network.host_costs import HostCosts
from ddpsim.network.interference import Interference
from ddpsim.plan.planner import DDPOptions, plan_ddp
from ddpsim.trace.records import load_trace

TRACE = load_trace(Path(__file__).resolve().parents[1] / "traces" / "gpt2-124m.h100.json")
PLAN = plan_ddp(TRACE, DDPOptions(bucket_cap_mb=5))
# 64 ranks with jitter: 8 explicit ranks and the folded ones' representative
CONFIG = SimConfig(world_size=64, num_iterations=4, jitter=0.05, seed=0, copy_bandwidth_bytes_per_s=3.35e12)


def comm():
    return AlphaBetaModel(latency_s=50e-6, bandwidth_bytes_per_s=25e9, num_ranks=64)


def both(config):
    engine._MEMO.clear()
    full = engine.simulate(TRACE, PLAN, comm(), config, spans=False)
    steps = engine.simulate(TRACE, PLAN, comm(), config, steps_only=True)
    return full, steps


@pytest.mark.parametrize("host", [None, HostCosts()])
def test_without_interference_the_step_times_are_the_full_simulations_to_the_bit(host):
    # without host costs the folded ranks run vectorised, with them as their slowest
    full, steps = both(replace(CONFIG, host_costs=host))
    assert [(i.rank, i.iteration, i.start_s, i.end_s, i.warmup) for i in steps.iterations] == \
        [(i.rank, i.iteration, i.start_s, i.end_s, i.warmup) for i in full.iterations]
    assert steps.step_times_s() == full.step_times_s()
    assert steps.summary()["iteration_p50_s"] == full.summary()["iteration_p50_s"]
    # nothing else recorded
    assert steps.meta["steps_only"] and "steps_only" not in full.meta
    assert len(steps.spans) == 0 and len(steps.buckets) == 0 and len(full.buckets) > 0
    assert all(i.forward_s == i.backward_compute_s == i.comm_s == 0 for i in steps.iterations)


@pytest.mark.parametrize("host", [None, HostCosts()])
@pytest.mark.parametrize("comm_slowdown", [1.2, 1.0])  # 1.0: a collective's pace never changes (one timer)
def test_with_interference_the_step_times_are_the_full_simulations_to_rounding(host, comm_slowdown):
    cfg = replace(CONFIG, interference=Interference(compute_slowdown=1.5, comm_slowdown=comm_slowdown), host_costs=host)
    full, steps = both(cfg)
    assert [(i.rank, i.iteration) for i in steps.iterations] == [(i.rank, i.iteration) for i in full.iterations]
    for a, b in zip(steps.step_times_s(), full.step_times_s()):
        assert a == pytest.approx(b, rel=1e-12)


def test_kept_apart_from_the_full_simulation_in_the_memo():
    engine._MEMO.clear()
    steps = engine.simulate(TRACE, PLAN, comm(), CONFIG, steps_only=True)
    full = engine.simulate(TRACE, PLAN, comm(), CONFIG, spans=False)
    assert len(engine._MEMO) == 2 and len(full.buckets) > 0 and len(steps.buckets) == 0


@pytest.mark.parametrize("hook_s, closed, one_by_one", [(HostCosts().hook_s_per_param, True, False),
                                                        (2e-3, False, True), (0.0, True, False)])
def test_segments_between_bucket_ready_events_in_one_go_only_without_a_host_gate_inside(
        monkeypatch, hook_s, closed, one_by_one):
    """The hooks between two bucket-ready events run as one work where no host gate can fall
    inside (some do with the default host costs); a CPU slower than
    the backward (2 ms per hook) gates them, and they run one by one. Either way the step
    times are the full simulation's."""
    from ddpsim.engine import segments
    taken = []
    real = segments.Segment.closed_form
    monkeypatch.setattr(segments.Segment, "closed_form",
                        lambda seg, rank, s, floor_s: taken.append(real(seg, rank, s, floor_s)) or taken[-1])
    cfg = replace(CONFIG, interference=Interference(compute_slowdown=1.5, comm_slowdown=1.2),
                  host_costs=replace(HostCosts(), hook_s_per_param=hook_s))
    full, steps = both(cfg)
    assert (closed and True in taken) or (one_by_one and False in taken)
    for a, b in zip(steps.step_times_s(), full.step_times_s()):
        assert a == pytest.approx(b, rel=1e-12)


def test_ranks_launch_buckets_without_running_their_works_first(monkeypatch):
    """Under interference a rank that records nothing posts each bucket's launch on the work
    clock (where its pending works end) instead of running them first, and runs its works only
    at a wait, a gate or the step's end: its backward meets SimPy about once, not once per
    bucket; the full simulation runs them before every launch."""
    from ddpsim.engine.streams import Engine
    runs, posted = [], []
    real_runs, real_arrive = Engine._run_works, Engine.arrive
    monkeypatch.setattr(Engine, "_run_works", lambda eng, works, ends: runs.append(1) or real_runs(eng, works, ends))
    monkeypatch.setattr(Engine, "arrive", lambda eng, *a, **k: posted.append(a[-1] if len(a) > 8 else k.get("work"))
                        or real_arrive(eng, *a, **k))
    cfg = replace(CONFIG, interference=Interference(compute_slowdown=1.5, comm_slowdown=1.2))
    engine._MEMO.clear()
    engine.simulate(TRACE, PLAN, comm(), cfg, spans=False)
    full_runs, full_posted = len(runs), sum(w is not None for w in posted)
    runs.clear(), posted.clear()
    engine.simulate(TRACE, PLAN, comm(), cfg, steps_only=True)
    launches = len(posted)
    assert full_posted == 0 and sum(w is not None for w in posted) > launches // 2
    assert len(runs) < full_runs - launches // 2


def test_a_segment_ends_at_each_bucket_ready_and_floors_are_per_segment():
    """Hand-worked: parameters ready in order 3, 2, 1, 0; buckets {0: p0, p1}, {1: p2}, {2: p3}.
    p3 readies bucket 2, p2 readies bucket 1, p1 marks bucket 0 once, p0 readies it."""
    from types import SimpleNamespace

    from ddpsim.engine.segments import build_segments, gate_floors
    eng = SimpleNamespace(order=[3, 2, 1, 0], ready=[4e-3, 3e-3, 2e-3, 1e-3], is_reducer=[True] * 4,
                          has_grad=lambda p: True, copy_in_s=[1e-4] * 4, names=["p0", "p1", "p2", "p3"],
                          param_sizes=[8, 8, 8, 8])
    layout = SimpleNamespace(bucket_of=[0, 0, 1, 2], counts=[2, 1, 1])
    segs = build_segments(eng, layout)
    assert [s.ready_b for s in segs] == [2, 1, 0]
    assert [s.marks for s in segs] == [[(2, 1)], [(1, 1)], [(0, 2)]]
    # U_i of the last segment: 1 ms gap before p1's hook, then 1 ms + p1's copy-in before p0's
    assert segs[2].gate_work == pytest.approx([1e-3, 2e-3 + 1e-4])
    h = 5e-4
    assert gate_floors(segs, 0.9, h)[2] == pytest.approx(min(0.9 * 1e-3 - h, 0.9 * 2.1e-3 - 2 * h))
    assert gate_floors(segs, 0.9, h)[0] == pytest.approx(0.9 * 1e-3 - h)


@pytest.mark.parametrize("host", [None, HostCosts()])
def test_a_recording_rank_takes_segments_as_the_hooks_one_by_one_to_the_bit(monkeypatch, host):
    """Under interference a rank that records its works defers a segment's works at once
    (``Segment.take``) and records a run of works without a call per work: the same
    spans, bucket timings and iteration figures as deferring them hook by hook."""
    from ddpsim.engine import segments
    from ddpsim.engine.reducer import Rank
    cfg = replace(CONFIG, interference=Interference(compute_slowdown=1.5, comm_slowdown=1.2), host_costs=host)
    taken = []
    real = segments.Segment.take

    def take(seg, rank, *a):
        taken.append(rank.record)
        return real(seg, rank, *a)
    monkeypatch.setattr(segments.Segment, "take", take)
    engine._MEMO.clear()
    at_once = engine.simulate(TRACE, PLAN, comm(), cfg)
    assert any(taken)  # taken at once on a recording rank
    real_segments = Rank.segments  # the folded ranks' representative keeps its one work per segment
    monkeypatch.setattr(Rank, "segments", lambda rank, bw: None if rank.record else real_segments(rank, bw))
    engine._MEMO.clear()
    by_hook = engine.simulate(TRACE, PLAN, comm(), cfg)
    assert list(at_once.spans) == list(by_hook.spans) and list(at_once.buckets) == list(by_hook.buckets)
    assert at_once.iterations == by_hook.iterations
