"""The execution model of an NCCL all-reduce (ddpsim.network.nccl_exec) on hand-worked cases."""

from __future__ import annotations

import math

import pytest

from ddpsim.network import nccl, nccl_exec

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def system(num_ranks: int, num_nodes: int, *, channels: int = 1, bw: float = 20.0, cc: int = 80) -> nccl.NcclSystem:
    g = nccl.NcclGraph(num_channels=channels, bw_intra_gbps=bw, bw_inter_gbps=bw, nvlink_intra=True)
    return nccl.NcclSystem(num_ranks=num_ranks, num_nodes=num_nodes, compute_capability=cc, cpu_vendor="intel",
                           ring=g, tree=g, nvls=None, ll128_enabled=True)


def two_rank_simple_ring_us(size: int, slices: int, slice_bytes: int) -> float:
    """The time by hand of a Simple ring all-reduce of ``size`` bytes on :func:`system` (2, 1):
    baseLat 8.4 + 2 hops x hwLat(NVLink, ring, Simple) 3.4 + each of the ``slices`` slices' step
    overhead for the share of a full slice (1 MiB: 2 of the 8 steps of a 4 MiB buffer) it lacks
    + ``size`` at 20 GB/s x n/(2(n-1)) = 20 (the two channels share the one search channel's 20 GB/s)."""
    transfer = size / (1000 * 20.0)
    o = nccl_exec.STEP_OVERHEAD_US["simple"]
    return 8.4 + 2 * 3.4 + slices * o * (1 - slice_bytes / MiB) + transfer


def test_two_rank_ring_of_one_chunk_by_hand():
    # 2 ranks, 1 search channel of 20 GB/s (<= PCI_BW: Simple runs 256 threads), duplicated into 2
    # (connect.cc), 64 KiB with Simple: 64 KiB >= 2 x 256 x 64 keeps both; 32 KiB per channel is one
    # loop (a loop holds 2 x 2 MiB); the chunk is 32 KiB / 2 ranks = 16 KiB; 2(n-1) = 2 steps of
    # 2 slices of 8 KiB each = 4 slices one after the other; 2 NVLink hops
    s = system(2, 1)
    ex = nccl_exec.plan(s, "ring", "simple", 64 * KiB)
    assert (ex.num_channels, ex.thread_fraction, ex.chunk_bytes, ex.full_chunk_bytes) == (2, 1.0, 16 * KiB, 2 * MiB)
    assert (ex.syncs, ex.slices, ex.hops_intra, ex.hops_inter, ex.fill_bytes) == (4, 4, 2, 0, 0)
    assert nccl_exec.time_us(s, "ring", "simple", 64 * KiB) == pytest.approx(two_rank_simple_ring_us(64 * KiB, 4, 8 * KiB))


@pytest.fixture
def overheads(monkeypatch):
    """Step overheads apart from the fitted ones, so that each term shows: LL128 3 us, Simple 2 us,
    and the Hopper row's LL128 7 us."""
    monkeypatch.setattr(nccl_exec, "STEP_OVERHEAD_US", {"ll": 0.0, "ll128": 3.0, "simple": 2.0})
    monkeypatch.setattr(nccl_exec, "GENERATION_US", {(2, "ll128"): 7.0})


