"""The timelines of a run whose point files hold no spans: each timeline point is simulated
again with them, from the same inputs. The oracle is the spans the sweep's own simulation gave."""

from __future__ import annotations

from dataclasses import asdict, replace

from ddpsim.engine.simulate import simulate
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.pipeline.sweep import best_record, run_sweep
from ddpsim.pipeline.scenario_run import _with_timeline_spans


def test_a_timeline_point_without_spans_gets_the_spans_of_its_own_simulation():
    sc = scenario_from_dict({"name": "t", "trace": "traces/mlp.cpu.json", "cluster": {"topology": "cpu-gloo"},
                             "world_size": 2, "simulation": {"iterations": 3, "jitter": "none"},
                             "sweep": {"bucket_cap_mb": [None, 1]}}, source="t")
    trace = sc.load_trace()
    records = run_sweep(sc, trace=trace, progress=False, jobs=1)
    lean = [replace(r, result=replace(r.result, spans=())) for r in records]
    best = best_record(lean)
    got, got_best = _with_timeline_spans(sc, lean, best, trace, lambda s, p, t: s.build_point(p, trace=t), simulate)
    timeline = sc.timeline_points(best.point)
    assert got_best.point == best.point and len(got_best.result.spans) > 0
    for full, r in zip(records, got):
        if r.point in timeline:
            assert [asdict(s) for s in r.result.spans] == [asdict(s) for s in full.result.spans] != []
        else:  # the others are left as they are
            assert len(r.result.spans) == 0


def test_the_spans_are_simulated_when_first_read_and_once():
    sc = scenario_from_dict({"name": "t", "trace": "traces/mlp.cpu.json", "cluster": {"topology": "cpu-gloo"},
                             "world_size": 2, "simulation": {"iterations": 3, "jitter": "none"},
                             "sweep": {"bucket_cap_mb": [None, 1]}}, source="t")
    trace = sc.load_trace()
    lean = [replace(r, result=replace(r.result, spans=())) for r in run_sweep(sc, trace=trace, progress=False, jobs=1)]
    calls = []

    def counted(*args):
        calls.append(args[1])
        return simulate(*args)

    got, best = _with_timeline_spans(sc, lean, best_record(lean), trace, lambda s, p, t: s.build_point(p, trace=t), counted)
    assert calls == []                       # a rerun that keeps its traces and timelines reads none
    assert len(best.result.spans) > 0 and len(calls) == 1
    assert len(best.result.spans) > 0 and len(calls) == 1
