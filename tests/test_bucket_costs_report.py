"""The summary's per-cap table of what buckets cost beyond their kernels (ddpsim.report.summary)."""

from __future__ import annotations

import pytest

from ddpsim.network.host_costs import HostCosts
from ddpsim.report.summary import bucket_cost_figures, bucket_costs_table

HOST = HostCosts(pre_forward_s=0.0, hook_s_per_param=10e-6, bucket_launch_s=20e-6, enqueue_s=30e-6)


def _point(name: str, buckets: int, gain: float | None) -> dict:
    return {"point": name, "num_buckets": buckets, "comm_s": 1e-3, "exposed_comm_s": 1e-4, "iteration_p50_s": 0.05,
            "gain_over_default": gain, "compute_by_kind_s": {"copy_in": 2e-4, "copy_out": 3e-4, "forward": 1.0}}


def test_host_cost_grows_with_the_buckets_the_hooks_do_not():
    f = bucket_cost_figures([_point("cap=default", 5, None), _point("cap=1", 50, -0.01)], HOST, 100)
    assert f.host_per_bucket_s == pytest.approx(50e-6)        # launch 20 + enqueue 30
    assert f.host_hooks_s == pytest.approx(100 * 10e-6)       # per parameter, any cap
    a, b = f.rows
    assert (a.host_buckets_s, b.host_buckets_s) == pytest.approx((5 * 50e-6, 50 * 50e-6))
    assert a.copy_kernels_s == pytest.approx(5e-4)            # copy in + copy out, not forward


def test_no_host_costs_no_table():
    assert bucket_cost_figures([_point("cap=default", 5, None)], None, 100) is None
    assert bucket_costs_table(None) == []


def test_table_has_a_row_per_point():
    f = bucket_cost_figures([_point("cap=default", 5, None), _point("cap=1", 50, -0.01)], HOST, 100)
    lines = bucket_costs_table(f)
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if ln.startswith("| `")]
    assert [r[0] for r in rows] == ["`cap=default`", "`cap=1`"]
    # buckets, host launches (50 x 50 us), copy kernels, all-reduces, exposed, p50, vs default
    assert rows[1] == ["`cap=1`", "50", "2.500 ms", "0.500 ms", "1.000 ms", "0.100 ms", "50.000 ms", "-1.0%"]
