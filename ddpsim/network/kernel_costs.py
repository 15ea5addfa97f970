"""Device kernels of DDP's reducer and its comm hooks, as pure cost functions. Every kernel is
memory-bound: its bytes moved (read + write) at the copy bandwidth
(``SimConfig.copy_bandwidth_bytes_per_s``; no bandwidth: 0 s) and, when the trace gives a
``peak_flops_per_s``, at least ``flops / peak``. A gradient-copy kernel on a GPU takes at least a launch
floor (``SimConfig.copy_kernel_floor_s``). The byte counts follow the kernels DDP enqueues:
``torch/csrc/distributed/c10d/reducer.cpp`` (``Reducer::mark_variable_ready_dense``,
``flush_deferred_copies``, ``finalize_bucket_dense``), ``torch/nn/parallel/distributed.py``
(``_MixedPrecision``, ``_delay_grad_buffer``), ``torch/distributed/algorithms/ddp_comm_hooks/``
(``default_hooks.py``, ``mixed_precision_hooks.py``, ``powerSGD_hook.py``).
"""

from __future__ import annotations

import math
from typing import Sequence

from ddpsim.plan.planner import MixedPrecision
from ddpsim.units import DTYPE_SIZE_BYTES

#: PowerSGDState's default ``min_compression_rate`` (powerSGD_hook.py)
POWERSGD_MIN_COMPRESSION_RATE = 2


def kernel_s(bytes_moved: float, flops: float, bandwidth_bytes_per_s: float | None,
             peak_flops_per_s: float | None) -> float:
    """A memory-bound kernel's time, at least ``flops / peak`` when a peak is known."""
    t = bytes_moved / bandwidth_bytes_per_s if bandwidth_bytes_per_s else 0.0
    if peak_flops_per_s:
        t = max(t, flops / peak_flops_per_s)
    return t


def copy_kernel_s(bytes_moved: float, bandwidth_bytes_per_s: float | None, floor_s: float) -> float:
    """One copy kernel (a copy-in or copy-out; a write-only zero-fill of an unused parameter's view,
    ``mark_variable_ready_dense``, or of the delayed flat buffer, ``_clear_grad_buffer``): its bytes at the
    copy bandwidth, at least ``floor_s`` (a kernel's launch and tail on a GPU; 0 on a CPU)."""
    t = kernel_s(bytes_moved, 0, bandwidth_bytes_per_s, None)
    return max(t, floor_s) if bytes_moved > 0 else t


def param_elem_bytes(dtype: str, mixed_precision: MixedPrecision | None) -> tuple[int, int, int]:
    """``(own, grad, reduce)`` element sizes of a ``dtype`` parameter under DDP's ``_MixedPrecision``:
    gradients and buckets in ``param_dtype`` (``distributed.py _root_copy_hook``,
    ``Reducer::set_mixed_precision_param_dtype``), reduced in ``reduce_dtype`` when it differs
    (``mixed_precision_hooks._reducer_allreduce_and_upcast_hook``)."""
    own = DTYPE_SIZE_BYTES[dtype]
    if mixed_precision is None:
        return own, own, own
    grad = DTYPE_SIZE_BYTES[mixed_precision.param_dtype] if mixed_precision.param_dtype else own
    red = DTYPE_SIZE_BYTES[mixed_precision.reduce_dtype] if mixed_precision.reduce_dtype else grad
    return own, grad, red


# ---- the reducer's gradient copies (reducer.cpp) and the hooks' divisions -----------------

def read_write_s(nbytes: int, bandwidth_bytes_per_s: float | None, floor_s: float = 0.0) -> float:
    """One kernel that reads and writes ``nbytes``: the gradient's copy into its bucket view with
    the division by the world size fused (``mark_variable_ready_dense``), batched_grad_copy's
    ``_foreach_copy_`` of the used gradients and ``div_`` of the flat bucket
    (``flush_deferred_copies``), ``allreduce_hook``'s division of the bucket and
    ``_delayed_all_reduce_hook``'s of the delayed flat buffer (the last two with no floor)."""
    return copy_kernel_s(2 * nbytes, bandwidth_bytes_per_s, floor_s)


def bucket_copy_out_s(used_numels: Sequence[int], reduce_elem_bytes: int, own_elem_bytes: int,
                      bandwidth_bytes_per_s: float | None, floor_s: float) -> float:
    """``finalize_bucket_dense``: each used parameter's gradient copied out of the reduced
    bucket (read the reduce dtype, write the parameter's own), one kernel per parameter, each
    at least ``floor_s``; without a floor, the bucket's bytes at the bandwidth."""
    per_elem = reduce_elem_bytes + own_elem_bytes
    if floor_s <= 0:
        return kernel_s(sum(used_numels) * per_elem, 0, bandwidth_bytes_per_s, None)
    return sum(copy_kernel_s(n * per_elem, bandwidth_bytes_per_s, floor_s) for n in used_numels)


# ---- mixed precision (distributed.py _MixedPrecision, mixed_precision_hooks.py) ------------

