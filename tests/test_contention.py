"""The GPU contention prior (ddpsim.network.contention) against values worked out by hand."""

from __future__ import annotations

import pytest

from ddpsim.network import nccl
from ddpsim.network.collective_cost import build_comm_model
from ddpsim.network.contention import (GpuResources, collective_contention, contention_prior, hbm_bytes,
                                       runtime_channels, system_prior)
from ddpsim.errors import InputError
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.network.cost_terms import CostModelSpec
from ddpsim.network.interference import Interference
from ddpsim.network.topology import build_preset

MIB = 2 ** 20
SPEC = CostModelSpec()


def a100_1n():
    g = build_preset("dgx-a100", num_nodes=1)
    return g, build_comm_model(g, 8)


def test_runtime_channels_follow_connect_and_enqueue():
    _, m = a100_1n()
    assert m.system.ring.num_channels == 12
    # connect.cc: 2 x 12 searched rings = 24 blocks at 25 MiB (ring/simple: 24*512*64 = 768 KiB < 25 MiB)
    assert runtime_channels(m.system, "ring", "simple", 25 * MIB) == 24
    # enqueue.cc: 64 KiB ring/LL on 8 ranks, threshold 8*8 = 64 B/thread, 512 threads: 32 KiB per
    # channel, so nc drops while 65536 < nc * 32768, i.e. to 2
    assert runtime_channels(m.system, "ring", "ll", 64 * 1024) == 2
    # LL128: 640 threads x 8 B = 5 KiB per channel: 12 KiB -> nc = 2 (12288 < 3*5120 but not 2*5120)
    assert runtime_channels(m.system, "ring", "ll128", 12 * 1024) == 2
    # NVLS on sm90: NVLS_NCHANNELS_SM90 = 16, whatever the size
    gh = build_preset("dgx-h100", num_nodes=1)
    mh = build_comm_model(gh, 8)
    assert runtime_channels(mh.system, "nvls", "simple", 100 * MIB) == 16


def test_hbm_bytes_per_gpu():
    # ring, 8 ranks: (5*7 + 1)/8 = 4.5 S; LL doubles it (a flag per 8 bytes); NVLS reads and writes once
    assert hbm_bytes("ring", "simple", 8 * MIB, 8) == pytest.approx(4.5 * 8 * MIB)
    assert hbm_bytes("ring", "ll", 8 * MIB, 8) == pytest.approx(9.0 * 8 * MIB)
    assert hbm_bytes("ring", "ll128", 8 * MIB, 8) == pytest.approx(4.5 * 8 * MIB * 128 / 120)
    assert hbm_bytes("nvls", "simple", 8 * MIB, 8) == pytest.approx(2 * 8 * MIB)


def test_compute_slowdown_of_a_25_mib_ring_allreduce_on_a100():
    _, m = a100_1n()
    res = GpuResources(num_sms=108, hbm_bytes_per_s=2.039e12)
    c = collective_contention(m.system, res, 25 * MIB)
    # tuning.cc, worked by hand: 25 MiB is ring/simple, 8.4 + 14*3.4 = 56 us + 26214400 / (1000 * 137.14) us
    t_us = 56.0 + 25 * MIB / (1000.0 * 240 * 8 / 14)
    assert (c.algorithm, c.protocol, c.channels) == ("ring", "simple", 24)
    assert nccl.time_us(m.system, "ring", "simple", 25 * MIB) == pytest.approx(t_us)
    h = 4.5 * 25 * MIB / (t_us * 1e-6) / 2.039e12
    assert c.hbm_share == pytest.approx(h)
    assert c.sm_share == pytest.approx(24 / 108)
    assert c.compute_slowdown == pytest.approx(0.5 / (1 - 24 / 108) + 0.5 * max(1.0, 0.75 + h))


