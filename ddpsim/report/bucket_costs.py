"""What each cap's buckets cost beyond their all-reduce kernels, term by term (the summary's
table), per point from its figures and the host costs in force
(:class:`~ddpsim.network.host_costs.HostCosts`, measured on profiles:
:mod:`ddpsim.network.host_cost_profiles`): on the host, per bucket DDP's launch
(``mark_bucket_ready`` -> ``all_reduce_bucket``) and ProcessGroupNCCL's enqueue, and the
per-gradient hook (the same at every cap, shown once); on the device, the gradient copies in and
out of the buckets and the all-reduces (total and exposed); and the p50 step against the
default's. Host time counts only where the CPU falls behind the device (the engine's CPU clock).
"""

from __future__ import annotations

from typing import Any, Sequence

from ddpsim.network.host_costs import HostCosts
from ddpsim.pipeline.sweep import fmt_pct, fmt_s
from ddpsim.report.figures import BucketCostRow, BucketCosts
from ddpsim.report.tables import md_table


def figures(points: Sequence[dict[str, Any]], host: HostCosts | None, num_params: int | None) -> BucketCosts | None:
    """The table's figures from the summary's ``points``, or None without host costs (gloo, a
    calibration, ``host: false``)."""
    if host is None or num_params is None:
        return None
    per_bucket = host.bucket_launch_s + host.enqueue_s

    def row(p: dict[str, Any]) -> BucketCostRow:
        kinds = p.get("compute_by_kind_s") or {}
        return BucketCostRow(point=p["point"], num_buckets=p["num_buckets"], host_buckets_s=p["num_buckets"] * per_bucket,
                             copy_kernels_s=kinds.get("copy_in", 0.0) + kinds.get("copy_out", 0.0), comm_s=p["comm_s"],
                             exposed_comm_s=p["exposed_comm_s"], iteration_p50_s=p["iteration_p50_s"],
                             gain_over_default=p["gain_over_default"])
    return BucketCosts(host_per_bucket_s=per_bucket, host_hooks_s=num_params * host.hook_s_per_param,
                       num_params=num_params, rows=tuple(row(p) for p in points))


def table(f: BucketCosts | None) -> list[str]:
    """``## What the buckets cost, term by term``: one row per point (empty without the figures)."""
    if f is None:
        return []
    return ["## What the buckets cost, term by term", "",
            f"Per step on the host: {fmt_s(f.host_per_bucket_s)} per bucket (DDP's bucket launch and "
            f"ProcessGroupNCCL's enqueue), and {fmt_s(f.host_hooks_s)} of autograd hooks at every cap "
            f"({f.num_params} parameters); host time delays the step only where the CPU falls behind the device.", "",
            *md_table([{"point": f"`{r.point}`", "buckets": str(r.num_buckets), "host: bucket launches": fmt_s(r.host_buckets_s),
                        "device: copy kernels": fmt_s(r.copy_kernels_s), "device: all-reduces": fmt_s(r.comm_s),
                        "exposed comm": fmt_s(r.exposed_comm_s), "p50 step": fmt_s(r.iteration_p50_s),
                        "vs default": fmt_pct(r.gain_over_default)} for r in f.rows], right=7), ""]