def mp_param_cast_s(param_bytes: int, param_dtype_bytes: int, bandwidth_bytes_per_s: float | None) -> float:
    """``_root_copy_hook`` before every forward: every parameter read in its own dtype
    (``param_bytes`` in all) and written in ``param_dtype`` (``param_dtype_bytes`` in all)."""
    return kernel_s(param_bytes + param_dtype_bytes, 0, bandwidth_bytes_per_s, None)


def mp_bucket_cast_s(numel: int, grad_elem_bytes: int, reduce_elem_bytes: int,
                     bandwidth_bytes_per_s: float | None) -> float:
    """``_reducer_allreduce_and_upcast_hook``: the bucket cast to ``reduce_dtype`` before its
    all-reduce (read grad dtype, write reduce dtype); nothing when the two are equal."""
    moved = numel * (grad_elem_bytes + reduce_elem_bytes) if reduce_elem_bytes != grad_elem_bytes else 0
    return kernel_s(moved, 0, bandwidth_bytes_per_s, None)


def mp_upcast_s(numel: int, used_numel: int, grad_elem_bytes: int, reduce_elem_bytes: int, own_elem_bytes: int,
                bandwidth_bytes_per_s: float | None) -> float:
    """After a bucket's all-reduce, on the hook's side stream: ``div_`` of the reduced bucket
    (read + write the reduce dtype) and the used gradients' upcast to the parameter's own
    dtype (read grad dtype, write own; nothing when equal)."""
    upcast = used_numel * (grad_elem_bytes + own_elem_bytes) if grad_elem_bytes != own_elem_bytes else 0
    return kernel_s(2 * numel * reduce_elem_bytes + upcast, 0, bandwidth_bytes_per_s, None)


# ---- default comm hooks (default_hooks.py) --------------------------------------------------

def fp16_compress_s(bucket_bytes: int, numel: int, bandwidth_bytes_per_s: float | None) -> float:
    """``fp16_compress_hook`` / ``bf16_compress_hook``: ``buffer.to(half)`` (read the bucket,
    write 2 bytes per element), then ``div_`` of the half buffer (read 2, write 2 per element)."""
    return kernel_s(bucket_bytes + 6 * numel, 0, bandwidth_bytes_per_s, None)


def fp16_decompress_s(numel: int, bandwidth_bytes_per_s: float | None, floor_s: float) -> float:
    """The compress hooks' ``decompress`` callback: the half result copied back into the
    float32 bucket (read 2, write 4 bytes per element), one kernel."""
    return copy_kernel_s(6 * numel, bandwidth_bytes_per_s, floor_s)


# ---- PowerSGD (powerSGD_hook.py) ------------------------------------------------------------

def powersgd_split(shapes: Sequence[tuple[int, ...]], elem_bytes: int, rank: int) -> dict[str, float]:
    """Bytes of PowerSGD's three all-reduces and its kernels' traffic/flops for one bucket of
    ``shapes``: a tensor is ``n x m`` (``shape[0]`` x rest), ``r = min(n, m, rank)``, compressed iff
    not 1-D and ``(n + m) * r * min_compression_rate < n * m`` (``powerSGD_hook._should_compress``)."""
    u = p = q = 0
    nm = n_elems = 0
    flops_mm = 0.0
    orth_p = orth_q = 0.0
    for shape in shapes:
        numel = math.prod(shape)
        n_elems += numel
        if len(shape) <= 1:
            u += numel
            continue
        n, m = shape[0], numel // shape[0] if shape[0] else 0
        r = min(n, m, rank)
        if (n + m) * r * POWERSGD_MIN_COMPRESSION_RATE < n * m:
            p += n * r
            q += m * r
            nm += n * m
            flops_mm += 2.0 * n * m * r
            orth_p += 2.0 * n * r * r
            orth_q += 2.0 * m * r * r
        else:
            u += numel
    e = elem_bytes
    return {
        "uncompressed_bytes": u * e, "p_bytes": p * e, "q_bytes": q * e,
        # hook body: error feedback add (r 2N w N), clone (r N w N), cat of uncompressed (2U),
        # orthogonalise Q, P = M Q (reads M, writes P)
        "launch_bytes": (5 * n_elems + 2 * u + nm + p) * e, "launch_flops": flops_mm + orth_q,
        # compute_qs: orthogonalise P, Q = M^T P (reads M, writes Q)
        "qs_bytes": (nm + q + p) * e, "qs_flops": flops_mm + orth_p,
        # decompress: M = P Q^T (writes M), error = input_cp - input (r 2N w N), unpack U (2U)
        "decompress_bytes": (nm + p + q + 3 * n_elems + 2 * u) * e, "decompress_flops": flops_mm,
    }


def powersgd_kernel_s(split: dict[str, float], stage: str, bandwidth_bytes_per_s: float | None,
                      peak_flops_per_s: float | None) -> float:
    """One of PowerSGD's kernels (:func:`powersgd_split`'s ``stage``): "launch" the hook body before the
    first all-reduce, "qs" the ``compute_qs`` callback, "decompress" the ``decompress`` callback."""
    return kernel_s(split[f"{stage}_bytes"], split[f"{stage}_flops"], bandwidth_bytes_per_s, peak_flops_per_s)
