"""The computations of a scenario run after its sweep: :func:`recommend` cuts the gradient-ready
order by dynamic programming under each cost-model variant
(:func:`ddpsim.pipeline.recommend.candidate_plans`), simulates every candidate over the best cap's
steady iterations and keeps the fastest when it beats the best cap (else DDP's buckets of the best
cap); :func:`cap_list` turns the candidates into ``bucket_cap_mb_list`` values (torch >= 2.13,
torch/nn/parallel/distributed.py) simulated as real DDP configurations; both are kept in
``<report>/points/recommend.json`` under a key of every point's resume key. Also the measured
method error, the cost-term lines and a compiled scenario's points run again as eager DDP.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.errors import InputError
from ddpsim.network.cost_terms import explain_terms
from ddpsim.pipeline import recommend as rec
from ddpsim.pipeline.fingerprint import digest
from ddpsim.pipeline.method_error import answer, file_sha256, load_method_error
from ddpsim.pipeline.inputs import contention_prior, p50_s, point_graph, run_engine
from ddpsim.pipeline.scenario import Scenario
from ddpsim.pipeline.sweep import best_record, default_record, gain, point_metrics, read_kept, write_kept
from ddpsim.plan.compiled import compiled_subgraphs
from ddpsim.plan.planner import BucketPlan, DDPOptions, explicit_plan, without_delayed


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """What :func:`recommend` found: the report's figures (``info``), the plan file's document
    (``plan_doc``), the best point's inputs."""

    info: dict[str, Any]
    plan_doc: dict[str, Any]
    inputs: Any


#: the file in a report's ``points/`` folder that keeps :func:`recommend`'s answer (no point's
#: file name: those are ``key-value`` pairs, :func:`ddpsim.io.file_id`)
KEPT_FILE = "recommend.json"
KEPT_FORMAT = "ddpsim-recommend"
KEPT_VERSION = 2


def recommend(sc: Scenario, records: Sequence[Any], trace: Any, build: Callable, sim: Callable, *,
              kept_dir: str | Path | None = None) -> Recommendation:
    """The recommended explicit plan at the best point of ``records`` (module docstring), kept in
    ``kept_dir`` (:data:`KEPT_FILE`; None: nothing kept) and reused while :func:`kept_key` is the same."""
    best = best_record(records)
    inputs = build(sc, best.point, trace)
    path = Path(kept_dir) / KEPT_FILE if kept_dir is not None else None
    key = kept_key(records)
    got = read_kept(path, KEPT_FORMAT, KEPT_VERSION, lambda d: Recommendation(
        info=d["info"], plan_doc=d["plan_doc"], inputs=inputs), key=key) if path is not None else None
    if got is not None:
        return got
    opts = sc.ddp_options(best.point)
    tried = _candidates(trace, inputs, opts, best.point.comm_hook, sim)
    _, _, label, found, rec_result = min(tried, key=lambda x: (x[0], x[1]))
    rm = point_metrics(rec_result, found)
    saved = gain(best.metrics["iteration_p50_s"], rm["iteration_p50_s"])
    better = saved > 1e-9
    chosen = found if better else explicit_plan(
        trace, [list(b.param_indices) for b in inputs.plan.steady], options=opts,
        source=f"ddpsim-recommend (DDP buckets of {best.point_id})")
    caps = cap_list(sc, records, trace, build, sim, opts, [chosen] + [t[3] for t in tried], chosen, best)
    plan_doc = chosen.to_dict()
    plan_doc["bucket_cap_mb_list"] = {k: caps[k] for k in ("bucket_cap_mb_list", "paste", "reproduces_recommended_plan",
                                                           "reason", "iteration_p50_s", "gain_over_default",
                                                           "gain_over_best_cap", "best_cap_point")}
    info = {"better": better, "num_buckets": len(found.steady), "iteration_p50_s": rm["iteration_p50_s"],
            "iteration_p95_s": rm["iteration_p95_s"], "exposed_comm_s": rm["exposed_comm_s"],
            "gain_over_best_cap": saved, "best_cap_point": best.point_id,
            "bucket_sizes_bytes": [b.size_bytes for b in found.steady],
            "method": f"dynamic programming over bucket boundaries in gradient-ready order; best of "
                      f"{len(tried)} cost-model variant(s) by the engine: {label}",
            "candidates": [{"variant": t[2], "num_buckets": len(t[3].steady), "iteration_p50_s": t[0]} for t in tried],
            "written": "explicit plan" if better else f"DDP buckets of {best.point_id}", "cap_list": caps}
    if path is not None:
        write_kept(path, {"format": KEPT_FORMAT, "version": KEPT_VERSION, "key": key, "info": info,
                          "plan_doc": plan_doc})
    return Recommendation(info=info, plan_doc=plan_doc, inputs=inputs)


