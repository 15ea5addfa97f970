"""Rank jitter and stragglers (ddpsim.jitter) and how the engine applies them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ddpsim.engine import simulate
from ddpsim.jitter import Z90, choose_explicit_ranks, draw_factors, jitter_sigma, rest_factors
from ddpsim.plan import explicit_plan
from ddpsim.trace import IterationSample, Trace

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
    assert list(rest_factors(a, [0, 1, 2])) == list(a[:, 3:].max(axis=1))


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
