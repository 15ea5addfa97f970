"""Roofline retiming: closed-form kernel times worked out by hand, synthetic marker, CLI."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.trace.models import BuiltModel, build_model
from ddpsim.trace.retime import (RooflineAssumptions, get_gpu, gpu_peaks, issue, launch_queue_s, low_precision_flops_per_s,
                                 op_time_s, retime_spec)
from ddpsim.trace.records import load_trace

ROOT = Path(__file__).resolve().parents[1]

A = RooflineAssumptions()  # compute 0.6, memory 0.75, floor 4 us; host 38.5/39/46 us per op + 2.3 us per tensor
#: the roofline alone: a host that never makes the GPU wait
ROOF = RooflineAssumptions(host_forward_s_per_op=0, host_backward_s_per_op=0, host_optimizer_s_per_op=0,
                           host_s_per_tensor=0)


def _linear_spec(n_in, n_out, bias=False):
    with torch.device("meta"):
        m = torch.nn.Linear(n_in, n_out, bias=bias)
    return BuiltModel(name="linear", module=m, make_batch=lambda b: torch.ones(b, n_in))


def test_op_time_closed_form():
    # compute-bound: 2 TFLOP on a 312 TFLOP/s peak at 60 %
    assert op_time_s(flops=2e12, bytes_moved=1e6, peak_flops_per_s=312e12, hbm_bytes_per_s=2.039e12, assumptions=A) == pytest.approx(2e12 / (312e12 * 0.6))
    # bandwidth-bound: 3 GB on 2.039 TB/s at 75 %
    assert op_time_s(flops=1e6, bytes_moved=3e9, peak_flops_per_s=312e12, hbm_bytes_per_s=2.039e12, assumptions=A) == pytest.approx(3e9 / (2.039e12 * 0.75))
    assert op_time_s(flops=0, bytes_moved=8, peak_flops_per_s=1, hbm_bytes_per_s=1e12, assumptions=A) == 4e-6
    assert op_time_s(flops=0, bytes_moved=0, peak_flops_per_s=1, hbm_bytes_per_s=1, assumptions=A) == 0.0


def test_linear_fp32_backward_is_the_weight_gradient_gemm_a100():
    b, n_in, n_out = 512, 1024, 4096
    tr, log = retime_spec(_linear_spec(n_in, n_out), gpu="a100", batch_size=b, assumptions=ROOF, return_log=True)
    flops = 2 * b * n_in * n_out                                  # dW = dY^T X
    bytes_moved = (b * n_out + b * n_in + n_out * n_in) * 4       # read dY, X; write dW (fp32)
    # fp32 GEMM: CUDA cores at the fp32 peak (no TF32 for matmul), cuda_core_efficiency 0.83
    gemm_s = max(flops / (19.5e12 * 0.83), bytes_moved / (2.039e12 * 0.75))
    assert gemm_s == pytest.approx(flops / (19.5e12 * 0.83))     # compute-bound
    # backward = the loss seed (ones_like: one 4-byte kernel -> the 4 us floor) + the GEMM;
    # the input needs no gradient, so there is no dX GEMM
    assert [c.op for c in log if c.phase == "backward"] == ["ones_like", "mm"]
    it = tr.iterations[0]
    assert it.backward_s == pytest.approx(4e-6 + gemm_s, rel=1e-12)
    assert it.grad_ready_s == (pytest.approx(4e-6 + gemm_s, rel=1e-12),)
    # forward = Y = X W^T (same GEMM cost) + sum(Y) (reads b*n_out fp32, writes one)
    assert it.forward_s == pytest.approx(gemm_s + max(4e-6, (b * n_out * 4 + 4) / (2.039e12 * 0.75)), rel=1e-12)
    # SGD momentum, foreach: buf*=m (r+w), buf+=g (2r+w), p+=lr*buf (2r+w) = 8 x param bytes
    pb = n_in * n_out * 4
    assert it.optimizer_s == pytest.approx((2 * pb + 3 * pb + 3 * pb) / (2.039e12 * 0.75), rel=1e-12)
    assert tr.synthetic["kind"] == "retimed" and "A100" in tr.synthetic["gpu"]
    assert tr.synthetic["assumptions"] == {"compute_efficiency": 0.6, "memory_efficiency": 0.75, "min_kernel_s": 4e-6,
                                           "host_forward_s_per_op": 0, "host_backward_s_per_op": 0,
                                           "host_optimizer_s_per_op": 0, "host_s_per_tensor": 0,
                                           "unaligned_gemm_efficiency": 0.126, "cuda_core_efficiency": 0.83, "tf32_efficiency": 0.36,
                                           "bn_stats_block_bytes_per_s": 2.07e9,
                                           "bn_backward_block_bytes_per_s": 4.34e9}
    assert tr.environment["device"] == "cuda" and tr.environment["batch_size"] == b


def test_unaligned_lm_head_gemms_run_at_the_align1_efficiency_h100():
    # GPT-2's LM head: 50,257 outputs, an odd leading dimension (2 bytes x 50,257 is not a multiple
    # of 16), so cuBLAS runs its forward, dX and dW GEMMs on align1 kernels (an H100 profile shows
    # cutlass_75_..._align1 for all three): flops / (989.4 TFLOP/s x 0.126); 50,304 is aligned
    b, n_in = 1024, 768
    for n_out, eff in ((50257, 0.126), (50304, 0.6)):
        _, log = retime_spec(_linear_spec(n_in, n_out), gpu="h100", batch_size=b, autocast="bf16", assumptions=ROOF,
                             return_log=True)
        gemms = [c for c in log if c.op == "mm"]
        assert [c.phase for c in gemms] == ["forward", "backward"]  # the input needs no gradient: no dX
        for c in gemms:
            assert c.aligned is (eff == 0.6)
            assert c.time_s == pytest.approx(2 * b * n_in * n_out / (989.4e12 * eff), rel=1e-12)


def test_unaligned_gemm_efficiency_is_the_h100_profiles_align1_kernels():
    # the oracle: a real H100 torch.profiler trace of GPT-2 124M under DDP (tests/data/): its
    # align1 kernels are the LM head's three GEMMs; FLOPs from the launching aten::mm's recorded
    # dims (2 x M x K x N), time from the kernels' own durations
    import gzip
    import json

    events = json.load(gzip.open(ROOT / "tests/data/gpt2-124m_ddp_1xH100_rank0.json.gz"))["traceEvents"]
    ops = {e["args"].get("External id"): e for e in events if e.get("cat") == "cpu_op"}
    flops = dur_s = 0.0
    kernels = [e for e in events if e.get("cat") == "kernel" and "align1" in e["name"]]
    for k in kernels:
        op = ops[k["args"]["External id"]]
        (m, kk), (_, n) = op["args"]["Input Dims"][:2]
        assert op["name"] == "aten::mm" and 50257 in (m, kk, n)
        flops += 2.0 * m * kk * n
        dur_s += k["dur"] * 1e-6
    assert len(kernels) == 3
    assert round(flops / dur_s / gpu_peaks(get_gpu("h100"))["tensor_flops_per_s"], 3) == RooflineAssumptions().unaligned_gemm_efficiency


def test_retime_names_unaligned_gemms_that_cost_the_step_time():
    from ddpsim.cli.retime import _cost_lines

    line = _cost_lines({"unaligned_gemms": 3, "unaligned_gemm_s": 0.0304, "modelled_step_s": 0.0785})
    assert line == ["unaligned GEMMs: 3 kernels, 30.400 ms of the 78.500 ms step (a leading dimension not a multiple "
                    "of 16 bytes: cuBLAS's align1 kernels; padding it, e.g. a vocabulary to a multiple of 64, removes them)"]
    assert _cost_lines({"unaligned_gemms": 3, "unaligned_gemm_s": 0.0007, "modelled_step_s": 0.0785}) == []  # < 1 %
    assert _cost_lines({"unaligned_gemms": 0, "unaligned_gemm_s": 0.0, "modelled_step_s": 0.0785}) == []


def test_gemm_alignment_rule():
    from ddpsim.trace.retime import gemm_aligned

    with torch.device("meta"):
        w = torch.empty(50257, 768, dtype=torch.bfloat16)
        x = torch.empty(16, 768, dtype=torch.bfloat16)
        assert gemm_aligned([x, w.t()])  # W^T's leading dimension is 768 elements
        assert not gemm_aligned([x, w.t(), torch.empty(16, 50257, dtype=torch.bfloat16)])  # the logits' is 50,257
        assert not gemm_aligned([torch.empty(16, 50257, dtype=torch.bfloat16)[:, :8]])  # a slice keeps its row stride
        assert gemm_aligned([torch.empty(8, 12, dtype=torch.float32)])  # 48 bytes
        assert not gemm_aligned([torch.empty(8, 6, dtype=torch.float32)])  # 24 bytes
        assert gemm_aligned([torch.empty(50257)])  # a vector has no leading dimension


def test_launch_queue_closed_form():
    # host-bound: three 1 us kernels, 10 us to issue each -> the last starts at 30 us
    assert launch_queue_s([(1e-6, 10e-6)] * 3) == pytest.approx(31e-6, rel=1e-12)
    # GPU-bound: three 100 us kernels -> the first waits for its issue, the rest for the GPU
    assert launch_queue_s([(100e-6, 10e-6)] * 3) == pytest.approx(310e-6, rel=1e-12)
    # one op: the GPU is free at 5 but the host issues at 7 -> runs 7..9
    assert issue(5.0, 4.0, 2.0, 3.0) == (9.0, 7.0)


def test_linear_backward_waits_for_the_host_to_issue_each_op():
    # the same step with the default host times (A): backward issues ones_like (1 tensor
    # argument) then the dW GEMM (2): 39 + 2.3 us, then 39 + 2 x 2.3 us; the 4 us seed ends
    # before the GEMM is issued, so the GEMM starts at 84.9 us
    b, n_in, n_out = 512, 1024, 4096
    tr, log = retime_spec(_linear_spec(n_in, n_out), gpu="a100", batch_size=b, return_log=True)
    gemm_s = 2 * b * n_in * n_out / (19.5e12 * 0.83)
    assert [(c.op, c.tensors) for c in log if c.phase == "backward"] == [("ones_like", 1), ("mm", 2)]
    it = tr.iterations[0]
    assert it.backward_s == pytest.approx(84.9e-6 + gemm_s, rel=1e-12)
    assert it.grad_ready_s == (pytest.approx(84.9e-6 + gemm_s, rel=1e-12),)
    assert tr.synthetic["phase_host_s"]["backward"] == pytest.approx(84.9e-6, rel=1e-12)
    assert tr.synthetic["phase_kernel_s"]["backward"] == pytest.approx(4e-6 + gemm_s, rel=1e-12)
    assert tr.synthetic["assumptions"]["host_backward_s_per_op"] == 39e-6


def test_linear_bf16_autocast_h100_uses_tensor_cores():
    b, n_in, n_out = 4096, 4096, 4096
    tr, log = retime_spec(_linear_spec(n_in, n_out), gpu="h100", batch_size=b, autocast="bf16", return_log=True)
    gemm = [c for c in log if c.phase == "backward" and c.op == "mm"]
    assert len(gemm) == 1
    flops = 2 * b * n_in * n_out
    bytes_moved = (b * n_out + b * n_in + n_out * n_in) * 2       # bf16 operands and output
    assert gemm[0].bytes_moved == bytes_moved
    assert gemm[0].time_s == pytest.approx(flops / (989.4e12 * 0.6), rel=1e-12)
    # forward charges the casts of X and W to bf16: (4 + 2) bytes per element each
    casts = [c for c in log if c.phase == "forward" and c.op == "_to_copy(autocast)"]
    assert sorted(c.bytes_moved for c in casts) == sorted([6 * b * n_in, 6 * n_out * n_in])
    # the fp32 weight gradient: autograd casts the bf16 dW to fp32 before accumulating
    assert tr.params[0].dtype == "float32"


def test_backward_order_is_reverse_layer_order():
    with torch.device("meta"):
        spec = build_model("gpt2-124m", n_layer=2, seq_len=64)
    tr = retime_spec(spec, gpu="h100", batch_size=2, autocast="bf16")
    names = [tr.params[i].name for i in tr.grad_ready_order]
    assert names[0] == "transformer.ln_f.weight" or names[0] == "transformer.ln_f.bias"
    first_h1 = min(k for k, n in enumerate(names) if n.startswith("transformer.h.1."))
    first_h0 = min(k for k, n in enumerate(names) if n.startswith("transformer.h.0."))
    assert first_h1 < first_h0
    assert names[-1] == "transformer.wte.weight"  # tied: ready once both uses are accumulated
    ready = tr.iterations[0].grad_ready_s
    assert [ready[i] for i in tr.grad_ready_order] == sorted(ready[i] for i in tr.grad_ready_order)
    assert math.isclose(max(ready), tr.iterations[0].backward_s, rel_tol=0.05)


@pytest.mark.parametrize("kw,match", [
    ({"gpu": "tpu"}, r"--gpu: 'tpu' is not accepted; expected one of a100, a100-40gb, a100-pcie, b200, gb200, gh200, h100, "),
    ({"gpu": "v100", "autocast": "bf16"}, r"^autocast: 'bf16' is not accepted on the NVIDIA V100-SXM2-32GB \(modelled\); "
                                          r"expected fp16 or none \(it has no bf16 tensor cores"),
    ({"batch_size": 0}, r"batch_size: 0 is not accepted"),
    ({"autocast": "fp8"}, r"autocast: 'fp8' is not accepted"),
])
def test_retime_errors(kw, match):
    args = {"gpu": "a100", "batch_size": 2, **kw}
    with pytest.raises(InputError, match=match):
        retime_spec(_linear_spec(8, 8), **args)


def test_assumption_errors():
    with pytest.raises(InputError, match=r"compute_efficiency: 1.5 is not accepted"):
        RooflineAssumptions(compute_efficiency=1.5)
    with pytest.raises(InputError, match=r"bn_stats_block_bytes_per_s: 0 is not accepted; expected a number of bytes per second > 0"):
        RooflineAssumptions(bn_stats_block_bytes_per_s=0)
    with pytest.raises(InputError, match=r"^min_kernel_s: inf is not accepted; expected a"):
        RooflineAssumptions(min_kernel_s=float("inf"))
    with pytest.raises(InputError, match=r"^tf32_efficiency: True is not accepted; expected"):
        RooflineAssumptions(tf32_efficiency=True)


def test_gpu_table():
    def peaks(name):
        return gpu_peaks(get_gpu(name))

    def bf16(name):
        return low_precision_flops_per_s(get_gpu(name), "bf16")

    assert peaks("a100")["tensor_flops_per_s"] == 312e12 and peaks("a100")["hbm_bytes_per_s"] == 2.039e12
    assert peaks("h100")["tensor_flops_per_s"] == 989.4e12 and peaks("h100")["hbm_bytes_per_s"] == 3.35e12
    # the catalogue's new GPUs, dense = the datasheets' sparse figures / 2 (hardware/catalogue.yaml cites each)
    assert bf16("b200") == 4500e12 / 2 and peaks("b200")["hbm_bytes_per_s"] == 8e12
    assert peaks("h200")["tensor_flops_per_s"] == 989.4e12 and peaks("h200")["hbm_bytes_per_s"] == 4.8e12
    assert bf16("l40s") == 362.05e12 and peaks("l40s")["tf32_flops_per_s"] == 183e12
    assert peaks("a100-40gb")["hbm_bytes_per_s"] == 1.555e12
    # V100: fp16 tensor cores only; no TF32, so a float32 convolution runs at the fp32 peak
    v100 = peaks("v100")
    assert v100["tensor_flops_per_s"] == 125e12
    with pytest.raises(InputError, match=r"autocast: 'bf16' is not accepted on the NVIDIA V100-SXM2-32GB \(modelled\)"):
        bf16("v100")
    assert v100["tf32_flops_per_s"] == v100["fp32_flops_per_s"] == 15.7e12


@pytest.mark.parametrize("gpu,peak", [("b200", 2250e12), ("h200", 989.4e12), ("l40s", 362.05e12), ("v100", 125e12)])
def test_low_precision_gemm_runs_at_the_catalogue_peak(gpu, peak):
    # a compute-bound 4096^3 GEMM at 60 % of the tensor-core peak of each GPU (fp16 on the V100)
    b = n = 4096
    autocast = "fp16" if gpu == "v100" else "bf16"
    _, log = retime_spec(_linear_spec(n, n), gpu=gpu, batch_size=b, autocast=autocast, return_log=True)
    gemm = [c for c in log if c.phase == "backward" and c.op == "mm"]
    assert gemm[0].time_s == pytest.approx(2 * b * n * n / (peak * 0.6), rel=1e-12)


def test_cli_retime(tmp_path, capsys):
    src = tmp_path / "mlp.json"
    assert main(["trace", "--model", "mlp", "--batch-size", "4", "--iterations", "1", "--warmup", "0", "--no-hook-overhead", "--out", str(src)]) == 0
    out = tmp_path / "mlp.h100.json"
    assert main(["retime", str(src), "--gpu", "h100", "--batch-size", "256", "--set", "autocast=bf16", "--out", str(out)]) == 0
    tr = load_trace(out)
    assert tr.synthetic["kind"] == "retimed" and tr.environment["batch_size"] == 256 and tr.environment["autocast"] == "bf16"
    assert tr.environment["retimed_from"]["device"] == "cpu"
    assert [p.name for p in tr.params] == [p.name for p in load_trace(src).params]
    assert tr.command.startswith("ddpsim retime") and "--gpu h100" in tr.command
    # the mlp's kernels at batch 256 take a few us each on an H100: the host paces every phase
    assert capsys.readouterr().out.count("(host-paced)") == 3
    assert main(["retime", str(src), "--gpu", "tpu", "--out", str(out)]) == 2
    assert "--gpu: 'tpu' is not accepted" in capsys.readouterr().err
    assert main(["retime", str(src), "--gpu", "h100", "--set", "host_per_op=1", "--out", str(out)]) == 2
    assert "--set: 'host_per_op=1' is not accepted; expected KEY=VALUE with KEY one of" in capsys.readouterr().err
    assert main(["retime", str(src), "--gpu", "h100", "--set", "host_s_per_tensor=x", "--out", str(out)]) == 2
    assert "--set host_s_per_tensor: 'x' is not accepted; expected a number" in capsys.readouterr().err
    zero = [x for f in ("host_forward_s_per_op", "host_backward_s_per_op", "host_optimizer_s_per_op", "host_s_per_tensor")
            for x in ("--set", f"{f}=0")]
    assert main(["retime", str(src), "--gpu", "h100", *zero, "--set", "unaligned_gemm_efficiency=0.6",
                 "--out", str(out)]) == 0
    assert "host issuing ops / GPU kernels: forward 0.000 / " in capsys.readouterr().out
    tr = load_trace(out)
    assert "--set host_s_per_tensor=0 --set unaligned_gemm_efficiency=0.6" in tr.command
    assert tr.synthetic["assumptions"]["unaligned_gemm_efficiency"] == 0.6
    assert tr.synthetic["phase_host_s"] == {"forward": 0, "backward": 0, "optimizer": 0}
    assert main(["retime", str(tmp_path / "nope.json"), "--gpu", "a100", "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err


def _real_cpu_autocast_order(spec, batch_size: int = 2) -> list[int]:
    """The order the hooks fire in one backward under torch's real (CPU) bf16 autocast."""
    import torch

    from ddpsim.trace.models import ddp_params, default_loss

    params = [p for _, p, _ in ddp_params(spec.module)]
    fired: list[int] = []
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda _p, i=i: fired.append(i))
    batch = spec.make_batch(batch_size)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = spec.module(*batch) if isinstance(batch, tuple) else spec.module(batch)
        loss = (spec.loss_fn or default_loss)(out)
    loss.backward()
    return fired


