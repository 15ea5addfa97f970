"""Rank jitter and stragglers (ddpsim.engine.jitter) and how the engine applies them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ddpsim.engine.simulate import simulate
from ddpsim.engine.jitter import Z90, choose_explicit_ranks, draw_factors, jitter_sigma
from ddpsim.plan.planner import explicit_plan
from ddpsim.trace.records import IterationSample, Trace

from test_engine import cfg, log, net, toy_trace


def two_iteration_trace():
    tr = toy_trace()
    its = tuple(IterationSample(forward_s=0.5, backward_s=b, optimizer_s=0.125, grad_ready_s=(0.75, 0.5, 0.25))
                for b in (1.0, 2.0))
    return Trace(model="toy", params=tr.params, grad_ready_order=tr.grad_ready_order, iterations=its)


def test_sigma_from_trace_cv_and_none():
    tr = two_iteration_trace()
    # backward_s samples [1, 2]: p10 = 1.1, p90 = 1.9 (linear interpolation)
    assert jitter_sigma(tr, "trace") == pytest.approx(math.log(1.9 / 1.1) / (2 * Z90))
    assert jitter_sigma(toy_trace(), "trace") == 0.0     # one measured iteration: no spread
    assert jitter_sigma(tr, 0.5) == pytest.approx(math.sqrt(math.log(1.25)))
    assert jitter_sigma(tr, "none") == 0.0


def test_draw_factors_seeded_and_stragglers():
    a = draw_factors(np.random.default_rng(7), 0.1, 3, 5, {2: 1.5})
    b = draw_factors(np.random.default_rng(7), 0.1, 3, 5, {2: 1.5})
    assert a.shape == (3, 5) and np.array_equal(a, b)
    z = np.random.default_rng(7).standard_normal((3, 5))
    assert np.allclose(a[:, 0], np.exp(0.1 * z[:, 0]))
    assert np.allclose(a[:, 2], 1.5 * np.exp(0.1 * z[:, 2]))
    assert np.array_equal(draw_factors(np.random.default_rng(0), 0.0, 2, 3, {1: 2.0}), [[1, 2, 1], [1, 2, 1]])


def test_the_rest_representative_runs_at_the_folded_ranks_largest_factor():
    tr = toy_trace()
    res = simulate(tr, explicit_plan(tr, [[0, 1, 2]]), net(64), cfg(world_size=64, jitter=0.1, seed=3, num_iterations=2))
    f = draw_factors(np.random.default_rng(3), jitter_sigma(tr, 0.1), 2, 64, {})
    folded = [r for r in range(64) if r not in res.ranks]
    assert res.meta["rest_representative"] and len(folded) == 56
    assert res.meta["rest_factor_by_iteration"] == list(f[:, folded].max(axis=1))


def test_choose_explicit_ranks():
    assert choose_explicit_ranks(4, {}, 0.1, None) == ((0, 1, 2, 3), False)
    assert choose_explicit_ranks(1024, {}, 0.0, None) == ((0,), False)          # no jitter: all like rank 0
    assert choose_explicit_ranks(1024, {7: 2.0}, 0.0, None) == ((0, 7), False)
    assert choose_explicit_ranks(64, {}, 0.1, None) == ((0, 8, 16, 24, 32, 40, 48, 56), True)
    assert choose_explicit_ranks(10, {3: 1.1}, 0.1, 4) == ((0, 3, 4, 8), True)
    assert choose_explicit_ranks(4, {}, 0.1, 1) == ((0, 1, 2, 3), False)


def test_engine_scales_each_rank_by_its_factor():
    tr = toy_trace()
    plan = explicit_plan(tr, [[0, 1, 2]])
    res = simulate(tr, plan, net(), cfg(jitter=0.2, seed=5, stragglers={1: 1.25}))
    f = draw_factors(np.random.default_rng(5), math.sqrt(math.log1p(0.04)), 1, 2, {1: 1.25})
    for r in (0, 1):
        fwd = log(res, rank=r)[0]
        assert fwd[:3] == ("compute", "forward", "forward") and fwd[4] == pytest.approx(0.5 * f[0, r], rel=1e-15)
    assert res.meta["jitter_sigma"] == pytest.approx(math.sqrt(math.log1p(0.04)))


def _iteration(rank, iteration, start, end, warmup=False):
    from ddpsim.engine.result import IterationStats

    return IterationStats(rank=rank, iteration=iteration, start_s=start, end_s=end, forward_s=0.0,
                          backward_compute_s=0.0, exposed_comm_s=0.0, comm_s=0.0, overlap_ratio=0.0,
                          optimizer_s=0.0, warmup=warmup)


def test_step_time_is_the_jobs_not_the_per_iteration_max():
    from ddpsim.engine.result import SimResult

    # rank 1 is 1 s late out of iteration 1 (say its optimizer); rank 0 waits for it in
    # iteration 2's all-reduce; rank 0 is 1 s late out of iteration 2, rank 1 waits in 3
    its = (_iteration(0, 1, 0, 10, warmup=True), _iteration(0, 2, 10, 21), _iteration(0, 3, 21, 30),
           _iteration(1, 1, 0, 11, warmup=True), _iteration(1, 2, 11, 20), _iteration(1, 3, 20, 30))
    res = SimResult(world_size=2, ranks=(0, 1), spans=(), buckets=(), iterations=its)
    # slowest end to slowest end: 21 - 11, 30 - 21; the per-iteration max would say 11, 10
    assert res.step_times_s() == [10, 9]
    assert res.summary()["iteration_p50_s"] == 9.5
    # no iteration before the first: from its earliest start
    first = SimResult(world_size=2, ranks=(0, 1), spans=(), buckets=(), iterations=(_iteration(0, 1, 0, 10), _iteration(1, 1, 1, 12)))
    assert first.step_times_s() == [12]


def test_jittered_step_times_add_up_to_the_wall_time():
    tr = two_iteration_trace()
    plan = explicit_plan(tr, [[0, 1, 2]])
    res = simulate(tr, plan, net(), cfg(jitter=0.3, seed=3, num_iterations=8))
    steady = sorted({it.iteration for it in res.steady_iterations()})
    def end(k):
        return max(it.end_s for it in res.iterations if it.iteration == k)
    prev = max(k for k in {it.iteration for it in res.iterations} if k < steady[0])
    steps = res.step_times_s()
    assert len(steps) == len(steady)
    assert sum(steps) == pytest.approx(end(steady[-1]) - end(prev))
    per_iteration_max = [max(it.iteration_s for it in res.iterations if it.iteration == k) for k in steady]
    assert sum(per_iteration_max) > sum(steps) * 1.01   # what the old statistic over-counted here
