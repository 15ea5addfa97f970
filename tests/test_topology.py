"""Topology presets, YAML loading and validation, ``ddpsim topology``."""

from __future__ import annotations

import json
import re
import textwrap

import networkx as nx
import pytest

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.network.topology import (BANDWIDTH, COMPUTE_CAPABILITY, DEVICE_MODEL, HOST, KIND, LATENCY, LINK_TYPE, LOCAL_RANK,
                             MEMORY_BANDWIDTH, NVLS, build_preset, load_topology_yaml, rank_nodes,
                             presets, resolve_topology, validate_topology)


def edge_bw_gbps(g: nx.Graph, u: str, v: str) -> float:
    return g.edges[u, v][BANDWIDTH] / 1e9


def test_presets_tuple_and_backends():
    assert presets() == ("dgx-a100", "dgx-h100", "pcie", "dgx-v100", "dgx-h200", "dgx-b200", "gb200-nvl72", "pcie-l40s",
                       "mi300x-platform", "mi325x-platform", "mi355x-platform", "hgx-h100-4", "gh200-quad", "cpu-gloo")
    for name in presets():
        g = build_preset(name)
        assert g.graph["name"] == name
        assert g.graph["backend"] == ("gloo" if name == "cpu-gloo" else "nccl")
        assert nx.is_connected(g)
        for n in rank_nodes(g):
            d = g.nodes[n]
            # a GB200 NVL72 rack is one node of 18 hosts (its compute trays)
            assert d[KIND] in ("gpu", "cpu") and d[HOST] == (0 if name != "gb200-nvl72" else int(n[1:].split("/")[0]))
            assert d[MEMORY_BANDWIDTH] > 0 and d[DEVICE_MODEL]


def test_dgx_a100_numbers():
    g = build_preset("dgx-a100")
    assert len(rank_nodes(g)) == 8
    # 12 NVLink3 x 20.0 GB/s (NCCL SM80_NVLINK_BW) into the NVSwitch; PCIe Gen4 x16 = 24
    assert edge_bw_gbps(g, "n0/gpu0", "n0/nvswitch") == 240.0
    assert g.edges["n0/gpu0", "n0/nvswitch"][LINK_TYPE] == "nvlink"
    assert edge_bw_gbps(g, "n0/gpu0", "n0/pcie0") == 24.0
    assert g.nodes["n0/gpu0"][COMPUTE_CAPABILITY] == 80
    assert g.nodes["n0/nvswitch"][NVLS] is False
    assert g.graph["cpu_vendor"] == "amd"
    assert not [n for n, d in g.nodes(data=True) if d[KIND] == "nic"]  # one node: no NICs needed


def test_dgx_h100_numbers():
    g = build_preset("dgx-h100", num_nodes=2)
    assert len(rank_nodes(g)) == 16
    # 18 NVLink4 x 20.6 = 370.8 GB/s (nccl#1189 log), NDR 400 Gb/s -> 50 GB/s, Gen5 x16 = 48
    assert edge_bw_gbps(g, "n1/gpu3", "n1/nvswitch") == pytest.approx(370.8)
    assert edge_bw_gbps(g, "n0/nic0", "leaf-r0-0") == 50.0
    assert edge_bw_gbps(g, "n0/nic0", "n0/pcie0") == 48.0
    assert g.nodes["n0/nvswitch"][NVLS] is True
    assert g.nodes["n0/gpu0"][COMPUTE_CAPABILITY] == 90


def test_rank_order_is_host_then_local_rank():
    g = build_preset("dgx-a100", num_nodes=2, gpus_per_node=4)
    assert rank_nodes(g) == [f"n{h}/gpu{i}" for h in range(2) for i in range(4)]
    assert [g.nodes[n][LOCAL_RANK] for n in rank_nodes(g)] == [0, 1, 2, 3] * 2


