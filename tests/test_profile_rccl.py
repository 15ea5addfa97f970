"""AMD GPUs under RCCL: a profile whose collective kernels are all ``ncclDevKernel_Generic_N``.

The fixture is the committed NCCL ResNet-50 profile (2 x A100) rewritten as ROCm's torch writes
it (tests/synthetic_profiles.py): RCCL's kernel name, no copy of ``record_param_comms``' args on
the kernel, HIP launch calls, an MI300X. The oracle is the NCCL profile itself: every collective
ran at the same times with the same sizes, so the import and the comparison must find them all,
each as the NCCL original; only what the name said (algorithm, protocol) is unknown."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from synthetic_profiles import NCCL_A100, load, rccl_doc, rccl_from_nccl, save
from ddpsim.cli.main import main
from ddpsim.trace.profile import import_profile
from ddpsim.trace.profile.kernel_kinds import kernel_kind
from ddpsim.trace.profile.kineto import read_profile
from ddpsim.trace.profile.nccl_kernels import candidates, collective_of

A100_BUCKETS = [2_049_000, 7_875_584, 6_563_840, 6_637_568, 2_431_040]


@pytest.fixture(scope="module")
def rccl(tmp_path_factory) -> Path:
    return rccl_from_nccl(tmp_path_factory.mktemp("rccl") / "rccl_mi300x_rank0.json.gz")


@pytest.fixture(scope="module")
def nccl_import():
    return import_profile(NCCL_A100)


def test_rccl_kernels_are_communication_and_name_no_collective():
    for name in ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_Generic"):
        assert kernel_kind(name) == "comm"
        # the generic kernel runs any algorithm and protocol: the name rules none out
        assert {a for a, _ in candidates(name, None, None)} == {"ring", "tree", "nvls", "nvls_tree"}


def test_the_collective_comes_from_the_launchs_record_param_comms(rccl):
    """Every RCCL kernel takes its launch's Collective name and size: the allreduces and the
    broadcasts of the NCCL original, in the same order."""
    nccl, amd = read_profile(NCCL_A100), read_profile(rccl)
    want = [(g.ts, g.args["Collective name"], g.args["In msg nelems"]) for g in nccl.gpu if g.is_nccl]
    got = [(g.ts, collective_of(g), g.args.get("In msg nelems")) for g in amd.gpu if g.is_nccl]
    assert got == want and {c for _, c, _ in got} == {"allreduce", "broadcast"}


def test_without_external_ids_the_launch_call_ties_the_kernel_to_its_op(tmp_path):
    """A kernel without an External id is tied through its launch call to the innermost
    record_param_comms on the calling thread."""
    doc = rccl_doc(load(NCCL_A100))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
            e["args"].pop("External id")
    prof = read_profile(save(doc, tmp_path / "noext.json.gz"))
    comm = [g for g in prof.gpu if g.is_nccl]
    assert all(g.ext_id is None for g in comm)
    assert [collective_of(g) for g in comm].count("allreduce") == 15  # 5 buckets x 3 steps


def test_an_rccl_profile_imports_as_its_nccl_original(rccl, nccl_import):
    imp = import_profile(rccl)
    assert imp.environment.gpu_name == "AMD Instinct MI300X"
    # the steps are the NCCL original's but for the kernels' names (and what those say they ran)
    assert [replace(it, collectives=()) for it in imp.iterations] == [replace(it, collectives=()) for it in nccl_import.iterations]
    assert list(imp.recorded_bucket_numels()) == A100_BUCKETS
    for a, b in zip(imp.collectives, nccl_import.collectives, strict=True):
        assert (a.collective, a.bucket_index, a.numel, a.start_s, a.duration_s, a.channels) == \
               (b.collective, b.bucket_index, b.numel, b.start_s, b.duration_s, b.channels)
        assert a.algorithm is None and a.ran == "?"  # RCCL's name says no algorithm


def test_compare_on_an_mi300x_node_finds_the_buckets_times_and_plot(rccl, tmp_path, capsys):
    assert main(["compare", str(rccl), "--out-dir", str(tmp_path), "--name", "rccl"]) == 0
    out = capsys.readouterr().out
    assert "5 buckets; plan matches the run's" in out
    data = json.loads((tmp_path / "compare-rccl" / "compare.json").read_text())
    assert data["topology"] == "mi300x-platform" and data["gpu"] == "AMD Instinct MI300X"
    assert [b["numel_recorded"] for b in data["buckets"]] == A100_BUCKETS
    assert (tmp_path / "compare-rccl" / "compare.png").stat().st_size > 0
    # the measured all-reduces are the NCCL original's, kernel for kernel
    nccl = [k for st in import_profile(NCCL_A100).iterations for k in st.allreduces]
    amd = [k for st in import_profile(rccl).iterations for k in st.allreduces]
    assert [(k.start_s, k.duration_s, k.numel) for k in amd] == [(k.start_s, k.duration_s, k.numel) for k in nccl]