@pytest.mark.parametrize("cc, step_us", [(70, 3.0), (80, 3.0), (90, 7.0), (94, 7.0), (100, 3.0)])
def test_two_rank_ll128_ring_pays_its_generations_step(overheads, cc, step_us):
    # 64 KiB with LL128 on 2 ranks: 2 channels (one search channel, duplicated), one 16 KiB chunk each,
    # 2(n-1) = 2 steps of one slice, 2 NVLink hops; baseLat(ring, LL128) 14.0 + 2 x hwLat 1.9 + the
    # transfer at NCCL's 18.4 GB/s (20 x 0.92) + 2 slices x the step overhead for the share of a full
    # LL128 step (576,000 data bytes) they lack. The Hopper row (sm_90, and AMD's gfx942 as NCCL's
    # SM90 tables take it) has its own; Volta, Ampere and Blackwell the common one
    s = system(2, 1, cc=cc)
    assert nccl_exec.step_overhead_us(s, "ll128") == step_us
    assert nccl_exec.step_overhead_us(s, "simple") == 2.0
    ex = nccl_exec.plan(s, "ring", "ll128", 64 * KiB)
    assert (ex.num_channels, ex.chunk_bytes, ex.slices, ex.hops_intra, ex.full_chunk_bytes) == (2, 16 * KiB, 2, 2, 576000)
    transfer = 64 * KiB / (1000 * 18.4)
    expect = 14.0 + 2 * 1.9 + transfer + 2 * step_us * (1 - 16 * KiB / 576000)
    assert nccl_exec.time_us(s, "ring", "ll128", 64 * KiB) == pytest.approx(expect)


@pytest.mark.parametrize("cc, rtt", [(70, 2.0), (80, 2.0), (90, 0.5), (100, 1.0)])
def test_ll_round_trips_take_their_generations_value(monkeypatch, cc, rtt):
    # 256 KiB with LL on 2 ranks: 2 channels of 128 KiB, each sending 2(n-1)/n of it, 128 KiB, in
    # round trips of 512 threads x 8 data bytes (4 KiB each): 32 round trips; its 2 loops of 2(n-1) = 2 steps of one 32 KiB
    # chunk take one round each, so 28 rounds are extra. The Hopper and Blackwell rows have their own
    # round trip (set apart here: 0.5 and 1 us), Volta and Ampere the common one (2 us)
    monkeypatch.setattr(nccl_exec, "LL_ROUND_TRIP_US", 2.0)
    monkeypatch.setattr(nccl_exec, "GENERATION_US", {(2, "ll_round_trip"): 0.5, (3, "ll_round_trip"): 1.0})
    s = system(2, 1, cc=cc)
    ex = nccl_exec.plan(s, "ring", "ll", 256 * KiB)
    assert (ex.num_channels, ex.thread_fraction, ex.slices) == (2, 1.0, 4)
    assert nccl_exec.ll_round_trip_us(s) == rtt
    assert nccl_exec.ll_rounds_us(s, "ring", "ll", 256 * KiB, ex) == pytest.approx(28 * rtt)


@pytest.mark.parametrize("nodes, chunk", [(3, 72000), (4, 36000)])
def test_tree_ll128_chunk_counts_nccls_floor_of_the_node_levels(nodes, chunk):
    # calcCollChunking's LL128 tree: nsteps = 1 + log2i(nNodes) + 0.1 ppn, log2i a floor: 2.1 on 3
    # nodes, 3.1 on 4. 5,760,000 B on 2 channels: 576,000 -> 72,000 while under nsteps x 64 / ppn
    # chunks a channel (above 131,072), then halved while under nsteps x 16: 5,760,000 / (2 x 72,000)
    # = 40 chunks, under 3.1 x 16 = 49.6 but not under 2.1 x 16 = 33.6. The tree still has
    # ceil(log2 3) = 2 levels up and down
    ex = nccl_exec.plan(system(nodes, nodes), "tree", "ll128", 5_760_000)
    assert (ex.num_channels, ex.chunk_bytes, ex.hops_inter) == (2, chunk, 4)