@pytest.mark.parametrize("model, kwargs", [("mlp", {}), ("gpt2-124m", {"n_layer": 1, "seq_len": 8}),
                                           ("bert-base", {"n_layer": 1, "seq_len": 8})])
def test_autocast_ready_order_on_meta_equals_real_autocast(model, kwargs):
    """Real autocast makes a Linear's weight ready before its bias (the reverse of float32):
    the meta-device replay finds the same order as a real CPU autocast backward."""
    import torch

    from ddpsim.trace.autocast_order import autocast_ready_order
    from ddpsim.trace.models import build_model, ddp_params

    real = _real_cpu_autocast_order(build_model(model, **kwargs))
    with torch.device("meta"):
        spec = build_model(model, **kwargs)
    params = [p for _, p, _ in ddp_params(spec.module)]
    assert autocast_ready_order(spec, params, torch.bfloat16, "meta") == real


@pytest.mark.parametrize("model, kwargs", [("gpt2-124m", {"seq_len": 64}), ("bert-base", {"seq_len": 32})])
def test_retimed_bf16_ready_order_equals_a_real_h100_bf16_run(model, kwargs):
    """traces/<model>.measured.h100.json was captured under CUDA bf16 autocast on an H100: the
    retime's gradient-ready order is the one that GPU ran (the plan's rebuilt buckets follow it)."""
    from ddpsim.trace.records import load_trace
    from ddpsim.trace.retime import retime_trace_file

    real = load_trace(ROOT / "traces" / f"{model}.measured.h100.json")
    ret = retime_trace_file(ROOT / "traces" / f"{model}.cpu.json", gpu="h100", batch_size=2, autocast="bf16", **kwargs)
    assert tuple(ret.grad_ready_order) == tuple(real.grad_ready_order)
    ready = ret.iterations[0].grad_ready_s
    assert all(ready[a] <= ready[b] for a, b in zip(ret.grad_ready_order, ret.grad_ready_order[1:]))
