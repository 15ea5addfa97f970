"""DDP features the engine's ranks consult, computed once per simulation as plain numbers: the
per-layout bucket figures, the buffer broadcast, ``delay_all_reduce_named_params`` and
``nn.SyncBatchNorm``. Sources: ``torch/csrc/distributed/c10d/reducer.cpp`` (bucket views,
``finalize_bucket_dense``, ``should_skip_all_reduce_bucket``), ``torch/nn/parallel/distributed.py``
(``_sync_buffers``, ``_register_delay_all_reduce_hook``, ``_MixedPrecision``) and
``torch/nn/modules/_functions.py`` (``SyncBatchNorm``)."""

from __future__ import annotations

import math
from typing import Any

from ddpsim.errors import InputError
from ddpsim.network.kernel_costs import (bucket_copy_out_s, copy_kernel_s, mp_bucket_cast_s, mp_upcast_s,
                                         param_elem_bytes, powersgd_kernel_s, powersgd_split, read_write_s)
from ddpsim.plan.planner import Bucket, DDPOptions, MixedPrecision, compute_bucket_assignment_by_size
from ddpsim.trace.records import Trace
from ddpsim.units import DTYPE_SIZE_BYTES, MIB

#: find_unused_parameters' autograd-graph DFS (``Reducer::search_unused_parameters``), seconds
#: per parameter: about two autograd nodes per parameter (its AccumulateGrad and the op
#: producing its gradient), ~2 us each for the unordered_set insert and edge walk on a server
#: CPU. A trace may override it with ``environment["graph_search_s_per_param"]``.
GRAPH_SEARCH_S_PER_PARAM = 4e-6
#: DDP's ``broadcast_bucket_size`` (distributed.py, ``_sync_buffers`` -> ``_broadcast_coalesced``)
BROADCAST_BUCKET_BYTES = 250 * MIB
#: element size of DDP's ``_delay_grad_buffer`` (``torch.zeros`` in the default dtype, float32)
DELAY_GRAD_BUFFER_ELEM_BYTES = 4
#: SyncBatchNorm's statistics (``batch_norm_stats``' mean/invstd, the count, sum_dy, sum_dy_xmu): float32
SYNCBN_STAT_ELEM_BYTES = 4


class BucketLayout:
    """Per-bucket figures of one bucket layout, computed once: bytes on the wire and the seconds
    (unscaled by jitter) of each bucket's reducer and comm-hook kernels. ``eng`` (here and below):
    the simulation's :class:`ddpsim.engine.streams.Engine`."""

    def __init__(self, trace: Trace, buckets: tuple[Bucket, ...], eng: Any) -> None:
        self.buckets = buckets
        params = trace.params
        self.bucket_of = [-1] * trace.num_params
        for b in buckets:
            for i in b.param_indices:
                self.bucket_of[i] = b.index
        self.counts = [len(b.param_indices) for b in buckets]
        #: each bucket's name in spans ("bucket 3")
        self.names = [f"bucket {b.index}" for b in buckets]
        self.sizes = [b.size_bytes for b in buckets]
        self.numels = [sum(params[i].numel for i in b.param_indices) for b in buckets]
        self.has_unused = [any(not params[i].has_grad for i in b.param_indices) for b in buckets]
        #: every parameter unused: skip_all_reduce_unused_params leaves the bucket out (Reducer::is_unused_bucket)
        self.all_unused = [all(not params[i].has_grad for i in b.param_indices) for b in buckets]
        mp = eng.mixed_precision
        own, grad, red = zip(*(param_elem_bytes(b.dtype, mp) for b in buckets)) if buckets else ((), (), ())
        used = [[params[i].numel for i in b.param_indices if params[i].has_grad] for b in buckets]
        used_numels = [sum(u) for u in used]
        #: bytes on the wire: the bucket in its reduce dtype (the plan's fp sizes without mixed precision)
        self.reduce_bytes = [n * r for n, r in zip(self.numels, red)]
        bw, floor = eng.copy_bw, eng.config.copy_kernel_floor_s
        # copy-out: one kernel per used parameter (finalize_bucket_dense)
        self.copy_out_s = [bucket_copy_out_s(u, r, e, bw, floor) for u, r, e in zip(used, red, own)]
        # batched_grad_copy's flush: _foreach_copy_ of the used gradients, div_ of the flat bucket;
        # one fused kernel each: one launch floor, not one per parameter
        self.flush_copy_s = [read_write_s(u * g, bw, floor) for u, g in zip(used_numels, grad)]
        self.flush_div_s = [read_write_s(n * g, bw, floor) for n, g in zip(self.numels, grad)]
        # mixed precision hook: cast to reduce_dtype before, div_ + gradient upcast after the all-reduce
        self.mp_cast_s = [mp_bucket_cast_s(n, g, r, bw) for n, g, r in zip(self.numels, grad, red)]
        self.mp_upcast_s = [mp_upcast_s(n, u, g, r, e, bw)
                            for n, u, g, r, e in zip(self.numels, used_numels, grad, red, own)]
        rank = eng.config.powersgd.matrix_approximation_rank
        self.powersgd = [powersgd_split([params[i].shape for i in b.param_indices], DTYPE_SIZE_BYTES[b.dtype], rank)
                         for b in buckets] if eng.config.comm_hook == "powersgd" else []
        peak = eng.peak_flops
        self.powersgd_compress_s = [powersgd_kernel_s(ps, "launch", bw, peak) for ps in self.powersgd]
        self.powersgd_qs_s = [powersgd_kernel_s(ps, "qs", bw, peak) for ps in self.powersgd]
        self.powersgd_decompress_s = [powersgd_kernel_s(ps, "decompress", bw, peak) for ps in self.powersgd]


