"""Batch norm and cuDNN convolutions in the retime (ddpsim.trace.cnn_kernels): closed forms, and
the per-channel rates recomputed from real H100 and H200 profiles of ResNet-50 (tests/data/)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from ddpsim.trace.cnn_kernels import PER_CHANNEL, Kernel, batch_norm_kernels, conv_layout_bytes
from ddpsim.trace.models import BuiltModel
from ddpsim.trace.retime import LAYOUT_CONVERSION, RooflineAssumptions, retime_spec

ROOT = Path(__file__).resolve().parents[1]
A = RooflineAssumptions()
ROOF = A.without_host()


def meta(*shape, dtype=torch.float32, channels_last=False):
    t = torch.empty(*shape, device="meta", dtype=dtype)
    return t.to(memory_format=torch.channels_last) if channels_last else t


def bn_forward_args(x, weight_dtype=torch.float32, training=True):
    c = x.shape[1]
    w = meta(c, dtype=weight_dtype)
    return (x, w, meta(c, dtype=weight_dtype), meta(c), meta(c), training, 0.1, 1e-5)


def test_training_batch_norm_on_cudnn_reads_its_input_twice():
    x = meta(32, 64, 56, 56)  # float32: cuDNN's kernels, one per op
    assert batch_norm_kernels("native_batch_norm", bn_forward_args(x), 1000.0, A) == [
        Kernel("native_batch_norm", 1000.0 + x.nbytes)]
    dy = meta(32, 64, 56, 56)
    bwd = (dy, x, meta(64), meta(64), meta(64), meta(64), meta(64), True, 1e-5, [True, True, True])
    assert batch_norm_kernels("native_batch_norm_backward", bwd, 2000.0, A) == [
        Kernel("native_batch_norm_backward", 2000.0 + x.nbytes + dy.nbytes)]
    # fp16 with an fp32 weight is cuDNN's too; eval mode and other ops stay one roofline kernel
    x16 = meta(32, 64, 56, 56, dtype=torch.float16)
    assert batch_norm_kernels("native_batch_norm", bn_forward_args(x16), 10.0, A) == [
        Kernel("native_batch_norm", 10.0 + x16.nbytes)]
    assert batch_norm_kernels("native_batch_norm", bn_forward_args(x, training=False), 10.0, A) is None
    assert batch_norm_kernels("native_layer_norm", (x,), 10.0, A) is None


def test_bf16_batch_norm_runs_pytorchs_kernels_bounded_per_channel():
    x = meta(64, 128, 28, 28, dtype=torch.bfloat16)
    stats, normalise = batch_norm_kernels("native_batch_norm", bn_forward_args(x), 500.0, A)
    assert stats == Kernel(f"native_batch_norm(statistics, {PER_CHANNEL})", x.nbytes, 128 * 2.07e9)
    assert normalise == Kernel("native_batch_norm(normalise)", 500.0, None)
    dy = meta(64, 128, 28, 28, dtype=torch.bfloat16)
    bwd = (dy, x, meta(128), meta(128), meta(128), meta(128), meta(128), True, 1e-5, [True, True, True])
    assert batch_norm_kernels("native_batch_norm_backward", bwd, 700.0, A) == [
        Kernel(f"native_batch_norm_backward({PER_CHANNEL})", 700.0 + x.nbytes + dy.nbytes, 128 * 4.34e9)]
    # channels-last: PyTorch's channels-last kernels, two passes at HBM's rate
    xcl = meta(64, 128, 28, 28, dtype=torch.bfloat16, channels_last=True)
    assert batch_norm_kernels("native_batch_norm", bn_forward_args(xcl), 500.0, A) == [
        Kernel("native_batch_norm", 500.0 + xcl.nbytes)]


def test_retimed_bf16_batch_norm_time_is_its_channels_rate():
    # a 64-channel batch norm at 112 x 112 (ResNet-50's first): 64 x 2.07 GB/s = 132 GB/s, far
    # below the H100's HBM, so the statistics kernel takes bytes / (64 x 2.07e9)
    with torch.device("meta"):
        m = torch.nn.BatchNorm2d(64)
    spec = BuiltModel(name="bn", module=m, make_batch=lambda b: torch.ones(b, 64, 112, 112))
    _, log = retime_spec(spec, gpu="h100", batch_size=64, dtype="bfloat16", assumptions=ROOF, return_log=True)
    stats = [c for c in log if c.phase == "forward" and "statistics" in c.op]
    x_bytes = 64 * 64 * 112 * 112 * 2
    assert len(stats) == 1 and stats[0].time_s == pytest.approx(x_bytes / (64 * 2.07e9), rel=1e-12)
    # the host issues the op once: its second kernel (normalise) adds no host time
    assert [c.host for c in log if c.phase == "forward" and "native_batch_norm" in c.op] == [True, False]


def test_conv_layout_conversions_closed_form():
    x, w3, w1 = meta(32, 64, 56, 56), meta(64, 64, 3, 3), meta(256, 64, 1, 1)
    y3, y1s2 = meta(32, 64, 56, 56), meta(32, 256, 28, 28)
    # forward 3x3: input and filter in, output back
    assert conv_layout_bytes("convolution", (x, w3, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), y3, True) == \
        2 * (x.nbytes + w3.nbytes + y3.nbytes)
    # 1x1 stride 1: a GEMM on NCHW; 1x1 stride 2: converted, but not its 1x1 filter
    assert conv_layout_bytes("convolution", (x, w1, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), meta(32, 256, 56, 56), True) == 0
    assert conv_layout_bytes("convolution", (x, w1, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1), y1s2, True) == \
        2 * (x.nbytes + y1s2.nbytes)
    # backward 3x3: data gradient (dy, filter in; dx back) + filter gradient (x, dy in; dw back)
    dy = meta(32, 64, 56, 56)
    args = (dy, x, w3, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
    assert conv_layout_bytes("convolution_backward", args, None, True) == \
        2 * (dy.nbytes + w3.nbytes + x.nbytes) + 2 * (x.nbytes + dy.nbytes + w3.nbytes)
    no_dx = args[:10] + ([False, True, False],)
    assert conv_layout_bytes("convolution_backward", no_dx, None, True) == 2 * (x.nbytes + dy.nbytes + w3.nbytes)
    # none without tensor cores, or on channels-last tensors
    assert conv_layout_bytes("convolution", (x, w3, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), y3, False) == 0
    xcl = meta(32, 64, 56, 56, channels_last=True)
    assert conv_layout_bytes("convolution", (xcl, w3, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), y3, True) == 0


def _conv_spec():
    with torch.device("meta"):
        m = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False)
    return BuiltModel(name="conv", module=m, make_batch=lambda b: torch.ones(b, 16, 32, 32))


@pytest.mark.parametrize("gpu, converted", [("a100", True), ("v100", False)])
def test_fp32_convolution_converts_only_where_tf32_tensor_cores_run_it(gpu, converted):
    # float32 convolutions run on TF32 tensor cores on an A100 (cuDNN's allow_tf32) but on the
    # V100's CUDA cores, whose NCHW kernels need no conversion
    _, log = retime_spec(_conv_spec(), gpu=gpu, batch_size=8, assumptions=ROOF, return_log=True)
    conversions = [c for c in log if c.op == LAYOUT_CONVERSION]
    assert [c.phase for c in conversions] == (["forward", "backward"] if converted else [])
    assert all(not c.host for c in conversions)


def _per_channel_rates(profile: str) -> dict[str, float]:
    """Bytes per second per channel of PyTorch's NCHW batch-norm statistics and backward kernels in
    a profile: sum over the kernels of bytes / channels, over the sum of their durations (bytes:
    the statistics read x once; the backward reads x and dy twice and writes dx, 5 x's bytes)."""
    events = json.load(gzip.open(ROOT / "tests/data" / profile))["traceEvents"]
    ops = {e["args"].get("External id"): e for e in events if e.get("cat") == "cpu_op"}
    acc = {}
    for k in events:
        if k.get("cat") != "kernel":
            continue
        for kind, units, arg in (("batch_norm_collect_statistics_kernel", 1, 0), ("batch_norm_backward_kernel", 5, 1)):
            if kind in k["name"]:
                op = ops[k["args"]["External id"]]
                assert op["args"]["Input type"][arg] == "c10::BFloat16"
                n, _c, h, w = op["args"]["Input Dims"][arg]
                per_channel, dur, count = acc.get(kind, (0.0, 0.0, 0))
                acc[kind] = (per_channel + units * 2 * n * h * w, dur + k["dur"] * 1e-6, count + 1)
    assert {kind: v[2] for kind, v in acc.items()} == {"batch_norm_collect_statistics_kernel": 53,
                                                         "batch_norm_backward_kernel": 53}
    return {kind: b / t for kind, (b, t, _n) in acc.items()}


def test_per_channel_batch_norm_rates_are_the_h100_profiles_kernels():
    # the oracle: ResNet-50, bf16 autocast, batch 64, on an H100 (tests/data/, trimmed to one step)
    rates = _per_channel_rates("resnet50_ddp_1xH100_rank0.json.gz")
    assert float(f"{rates['batch_norm_collect_statistics_kernel']:.3g}") == A.bn_stats_block_bytes_per_s
    assert float(f"{rates['batch_norm_backward_kernel']:.3g}") == A.bn_backward_block_bytes_per_s


def test_per_channel_rates_hold_on_the_h200_whose_hbm_is_43_percent_faster():
    # the same run on an H200 (4.8 TB/s against 3.35): the kernels' rates move 5 %, not 43 %, so
    # their channels bound them, not HBM
    rates = _per_channel_rates("resnet50_ddp_1xH200_rank0.json.gz")
    assert rates["batch_norm_collect_statistics_kernel"] == pytest.approx(A.bn_stats_block_bytes_per_s, rel=0.06)
    assert rates["batch_norm_backward_kernel"] == pytest.approx(A.bn_backward_block_bytes_per_s, rel=0.06)


def test_retime_names_conversions_and_per_channel_batch_norms():
    from ddpsim.cli.retime import _cost_lines

    syn = {"modelled_step_s": 0.0331, "layout_conversions": 40, "layout_conversion_s": 0.0019,
           "per_channel_batch_norms": 106, "per_channel_batch_norm_s": 0.0131}
    assert _cost_lines(syn) == [
        "NCHW layout conversions: around 40 convolutions, 1.900 ms of the 33.100 ms step (cuDNN's tensor-core "
        "convolutions work in NHWC; a channels-last model and input remove them)",
        "batch norm on PyTorch's NCHW kernels: 106 kernels bounded by one block per channel, 13.100 ms of the "
        "33.100 ms step (bf16: cuDNN's are not used; channels-last kernels spread the reduction over the GPU)"]
    assert _cost_lines({**syn, "layout_conversion_s": 0.0001, "per_channel_batch_norms": 0}) == []


def _conv_and_gemm_s_per_step(profile: str) -> float:
    """GPU time per step of a ResNet-50 fp32 profile's convolution and GEMM kernels: every kernel
    but the element-wise, batch-norm, pooling, reduction, optimizer, layout, copy and NCCL ones."""
    from ddpsim.trace.cnn_kernels import profile_classes_s

    return profile_classes_s(ROOT / "tests/data" / profile)["convolution/GEMM"]


def test_cuda_core_efficiency_is_the_v100_profiles_convolutions():
    # the oracle: the V100 ResNet-50 profile (fp32, batch 32; the V100 has no TF32, so cuDNN runs
    # it on CUDA cores): the step's convolution and GEMM FLOPs, counted by the retime at the same
    # batch, over those kernels' time, as a fraction of the V100's 15.7 TFLOP/s fp32 peak
    from ddpsim.trace.retime import get_gpu, gpu_peaks, retime_trace_file

    _, log = retime_trace_file(ROOT / "traces/resnet50.cpu.json", gpu="v100", batch_size=32, assumptions=ROOF,
                               return_log=True)
    flops = sum(c.flops for c in log if c.phase in ("forward", "backward"))
    assert flops == pytest.approx(777.57e9, rel=1e-4)
    peak = gpu_peaks(get_gpu("v100"))["fp32_flops_per_s"]
    efficiency = flops / _conv_and_gemm_s_per_step("resnet50_ddp_1xV100_rank0.json.gz") / peak
    assert round(efficiency, 2) == A.cuda_core_efficiency


def test_tf32_efficiency_is_the_a100_profiles_convolutions():
    # the oracle: the A100 ResNet-50 profile (fp32, batch 32, cuDNN's allow_tf32: convolutions on
    # TF32 tensor cores; an A100-SXM4-40GB-class board, 156 TFLOP/s TF32): the step's convolution
    # FLOPs over the convolution and GEMM kernels' time (the fc GEMM's 0.4 GFLOP run on CUDA cores)
    from ddpsim.trace.retime import get_gpu, gpu_peaks, retime_trace_file

    _, log = retime_trace_file(ROOT / "traces/resnet50.cpu.json", gpu="a100-40gb", batch_size=32, assumptions=ROOF,
                               return_log=True)
    flops = sum(c.flops for c in log if c.phase in ("forward", "backward") and c.op.startswith("convolution"))
    peak = gpu_peaks(get_gpu("a100-40gb"))["tf32_flops_per_s"]
    efficiency = flops / _conv_and_gemm_s_per_step("resnet50_ddp_2xA100_rank0.json.gz") / peak
    assert round(efficiency, 2) == A.tf32_efficiency


def _conv_bn_spec():
    with torch.device("meta"):
        m = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1, bias=False), torch.nn.BatchNorm2d(32),
                                torch.nn.Conv2d(32, 32, 3, padding=1, bias=False))
    return BuiltModel(name="convbn", module=m, make_batch=lambda b: torch.ones(b, 16, 32, 32))


