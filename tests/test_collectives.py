"""Collective cost models checked against NCCL's own model (src/graph/tuning.cc, worked by hand),
published measurements (nccl-tests issues) and gloo's closed form (gloo/allreduce.cc ring())."""

from __future__ import annotations

import json
import textwrap

import pytest

from ddpsim.network import gloo

from ddpsim.network import nccl, nccl_exec
from ddpsim.cli.main import main
from ddpsim.network.collective_cost import build_comm_model
from ddpsim.network.comm_model import CollectiveEstimate, CommModel
from ddpsim.errors import InputError
from ddpsim.network.topology import build_preset

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def model(preset: str, num_nodes: int = 1, ranks: int | None = None, **kw):
    opts = {k: kw.pop(k) for k in list(kw) if k not in ("algorithm", "protocol", "calibration")}
    g = build_preset(preset, num_nodes=num_nodes, **opts)
    n = ranks or sum(1 for _, d in g.nodes(data=True) if d["kind"] in ("gpu", "cpu"))
    return build_comm_model(g, n, **kw)


def within(value: float, target: float, rel: float) -> bool:
    return abs(value - target) <= rel * target


# ---- published measurements (nccl-tests issues) -----------------------------------------

def test_dgx_a100_one_node_large_allreduce_busbw_220_to_240():
    # nccl-tests#149 (~230 GB/s at 8 GiB), nccl-tests#175 (232.54 GB/s)
    e = model("dgx-a100").estimate_allreduce(8 * GiB)
    assert 220.0 <= e.busbw_gbps <= 240.0
    assert (e.algorithm, e.protocol) == ("ring", "simple")


def test_two_dgx_a100_nodes_busbw_192_within_10_percent():
    # nccl#812: "we measure 192GB/s AllReduce BusBW" with 8x HDR 200 Gb/s per node
    m = model("dgx-a100", num_nodes=2)
    e = m.estimate_allreduce(8 * GiB)
    assert within(e.busbw_gbps, 192.0, 0.10)
    d = m.describe()
    # graph search: NIC 25 GB/s -> speed 24 from speedArrayInter, one channel per NIC
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (8, 24.0)


def test_dgx_h100_nvls_480_and_forced_ring_370_within_10_percent():
    # nccl-tests#212: ~480 GB/s busbw with NVLS on 8 GPUs; 370 GB/s effective NVLink (ring)
    e = model("dgx-h100").estimate_allreduce(8 * GiB)
    assert e.algorithm == "nvls" and e.protocol == "simple"
    assert within(e.busbw_gbps, 480.0, 0.10)
    r = model("dgx-h100", algorithm="ring").estimate_allreduce(8 * GiB)
    assert r.algorithm == "ring"
    assert within(r.busbw_gbps, 370.0, 0.10)


def test_a800_eight_nvlinks_busbw_160_within_10_percent():
    # nccl#412: "~160GB/s intra-node" on A800 (8 NVLinks per GPU)
    e = model("dgx-a100", nvlinks_per_gpu=8).estimate_allreduce(8 * GiB)
    assert within(e.busbw_gbps, 160.0, 0.10)


# ---- NCCL's model (src/graph/tuning.cc), worked by hand -----------------------------------

def a100_12x20() -> nccl.NcclSystem:
    g = nccl.NcclGraph(num_channels=12, bw_intra_gbps=20.0, bw_inter_gbps=20.0, nvlink_intra=True)
    return nccl.NcclSystem(num_ranks=8, num_nodes=1, compute_capability=80, cpu_vendor="amd", ring=g, tree=g,
                           nvls=None, ll128_enabled=True)


@pytest.mark.parametrize("algo,proto,lat_us,algbw", [
    ("tree", "ll", 6.8 + 2 * 7 * 0.6, 240 * .92 / 3.8 * .5),
    ("tree", "ll128", 14 + 2 * 7 * 1.25, 220.8 * 7 / 9 * .5),
    ("tree", "simple", 8.4 + 2 * 7 * 4.0, 220.8 * .5),
    ("ring", "ll", 6.6 + 14 * 0.6, 87.7 * 8 / 14),
    ("ring", "ll128", 14 + 14 * 1.9, 220.8 * 8 / 14),
    ("ring", "simple", 8.4 + 14 * 3.4, 240 * 8 / 14),
])
def test_worked_example_latency_and_bandwidth(algo, proto, lat_us, algbw):
    s = a100_12x20()
    assert nccl.latency_us(s, algo, proto) == pytest.approx(lat_us, abs=1e-9)
    assert nccl.bandwidth_gbps(s, algo, proto) == pytest.approx(algbw, rel=1e-12)


def test_worked_example_ring_ll_latency_is_15_us():
    assert nccl.latency_us(a100_12x20(), "ring", "ll") == pytest.approx(15.0)


def test_worked_example_selection_and_times():
    s = a100_12x20()
    for size in (KiB, 16 * KiB, 256 * KiB, MiB):
        assert nccl.choose(s, size)[:2] == ("ring", "ll")
    a, p, t = nccl.choose(s, 4 * MiB)
    assert (a, p) == ("ring", "ll128") and t == pytest.approx(40.6 + 4 * MiB / (1000 * 220.8 * 8 / 14))
    assert round(t, 1) == 73.8
    a, p, t = nccl.choose(s, 25 * MiB)
    assert (a, p) == ("ring", "simple") and round(t) == 247
    assert round(25 * MiB / (t * 1e3) * 14 / 8) == 186  # busbw GB/s
    a, p, t = nccl.choose(s, 100 * MiB)
    assert (a, p) == ("ring", "simple") and round(t) == 821
    assert round(100 * MiB / (t * 1e3) * 14 / 8) == 224


def test_preset_graph_search_finds_12_channels_of_20_on_dgx_a100():
    # search: speed 40 x 6 channels = 240 = totalBw, then ncclTopoDupChannels -> 12 x 20
    d = model("dgx-a100").describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (12, 20.0)
    assert d["nvls_channels"] == 0 and d["ll128_enabled"] is True
    # the preset's model is the worked example's model
    m = model("dgx-a100")
    a, p, _ = nccl.choose(a100_12x20(), 4 * MiB)
    assert m.estimate_allreduce(4 * MiB).time_s == pytest.approx(nccl_exec.time_us(a100_12x20(), a, p, 4 * MiB) * 1e-6)


def test_dgx_h100_graph_search_ring_12x30_nvls_8x40():
    # sm90 intra speeds: 60 x 6 = 360 (best; 370.8 not reached), dup -> 12 x 30.
    # NVLS: 8 channels (one per GPU) at the highest speed with 8 x speed <= 370.8 -> 40.
    d = model("dgx-h100").describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (12, 30.0)
    assert (d["nvls_channels"], d["nvls_bw_per_channel_gbps"]) == (8, 40.0)
    # pass 2 raises the NVLS graph's bwInter 40 -> 50 -> 60 (< 2 x 40, top of the array)
    assert d["nvls_bw_inter_gbps"] == 60.0
    # NVLS busbw by hand: 8 x min(40 x 0.85 x 7/8 x 2 = 59.5, bwInter 60) = 476 GB/s
    s = model("dgx-h100").system
    assert nccl.bandwidth_gbps(s, "nvls", "simple") * 14 / 8 == pytest.approx(476.0)
    assert nccl.latency_us(s, "nvls", "simple") == 25.0


def test_protocol_switches_ll_ll128_simple_as_size_grows():
    m = model("dgx-a100")
    sizes = [2 ** k for k in range(10, 34, 2)]  # 1 KiB .. 8 GiB
    protos = [m.estimate_allreduce(s).protocol for s in sizes]
    order = {"ll": 0, "ll128": 1, "simple": 2}
    assert protos == sorted(protos, key=order.get)
    assert protos[0] == "ll" and "ll128" in protos and protos[-1] == "simple"