def test_tree_ll128_pays_its_levels_then_its_chunks(overheads):
    # 4 nodes of one GPU: 2 network levels, 4 synchronised hops up and down; LL128's tree chunk is
    # halved from 576,000 B to 18,000 (calcCollChunking: fewer than steps x 64 / ppn chunks per channel)
    # and 256 KiB on 2 channels is 8 such chunks a channel. One after the other: the 4 levels, then the
    # 7 chunks behind the first, each paying 3 us for the 31/32 of a full step it lacks; the first chunk
    # fills the 3 levels behind it at one channel's half of the bandwidth; the message moves at the
    # 0.6 of the bandwidth tuning.cc's treeCorrectionFactor gives LL128 at log2(256 KiB >> 6) = 12
    s = system(4, 4)
    ex = nccl_exec.plan(s, "tree", "ll128", 256 * KiB)
    assert (ex.num_channels, ex.chunk_bytes, ex.syncs, ex.slices, ex.hops_inter) == (2, 18000, 4, 8, 4)
    assert nccl_exec.serial_steps("tree", ex) == 11
    bw = nccl.bandwidth_gbps(s, "tree", "ll128")
    expect = 14.0 + 4 * 8.5 + 256 * KiB / (1000 * bw * 0.6) + 3 * 18000 / (1000 * bw / 2) + 11 * 3.0 * (1 - 1 / 32)
    assert nccl_exec.time_us(s, "tree", "ll128", 256 * KiB) == pytest.approx(expect)


@pytest.mark.parametrize("vendor, factor", [("intel", 0.7), ("arm", 1.0)])
def test_nvls_tree_transfer_takes_the_tree_correction_where_nccl_applies_it(vendor, factor):
    # ncclTopoGetAlgoTime multiplies NVLSTree's bandwidth by treeCorrectionFactor on Blackwell with
    # x86 CPUs only (Simple at log2(16 MiB >> 6) = 18: 0.7): the execution's transfer term takes it
    # there and nowhere else; every other term is the same on Grace
    import dataclasses

    nv = nccl.NcclGraph(num_channels=16, bw_intra_gbps=45.0, bw_inter_gbps=45.0, nvlink_intra=True)
    x86 = dataclasses.replace(system(16, 2, channels=16, bw=45.0, cc=100), nvls=nv)
    s = dataclasses.replace(x86, cpu_vendor=vendor)
    ex = nccl_exec.plan(s, "nvls_tree", "simple", 16 * MiB)
    bw = nccl_exec.bandwidth_gbps(s, "nvls_tree", "simple", ex)
    untouched = nccl_exec.time_us(s, "nvls_tree", "simple", 16 * MiB) - 16 * MiB / (1000 * bw * factor)
    assert nccl.tree_correction(s, "nvls_tree", "simple", 16 * MiB) == factor
    assert nccl.tree_correction(s, "ring", "simple", 16 * MiB) == 1.0
    assert untouched == pytest.approx(nccl_exec.time_us(x86, "nvls_tree", "simple", 16 * MiB)
                                      - 16 * MiB / (1000 * bw * 0.7))


def test_nvls_pays_every_slice(overheads):
    # NVLS on one node of 8, 16 channels: 4 MiB cuts the chunk to 16 KiB (an eighth of a full 128 KiB
    # one); each channel's 256 KiB is 2 loops of 8 chunks, reduced through the switch and broadcast
    # back: 4 slices, each paying Simple's 2 us for the 7/8 it lacks
    nv = nccl.NcclGraph(num_channels=16, bw_intra_gbps=40.0, bw_inter_gbps=60.0, nvlink_intra=True)
    s = nccl.NcclSystem(**{**system(8, 1, channels=12, bw=30.0, cc=90).__dict__, "nvls": nv})
    ex = nccl_exec.plan(s, "nvls", "simple", 4 * MiB)
    assert (ex.chunk_bytes, ex.slices, ex.full_chunk_bytes) == (16 * KiB, 4, 128 * KiB)
    assert nccl_exec.serial_steps("nvls", ex) == 4
    bw = nccl.bandwidth_gbps(s, "nvls", "simple")
    lat_intra, _ = nccl.hop_latency_us(s, "nvls", "simple")
    launch = nccl.BASE_LAT_US["nvls"][nccl.PROTOCOLS.index("simple")]
    expect = launch + lat_intra + 4 * MiB / (1000 * bw) + 2 * 8 * 16 * KiB / (1000 * bw / 16) + 4 * 2.0 * 7 / 8
    assert nccl_exec.time_us(s, "nvls", "simple", 4 * MiB) == pytest.approx(expect)