def test_channels_last_removes_conversions_and_per_channel_batch_norm():
    kw = {"gpu": "h100", "batch_size": 8, "autocast": "bf16", "assumptions": ROOF}
    nchw, _ = retime_spec(_conv_bn_spec(), return_log=True, **kw)
    nhwc, log = retime_spec(_conv_bn_spec(), channels_last=True, return_log=True, **kw)
    assert nchw.synthetic["layout_conversions"] == 4 and nchw.synthetic["per_channel_batch_norms"] == 2
    assert nhwc.synthetic["layout_conversions"] == 0 and nhwc.synthetic["per_channel_batch_norms"] == 0
    assert nhwc.environment["memory_format"] == "channels_last" and "memory_format" not in nchw.environment
    assert [c.op for c in log if "batch_norm" in c.op] == ["native_batch_norm", "native_batch_norm_backward"]


def test_cli_retime_channels_last_and_efficiencies(tmp_path, capsys):
    from ddpsim.cli.main import main

    out = tmp_path / "r.json"
    assert main(["retime", str(ROOT / "traces/resnet50.cpu.json"), "--gpu", "v100", "--batch-size", "2",
                 "--set", "channels_last=true", "--set", "cuda_core_efficiency=0.5", "--set", "tf32_efficiency=0.4", "--out", str(out)]) == 0
    from ddpsim.trace.records import load_trace

    tr = load_trace(out)
    assert tr.command.endswith("--gpu v100 --batch-size 2 --set channels_last=true --set cuda_core_efficiency=0.5 "
                               "--set tf32_efficiency=0.4 --out " + str(out))
    assert tr.synthetic["assumptions"]["cuda_core_efficiency"] == 0.5 and tr.synthetic["assumptions"]["tf32_efficiency"] == 0.4
    assert tr.environment["memory_format"] == "channels_last"
    assert main(["retime", str(ROOT / "traces/resnet50.cpu.json"), "--gpu", "v100", "--set", "cuda_core_efficiency=0",
                 "--out", str(out)]) == 2
    assert "--set cuda_core_efficiency: 0.0 is not accepted" in capsys.readouterr().err
