"""The recommendation's uncertainty (ddpsim.pipeline.resampling) against hand-computed figures."""

from __future__ import annotations

import pytest

from ddpsim.network import nccl_exec
from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.pipeline.recommend import ScaledComm
from ddpsim.pipeline.resampling import MID_HI_BYTES, MID_LO_BYTES, band_samples, samples_for, summarize, term_samples


def _samples(labels, inputs, p50):
    return {"labels": labels, "inputs": inputs, "p50_s": p50}


def test_summarize_bands_regrets_robust_set_and_sensitivity():
    labels, inputs = ["phi lo", "phi hi", "seed 1"], ["phi", "phi", "seed"]
    # prior p50: a 1.00, b 1.005, c 1.10. Under "phi hi" b wins (1.00 vs a 1.02: a is 2 % behind).
    pts = ["a", "b", "c"]
    prior = [1.00, 1.005, 1.10]
    samples = [_samples(labels, inputs, [0.90, 1.02, 1.00]),
               _samples(labels, inputs, [0.905, 1.00, 1.004]),
               _samples(labels, inputs, [1.00, 1.20, 1.10])]
    u = summarize(pts, prior, samples)
    assert [(p["point"], p["p50_lo_s"], p["p50_hi_s"]) for p in u["points"]] == [
        ("a", 0.90, 1.02), ("b", 0.905, 1.005), ("c", 1.00, 1.20)]
    # regrets: a = (0, 0, 0.02, 0), b = (0.005, 0.005556, 0, 0.004), c = (0.1, 0.1111, 0.2, 0.1)
    assert u["points"][0]["regret_max"] == pytest.approx(0.02)
    assert u["points"][1]["regret_max"] == pytest.approx(0.905 / 0.90 - 1)
    assert u["robust"] == ["b"]          # a is 2 % behind under "phi hi"
    assert u["prior_best"] == "a" and u["best_under"]["phi hi"] == "b"
    assert u["safest"] == "b"
    assert u["sensitivity"]["phi"]["prior_best_regret"] == pytest.approx(0.02)
    assert u["sensitivity"]["seed"]["prior_best_regret"] == 0.0
    assert u["most_sensitive"] == "phi"
    assert summarize(pts, prior, [{}, {}, {}]) is None


def test_mid_size_scaled_model():
    base = AlphaBetaModel(latency_s=1e-3, bandwidth_bytes_per_s=1e9, num_ranks=4)
    m = ScaledComm(base, 1.25, lo_bytes=MID_LO_BYTES, hi_bytes=MID_HI_BYTES)
    assert m.allreduce_s(1024) == base.allreduce_s(1024)                 # below 64 KiB
    assert m.allreduce_s(2 ** 20) == pytest.approx(1.25 * base.allreduce_s(2 ** 20))
    assert m.allreduce_s(128 * 2 ** 20) == base.allreduce_s(128 * 2 ** 20)  # above 64 MiB
    assert m.broadcast_s(2 ** 20) == base.broadcast_s(2 ** 20) and m.num_ranks == 4


def test_samples_follow_the_terms_in_force():
    gpu = scenario_from_dict({"name": "g", "trace": "traces/resnet50.a100.json", "cluster": {"topology": "dgx-a100"},
                              "world_size": 8, "sweep": {"bucket_cap_mb": [None]}}, source="g")
    labels = [s.label for s in band_samples(gpu, gpu.build_point(gpu.points()[0]))]
    assert labels == ["memory_bound_fraction=0.3", "memory_bound_fraction=0.7", "host costs x0.5", "host costs x2",
                      *(f"NCCL 64 KiB-64 MiB x{f:g}" for f in nccl_exec.MID_SIZE_RATIOS), "seed 1", "seed 2"]
    cpu = scenario_from_dict({"name": "c", "trace": "traces/mlp.cpu.json", "cluster": {"topology": "cpu-gloo"},
                              "simulation": {"jitter": "none"}}, source="c")
    assert samples_for(cpu, cpu.build_point(cpu.points()[0])) == []
    off = scenario_from_dict({"name": "g", "trace": "traces/resnet50.a100.json", "cluster": {"topology": "dgx-a100"},
                              "world_size": 8, "cost_model": {"uncertainty": False}}, source="g")
    assert samples_for(off, off.build_point(off.points()[0])) == []