def test_small_messages_are_latency_bound_tens_of_us():
    for preset, nodes, expect_us in (("dgx-a100", 1, 15.0), ("dgx-h100", 1, 15.0)):
        e = model(preset, num_nodes=nodes).estimate_allreduce(8)
        assert e.time_s * 1e6 == pytest.approx(expect_us, rel=0.01)
    # 2 nodes: tree/LL: 6.8 + 2*((8-1)*0.6 + log2(2)*5.0) = 25.2 us + 8 B over the bandwidth of the one
    # channel NCCL launches for 8 bytes (enqueue.cc: 8 < nc x nt x 8 drops channels; a tree keeps all its
    # threads), twice: the transfer, and the one chunk crossing the second network level (the fill)
    m = model("dgx-a100", num_nodes=2)
    e = m.estimate_allreduce(8)
    assert (e.algorithm, e.protocol) == ("tree", "ll")
    bw = nccl.bandwidth_gbps(m.system, "tree", "ll") / m.system.tree.num_channels
    assert e.time_s * 1e6 == pytest.approx(25.2 + 2 * 8 / (1000 * bw), abs=0.01)


@pytest.mark.parametrize("size, measured_us", [(8, 12.49), (1 * KiB, 16.38), (4 * KiB, 16.69)])
def test_small_message_latency_on_8_hopper_gpus_within_25_percent_of_nccl_tests(size, measured_us):
    # deepseek-ai/DeepEP#303: all_reduce_perf (nccl-tests, out-of-place) on 8 H20 GPUs of one node
    # (Hopper, NVLink4 through NVSwitch, NCCL's default choice): 12.49 us at 8 B, 16.38 at 1 KiB,
    # 16.69 at 4 KiB. The model (ring/LL, 6.6 + 14 x 0.6 us + bytes/bw) gives 15.0-15.1 us: 20 %
    # above at 8 B, 8-10 % below at 1-4 KiB.
    e = model("dgx-h100").estimate_allreduce(size)
    assert (e.algorithm, e.protocol) == ("ring", "ll")
    assert e.time_s * 1e6 == pytest.approx(measured_us, rel=0.25)


def test_ring_plateau_factor_on_several_nodes():
    s = model("dgx-a100", num_nodes=2).system
    # Ring/Simple latency, 2 AMD nodes: intra max(3.4, 2.0*3)=6.0 x 28 steps + net 14.0 x 2 + base 8.4
    lat = 8.4 + 28 * 6.0 + 2 * 14.0
    assert nccl.latency_us(s, "ring", "simple") == pytest.approx(lat)
    big = 64 * MiB
    assert nccl.time_us(s, "ring", "simple", big) == pytest.approx(lat * 1.4 + big / (1000 * nccl.bandwidth_gbps(s, "ring", "simple")))


def test_pcie_box_has_no_ll128_and_pci_latencies():
    m = model("pcie")
    d = m.describe()
    assert d["ll128_enabled"] is False and d["nvlink_intra"] is False
    # Gen4 x16 = 24 GB/s: search 2 x 12 (speed 20 x 1 = 20 < 12 x 2 = 24 = totalBw)
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (2, 12.0)
    assert {m.estimate_allreduce(s).protocol for s in (KiB, MiB, GiB)} <= {"ll", "simple"}
    # Ring/LL latency on PCI: 6.6 + 14 x 1.0
    assert nccl.latency_us(m.system, "ring", "ll") == pytest.approx(20.6)


def test_oversubscribed_fat_tree_spine_bounds_the_channels():
    # leaf_radix 16 -> 8 down ports = 1 DGX per leaf; uplink 8 x 25 / 2 = 100 GB/s per leaf;
    # every ring hop crosses it once per direction -> channels x speed <= 100: 5 x 20.
    m = model("dgx-a100", num_nodes=8, fabric="fat-tree", oversubscription=2.0, leaf_radix=16)
    d = m.describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (5, 20.0)
    assert "spine" in d["ring_bottleneck_link"]
    full = model("dgx-a100", num_nodes=8, fabric="fat-tree", oversubscription=1.0, leaf_radix=16).describe()
    assert (full["ring_channels"], full["ring_bw_per_channel_gbps"]) == (8, 24.0)


