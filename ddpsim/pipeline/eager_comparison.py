"""A compiled scenario's points run again as eager DDP, for the report's comparison.

:func:`eager_comparison` simulates every point of a scenario with a ``compile`` block once more
without it (same trace, same cluster, same caps) and counts the compiled backward's subgraphs at
each point (:func:`ddpsim.plan.compiled.compiled_subgraphs`), so that the summary can say which
cap is best compiled and what compiling changes against eager DDP.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ddpsim.pipeline.sweep import point_metrics
from ddpsim.plan.compiled import compiled_subgraphs


def subgraph_count(scenario: Any, point: Any, trace: Any) -> int | None:
    """How many compiled backward units ``point`` has (None under compiled autograd)."""
    if scenario.compile.compiled_autograd:
        return None
    return len(compiled_subgraphs(trace, scenario.ddp_options(point), scenario.compile))


def eager_comparison(scenario: Any, records: Sequence[Any], trace: Any, build: Callable, sim: Callable) -> dict[str, Any]:
    """Every point of ``records`` simulated without ``compile``: p50 per point and the eager best,
    beside the compiled mode and its subgraph count per point (the report's ``compile`` figures)."""
    eager = scenario.updated(compile=None)
    rows = []
    for r in records:
        inputs = build(eager, r.point, trace)
        p50 = point_metrics(sim(inputs.trace, inputs.plan, inputs.comm, inputs.config), inputs.plan)["iteration_p50_s"]
        rows.append({"point": r.point_id, "compiled_p50_s": r.metrics["iteration_p50_s"], "eager_p50_s": p50,
                     "subgraphs": subgraph_count(scenario, r.point, trace)})
    best_eager = min(rows, key=lambda x: x["eager_p50_s"])
    return {"mode": scenario.compile.mode, "points": rows, "eager_best": best_eager["point"],
            "eager_best_p50_s": best_eager["eager_p50_s"]}
