"""`ddpsim trace --from-profile`: real torch.profiler traces of DDP (HolisticTraceAnalysis's
ResNet-50 runs on 2 x A100 and 1 x V100, tests/data/README.profiles.md) become ddpsim traces.

The oracles are the profiles themselves, read here another way: plain ``json`` (not the
streaming reader), kernels tied to their launches through the ``ac2g`` flow events (not the
``correlation`` args), the backward's GPU work taken from the kernels its autograd ops launched
(not from the phase windows), and the NCCL kernels' own names and grids."""

from __future__ import annotations

import gzip
import json
import statistics
import textwrap
from pathlib import Path

import pytest

from ddpsim.cli.main import main
from ddpsim.plan.profile_check import check_recorded_buckets
from ddpsim.trace.profile import import_profile
from ddpsim.trace.profile import nccl_kernels
from ddpsim.trace.records import load_trace

DATA = Path(__file__).resolve().parent / "data"
A100 = DATA / "resnet50_ddp_2xA100_rank0.json.gz"
V100 = DATA / "resnet50_ddp_1xV100_rank0.json.gz"
#: the five buckets the A100 run's DDP all-reduced each step (its record_param_comms), launch order
A100_BUCKETS = (2_049_000, 7_875_584, 6_563_840, 6_637_568, 2_431_040)
#: torchvision's resnet50: 161 parameter tensors, 25,557,032 elements (torchvision's model docs,
#: ResNet50_Weights.IMAGENET1K_V1.meta["num_params"])
RESNET50_PARAMS, RESNET50_ELEMENTS = 161, 25_557_032


