"""Which GPU cost terms move the best cap: the sweep simulated again with terms off."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ddpsim.engine.simulate import simulate
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.pipeline.sweep import best_record, run_sweep
from ddpsim.pipeline.resampling import TERMS, off_label, off_sets, terms_on
from ddpsim.pipeline.term_effects import term_effects

ROOT = Path(__file__).resolve().parents[1]


def _build(scenario, point, trace):
    return scenario.build_point(point, trace=trace)


def _scenario(topology: str = "dgx-h100", nodes: int = 2):
    return scenario_from_dict({"name": "t", "trace": str(ROOT / "traces/gpt2-124m.measured.h100.json"),
                               "cluster": {"topology": topology, "nodes": nodes},
                               "simulation": {"iterations": 4, "jitter": "none"},
                               "cost_model": {"uncertainty": False},
                               "sweep": {"bucket_cap_mb": [None, 1, 100]}, "timelines": []}, source="test")


@pytest.fixture(scope="module", params=["dgx-h100", "dgx-v100"])
def swept(request):
    """GPT-2 124M on two nodes: on H100s the terms move the best cap, on V100s they do not."""
    sc = _scenario(request.param)
    trace = sc.load_trace()
    return sc, trace, run_sweep(sc, trace=trace, progress=False, jobs=1)


def test_all_terms_off_is_the_sweep_of_the_scenario_without_them(swept):
    sc, trace, records = swept
    eff = term_effects(sc, records, trace, build=_build, simulate=simulate)
    assert eff["best"] == best_record(records).point_id and eff["terms"] == list(TERMS)
    first = eff["without"][0]
    assert first["off"] == list(TERMS)
    off = sc.updated(cost_model={"contention": False, "copy_kernels": False, "host": False})
    again = run_sweep(off, trace=trace, progress=False, jobs=1)
    best = best_record(again)
    p50 = {r.point_id: r.metrics["iteration_p50_s"] for r in again}
    assert first["best_p50_s"] == pytest.approx(p50[best.point_id], rel=1e-6)
    assert first["best"] in (best.point_id, eff["best"])  # the full model's best where it ties
    # what the full model's best loses in that world: never negative, zero where it is the best
    assert first["lost"] >= 0 and (first["lost"] == 0) == (first["best"] == eff["best"])


def test_each_term_alone_only_where_all_off_moves_the_best(swept):
    sc, trace, records = swept
    eff = term_effects(sc, records, trace, build=_build, simulate=simulate)
    moved = eff["without"][0]["best"] != eff["best"]
    assert len(eff["without"]) == (1 + len(TERMS) if moved else 1)
    for w in eff["without"][1:]:
        assert len(w["off"]) == 1 and w["lost"] >= 0
    assert eff["moved_by"] == [w["off"][0] for w in eff["without"][1:] if w["best"] != eff["best"]]


def test_the_sweep_stores_the_runs_and_a_rerun_simulates_nothing(swept):
    # every point carries its runs with the terms off (the sweep's re-simulations); read back
    # they give the very figures the runs simulated here give
    sc, trace, records = swept
    assert all(off_label(off) in r.metrics["uncertainty"]["labels"] for r in records for off in off_sets(sc))

    def never(*a, **k):
        raise AssertionError("a stored run simulated again")

    stored = term_effects(sc, records, trace, build=_build, simulate=never)
    bare = [replace(r, metrics={k: v for k, v in r.metrics.items() if k != "uncertainty"}) for r in records]
    assert stored == term_effects(sc, bare, trace, build=_build, simulate=simulate)


def test_the_runs_with_terms_off_are_no_samples_of_the_band():
    from ddpsim.pipeline.resampling import TERMS_INPUT, summarize

    def samples(p50, off_p50):
        return {"labels": ["seed 1", off_label(TERMS)], "inputs": ["jitter seed", TERMS_INPUT], "p50_s": [p50, off_p50]}

    band = summarize(["a", "b"], [1.0, 1.1], [samples(1.0, 0.5), samples(1.2, 0.1)])
    assert band["samples"] == ["seed 1"] and band["inputs"] == ["jitter seed"]
    assert [p["p50_hi_s"] for p in band["points"]] == [1.0, 1.2]  # the runs off leave the bands alone
    only_off = {"labels": [off_label(TERMS)], "inputs": [TERMS_INPUT], "p50_s": [0.5]}
    assert summarize(["a", "b"], [1.0, 1.1], [only_off, only_off]) is None


@pytest.mark.parametrize("topology", ["dgx-h100", "dgx-v100"])
def test_a_stored_run_is_the_point_of_the_scenario_without_the_terms(topology):
    # the config of each run with terms off is what the scenario without them builds for the point
    from ddpsim.pipeline.resampling import term_samples, terms_off_config

    sc = _scenario(topology)
    for point in sc.points():
        inputs = sc.build_point(point)
        runs = term_samples(sc, inputs)
        assert [s.terms_off for s in runs] == off_sets(sc)
        for off in off_sets(sc):
            without = sc.updated(cost_model={t: False for t in off})
            assert terms_off_config(sc, inputs, sc.graph(point.nodes), off) == without.build_point(point).config


def test_no_runs_for_a_config_the_scenario_does_not_build():
    # a build of a test's (another copy bandwidth): the runs off are left to term_effects' own build
    from ddpsim.pipeline.resampling import term_samples

    sc = _scenario()
    inputs = sc.build_point(sc.points()[0])
    assert term_samples(sc, inputs)
    other = replace(inputs, config=replace(inputs.config, copy_bandwidth_bytes_per_s=1e9))
    assert term_samples(sc, other) == []


def test_no_runs_where_no_term_is_in_force():
    from ddpsim.pipeline.resampling import term_samples

    sc = scenario_from_dict({"name": "c", "trace": str(ROOT / "traces/mlp.cpu.json"), "cluster": {"topology": "cpu-gloo"},
                             "simulation": {"jitter": "none"}, "sweep": {"bucket_cap_mb": [None, 1]}}, source="c")
    assert off_sets(sc) and term_samples(sc, sc.build_point(sc.points()[0])) == []


def test_off_sets_all_then_each_alone():
    sc = _scenario()
    assert off_sets(sc) == [TERMS, *((t,) for t in TERMS)]
    one = sc.updated(cost_model={"copy_kernels": False, "host": False})
    assert off_sets(one) == [("contention",)]
    assert off_sets(sc.updated(sweep={"bucket_cap_mb": [None]})) == []


def test_no_term_on_gives_nothing(swept):
    sc, trace, records = swept
    off = sc.updated(cost_model={"contention": False, "copy_kernels": False, "host": False})
    assert terms_on(off) == ()
    assert term_effects(off, records, trace, build=_build, simulate=simulate) is None
    assert term_effects(sc, records[:1], trace, build=_build, simulate=simulate) is None


def test_the_summary_names_the_terms_that_moved_it():
    from ddpsim.report.figures import TermEffects, typed
    from ddpsim.report.summary import term_effects_section as render

    def section(f: dict) -> list[str]:
        return render(typed(TermEffects, f["term_effects"]) if f else None)

    def w(off, best, lost):
        return {"off": off, "best": best, "best_p50_s": 0.08, "lost": lost}

    moved = {"best": "cap=100", "terms": list(TERMS), "moved_by": ["contention"],
             "without": [w(list(TERMS), "cap=1", 0.001), w(["contention"], "cap=1", 0.001),
                         w(["copy_kernels"], "cap=100", 0.0), w(["host"], "cap=100", 0.0)]}
    text = "\n".join(section({"term_effects": moved}))
    assert "without compute slowed while NCCL runs: `cap=1`, 0.10 % faster than `cap=100`" in text
    assert "without host costs: the same point" in text
    assert "The term that moves the best cap: compute slowed while NCCL runs." in text
    together = dict(moved, moved_by=[], without=moved["without"][:1] + [w(["host"], "cap=100", 0.0)])
    assert "No term alone moves the best cap; together they do." in "\n".join(section({"term_effects": together}))
    still = dict(moved, moved_by=[], without=[w(list(TERMS), "cap=100", 0.0)])
    assert "None of the terms moves the best cap." in "\n".join(section({"term_effects": still}))
    assert section({}) == []