def test_prior_table_and_comm_slowdown():
    g, m = a100_1n()
    p = contention_prior(SPEC, g, m)
    i = p.interference
    assert i.weighting == "table"
    # the table's share is (slowdown(S) - 1) / (compute_slowdown - 1): 1.0 at the worst size
    worst = p.largest
    assert i.weight_for(worst.size_bytes) == pytest.approx(1.0)
    c25 = collective_contention(m.system, p.resources, 25 * MIB)
    assert p.reference.size_bytes == 25 * MIB
    lo = max(s for s, _ in i.size_weights if s <= 25 * MIB)
    assert i.weight_for(25 * MIB) == pytest.approx((collective_contention(m.system, p.resources, lo).compute_slowdown - 1)
                                                   / (i.compute_slowdown - 1), abs=1e-5)
    assert c25.compute_slowdown <= i.compute_slowdown
    # a 64-byte all-reduce (ring/LL on one channel) takes almost nothing
    assert i.weight_for(64) < 0.05
    assert i.weight_for(0) == 0.0
    h_max = max(collective_contention(m.system, p.resources, s).hbm_share for s, _ in i.size_weights)
    assert i.comm_slowdown == pytest.approx(1 + 0.5 * (max(1.0, 0.75 + h_max) - 1), abs=1e-6)
    assert "of 108 SMs" in p.explain() and "compute slowed" in p.explain()


def test_no_prior_for_gloo_one_rank_or_no_sm_count():
    g = build_preset("cpu-gloo", num_nodes=1)
    assert contention_prior(SPEC, g, build_comm_model(g, 2)) is None
    ga = build_preset("dgx-a100", num_nodes=1)
    assert contention_prior(SPEC, ga, build_comm_model(ga, 1)) is None
    res = GpuResources(num_sms=108, hbm_bytes_per_s=2e12, memory_bound_fraction=0.0)
    # phi = 0 and no SM taken -> nothing: a system whose only collective is free
    assert system_prior(build_comm_model(ga, 1).system, res) is None


def test_interference_table_validation():
    with pytest.raises(InputError, match=r"^interference.size_weights: .* is not accepted"):
        Interference(compute_slowdown=1.5, weighting="table", size_weights=((2, 0.5), (1, 0.6)))
    with pytest.raises(InputError, match=r"^interference.size_weights: .* is not accepted"):
        Interference(compute_slowdown=1.5, weighting="table", size_weights=((1, 1.5),))
    with pytest.raises(InputError, match=r"^interference.size_weights: \(\) is not accepted with weighting 'table'"):
        Interference(compute_slowdown=1.5, weighting="table")
    i = Interference(compute_slowdown=1.5, weighting="table", size_weights=((10, 0.25), (100, 1.0)))
    assert (i.weight_for(9), i.weight_for(10), i.weight_for(99), i.weight_for(10 ** 9)) == (0.0, 0.25, 0.25, 1.0)


def _gpu_scenario(**extra):
    d = {"name": "t", "trace": "traces/resnet50.a100.json", "cluster": {"topology": "dgx-a100", "nodes": 1},
         "world_size": 8, "sweep": {"bucket_cap_mb": [None]}}
    d.update(extra)
    return scenario_from_dict(d, source="t.yaml")


def test_scenario_uses_the_prior_unless_switched_off_or_given():
    sc = _gpu_scenario()
    inp = sc.build_point(sc.points()[0])
    assert inp.config.interference.weighting == "table" and inp.config.interference.compute_slowdown > 1.1
    off = _gpu_scenario(cost_model={"contention": False})
    assert off.build_point(off.points()[0]).config.interference == Interference()
    given = _gpu_scenario(simulation={"interference": {"compute_slowdown": 1.3}})
    assert given.build_point(given.points()[0]).config.interference == Interference(compute_slowdown=1.3)


def test_host_costs_on_for_analytical_nccl_only():
    from ddpsim.network.host_costs import HostCosts

    sc = _gpu_scenario(cost_model={"enqueue_s": 2e-5})
    assert sc.build_point(sc.points()[0]).config.host_costs == HostCosts(enqueue_s=2e-5)
    cfg = sc.build_point(sc.points()[0]).config
    # A100-SXM4-80GB: 2039 GB/s x 0.75, 4 us per copy kernel
    assert cfg.copy_bandwidth_bytes_per_s == pytest.approx(2.039e12 * 0.75) and cfg.copy_kernel_floor_s == 4e-6
    nocopy = _gpu_scenario(cost_model={"copy_kernels": False}).build_point(sc.points()[0]).config
    assert nocopy.copy_bandwidth_bytes_per_s == pytest.approx(2.039e12) and nocopy.copy_kernel_floor_s == 0.0
    off = _gpu_scenario(cost_model={"host": False})
    assert off.build_point(off.points()[0]).config.host_costs is None
    cpu = scenario_from_dict({"name": "c", "trace": "traces/mlp.cpu.json", "cluster": {"topology": "cpu-gloo"}}, source="c")
    inp = cpu.build_point(cpu.points()[0])
    assert inp.config.host_costs is None and inp.config.interference == Interference()