@pytest.fixture(scope="module")
def imports():
    """Each fixture imported with and without --model resnet50 (computed once)."""
    return {(p.name, m): import_profile(p, model=m) for p in (A100, V100) for m in (None, "resnet50")}


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _gpu_phases(path: Path) -> list[dict[str, float]]:
    """Per ProfilerStep, each phase's GPU span (first kernel start to last kernel end, ms), found
    independently: launches from the ``ac2g`` flow events, the backward from the kernels launched
    inside the model's autograd ops (not AccumulateGrad, where DDP's hook runs), the forward from
    the kernels launched between ``DistributedDataParallel.forward`` and the first autograd op, the
    optimizer from those inside ``Optimizer.step``."""
    ev = _events(path)
    flow_start = {e["id"]: (e["ts"], e["tid"]) for e in ev if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    flow_end = {e["id"]: (e["pid"], e["tid"], e["ts"]) for e in ev if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    gpu = {(e["pid"], e["tid"], e["ts"]): e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    launches = []  # (launch ts, launch tid, gpu event)
    for fid, (ts, tid) in flow_start.items():
        g = gpu.get(flow_end.get(fid))
        if g is not None and not g["name"].startswith("nccl"):
            launches.append((ts, tid, g))
    ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    steps = sorted((e for e in ops if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    out = []
    for s in steps:
        inside = [o for o in ops if s["ts"] <= o["ts"] <= s["ts"] + s["dur"]]
        grad_ops = [o for o in inside if o["name"].startswith("autograd::engine::evaluate_function:")
                    and "AccumulateGrad" not in o["name"]]
        first_grad = min(o["ts"] for o in grad_ops)
        fwd = next(o for o in inside if o["name"] == "DistributedDataParallel.forward")
        opt = next(o for o in inside if o["name"].startswith("Optimizer.step"))

        def span(pred) -> float:
            ks = [g for ts, tid, g in launches if pred(ts, tid)]
            return (max(g["ts"] + g["dur"] for g in ks) - min(g["ts"] for g in ks)) / 1e3

        out.append({
            "forward": span(lambda ts, tid: fwd["ts"] <= ts < first_grad),
            "backward": span(lambda ts, tid: any(o["ts"] <= ts <= o["ts"] + o["dur"] and o["tid"] == tid for o in grad_ops)),
            "optimizer": span(lambda ts, tid: opt["ts"] <= ts <= opt["ts"] + opt["dur"]),
        })
    return out


@pytest.mark.parametrize("path", [A100, V100], ids=["2xA100", "1xV100"])
def test_forward_backward_optimizer_equal_the_profiles_gpu_timeline_within_2_percent(imports, path):
    truth = _gpu_phases(path)
    for model in (None, "resnet50"):
        imp = imports[(path.name, model)]
        assert len(imp.trace.iterations) == len(truth)
        for it, want in zip(imp.trace.iterations, truth):
            for phase in ("forward", "backward", "optimizer"):
                got_ms = getattr(it, f"{phase}_s") * 1e3
                assert got_ms == pytest.approx(want[phase], rel=0.02), (path.name, phase, got_ms, want[phase])


@pytest.mark.parametrize("path", [A100, V100], ids=["2xA100", "1xV100"])
def test_with_model_resnet50_the_parameters_are_torchvisions_in_ddps_order(imports, path):
    from ddpsim.trace.models import build_model, ddp_params

    imp = imports[(path.name, "resnet50")]
    trace = imp.trace
    assert imp.mapping.method == "factory" and imp.mapping.confidence == "exact"
    assert trace.num_params == RESNET50_PARAMS and trace.num_param_elements == RESNET50_ELEMENTS
    names = [n for n, _, _ in ddp_params(build_model("resnet50").module)]
    assert [p.name for p in trace.params] == names
    assert names[:3] == ["conv1.weight", "bn1.weight", "bn1.bias"] and names[-2:] == ["fc.weight", "fc.bias"]
    # the gradients become ready from the classifier back, as autograd reaches it first
    assert [trace.params[i].name for i in trace.grad_ready_order[:3]] == ["fc.bias", "fc.weight", "layer4.2.bn3.weight"]
    # every bucket the real run's DDP recorded holds exactly the elements of the parameters ready for it
    sizes = [trace.params[i].numel for i in trace.grad_ready_order]
    pos = 0
    for b in imp.iterations[-1].buckets:
        assert sum(sizes[pos:pos + b.num_grads]) == b.numel
        pos += b.num_grads
    assert pos == RESNET50_PARAMS


def test_the_a100_runs_buckets_equal_ddpsims_plan_at_the_default_cap(imports):
    """The real run (torch's default bucket_cap_mb) all-reduced five buckets per step; ddpsim's
    planner, given the imported trace, plans the same five, with or without --model."""
    for model in (None, "resnet50"):
        imp = imports[(A100.name, model)]
        for it in imp.iterations:
            assert tuple(b.numel for b in it.buckets) == A100_BUCKETS
            assert {b.dtype for b in it.buckets} == {"float32"}
        check = check_recorded_buckets(imp.trace, imp.recorded_bucket_numels())
        assert check.matches and check.planned_numels == A100_BUCKETS, check.message
        assert check.message == "5 buckets match ddpsim's plan at cap=default"


def test_a_bucket_mismatch_is_reported_not_hidden(imports):
    from ddpsim.plan.planner import DDPOptions

    imp = imports[(A100.name, "resnet50")]
    check = check_recorded_buckets(imp.trace, imp.recorded_bucket_numels(), DDPOptions(bucket_cap_mb=10))
    assert not check.matches
    assert check.message.startswith("buckets differ from ddpsim's plan at cap=10: the run had 5, the plan ")
    assert "first difference at bucket" in check.message


def test_collectives_per_bucket_from_the_nccl_kernels(imports):
    imp = imports[(A100.name, None)]
    kernels = [e for e in _events(A100) if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_AllReduce")]
    assert len(kernels) == 15  # 5 buckets x 3 steps
    assert {e["args"]["grid"][0] for e in kernels} == {8}
    assert all("_RING_LL_" in e["name"] and e["args"]["block"][0] == 544 for e in kernels)
    per_bucket = imp.bucket_kernels()
    assert list(per_bucket) == [0, 1, 2, 3, 4]
    for ks, numel in zip(per_bucket.values(), A100_BUCKETS):
        # the name's LL is the kernel's, not the protocol's: 544 threads is ring Simple (512 + a sync warp)
        assert {(k.numel, k.algorithm, k.protocol, k.channels) for k in ks} == {(numel, "ring", "simple", 8)}
        assert [k.iteration for k in ks] == [0, 1, 2]
        want = sorted(e["dur"] * 1e-6 for e in kernels if e["args"]["In msg nelems"] == numel)
        assert sorted(k.duration_s for k in ks) == pytest.approx(want)
        # nccl-tests' bus bandwidth of an all-reduce on 2 ranks: bytes / time x 2(2-1)/2
        assert nccl_kernels.bus_bytes_per_s(numel * 4, want[0], 2) == pytest.approx(numel * 4 / want[0])
        assert nccl_kernels.bus_bytes_per_s(numel * 4, want[0], 1) is None
    broadcasts = [c for c in imp.collectives if c.collective == "broadcast"]
    assert len(broadcasts) == 6 and all(c.bucket_index is None for c in broadcasts)
    # world size 1: DDP records its all-reduces, NCCL launches no kernel
    v100 = imports[(V100.name, None)]
    assert v100.environment.world_size == 1 and v100.bucket_kernels() == {}


def test_environment_and_host_costs(imports):
    env = imports[(A100.name, None)].environment
    assert (env.gpu_name, env.num_sms, env.world_size, env.rank, env.nccl_version) == (
        "NVIDIA A100-PG509-200", 108, 2, 0, "2.17.1")
    assert env.batch_size is None  # recorded without record_shapes
    assert imports[(V100.name, None)].environment.gpu_name == "Tesla V100-SXM2-32GB"
    a100 = imports[(A100.name, None)].iterations
    # host-bound: the CPU step is longer than the GPU's busy time by several times
    assert all(it.step_s > 3 * (it.forward.gpu_busy_s + it.backward.gpu_busy_s + it.optimizer.gpu_busy_s) for it in a100)
    for it in a100:
        h = it.host
        assert h.num_accumulate_grad == RESNET50_PARAMS and h.num_bucket_launches == 5
        assert 0 < h.accumulate_grad_s < it.step_s and h.num_kernel_launches > 500


def test_without_model_sizes_come_from_the_buckets(imports):
    exact = imports[(A100.name, "resnet50")].trace
    approx = imports[(A100.name, None)].trace
    mapping = imports[(A100.name, None)].mapping
    assert (mapping.method, mapping.confidence) == ("bucket-sizes", "bucket-totals")
    assert approx.num_param_elements == RESNET50_ELEMENTS
    got = [approx.params[i].numel for i in approx.grad_ready_order]
    want = [exact.params[i].numel for i in exact.grad_ready_order]
    errors = [abs(g - w) / w for g, w in zip(got, want)]
    # large gradients within 1 % (a block of the copy kernel is 512 elements); small ones are coarse
    assert all(e < 0.01 for e, w in zip(errors, want) if w >= 100_000)
    assert statistics.median(errors) < 0.02
    # the ready times are the same, whatever names the parameters get
    assert [it.grad_ready_s[i] for it in approx.iterations for i in approx.grad_ready_order] == \
        [it.grad_ready_s[i] for it in exact.iterations for i in exact.grad_ready_order]


def test_grad_ready_times_rise_within_the_backward(imports):
    for path in (A100, V100):
        trace = imports[(path.name, "resnet50")].trace
        for it in trace.iterations:
            ready = [it.grad_ready_s[i] for i in trace.grad_ready_order]
            assert ready == sorted(ready) and 0 <= ready[0] and ready[-1] <= it.backward_s


def _a100_with_input_dims(imports) -> tuple[dict, list]:
    """The A100 fixture as record_shapes=True writes it: each AccumulateGrad op with its
    gradient's dims (``Input Dims: [[out, in]]``); and those shapes in gradient-ready order."""
    exact = imports[(A100.name, "resnet50")].trace
    shapes = [list(exact.params[i].shape) for i in exact.grad_ready_order]
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    steps = sorted((e for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    acc = sorted((e for e in doc["traceEvents"] if e.get("name") == "torch::autograd::AccumulateGrad"), key=lambda e: e["ts"])
    for s in steps:
        inside = [e for e in acc if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
        for e, shape in zip(inside, shapes, strict=True):
            e["args"]["Input Dims"] = [shape]
    return doc, shapes


def test_record_shapes_dims_size_the_parameters_exactly(tmp_path, imports):
    """A profile recorded with record_shapes=True gives each AccumulateGrad op its gradient's dims
    (``Input Dims: [[out, in]]``, as torch writes them): the fixture with those dims added."""
    doc, shapes = _a100_with_input_dims(imports)
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(doc))
    imp = import_profile(path)
    assert imp.mapping.method == "shapes" and imp.mapping.confidence == "shapes"
    got = [imp.trace.params[i].shape for i in imp.trace.grad_ready_order]
    assert [list(s) for s in got] == shapes


def test_a_check_that_did_not_run_does_not_say_it_passed(tmp_path, imports):
    """Gradients sized by record_shapes, with no bucket size recorded (record_param_comms without
    'In msg nelems'): nothing was checked against bucket totals, and the mapping says so."""
    doc, _ = _a100_with_input_dims(imports)
    for e in doc["traceEvents"]:
        if e.get("name") == "record_param_comms" or e.get("cat") == "kernel":
            e.get("args", {}).pop("In msg nelems", None)
    path = tmp_path / "nobuckets.json"
    path.write_text(json.dumps(doc))
    imp = import_profile(path)
    assert imp.mapping.method == "shapes" and not imp.recorded_bucket_numels()
    assert "match" not in imp.mapping.detail and "not checked" in imp.mapping.detail


def test_collectives_other_than_the_buckets_are_noted(tmp_path):
    """A run that also launches other NCCL collectives (model-parallel all_to_all, sharded
    all_gather) is still imported as DDP, with a note that ddpsim does not model them: the fixture
    with its buffer broadcasts renamed to all-gathers (kernels and their record_param_comms)."""
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if e.get("name", "").startswith("ncclKernel_Broadcast_"):
            e["name"] = e["name"].replace("Broadcast", "AllGather")
            (e.get("args") or {}).pop("Collective name", None)
        if e.get("name") == "record_param_comms" and e["args"].get("Collective name") == "broadcast":
            e["args"]["Collective name"] = "allgather"
    path = tmp_path / "allgather.json"
    path.write_text(json.dumps(doc))
    notes = [n for n in import_profile(path).notes if n.startswith("besides DDP's bucket all-reduces")]
    assert len(notes) == 1 and " allgather NCCL kernels" in notes[0]
    assert not [n for n in import_profile(A100).notes if n.startswith("besides")]


def test_the_cli_writes_a_trace_and_says_what_the_run_did(tmp_path, capsys):
    out = tmp_path / "a100.json"
    assert main(["trace", "--from-profile", str(A100), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "5 buckets match ddpsim's plan at cap=default" in text
    assert "host-bound: the CPU paces the GPU" in text
    assert "bucket 0: all-reduce 2,049,000 x float32, ring/simple, 8 channels" in text
    # per bucket its kernel in each step, the shortest (an upper bound on the transfer) and its bus bandwidth
    ks = import_profile(A100).bucket_kernels()[0]
    fastest = min(k.duration_s for k in ks)
    assert (f"kernel {', '.join(f'{k.duration_s * 1e3:.2f}' for k in ks)} ms; transfer (min over steps) "
            f"{fastest * 1e3:.2f} ms, bus bandwidth {2_049_000 * 4 / fastest / 1e9:.1f} GB/s") in text
    trace = load_trace(out)
    assert trace.environment["recorded_bucket_numels"] == list(A100_BUCKETS)
    assert trace.environment["param_mapping"]["method"] == "bucket-sizes"
    again = tmp_path / "again.json"
    assert main(["trace", "--from-profile", str(A100), "--out", str(again)]) == 0
    capsys.readouterr()
    assert json.loads(again.read_text())["iterations"] == json.loads(out.read_text())["iterations"]
    assert again.read_text() == out.read_text().replace(str(out), str(again))


def test_nccl_kernel_names_of_both_naming_schemes():
    old = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
    new = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    # up to 2.18 the name gives the algorithm; every protocol runs in the LL kernel
    assert nccl_kernels.candidates(old, None, "2.17.1") == (("ring", "ll"), ("ring", "ll128"), ("ring", "simple"))
    assert nccl_kernels.candidates("ncclKernel_AllReduce_NVLS_LL_Sum_float", None, "2.18.3") == (("nvls", "simple"),)
    # from 2.19 every algorithm but tree runs in the RING_LL kernel (generate.py's best_kernel)
    assert {a for a, _ in nccl_kernels.candidates(new, None, "2.28.9")} == {"ring", "nvls", "nvls_tree"}
    assert nccl_kernels.ran("ncclDevKernel_AllReduce_Sum_bf16_TREE_LL(x)", None, "2.28.9") == ("tree", None, "tree/?")
    assert nccl_kernels.collective("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL") == "reduce_scatter"
    assert nccl_kernels.ran("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", None, None) == (None, None, "?")
    assert nccl_kernels.candidates("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", (640, 1, 1), None) == ()


@pytest.mark.parametrize("block, version, ran", [
    ((544, 1, 1), "2.17.1", ("ring", "simple")),   # 512 + a sync warp
    ((288, 1, 1), "2.28.9", ("ring", "simple")),   # 256 (a PCIe-class ring, or halved) + a sync warp
    ((160, 1, 1), None, ("ring", "simple")),       # 128 + a sync warp
    ((512, 1, 1), "2.28.9", ("ring", "ll")),
    ((256, 1, 1), None, ("ring", "ll")),
    ((640, 1, 1), "2.17.1", ("ring", "ll128")),
    ((320, 1, 1), "2.30.7", ("ring", "ll128")),
    ((96, 1, 1), "2.17.1", ("ring", None)),        # LL 64 or Simple 64 + 32, both floored at 3 warps
    ((1024, 1, 1), "2.28.9", ("ring", None)),      # no default thread count: NCCL_NTHREADS was set
])
def test_block_size_says_the_protocol_of_an_old_ring_kernel(block, version, ran):
    assert nccl_kernels.ran("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", block, version)[:2] == ran


def test_the_block_size_is_read_on_nvidia_warps_only():
    # RCCL (ROCm, 64-thread wavefronts) sizes its blocks otherwise: such a profile is read by name only
    nvidia, rocm = [{"id": 0, "warpSize": 32}], [{"id": 0, "name": "AMD Radeon Graphics", "warpSize": 64}]
    assert nccl_kernels.block_of((544, 1, 1), nvidia) == (544, 1, 1)
    assert nccl_kernels.block_of((544, 1, 1), []) == (544, 1, 1)
    assert nccl_kernels.block_of((320, 1, 1), rocm) is None
    assert nccl_kernels.block_of((544, 1, 1), [{"warpSize": [32]}]) is None  # a malformed header: not NVIDIA's 32
    old = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
    assert nccl_kernels.ran(old, nccl_kernels.block_of((320, 1, 1), rocm), "2.18.3") == ("ring", None, "ring/?")


def test_block_size_and_version_for_kernels_named_after_2_19():
    ring = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    tree = "ncclDevKernel_AllReduce_Sum_bf16_TREE_LL(ncclDevKernelArgsStorage<4096ul>)"
    assert nccl_kernels.ran(ring, (544, 1, 1), "2.28.9") == ("ring", "simple", "ring/simple")
    # 640 threads: ring LL128, or NVLS / NVLS-Tree (Simple, NCCL_MAX_NTHREADS): left open
    assert nccl_kernels.candidates(ring, (640, 1, 1), "2.28.9") == (("ring", "ll128"), ("nvls", "simple"),
                                                                     ("nvls_tree", "simple"))
    assert nccl_kernels.ran(ring, (640, 1, 1), "2.28.9") == (None, None, "ring/ll128 or nvls/simple or nvls_tree/simple")
    # tree Simple adds four warps before 2.23; from 2.23 every tree launch takes 640 threads
    assert nccl_kernels.ran(tree, (384, 1, 1), "2.21.5")[:2] == ("tree", "simple")
    assert nccl_kernels.ran(tree, (640, 1, 1), "2.23.4")[:2] == ("tree", None)
    assert nccl_kernels.ran(tree, (384, 1, 1), "2.23.4")[:2] == ("tree", None)  # not a default: rules nothing out
    # 2.22 raised the floor to 4 warps: 96 is no longer launched
    assert nccl_kernels.block_sizes("ring", "ll", (2, 21)) == {512, 256, 128, 96}
    assert nccl_kernels.block_sizes("ring", "ll", (2, 22)) == {512, 256, 128}
    assert nccl_kernels.block_sizes("ring", "simple", (2, 28)) == {544, 288, 160, 128}


# ---- bad input: one line, exit 2 -----------------------------------------------------------------

def fails(capsys, argv) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", (rc, out, err)
    assert err.startswith("ddpsim: error: ") and err.count("\n") == 1, err
    return err[len("ddpsim: error: "):].rstrip("\n")


def _derived(tmp_path: Path, name: str, keep) -> Path:
    """The A100 fixture with only the events ``keep`` accepts, as plain JSON."""
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if keep(e)]
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _import_fails(capsys, tmp_path, path, *extra) -> str:
    return fails(capsys, ["trace", "--from-profile", str(path), *extra, "--out", str(tmp_path / "t.json")])


def test_no_profiler_step(capsys, tmp_path):
    path = _derived(tmp_path, "nostep.json", lambda e: not e.get("name", "").startswith("ProfilerStep#"))
    assert _import_fails(capsys, tmp_path, path) == (
        f"profile {path}: no ProfilerStep#N span; expected a profile recorded with torch.profiler.profile(schedule=...) "
        "and prof.step() once per iteration")


def test_cpu_only_profile(capsys, tmp_path):
    path = _derived(tmp_path, "cpu.json", lambda e: e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert "no GPU kernels (a CPU-only profile)" in _import_fails(capsys, tmp_path, path)


def test_no_backward(capsys, tmp_path):
    path = _derived(tmp_path, "nobwd.json", lambda e: not e.get("name", "").startswith(
        ("autograd::engine::evaluate_function:", "torch::autograd::AccumulateGrad")))
    assert "ProfilerStep#4 has no backward" in _import_fails(capsys, tmp_path, path)


def test_truncated_profile(capsys, tmp_path):
    raw = gzip.decompress(A100.read_bytes())
    for name, data in (("cut.json", raw[: len(raw) // 2]), ("cut.json.gz", gzip.compress(raw[: len(raw) // 3]))):
        path = tmp_path / name
        path.write_bytes(data)
        assert _import_fails(capsys, tmp_path, path) == (
            f"profile {path}: the JSON ends early (truncated); expected a complete torch.profiler trace")
    gz_cut = tmp_path / "cutgz.json.gz"
    gz_cut.write_bytes(A100.read_bytes()[:200_000])  # the gzip stream itself cut
    assert "not a readable gzip stream" in _import_fails(capsys, tmp_path, gz_cut)


def test_not_json_and_gzip_garbage(capsys, tmp_path):
    text = tmp_path / "notes.json"
    text.write_text("step time was fine\n")
    assert _import_fails(capsys, tmp_path, text).startswith(f"profile {text}: not JSON (")
    garbage = tmp_path / "garbage.json.gz"
    garbage.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    assert _import_fails(capsys, tmp_path, garbage).startswith(f"profile {garbage}: not a readable gzip stream (")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schemaVersion": 1, "events": []}))
    assert _import_fails(capsys, tmp_path, other) == (
        f"profile {other}: no traceEvents list; expected the Chrome/Kineto JSON torch.profiler writes")
    assert _import_fails(capsys, tmp_path, tmp_path / "absent.json").endswith(
        "absent.json: no such file; expected a torch.profiler trace (.json or .json.gz)")


def test_a_factory_whose_parameters_do_not_match(capsys, tmp_path, monkeypatch):
    assert _import_fails(capsys, tmp_path, A100, "--model", "mlp").startswith(
        "--model: 'mlp' has ")
    # 161 parameters, as many as the profile's gradients, but not their sizes
    (tmp_path / "wrong_model.py").write_text(textwrap.dedent("""
        import torch

        class Wrong(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(10)) for _ in range(161)])

            def forward(self, x):
                return sum(p.sum() for p in self.ps) * x.sum()

        def factory():
            return Wrong(), torch.ones(2, 3)
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    line = _import_fails(capsys, tmp_path, A100, "--model", "wrong_model:factory")
    assert line == ("--model: 'wrong_model:factory' does not match the profile's buckets: bucket 0 holds 2,049,000 elements "
                    "in the profile, 20 in the model's 2 parameters that were ready for it; expected the model the profile ran")


def test_capture_flags_are_refused_beside_from_profile(capsys, tmp_path):
    assert _import_fails(capsys, tmp_path, A100, "--batch-size", "32") == (
        "--batch-size: 32 is not accepted with --from-profile; expected only --model, --seed and --out (the profile holds the rest)")
    assert _import_fails(capsys, tmp_path, A100, "--set", "seq_len=64").startswith(
        "--set seq_len: 64 is not accepted with --from-profile; expected only --model")



def test_importing_without_a_model_needs_no_pytorch(tmp_path):
    """The streaming reader and the bucket-size mapping use no torch: a user's laptop without it
    imports a GPU profile."""
    import subprocess
    import sys

    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from ddpsim.cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    out = tmp_path / "v100.json"
    r = subprocess.run([sys.executable, "-c", code, "trace", "--from-profile", str(V100), "--out", str(out)],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert r.returncode == 0, r.stderr
    assert load_trace(out).num_params == RESNET50_PARAMS


def test_a_header_written_after_the_events_is_read(tmp_path):
    from ddpsim.trace.profile.kineto import read_profile

    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    path = tmp_path / "after.json"
    path.write_text(json.dumps({"traceEvents": events, **doc}))
    prof = read_profile(path)
    assert prof.distributed_info["world_size"] == 2 and prof.device_properties[0]["name"] == "NVIDIA A100-PG509-200"


def test_corrupt_events_give_an_input_error_or_a_trace(tmp_path):
    """Events with wrong types in their fields (strings for times, lists for names or thread ids,
    unknown dtypes, broken headers) are skipped or refused in one line by the import and the
    compare's timeline: never a traceback."""
    import copy
    import random

    from ddpsim.errors import InputError
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    bad_values = ["abc", None, -1, 1e308, [], {}, True, 2**70, "Foo"]
    rng = random.Random(0)
    for trial in range(3):
        events = list(doc["traceEvents"])
        for _ in range(1000):
            k = rng.randrange(len(events))
            e = copy.deepcopy(events[k])
            key = rng.choice(["ts", "dur", "name", "cat", "tid", "args", "ph", "arg"])
            if key == "arg" and isinstance(e.get("args"), dict) and e["args"]:
                e["args"][rng.choice(sorted(e["args"]))] = rng.choice(bad_values)
            else:
                e[key] = rng.choice(bad_values)
            events[k] = e
        header = {"distributedInfo": rng.choice(bad_values), "deviceProperties": [1, "x"]} if trial else {}
        path = tmp_path / f"corrupt{trial}.json"
        path.write_text(json.dumps({**doc, **header, "traceEvents": events}))
        try:
            json.dumps(import_profile(path).trace.to_dict())
        except InputError as exc:
            assert "\n" not in str(exc)


H100 = DATA / "gpt2-124m_ddp_1xH100_rank0.json.gz"
#: the 13 buckets the H100 run's DDP recorded each step (record_param_comms), launch order
H100_BUCKETS = (2_360_832, *(7_087_872,) * 11, 44_112_384)


def test_align_order_follows_the_recorded_shapes_hand_worked():
    from ddpsim.trace.profile.mapping import align_order

    shapes = [(4,), (4, 8), (4,), (2, 4)]  # parameters 0..3 in DDP's order
    meta = [3, 2, 1, 0]                     # a backward's ready order: shapes (2,4) (4,) (4,8) (4,)
    # the run accumulated the (4, 8) weight before the (4,) bias of the same op
    assert align_order(meta, shapes, [(2, 4), (4, 8), (4,), (4,)]) == [3, 1, 2, 0]
    assert align_order(meta, shapes, [(2, 4), (4,), (4, 8), (4,)]) == meta          # agreeing: unchanged
    assert align_order(meta, shapes, [(2, 4), (4,), (9,), (4,)]) == meta             # unmatched: the check reports it
    assert align_order(meta, shapes, [(2, 4), None, (4, 8), (4,)]) == meta           # shapes missing: unchanged


def test_an_h100_profile_whose_ready_order_differs_from_the_meta_backward():
    """On the GPU, autograd accumulated many Linear weights before their biases, unlike a meta
    backward: the recorded shapes set the order, and every bucket the run recorded then holds
    exactly its parameters; ddpsim's plan at the default cap equals the run's 13 buckets."""
    imp = import_profile(H100, model="gpt2-124m")
    trace = imp.trace
    assert imp.mapping.method == "factory" and imp.mapping.confidence == "exact"
    assert any("recorded shapes set their order" in n for n in imp.notes)
    for it in imp.iterations:
        assert tuple(b.numel for b in it.buckets) == H100_BUCKETS
    check = check_recorded_buckets(trace, imp.recorded_bucket_numels())
    assert check.matches and check.planned_numels == H100_BUCKETS, check.message
    names = [trace.params[i].name for i in trace.grad_ready_order]
    assert set(names) == {p.name for p in trace.params} and len(names) == 148


def test_batch_size_skips_inputs_shaped_like_a_parameter():
    """GPT-2's first forward op is the token embedding, aten::embedding(weight [50257, 768],
    tokens [16, 1024]): the batch is the tokens' first dimension (the run's --batch-size 16,
    tests/data/README.profiles.md), not the vocabulary."""
    env = import_profile(H100).environment
    assert env.batch_size == 16  # input 1 of aten::embedding (input 0 is its weight)


@pytest.mark.parametrize("name", ["resnet50_ddp_1xH100_rank0.json.gz", "resnet50_ddp_1xH200_rank0.json.gz"])
def test_resnet50_bf16_profiles_buckets_equal_ddpsims_plan(name):
    """ResNet-50 under bf16 autocast on an H100 and an H200 (torch 2.11): the fc layer's 1,000-element
    bias moves from the first bucket to the second against the float32 A100 run (autocast makes
    the weight's gradient ready first), and ddpsim's plan at the default cap equals the five."""
    bf16_buckets = (2_048_000, 7_876_584, *A100_BUCKETS[2:])
    imp = import_profile(DATA / name, model="resnet50")
    assert imp.mapping.confidence == "exact"
    assert tuple(b.numel for b in imp.iterations[-1].buckets) == bf16_buckets
    check = check_recorded_buckets(imp.trace, imp.recorded_bucket_numels())
    assert check.matches and check.planned_numels == bf16_buckets, check.message
