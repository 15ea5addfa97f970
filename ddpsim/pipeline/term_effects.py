"""Which GPU cost terms move a scenario's best cap: the sweep simulated again with terms off. The
engine adds three terms to NCCL's model on GPU presets (:mod:`ddpsim.network.cost_terms`:
``contention``, ``copy_kernels``, ``host``). Every point is re-simulated with all terms in force
off (p50 step only; stored with the point's samples,
:func:`ddpsim.pipeline.resampling.term_samples`), and where that moves the best point, with each
term off alone; ``lost`` is what the full model's best point loses there against the best.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ddpsim.pipeline.resampling import off_label, terms_on
from ddpsim.pipeline.inputs import p50_s
from ddpsim.pipeline.sweep import TIE_RELATIVE, PointRecord, best_record


def _without(scenario: Any, records: Sequence[PointRecord], off: tuple[str, ...], full_best: str, trace: Any,
             build: Callable, simulate: Callable | None) -> dict[str, Any]:
    """The sweep's best point with ``off`` switched off: its p50 step and what the full model's
    best point loses against it there."""
    sc = scenario.updated(cost_model={t: False for t in off})
    p50, label = {}, off_label(off)
    for r in records:  # the point's stored run with ``off`` switched off, else simulated here
        runs = r.metrics.get("uncertainty") or {}
        p50[r.point_id] = (runs["p50_s"][runs["labels"].index(label)] if label in runs.get("labels", ())
                           else p50_s(simulate, build(sc, r.point, trace)))
    best = best_record(list(p50), p50.get)
    if p50[full_best] <= p50[best] * (1 + TIE_RELATIVE):  # a tie keeps the full model's answer
        best = full_best
    lost = max(0.0, p50[full_best] / p50[best] - 1)
    return {"off": list(off), "best": best, "best_p50_s": p50[best], "lost": lost}


def term_effects(scenario: Any, records: Sequence[PointRecord], trace: Any, *, build: Callable,
                 simulate: Callable) -> dict[str, Any] | None:
    """The best point with the terms off, all of them, then (where that moves it) each alone
    (module docstring); None when no term is on or the sweep has one point. ``build(scenario,
    point, trace)`` and ``simulate(trace, plan, comm, config)`` are the run's own."""
    on = terms_on(scenario)
    if not on or len(records) < 2:
        return None
    full = best_record(records).point_id
    runs = [_without(scenario, records, on, full, trace, build, simulate)]
    if runs[0]["best"] != full and len(on) > 1:
        runs += [_without(scenario, records, (t,), full, trace, build, simulate) for t in on]
    return {"best": full, "terms": list(on), "without": runs,
            "moved_by": [r["off"][0] for r in runs[1:] if r["best"] != full] if len(runs) > 1
            else ([on[0]] if runs[0]["best"] != full else [])}