def test_rail_fabric_and_fat_tree_oversubscription():
    rail = build_preset("dgx-a100", num_nodes=4)
    leaves = [n for n, d in rail.nodes(data=True) if d[KIND] == "leaf"]
    assert len(leaves) == 8  # one per rail
    assert set(rail.neighbors("leaf-r3-0")) >= {f"n{h}/nic3" for h in range(4)}
    ft = build_preset("dgx-a100", num_nodes=4, fabric="fat-tree", oversubscription=2.0, leaf_radix=32, num_spines=2)
    # 16 down ports / 8 NICs = 2 nodes per leaf; uplink 2 x 8 x 25 / 2 = 200 GB/s over 2 spines
    assert [n for n, d in ft.nodes(data=True) if d[KIND] == "leaf"] == ["leaf-0", "leaf-1"]
    assert edge_bw_gbps(ft, "leaf-0", "spine-0") == 100.0
    assert edge_bw_gbps(ft, "leaf-1", "spine-1") == 100.0


def test_pcie_preset_has_no_nvlink():
    g = build_preset("pcie", pcie_gen=5, gpus_per_node=4, gpus_per_switch=2)
    assert {d[LINK_TYPE] for _, _, d in g.edges(data=True)} == {"pcie"}
    assert edge_bw_gbps(g, "n0/gpu0", "n0/pcie0") == 48.0
    assert len(rank_nodes(g)) == 4


def test_cpu_gloo_defaults_and_options():
    g = build_preset("cpu-gloo", num_nodes=2, ranks_per_host=3)
    assert len(rank_nodes(g)) == 6 and g.graph["backend"] == "gloo"
    assert {d[LINK_TYPE] for _, _, d in g.edges(data=True)} == {"loopback", "ethernet"}
    assert g.edges["n0/cpu0", "n0/loopback"][LATENCY] == pytest.approx(7.5e-6)
    assert edge_bw_gbps(g, "n0/nic0", "eth-switch") == pytest.approx(1.25 * 1448 / 1538)


@pytest.mark.parametrize("name,opts,match", [
    ("dgx-x", {}, r"topology: 'dgx-x' is not a preset; expected one of dgx-a100, dgx-h100, pcie, dgx-v100, .*, cpu-gloo"),
    ("dgx-a100", {"nvlinks_per_gpu": 0}, r"^topology dgx-a100: nvlinks_per_gpu: 0 is not accepted; expected a value >= 1$"),
    ("dgx-a100", {"fabric": "torus"}, r"^topology dgx-a100: fabric: 'torus' is not accepted; expected 'rail' or 'fat-tree'$"),
    ("dgx-a100", {"oversubscription": 0.5}, r"oversubscription: 0.5 .*>= 1"),
    ("dgx-a100", {"ranks_per_host": 2}, r"^topology dgx-a100: ranks_per_host: unknown key; expected one of .*gpus_per_node"),
    ("pcie", {"pcie_gen": 3}, r"pcie_gen: 3 .*expected 4, 5 \(the generations of its catalogue entry\)"),
    ("cpu-gloo", {"loopback_gbps": -1}, r"loopback_gbps: -1 .*> 0"),
])
def test_preset_bad_options(name, opts, match):
    with pytest.raises(InputError, match=match):
        build_preset(name, **opts)


def test_bad_num_nodes():
    with pytest.raises(InputError, match=r"num_nodes: 0 is not accepted"):
        build_preset("dgx-a100", num_nodes=0)


GOOD_YAML = """\
name: two-gpus
backend: nccl
nodes:
  - {id: g0, kind: gpu, host: 0, local_rank: 0, device_model: A100, compute_capability: 80}
  - {id: g1, kind: gpu, host: 0, local_rank: 1, device_model: A100, compute_capability: 80}
  - {id: sw, kind: nvswitch, host: 0}
links:
  - {a: g0, b: sw, bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}
  - {a: g1, b: sw, bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}
"""