def test_hierarchical_is_forced_only_and_costed_in_three_stages():
    auto = model("dgx-a100", num_nodes=2)
    hier = model("dgx-a100", num_nodes=2, algorithm="hierarchical")
    e = hier.estimate_allreduce(GiB)
    assert e.algorithm == "hierarchical"
    assert {auto.estimate_allreduce(s).algorithm for s in (KiB, MiB, GiB)} <= {"ring", "tree"}
    # stages: RS on 8 GPUs + AR across 2 nodes on 1/8 of the data + AG on 8 GPUs
    rs = nccl.choose(hier.intra_system, GiB, "reducescatter", algorithm="ring")[2]
    ag = nccl.choose(hier.intra_system, GiB, "allgather", algorithm="ring")[2]
    ar = nccl.choose(hier.inter_system, GiB // 8, "allreduce")[2]
    assert e.time_s == pytest.approx((rs + ar + ag) * 1e-6)


def test_broadcast_ring_busbw_equals_algbw():
    m = model("dgx-a100")
    e = m.estimate_broadcast(GiB)
    assert e.algorithm == "ring" and e.busbw_gbps == e.algbw_gbps
    # ring broadcast: nsteps = nRanks -> algbw = busBw = 240 GB/s asymptotically
    assert e.algbw_gbps == pytest.approx(240.0, rel=0.01)
    assert m.broadcast_s(GiB) == e.time_s


def test_comm_model_protocol_and_estimate_shape():
    m = model("dgx-a100")
    assert isinstance(m, CommModel) and m.backend == "nccl" and m.num_ranks == 8
    e = m.estimate_allreduce(MiB)
    assert isinstance(e, CollectiveEstimate)
    assert e.algbw_gbps == pytest.approx(MiB / e.time_s / 1e9)
    assert e.busbw_gbps == pytest.approx(e.algbw_gbps * 14 / 8)
    assert m.allreduce_s(MiB) == e.time_s
    json.dumps(m.describe())
    one = model("dgx-a100", ranks=1)
    assert one.allreduce_s(GiB) == 0.0 and one.broadcast_s(GiB) == 0.0


def test_fewer_ranks_than_devices_and_bad_rank_counts():
    assert model("dgx-a100", ranks=4).num_ranks == 4
    g = build_preset("dgx-a100")
    with pytest.raises(InputError, match=r"num_ranks: 9 .*\[1, 8\]"):
        build_comm_model(g, 9)
    with pytest.raises(InputError, match=r"num_ranks: 0 "):
        build_comm_model(g, 0)


def test_forcing_unknown_or_unavailable_algorithm_or_protocol():
    g = build_preset("dgx-a100")
    with pytest.raises(InputError, match=r"algorithm: 'bcube' .*ring, tree, nvls, hierarchical"):
        build_comm_model(g, 8, algorithm="bcube")
    with pytest.raises(InputError, match=r"protocol: 'll64' .*ll, ll128, simple"):
        build_comm_model(g, 8, protocol="ll64")
    with pytest.raises(InputError, match=r"algorithm: 'nvls' is not available on dgx-a100"):
        build_comm_model(g, 8, algorithm="nvls").estimate_allreduce(MiB)
    with pytest.raises(InputError, match=r"protocol: 'll128' is not available"):
        build_comm_model(build_preset("pcie"), 8, protocol="ll128").estimate_allreduce(MiB)
    with pytest.raises(InputError, match=r"backend gloo"):
        build_comm_model(build_preset("cpu-gloo"), 2, algorithm="tree")


# ---- gloo (reference PART 3) -----------------------------------------------------------

def test_gloo_ring_schedule_small_tensor_is_4_p_minus_1_hops():
    s = gloo.ring_schedule(4096, 4)
    # numSegments = roundUp(max(ceil(4096/1MiB)=1, 2*4), 4) = 8; 512 B each; 2 per rank
    assert (s.num_segments, s.segment_bytes, s.steps_per_phase) == (8, 512, 6)
    assert s.num_hops == 4 * (4 - 1)


def test_gloo_ring_closed_form_by_hand():
    # P=2, S=4 MiB float32: numSegments = roundUp(max(4, 4), 2) = 4 of 1 MiB, 2 per rank,
    # 2 transfers per phase -> 4 hops of (10 us + 1 MiB / 1e9) + 2 x 1 MiB / 2e9 reduced
    t = gloo.ring_allreduce_s(4 * MiB, 2, hop_latency_s=10e-6, hop_bandwidth_bytes_per_s=1e9,
                              reduce_bandwidth_bytes_per_s=2e9)
    assert t == pytest.approx(4 * (10e-6 + 1048576 / 1e9) + 2 * 1048576 / 2e9, rel=1e-12)
    assert t == pytest.approx(0.00528288, rel=1e-9)
    # bytes on the wire per rank: 2 (P-1)/P S
    s = gloo.ring_schedule(4 * MiB, 2)
    assert s.num_hops * s.segment_bytes == 4 * MiB


def test_gloo_preset_model_uses_loopback_link():
    m = model("cpu-gloo")
    assert m.backend == "gloo" and m.num_ranks == 2
    # default loopback: 4 GB/s per direction, 15 us rank-to-rank; reduce 4 GB/s
    assert m.hop_latency_s == pytest.approx(15e-6) and m.hop_bandwidth_bytes_per_s == pytest.approx(4e9)
    expected = gloo.ring_allreduce_s(4 * MiB, 2, hop_latency_s=15e-6, hop_bandwidth_bytes_per_s=4e9,
                                     reduce_bandwidth_bytes_per_s=4e9)
    assert m.allreduce_s(4 * MiB) == pytest.approx(expected)
    e = m.estimate_allreduce(4 * MiB)
    assert (e.algorithm, e.protocol) == ("ring", "tcp")
    # two hosts: the Ethernet hop (10 GbE x 1448/1538) bounds the ring
    m2 = model("cpu-gloo", num_nodes=2)
    assert m2.hop_bandwidth_bytes_per_s == pytest.approx(1.25e9 * 1448 / 1538)


# ---- CLI ---------------------------------------------------------------------------------

def test_cli_collectives_json_keys_and_values(capsys):
    assert main(["collectives", "--topology", "dgx-a100", "--sizes", "1KiB,4MiB,8GiB", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["size_bytes"] for r in rows] == [1024, 4 * MiB, 8 * GiB]
    assert set(rows[0]) == {"size_bytes", "time_s", "algbw_gbps", "busbw_gbps", "algorithm", "protocol"}
    assert [r["protocol"] for r in rows] == ["ll", "ll128", "simple"]
    system = model("dgx-a100").system
    assert rows[1]["time_s"] == pytest.approx(nccl_exec.time_us(system, rows[1]["algorithm"], "ll128", 4 * MiB) * 1e-6,
                                              rel=1e-3)


def test_cli_collectives_table_and_csv(capsys):
    assert main(["collectives", "--topology", "dgx-h100", "--algorithm", "ring", "--sizes", "1MiB"]) == 0
    out = capsys.readouterr().out
    assert "busbw" in out and "ring" in out and "NCCL 2.30.7" in out
    assert main(["collectives", "--topology", "cpu-gloo", "--sizes", "4KiB", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "size_bytes,time_s,algbw_gbps,busbw_gbps,algorithm,protocol"
    assert lines[1].startswith("4096,") and lines[1].endswith(",ring,tcp")


@pytest.mark.parametrize("argv,match", [
    (["--topology", "dgx-z"], r"topology: 'dgx-z' is not a preset; expected one of dgx-a100"),
    (["--topology", "dgx-a100", "--ranks", "9"], r"num_ranks: 9"),
    (["--topology", "dgx-a100", "--ranks", "two"], r"--ranks: 'two'"),
    (["--topology", "dgx-a100", "--sizes", "1XB"], r"--sizes: '1XB'"),
    (["--topology", "dgx-a100", "--algorithm", "bcube"], r"algorithm: 'bcube'"),
    (["--topology", "dgx-a100", "--format", "xml"], r"--format: 'xml'"),
    (["--topology", "dgx-a100", "--set", "nvlinks_per_gpu=0"], r"nvlinks_per_gpu: 0"),
    (["--topology", "dgx-a100", "--nodes", "0"], r"--nodes: 0"),
])
def test_cli_collectives_bad_input_exits_2(capsys, argv, match):
    import re

    assert main(["collectives", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ddpsim: error: ") and len(err.splitlines()) == 1
    assert re.search(match, err)


def test_cli_broadcast_and_multi_node_latency(capsys):
    assert main(["collectives", "--topology", "dgx-a100", "--nodes", "2", "--collective", "broadcast",
                 "--sizes", "1KiB", "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    # ring broadcast, LL, 16 ranks on 2 AMD nodes: 6.6 + 14 x max(0.6, 2.0 net overhead) + 1 x 2.7
    assert (row["algorithm"], row["protocol"]) == ("ring", "ll")
    assert row["time_s"] == pytest.approx((6.6 + 14 * 2.0 + 2.7) * 1e-6 + 1024 / (1000 * 22.5) * 1e-6, rel=1e-6)
    assert row["busbw_gbps"] == row["algbw_gbps"]


def test_tree_graph_searched_on_its_own_two_dgx_a100():
    # search.cc BALANCED_TREE, 8 channels (the ring's): 24 GB/s per channel fits (the GPU->NIC PCIe
    # path is 24), pass 2 raises bwIntra while the NVSwitch chain carries it and it stays < 2 x 24:
    # 28 (8 x 28 = 224 <= 240), 30 (240), not 48 (384). tuning.cc, 2 nodes: bw = bwIntra;
    # Tree/Simple busBw = min(8 x 30 x 0.92, 8 x perChMaxTreeBw[Ampere][N2] 23.6) = 188.8, algbw x 0.5
    m = model("dgx-a100", num_nodes=2)
    t = m.system.tree
    assert (t.num_channels, t.bw_intra_gbps, t.bw_inter_gbps, t.simple_tree) == (8, 30.0, 24.0, False)
    assert nccl.bandwidth_gbps(m.system, "tree", "simple") == pytest.approx(188.8 * 0.5)
    # the ring keeps its own graph
    assert (m.system.ring.num_channels, m.system.ring.bw_intra_gbps) == (8, 24.0)


def test_tree_search_balanced_then_simple_tree_on_hopper():
    from ddpsim.network.graph_search import _tree_search
    from ddpsim.network.link_loads import ChannelLoads, LinkIndex, Totals

    # one channel: in over "in" (1 x bwInter), out half over "a" and half over "b" (balanced) or all
    # over "a" (plain TREE). "b" carries 10: the balanced tree fits at 20 (0.5 x 20 = 10), not 30.
    cap = {("n", "g0"): 48.0, ("g0", "n"): 48.0, ("g1", "n"): 10.0}

    def totals(balanced):
        inter = {("n", "g0"): 1.0}
        if balanced:
            inter.update({("g0", "n"): 0.5, ("g1", "n"): 0.5})
        else:
            inter[("g0", "n")] = 1.0
        return Totals([ChannelLoads()], [ChannelLoads(blocks=[inter])], LinkIndex(cap.__getitem__),
                      lambda k, e: [e], 0)

    speeds = (48.0, 30.0, 20.0, 12.0)
    kw = dict(channels=1, max_bw=48.0, search_total_bw=96.0)
    both = {b: totals(b) for b in (True, False)}
    amp = _tree_search(both, speeds, cc=80, **kw)
    # no intra-node link here: pass 2 raises bwIntra 20 -> 30 -> 48 (each step taken while < 2 x 20)
    assert (amp.bw_inter_gbps, amp.bw_intra_gbps, amp.simple_tree) == (20.0, 48.0, False)
    assert amp.bottleneck == "g1 -> n"  # 0.5 x 20 on 10 GB/s: full
    # Hopper: at 48 the balanced tree does not fit, the plain TREE does ("Try a simpler tree")
    hop = _tree_search(both, speeds, cc=90, **kw)
    assert (hop.bw_inter_gbps, hop.bw_intra_gbps, hop.simple_tree) == (48.0, 48.0, True)


def test_simple_tree_factor_0_85():
    # tuning.cc: if maxTreePattern == NCCL_TOPO_PATTERN_TREE, busBw *= 0.85 (after the per-protocol caps)
    import dataclasses

    m = model("dgx-h100", num_nodes=2)
    plain = dataclasses.replace(m.system, tree=dataclasses.replace(m.system.tree, simple_tree=True))
    for proto in ("ll", "ll128", "simple"):
        assert nccl.bandwidth_gbps(plain, "tree", proto) == pytest.approx(0.85 * nccl.bandwidth_gbps(m.system, "tree", proto))


# ---- systems of issue 39: direct NVLink meshes, H200, B200, GB200 NVL72 (NCCL v2.30.7) --------------
#
# Published all_reduce_perf figures used below (busbw, GB/s; the model is NCCL v2.30.7's estimate):
#   8 x V100-SXM2, hybrid cube-mesh: 129.14 at 128 MiB (konnase/konnase.github.io
#     source/_posts/deep_learning/NCCL.md, nvidia-smi topo -m in the post) -> model 116.7, -9.7 %;
#     135.50 at 1 GiB (oracle-japan/ocitutorials tutorials/_hpc/spinup-ml-instance-cntnd.md, OCI
#     BM.GPU3.8) -> model 119.6, -11.8 %: strict xfail below (NCCL's 20 GB/s per NVLink2 link).
#   8 x H200: 475 (nccl-tests#272); 479.98 at 8 GiB (Azure/AI-benchmarking-guide
#     Azure_Results/ND_H200_v5_results.md, NCCL 2.20.5, NVLS) -> model 475.6, -0.9 %.
#   8 x B200 (GKE a4-highgpu-8g, yangwhale/gpu-tpu-pedia gpu/deepep/README.md): 703-739 at
#     512 MiB-4 GiB -> model 706-718, within 3 %; 840-845 at 8-16 GiB: strict xfail below.
#   GB200: one NVL72 rack, 72 GPUs (coreweave/nccl-tests#43); one compute tray, 4 GPUs, Ring
#     (Azure/AI-benchmarking-guide Azure_Results/ND_GB200_v6_results.md, NCCL 2.25.1): 673.06 at
#     4 GiB, 679.61 at 8 GiB -> model 717.7 / 718.8, +6.6 / +5.8 %.
#   Two DGX H100 nodes (coreweave/nccl-tests#92).
# One 8 x L40S single-node log found (MayElbaz18/nccl-l40s-iommu-fix, images/success.png), on an AMD
# box whose P2P crosses its CPU sockets: written as such a box, NCCL's model is 33 % above it (a
# strict xfail below); the pcie-l40s preset is checked against NCCL's model worked by hand. Small-message latency: the only V100 log with 8 B (konnase, 2019, one process driving 8
# GPUs, NCCL version not printed) reads 48 us, from a 2019 NCCL, not the one ported: not asserted. Found without
# a message size, so not asserted either: "busbw 130 with 8 gpu in the NVLink" (V100, nvidia/nccl#258)
# and 811 GB/s on 8 GB200 GPUs of two trays over MNNVL (lixueduan.com/posts/ai/13-gb200-mnnvl-nccl-test;
# the model gives 719 at 8 GiB for the rack's first 8 GPUs).
# Known misses, marked xfail (strict) below: two DGX B200 nodes (coreweave/nccl-tests#92: 690.07
# GB/s at 8 GiB; the GKE A4 run above: 675.54 at 8 GiB, 684.46 at 16 GiB) and two NVL72 racks
# (coreweave/nccl-tests README: 810.41 GB/s at 16 GiB) -- NVLSTree across nodes on Blackwell.

# The DGX-1 hybrid cube-mesh (NVIDIA "DGX-1 with Tesla V100 System Architecture" white paper,
# WP-08437-002: six NVLink2 links per V100; nvidia-smi topo -m on a DGX-1V shows NV2 for the
# pairs with two links): 2-link pairs and 1-link pairs, SM70_NVLINK_BW 20.0 GB/s per link (topo.h).
DGX1_DOUBLE = ((0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7))
DGX1_SINGLE = ((0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7))


def dgx1_yaml(tmp_path):
    from ddpsim.network.topology import load_topology_yaml

    lines = ["name: dgx1-yaml", "backend: nccl", "nodes:"]
    lines += [f"  - {{id: gpu{i}, kind: gpu, host: 0, local_rank: {i}, compute_capability: 70, sm_count: 80}}"
              for i in range(8)]
    lines.append("links:")
    for pairs, n in ((DGX1_DOUBLE, 2), (DGX1_SINGLE, 1)):
        lines += [f"  - {{a: gpu{a}, b: gpu{b}, bandwidth_gbps: {20.0 * n}, latency_us: 0.6, link_type: nvlink, "
                  f"num_links: {n}}}" for a, b in pairs]
    p = tmp_path / "dgx1.yaml"
    p.write_text("\n".join(lines) + "\n")
    return load_topology_yaml(p)


def test_dgx1_mesh_as_custom_yaml_gets_six_rings_of_20(tmp_path):
    # search.cc over the mesh: the 2-link pairs form one cycle through all 8 GPUs, so at 40 GB/s two
    # rings fit (one per direction): 80. At 20 GB/s every GPU's 6 links carry 6 rings (6 x 20 = 120 =
    # totalBw, the GPU's NVLink total): the search stops there; 20 < 25: no ncclTopoDupChannels.
    m = build_comm_model(dgx1_yaml(tmp_path), 8)
    d = m.describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (6, 20.0)
    assert d["nvlink_intra"] and d["ll128_enabled"]
    e = m.estimate_allreduce(8 * GiB)
    assert (e.algorithm, e.protocol) == ("ring", "simple")
    # Ring/Simple: algbw = 120 x 8/14; busbw -> 120 at large sizes (was 1 ring x 20 GB/s, 20 GB/s)
    assert e.busbw_gbps == pytest.approx(120.0, rel=0.01)
    # the tree: 6 chains (the ring's count) at the highest speed with 6 x speed <= 120 x 8/7: 20
    assert (m.system.tree.num_channels, m.system.tree.bw_intra_gbps) == (6, 20.0)


def test_mesh_channels_use_links_within_capacity(tmp_path):
    from ddpsim.network.mesh_search import find_channels, nvlink_mesh

    g = dgx1_yaml(tmp_path)
    devs = [f"gpu{i}" for i in range(8)]
    cap = nvlink_mesh(g, devs)
    rings, left = find_channels(devs, cap, 20.0, 32, cycle=True)
    assert len(rings) == 6 and all(sorted(r) == sorted(devs) for r in rings)
    assert all(v >= -1e-9 for v in left.values())  # no link carries more than its NVLinks
    assert all(v == pytest.approx(0.0) for v in left.values())  # 6 rings use every link fully
    assert len(find_channels(devs, cap, 40.0, 32, cycle=True)[0]) == 2  # the 2-link cycle, both ways


def test_nvlink_bridged_pair_dup_channels(tmp_path):
    # two PCIe cards joined by a 2-link NVLink bridge: one cycle a -> b -> a at 40 = totalBw, then
    # ncclTopoDupChannels (40 >= 25, Volta): 2 channels x 20.
    from ddpsim.network.topology import load_topology_yaml

    p = tmp_path / "pair.yaml"
    p.write_text(textwrap.dedent("""\
        name: pair
        backend: nccl
        nodes:
          - {id: a, kind: gpu, host: 0, local_rank: 0, compute_capability: 70}
          - {id: b, kind: gpu, host: 0, local_rank: 1, compute_capability: 70}
          - {id: sw, kind: pcie_switch, host: 0}
        links:
          - {a: a, b: b, bandwidth_gbps: 40, latency_us: 0.6, link_type: nvlink, num_links: 2}
          - {a: a, b: sw, bandwidth_gbps: 12, latency_us: 1.0, link_type: pcie}
          - {a: b, b: sw, bandwidth_gbps: 12, latency_us: 1.0, link_type: pcie}
    """))
    d = build_comm_model(load_topology_yaml(p), 2).describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (2, 20.0)


def test_dgx_v100_preset_one_node_and_two_nodes():
    one = model("dgx-v100").describe()
    assert (one["ring_channels"], one["ring_bw_per_channel_gbps"], one["compute_capability"]) == (6, 20.0, 70)
    # two nodes, 4 x EDR 100 Gb/s = 12.5 GB/s per NIC: speed 12 (speedArrayInter), one ring per NIC,
    # each along NVLink from the NIC's GPU to its neighbour on the same PCIe switch
    two = model("dgx-v100", num_nodes=2)
    d = two.describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (4, 12.0)
    # Volta's ring plateau factor 1.9 (tuning.cc, minCompCap < 80)
    s = two.system
    lat = nccl.latency_us(s, "ring", "simple")
    assert nccl.time_us(s, "ring", "simple", GiB) == pytest.approx(lat * 1.9 + GiB / (1000 * nccl.bandwidth_gbps(s, "ring", "simple")))


def test_dgx_v100_busbw_129_at_128mib_within_10_percent():
    # konnase/konnase.github.io source/_posts/deep_learning/NCCL.md (2019): all_reduce_perf -g 8 on
    # 8 x Tesla V100-SXM2-16GB, its nvidia-smi topo -m the hybrid cube-mesh (NV1/NV2, 6 links per GPU,
    # numbered differently from a DGX-1: the same graph); 128 MiB out-of-place busbw 129.14 GB/s.
    # Ring/Simple over 6 rings x 20 GB/s: 116.4, 9.9 % under (see the xfail below).
    e = model("dgx-v100").estimate_allreduce(128 * MiB)
    assert (e.algorithm, e.protocol) == ("ring", "simple")
    assert within(e.busbw_gbps, 129.14, 0.10)


@pytest.mark.xfail(strict=True, reason="NCCL's model gives 6 rings x SM70_NVLINK_BW 20 GB/s = 120 GB/s busbw; the "
                                        "hardware moves 135.5 / 6 = 22.6 GB/s per NVLink2 link (25 GB/s line rate): "
                                        "NCCL's per-link figure under-rates Volta's NVLink, 11.8 % at 1 GiB")
def test_dgx_v100_busbw_135_at_1gib_within_10_percent():
    # oracle-japan/ocitutorials tutorials/_hpc/spinup-ml-instance-cntnd.md: OCI BM.GPU3.8 (8 x Tesla
    # V100-SXM2-16GB on NVLink, the 8-GPU SXM2 board's hybrid cube-mesh), NGC TensorFlow 24.06
    # container, all_reduce_perf -b 1G -e 1G -g 8: busbw 135.50 GB/s out-of-place (135.41 in place).
    # Single node, so the NICs play no part; the preset's mesh, 6 links per GPU, is the measured
    # board's. The model's 119.6 is NCCL's own estimate (the search and tuning.cc as ported).
    assert within(model("dgx-v100").estimate_allreduce(GiB).busbw_gbps, 135.50, 0.10)


def test_dgx_h200_nvls_busbw_475_within_10_percent():
    # nccl-tests#272: all_reduce_perf on 8 x H200 (NVLink4 through NVSwitch), peak busbw 475 GB/s
    e = model("dgx-h200").estimate_allreduce(4 * GiB)
    assert e.algorithm == "nvls"
    assert within(e.busbw_gbps, 475.0, 0.10)


def test_dgx_h200_azure_nd_h200_v5_busbw_480_within_10_percent():
    # Azure/AI-benchmarking-guide Azure_Results/ND_H200_v5_results.md: 8 x H200 (ND H200 v5), NCCL
    # 2.20.5, NCCL_ALGO=NVLS (Benchmarks/NVIDIA/NCCLBandwidth.py there), in-place busbw 479.98 GB/s at
    # 8 GiB, 477.41 at 4 GiB. NVLS: 8 x min(40 x 0.85 x 7/8 x 2, 60) = 476 GB/s.
    m = model("dgx-h200")
    for size, measured in ((4 * GiB, 477.41), (8 * GiB, 479.98)):
        e = m.estimate_allreduce(size)
        assert e.algorithm == "nvls"
        assert within(e.busbw_gbps, measured, 0.10)


def test_dgx_b200_search_on_sm100_tables():
    # SM100: 18 NVLink5 x 40.1 GB/s (SM100_NVLINK_BW) = 721.8 totalBw. Ring: sm100SpeedArrayIntra 90
    # x 8 = 720 (< 721.8; 45 x 16 = 720 does not beat it; 40 < 0.49 x 90 stops), dup -> 16 x 45.
    # NVLS: one channel per GPU, each channel's head GPU counted twice on its NVLink
    # (ncclTopoSearchTryNvls): (8 + 1) x 90 = 810 > 721.8, (8 + 1) x 80 = 720 fits; pass 2 raises
    # bwInter to 90. The published single-node figures are checked in the tests below.
    d = model("dgx-b200").describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (16, 45.0)
    assert (d["nvls_channels"], d["nvls_bw_per_channel_gbps"], d["nvls_bw_inter_gbps"]) == (8, 80.0, 90.0)
    s = model("dgx-b200").system
    # NVLS busBw: 8 x min(80 x 0.74 (nvlsEfficiency, Blackwell) x 7/8 x 2 = 103.6, bwInter 90) = 720
    # (nvidia/nccl#1807 reports 830+ GB/s on 8 x B200 with NCCL 2.27, without a log: not asserted)
    assert nccl.bandwidth_gbps(s, "nvls", "simple") * 14 / 8 == pytest.approx(720.0)


# yangwhale/gpu-tpu-pedia gpu/deepep/README.md ("单节点 NCCL 性能测试", GKE a4-highgpu-8g: HGX B200,
# 8 GPUs on NVLink 5 switches; all_reduce_perf -b 8M -e 16G -f 2 -g 8, run by
# gpu/deepep/nccl-test-internode-job.yaml there with Google's gIB NCCL build and its tuner config
# NCCL_TUNER_CONFIG_PATH=tuner_config_a4.txtpb): busbw (GB/s) per size.
B200_GKE_ONE_NODE = {512 * MiB: 703.44, GiB: 729.25, 2 * GiB: 736.53, 4 * GiB: 738.97}


@pytest.mark.parametrize("size", sorted(B200_GKE_ONE_NODE))
def test_dgx_b200_one_node_busbw_within_10_percent(size):
    # NVLS, 8 x min(90 x 0.74 x 7/8 x 2, 90) = 720 GB/s at the limit: 706-718 here, within 3 %
    e = model("dgx-b200").estimate_allreduce(size)
    assert e.algorithm == "nvls"
    assert within(e.busbw_gbps, B200_GKE_ONE_NODE[size], 0.10)


@pytest.mark.xfail(strict=True, reason="from 8 GiB the run jumps to 840-845 GB/s (739 at 4 GiB); NCCL's estimate "
                                        "stays at 8 NVLS channels x bwInter 90 = 720 (tuning.cc): 14-15 % under. "
                                        "nvidia/nccl#1807 reports 830+ on 8 x B200 with stock NCCL 2.27.1 too (no "
                                        "log); NCCL's cost model does not describe the step")
@pytest.mark.parametrize("size, measured", [(8 * GiB, 839.82), (16 * GiB, 845.44)])
def test_dgx_b200_one_node_busbw_at_8_and_16_gib_within_10_percent(size, measured):
    # the same GKE a4-highgpu-8g run as B200_GKE_ONE_NODE
    assert within(model("dgx-b200").estimate_allreduce(size).busbw_gbps, measured, 0.10)


def test_two_dgx_h100_nodes_nvlstree_busbw_441_within_10_percent():
    # coreweave/nccl-tests#92 (test plan): H100 8-GPU x 2 nodes, 440.58 GB/s busbw at 8 GiB all-reduce;
    # the run's job (mpi-operator/nccl-test-distributed-h100-64-mpijob.yaml there): NCCL 2.28.3, 8 IB
    # HCAs per node, NCCL_COLLNET_ENABLE=0 (no SHARP). NCCL picks NVLSTree; its busBw per channel is
    # perChMaxNVLSTreeBw (Hopper, 2 nodes: 57.7, the same in 2.28.3 and 2.30.7) x 8 channels = 461.6.
    e = model("dgx-h100", num_nodes=2).estimate_allreduce(8 * GiB)
    assert (e.algorithm, e.protocol) == ("nvls_tree", "simple")
    assert within(e.busbw_gbps, 440.58, 0.10)


def test_two_dgx_h100_nodes_nvls_graph_prefers_channels():
    # NCCL v2.30.7 by hand for 2 x 8 H100, 8 x 400 Gb/s NICs (48 GB/s path) per node. search.cc, NVLS:
    # a channel per NIC, its head the NIC's GPU, which ncclTopoSearchTryNvls counts twice on its
    # NVLink (18 x 20.6 = 370.8): c channels fit at speed s when (c + 1) x s <= 370.8. Pass 1
    # (sm90SpeedArrayInter): 48 -> 6 channels, 45 -> 7, 42 -> 7, 40 -> 8 = maxChannels; more channels
    # win (ncclTopoCompareGraphs), so 8 x 40. Pass 2 raises bwInter 42, 45, 48 (the NIC path).
    d = model("dgx-h100", num_nodes=2).describe()
    assert (d["nvls_channels"], d["nvls_bw_per_channel_gbps"], d["nvls_bw_inter_gbps"]) == (8, 40.0, 48.0)


def test_two_gb200_nvl72_racks_nvls_graph_is_32_channels():
    # Two racks: 72 GPUs and 72 NICs per NCCL node. Pass 1 from the NIC path's 48: (c + 1) x s <=
    # 721.8 gives 14 channels at 48, 15 at 45.1, 16 at 42, 17 at 40, 23 at 30, 29 at 24, 31 at 22,
    # 32 = min(NCCL_MAX_NVLS_ARITY, 72) at 20; pass 2 raises bwInter to 40 (= 2 x bwIntra).
    # NVLSTree, 2 nodes: 32 x min(20 x 0.74 x 31/32 x 2 = 28.675, 2 x 40, 96) = 917.6 GB/s busBw.
    m = model("gb200-nvl72", num_nodes=2)
    d = m.describe()
    assert (d["nvls_channels"], d["nvls_bw_per_channel_gbps"], d["nvls_bw_inter_gbps"]) == (32, 20.0, 40.0)
    assert nccl.bandwidth_gbps(m.system, "nvls_tree", "simple") * 286 / 144 == pytest.approx(917.6)


def test_two_dgx_b200_nodes_nvlstree_is_what_nccl_computes():
    # NCCL v2.30.7 by hand for 2 x 8 B200, 8 x 400 Gb/s NICs per node. search.cc: the NVLS graph
    # starts at the highest inter speed <= the NIC path (48, sm100SpeedArrayInter), one channel per
    # NIC head (8); pass 2 raises only bwInter (80 > the NIC's 50: refused), so bwIntra stays 48.
    # tuning.cc: NVLSTree busBw/channel = min(48 x 0.74 x 7/8 x 2 = 62.16, 2 x 48, 96) -> 8 x 62.16 =
    # 497.3 GB/s busbw; ring 8 x 48 = 384, tree 8 x 42.8 (perChMaxTreeBw) x 15/16 = 321: NVLSTree is chosen.
    m = model("dgx-b200", num_nodes=2)
    d = m.describe()
    assert (d["nvls_channels"], d["nvls_bw_per_channel_gbps"], d["nvls_bw_inter_gbps"]) == (8, 48.0, 48.0)
    s = m.system
    assert nccl.bandwidth_gbps(s, "nvls_tree", "simple") * 30 / 16 == pytest.approx(8 * 48 * 0.74 * 7 / 8 * 2)
    assert m.estimate_allreduce(8 * GiB).algorithm == "nvls_tree"


@pytest.mark.xfail(strict=True, reason="NCCL's own estimate for NVLSTree on 2 B200 nodes is 497 GB/s (bwIntra held at "
                                        "the NIC speed 48, x nvlsEfficiency 0.74); the run measures 690, 96 % of the "
                                        "NICs' bound 8 x 48 x 2 x 15/16 = 720: NCCL's model under-rates NVLSTree here")
def test_two_dgx_b200_nodes_busbw_690_within_10_percent():
    # coreweave/nccl-tests#92 (test plan): B200 8-GPU x 2 nodes, 690.07 GB/s busbw at 8 GiB all-reduce;
    # the run's job (mpi-operator/nccl-test-distributed-b200-64-mpijob.yaml there): NCCL 2.28.3 (same
    # NVLSTree formula and Blackwell constants as 2.30.7), 8 IB HCAs per node (the preset's 8 x 400
    # Gb/s), NCCL_COLLNET_ENABLE=0 (no SHARP). The algorithm (NVLSTree) and hardware match; the miss
    # is NCCL's cost model itself, which ddpsim follows (see the test above).
    assert within(model("dgx-b200", num_nodes=2).estimate_allreduce(8 * GiB).busbw_gbps, 690.07, 0.10)


@pytest.mark.xfail(strict=True, reason="the same miss as coreweave/nccl-tests#92 above: NCCL's NVLSTree estimate is "
                                        "497 GB/s on 2 B200 nodes, the run measures 676-684; two independent runs "
                                        "(IB, RoCE) agree on ~690, so the measurement stands and NCCL's model is low")
@pytest.mark.parametrize("size, measured", [(8 * GiB, 675.54), (16 * GiB, 684.46)])
def test_two_dgx_b200_nodes_gke_busbw_within_10_percent(size, measured):
    # yangwhale/gpu-tpu-pedia gpu/deepep/README.md ("跨节点 NCCL 性能测试"): 2 x GKE a4-highgpu-8g (8 x B200,
    # 8 x 400 Gb/s RoCE ConnectX-7 per node, as the preset's 8 x 400 Gb/s NICs), all_reduce_perf -g 1
    # on 16 ranks, Google's gIB NCCL build with tuner_config_a4.txtpb: 675.54 GB/s at 8 GiB, 684.46 at 16 GiB.
    assert within(model("dgx-b200", num_nodes=2).estimate_allreduce(size).busbw_gbps, measured, 0.10)


def test_gb200_nvl72_rack_is_one_nccl_node_with_32_nvls_channels():
    # MNNVL: the rack's 18 trays (4 GPUs each) share the NVLink switch; NCCL fuses the clique into one
    # node (topo.cc) -> nNodes 1, 72 local ranks. NVLS: maxChannels = min(NCCL_MAX_NVLS_ARITY 32, 72)
    # = minChannels on one node; speed with 32 x speed <= 721.8: 20 (sm100SpeedArrayIntra); pass 2
    # raises bwInter 24, 30, 40 (< 2 x 20).
    m = model("gb200-nvl72")
    d = m.describe()
    assert (d["num_ranks"], d["num_nodes"]) == (72, 1)
    assert (d["nvls_channels"], d["nvls_bw_per_channel_gbps"], d["nvls_bw_inter_gbps"]) == (32, 20.0, 40.0)
    # busBw = 32 x min(20 x 0.74 x 31/32 x 2 = 28.675, 40) = 917.6
    assert nccl.bandwidth_gbps(m.system, "nvls", "simple") * 142 / 72 == pytest.approx(917.6)


def test_gb200_nvl72_busbw_835_within_10_percent():
    # coreweave/nccl-tests#43: all_reduce_perf on a full NVL72 rack (72 GPUs), 8 GiB: busbw 834.57
    # GB/s out-of-place (846.82 in place). The model (917.6) is 9.8 % above: inside 10 %, barely.
    e = model("gb200-nvl72").estimate_allreduce(8 * GiB)
    assert e.algorithm == "nvls"
    assert within(e.busbw_gbps, 834.57, 0.10)


@pytest.mark.parametrize("size, measured", [(4 * GiB, 673.06), (8 * GiB, 679.61)])
def test_gb200_one_compute_tray_ring_busbw_within_10_percent(size, measured):
    # Azure/AI-benchmarking-guide Azure_Results/ND_GB200_v6_results.md: one ND GB200 v6 VM = the 4
    # GPUs of a compute tray, NCCL 2.25.1, NCCL_ALGO=Ring on 4 GPUs (Benchmarks/NVIDIA/NCCLBandwidth.py
    # there), in-place busbw 673.06 GB/s at 4 GiB, 679.61 at 8 GiB. The model: the rack's first 4
    # GPUs (one tray), ring forced: 16 rings x 45 = 720 at the limit, 717.7 / 718.8 here (+6.6 / +5.8 %).
    e = model("gb200-nvl72", ranks=4, algorithm="ring").estimate_allreduce(size)
    assert (e.algorithm, e.protocol) == ("ring", "simple")
    assert within(e.busbw_gbps, measured, 0.10)


@pytest.mark.xfail(strict=True, reason="NVLSTree across 2 NVL72 racks: NCCL v2.30.7 rates it by one rack's NVLS graph "
                                        "(32 channels x 20 GB/s); timed from its execution the model gives 915 GB/s at "
                                        "16 GiB, 13 % above the 810 measured with NCCL 2.26.2, whose NVLSTree formula differs")
def test_two_gb200_nvl72_racks_busbw_810_within_10_percent():
    # coreweave/nccl-tests README, "GB200 / 2 Racks" (NCCL 2.26.2): 144 GPUs, 16 GiB: busbw 810.41 GB/s
    # (20 racks, 1,440 GPUs: 405.74 GB/s; the model gives 913). The same README's single rack measures
    # 834.57: a second rack costs 3 %, where NCCL's estimate (NVLS bound by NVLink x nvlsEfficiency,
    # the same 32 x 20 graph as one rack) does not drop. NCCL 2.26.2's NVLSTree formula differs
    # (tuning.cc there: min(bwIntra, bwInter) per channel, algbw ratio 5/6): not what ddpsim ports.
    assert within(model("gb200-nvl72", num_nodes=2).estimate_allreduce(16 * GiB).busbw_gbps, 810.41, 0.10)


def test_grace_net_overhead_and_nvlstree_correction_on_x86_only():
    # tuning.cc getNetOverhead: 1 us on anything but AMD x86; ncclTopoGetAlgoTime: NVLSTree on SM100
    # takes treeCorrectionFactor only with x86 CPUs
    import dataclasses

    g = nccl.NcclGraph(num_channels=16, bw_intra_gbps=45.0, bw_inter_gbps=45.0, nvlink_intra=True)
    base = nccl.NcclSystem(num_ranks=16, num_nodes=2, compute_capability=100, cpu_vendor="intel", ring=g, tree=g,
                           nvls=g, ll128_enabled=True)
    arm = dataclasses.replace(base, cpu_vendor="arm")
    assert nccl.latency_us(arm, "ring", "ll") == nccl.latency_us(base, "ring", "ll")
    size = 16 * MiB  # log2(16 MiB >> 6) = 18: Simple factor 0.7
    lat = nccl.latency_us(base, "nvls_tree", "simple")
    bw = nccl.bandwidth_gbps(base, "nvls_tree", "simple")
    assert nccl.time_us(base, "nvls_tree", "simple", size) == pytest.approx(lat + size / (1000 * bw * 0.7))
    assert nccl.time_us(arm, "nvls_tree", "simple", size) == pytest.approx(lat + size / (1000 * bw))


def test_pcie_l40s_ada_uses_ampere_row_and_no_ll128():
    # Ada (cc 89) takes the Ampere row (compCapIndex: >= 80); PCIe only: no LL128, PCI latencies.
    m = model("pcie-l40s")
    d = m.describe()
    assert d["compute_capability"] == 89 and not d["ll128_enabled"] and not d["nvlink_intra"]
    assert nccl.arch_index(89) == nccl.arch_index(80)
    assert nccl.latency_us(m.system, "ring", "ll") == pytest.approx(6.6 + 14 * 1.0)


def two_socket_pcie_yaml(tmp_path, vendor: str, cpu_link_gbps: float):
    """8 Ada GPUs (L40S, compute capability 89) on PCIe Gen4 x16 (24 GB/s), 2 per switch, 2
    switches per CPU socket, the two sockets joined by a ``sys`` link of NCCL's inter-CPU figure."""
    from ddpsim.network.topology import load_topology_yaml

    lines = ["name: two-socket-pcie", "backend: nccl", f"cpu_vendor: {vendor}", "nodes:"]
    lines += [f"  - {{id: gpu{i}, kind: gpu, host: 0, local_rank: {i}, compute_capability: 89, sm_count: 142}}"
              for i in range(8)]
    lines += [f"  - {{id: sw{k}, kind: pcie_switch, host: 0}}" for k in range(4)]
    lines += [f"  - {{id: cpu{c}, kind: host_bridge, host: 0}}" for c in range(2)]
    lines.append("links:")
    lines += [f"  - {{a: gpu{i}, b: sw{i // 2}, bandwidth_gbps: 24, latency_us: 1, link_type: pcie}}" for i in range(8)]
    lines += [f"  - {{a: sw{k}, b: cpu{k // 2}, bandwidth_gbps: 24, latency_us: 1, link_type: pcie}}" for k in range(4)]
    lines.append(f"  - {{a: cpu0, b: cpu1, bandwidth_gbps: {cpu_link_gbps}, latency_us: 1, link_type: sys}}")
    p = tmp_path / "two-socket.yaml"
    p.write_text("\n".join(lines) + "\n")
    return load_topology_yaml(p)


@pytest.mark.parametrize("vendor, cpu_link, speed", [("amd", 16.0, 15.0), ("intel", 22.0, 20.0), ("intel", 10.0, 10.0)])
def test_two_socket_pcie_ring_is_bound_by_the_inter_cpu_link(tmp_path, vendor, cpu_link, speed):
    # GPUs on two sockets talk through the CPUs (NCCL's SYS paths; with P2P off between sockets, SHM
    # through the peer's CPU takes the same links). Every ring crosses the inter-CPU link once each
    # way, so NCCL's search (speedArrayIntra: 40, 30, 20, 18, 15, 12, 10, 9, ...) keeps one ring at
    # the fastest speed under its figure (topo.h: AMD_BW 16 -> 15, SRP_QPI_BW 22 -> 20, SKL_QPI_BW
    # 10 -> 10); a second ring needs 2 x speed on it, which no slower speed turns into more
    # bandwidth before the search stops (0.49 x the best).
    m = build_comm_model(two_socket_pcie_yaml(tmp_path, vendor, cpu_link), 8)
    d = m.describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"], d["ring_bottleneck_link"]) == (1, speed, "cpu0 -> cpu1")
    assert not d["ll128_enabled"]
    assert within(m.estimate_allreduce(GiB).busbw_gbps, speed, 0.01)


@pytest.mark.xfail(strict=True, reason="NCCL's model over-rates P2P across that AMD host's sockets: the ring crosses "
                                        "the inter-CPU link each way, and NCCL's AMD_BW 16 GB/s gives one ring of 15; "
                                        "the run reaches 11.2-11.5 GB/s, 25 % less")
@pytest.mark.parametrize("size, measured", [(128 * MiB, 11.22), (1 * GiB, 11.47), (4 * GiB, 11.34)])
def test_two_socket_amd_l40s_ring_busbw_within_10_percent(tmp_path, size, measured):
    # MayElbaz18/nccl-l40s-iommu-fix, images/success.png: all_reduce_perf (nccl-tests 2.17.6, NCCL
    # 2.23.4) on 8 L40S, one process per GPU, NCCL_ALGO=Ring, IOMMU passthrough, on an AMD host whose
    # GPUs needed NCCL_P2P_LEVEL=5 (SYS: P2P across the CPU sockets): out-of-place busbw 11.22 GB/s
    # at 128 MiB, 11.47 at 1 GiB, 11.34 at 4 GiB. The log hides the bus IDs; whatever sits under each
    # socket (switches or root ports, 24 GB/s per GPU), the ring's bound is the inter-CPU link.
    # The pcie-l40s preset (one socket's PCIe switches) is checked against NCCL's model by hand above.
    m = build_comm_model(two_socket_pcie_yaml(tmp_path, "amd", 16.0), 8, algorithm="ring")
    assert within(m.estimate_allreduce(size).busbw_gbps, measured, 0.10)


# ---- the search shared by identical hosts is the search walking every host ----------------------

@pytest.mark.parametrize("preset, nodes, ranks, opts", [
    ("dgx-a100", 9, None, {"fabric": "fat-tree", "oversubscription": 2.0, "leaf_radix": 16}),
    ("dgx-h100", 5, 37, {}),
    ("pcie", 3, None, {"gpus_per_switch": 2}),
    ("dgx-v100", 3, None, {}),
    ("gb200-nvl72", 3, None, {"gpus_per_node": 8}),
])
def test_shared_search_equals_walking_every_host(preset, nodes, ranks, opts):
    from ddpsim.network.graph_search import _search_graphs
    from ddpsim.network.host_classes import Hosts
    from ddpsim.network.routing import place_ranks
    from ddpsim.network.graph_search import search_graphs

    g = build_preset(preset, num_nodes=nodes, **opts)
    p = place_ranks(g, ranks or sum(1 for _, d in g.nodes(data=True) if d["kind"] == "gpu"))
    shared = Hosts(g, p)
    assert len(shared.walked) < nodes  # hosts 1.. were shared by class
    assert search_graphs(g, p) == _search_graphs(Hosts(g, p, share=False), p)


def test_routes_between_leaves_are_networkx_shortest_paths():
    # the fabric's equal-cost routes (the 1-2 link shortcut, else networkx's search) are
    # networkx.all_shortest_paths on the switch graph, in the same order
    import networkx as nx

    from ddpsim.network.routing import Router

    g = build_preset("dgx-a100", num_nodes=12, fabric="fat-tree", leaf_radix=16, num_spines=3, oversubscription=2.0)
    r = Router(g)
    sw = r._weighted([n for n, d in g.nodes(data=True) if d["host"] < 0])
    for a, b in (("n0/nic0", "n11/nic0"), ("n2/nic3", "n7/nic5"), ("n4/nic1", "n5/nic1")):
        la, lb = r.uplink(a), r.uplink(b)
        want = [[a, *m, b] for m in ([[la]] if la == lb else nx.all_shortest_paths(sw, la, lb, weight=r._W))]
        assert r.paths(a, b) == want
        assert la == lb or r._switches.paths(la, lb) == list(nx.all_shortest_paths(sw, la, lb, weight=r._W))
    # the same routes from networkx's search (the shortcut switched off)
    sws = r._switches
    short = {k: v for k, v in sws._paths.items()}
    sws._paths.clear()
    sws.lightest = 0.0
    assert short and all(sws.paths(*k) == v for k, v in short.items())


def test_bottleneck_link_is_the_same_in_every_process():
    # equal-cost routes over the spines used to come out in set order (PYTHONHASHSEED): the named
    # bottleneck of an oversubscribed fat tree changed from run to run
    import os
    import subprocess
    import sys

    code = ("from ddpsim.network.topology import build_preset\n"
            "from ddpsim.network.collective_cost import build_comm_model\n"
            "g = build_preset('dgx-a100', num_nodes=2, fabric='fat-tree', oversubscription=2.0, leaf_radix=16)\n"
            "print(build_comm_model(g, 16).describe()['ring_bottleneck_link'])\n")
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout for seed in (1, 2, 3)}
    assert len(out) == 1 and "spine" in out.pop()


def test_worst_link_of_a_class_is_the_first_member_link_by_name():
    """Totals.worst names a class's most loaded link in the member whose name sorts first, making
    only the names that can: here against every member's name made, with names whose repr
    quotes differ or is a prefix of another's."""
    from ddpsim.network.link_loads import ChannelLoads, LinkIndex, Totals

    for names in ({"a": ["a", "a'", "a'b", "ab", 'a"', "a1", 7], "x": ["x", "y", "z", "w", "v", "u", "t"]},
                  {"a": [12, 10, 3, 1], "x": ["x", "y", "z", "w"]}):  # repr 1 a prefix of 12's and 10's
        loads = {("a", "x"): 1.0, ("x", "a"): 1.0}
        t = Totals([ChannelLoads(by_class=[loads])], [], LinkIndex(lambda e: 10.0), lambda k, n: names[n], 1)
        every = min((str(e), e) for u, v in loads for e in zip(names[u], names[v]))[1]
        assert t.worst(1.0, 1.0) == f"{every[0]} -> {every[1]}"