def test_robust_caps_contiguous_in_the_sweep_read_as_a_range():
    from ddpsim.report.figures import Uncertainty, typed
    from ddpsim.report.summary import render_uncertainty, robust_phrase

    pts = ["cap=default", "cap=1", "cap=5", "cap=10", "cap=25", "cap=50", "cap=100"]
    # 5, 10, 25, 50 robust in a row (1 and 100 not): one range; the default by its id
    assert robust_phrase(pts, ["cap=default", "cap=5", "cap=10", "cap=25", "cap=50"]) == \
        "`cap=default`, caps 5\u201350 MiB (4 points swept)"
    # two in a row stay ids; a gap (25 not robust) splits runs
    assert robust_phrase(pts, ["cap=5", "cap=10", "cap=50", "cap=100"]) == "`cap=5`, `cap=10`, `cap=50`, `cap=100`"
    # the cap order, not the sweep's listing order, decides what lies between
    assert robust_phrase(["cap=default", "cap=25", "cap=1", "cap=5"], ["cap=25", "cap=1", "cap=5"]) == \
        "caps 1\u201325 MiB (3 points swept)"
    # other swept values: ranges per value
    hp = [f"cap={c},hook={h}" for c in ("default", "1", "5", "25") for h in ("none", "fp16")]
    rob = ["cap=1,hook=fp16", "cap=5,hook=fp16", "cap=25,hook=fp16", "cap=5,hook=none"]
    assert robust_phrase(hp, rob) == "caps 1\u201325 MiB (3 points swept, hook=fp16), `cap=5,hook=none`"
    u = {"tolerance": 0.01, "samples": ["seed 1"], "inputs": ["seed"], "robust": ["cap=5", "cap=10", "cap=25"],
         "points": [{"point": p} for p in pts], "most_sensitive": None, "prior_best": "cap=25", "safest": "cap=25",
         "safest_regret_max": 0.0, "sensitivity": {}}
    assert render_uncertainty(typed(Uncertainty, u)) == ("- Under the model's uncertainty (1 re-simulations per point: seed): any of "
                                     "caps 5\u201325 MiB (3 points swept) is within 1 % of the best in every one.")


def test_the_pool_runs_each_sample_as_a_task_and_stores_the_serial_bytes(monkeypatch):
    # jobs=2: one unit per point and, once its record is in, one task per sample of it; each
    # point's record carries its samples in sample order, as one process computes them (same
    # p50 values, same dict)
    import json

    from ddpsim.pipeline import sweep

    sc = scenario_from_dict({"name": "g", "trace": "traces/resnet50.a100.json", "cluster": {"topology": "dgx-a100"},
                             "world_size": 8, "sweep": {"bucket_cap_mb": [None, 5]},
                             "simulation": {"iterations": 4}}, source="g")
    serial = sweep.run_sweep(sc, jobs=1, progress=False)
    seen = []
    real = sweep.run_in_pool

    def spy(job, tasks, workers, finish):
        seen.extend(u for t in tasks for u in t)  # (point, None): the point itself

        def follow(row):
            more = finish(row)
            seen.extend(more)  # (point, k): its sample k
            return more
        return real(job, tasks, workers, follow)

    monkeypatch.setattr(sweep, "run_in_pool", spy)
    pooled = sweep.run_sweep(sc, jobs=2, progress=False)
    inputs = sc.build_point(sc.points()[0])
    n = len(samples_for(sc, inputs))
    # the band's 8 samples, then the runs with the 3 cost terms off: together, then each alone
    assert len(band_samples(sc, inputs)) == 8 and len(term_samples(sc, inputs)) == 4
    assert n == 12 and sorted(seen, key=lambda u: (u[0], -1 if u[1] is None else u[1])) == \
        [(i, k) for i in (0, 1) for k in (None, *range(n))]
    for a, b in zip(serial, pooled):
        assert a.metrics["uncertainty"]["labels"] == [s.label for s in samples_for(sc, sc.build_point(a.point))]
        assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def test_a_points_resimulations_share_its_inputs_and_prior(monkeypatch):
    # the sweep builds a point again for each of its samples: the second build is the first's
    # inputs, and the contention prior is derived once per network and memory_bound_fraction
    from ddpsim.network import contention
    from ddpsim.pipeline import inputs as inputs_mod
    from ddpsim.pipeline.resampling import sample_runs

    monkeypatch.setattr(inputs_mod, "_KEPT", inputs_mod._Kept(inputs_mod.KEPT_SIZE))
    derived = []

    def counted(spec, graph, comm):
        derived.append(spec.memory_bound_fraction)
        return contention.contention_prior(spec, graph, comm)

    monkeypatch.setattr(inputs_mod, "cost_prior", counted)
    sc = scenario_from_dict({"name": "g", "trace": "traces/resnet50.a100.json", "cluster": {"topology": "dgx-a100"},
                             "world_size": 8, "sweep": {"bucket_cap_mb": [None, 5]}}, source="g")
    trace = sc.load_trace()
    p0, p1 = sc.points()
    first = sc.build_point(p0, trace=trace)
    assert sc.build_point(p0, trace=trace) is first
    assert sc.build_point(p1, trace=trace).comm is first.comm
    assert derived == [0.5]  # one network, one prior for both points
    # what terms_in_force derives itself over a graph of its own (nothing kept for it)
    fresh = sc.build_point(p0, trace=trace, graph=sc.graph(p0.nodes))
    assert fresh is not first and fresh.config == first.config
    assert derived == [0.5, 0.5]
    runs = sample_runs(sc, p0, first) + sample_runs(sc, p0, first)
    assert derived == [0.5, 0.5, 0.3, 0.7]  # the band's two values, each once
    phi = {s.label: cfg.interference for s, _, cfg in runs if s.memory_bound_fraction is not None}
    for v in (0.3, 0.7):
        want = contention.contention_prior(sc.updated(cost_model={"memory_bound_fraction": v}).cost_model,
                                           sc.graph(p0.nodes), first.comm)
        assert phi[f"memory_bound_fraction={v:g}"] == want.interference