def write(tmp_path, text, name="t.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_yaml_roundtrip_and_model(tmp_path):
    from ddpsim.network.collective_cost import build_comm_model

    g = load_topology_yaml(write(tmp_path, GOOD_YAML))
    assert g.graph["name"] == "two-gpus" and len(rank_nodes(g)) == 2
    assert edge_bw_gbps(g, "g0", "sw") == 240.0 and g.edges["g0", "sw"][LATENCY] == pytest.approx(0.6e-6)
    assert resolve_topology(str(tmp_path / "t.yaml")).graph["name"] == "two-gpus"
    m = build_comm_model(g, 2)
    # search: 40 x 6 = 240 = totalBw, dup -> 12 x 20 (as on a DGX A100)
    assert (m.describe()["ring_channels"], m.describe()["ring_bw_per_channel_gbps"]) == (12, 20.0)


@pytest.mark.parametrize("edit,match", [
    (lambda t: t.replace("bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}\n  - {a: g1",
                         "bandwidth_gbps: 0, latency_us: 0.6, link_type: nvlink}\n  - {a: g1"),
     r"links\[0\].bandwidth_gbps: 0 is not accepted; expected a value > 0"),
    (lambda t: t.replace("bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}\n  - {a: g1",
                         "bandwidth_gbps: -5, latency_us: 0.6, link_type: nvlink}\n  - {a: g1"),
     r"links\[0\].bandwidth_gbps: -5"),
    (lambda t: t.replace("latency_us: 0.6, link_type: nvlink}\n  - {a: g1", "latency_us: 0, link_type: nvlink}\n  - {a: g1"),
     r"links\[0\].latency_us: 0 is not accepted"),
    (lambda t: t.replace("  - {a: g1, b: sw, bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}\n", ""),
     r"is disconnected .*expected every node reachable"),
    (lambda t: t.replace("{a: g1, b: sw", "{a: g9, b: sw"), r"links\[1\].a: 'g9' is not a node id"),
    (lambda t: t.replace("local_rank: 1", "local_rank: 0"), r"share host 0 local_rank 0"),
    (lambda t: t.replace("host: 0, local_rank: 1, ", "host: 0, "), r"nodes\[1\].local_rank: None"),
    (lambda t: t.replace("kind: nvswitch", "kind: router"), r"nodes\[2\].kind: 'router' is not accepted"),
    (lambda t: t.replace("backend: nccl", "backend: mpi"), r"backend: 'mpi' is not accepted; expected 'nccl' or 'gloo'"),
    (lambda t: t.replace("backend: nccl", "backend: gloo"), r"backend 'gloo' models CPU ranks only"),
    (lambda t: t.replace("link_type: nvlink}\n  - {a: g1", "link_type: warp}\n  - {a: g1"),
     r"links\[0\].link_type: 'warp'"),
    (lambda t: "just a string", r"'just a string' is not accepted; expected a mapping"),
    (lambda t: "nodes: [\n", r"not valid YAML"),
])
def test_yaml_bad_input(tmp_path, edit, match):
    with pytest.raises(InputError, match=match):
        load_topology_yaml(write(tmp_path, edit(GOOD_YAML)))


def test_yaml_missing_file_and_options_with_file(tmp_path):
    with pytest.raises(InputError, match=r"^topology: '.*nope.yaml' does not exist or is not a file; expected a preset"):
        resolve_topology(str(tmp_path / "nope.yaml"))
    p = write(tmp_path, GOOD_YAML)
    with pytest.raises(InputError, match=r"is a YAML file; expected no --nodes"):
        resolve_topology(str(p), num_nodes=2)


def test_cli_topology_table_json_and_draw(tmp_path, capsys):
    assert main(["topology", "dgx-a100", "--nodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "16 x A100-SXM4-80GB on 2 host(s)" in out
    assert "ring 8 ch x 24 GB/s = 192.0 GB/s busbw" in out
    png = tmp_path / "d" / "t.png"
    assert main(["topology", "dgx-h100", "--set", "gpus_per_node=4", "--format", "json", "--draw", str(png)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["num_devices"] == 4 and s["nccl_graph"]["nvls_channels"] == 4
    assert png.stat().st_size > 1000


@pytest.mark.parametrize("argv,match", [
    (["topology", "dgx-x"], r"topology: 'dgx-x' is not a preset; expected one of dgx-a100, dgx-h100, pcie, dgx-v100, .*cpu-gloo"),
    (["topology", "dgx-a100", "--nodes", "-1"], r"--nodes: '?-1'? is not accepted"),
    (["topology", "dgx-a100", "--set", "nvlinks_per_gpu"], r"--set: 'nvlinks_per_gpu' is not accepted; expected KEY=VALUE"),
    (["topology", "dgx-a100", "--set", "bogus=1"], r"topology dgx-a100: bogus: unknown key; expected one of "),
    (["topology", "pcie", "--format", "yaml"], r"--format: 'yaml'"),
])
def test_cli_topology_bad_input_exits_2(capsys, argv, match):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(match, err)


def test_cli_topology_bad_yaml_exits_2(tmp_path, capsys):
    p = write(tmp_path, GOOD_YAML.replace("bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}\n  - {a: g1",
                                          "bandwidth_gbps: 0, latency_us: 0.6, link_type: nvlink}\n  - {a: g1"))
    assert main(["topology", str(p)]) == 2
    assert "links[0].bandwidth_gbps: 0" in capsys.readouterr().err


TWO_HOSTS_YAML = """\
name: two-pcie-hosts
backend: nccl
nodes:
  - {id: h0g0, kind: gpu, host: 0, local_rank: 0}
  - {id: h0g1, kind: gpu, host: 0, local_rank: 1}
  - {id: h0sw, kind: pcie_switch, host: 0}
  - {id: h0nic, kind: nic, host: 0}
  - {id: h1g0, kind: gpu, host: 1, local_rank: 0}
  - {id: h1g1, kind: gpu, host: 1, local_rank: 1}
  - {id: h1sw, kind: pcie_switch, host: 1}
  - {id: h1nic, kind: nic, host: 1}
  - {id: leaf, kind: leaf}
links:
  - {a: h0g0, b: h0sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h0g1, b: h0sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h0nic, b: h0sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h1g0, b: h1sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h1g1, b: h1sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h1nic, b: h1sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h0nic, b: leaf, bandwidth_gbps: 12.5, latency_us: 0.6, link_type: net}
  - {a: h1nic, b: leaf, bandwidth_gbps: 12.5, latency_us: 0.6, link_type: net}
"""


def test_yaml_two_hosts_nic_bounds_the_ring(tmp_path):
    from ddpsim.network.collective_cost import build_comm_model

    g = load_topology_yaml(write(tmp_path, TWO_HOSTS_YAML))
    assert g.graph["num_nodes"] == 2 and len(rank_nodes(g)) == 4
    d = build_comm_model(g, 4).describe()
    # speeds tried (speedArrayInter): 24, 20, 18, 15 need more than the NIC's 12.5 GB/s; 12 fits
    # one channel (two would need 24); nothing below 12 beats 1 x 12 before 0.49 x 12.
    assert (d["ring_channels"], d["ring_bw_per_channel_gbps"]) == (1, 12.0)
    assert "leaf" in d["ring_bottleneck_link"]
    assert d["ll128_enabled"] is False  # no NVLink between the GPUs


class _OneByOne:
    """The reference construction: networkx's own ``add_node``/``add_edge``, one call at a time,
    every host built on its own (what the presets' builder must reproduce)."""

    def __init__(self, **attrs):
        self.g = nx.Graph()
        self.g.graph.update(attrs)
        self.graph = self.g.graph

    def __contains__(self, n):
        return n in self.g

    def add_node(self, n, **attrs):
        self.g.add_node(n, **attrs)

    def add_edge(self, u, v, **attrs):
        self.g.add_edge(u, v, **attrs)

    def host(self, h, add):
        return add()

    def to_graph(self):
        return self.g


def _layout(g: nx.Graph) -> list:
    """Everything about a graph that order-sensitive code reads: elements in order with their
    attributes, each one's links in order with theirs."""
    return [(n, d, [(m, e) for m, e in g.adj[n].items()]) for n, d in g.nodes(data=True)] + [g.graph]


@pytest.mark.parametrize("name,nodes,opts", [("dgx-h100", 33, {}), ("dgx-a100", 3, {"fabric": "fat-tree"}),
                                             ("dgx-v100", 2, {}), ("gb200-nvl72", 2, {}), ("pcie", 3, {"pcie_gen": 5}),
                                             ("cpu-gloo", 3, {}), ("dgx-b200", 1, {})])
def test_preset_builder_matches_networkx_one_call_at_a_time(monkeypatch, name, nodes, opts):
    import ddpsim.network.topology as topology

    fast = build_preset(name, num_nodes=nodes, **opts)
    monkeypatch.setattr(topology, "Builder", _OneByOne)
    ref = build_preset(name, num_nodes=nodes, **opts)
    assert _layout(fast) == _layout(ref)
    dicts = [fast.adj[u][v] for u, v in fast.edges]
    assert len({id(d) for d in dicts}) == len(dicts)  # one attribute dict per link ...
    assert all(fast.adj[u][v] is fast.adj[v][u] for u, v in fast.edges)  # ... shared by both ends, as networkx does


@pytest.mark.parametrize("name,nodes,ranks,opts", [("dgx-h100", 9, 69, {}), ("dgx-a100", 5, 40, {"fabric": "fat-tree"}),
                                                   ("pcie", 4, 14, {"gpus_per_switch": 2}), ("dgx-v100", 3, 24, {})])
def test_copies_of_host_0_give_the_model_every_host_compared_gives(monkeypatch, name, nodes, ranks, opts):
    """The builder's copies of host 0 let the check and the channel searches skip comparing hosts;
    the graph built one call at a time has none, so every host is compared element by element."""
    import ddpsim.network.topology as topology
    from ddpsim.network.collective_cost import build_comm_model
    from ddpsim.network.graph_build import host_copies
    from ddpsim.network.host_classes import Hosts
    from ddpsim.network.routing import place_ranks

    fast = build_preset(name, num_nodes=nodes, **opts)
    assert host_copies(fast).hosts == frozenset(range(1, nodes))
    monkeypatch.setattr(topology, "Builder", _OneByOne)
    ref = build_preset(name, num_nodes=nodes, **opts)
    assert host_copies(ref) is None
    p_fast, p_ref = place_ranks(fast, ranks), place_ranks(ref, ranks)
    a, b = Hosts(fast, p_fast), Hosts(ref, p_ref)
    assert a.copies and not b.copies
    assert (a.classes, a.walked, a.nics) == (b.classes, b.walked, b.nics)
    for n in (ranks, 8):
        m_fast, m_ref = build_comm_model(fast, n), build_comm_model(ref, n)
        assert m_fast.describe() == m_ref.describe()
        assert [m_fast.allreduce_s(s) for s in (1 << 10, 1 << 20, 1 << 30)] == \
               [m_ref.allreduce_s(s) for s in (1 << 10, 1 << 20, 1 << 30)]


def _stamped(hosts=3):
    """A builder with ``hosts`` hosts of a GPU, a PCIe switch and a NIC, host 0's stamped on the others."""
    from ddpsim.network.graph_build import Builder

    b = Builder(name="t", backend="nccl")

    def add(h=0):
        b.add_node(f"n{h}/gpu0", kind="gpu", host=h, local_rank=0)
        b.add_node(f"n{h}/sw", kind="pcie_switch", host=h)
        b.add_node(f"n{h}/nic0", kind="nic", host=h, rail=0)
        b.add_edge(f"n{h}/gpu0", f"n{h}/sw", bandwidth_bytes_per_s=1e9, latency_s=0.0, link_type="pcie")
        b.add_edge(f"n{h}/nic0", f"n{h}/sw", bandwidth_bytes_per_s=1e9, latency_s=0.0, link_type="pcie")
        return [f"n{h}/nic0"]
    nics = [b.host(h, add) for h in range(hosts)]
    b.add_node("leaf", kind="leaf", host=-1)
    return b, nics


def _link(b, u, v):
    b.add_edge(u, v, bandwidth_bytes_per_s=1e9, latency_s=0.0, link_type="net")


def test_builder_keeps_a_copy_only_while_nothing_but_its_nics_reach_outside():
    from ddpsim.network.graph_build import host_copies

    b, nics = _stamped(5)
    for (nic,) in nics:
        _link(b, nic, "leaf")
    _link(b, "n1/gpu0", "leaf")                  # a copy's GPU linked outside: host 1 no copy
    b.add_node("n2/sw", kind="pcie_switch", host=2, extra=1)  # a copy's element changed: host 2 no copy
    _link(b, "n3/nic0", "n4/nic0")               # NIC to NIC between copies: neither
    assert host_copies(b.to_graph()) is None
    b, nics = _stamped(4)
    for (nic,) in nics:
        _link(b, nic, "leaf")
    b.add_node("n3/gpu1", kind="gpu", host=3, local_rank=1)  # an element added to a copy
    assert host_copies(b.to_graph()).hosts == frozenset({1, 2})


def test_check_of_copies_names_what_the_check_of_every_element_names(monkeypatch):
    import ddpsim.network.topology_check as check

    b, nics = _stamped(4)
    for (nic,) in nics[:3]:                      # host 3 never reaches the fabric
        _link(b, nic, "leaf")
    g = b.to_graph()
    with pytest.raises(InputError, match=r"t: is disconnected \(2 parts; e.g. \['n3/gpu0', 'n3/nic0', 'n3/sw'\]"):
        validate_topology(g, source="t")
    monkeypatch.setattr(check, "_check", lambda g, source: pytest.fail("the check of every element ran"))
    validate_topology(build_preset("dgx-h100", num_nodes=64), source="dgx-h100")  # decided on the copies


def test_a_copy_joins_the_elements_that_reach_it():
    """Two leaves linked to nothing but the NICs of the copies: the copies join them into one part."""
    from ddpsim.network.graph_build import host_copies
    from ddpsim.network.topology_check import _connected_apart_from_copies

    b, nics = _stamped(3)
    b.add_node("leaf2", kind="leaf", host=-1)
    _link(b, nics[0][0], "leaf")
    for (nic,) in nics[1:]:
        _link(b, nic, "leaf")
        _link(b, nic, "leaf2")
    g = b.to_graph()
    hosts = host_copies(g).hosts
    kept = [n for n, d in g.nodes(data=True) if d["host"] not in hosts]
    assert _connected_apart_from_copies(g, kept, hosts)
    validate_topology(g, source="t")
    b.add_node("leaf3", kind="leaf", host=-1)      # linked to nothing: a part of its own
    g = b.to_graph()
    assert not _connected_apart_from_copies(g, [n for n, d in g.nodes(data=True) if d["host"] not in hosts], hosts)
    with pytest.raises(InputError, match=r"t: is disconnected \(2 parts; e.g. \['leaf3'\]"):
        validate_topology(g, source="t")


@pytest.mark.parametrize("preset,gpu", [("mi300x-platform", "mi300x"), ("mi325x-platform", "mi325x"),
                                        ("mi355x-platform", "mi355x")])
def test_infinity_fabric_link_takes_the_catalogues_figure(preset, gpu):
    # an xGMI link is the catalogue's link_gbps (half the datasheet's bidirectional figure:
    # 128 -> 64, 153.6 -> 76.8 GB/s), not NCCL's per-NVLink figure for cc 94/95 (SM90: 20.6)
    from ddpsim.hardware.catalogue import bundled

    nvl = bundled().gpus[gpu].nvlink
    assert nvl.fabric == "infinity-fabric"
    g = build_preset(preset)
    xgmi = [d for _, _, d in g.edges(data=True) if d[LINK_TYPE] == "nvlink"]
    assert len(xgmi) == 28  # one link per pair of the 8 GPUs
    assert {d[BANDWIDTH] / 1e9 for d in xgmi} == {nvl.link_gbps}
    assert "Infinity Fabric mesh" in g.graph["description"]


def test_nvlink_keeps_nccls_figure_not_the_datasheets():
    # dgx-v100: NVLink2's datasheet 25 GB/s per link, NCCL's SM70_NVLINK_BW 20.0 per link
    g = build_preset("dgx-v100")
    assert {d[BANDWIDTH] / 1e9 / d["num_links"] for _, _, d in g.edges(data=True) if d[LINK_TYPE] == "nvlink"} == {20.0}


def test_unknown_link_fabric_is_refused_in_one_line(tmp_path, capsys):
    from pathlib import Path

    src = (Path(__file__).parent / "data" / "my-catalogue.yaml").read_text()
    assert "link_gbps: 25}" in src
    path = tmp_path / "cat.yaml"
    path.write_text(src.replace("link_gbps: 25}", "link_gbps: 25, fabric: xgmi}"))
    assert main(["topology", "--list", "--catalogue", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nvlink.fabric: 'xgmi' is not accepted; expected 'nvlink' or 'infinity-fabric'" in err
