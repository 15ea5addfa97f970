"""Work the engine shares: a kept simulation is the one a fresh run gives, to the last bit.

``simulate`` keeps its last results keyed on what it reads; two caps that give the same buckets
are one simulation (only ``meta["plan"]`` differs), and spans are built when first read
(``LazyTuple(merged_spans, ...)``). The oracle is a fresh simulation with nothing kept.
"""

from __future__ import annotations

import pickle
from dataclasses import asdict, replace
from pathlib import Path

import ddpsim.engine.simulate as engine
from ddpsim.engine.config import SimConfig
from ddpsim.engine.result import LazyTuple, merged_spans
from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.plan.planner import DDPOptions, plan_ddp
from ddpsim.trace.records import load_trace

TRACE = load_trace(Path(__file__).resolve().parents[1] / "traces" / "gpt2-124m.h100.json")
CONFIG = SimConfig(world_size=64, num_iterations=3, jitter=0.05, seed=0, copy_bandwidth_bytes_per_s=3.35e12)


def comm():
    return AlphaBetaModel(latency_s=50e-6, bandwidth_bytes_per_s=25e9, num_ranks=64)


def fresh(plan, config=CONFIG, spans=True):
    engine._MEMO.clear()
    return engine.simulate(TRACE, plan, comm(), config, spans=spans)


def figures(res):
    return ([asdict(s) for s in res.spans], [asdict(b) for b in res.buckets], [asdict(i) for i in res.iterations],
            {k: v for k, v in res.meta.items() if k != "plan"})


def test_caps_with_the_same_buckets_share_one_simulation_with_their_own_plan_label():
    # caps far above GPT-2 124M's ~475 MiB of gradients: the same buckets, different options
    plans = [plan_ddp(TRACE, DDPOptions(bucket_cap_mb=c)) for c in (300, 400, 500, 1000)]
    same = [(a, b) for i, a in enumerate(plans) for b in plans[i + 1:]
            if [x.param_indices for x in a.steady] == [x.param_indices for x in b.steady]
            and [x.param_indices for x in a.initial] == [x.param_indices for x in b.initial]]
    assert same, "expected two caps with the same buckets"
    a, b = same[0]
    engine._MEMO.clear()
    ra = engine.simulate(TRACE, a, comm(), CONFIG)
    rb = engine.simulate(TRACE, b, comm(), CONFIG)  # a new, equal comm model: shared by value
    assert len(engine._MEMO) == 1
    assert rb.meta["plan"]["label"] == b.options.label() != ra.meta["plan"]["label"]
    assert figures(rb) == figures(fresh(b)) == figures(ra)


def test_different_inputs_are_never_shared():
    plan = plan_ddp(TRACE, DDPOptions())
    engine._MEMO.clear()
    r0 = engine.simulate(TRACE, plan, comm(), CONFIG)
    r1 = engine.simulate(TRACE, plan, comm(), replace(CONFIG, seed=1))
    r2 = engine.simulate(TRACE, replace(plan, options=replace(plan.options, gradient_as_bucket_view=True)), comm(), CONFIG)
    assert len(engine._MEMO) == 3
    assert r1.iterations != r0.iterations and figures(r1) == figures(fresh(plan, replace(CONFIG, seed=1)))
    assert figures(r2) != figures(r0)


def test_lazy_spans_are_the_tuple_and_pickle_as_it():
    plan = plan_ddp(TRACE, DDPOptions())
    res = fresh(plan)
    assert isinstance(res.spans, LazyTuple) and res.spans._build is merged_spans
    built = tuple(res.spans)
    assert res.spans == built and built == res.spans and len(res.spans) == len(built) > 0
    assert res.spans[0] == built[0] and res.spans[-3:] == built[-3:]
    back = pickle.loads(pickle.dumps(res))
    assert type(back.spans) is tuple and back == res
    assert fresh(plan, spans=False).spans == ()


def test_compute_time_by_kind_from_the_rows_is_the_sum_over_the_built_spans_to_the_bit():
    # the oracle: the same sum over the built Span objects, in their order
    from ddpsim.engine.result import compute_s_by_kind

    res = fresh(plan_ddp(TRACE, DDPOptions(bucket_cap_mb=5)))
    keys = {(it.rank, it.iteration) for it in res.iterations if it.iteration > 1}
    from_rows = compute_s_by_kind(res.spans, keys)  # before the spans are built
    oracle: dict[str, float] = {}
    for sp in tuple(res.spans):
        if sp.stream == "compute" and (sp.rank, sp.iteration) in keys:
            oracle[sp.kind] = oracle.get(sp.kind, 0.0) + (sp.end_s - sp.start_s)
    assert len(oracle) >= 3 and from_rows == oracle
    assert compute_s_by_kind(res.spans, keys) == oracle == compute_s_by_kind(tuple(res.spans), keys)


def test_lazy_buckets_are_the_bucket_timings_the_bucket_log_gives():
    # the oracle: BucketTiming's own constructor over the rank's bucket log and the collectives
    from ddpsim.engine.result import BucketTiming, LazyTuple

    plan = plan_ddp(TRACE, DDPOptions(bucket_cap_mb=5))
    res = fresh(plan, spans=False)
    assert isinstance(res.buckets, LazyTuple)
    built = tuple(res.buckets)
    ranks = sorted({b.rank for b in built})
    assert ranks == list(res.ranks) and len(built) == len(ranks) * (len(plan.initial) + 2 * len(plan.steady))
    spans = fresh(plan).spans
    comm = {(s.rank, s.iteration, s.bucket): s for s in spans if s.stream == "comm" and s.kind == "allreduce"}
    for b in built:
        c = comm[(b.rank, b.iteration, b.bucket)]
        layout = plan.initial if b.iteration == 1 else plan.steady
        again = BucketTiming(rank=b.rank, iteration=b.iteration, bucket=b.bucket, size_bytes=layout[b.bucket].size_bytes,
                             num_params=len(layout[b.bucket].param_indices), ready_s=b.ready_s, launch_s=b.launch_s,
                             start_s=c.start_s, end_s=c.end_s)
        assert b == again and asdict(b) == asdict(again)
    back = pickle.loads(pickle.dumps(res))
    assert type(back.buckets) is tuple and back.buckets == built
