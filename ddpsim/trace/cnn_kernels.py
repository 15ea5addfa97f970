"""What batch norm and cuDNN convolutions cost beyond one roofline kernel per ATen op.

Three rules for the retime's meta-device step (:mod:`ddpsim.trace.retime`). Batch norm in
training makes two passes, forward and backward (``aten/src/ATen/native/cuda/Normalization.cuh``:
``batch_norm_collect_statistics`` then ``batch_norm_transform_input``; ``batch_norm_backward_reduce``
then ``_elemt``). Under bf16 PyTorch runs its own batch norm (``_batch_norm_impl_index`` in
``aten/src/ATen/native/Normalization.cpp`` calls cuDNN only for non-bf16), whose NCHW kernels
launch one block per channel, each streaming at a fixed rate read from the 53 batch norms of a
ResNet-50 H100 profile (an H200's, with 43 % faster HBM, within 6 %). A tensor-core convolution
on NCHW tensors that is not 1x1 stride 1 pays cuDNN's NHWC conversions of its operands and result
(NVIDIA Deep Learning Performance Guide, "Tensor Layouts In Memory: NCHW vs NHWC"; the
``nchwToNhwcKernel`` / ``nhwcToNchwKernel`` of the A100, H100 and H200 ResNet-50 profiles), float32
ones too where the GPU has TF32. :func:`kernel_class` sorts a profile's kernels into the same kinds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

#: ATen batch-norm ops whose ``training`` flag sits at argument 5 (forward) or 7 (backward)
BN_FORWARD_OPS = {"native_batch_norm": 5, "_native_batch_norm_legit": 5}
BN_BACKWARD_OPS = {"native_batch_norm_backward": 7}
#: marks the label of a batch-norm kernel bounded by its one block per channel
PER_CHANNEL = "one block per channel"
#: the ATen convolution ops of a training step on the meta device
_CONVOLUTIONS = ("convolution", "convolution_backward")
#: the classes :func:`kernel_class` sorts a profile's kernels into
KERNEL_CLASSES = ("batch norm", "layout conversion", "convolution/GEMM", "element-wise", "pooling", "optimizer")


class Kernel(NamedTuple):
    """One modelled kernel: its label, bytes moved in HBM, and a cap on its bandwidth (None: HBM's)."""

    label: str
    bytes_moved: float
    bytes_per_s_cap: float | None = None


def _is_channels_last(t: Any) -> bool:
    import torch

    return t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last)


def pytorch_native_batch_norm(x: Any, weight: Any) -> bool:
    """Whether PyTorch runs its own batch-norm kernels rather than cuDNN's (``_batch_norm_impl_index``):
    no weight, an input of fewer than 3 dimensions, a bf16 input or weight, or an fp16 input
    without an fp32 weight."""
    import torch

    if weight is None or x.dim() < 3 or torch.bfloat16 in (x.dtype, weight.dtype):
        return True
    return x.dtype == torch.float16 and weight.dtype != torch.float32


def batch_norm_kernels(name: str, args: tuple, roofline_bytes: float, assumptions: Any) -> list[Kernel] | None:
    """The kernels of a training-mode batch norm (two passes; one block per channel in PyTorch's
    NCHW kernels), or None for an op these rules leave to the roofline (eval mode, another op)."""
    pos = BN_FORWARD_OPS.get(name, BN_BACKWARD_OPS.get(name))
    if pos is None or len(args) <= pos or not args[pos]:
        return None
    backward = name in BN_BACKWARD_OPS
    x = args[1] if backward else args[0]
    weight = args[2] if backward else args[1]
    second_pass = x.nbytes + (args[0].nbytes if backward else 0)
    if not pytorch_native_batch_norm(x, weight) or _is_channels_last(x) or x.dim() < 2:
        return [Kernel(name, roofline_bytes + second_pass)]
    channels = x.shape[1]
    if backward:
        return [Kernel(f"{name}({PER_CHANNEL})", roofline_bytes + second_pass,
                       channels * assumptions.bn_backward_block_bytes_per_s)]
    return [Kernel(f"{name}(statistics, {PER_CHANNEL})", x.nbytes, channels * assumptions.bn_stats_block_bytes_per_s),
            Kernel(f"{name}(normalise)", roofline_bytes)]


def conv_layout_bytes(name: str, args: tuple, out: Any, tensor_core: bool) -> int:
    """Bytes cuDNN's NCHW <-> NHWC conversions move around one tensor-core convolution op on NCHW
    tensors (each converted tensor read and written once); 0 where none are made."""
    if not tensor_core or name not in _CONVOLUTIONS:
        return 0
    backward = name == "convolution_backward"
    x, w, stride = (args[1], args[2], args[4]) if backward else (args[0], args[1], args[3])
    if x.dim() != 4 or _is_channels_last(x):
        return 0
    pointwise = tuple(w.shape[-2:]) == (1, 1)
    if pointwise and all(s == 1 for s in stride):
        return 0  # a GEMM on NCHW
    weight = 0 if pointwise else w.nbytes  # a 1x1 filter is the same in either layout
    if not backward:
        return 2 * (x.nbytes + weight + out.nbytes)
    grad_out, mask = args[0], args[10]
    # the data gradient (dy and the filter in, dx back) and the filter gradient (x and dy in, dw back)
    # each convert dy, x and the filter once
    return 2 * (grad_out.nbytes + weight + x.nbytes) * (bool(mask[0]) + bool(mask[1]))


def kernel_class(kernel: str) -> str | None:
    """The class of a profiled CUDA kernel (:data:`KERNEL_CLASSES`), by its name: cuDNN's
    ``nchwToNhwc`` / ``nhwcToNchw``, batch norm (cuDNN's ``bn_``, PyTorch's ``batch_norm``), the
    optimizer's ``multi_tensor`` kernels, pooling, element-wise and reductions; every other kernel
    is a convolution or GEMM. None for NCCL and DDP's bucket copies."""
    n = kernel.lower()
    for words, cls in ((("nchwtonhwc", "nhwctonchw"), "layout conversion"), (("bn_", "batch_norm"), "batch norm"),
                       (("multi_tensor",), "optimizer"), (("pool",), "pooling"),
                       (("elementwise", "reduce_kernel"), "element-wise"),
                       (("nccl", "catarray", "computeoffsets"), None)):
        if any(w in n for w in words):
            return cls
    return "convolution/GEMM"


def profile_classes_s(path: str | Path) -> dict[str, float]:
    """Seconds per profiled step (``ProfilerStep#N`` spans) of each :func:`kernel_class` in a Kineto trace."""
    from ddpsim.trace.profile.kineto import read_profile

    prof = read_profile(path)
    steps = sum(1 for o in prof.cpu_ops if o.cat == "user_annotation" and o.name.startswith("ProfilerStep#"))
    out = dict.fromkeys(KERNEL_CLASSES, 0.0)
    for g in prof.gpu:
        cls = kernel_class(g.name) if g.cat == "kernel" else None
        if cls is not None:
            out[cls] += g.dur * 1e-6 / steps
    return out