@pytest.mark.parametrize("block, msg", [
    ({"contention": "yes"}, r"^t.yaml: cost_model.contention: 'yes' is not accepted; expected true or false$"),
    ({"memory_bound_fraction": 2}, r"^t.yaml: cost_model.memory_bound_fraction: 2 is not accepted; expected a number in \[0, 1\]$"),
    ({"speed": 1}, r"^t.yaml: cost_model.speed: unknown key; expected one of "),
    ({"copy_kernels": "on"}, r"^t.yaml: cost_model.copy_kernels: 'on' is not accepted; expected true or false$"),
    ({"min_kernel_s": -4e-6}, r"^t.yaml: cost_model.min_kernel_s: -4e-06 is not accepted"),
    ({"memory_efficiency": 0}, r"^t.yaml: cost_model.memory_efficiency: 0 is not accepted; expected a number in \(0, 1\]$"),
    ({"uncertainty": "few"}, r"^t.yaml: cost_model.uncertainty: 'few' is not accepted; expected true or false$"),
    ({"host": 1}, r"^t.yaml: cost_model.host: 1 is not accepted; expected true or false$"),
    ({"enqueue_s": -1e-6}, r"^t.yaml: cost_model.enqueue_s: -1e-06 is not accepted; expected a finite number of seconds >= 0$"),
    ({"hook_s_per_param": "8us"}, r"^t.yaml: cost_model.hook_s_per_param: '8us' is not accepted"),
    ({"pre_forward_s": float("inf")}, r"^t.yaml: cost_model.pre_forward_s: inf is not accepted"),
    ({"bucket_launch_s": None}, r"^t.yaml: cost_model.bucket_launch_s: None is not accepted"),
    ([1], r"^t.yaml: cost_model: \[1\] is not accepted; expected a mapping"),
])
def test_bad_cost_model_keys(block, msg):
    with pytest.raises(InputError, match=msg):
        _gpu_scenario(cost_model=block)


def _calibration_doc(**extra):
    d = {"format": "ddpsim-calibration", "version": 1, "backend": "nccl", "world_size": 8,
         "collectives": {"allreduce": [{"size_bytes": 1024, "time_s": 2e-5}, {"size_bytes": 2 ** 20, "time_s": 1e-4}]}}
    d.update(extra)
    return d


def test_calibration_host_costs_block_replaces_the_defaults():
    from ddpsim.calibration.loader import calibration_from_dict
    from ddpsim.formats import CALIBRATION_FORMAT, CALIBRATION_VERSION
    from ddpsim.network.host_costs import HostCosts

    doc = _calibration_doc(format=CALIBRATION_FORMAT, version=CALIBRATION_VERSION)
    assert calibration_from_dict(doc).host_costs is None
    cal = calibration_from_dict({**doc, "host_costs": {"enqueue_s": 2.5e-5, "pre_forward_s": 0.0}})
    assert cal.host_costs == HostCosts(enqueue_s=2.5e-5, pre_forward_s=0.0)
    with pytest.raises(InputError, match=r"^calibration: host_costs.enqueue_s: -1 is not accepted; expected a finite number of seconds >= 0"):
        calibration_from_dict({**doc, "host_costs": {"enqueue_s": -1}})
    with pytest.raises(InputError, match=r"^calibration: host_costs.speed: unknown key; expected one of pre_forward_s"):
        calibration_from_dict({**doc, "host_costs": {"speed": 1}})
    with pytest.raises(InputError, match=r"^calibration: host_costs: 3 is not accepted"):
        calibration_from_dict({**doc, "host_costs": 3})


def test_the_prior_follows_memory_bound_fraction():
    # the samples ask for phi 0.3 and 0.7 after the prior's 0.5: each gets its own derivation,
    # equal to one computed afresh (comm_slowdown = 1 + phi * (max(1, m + h_max) - 1) moves with phi)
    g, m = a100_1n()
    asked = {phi: contention_prior(CostModelSpec(memory_bound_fraction=phi), g, m)
             for phi in (0.5, 0.3, 0.7, 0.3)}
    for phi, p in asked.items():
        fresh = contention_prior(CostModelSpec(memory_bound_fraction=phi), g, m)
        assert p == fresh and p.resources.memory_bound_fraction == phi
    assert asked[0.3].interference.comm_slowdown < asked[0.5].interference.comm_slowdown < asked[0.7].interference.comm_slowdown
