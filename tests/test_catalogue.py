"""The hardware catalogue: the bundled figures against their datasheets, the new systems' graphs,
a user's own catalogue file (a GPU and a node layout, no code), and bad files (one line, exit 2)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import networkx as nx
import pytest

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.hardware.catalogue import bundled, load_catalogue
from ddpsim.network.topology import (BANDWIDTH, COMPUTE_CAPABILITY, HOST, KIND, LINK_TYPE, NUM_LINKS, NVLS, SM_COUNT,
                                     build_preset, rank_nodes, resolve_topology)
from ddpsim.trace.retime import get_gpu, gpu_peaks, low_precision_flops_per_s


def _gbps(g, u, v):
    return g.edges[u, v][BANDWIDTH] / 1e9


def test_every_figure_names_a_reference_with_a_url():
    cat = bundled()
    for entries in (cat.gpus, cat.systems):
        for entry in entries.values():
            for ref in entry.sources.values():
                assert cat.references[ref].url.startswith("https://")


def test_dense_figures_are_half_the_datasheets_sparse_ones():
    # NVIDIA prints tensor-core figures with 2:4 sparsity; the catalogue holds the dense half
    g = bundled().gpus
    assert g["h100"].dense_tflops.bf16 == pytest.approx(1979 / 2, abs=0.2)   # H100 SXM datasheet 1,979*
    assert g["h200"].dense_tflops.fp8 == pytest.approx(3958 / 2, abs=0.2)    # H200 datasheet 3,958*
    assert g["b200"].dense_tflops.bf16 == 36000 / 8 / 2                      # HGX B200: 36 PF for 8 GPUs*
    assert g["gb200"].dense_tflops.bf16 == 360000 / 72 / 2                   # GB200 NVL72: 360 PF for 72*
    assert g["l40s"].dense_tflops.fp16 == 362.05                            # L40S datasheet: 362.05 | 733*
    assert g["gb200"].memory_gbps == 576000 / 72                             # 576 TB/s for 72 GPUs


def test_dgx_v100_is_the_hybrid_cube_mesh():
    g = build_preset("dgx-v100")
    gpus_ = rank_nodes(g)
    assert len(gpus_) == 8 and not [n for n, d in g.nodes(data=True) if d[KIND] == "nvswitch"]
    mesh = nx.Graph((u, v, d) for u, v, d in g.edges(data=True) if d[LINK_TYPE] == "nvlink")
    assert mesh.number_of_edges() == 16
    for gpu in gpus_:  # 6 NVLink2 links per V100, 20.0 GB/s each as NCCL models SM70 (topo.h)
        assert sum(mesh.edges[gpu, o][NUM_LINKS] for o in mesh[gpu]) == 6
        assert all(_gbps(g, gpu, o) == 20.0 * mesh.edges[gpu, o][NUM_LINKS] for o in mesh[gpu])
        assert g.nodes[gpu][COMPUTE_CAPABILITY] == 70 and g.nodes[gpu][SM_COUNT] == 80
    # the two quads (0-3, 4-7) are each fully connected; each GPU reaches one GPU of the other quad
    for quad in (range(4), range(4, 8)):
        assert all(mesh.has_edge(f"n0/gpu{a}", f"n0/gpu{b}") for a in quad for b in quad if a < b)
    two = build_preset("dgx-v100", num_nodes=2)  # 4 EDR NICs per node, one per PCIe Gen3 switch
    assert _gbps(two, "n0/nic0", "leaf-r0-0") == 12.5 and _gbps(two, "n0/gpu0", "n0/pcie0") == 12.0
    assert sorted(n for n in two if n.startswith("n0/nic")) == [f"n0/nic{i}" for i in range(4)]


def test_dgx_h200_and_b200_nvswitch_boxes():
    h200 = build_preset("dgx-h200", num_nodes=2)
    assert _gbps(h200, "n0/gpu0", "n0/nvswitch") == pytest.approx(18 * 20.6)
    b200 = build_preset("dgx-b200", num_nodes=2)
    assert _gbps(b200, "n1/gpu7", "n1/nvswitch") == pytest.approx(18 * 40.1)  # topo.h SM100_NVLINK_BW
    assert b200.nodes["n0/nvswitch"][NVLS] is True and b200.nodes["n0/gpu0"][COMPUTE_CAPABILITY] == 100
    assert _gbps(b200, "n0/nic0", "leaf-r0-0") == 50.0 and len(rank_nodes(b200)) == 16


def test_gb200_nvl72_rack_is_one_nvlink_domain_of_18_trays():
    g = build_preset("gb200-nvl72", num_nodes=2)
    assert len(rank_nodes(g)) == 144 and g.graph["num_nodes"] == 2
    hosts = {g.nodes[n][HOST] for n in rank_nodes(g)}
    assert hosts == set(range(36))  # every compute tray is a host of 4 GPUs
    for rack in (0, 1):
        switch = f"rack{rack}/nvswitch"
        assert g.nodes[switch][HOST] == -1 and g.nodes[switch][NVLS] is True
        members = [n for n in g[switch] if g.nodes[n][KIND] == "gpu"]
        assert len(members) == 72 and {g.nodes[n][HOST] // 18 for n in members} == {rack}
    assert _gbps(g, "n20/gpu3", "rack1/nvswitch") == pytest.approx(18 * 40.1)
    assert len([n for n, d in g.nodes(data=True) if d[KIND] == "nic"]) == 144  # a 400 Gb/s NIC per GPU
    with pytest.raises(InputError, match=r"gpus_per_node: 30 is not accepted; expected a multiple of 4"):
        build_preset("gb200-nvl72", gpus_per_node=30)


def test_amd_instinct_figures_follow_from_their_clocks_and_compute_units():
    """AMD prints peak figures at the boost clock: CUs x FLOP per CU per clock x GHz. CDNA 3
    (MI300X, MI325X: 2.1 GHz) does 2,048 FP16, 1,024 TF32, 4,096 FP8 and 256 FP32 FLOP per CU
    per clock, CDNA 4 (MI355X: 2.4 GHz) 4,096 FP16 and 8,192 FP8; the MI250X (1.7 GHz) 1,024
    FP16 and 128 FP32 per CU, its GCD half the package's 220 CUs."""
    g = bundled().gpus
    for name in ("mi300x", "mi325x"):
        d = g[name].dense_tflops
        assert (d.fp16, d.tf32, d.fp8, d.fp32) == pytest.approx(
            tuple(304 * f * 2.1e9 / 1e12 for f in (2048, 1024, 4096, 256)), abs=0.1)
    d = g["mi355x"].dense_tflops
    assert (d.fp16, d.fp8, d.fp32) == pytest.approx(tuple(256 * f * 2.4e9 / 1e12 for f in (4096, 8192, 256)), abs=0.1)
    assert d.tf32 is None
    d = g["mi250x"].dense_tflops
    assert g["mi250x"].sm_count == 220 // 2 and (d.fp16, d.fp32) == pytest.approx((220 * 1024 * 1.7e9 / 2e12,
                                                                                   220 * 128 * 1.7e9 / 2e12), abs=0.05)
    # the datasheets' Infinity Fabric figure is bidirectional: 7 links x 128 GB/s = 896 GB/s (MI300X)
    assert g["mi300x"].nvlink.links * g["mi300x"].nvlink.link_gbps * 2 == 896


