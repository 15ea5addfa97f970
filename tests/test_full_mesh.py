"""The channel search on a fully connected mesh (AMD's MI300X platform: 8 GPUs, one Infinity
Fabric link to each of the 7 others) is bounded in steps and gives the channels a hand count
gives (:mod:`ddpsim.network.mesh_search`)."""

from __future__ import annotations

import pytest

from ddpsim.network import nccl_exec
from ddpsim.network.collective_cost import build_comm_model
from ddpsim.network.mesh_search import find_channels, full_mesh, symmetric_rings
from ddpsim.network.topology import build_preset

DEVS = list(range(8))


def k8(link_gbps: float) -> dict:
    return {(a, b): link_gbps for a in DEVS for b in DEVS if a != b}


def test_k8_symmetric_rings_leave_a_perfect_matching():
    # K_8: 7 links per GPU, an undirected Hamiltonian cycle takes 2 of them: floor(7 / 2) = 3
    # cycles, each both ways = 6 rings; the link each GPU has left over pairs the GPUs up.
    rings = symmetric_rings(DEVS, 0)
    assert len(rings) == 6
    assert all(sorted(r) == DEVS and r[0] == 0 for r in rings)
    used = [e for r in rings for e in zip(r, r[1:] + r[:1])]
    assert len(used) == len(set(used)) == 48  # no directed link twice
    left = {frozenset(e) for e in k8(1.0) if e not in set(used)}
    assert len(left) == 4 and set().union(*left) == set(DEVS)


def test_k8_packing_is_bounded_and_counts_link_units():
    # one unit per link at 60 GB/s (one 64 GB/s link): 6 rings; at 30 GB/s two units: 12.
    cap = k8(64.0)
    assert full_mesh(DEVS, cap)
    assert len(find_channels(DEVS, cap, 60.0, 32, cycle=True)[0]) == 6
    rings, left = find_channels(DEVS, cap, 30.0, 32, cycle=True)
    assert len(rings) == 12 and min(left.values()) >= -1e-9
    assert len(find_channels(DEVS, cap, 30.0, 12, cycle=False)[0]) == 12  # chains: rings less a link


def test_packing_budget_ends_the_search():
    # K_8 less one link is no full mesh: its thousands of cycles share links; the packing stops
    # after MAX_STEPS candidates tried (the walk that lists them after as many again).
    cap = {e: v for e, v in k8(20.6).items() if set(e) != {0, 1}}
    assert not full_mesh(DEVS, cap)
    rings, left = find_channels(DEVS, cap, 20.0, 32, cycle=True)
    assert 1 <= len(rings) <= 6 and min(left.values()) >= -1e-9


def test_mi300x_platform_comm_model_in_bounded_steps():
    # Hand count (search.cc, SM90 intra speeds 60, 50, 40, 30, 24, ...): one xGMI link of 64 GB/s
    # per pair, totalBw = 7 x 64 = 448. At 60 each link carries one ring: 6 rings, 360 < 448; 50
    # and 40 carry 6 too (less); 30 carries two per link: 12 x 30 = 360, no more; 24 / 60 <= 0.49
    # stops. 6 x 60, then ncclTopoDupChannels (60 >= 25, not < 50): 12 channels x 30 = 360.
    g = build_preset("mi300x-platform")
    m = build_comm_model(g, 8)
    d = m.describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (12, 30.0)
    assert d["ring_bus_bw_gbps"] == pytest.approx(360.0)
    # the tree: 12 chains (the ring's count); at 30 each link carries two: 12 chains of 30
    assert (d["tree_channels"], d["tree_bw_intra_gbps"]) == (12, 30.0)


def test_k4_packs_directed_rings_that_share_links():
    # K_4 (an HGX 4-GPU board: 6 NVLink4 per pair, 6 x 20.6 = 123.6 GB/s a direction): its three
    # undirected Hamiltonian cycles share links, so the symmetric rings (one cycle both ways) leave
    # the third pair of links idle. NCCL's search shares them: each directed link lies on two of
    # the six directed cycles, so at 60 GB/s (two per link) all six fit, 6 x 60 = 360 <= 3 x 123.6.
    devs = list(range(4))
    cap = {(a, b): 123.6 for a in devs for b in devs if a != b}
    assert not full_mesh(devs, cap)
    rings, left = find_channels(devs, cap, 60.0, 32, cycle=True)
    assert len(rings) == len({tuple(r) for r in rings}) == 6
    assert all(v == pytest.approx(3.6) for v in left.values())
    assert len(symmetric_rings(devs, 0)) == 2


@pytest.mark.parametrize("preset", ["hgx-h100-4", "gh200-quad"])
def test_four_gpu_nvlink4_mesh_finds_nccls_channels(preset):
    # NCCL 2.22.3 on 4 H100 with NV6 between every pair and no NVSwitch prints 24 coll channels,
    # all six ring orders (0 1 2 3, 0 1 3 2, 0 2 3 1, 0 2 1 3, 0 3 1 2, 0 3 2 1: NCCL_DEBUG=INFO log of
    # odissei-benchmarks/nccl-tests runs/1node/all_reduce.log). By hand: speed 60 takes two rings a
    # link, six rings = 360 < totalBw 18 x 20.6; ncclTopoDupChannels (60 >= 50): 12 x 30;
    # connect.cc doubles the communicator's: 24.
    m = build_comm_model(build_preset(preset), 4)
    d = m.describe()
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"], d["nvls_channels"]) == (12, 30.0, 0)
    assert nccl_exec.comm_channels(m.system) == 24
