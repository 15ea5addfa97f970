"""A design space's table (one row per point of :func:`ddpsim.pipeline.explore.run_explore`) and
the Pareto front of throughput against cost. Throughput is samples per second, ``batch per rank x
world size / p50 step``; scaling efficiency divides it by ``world size x`` one GPU's throughput
without DDP (a step of the trace's forward, backward, optimizer and zero_grad medians); GPU-hours
per 1,000 samples is ``world size x step / 3600 / samples x 1,000``, and with ``explore.prices`` (a
prices YAML: one GPU-hour's price per system, with its source) the cost of those samples. A point
is on the front when no other has throughput >= and cost <=, one of them strictly (the cost is
GPU-hours without prices).
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Sequence

from pydantic import Field

from ddpsim.io import read_yaml
from ddpsim.pipeline.explore import ExploreSpace, space_points
from ddpsim.pipeline.scenario import resolve_file
from ddpsim.pipeline.sweep import Job, PointRecord
from ddpsim.plan.planner import cap_point_id
from ddpsim.schema import Schema, validate

#: the figures of each point in the table (seconds; the engine's summary over steady iterations)
FIGURES = ("iteration_p50_s", "iteration_p95_s", "forward_s", "backward_compute_s", "exposed_comm_s", "comm_s", "overlap_ratio",
           "optimizer_s")


# ---- the table -------------------------------------------------------------------------------

def explore_table(space: ExploreSpace, records: Sequence[PointRecord], job: Job, trace_info: dict[str, Any],
                  prices: dict[str, float] | None = None):
    """One row per point (pandas DataFrame, point order): its values, the figures, throughput,
    scaling efficiency, GPU-hours, with ``prices`` (per system) the cost, and whether it is on the front."""
    import pandas as pd

    pts = space_points(space)
    rows = []
    for p, jp, rec in zip(pts, job.points, records):
        sc = job.scenarios[jp.group]
        info = trace_info[jp.trace]
        f = rec.metrics
        world = rec.world_size
        batch = info["batch_size"]
        step = f["iteration_p50_s"]
        thr = batch * world / step if batch and step > 0 else None
        one = batch / info["one_gpu_step_s"] if batch and info["one_gpu_step_s"] > 0 else None
        gpu_h = world * step / 3600 / (batch * world) * 1000 if batch else None
        system = sc.cluster.label
        price = None if prices is None else prices.get(system)
        row: dict[str, Any] = {"point": jp.point_id}
        for name, v in p.values:
            if name == "cap":
                label = cap_point_id(v[0], v[1])
                row["bucket_cap_mb"] = label.partition("=")[2] if v[1] is None else label
            else:
                row[name] = v if isinstance(v, (int, float, str, bool)) or v is None else json.dumps(v)
        row.update({"system": system, "nodes": sc.cluster.nodes, "world_size": world, "backend": rec.backend,
                    "trace": info["model"], "batch_size_per_rank": batch, "num_buckets": f["num_buckets"],
                    **{k: f.get(k) for k in FIGURES},
                    "throughput_samples_per_s": thr,
                    "scaling_efficiency": thr / (world * one) if thr is not None and one else None,
                    "gpu_hours_per_1k_samples": gpu_h,
                    "cost_per_1k_samples": gpu_h * price if gpu_h is not None and price is not None else None})
        rows.append(row)
    df = pd.DataFrame(rows)
    cost_col = "cost_per_1k_samples" if prices is not None else "gpu_hours_per_1k_samples"
    df["on_front"] = pareto_front(df["throughput_samples_per_s"].tolist(), df[cost_col].tolist())
    return df


def pareto_front(throughput: Sequence[float | None], cost: Sequence[float | None]) -> list[bool]:
    """Which points no other point beats: none has throughput >= and cost <=, one of them
    strictly (points without both figures are never on it)."""
    idx = [i for i in range(len(throughput)) if throughput[i] is not None and cost[i] is not None
           and not (isinstance(throughput[i], float) and math.isnan(throughput[i]))
           and not (isinstance(cost[i], float) and math.isnan(cost[i]))]
    idx.sort(key=lambda i: (cost[i], -throughput[i], i))
    front = [False] * len(throughput)
    best_thr, best_cost = -math.inf, None
    for i in idx:
        if throughput[i] > best_thr:
            front[i] = True
            best_thr, best_cost = throughput[i], cost[i]
        elif throughput[i] == best_thr and cost[i] == best_cost:
            front[i] = True  # the same figures as a point on the front: neither beats the other
    return front


# ---- prices ------------------------------------------------------------------------------------

class PricesFile(Schema):
    """A prices YAML: what one GPU-hour costs on each system (``explore.prices``)."""

    currency: Annotated[str, Field(min_length=1, max_length=16)] = Field("USD", description="the currency's name")
    gpu_hour: Annotated[dict[str, Annotated[float, Field(gt=0, le=1e6)]], Field(min_length=1)] = Field(
        description="system (cluster.topology as written) -> the price of one GPU-hour, > 0")
    source: str = Field("", description="where the prices come from")


def load_prices(space: ExploreSpace) -> PricesFile | None:
    """``explore.prices`` read and validated (None without one)."""
    what = "a prices YAML ({currency, gpu_hour: {system: price}})"
    path = resolve_file(space.section.prices, space.base, f"{space.source}: explore.prices", what)
    if path is None:
        return None
    return validate(PricesFile, read_yaml(path, "explore.prices", what), str(path))