@pytest.mark.parametrize("system", ["mi300x-platform", "mi325x-platform", "mi355x-platform"])
def test_amd_platforms_are_fully_connected_meshes_of_8(system):
    g = build_preset(system, num_nodes=2)
    gpus_ = [n for n in rank_nodes(g) if n.startswith("n0/")]
    mesh = nx.Graph((u, v, d) for u, v, d in g.edges(data=True) if d[LINK_TYPE] == "nvlink")
    assert len(gpus_) == 8 and not [n for n, d in g.nodes(data=True) if d[KIND] == "nvswitch"]
    for gpu in gpus_:  # one link to each of the seven others
        assert sorted(mesh[gpu]) == sorted(o for o in gpus_ if o != gpu)
        assert all(mesh.edges[gpu, o][NUM_LINKS] == 1 for o in mesh[gpu])
    assert len([n for n in g if n.startswith("n0/nic")]) == 8 and _gbps(g, "n0/nic0", "leaf-r0-0") == 50.0


def test_a_profiles_amd_gpu_name_finds_its_platform():
    from ddpsim.validation.profile_compare import preset_for

    assert preset_for("AMD Instinct MI300X") == ("mi300x-platform", 8)
    assert preset_for("AMD Instinct MI325X") == ("mi325x-platform", 8)
    assert preset_for("AMD Instinct MI355X") == ("mi355x-platform", 8)
    assert preset_for("AMD Instinct MI250X") is None  # a GPU without a node layout: --scenario


def test_pcie_l40s_has_no_nvlink():
    g = build_preset("pcie-l40s", num_nodes=2)
    assert {d[LINK_TYPE] for _, _, d in g.edges(data=True)} == {"pcie", "net"}
    assert _gbps(g, "n0/gpu0", "n0/pcie0") == 24.0   # the L40S is a PCIe Gen4 x16 card
    assert _gbps(g, "n0/nic0", "n0/pcie0") == 48.0   # behind a Gen5 switch with a 400 GbE NIC
    assert g.nodes["n0/gpu0"][COMPUTE_CAPABILITY] == 89
    with pytest.raises(InputError, match=r"^topology pcie-l40s: pcie_gen: 5 is not accepted; expected 4 "):
        build_preset("pcie-l40s", pcie_gen=5)


#: a user's catalogue file: a GPU and a node layout of their own (also the fuzz seed of the catalogue loader)
MY_CATALOGUE = (Path(__file__).resolve().parent / "data" / "my-catalogue.yaml").read_text()


