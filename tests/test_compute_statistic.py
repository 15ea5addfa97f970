"""SimConfig.compute_statistic: the engine reads the trace's iterations by their median (default)
or their mean; ddpsim validate predicts its measured mean steps with the mean. Hand-worked."""

from dataclasses import replace

import pytest

from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.engine.simulate import simulate
from ddpsim.errors import InputError
from ddpsim.plan.planner import explicit_plan
from ddpsim.engine.config import SimConfig
from ddpsim.trace.records import IterationSample, make_trace

MIB = 1024 * 1024


def skewed_trace():
    # three iterations: forward 10, 10, 40 ms; backward 20, 20, 50 ms (ready at half of it);
    # optimizer 5, 5, 20 ms. Medians 10 / 20 / 5 ms, means 20 / 30 / 10 ms.
    t = make_trace(model="toy", params=[("a", (MIB // 4,), "float32")], ready_s=[0.01], forward_s=0.01,
                   backward_s=0.02, optimizer_s=0.005)
    its = tuple(IterationSample(forward_s=f, backward_s=b, optimizer_s=o, grad_ready_s=(b / 2,))
                for f, b, o in ((0.010, 0.020, 0.005), (0.010, 0.020, 0.005), (0.040, 0.050, 0.020)))
    return replace(t, iterations=its)


def test_phase_statistics_by_hand():
    t = skewed_trace()
    ph = t.phase("forward")
    assert ph.median_s == pytest.approx(0.010) and ph.mean_s == pytest.approx(0.020)
    assert ph.stat("median") == ph.median_s and ph.stat("mean") == ph.mean_s
    assert t.grad_ready_stat_s("mean") == pytest.approx((0.015,))
    assert t.grad_ready_stat_s("median") == pytest.approx((0.010,))
    with pytest.raises(InputError, match="compute_statistic: 'mode'"):
        ph.stat("mode")
    with pytest.raises(InputError, match="compute_statistic: 'p90'"):
        t.grad_ready_stat_s("p90")


def test_the_engine_steps_by_the_chosen_statistic():
    t = skewed_trace()
    plan = explicit_plan(t, [[0]])
    net = AlphaBetaModel(latency_s=0.0)  # communication free
    cfg = SimConfig(world_size=2, num_iterations=3, jitter="none")
    med = simulate(t, plan, net, cfg).summary()
    mean = simulate(t, plan, net, replace(cfg, compute_statistic="mean")).summary()
    assert med["forward_s"] == pytest.approx(0.010, rel=1e-6) and mean["forward_s"] == pytest.approx(0.020, rel=1e-6)
    assert med["optimizer_s"] == pytest.approx(0.005, rel=1e-6) and mean["optimizer_s"] == pytest.approx(0.010, rel=1e-6)
    # forward + backward + optimizer: 35 ms by the medians, 60 ms by the means
    assert med["iteration_mean_s"] == pytest.approx(0.035, rel=1e-3)
    assert mean["iteration_mean_s"] == pytest.approx(0.060, rel=1e-3)


def test_bad_statistic_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match="compute_statistic: 'p50' is not accepted; expected one of median, mean"):
        SimConfig(compute_statistic="p50")
    from ddpsim.cli.main import main
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "scenarios" / "default.yaml").read_text().replace("trace: traces/", f"trace: {root / 'traces'}/")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  no_sync_steps: 0", "  no_sync_steps: 0\n  compute_statistic: p50"))
    assert main(["run", str(bad), "--out-dir", str(tmp_path), "--quiet"]) == 2


def test_the_scenario_key_reaches_the_engine_and_validation_predicts_with_the_mean(tmp_path):
    from pathlib import Path

    from ddpsim.validation.intervals import validation_inputs
    from ddpsim.engine.config import VALIDATION_STATISTIC
    from ddpsim.pipeline.scenario import load_scenario

    root = Path(__file__).resolve().parents[1]
    text = (root / "scenarios" / "default.yaml").read_text().replace("trace: traces/", f"trace: {root / 'traces'}/")
    f = tmp_path / "mean.yaml"
    f.write_text(text.replace("  no_sync_steps: 0", "  no_sync_steps: 0\n  compute_statistic: mean"))
    sc = load_scenario(str(f))
    p = sc.points()[0]
    assert sc.build_point(p).config.compute_statistic == "mean"
    assert sc.simulation.compute_statistic == "mean"
    plain = load_scenario("default")
    assert plain.build_point(p).config.compute_statistic == "median" == plain.simulation.compute_statistic
    assert VALIDATION_STATISTIC == "mean"
    assert validation_inputs(plain, p, trace=plain.load_trace()).config.compute_statistic == "mean"
