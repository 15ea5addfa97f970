"""Re-time a trace for a GPU you do not have: a roofline model run on the meta device.

The model is built on PyTorch's ``meta`` device and one real training step runs under a
``TorchDispatchMode`` that charges every ATen operator ``max(flops / (peak * efficiency),
bytes / (hbm_bytes_per_s * memory_efficiency), min_kernel_s)`` (FLOPs from
``torch.utils.flop_counter``; views free) and advances a modelled clock that the
post-accumulate-grad hooks read, so gradient-ready times come in autograd's own order. Attention
is one fused flash kernel (causal halves its FLOPs); autocast is emulated (matmul-class ops in
low precision, norms, softmax and the loss in float32, the ready order of
:mod:`ddpsim.trace.autocast_order`); batch norm and cuDNN's layout conversions follow
:mod:`ddpsim.trace.cnn_kernels`; a bf16/fp16 GEMM with a leading dimension not a multiple of 16
bytes runs cuBLAS's align1 kernels (cuBLAS documentation, "Tensor Core Usage"); the optimizer is a
real ``foreach`` step on meta tensors, measured on the second step; every op passes a launch
queue (:func:`issue`) whose host time per op is fitted by ``studies/fit_host_overhead.py``. The
default efficiencies and their sources are :class:`RooflineAssumptions`'; the GPUs' peaks are the
hardware catalogue's (:mod:`ddpsim.hardware.catalogue`, each with its datasheet). Communication,
host-to-device copies and the data loader are not part of a trace.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from ddpsim.errors import InputError, require
from ddpsim.hardware.catalogue import Catalogue, bundled, scaled
from ddpsim.hardware.schema import Gpu
from ddpsim.schema import is_num
from ddpsim.trace.capture import to_channels_last
from ddpsim.trace.cnn_kernels import PER_CHANNEL, batch_norm_kernels, conv_layout_bytes
from ddpsim.trace.records import Trace, buffer_records, load_trace, param_records


def gpu_peaks(gpu: Gpu) -> dict[str, float]:
    """The dense peaks a retimed trace records (``synthetic.gpu_peaks``), in FLOP/s and bytes/s
    (no TF32: float32 convolutions at the fp32 peak)."""
    f = gpu.dense_tflops
    return {"tensor_flops_per_s": scaled(f.fp16, 12), "tf32_flops_per_s": scaled(f.fp32 if f.tf32 is None else f.tf32, 12),
            "fp32_flops_per_s": scaled(f.fp32, 12), "hbm_bytes_per_s": scaled(gpu.memory_gbps, 9)}


def modelled_name(gpu: Gpu) -> str:
    """The ``device_name`` of a trace retimed for ``gpu``."""
    return f"NVIDIA {gpu.model} (modelled)"


def low_precision_flops_per_s(gpu: Gpu, autocast: str, key: str = "autocast") -> float:
    """The tensor-core peak of ``"bf16"`` or ``"fp16"``; InputError on a GPU without it (V100: no bf16)."""
    peak = gpu.dense_tflops.bf16 if autocast == "bf16" else gpu.dense_tflops.fp16
    if peak is None:
        raise InputError(f"{key}: {autocast!r} is not accepted on the {modelled_name(gpu)}; expected fp16 or none "
                         f"(it has no {autocast} tensor cores: {gpu.summary})")
    return scaled(peak, 12)


@dataclass(frozen=True, kw_only=True)
class RooflineAssumptions:
    """Achievable fractions of the peaks, the per-kernel floor, the host's time to issue an op (per
    phase, plus per tensor argument; all 0: the GPU never waits on the host), and the per-channel rate
    of PyTorch's NCHW batch-norm kernels (:mod:`ddpsim.trace.cnn_kernels`). Sources of the defaults:
    ``compute_efficiency`` large bf16 GEMMs on A100/H100 (60-75 % of peak); ``cuda_core_efficiency``
    the V100 ResNet-50 fp32 profile's convolutions and GEMMs (777.6 GFLOP in 60.0 ms a step);
    ``tf32_efficiency`` the A100 profile's convolutions (777.2 GFLOP in 13.7 ms);
    ``unaligned_gemm_efficiency`` the three align1 GEMMs of GPT-2 124M's LM head in an H100 profile
    (124 TFLOP/s of 989.4); the batch-norm rates the 53 batch norms of a ResNet-50 H100 profile (all
    in ``tests/data/``); the host times fitted by ``studies/fit_host_overhead.py`` on six host-bound
    models on one H100 host with torch 2.11 (another CPU or torch version moves them).
    """

    compute_efficiency: float = 0.6
    memory_efficiency: float = 0.75
    min_kernel_s: float = 4e-6
    host_forward_s_per_op: float = 38.5e-6
    host_backward_s_per_op: float = 39e-6
    host_optimizer_s_per_op: float = 46e-6
    host_s_per_tensor: float = 2.3e-6
    unaligned_gemm_efficiency: float = 0.126
    cuda_core_efficiency: float = 0.83
    tf32_efficiency: float = 0.36
    bn_stats_block_bytes_per_s: float = 2.07e9
    bn_backward_block_bytes_per_s: float = 4.34e9

    def __post_init__(self) -> None:
        for keys, ok, expected in (
                (("compute_efficiency", "memory_efficiency", "unaligned_gemm_efficiency",
                  "cuda_core_efficiency", "tf32_efficiency"), lambda v: 0 < v <= 1,
                 "a number in (0, 1]"),
                (("bn_stats_block_bytes_per_s", "bn_backward_block_bytes_per_s"), lambda v: v > 0,
                 "a number of bytes per second > 0"),
                (("min_kernel_s", *HOST_FIELDS.values(), "host_s_per_tensor"), lambda v: v >= 0,
                 "a number of seconds >= 0")):
            for k in keys:
                v = getattr(self, k)
                require(is_num(v) and ok(v), k, v, expected)

    def without_host(self) -> RooflineAssumptions:
        """The same fractions with no host time (the kernels alone)."""
        return replace(self, **dict.fromkeys(HOST_FIELDS.values(), 0.0), host_s_per_tensor=0.0)

    def host_s(self, phase: str, tensors: int) -> float:
        """The host's time to issue one op of ``phase`` taking ``tensors`` tensors: the phase's time
        per op plus the time per tensor (a ``foreach`` op walks hundreds); 0 in other phases."""
        if phase not in HOST_FIELDS:
            return 0.0
        return getattr(self, HOST_FIELDS[phase]) + tensors * self.host_s_per_tensor


#: per phase, the :class:`RooflineAssumptions` field holding the host's time per charged op
HOST_FIELDS = {"forward": "host_forward_s_per_op", "backward": "host_backward_s_per_op",
               "optimizer": "host_optimizer_s_per_op"}


def gemm_aligned(matrices: Sequence[Any]) -> bool:
    """Whether every matrix's leading dimension is a multiple of 16 bytes, as cuBLAS's aligned Tensor
    Core kernels need (cuBLAS documentation, "Tensor Core Usage"; GPT-2's 50,257 vocabulary is not)."""
    for t in matrices:
        if t.dim() < 2 or 1 in t.shape[-2:]:
            continue
        rows, cols = t.stride()[-2:]
        ld = rows if cols == 1 else cols if rows == 1 else None
        if ld is not None and (ld * t.element_size()) % 16:
            return False
    return True


def issue(gpu_free_s: float, host_s: float, kernel_s: float, issue_s: float) -> tuple[float, float]:
    """One op through the launch queue: the host spends ``issue_s`` issuing it, the GPU runs it once
    issued and free. Returns the new ``(gpu_free_s, host_s)``."""
    host_s += issue_s
    return max(gpu_free_s, host_s) + kernel_s, host_s


def launch_queue_s(ops: Sequence[tuple[float, float]]) -> float:
    """When the last of ``ops`` (kernel seconds, host seconds to issue it) ends, host and GPU
    starting together at 0 (:func:`issue`)."""
    gpu_s = host_s = 0.0
    for kernel_s, issue_s in ops:
        gpu_s, host_s = issue(gpu_s, host_s, kernel_s, issue_s)
    return gpu_s


def op_time_s(*, flops: float, bytes_moved: float, peak_flops_per_s: float, hbm_bytes_per_s: float,
              assumptions: RooflineAssumptions, aligned: bool = True, unit: str = "tensor",
              bytes_per_s_cap: float | None = None) -> float:
    """Roofline time of one kernel: ``max(flops / (peak * e), bytes / min(hbm * memory_efficiency,
    bytes_per_s_cap), min_kernel_s)``, 0 when empty; ``e`` the efficiency of ``unit`` (:func:`_unit`;
    ``unaligned_gemm_efficiency`` for an unaligned tensor-core GEMM)."""
    if flops <= 0 and bytes_moved <= 0:
        return 0.0
    ce = {"cuda_cores": assumptions.cuda_core_efficiency, "tf32": assumptions.tf32_efficiency}.get(
        unit, assumptions.compute_efficiency if aligned else assumptions.unaligned_gemm_efficiency)
    cap = math.inf if bytes_per_s_cap is None else bytes_per_s_cap
    bw = min(hbm_bytes_per_s * assumptions.memory_efficiency, cap)
    return max(flops / (peak_flops_per_s * ce), bytes_moved / bw, assumptions.min_kernel_s)


def get_gpu(name: str, catalogue: Catalogue | None = None) -> Gpu:
    """A GPU of the hardware catalogue (None: the bundled one); InputError otherwise."""
    cat = bundled() if catalogue is None else catalogue
    key = str(name).lower()
    require(key in cat.gpus, "--gpu", name,
            f"one of {', '.join(sorted(cat.gpus))} (the GPUs of the hardware catalogue)")
    return cat.gpus[key]


@dataclass(frozen=True, kw_only=True)
class OpCost:
    """One charged kernel; ``host`` False for a further kernel of the op before it (no host time)."""

    phase: str
    op: str
    flops: float
    bytes_moved: float
    time_s: float
    tensors: int = 1
    aligned: bool = True
    host: bool = True


# ---- the roofline dispatch mode ---------------------------------------------------------------

_FREE_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_unsafe_view", "detach",
             "lift_fresh", "alias", "set_", "_reshape_alias", "sym_size", "sym_stride", "is_same_size", "_local_scalar_dense",
             "scalar_tensor", "arange"}