def kept_key(records: Sequence[Any]) -> str:
    """What :func:`recommend` computes from: every point's id and resume key (each a hash of all
    the engine received for the point and of ddpsim's source, so also of this module), in order."""
    points = [[r.point_id, r.key] for r in records]
    return digest({"format": KEPT_FORMAT, "version": KEPT_VERSION, "points": points})[:20]


def _candidates(trace: Any, inputs: Any, opts: DDPOptions, comm_hook: str, sim: Callable) -> list[tuple]:
    """``(p50, index, variant, plan, result)`` of every candidate plan, simulated."""
    # An explicit plan applies from iteration 1 (no rebuild); measure it over the same steady
    # iterations as the best cap so that both medians see the same jitter draws.
    warm = inputs.config.num_warmup_iterations
    if warm is None:
        warm = inputs.plan.rebuild_iteration or 1
    config = replace(inputs.config, num_warmup_iterations=warm)
    tried = []
    # the recommender cuts every parameter's gradient-ready order; delayed parameters
    # (delay_all_reduce_named_params) are not the reducer's, so they leave its buckets
    every = replace(opts, delay_all_reduce_named_params=None, param_to_hook_all_reduce=None)
    for label, plan in rec.candidate_plans(trace, inputs.comm, comm_hook=comm_hook, options=every):
        if every != opts:
            plan = without_delayed(plan, trace, opts)
        res = run_engine(sim, replace(inputs, plan=plan), config=config, spans=False)
        tried.append((res.summary()["iteration_p50_s"], len(tried), label, plan, res))
    return tried


def cap_list(sc: Scenario, records: Sequence[Any], trace: Any, build: Callable, sim: Callable,
             opts: DDPOptions, plans: Sequence[BucketPlan], recommended: BucketPlan, best: Any) -> dict[str, Any]:
    """The ``bucket_cap_mb_list`` to paste: one per candidate plan (exact where a list can
    express it), each simulated by the engine as a DDP configuration (its construction layout
    in iteration 1, the rebuild, the same iterations and seed as the sweep's points); the
    list that reproduces the recommended plan (``plans[0]``) is taken when there is one, else
    the fastest; it is compared with the default and the best uniform cap."""
    uniform = [r for r in records if not r.point.bucket_cap_mb_list]
    best_cap = best_record(uniform)
    default = default_record(records, best_cap.point) or records[0]
    tried = []
    for k, cand in enumerate(rec.cap_list_candidates(trace, plans, opts)):
        point = best.point.with_value("cap", (None, cand.caps))
        inputs = build(sc, point, trace)
        # the points' figures, not steps_only: its p50 may differ in the last bits
        p50 = run_engine(sim, inputs, spans=False).summary()["iteration_p50_s"]
        same = [b.param_indices for b in inputs.plan.steady] == [b.param_indices for b in recommended.steady]
        tried.append((p50, k, cand, same))
    first = tried[0][2]
    p50, _, cand, same = tried[0] if first.exact else min(tried, key=lambda x: (x[0], x[1]))
    return {"bucket_cap_mb_list": list(cand.caps), "paste": cand.paste, "reproduces_recommended_plan": same,
            "reason": first.reason,
            "iteration_p50_s": p50, "gain_over_default": gain(default.metrics["iteration_p50_s"], p50),
            "gain_over_best_cap": gain(best_cap.metrics["iteration_p50_s"], p50),
            "best_cap_point": best_cap.point_id, "best_cap_mb": best_cap.point.bucket_cap_mb,
            "default_point": default.point_id,
            "candidates": [{"bucket_cap_mb_list": list(c.caps), "exact": c.exact, "iteration_p50_s": t}
                           for t, _, c, _ in tried]}


