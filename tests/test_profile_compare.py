"""ddpsim compare: a profile's two timelines, HTA's overlap, host costs and the comparison.

Oracles: hand-made Kineto traces whose every figure is worked out by hand below; HTA's overlap
recomputed here independently the way HolisticTraceAnalysis does it (a cumulative status of
+1/-1 per communication and +2/-2 per computation interval, the time at status 3);
HolisticTraceAnalysis's public ResNet-50 profile (2 x A100, tests/data) read with gzip + json
in the test.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from synthetic_profiles import event as _x, hand_profile, kernel as _kernel, late_rank_docs, launch as _launch

from ddpsim.errors import InputError
from ddpsim.trace.records import load_trace
from ddpsim.validation.profile_compare import attribution, compare, preset_for
from ddpsim.validation.profile_findings import findings, transfer_line
from ddpsim.validation.profile_measure import (TERMS, boundaries, effective_ready_s, effective_trace, host_costs_from_steps,
                                               hta_overlap_ratio, measured_summary, step_figures)
from ddpsim.trace.intervals import merge_intervals
from ddpsim.trace.profile import import_profile
from ddpsim.trace.profile.kernel_kinds import kernel_kind

ROOT = Path(__file__).resolve().parents[1]
A100 = ROOT / "tests/data/resnet50_ddp_2xA100_rank0.json.gz"
#: the run's five bucket all-reduces (elements), as the issue lists them from the profile
A100_BUCKETS = [2_049_000, 7_875_584, 6_563_840, 6_637_568, 2_431_040]


# ---- HTA's overlap ---------------------------------------------------------------------------

def hta_cumsum_overlap(intervals):
    """HolisticTraceAnalysis's algorithm (communication_analysis.py), written out: merge each
    class, +1/-1 at a communication interval's ends, +2/-2 at a computation's, sort by time,
    add up the time the running status is 3, divide by the merged communication time."""
    comm = merge_intervals([(a, b) for a, b, k in intervals if k == "comm"])
    comp = merge_intervals([(a, b) for a, b, k in intervals if k == "comp"])
    events = sorted([(a, 1) for a, _ in comm] + [(b, -1) for _, b in comm] + [(a, 2) for a, _ in comp] + [(b, -2) for _, b in comp])
    running, total = 0, 0.0
    for (t, d), nxt in zip(events, events[1:] + [(events[-1][0], 0)]):
        running += d
        if running == 3:
            total += nxt[0] - t
    return total / sum(b - a for a, b in comm)


def test_hta_overlap_by_hand():
    # computation [0,10] and [5,12] merge to [0,12], then [20,30]; communication [8,15], [25,40]: 22 us in all,
    # 4 us under [0,12] and 5 under [20,30]; memory copies count as neither
    ivs = [(0, 10, "comp"), (5, 12, "comp"), (20, 30, "comp"), (8, 15, "comm"), (25, 40, "comm"), (0, 100, "memory")]
    assert hta_overlap_ratio(ivs) == pytest.approx(9 / 22)
    assert hta_cumsum_overlap(ivs) == pytest.approx(9 / 22)
    assert hta_overlap_ratio([(0, 1, "comp")]) is None


def test_kernel_kinds_and_nccl_names_as_hta_and_nccl_name_them():
    assert kernel_kind("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)") == "comm"
    assert kernel_kind("Memcpy DtoD (Device -> Device)") == "memory"
    assert kernel_kind("Memset (Device)") == "memory"
    assert kernel_kind("void cudnn::bn_bw_1C11_kernel_new<float>") == "comp"
    # HTA v0.6.0's patterns: RCCL's generic kernel is communication; a name holding Sync is neither
    assert kernel_kind("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)") == "comm"
    assert kernel_kind("void cub::DeviceSyncKernel()") == "other" and kernel_kind("dma_copy") == "memory"


def test_the_chrome_traces_ddpsim_writes_use_the_same_classifier():
    # ddpsim.report.perfetto.comm_comp_overlap classifies its kernels with kernel_kind itself
    for name, kind in (("ncclDevKernel_AllReduce_Sum (bucket 3)", "comm"), ("backward", "comp"),
                       ("Memcpy DtoD", "memory"), ("void cub::DeviceSyncKernel()", "other")):
        assert kernel_kind(name) == kind


@pytest.mark.parametrize("gpu, preset", [
    ("NVIDIA A100-PG509-200", ("dgx-a100", 8)), ("NVIDIA A100-SXM4-40GB", ("dgx-a100", 8)),
    ("NVIDIA A100 80GB PCIe", ("pcie", 8)), ("NVIDIA H100 80GB HBM3", ("dgx-h100", 8)),
    ("Tesla V100-SXM2-32GB", ("dgx-v100", 8)), ("NVIDIA H200", ("dgx-h200", 8)), ("NVIDIA B200", ("dgx-b200", 8)),
    ("NVIDIA GB200", ("gb200-nvl72", 72)), ("NVIDIA L40S", ("pcie-l40s", 8)), ("NVIDIA GH200 120GB", ("gh200-quad", 4)),
    ("NVIDIA H100 PCIe", None), ("NVIDIA GeForce RTX 4090", None), (None, None),
])
def test_a_profiles_gpu_names_its_catalogue_system(gpu, preset):
    # the GPU family (the catalogue model's first part) and PCIe or not, as torch names the device
    assert preset_for(gpu) == preset


# ---- a hand-made profile ------------------------------------------------------------------------

def _steps(tmp_path, doc, name="p.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return import_profile(path).iterations


def test_hand_profile_timelines(tmp_path):
    (st,) = _steps(tmp_path, hand_profile())
    assert st.step == 7 and st.step_s == pytest.approx(1000e-6)
    assert st.forward.cpu_start_s == pytest.approx(20e-6) and st.module_start_s == pytest.approx(100e-6)
    assert (st.backward.cpu_start_s, st.backward.cpu_end_s) == pytest.approx((400e-6, 700e-6))
    assert st.zero_grad_s == pytest.approx(10e-6)
    # hooks: op end, evaluate_function span, the device done with what was launched before (conv_fwd, then conv_bwd)
    h1, h2 = st.hooks
    assert (h1.op_end_s, h1.end_s - h1.start_s - h1.op_s, h1.launches, h1.gpu_ready_s) == pytest.approx((415e-6, 50e-6, 0, 230e-6))
    assert (h2.op_end_s, h2.launches, h2.gpu_ready_s) == pytest.approx((515e-6, 1, 630e-6))
    (launch,) = st.buckets
    assert (launch.op_start_s, launch.op_s, launch.enqueue_s) == pytest.approx((550e-6, 100e-6, 60e-6))
    (ar,) = st.allreduces
    assert (ar.start_s, ar.duration_s, ar.numel) == pytest.approx((640e-6, 100e-6, 10))
    assert st.host.num_kernel_launches == 4 and st.host.kernel_launch_s == pytest.approx(20e-6)


def test_hand_profile_figures_add_up_to_the_step(tmp_path):
    (st,) = _steps(tmp_path, hand_profile())
    f = step_figures(st)
    # host-bound: every boundary is the CPU's; backward 400..700 (the conv_bwd kernel ends at 630)
    assert f["pre_forward_s"] == pytest.approx(80e-6) and f["forward_s"] == pytest.approx(300e-6)
    assert f["backward_s"] == pytest.approx(300e-6)
    # the all-reduce (640..740 us) ends 40 us after the backward (700): the exposed tail; the optimizer
    # (CPU 800..900, its kernel 820..850) is what remains of 700..900
    assert f["exposed_comm_s"] == pytest.approx(40e-6)
    assert f["optimizer_s"] == pytest.approx(160e-6)
    assert f["other_s"] == pytest.approx(1000e-6 - 80e-6 - 300e-6 - 300e-6 - 40e-6 - 160e-6 - 10e-6)
    assert sum(f[k] for k in TERMS) == pytest.approx(f["step_s"])
    # HTA: no computation kernel runs during the all-reduce (conv_bwd ended at 630, sgd starts at 820)
    assert f["overlap_ratio"] == pytest.approx(0.0)
    (b,) = f["buckets"]
    assert (b["launch_s"], b["start_s"], b["end_s"]) == pytest.approx((530e-6, 620e-6, 720e-6))


def test_a_gpu_bound_step_is_paced_by_the_device(tmp_path):
    (st,) = _steps(tmp_path, hand_profile(host_bound=False))
    b = boundaries(st)
    # conv_bwd (launched at 420) now runs 430..900: the backward ends when the device does, and the
    # all-reduce (640..740) ends inside it: no exposed tail, and 100 % of it under computation
    assert b.backward_end_s == pytest.approx(900e-6)
    f = step_figures(st)
    assert f["exposed_comm_s"] == 0.0 and f["overlap_ratio"] == pytest.approx(1.0)
    # the second gradient is ready when the CPU has it AND the device finished conv_bwd
    assert effective_ready_s(st) == pytest.approx([(415 - 400) * 1e-6, (900 - 400) * 1e-6])


def test_exposed_communication_hidden_in_ddps_copy_back_is_found(tmp_path):
    """DDP's finalize (copy_bucket_to_grad, CPU 700..720) launches a copy-back kernel that waits
    for the all-reduce (640..740) and runs 745..755. The device finishes DDP's backward at 755,
    after the all-reduce: the model's backward still ends at 700 (its last autograd op; conv_bwd
    ended at 630), the CPU's copy-back takes 700..720, the all-reduce is exposed 720..740, the
    copy kernel (and its wait for its stream) 740..755, the optimizer 755..900."""
    doc = hand_profile()
    doc["traceEvents"] += [_x("torch.distributed.ddp.reducer::copy_bucket_to_grad", 700, 20, 2), _launch(710, 5, 2),
                           _kernel("void at::native::copy_kernel", 745, 10, 5)]
    (st,) = _steps(tmp_path, doc)
    f = step_figures(st)
    assert st.backward.cpu_end_s == pytest.approx(720e-6) and st.model_backward_cpu_end_s == pytest.approx(700e-6)
    assert f["backward_s"] == pytest.approx(300e-6)
    assert f["exposed_comm_s"] == pytest.approx(20e-6)
    assert f["grad_copies_s"] == pytest.approx(20e-6 + 15e-6)
    assert f["optimizer_s"] == pytest.approx(145e-6)
    assert sum(f[k] for k in TERMS) == pytest.approx(f["step_s"])


def test_what_paced_the_step_is_read_on_its_critical_path(tmp_path):
    """The hand profile is host-bound (every boundary the CPU's). With an all-reduce running to
    2000 us and the optimizer's kernel waiting for it (2005..2035), the step lasts 2035 us on its
    critical path, of which 1300 us (700..2000) are exposed communication: communication-bound."""
    (st,) = _steps(tmp_path, hand_profile(), "host.json")
    f = step_figures(st)
    assert f["bound"] == "host-bound" and f["paced"]["comm_s"] == pytest.approx(40e-6)
    doc = hand_profile()
    for e in doc["traceEvents"]:
        if e["name"].startswith("ncclKernel"):
            e["dur"] = 2000 - 640
        if e["name"] == "sgd":
            e["ts"] = 2005
    (st,) = _steps(tmp_path, doc, "comm.json")
    f = step_figures(st)
    assert f["exposed_comm_s"] == pytest.approx(1300e-6) and f["optimizer_s"] == pytest.approx(35e-6)
    assert f["step_s"] == pytest.approx(2035e-6)
    assert f["paced"] == pytest.approx({"host_s": (80 + 300 + 300 + 10) * 1e-6 + f["other_s"], "device_s": 35e-6,
                                        "comm_s": 1300e-6})
    assert f["bound"] == "communication-bound"


def test_device_work_inherited_from_before_the_profile_is_left_out(tmp_path):
    """conv_fwd, launched at 120 us, starts at 330 instead of 130: nothing profiled ran on the
    device before it, and every other op starts 10 us after its launch (the device's latency), so
    the device was busy until 320 with work launched before the profile began. The step starts
    there on its critical path (not at DDP's forward, 20 us), 300 us of inherited work."""
    doc = hand_profile()
    for e in doc["traceEvents"]:
        if e["name"] == "conv_fwd":
            e["ts"], e["dur"] = 330, 60
    (st,) = _steps(tmp_path, doc)
    assert st.inherited_s == pytest.approx(300e-6)
    assert boundaries(st).start_s == pytest.approx(320e-6)
    f = step_figures(st)
    assert f["pre_forward_s"] == 0.0 and f["forward_s"] == pytest.approx(80e-6)
    (plain,) = _steps(tmp_path, hand_profile(), "plain.json")
    assert plain.inherited_s == 0.0 and boundaries(plain).start_s == pytest.approx(20e-6)


def test_host_costs_from_the_hand_profile(tmp_path):
    (st,) = _steps(tmp_path, hand_profile())
    host, detail = host_costs_from_steps([st])
    # pre-forward 20..100 us; the launching-free hook: 60 - 10 us; enqueue = record_param_comms; launch = the rest;
    # the copy back is not read from the timeline: the default
    from ddpsim.network.host_costs import COPY_BACK_S_PER_PARAM

    assert host.as_dict() == pytest.approx({"pre_forward_s": 80e-6, "hook_s_per_param": 50e-6, "bucket_launch_s": 40e-6,
                                            "enqueue_s": 60e-6, "copy_back_s_per_param": COPY_BACK_S_PER_PARAM})
    assert detail["kernel_launches_per_step"] == 4 and detail["kernel_launch_s_per_call"] == pytest.approx(5e-6)


def test_collectives_outside_ddps_thread_do_not_end_the_backward(tmp_path):
    # collectives on the main thread (a logged loss's all-reduce after the backward, another inside
    # the optimizer) are not DDP's: the backward ends at DDP's last op on the hook thread (700 us)
    doc = hand_profile()
    doc["traceEvents"] += [_x("record_param_comms", 740, 30, 1), _x("record_param_comms", 860, 30, 1)]
    (st,) = _steps(tmp_path, doc)
    assert (st.backward.cpu_start_s, st.backward.cpu_end_s, st.backward.cpu_s) == pytest.approx((400e-6, 700e-6, 300e-6))
    assert (st.optimizer.cpu_start_s, st.optimizer_cpu_end_s) == pytest.approx((800e-6, 900e-6))


def test_every_call_that_launches_device_work_is_counted(tmp_path):
    # cuBLAS launches through the driver (cuLaunchKernelEx) and a CUDA graph replay launch device
    # work as cudaLaunchKernel does; cudaLaunchHostFunc does not
    doc = hand_profile()
    doc["traceEvents"] += [_launch(140, 5, 1, "cuLaunchKernelEx"), _kernel("gemm", 150, 10, 5),
                           _launch(160, 6, 1, "cudaGraphLaunch"), _launch(170, 7, 1, "cudaLaunchHostFunc")]
    (st,) = _steps(tmp_path, doc)
    assert st.host.num_kernel_launches == 6 and st.host.kernel_launch_s == pytest.approx(30e-6)


@pytest.mark.parametrize("verb", ["trace", "compare"])
def test_a_thread_id_that_is_a_list_is_refused_in_one_line(tmp_path, capsys, verb):
    from ddpsim.cli.main import main

    doc = hand_profile()
    next(e for e in doc["traceEvents"] if e["name"] == "torch::autograd::AccumulateGrad")["tid"] = [2]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    argv = ["trace", "--from-profile", str(path), "--out", str(tmp_path / "t.json")] if verb == "trace" else \
        ["compare", str(path), "--out-dir", str(tmp_path / "c")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "tid: [2] is not accepted; expected an integer or a string" in err


@pytest.mark.parametrize("info, message", [
    ({"world_size": 2.5, "rank": 0},
     "distributedInfo.world_size: 2.5 is not accepted; expected a positive integer"),
    ({"world_size": 0, "rank": 0}, "distributedInfo.world_size: 0 is not accepted"),
    ({"world_size": 2, "rank": 5},
     "distributedInfo.rank: 5 is not accepted; expected an integer from 0 to"),
    ({"world_size": 2, "rank": "0"}, "distributedInfo.rank: '0' is not accepted"),
])
def test_a_world_size_or_rank_out_of_range_is_refused(tmp_path, info, message):
    # a world size the profile states wrongly is refused, not replaced by the number of files given
    from ddpsim.trace.profile import import_profile

    doc = hand_profile() | {"distributedInfo": {"backend": "nccl", **info}}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=re.escape(message)):
        import_profile(path)


def test_bad_profiles(tmp_path):
    with pytest.raises(InputError, match="no ProfilerStep"):
        _steps(tmp_path, {"traceEvents": [_x("aten::mm", 0, 1, 1)]})
    doc = hand_profile()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "AccumulateGrad" not in e["name"]]
    with pytest.raises(InputError, match="ProfilerStep#7 has no backward"):
        _steps(tmp_path, doc)


def test_attribution_shares_add_up():
    pred = {k: 1.0 for k in TERMS} | {"step_s": float(len(TERMS)) + 0.5, "backward_s": 1.5}
    meas = {k: 1.0 for k in TERMS} | {"step_s": float(len(TERMS))}
    rows = attribution(pred, meas)
    assert [r["term"] for r in rows] == [k.removesuffix("_s") for k in TERMS]
    assert sum(r["share_pct"] for r in rows) == pytest.approx(100.0)
    line = transfer_line([{"size_bytes": 1e6, "measured_transfer_bound_s": 2e-3}, {"size_bytes": 3e6, "measured_transfer_bound_s": 4e-3}])
    assert line["fixed_s"] == pytest.approx(1e-3) and line["bytes_per_s"] == pytest.approx(1e9)


def test_terms_whose_errors_cancel_have_no_share():
    # a step predicted exactly while two terms are off by +-0.5 ms: no share of a zero error
    from ddpsim.validation.profile_findings import _term_error

    pred = {k: 1.0 for k in TERMS} | {"step_s": float(len(TERMS)), "backward_s": 1.0005, "forward_s": 0.9995}
    meas = {k: 1.0 for k in TERMS} | {"step_s": float(len(TERMS))}
    rows = attribution(pred, meas)
    assert {r["term"]: r["share_pct"] for r in rows}["backward"] is None
    assert _term_error(rows[TERMS.index("backward_s")]) == "backward +0.50 ms (the terms' errors cancel)"


# ---- the public A100 profile ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def a100_steps():
    return import_profile(A100).iterations


@pytest.fixture(scope="module")
def a100_raw():
    with gzip.open(A100, "rt") as f:
        return json.load(f)["traceEvents"]


def test_a100_steps_from_the_raw_events(a100_steps, a100_raw):
    spans = sorted((e for e in a100_raw if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    assert [s.step for s in a100_steps] == [4, 5, 6]
    assert [s.step_s for s in a100_steps] == pytest.approx([e["dur"] * 1e-6 for e in spans])
    for st in a100_steps:
        assert len(st.hooks) == 161 and sum(h.launches for h in st.hooks) == 5 and len(st.buckets) == 5
        assert [k.numel for k in st.allreduces] == A100_BUCKETS
        # host-bound: the CPU reaches every boundary after the device finished what came before
        b = boundaries(st)
        assert (b.backward_s, b.backward_end_s) == pytest.approx((st.backward.cpu_start_s, st.backward.cpu_end_s))


def test_gradients_accumulated_on_the_calling_thread_count(tmp_path, a100_raw):
    """The autograd engine runs a CPU-side AccumulateGrad on the thread that called backward: the
    fixture with one gradient per step moved to the ProfilerStep's thread keeps 161 hooks a step,
    as the import counts them, in time order."""
    import copy

    events = copy.deepcopy(a100_raw)
    spans = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    names = ("torch::autograd::AccumulateGrad", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad")
    for span in spans:
        inside = sorted((e for e in events if e.get("name") in names and span["ts"] <= e["ts"] <= span["ts"] + span["dur"]),
                        key=lambda e: e["ts"])
        for e in inside[10:12]:  # the 6th gradient's evaluate_function and its AccumulateGrad
            e["tid"] = span["tid"]
    path = tmp_path / "moved.json"
    path.write_text(json.dumps({"traceEvents": events}))
    steps = import_profile(path).iterations
    plain = import_profile(A100).iterations
    for st, ref in zip(steps, plain, strict=True):
        assert len(st.hooks) == 161
        assert [h.op_end_s for h in st.hooks] == pytest.approx([h.op_end_s for h in ref.hooks])


def test_a100_hta_overlap_against_the_raw_events(a100_steps, a100_raw):
    """HTA's figure over every kernel, copy and set of the three steps, recomputed from the raw file."""
    t0, t1 = a100_steps[0].start_us, a100_steps[-1].start_us + a100_steps[-1].step_s * 1e6
    corr = {e["args"]["correlation"]: e["ts"] for e in a100_raw if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    ivs = [(e["ts"], e["ts"] + e["dur"], "comm" if e["name"].startswith("nccl") else
            "memory" if ("Memcpy" in e["name"] or "Memset" in e["name"]) else "comp")
           for e in a100_raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and t0 <= corr.get(e["args"].get("correlation"), -1) < t1]
    assert measured_summary(a100_steps)["mean"]["overlap_ratio"] == pytest.approx(hta_cumsum_overlap(ivs), rel=1e-6)


def test_a100_compare_end_to_end(a100_steps, tmp_path):
    """The bundled ResNet-50 trace's parameters (DDP's order, torchvision's layout) stand in for
    the import's (tests/test_profile_import.py checks those): the comparison's bookkeeping."""
    trace = load_trace(ROOT / "traces/resnet50.cpu.json")
    data = compare([str(A100)], [a100_steps], trace=trace, gpu_name="NVIDIA A100-PG509-200", world_size=2,
                   recorded_numels=A100_BUCKETS, name="t")
    assert data["plan"]["matches"] and data["topology"] == "dgx-a100"
    meas, pred = data["measured"]["mean"], data["predicted"]
    # host-bound: the step on the critical path is the CPU's ProfilerStep span, to the gap between spans
    assert meas["step_s"] == pytest.approx(statistics.fmean(s.step_s for s in a100_steps), abs=1e-4)
    assert sum(pred[k] for k in TERMS) == pytest.approx(pred["step_s"])
    assert sum(t["error_s"] for t in data["terms"]) == pytest.approx(pred["step_s"] - meas["step_s"])
    # host-bound as the run was: the prediction is within the phases' own spread of the CPU's step
    assert abs(pred["step_s"] - meas["step_s"]) < 0.05 * meas["step_s"]
    assert [b["numel_recorded"] for b in data["buckets"]] == A100_BUCKETS
    for b in data["buckets"]:
        # named RING_LL, launched with 544 threads: ring with Simple, as the model picks
        assert (b["measured_algorithm"], b["measured_protocol"]) == ("ring", "simple")
        assert (b["model_algorithm"], b["model_protocol"]) == ("ring", "simple")
        assert b["model_as_run_s"] == pytest.approx(b["model_s"])
        assert b["measured_transfer_bound_s"] <= b["measured_duration_s"]
    text = "\n".join(findings(data))
    assert "host-bound" in text and "upper bound" in text
    from ddpsim.validation.profile_report import write_compare_report

    paths = write_compare_report(data, tmp_path / "r", plots=False)
    again = write_compare_report(data, tmp_path / "r2", plots=False)
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in again]
    assert math.isfinite(json.loads(paths[0].read_text())["predicted"]["step_s"])


def test_effective_trace_counts_gradients(a100_steps):
    trace = load_trace(ROOT / "traces/resnet50.cpu.json")
    eff = effective_trace(trace, a100_steps, "p")
    assert len(eff.iterations) == 3 and eff.synthetic["kind"] == "profile-critical-path"
    for it, st in zip(eff.iterations, a100_steps):
        f = step_figures(st)
        assert (it.forward_s, it.optimizer_s) == pytest.approx((f["forward_s"], f["optimizer_s"]))
        last = max(r for r in it.grad_ready_s if r is not None)
        # the host's part of DDP's copy-back stays in the simulated backward (the last all-reduce hides under it)
        assert last <= it.backward_s and it.backward_s == pytest.approx(f["backward_s"] + f["copy_back_host_s"])
    with pytest.raises(InputError, match="AccumulateGrad ops; expected"):
        effective_trace(trace, [replace(a100_steps[0], hooks=a100_steps[0].hooks[:-1])], "p")


# ---- the CLI ------------------------------------------------------------------------------------

def test_help_leads_with_the_question_and_two_examples(capsys):
    from ddpsim.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["compare", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "How far is ddpsim's prediction from a real multi-GPU DDP run" in out
    assert sum(line.strip().startswith("ddpsim compare ") for line in out.splitlines()) == 2


def test_cli_on_the_hand_profile(tmp_path, capsys):
    from ddpsim.cli.main import main

    prof = tmp_path / "rank0.json"
    prof.write_text(json.dumps(hand_profile()))
    assert main(["compare", str(prof), "--out-dir", str(tmp_path), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "rank0: step predicted" in out and "plan matches the run's" in out
    data = json.loads((tmp_path / "compare-rank0/compare.json").read_text())
    assert data["world_size"] == 2 and data["measured"]["mean"]["step_s"] == pytest.approx(1000e-6)
    assert "## Where the prediction is off" in (tmp_path / "compare-rank0/summary.md").read_text()


@pytest.mark.parametrize("edit,args,match", [
    (lambda d: None, ["--scenario", "WORLD4"], r"--scenario: world_size 4 is not accepted; expected the profile's world size 2"),
    (lambda d: d["deviceProperties"][0].update(name="NVIDIA GeForce RTX 4090"), [],
     r"GPU 'NVIDIA GeForce RTX 4090' has no system in the hardware catalogue; expected a GPU of 'ddpsim topology --list', "
     r"or --scenario"),
    (lambda d: None, ["SAME"], r"PROFILE: world sizes \[2\] and ranks \[0, 0\] are not accepted; expected profiles of one run"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, edit, args, match):
    import re

    from ddpsim.cli.main import main

    doc = hand_profile()
    edit(doc)
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps(doc))
    world4 = tmp_path / "world4.yaml"
    world4.write_text(f"name: w4\ntrace: {ROOT / 'traces/mlp.cpu.json'}\ncluster: {{topology: dgx-a100}}\nworld_size: 4\n")
    args = [str(prof) if a == "SAME" else str(world4) if a == "WORLD4" else a for a in args]
    assert main(["compare", str(prof), *args, "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(match, err)


def test_every_ranks_profile_separates_the_wait(tmp_path):
    """Rank 1 (same host clock) starts the all-reduce kernel 60 us after rank 0 (700 vs 640 us):
    the all-reduce starts when the last rank arrives, and the transfer is rank 0's end (740) minus
    that (40 us), where rank 0's kernel alone (100 us) held the wait."""
    from ddpsim.trace.records import make_trace

    rank1 = hand_profile()
    rank1["distributedInfo"]["rank"] = 1
    for e in rank1["traceEvents"]:
        if e["name"].startswith("ncclKernel"):
            e["ts"], e["dur"] = 700, 40
    steps = [_steps(tmp_path, hand_profile(), "r0.json"), _steps(tmp_path, rank1, "r1.json")]
    trace = make_trace(model="two", params=[("a", (4,), "float32"), ("b", (6,), "float32")], ready_s=[2e-4, 1e-4],
                       forward_s=3e-4, backward_s=3e-4, optimizer_s=1e-4)
    data = compare([str(tmp_path / "r0.json"), str(tmp_path / "r1.json")], steps, trace=trace, gpu_name="NVIDIA A100-SXM4-40GB", world_size=2, recorded_numels=[10])
    (b,) = data["measured"]["buckets"]
    assert b["ranks"] == 2
    assert (b["start_s"], b["transfer_bound_s"]) == pytest.approx((680e-6, 40e-6))
    (row,) = data["buckets"]
    assert row["measured_transfer_bound_s"] == pytest.approx(40e-6) and row["measured_start_s"] == pytest.approx(680e-6)
    assert "cannot be separated" not in "\n".join(findings(data))


def test_compare_without_recorded_bucket_sizes_does_not_claim_a_plan_check(tmp_path, capsys):
    from ddpsim.cli.main import main

    doc = hand_profile()
    dims = iter([[[4]], [[6]]])  # record_shapes: the gradients' sizes, no bucket size recorded
    for e in doc["traceEvents"]:
        e["args"].pop("In msg nelems", None)
        if e["name"] == "torch::autograd::AccumulateGrad":
            e["args"]["Input Dims"] = next(dims)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert main(["compare", str(path), "--out-dir", str(tmp_path), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "plan not checked (the profile records no bucket sizes)" in out and "matches" not in out


def test_eight_ranks_with_a_late_one_separate_wait_and_transfer(tmp_path, capsys):
    """Eight ranks on one host clock; rank 5 launches the all-reduce 60 us after the others (its
    kernel starts at 700, theirs at 640) and every kernel ends at 740: the transfer it was built
    with is 40 us, each other rank waited 60 us, for rank 5. The profiles are given out of rank
    order: each is placed by its distributedInfo rank."""
    from ddpsim.cli.main import main

    late, arrive, transfer = 5, 640, 40
    paths = []
    for r, doc in late_rank_docs(late, arrive, transfer):
        paths.append(tmp_path / f"rank{r}.json")
        paths[-1].write_text(json.dumps(doc))
    assert main(["compare", *map(str, paths), "--out-dir", str(tmp_path), "--name", "late", "--no-plots"]) == 0
    data = json.loads((tmp_path / "compare-late/compare.json").read_text())
    (b,) = data["measured"]["buckets"]
    assert b["ranks"] == 8 and b["last_rank"] == late
    assert b["transfer_s"] == pytest.approx(transfer * 1e-6) and b["transfer_bound_s"] == pytest.approx(transfer * 1e-6)
    assert b["wait_by_rank_s"] == pytest.approx({str(r): (0.0 if r == late else 60e-6) for r in range(8)})
    by_rank = {r["rank"]: r for r in data["ranks"]}
    assert sorted(by_rank) == list(range(8)) and by_rank[late]["waited_for"] is None
    assert all(by_rank[r]["waited_for"] == late and by_rank[r]["wait_mean_s"] == pytest.approx(60e-6)
               for r in range(8) if r != late)
    (row,) = data["buckets"]
    assert row["measured_transfer_s"] == pytest.approx(40e-6) and row["measured_last_rank"] == late
    text = (tmp_path / "compare-late/summary.md").read_text()
    assert "The last to arrive: rank 5." in text and "rank 0 0.06 ms (for rank 5)" in text


def test_two_ddp_modules_are_not_checked_against_one_plan(tmp_path, capsys):
    """A model with two DDP modules (two DistributedDataParallel.forward calls a step, e.g. a
    recommender's dense parts): ddpsim plans one module, so neither the import nor compare says
    its plan matches or differs from the run's buckets; both say it was not checked."""
    from ddpsim.cli.main import main
    from ddpsim.trace.profile import import_profile

    doc = hand_profile()
    doc["traceEvents"].append(_x("DistributedDataParallel.forward", 330, 50, 1, cat="user_annotation"))
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    imp = import_profile(path)
    assert imp.ddp_modules == 2 and any(n.startswith("2 DDP modules") for n in imp.notes)
    assert main(["trace", "--from-profile", str(path), "--out", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "match" not in out and "differ" not in out
    assert main(["compare", str(path), "--out-dir", str(tmp_path), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "plan not checked (2 DDP modules, no split of the run's buckets among them found)" in out
    data = json.loads((tmp_path / "compare-two/compare.json").read_text())
    assert data["plan"]["matches"] is None and "not checked" in (tmp_path / "compare-two/summary.md").read_text()


def test_a_gradient_without_ddps_hook_is_no_parameter(tmp_path):
    """A scalar outside the DDP module (or one DDP skips) accumulates its gradient with no DDP hook
    after it: the hand profile with DDP's mul_out after each of its two gradients and a third
    AccumulateGrad (470 us) with none imports two parameters, two hooks, the bucket's two gradients."""
    from ddpsim.trace.profile import import_profile

    doc = hand_profile()
    hook = "torch::distributed::reducer::mul_out"
    doc["traceEvents"] += [_x(hook, 418, 5, 2), _x(hook, 520, 5, 2),
                           _x("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 470, 20, 2),
                           _x("torch::autograd::AccumulateGrad", 472, 5, 2)]
    path = tmp_path / "scalar.json"
    path.write_text(json.dumps(doc))
    imp = import_profile(path)
    (st,) = imp.iterations
    assert imp.trace.num_params == 2 and len(st.grad_ready_s) == 2
    assert [h.op_end_s for h in st.hooks] == pytest.approx([415e-6, 515e-6])
    assert [b.num_grads for b in st.buckets] == [2]


@pytest.mark.parametrize("groups", [None, ("0", "1")])
def test_two_ddp_modules_are_each_planned_on_their_own_parameters(tmp_path, capsys, groups):
    """Two DDP modules, each launching one bucket of its own gradients (200,100 and 300,050
    elements): planned together the gradients make one 500,150-element bucket; each module
    planned on its own gives the run's buckets -- found by cutting the launches (no process
    group recorded) or by the buckets' process groups -- and the simulation runs both."""
    from synthetic_profiles import TWO_MODULE_BUCKETS, two_ddp_modules_doc

    from ddpsim.cli.main import main

    path = tmp_path / "two.json"
    path.write_text(json.dumps(two_ddp_modules_doc(groups)))
    assert main(["compare", str(path), "--out-dir", str(tmp_path), "--no-plots"]) == 0
    assert "plan matches the run's (2 DDP modules, each planned on its own parameters)" in capsys.readouterr().out
    data = json.loads((tmp_path / "compare-two/compare.json").read_text())
    plan = data["plan"]
    assert plan["matches"] is True and plan["predicted_numels"] == list(TWO_MODULE_BUCKETS)
    assert [m["predicted_numels"] for m in plan["modules"]] == [[200_100], [300_050]]
    assert [m["process_group"] for m in plan["modules"]] == list(groups or (None, None))
    assert plan["split"] == ("process group" if groups else "launch order")
    assert [b["numel_recorded"] for b in data["buckets"]] == list(TWO_MODULE_BUCKETS)
    assert main(["trace", "--from-profile", str(path), "--out", str(tmp_path / "t.json")]) == 0
    assert "2 buckets match the 2 DDP modules' own plans at cap=default" in capsys.readouterr().out
    # the same gradients as one module: DDP's default plans one 500,150-element bucket; the run's two
    # buckets need a cap under DDP's 1 MiB first bucket, which compare reads off them and says so
    path.write_text(json.dumps(two_ddp_modules_doc(groups, modules=1)))
    assert main(["compare", str(path), "--out-dir", str(tmp_path), "--no-plots"]) == 0
    one = json.loads((tmp_path / "compare-two/compare.json").read_text())
    assert one["cap_from_buckets"] and one["bucket_cap_mb"] == pytest.approx(200_100 * 4 / 2**20)
    assert one["plan"]["predicted_numels"] == list(TWO_MODULE_BUCKETS)
    assert main(["trace", "--from-profile", str(path), "--out", str(tmp_path / "t1.json")]) == 0
    assert "buckets match ddpsim's plan at cap=0.763" in capsys.readouterr().out


def test_a_gpu_bound_runs_step_is_its_devices_period():
    """The public V100 profile (one rank, GPU-bound): steps #101 and #102 span 35 and 72 ms on the
    CPU, which runs ahead of the device while its launch queue fills; #103-#105 span 95.6-95.7 ms.
    Every step on the critical path lasts at least the device's work per step (94-95 ms busy), and
    once the queue is full (from #102 on) no more than 2 % longer; #101 starts with the device
    waiting for its first launches."""
    from ddpsim.validation.profile_measure import step_period_s

    steps = import_profile(ROOT / "tests/data/resnet50_ddp_1xV100_rank0.json.gz").iterations
    assert [round(st.step_s * 1e3) for st in steps] == [35, 72, 96, 96, 96]
    periods = [step_period_s(st, nxt) for st, nxt in zip(steps, list(steps[1:]) + [None])]
    busy = [sum(b - a for a, b in merge_intervals([(a, b) for a, b, _ in st.intervals])) for st in steps]
    assert all(p >= b for p, b in zip(periods, busy))
    assert all(p < 1.02 * b for p, b in zip(periods[1:], busy[1:]))


def test_the_runs_buckets_are_picked_by_their_recorded_sizes(tmp_path):
    """Another all-reduce on the autograd thread (3 elements, launched at 470 us, e.g. a used map)
    is passed by: the bucket is the recorded 10-element one, launched at 550 us."""
    doc = hand_profile()
    doc["traceEvents"] += [_x("c10d::allreduce_", 470, 20, 2), _x("record_param_comms", 472, 10, 2), _launch(474, 5, 2),
                           _kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", 480, 5, 5, **{"In msg nelems": 3})]
    (st,) = _steps(tmp_path, doc)
    assert [k.numel for k in st.allreduces] == [3, 10]
    (b,) = step_figures(st, numels=[10])["buckets"]
    assert (b["numel"], b["launch_s"], b["start_s"]) == pytest.approx((10, 530e-6, 620e-6))
    assert len(step_figures(st)["buckets"]) == 2