#: the cuBLAS GEMMs whose Tensor Core kernels need aligned matrices (:func:`gemm_aligned`)
_GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul"}
_CONV_OPS = {"convolution", "convolution_backward", "_convolution", "cudnn_convolution"}
_MATMUL_OPS = _GEMM_OPS | _CONV_OPS | {"addmv", "mv"}
#: the op label of cuDNN's NCHW <-> NHWC conversions around a convolution (:func:`conv_layout_bytes`)
LAYOUT_CONVERSION = "nchw_nhwc_conversion(cudnn)"
_FP32_OPS = {"native_layer_norm", "_softmax", "_log_softmax", "nll_loss_forward", "nll_loss2d_forward", "mse_loss",
             "native_group_norm", "norm", "linalg_vector_norm"}


def _tensors(tree: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _unit(gpu: Gpu, peaks: dict[str, float], name: str, dtype: Any) -> tuple[str, float]:
    """Where an op's FLOPs run, and that unit's peak: ``"tensor"`` for bf16/fp16, ``"tf32"`` for a
    float32 convolution where the GPU has TF32 (cuDNN's ``allow_tf32``), ``"cuda_cores"`` otherwise
    (float32 matmuls: PyTorch's ``allow_tf32=False`` for matmul). ``peaks``: :func:`gpu_peaks`."""
    import torch

    if dtype == torch.float16:
        return "tensor", peaks["tensor_flops_per_s"]
    if dtype == torch.bfloat16:
        return "tensor", low_precision_flops_per_s(gpu, "bf16")  # refuses a GPU without bf16
    if name in _CONV_OPS and dtype == torch.float32 and peaks["tf32_flops_per_s"] > peaks["fp32_flops_per_s"]:
        return "tf32", peaks["tf32_flops_per_s"]
    return "cuda_cores", peaks["fp32_flops_per_s"]


def _bytes_moved(func: Any, name: str, args: Any, ins: list[Any], outs: list[Any]) -> int:
    """HBM bytes of one op: every tensor input read and output written; an in-place op reads and
    writes its first argument; ``embedding`` reads only the rows it gathers."""
    if name == "embedding":
        return sum(t.nbytes for t in ins[1:]) + 2 * sum(t.nbytes for t in outs)
    if func._schema.is_mutable:
        return sum(t.nbytes for t in ins) + sum(t.nbytes for t in _tensors(args[0] if args else ()))
    return sum(t.nbytes for t in ins) + sum(t.nbytes for t in outs)


def _autocast(mode: Any, args: Any, kwargs: Any, to: Any, charge: bool) -> tuple[Any, Any]:
    """``args`` and ``kwargs`` with their floating-point tensors cast to ``to``, as autocast does;
    each cast charged to the roofline ``mode`` when ``charge``."""
    import torch
    from torch.utils._pytree import tree_map

    def cast(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != to:
            if charge:
                mode.charge("_to_copy(autocast)", 0.0, x.nbytes + x.numel() * torch.empty((), dtype=to).element_size(), to)
            return x.to(to)
        return x
    return tree_map(cast, args), tree_map(cast, kwargs)


def _make_mode(gpu: Gpu, assumptions: RooflineAssumptions, autocast_dtype: Any, channels_last: bool = False) -> Any:
    import torch
    from torch.utils import flop_counter
    from torch.utils._python_dispatch import TorchDispatchMode

    peaks = gpu_peaks(gpu)

    class RooflineMode(TorchDispatchMode):
        """Runs each op (on meta tensors) and charges its roofline time to ``clock_s``: a
        :class:`~ddpsim.trace.capture.StepRunner`'s clock."""

        def __init__(self) -> None:
            super().__init__()
            self.clock_s = 0.0  # when the GPU's last issued kernel ends
            self.host_s = 0.0   # when the host has issued its last op
            self.phase = "forward"
            self.log: list[OpCost] = []

        def start(self, phase: str) -> float:
            """Start ``phase`` with host and GPU synchronised (as a capture times each phase); now."""
            self.clock_s = self.host_s = max(self.clock_s, self.host_s)
            self.phase = phase
            return self.clock_s

        def now(self) -> float:
            return self.clock_s

        stop = now

        def charge(self, name: str, flops: float, bytes_moved: float, dtype: Any, tensors: int = 1,
                   aligned: bool = True, cap: float | None = None, host: bool = True) -> float:
            """Charge one kernel; ``host=False`` for a further kernel of the same op (no host time)."""
            unit, peak = _unit(gpu, peaks, name, dtype)
            t = op_time_s(flops=flops, bytes_moved=bytes_moved, peak_flops_per_s=peak,
                          hbm_bytes_per_s=peaks["hbm_bytes_per_s"], assumptions=assumptions, aligned=aligned,
                          unit=unit, bytes_per_s_cap=cap)
            host_s = assumptions.host_s(self.phase, tensors) if host else 0.0
            self.clock_s, self.host_s = issue(self.clock_s, self.host_s, t, host_s)
            self.log.append(OpCost(phase=self.phase, op=name, flops=flops, bytes_moved=bytes_moved, time_s=t,
                                   tensors=tensors, aligned=aligned, host=host))
            return t

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = func._overloadpacket.__name__
            if autocast_dtype is not None:
                if name in _MATMUL_OPS:
                    args, kwargs = _autocast(self, args, kwargs, autocast_dtype, charge=self.phase == "forward")
                elif name in _FP32_OPS:
                    args, kwargs = _autocast(self, args, kwargs, torch.float32, charge=True)
            out = func(*args, **kwargs)
            if channels_last and name in _CONV_OPS:  # cuDNN keeps channels-last; the meta kernels do not
                out = to_channels_last(out)
            if func.is_view or name in _FREE_OPS:
                return out
            ins, outs = _tensors((args, kwargs)), _tensors(out)
            f = flop_counter.flop_registry.get(func._overloadpacket)
            flops = 0.0 if f is None else float(f(*args, **kwargs, out_val=out))
            bytes_moved = _bytes_moved(func, name, args, ins, outs)
            dtype = next((t.dtype for t in ins if t.is_floating_point()), torch.float32)
            # the op's kernels: the roofline's one, or batch norm's as it runs, and cuDNN's layout
            # conversions around a convolution (ddpsim.trace.cnn_kernels)
            aligned = name not in _GEMM_OPS or dtype not in (torch.bfloat16, torch.float16) or gemm_aligned(ins + outs)
            kernels = batch_norm_kernels(name, args, bytes_moved, assumptions)
            if kernels is None:
                self.charge(name, flops, bytes_moved, dtype, len(ins), aligned)
            for i, k in enumerate(kernels or ()):
                self.charge(k.label, 0.0, k.bytes_moved, dtype, len(ins), cap=k.bytes_per_s_cap, host=i == 0)
            converted = conv_layout_bytes(name, args, out, _unit(gpu, peaks, name, dtype)[0] != "cuda_cores")
            if converted:
                self.charge(LAYOUT_CONVERSION, 0.0, converted, dtype, host=False)
            return out

    return RooflineMode()


def _make_sdpa_mode(roofline: Any, autocast_dtype: Any) -> Any:
    """A TorchFunctionMode that replaces ``F.scaled_dot_product_attention`` by a fused-kernel cost."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode
    from torch.utils import flop_counter

    class FlashAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: Any, k: Any, v: Any, causal: bool) -> Any:
            dtype = autocast_dtype if (autocast_dtype is not None and q.dtype == torch.float32) else q.dtype
            out = torch.empty(q.shape[:-1] + v.shape[-1:], dtype=dtype, device=q.device)
            flops = flop_counter.sdpa_flop_count(q.shape, k.shape, v.shape) * (0.5 if causal else 1.0)
            es = out.element_size()
            roofline.charge("flash_attention_forward", flops, (q.numel() + k.numel() + v.numel() + out.numel()) * es, dtype, 3)
            ctx.shapes = (q.shape, k.shape, v.shape, out.shape, causal, dtype, es)
            ctx.dtypes = (q.dtype, k.dtype, v.dtype)
            return out

        @staticmethod
        def backward(ctx: Any, grad_out: Any) -> Any:
            qs, ks, vs, os_, causal, dtype, es = ctx.shapes
            flops = flop_counter.sdpa_backward_flop_count(os_, qs, ks, vs) * (0.5 if causal else 1.0)
            n = math.prod(qs) + math.prod(ks) + math.prod(vs)
            roofline.charge("flash_attention_backward", flops, (2 * n + 2 * math.prod(os_)) * es, dtype, 4)
            return (*(torch.empty(s, dtype=d, device=grad_out.device) for s, d in zip((qs, ks, vs), ctx.dtypes)), None)

    class SdpaMode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if (func is F.scaled_dot_product_attention and kwargs.get("attn_mask") is None
                    and not kwargs.get("dropout_p", 0.0)):
                return FlashAttention.apply(*args[:3], bool(kwargs.get("is_causal", False)))
            return func(*args, **kwargs)

    return SdpaMode()


# ---- driver -------------------------------------------------------------------------------

def retime_spec(spec: Any, *, gpu: str | Gpu, batch_size: int, autocast: str | None = None, dtype: str = "float32",
                optimizer: str = "sgd", assumptions: RooflineAssumptions | None = None, command: str | None = None,
                environment: dict[str, Any] | None = None, extra_synthetic: dict[str, Any] | None = None,
                channels_last: bool = False, return_log: bool = False) -> Any:
    """A synthetic :class:`Trace` of one training step of ``spec`` (moved to ``meta``) on ``gpu`` at
    per-GPU ``batch_size`` (``(trace, log)`` of :class:`OpCost` with ``return_log``); ``environment``
    the source trace's, updated; ``channels_last`` runs in ``torch.channels_last`` (no cuDNN layout
    conversions). InputError: unknown GPU, bad batch size, autocast, optimizer or dtype."""
    import torch

    from ddpsim.trace.autocast_order import autocast_ready_order, reslot
    from ddpsim.trace.capture import AUTOCASTS, DTYPES, OPTIMIZERS, StepRunner, batch_shapes, check_choice, check_count

    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    a = assumptions or RooflineAssumptions()
    check_count(batch_size, "batch_size", 1)
    check_choice(autocast, "autocast", (None, *AUTOCASTS))
    check_choice(optimizer, "optimizer", OPTIMIZERS)
    check_choice(dtype, "dtype", DTYPES)
    for key, low in (("autocast", autocast), ("dtype", {"bfloat16": "bf16"}.get(dtype))):
        if low is not None:
            low_precision_flops_per_s(g, low, key)  # refuses bf16 on a GPU without bf16 tensor cores
    ac_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(autocast or "")
    mode = _make_mode(g, a, ac_dtype, channels_last)
    runner = StepRunner(torch, spec, dev=torch.device("meta"), batch_size=batch_size, dtype=dtype, autocast=None,
                         optimizer=optimizer, clock=mode, channels_last=channels_last, sgd_foreach=True)
    with _make_sdpa_mode(mode, ac_dtype), mode:  # the second step's figures: the optimizer state exists then
        runner.run(1, 0)
        first_log_len = len(mode.log)
        (sample,), (order,) = runner.run(0, 1)
    log = mode.log[first_log_len:]
    if ac_dtype is not None:  # the ready-time slots given in the order CUDA autocast makes the gradients ready
        ac_order = autocast_ready_order(spec, runner.params, ac_dtype, "meta", getattr(torch, dtype))
        if ac_order is not None and sorted(ac_order) == sorted(order):
            sample, order = replace(sample, grad_ready_s=reslot(sample.grad_ready_s, order, ac_order)), ac_order
    records = param_records(runner.plist, lambda i: sample.grad_ready_s[i] is not None)
    env = copy.deepcopy(environment or {})
    env.update({"device": "cuda", "device_name": modelled_name(g), "batch_size": batch_size, "dtype": dtype, "autocast": autocast,
                "optimizer": optimizer, "num_threads": None, "input_shape": batch_shapes(runner.batch)})
    if channels_last:
        env["memory_format"] = "channels_last"
    for k in ("cuda_version", "nccl_version", "hook_overhead_raw_frac", "grad_ready_order_consistent", "num_warmup", "num_iters", "note"):
        env.pop(k, None)
    env["torch_version"] = torch.__version__
    low = autocast or {"bfloat16": "bf16", "float16": "fp16"}.get(dtype)
    peaks = gpu_peaks(g)
    peak = peaks["fp32_flops_per_s"] if low is None else low_precision_flops_per_s(g, low)
    fwd_flops = sum(c.flops for c in log if c.phase == "forward")
    bwd_flops = sum(c.flops for c in log if c.phase == "backward")
    step_s = sample.forward_s + sample.backward_s + sample.optimizer_s + sample.zero_grad_s
    synthetic = {
        "kind": "retimed",
        "gpu": modelled_name(g), "gpu_peaks": peaks, "gpu_source": g.summary,
        "assumptions": asdict(a),
        "method": _RETIME_METHOD,
        "forward_flops": fwd_flops, "backward_flops": bwd_flops, "num_kernels": len(log),
        "phase_kernel_s": {ph: sum(c.time_s for c in log if c.phase == ph) for ph in HOST_FIELDS},
        "phase_host_s": {ph: sum(a.host_s(ph, c.tensors) for c in log if c.phase == ph and c.host) for ph in HOST_FIELDS},
        "unaligned_gemms": sum(1 for c in log if not c.aligned),
        "unaligned_gemm_s": sum(c.time_s for c in log if not c.aligned),
        "layout_conversions": sum(1 for c in log if c.op == LAYOUT_CONVERSION),
        "layout_conversion_s": sum(c.time_s for c in log if c.op == LAYOUT_CONVERSION),
        "per_channel_batch_norms": sum(1 for c in log if PER_CHANNEL in c.op),
        "per_channel_batch_norm_s": sum(c.time_s for c in log if PER_CHANNEL in c.op),
        "modelled_step_s": step_s,
        "mfu": (fwd_flops + bwd_flops) / step_s / peak if step_s > 0 else None,
        "mfu_peak_flops_per_s": peak,
        **(extra_synthetic or {}),
    }
    trace = Trace(model=spec.name, params=records, buffers=buffer_records(runner.module), grad_ready_order=tuple(order), iterations=(sample,),
                  environment=env, hook_overhead_frac=None, synthetic=synthetic, command=command)
    return (trace, log) if return_log else trace


_RETIME_METHOD = ("roofline per ATen op on the meta device: time = max(flops/(peak*compute_efficiency), "
                  "bytes/(hbm*memory_efficiency), min_kernel_s); views free; attention as a fused flash kernel "
                  "(causal halves FLOPs); float32 on CUDA cores at cuda_core_efficiency, TF32 convolutions at "
                  "tf32_efficiency; a bf16/fp16 GEMM with a leading dimension not a multiple of 16 bytes at "
                  "unaligned_gemm_efficiency; training batch norm in two passes, PyTorch's NCHW bf16 batch norm "
                  "bounded per channel, cuDNN's NCHW/NHWC conversions around tensor-core convolutions that are not "
                  "1x1 stride 1 (ddpsim.trace.cnn_kernels); ops issued through a launch queue (host time per op by "
                  "phase + per tensor argument; the GPU starts a kernel once issued and free); autocast emulated (matmul-class "
                  "ops in low precision, norms/softmax/loss in fp32, weight casts charged in forward); grad-ready "
                  "time = modelled clock when the post-accumulate-grad hook fires; optimizer = foreach step on meta "
                  "(second step); zero_grad 0")


def retime_trace_file(path: str | Path, *, gpu: str, batch_size: int | None = None, seq_len: int | None = None,
                      autocast: str | None = None, optimizer: str | None = None,
                      assumptions: RooflineAssumptions | None = None, command: str | None = None,
                      catalogue: Catalogue | None = None, channels_last: bool = False, return_log: bool = False) -> Any:
    """:func:`retime_spec` of the trace at ``path``'s model rebuilt on ``meta`` (None keeps the
    source's batch size, seq_len, autocast and optimizer; autocast ``"none"`` drops it). InputError: an
    unreadable trace, an unknown GPU, a model that cannot be rebuilt or whose parameters differ."""
    import torch

    from ddpsim.trace.models import build_model, ddp_params

    g = get_gpu(gpu, catalogue)
    src = load_trace(path)
    env = src.environment
    kwargs: dict[str, Any] = {}
    input_shape = None
    if env.get("seq_len") is not None or seq_len is not None:
        kwargs["seq_len"] = seq_len if seq_len is not None else env["seq_len"]
    elif isinstance(env.get("input_shape"), list) and env["input_shape"] and all(isinstance(d, int) for d in env["input_shape"]):
        input_shape = tuple(env["input_shape"][1:])
    if env.get("n_layer") is not None:
        kwargs["n_layer"] = env["n_layer"]
    if ":" in src.model:
        kwargs.update(env.get("factory_kwargs") or {})
    with torch.device("meta"):
        spec = build_model(src.model, seed=int(env.get("seed", 0)), input_shape=input_shape,
                           input_dtype=env.get("input_dtype") if ":" in src.model or input_shape else None, **kwargs)
    built = [(n, tuple(p.shape)) for n, p, _ in ddp_params(spec.module)]
    if built != [(p.name, p.shape) for p in src.params]:
        raise InputError(f"--from: {str(path)!r}: the rebuilt model {src.model!r} has different parameters from the trace's; expected a trace of an unmodified built-in or factory model")
    ac = None if autocast == "none" else autocast if autocast is not None else env.get("autocast")
    if batch_size is None:
        batch_size = int(env.get("batch_size", 1))
    base_env = dict(env)
    base_env["retimed_from"] = {"path": str(path), "device": env.get("device"), "device_name": env.get("device_name"),
                                "batch_size": env.get("batch_size"),
                                "median_step_s": sum(src.phase(n).median_s for n in ("forward", "backward", "optimizer", "zero_grad"))}
    if "seq_len" in kwargs:
        base_env["seq_len"] = kwargs["seq_len"]
    trace, log = retime_spec(spec, gpu=g, batch_size=batch_size, autocast=ac, dtype=env.get("dtype", "float32"),
                             optimizer=optimizer or env.get("optimizer", "sgd"), assumptions=assumptions,
                             command=command, environment=base_env,
                             extra_synthetic={"source_command": src.command, "source_synthetic": src.synthetic},
                             channels_last=channels_last, return_log=True)
    # the Dynamo graph (compiled DDP) does not depend on the device; its bytes on the parameters' dtypes
    if src.compiled_graph is not None and [p.size_bytes for p in trace.params] == [p.size_bytes for p in src.params]:
        trace = replace(trace, compiled_graph=src.compiled_graph)
    return (trace, log) if return_log else trace
