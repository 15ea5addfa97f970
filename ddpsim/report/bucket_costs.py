"""What each cap's buckets cost beyond their all-reduce kernels, term by term (the summary's table).

Per sweep point, from the point's figures and the host costs in force
(:class:`~ddpsim.network.host_costs.HostCosts`, measured on profiles:
:mod:`ddpsim.network.host_cost_profiles`):

* the host's work per step that depends on the buckets: per bucket DDP's launch
  (``mark_bucket_ready`` -> ``all_reduce_bucket``) and ProcessGroupNCCL's enqueue
  (``bucket_launch_s + enqueue_s`` times the buckets); the per-gradient hook is the same at every
  cap (``hook_s_per_param`` times the parameters) and is shown once;
* on the device: the gradient copies into and out of the buckets (copy kernels), and the
  all-reduces (their total time and what of it backward does not hide);
* the p50 step against the default's: what the terms above add up to on the critical path.
  Host time counts only where the CPU falls behind the device (the engine's CPU clock).
"""

from __future__ import annotations

from typing import Any, Sequence

from ddpsim.network.host_costs import HostCosts


def figures(points: Sequence[dict[str, Any]], host: HostCosts | None, num_params: int | None) -> dict[str, Any] | None:
    """The table's data (JSON-able), or None without host costs (gloo, a calibration, ``host: false``)."""
    if host is None or num_params is None:
        return None
    per_bucket = host.bucket_launch_s + host.enqueue_s
    rows = []
    for p in points:
        kinds = p.get("compute_by_kind_s") or {}
        rows.append({"point": p["point"], "num_buckets": p["num_buckets"],
                     "host_buckets_s": p["num_buckets"] * per_bucket,
                     "copy_kernels_s": kinds.get("copy_in", 0.0) + kinds.get("copy_out", 0.0),
                     "comm_s": p["comm_s"], "exposed_comm_s": p["exposed_comm_s"],
                     "iteration_p50_s": p["iteration_p50_s"], "gain_over_default": p["gain_over_default"]})
    return {"host_per_bucket_s": per_bucket, "host_hooks_s": num_params * host.hook_s_per_param,
            "num_params": num_params, "rows": rows}


def table(s: dict[str, Any]) -> list[str]:
    """``## What the buckets cost, term by term``: one row per point (empty without the figures)."""
    from ddpsim.pipeline.sweep import fmt_pct, fmt_s

    f = s.get("bucket_costs")
    if not f:
        return []
    L = ["## What the buckets cost, term by term", "",
         f"Per step on the host: {fmt_s(f['host_per_bucket_s'])} per bucket (DDP's bucket launch and "
         f"ProcessGroupNCCL's enqueue), and {fmt_s(f['host_hooks_s'])} of autograd hooks at every cap "
         f"({f['num_params']} parameters); host time delays the step only where the CPU falls behind the device.", "",
         "| point | buckets | host: bucket launches | device: copy kernels | device: all-reduces | exposed comm | p50 step | vs default |",
         "|---|---|---|---|---|---|---|---|"]
    for r in f["rows"]:
        L.append(f"| `{r['point']}` | {r['num_buckets']} | {fmt_s(r['host_buckets_s'])} | {fmt_s(r['copy_kernels_s'])} | "
                 f"{fmt_s(r['comm_s'])} | {fmt_s(r['exposed_comm_s'])} | {fmt_s(r['iteration_p50_s'])} | "
                 f"{fmt_pct(r['gain_over_default'])} |")
    L.append("")
    return L