def buffer_broadcast_buckets(trace: Trace, opts: DDPOptions, mixed_precision: MixedPrecision | None,
                             has_reducer: bool) -> list[int]:
    """Bytes of each buffer broadcast before a forward: ``_sync_buffers`` ->
    ``_broadcast_coalesced`` in 250 MiB buckets per dtype, when ``forward_sync_buffers``
    (torch 2.13; else ``broadcast_buffers``) and there is a reducer (``_pre_forward`` returns
    first when every parameter is delayed). ``_MixedPrecision.buffer_dtype`` casts every buffer
    at construction (``_cast_buffers``)."""
    if not (opts.syncs_buffers_in_forward and trace.buffers and has_reducer):
        return []
    bdt = mixed_precision.buffer_dtype if mixed_precision is not None else None
    dtypes = [bdt or b.dtype for b in trace.buffers]
    sizes = [b.size_bytes // DTYPE_SIZE_BYTES[b.dtype] * DTYPE_SIZE_BYTES[d] for b, d in zip(trace.buffers, dtypes)]
    groups, _ = compute_bucket_assignment_by_size(sizes, dtypes, [BROADCAST_BUCKET_BYTES])
    return [sum(sizes[i] for i in g) for g in groups]


class DelayedAllReduce:
    """``delay_all_reduce_named_params`` (``DistributedDataParallel``'s
    ``_register_delay_all_reduce_hook``): the gradients live in one flat float32
    ``_delay_grad_buffer`` that ``_clear_grad_buffer`` zeroes after an iteration's first forward;
    a tensor hook on ``param_to_hook_all_reduce``, fired in every backward (``no_sync`` or not),
    divides it by the world size and launches one async all-reduce that DDP never waits for."""

    def __init__(self, trace: Trace, eng: Any) -> None:
        hook = next(p for p in trace.params if p.name == eng.plan.options.param_to_hook_all_reduce)
        self.hook_param = hook.index
        kept = set(eng.reducer_params)
        numel = sum(p.numel for p in trace.params if p.index not in kept)
        self.size_bytes = numel * DELAY_GRAD_BUFFER_ELEM_BYTES
        self.zero_s = copy_kernel_s(self.size_bytes, eng.copy_bw, 0.0)
        self.div_s = read_write_s(self.size_bytes, eng.copy_bw)
        #: when the hook fires in a backward without DDP hooks (no_sync), after backward start
        self.hook_offset_s = math.nan if not hook.has_grad else max(
            (eng.ready[q] for q in eng.order[:eng.order.index(hook.index) + 1]), default=0.0)


class SyncBatchNorm:
    """``nn.SyncBatchNorm`` layers (``torch/nn/modules/_functions.py``, ``SyncBatchNorm``), their
    collectives on the process group's stream in order with DDP's buckets, each waited
    (``async_op=False``). Forward: ``batch_norm_stats``, then an all-gather of ``mean, invstd,
    count`` (``2C + 1`` float32 per rank; ``all_gather_into_tensor`` on NCCL, ``all_gather`` on
    gloo), half the comm model's all-reduce of the gathered bytes (a ring all-reduce is a
    reduce-scatter then an all-gather). Backward: ``batch_norm_backward_reduce``, an all-reduce of
    ``sum_dy, sum_dy_xmu`` (``2C`` float32), then the input gradient (assumed needed: torch skips
    the all-reduce for a BatchNorm on the raw input); the weight and bias gradients are ready when
    it returns. A layer is found by its ``<module>.running_mean`` and ``.running_var`` buffers
    (``C``: running_mean's elements) and placed by its ``.weight`` or ``.bias`` with a gradient:
    the backward collective right before that parameter's hook, the forward one at
    ``forward * (1 - ready / backward)`` (the backward after it mirrors the forward before it)."""

    def __init__(self, trace: Trace, eng: Any) -> None:
        bufs = {b.name: b for b in trace.buffers}
        modules = [b.name[:-len(".running_mean")] for b in trace.buffers
                   if b.name.endswith(".running_mean") and b.name[:-len(".running_mean")] + ".running_var" in bufs]
        if not modules:
            raise InputError(f"sync_batchnorm: True is not accepted for trace {trace.model!r}: it lists no BatchNorm buffers "
                             "(<module>.running_mean and .running_var); expected a trace of a model with BatchNorm layers")
        pos = {p: i for i, p in enumerate(eng.order)}
        by_name = {p.name: p.index for p in trace.params}
        self.modules: list[str] = []
        self.gather_bytes: list[int] = []
        self.reduce_bytes: list[int] = []
        self.ready_s: list[float] = []
        #: trigger parameter -> layers whose backward collective runs right before its hook
        self.at_param: dict[int, list[int]] = {}
        for m in modules:
            own = [by_name[m + suffix] for suffix in (".weight", ".bias") if m + suffix in by_name]
            own = [i for i in own if i in pos]
            if not own:
                raise InputError(f"sync_batchnorm: True is not accepted for trace {trace.model!r}: BatchNorm {m!r} has no weight "
                                 "or bias with a gradient in the trace (affine=False or frozen), so its place in the step is "
                                 "unknown; expected BatchNorm layers with affine parameters")
            first = min(own, key=pos.__getitem__)
            b = bufs[m + ".running_mean"]
            channels = b.size_bytes // DTYPE_SIZE_BYTES[b.dtype]
            j = len(self.modules)
            self.modules.append(m)
            self.gather_bytes.append(eng.config.world_size * (2 * channels + 1) * SYNCBN_STAT_ELEM_BYTES)
            self.reduce_bytes.append(2 * channels * SYNCBN_STAT_ELEM_BYTES)
            # monotone along the ready order, like the hooks' own offsets
            self.ready_s.append(max(eng.ready[q] for q in eng.order[:pos[first] + 1]))
            self.at_param.setdefault(first, []).append(j)
        total = eng.bwd_total_s
        #: forward position (a fraction of the forward) of each layer's all-gather
        self.forward_frac = [min(1.0, max(0.0, 1.0 - r / total)) if total > 0 else 0.0 for r in self.ready_s]
        self.forward_order = sorted(range(len(self.modules)), key=lambda j: (self.forward_frac[j], j))
