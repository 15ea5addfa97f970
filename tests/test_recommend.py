"""Recommender: the DP over bucket boundaries, worked by hand, and the explicit plan."""

from __future__ import annotations

import pytest

from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.plan.planner import load_plan
from analytic_model import analytic_end_s
from ddpsim.pipeline.recommend import optimal_boundaries, recommend_plan

COMM = AlphaBetaModel(latency_s=1e-4, bandwidth_bytes_per_s=1e5)


def test_dp_by_hand():
    # ready order of the tiny trace: sizes 64, 4096, 256, 8192 B ready at 1, 2, 3, 4 ms.
    # Each alone: ends 1.74, 43.06, 45.72, 127.74 ms. Merging the last two saves one latency:
    # 43.06 + 0.1 + 84.48 = 127.64 ms. Merging 4096 with them waits for 4 ms: 4 + 0.1 + 125.44 = 129.54 ms;
    # merging 64 with 4096: 2 + 0.1 + 41.6 = 43.7, then 43.7 + 0.1 + 84.48 = 128.28 ms.
    cuts, end = optimal_boundaries([0.001, 0.002, 0.003, 0.004], [64, 4096, 256, 8192], COMM)
    assert cuts == [(0, 1), (1, 2), (2, 4)]
    assert end == pytest.approx(0.12764)


def test_dp_respects_groups():
    cuts, _ = optimal_boundaries([0.0, 0.0, 0.0], [10, 10, 10], COMM, groups=["a", "b", "b"])
    assert cuts == [(0, 1), (1, 3)]


def test_dp_is_optimal_against_brute_force():
    import itertools
    import random

    rng = random.Random(3)
    comm = AlphaBetaModel(latency_s=5e-4, bandwidth_bytes_per_s=1e6)
    for _ in range(20):
        n = 6
        ready = sorted(rng.uniform(0, 0.01) for _ in range(n))
        sizes = [rng.randint(100, 5000) for _ in range(n)]
        _, end = optimal_boundaries(ready, sizes, comm)
        best = float("inf")
        for mask in itertools.product([0, 1], repeat=n - 1):
            t_end = 0.0
            start = 0
            for j in range(1, n + 1):
                if j == n or mask[j - 1]:
                    t_end = max(t_end, max(ready[start:j])) + comm.allreduce_s(sum(sizes[start:j]))
                    start = j
            best = min(best, t_end)
        assert end == pytest.approx(best)


def test_recommend_plan_round_trips(tiny_trace, tmp_path):
    import json

    plan, end_s = recommend_plan(tiny_trace, COMM)
    assert [list(b.param_indices) for b in plan.steady] == [[3], [2], [1, 0]]
    assert end_s == pytest.approx(analytic_end_s(tiny_trace, plan.steady, COMM))
    p = tmp_path / "recommended_plan.json"
    p.write_text(json.dumps(plan.to_dict(), indent=1))
    again = load_plan(p, tiny_trace)
    assert [b.param_indices for b in again.steady] == [b.param_indices for b in plan.steady]


def test_grid_comm_exact_for_linear_models():
    from ddpsim.pipeline.recommend import GridComm

    g = GridComm(COMM, 10_000, num_points=16)
    for size in (0, 1, 7, 999, 4321, 10_000, 20_000):
        assert g.allreduce_s(size) == pytest.approx(COMM.allreduce_s(size))