def method_error_for(sc: Scenario, trace: Any, path: str | Path | None) -> tuple[Any, str | None]:
    """The residual file at ``path`` for scenario ``sc`` and a note on what differs, or
    (None, None) without one. Residuals hold for the backend and calibration they were measured
    with: another backend, or a scenario without a calibration, is refused."""
    if path is None:
        return None, None
    me = load_method_error(path)
    backend = sc.build_point(sc.points()[0], trace=trace).backend
    if me.backend and backend != me.backend:
        raise InputError(f"--method-error: {str(path)!r} holds residuals measured on {me.backend}; scenario {sc.name!r} "
                         f"runs {backend}; expected residuals of the same backend (a zoo run where the scenario runs)")
    if sc.calibration_path is None:
        raise InputError(f"--method-error: scenario {sc.name!r} has no calibration; expected one (the residuals in "
                         f"{str(path)!r} hold for calibrated predictions: 'calibration: FILE' in the scenario)")
    return me, me.mismatch(calibration_sha256=file_sha256(sc.calibration_path))


def method_error_answer(me: Any, note: str | None, path: str | Path, records: Sequence[Any], best: Any,
                        inputs: Any, trace: Any, sim: Callable) -> dict[str, Any]:
    """The method error's answer (:func:`ddpsim.pipeline.method_error.answer`) around the best point."""
    # the residuals are of mean steps predicted as a validation predicts them (the trace's
    # mean phases): the band goes around the best point's mean step predicted so
    best_mean = run_engine(sim, inputs, config=inputs.config.for_validation()).summary()["iteration_mean_s"]
    return answer(me, points=[(r.point_id, r.metrics["iteration_p50_s"]) for r in records], best=best.point_id,
                  level=0.8, source=str(path), model=trace.model, note=note, best_mean_s=best_mean)


def cost_terms(sc: Scenario, point: Any, inputs: Any) -> list[str]:
    """One line per GPU cost term in force at ``point`` (the report's setup): the contention
    prior's derivation when it is what the simulation used, the host costs
    (:func:`ddpsim.network.cost_terms.explain_terms`)."""
    prior = None
    if sc.cost_model.contention and sc.simulation.interference is None and sc.calibration is None:
        graph = point_graph(sc, point.nodes)
        found = contention_prior(sc.cost_model, graph, inputs.comm) if graph is not None else None
        if found is not None and inputs.config.interference == found.interference:
            prior = found
    return explain_terms(sc.cost_model, inputs.config, inputs.comm, prior)


def eager_comparison(sc: Scenario, records: Sequence[Any], trace: Any, build: Callable,
                     sim: Callable | None) -> dict[str, Any]:
    """Every point of a compiled scenario simulated once more as eager DDP (same trace, cluster and
    caps): p50 per point and the eager best, beside the compiled mode and the count of compiled
    backward units per point (:func:`ddpsim.plan.compiled.compiled_subgraphs`; None under
    compiled autograd), the report's ``compile`` figures."""
    eager = sc.updated(compile=None)
    rows = [{"point": r.point_id, "compiled_p50_s": r.metrics["iteration_p50_s"],
             "eager_p50_s": p50_s(sim, build(eager, r.point, trace)),
             "subgraphs": None if sc.compile.compiled_autograd else
             len(compiled_subgraphs(trace, sc.ddp_options(r.point), sc.compile))} for r in records]
    best_eager = min(rows, key=lambda x: x["eager_p50_s"])
    return {"mode": sc.compile.mode, "points": rows, "eager_best": best_eager["point"],
            "eager_best_p50_s": best_eager["eager_p50_s"]}