def test_two_rank_ring_loops_once_per_two_chunks_of_each_rank():
    # a loop carries nRanks chunks of 2 MiB per channel: 16 MiB on 2 ranks and 2 channels (1 search
    # channel, duplicated) is 8 MiB per channel, 2 loops, each of 2 steps x 2 slices
    ex = nccl_exec.plan(system(2, 1), "ring", "simple", 16 * MiB)
    assert (ex.num_channels, ex.chunk_bytes, ex.syncs, ex.slices) == (2, 2 * MiB, 4, 8)


def test_partial_last_loop_moves_only_its_bytes():
    # device/all_reduce.h runRing: a channel's last loop shrinks its chunk to divUp(remCount, nranks)
    # (enqueue.cc scheduleCollTasksToPlan / device.h ncclCollCbdPart give each channel an equal part),
    # so no channel idles through a whole loop. 12 MiB on 2 ranks and 2 channels (1 search channel
    # of 20 GB/s, duplicated; Simple with 256 threads): 6 MiB per channel, a full loop of 2 x 2 MiB
    # chunks, then a last loop of 2 x 1 MiB; each loop 2 steps x 2 slices = 8 slices (as the first loop
    # cuts them: full, no step overhead), 2 NVLink hops; the transfer is the 12 MiB at 20 GB/s, not two
    # whole loops' 16 MiB
    s = system(2, 1)
    ex = nccl_exec.plan(s, "ring", "simple", 12 * MiB)
    assert (ex.num_channels, ex.thread_fraction, ex.chunk_bytes) == (2, 1.0, 2 * MiB)
    assert (ex.syncs, ex.slices, ex.hops_intra, ex.hops_inter, ex.fill_bytes) == (4, 8, 2, 0, 0)
    assert nccl_exec.time_us(s, "ring", "simple", 12 * MiB) == pytest.approx(two_rank_simple_ring_us(12 * MiB, 8, MiB))


def test_communicator_duplicates_the_search_channels():
    # connect.cc ncclTopoPostset: 2 x the search's channels, at most MAXCHANNELS = 64; on Hopper across
    # nodes with a ring over 45 GB/s per channel and fewer than 16 channels, doubled once more
    assert nccl_exec.comm_channels(system(8, 1, channels=12)) == 24
    assert nccl_exec.comm_channels(system(8, 1, channels=40)) == 64
    assert nccl_exec.comm_channels(system(16, 2, channels=4, bw=60.0, cc=90)) == 16
    assert nccl_exec.comm_channels(system(16, 2, channels=4, bw=40.0, cc=90)) == 8
    assert nccl_exec.comm_channels(system(16, 2, channels=4, bw=60.0, cc=80)) == 8


def test_tree_of_three_levels_by_hand():
    # 8 nodes of one GPU: log2(8) = 3 network levels, up and down = 6 hops and 6 synchronised steps;
    # LL's chunk is one step of 32 KiB (8 lines x 512 threads x 8 data bytes); 1 MiB on 2 channels (1
    # search channel, duplicated) is 16 chunks per channel: the first crosses the 5 further levels
    # before the pipeline is full; the message moves at treeCorrectionFactor's 0.5 of the bandwidth
    # (LL at log2(1 MiB >> 6) = 14)
    s = system(8, 8)
    ex = nccl_exec.plan(s, "tree", "ll", 1 * MiB)
    assert (ex.num_channels, ex.hops_intra, ex.hops_inter, ex.syncs, ex.slices) == (2, 0, 6, 6, 16)
    assert (ex.chunk_bytes, ex.fill_bytes) == (32 * KiB, 5 * 32 * KiB)
    # one rank per node: the network hop is the tree's (tuning.cc hwLat[NET][TREE][LL] = 5.0)
    assert nccl.hop_latency_us(s, "tree", "ll") == (0.6, 5.0)
    bw = nccl.bandwidth_gbps(s, "tree", "ll")  # the two channels share it: bw / 2 each
    wire = MiB  # half a MiB up and down, per channel
    rounds = wire / (512 * 8) - (6 + 16 - 1)  # LL round trips beyond one per step
    expect = 6.8 + 6 * 5.0 + MiB / (1000 * bw * 0.5) + rounds * nccl_exec.LL_ROUND_TRIP_US + 5 * 32 * KiB / (1000 * bw / 2)
    assert nccl_exec.time_us(s, "tree", "ll", MiB) == pytest.approx(expect)