def test_a_users_catalogue_adds_a_gpu_and_a_node_layout(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text(MY_CATALOGUE)
    assert main(["topology", "my-box", "--nodes", "2", "--catalogue", str(path), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["num_devices"] == 8 and summary["device_model"] == "MY-GPU-96GB"
    # 3 peers x 4 links x 20.6 GB/s (NCCL's SM90 NVLink) + the PCIe Gen5 x16 link
    assert summary["device0_link_bandwidth_gbps"] == {"nvlink": pytest.approx(3 * 4 * 20.6), "pcie": 48.0}
    cat = load_catalogue(path)
    g = resolve_topology("my-box", num_nodes=2, catalogue=cat)
    assert _gbps(g, "n0/nic0", "leaf-r0-0") == 25.0 and g.graph["cpu_vendor"] == "amd"
    spec = get_gpu("my-gpu", cat)
    assert low_precision_flops_per_s(spec, "bf16") == 800e12 and gpu_peaks(spec)["hbm_bytes_per_s"] == 4e12
    assert get_gpu("a100", cat) == get_gpu("a100")
    assert main(["topology", "--list", "--catalogue", str(path)]) == 0
    listed = capsys.readouterr().out
    assert "my-gpu     MY-GPU-96GB" in listed and "[my-sheet] My GPU datasheet <https://example.com/my-gpu.pdf>" in listed
    # without the file, the name is unknown
    assert main(["topology", "my-box"]) == 2


def test_a_scenario_names_its_catalogue(tmp_path):
    from ddpsim.pipeline.scenario import load_scenario
    from ddpsim.validation.launch import REPO_ROOT

    (tmp_path / "mine.yaml").write_text(MY_CATALOGUE)
    (tmp_path / "s.yaml").write_text(textwrap.dedent(f"""\
        trace: {REPO_ROOT / "traces" / "mlp.cpu.json"}
        cluster: {{topology: my-box, nodes: 2, catalogue: mine.yaml}}
        world_size: null
        """))
    sc = load_scenario(tmp_path / "s.yaml")
    assert len(rank_nodes(sc.graph())) == 8 and sc.cluster.catalogue == str(tmp_path / "mine.yaml")


def _edit(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize("old,new,line", [
    ("memory_gbps: 4000", "memory_gbps: fast", r"gpus\.my-gpu\.memory_gbps: 'fast' is not accepted; expected a valid number"),
    ("sources: {sm_count: my-sheet, dense", "sources: {dense", r"gpus\.my-gpu\.sources: .* is not accepted; expected a reference id for each of .*\(missing sm_count\)"),
    ("nvlink: my-sheet, pcie_gen: my-sheet}", "nvlink: nope, pcie_gen: my-sheet}",
     r"gpus.my-gpu.sources.nvlink: 'nope' is not a reference; expected one of the keys under references"),
    ("    gpu: my-gpu\n", "    gpu: my-gpu2\n", r"systems.my-box.gpu: 'my-gpu2' is not a GPU; expected one of v100, a100"),
    ("[2, 3, 4]]", "[2, 7, 4]]", r"systems\.my-box: nvlink_edges: .* expected edges of >= 1 link between two different GPUs in \[0, 4\), not 2-7 x 4"),
    ("  my-gpu:\n", "  h100:\n", r"gpus.h100: already in the bundled catalogue; expected a new name"),
    ("version: 1", "version: 2", r"version: 2 is not accepted; expected 2|version: 2 is not accepted; expected 1"),
    ("interconnect: nvlink-mesh", "interconnect: torus", r"systems\.my-box\.interconnect: .torus. is not accepted; expected 'nvswitch', "),
])
def test_bad_catalogue_files_give_one_line_and_exit_2(tmp_path, capsys, old, new, line):
    path = tmp_path / "bad.yaml"
    path.write_text(_edit(MY_CATALOGUE, old, new))
    assert main(["topology", "--list", "--catalogue", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"ddpsim: error: catalogue {path}") or err.startswith("ddpsim: error: catalogue")
    import re

    assert re.search(line, err), err


def test_a_missing_catalogue_file_is_one_line(tmp_path, capsys):
    assert main(["collectives", "--topology", "dgx-a100", "--catalogue", str(tmp_path / "none.yaml")]) == 2
    assert "does not exist or is not a file" in capsys.readouterr().err


def test_list_shows_every_system_and_gpu_with_its_sources(capsys):
    assert main(["topology", "--list"]) == 0
    out = capsys.readouterr().out
    cat = bundled()
    for name in (*cat.gpus, *cat.systems):
        assert f"\n  {name} " in out
    for ref in cat.references.values():
        assert f"{ref.title} <{ref.url}>" in out
    assert main(["topology", "--list", "--format", "json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["systems"]) == {"dgx-a100", "dgx-h100", "pcie", "dgx-v100", "dgx-h200",
                                                                    "dgx-b200", "gb200-nvl72", "pcie-l40s", "mi300x-platform",
                                                                    "mi325x-platform", "mi355x-platform", "hgx-h100-4",
                                                                    "gh200-quad"}