def test_runtime_channels_drop_then_threads_halve():
    # enqueue.cc topoGetAlgoInfo, ring LL on 8 ranks: threshold 8 x nRanks = 64 bytes per thread, 512 threads,
    # from the communicator's 24 channels (12 search channels, duplicated)
    s = system(8, 1, channels=12)
    assert nccl_exec.runtime_channels(s, "ring", "ll", 100 * KiB) == (3, 1.0)  # 100 KiB >= 3 x 32 KiB
    assert nccl_exec.runtime_channels(s, "ring", "ll", 12 * 32 * KiB) == (12, 1.0)
    assert nccl_exec.runtime_channels(s, "ring", "ll", 24 * 32 * KiB) == (24, 1.0)
    # 8 KiB: one channel, then 512 -> 256 -> 128 threads (8 KiB >= 128 x 64 stops the halving)
    assert nccl_exec.runtime_channels(s, "ring", "ll", 8 * KiB) == (1, 0.25)
    # a tree drops channels the same way but keeps every thread ("Tree now uses all threads always")
    assert nccl_exec.runtime_channels(s, "tree", "ll", 8) == (1, 1.0)


def test_nvls_chunk_shrinks_for_small_sizes():
    # enqueue.cc calcCollChunking, NVLS on one node of 8 with 16 channels: 128 KiB chunks cut to 64 KiB
    # below 64 x 128 concurrent ops x 128 KiB, to 32 KiB below 8 x 128 x 64 KiB, to 16 KiB below 2 x 128 x 32 KiB
    nv = nccl.NcclGraph(num_channels=16, bw_intra_gbps=40.0, bw_inter_gbps=60.0, nvlink_intra=True)
    base = system(8, 1, channels=12, bw=30.0, cc=90)
    s = nccl.NcclSystem(**{**base.__dict__, "nvls": nv})
    chunks = [nccl_exec.plan(s, "nvls", "simple", size).chunk_bytes for size in (4 * MiB, 32 * MiB, 512 * MiB, 2 * GiB)]
    assert chunks == [16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB]


def test_large_messages_run_at_nccls_bandwidth():
    # the ramp's terms are fixed per message: at 8 GiB the time is the bytes over NCCL's bandwidth within 1 %
    s = system(8, 1, channels=12)
    bw = nccl.bandwidth_gbps(s, "ring", "simple")
    t = nccl_exec.time_us(s, "ring", "simple", 8 * GiB)
    assert 8 * GiB / (1000 * bw) <= t <= 1.01 * 8 * GiB / (1000 * bw)


def test_mid_size_pays_more_than_nccls_estimate():
    # the steps of a loop are paid whatever the message: 4 MiB on 8 A100s takes longer than the estimate
    s = system(8, 1, channels=12)
    a, p, t_estimate = nccl.choose(s, 4 * MiB)
    assert nccl_exec.time_us(s, a, p, 4 * MiB) > t_estimate


def test_disabled_pair_is_infinite():
    assert math.isinf(nccl_exec.time_us(system(8, 1), "nvls", "simple", MiB))
