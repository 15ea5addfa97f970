"""The SimPy engine: DDP's Reducer, per rank and per iteration, over a modelled network.

``simulate(trace, plan, comm, config) -> SimResult``. Source of truth for what DDP does:
``shared/reference/ddp-and-nccl-facts.md`` PART 1 (§1.5-1.11); the section numbers below
refer to it.

What one rank does in one *iteration* (= one ``no_sync`` cycle: ``config.no_sync_steps``
accumulation micro-steps, then one synchronised step; with ``no_sync_steps=0`` an
iteration is just the synchronised step):

1. first forward of the iteration: the bucket rebuild's two blocking broadcasts (int32
   index tensor of ``(num_params+1)*4`` bytes, then ``num_buckets*4`` bytes of bucket
   sizes; only in ``plan.rebuild_iteration``), then the buffer broadcast (buffers in 250 MiB
   buckets, when ``broadcast_buffers`` and the trace has buffers; §1.9: after a ``no_sync``
   forward the next forward does not broadcast, so it happens once per iteration). The
   compute stream waits for both (span ``wait``).
2. micro-steps: forward + backward (``trace`` medians), no hooks, no communication.
3. synchronised step: forward; ``graph_search`` (find_unused_parameters without
   static_graph, §1.7: ``GRAPH_SEARCH_S_PER_PARAM`` per parameter unless the trace's
   ``environment["graph_search_s_per_param"]`` says otherwise); backward as the trace's
   gradient-ready events: the compute between two hooks is the difference of successive
   median ready times (both divided by ``1 + trace.hook_overhead_frac``: the capture's
   timing hooks are not DDP's); each hook enqueues the copy-in of the gradient into its bucket
   (``2*size_bytes / copy_bandwidth``: read + write; the default division is fused into it,
   §1.6 -- with ``gradient_as_bucket_view`` and ``zero_grad(set_to_none=True)`` the alias is
   destroyed every iteration, so the copy-in runs every iteration; were the alias kept, the
   in-place ``div_`` reads and writes the same bytes, so the cost is the same either way).
   Unused parameters (``has_grad`` false) are zero-filled at the first hook (``size/bw``).
   A bucket whose pending count reaches 0 is *ready*; DDP launches buckets strictly in
   order (``launch_k = max(ready_k, launch_{k-1})``, §1.5); a comm hook's pre-collective
   kernels (division pass, fp16/bf16 cast, PowerSGD's first matmuls) run on the compute
   stream right before the launch; fp16/bf16's decompress copy (read 2N, write 4N) runs on
   the communication stream right behind its all-reduce, part of that collective's span
   (ProcessGroupNCCL's future completes at enqueue, so the hook's ``.then()`` callback runs
   inside the autograd hook with the collective's stream current). find_unused_parameters: after the last bucket, the
   all-reduce of the used map (4 bytes per parameter). static_graph, iteration 1 (§1.8):
   hooks only count; after backward: used-map all-reduce, copy-in of every parameter in
   index order, then every bucket launched back to back.
4. finalize (after backward compute): for each bucket in order: wait for its collective
   (span ``wait``), PowerSGD's decompress, copy-out (``2*size/bw`` per bucket, skipped
   with ``gradient_as_bucket_view`` and for never-used parameters); the used map is waited
   lazily at the first bucket holding an unused parameter (§1.7), else at the end. Then
   ``optimizer`` and ``zero_grad`` (trace medians).

torch 2.13 options (``plan.options``; ``Reducer`` in ``torch/csrc/distributed/c10d/reducer.cpp``,
the rest in ``torch/nn/parallel/distributed.py``):

* ``batched_grad_copy`` (``mark_variable_ready_dense`` defers, ``flush_deferred_copies``): no
  copy at a hook; when a bucket's last gradient is marked, one ``_foreach_copy_`` of its used
  gradients (span ``foreach_copy bucket k``) and, when the reducer divides (no comm hook, no mixed
  precision), one ``div_`` of the flat bucket (``div bucket k``), both ``copy_in``. Zero-fills of
  unused parameters stay at the hook. In bytes this costs more than the fused per-parameter
  copy+divide; what it saves is kernel launches (2 per bucket instead of one per parameter).
* ``skip_all_reduce_unused_params`` (``mark_bucket_ready`` / ``should_skip_all_reduce_bucket``): a
  bucket whose parameters are all unused (trace ``has_grad`` false) is not launched, not waited,
  not copied out (``finalize_backward`` passes it by), with find_unused_parameters, or with
  static_graph after iteration 1; ``meta["skipped_buckets"]`` lists them per iteration.
* ``forward_sync_buffers`` (torch 2.13; ``broadcast_buffers`` when not given): the buffer broadcast
  of step 1.
* ``mixed_precision``: every forward starts with the parameters' cast to ``param_dtype`` (span
  ``mixed precision cast``, read own + write param dtype); gradients, copy-in and buckets are in
  ``param_dtype``; DDP's own comm hook casts the bucket to ``reduce_dtype`` when it differs
  (``compress``) and all-reduces ``numel * reduce_dtype`` bytes, undivided; its ``div_`` and the
  gradients' upcast run on a side stream, per bucket once its all-reduce is done (overlapping
  backward); after backward the compute stream waits for that stream (span ``wait``,
  ``mixed precision upcast``), then copies out (read reduce dtype, write the parameter's). ``buffer_dtype`` sets the broadcast buffers' bytes.
  Bucket layouts are DDP's fp32 ones (assigned before the cast). Another comm hook is rejected.
* ``delay_all_reduce_named_params`` + ``param_to_hook_all_reduce``: the named parameters leave the
  reducer (no hook, copy or bucket); their gradients live in one float32 buffer zeroed after the
  iteration's first forward (``zero delayed grad buffer``); when the hook parameter's gradient is
  computed -- in every backward, ``no_sync`` ones too -- the buffer is divided and all-reduced
  (``delayed_all_reduce``) and never waited for. With every parameter delayed DDP has no reducer:
  no buffer broadcast, no buckets, no mixed precision.

Collectives: one communication stream per process group, shared by all ranks (all ranks
issue the same collectives in the same order): a collective starts when EVERY rank has
launched it and the stream is free, ``start = max(max_r launch_r, end of previous)``, and
ends ``comm.allreduce_s(bytes)`` (or ``broadcast_s``) later, on every rank at once.

PowerSGD (§1.10, after ``powersgd_start_iter``; before it the plain ``allreduce`` hook):
per bucket three chained all-reduces (uncompressed 1-D/incompressible tensors, P, Q).
The first is launched by the hook during backward; the rest run from callbacks whose
kernels go to the compute stream *behind* the already-enqueued backward (the CPU runs
ahead of the GPU), so: after backward, P of every bucket is launched as soon as its first
all-reduce is done, then per bucket ``compute_qs`` (orthogonalise P, ``Q = M^T P``) and the
Q all-reduce, then per bucket ``decompress`` (``M = P Q^T``, error feedback; its
``torch.cuda.synchronize`` is implied: the compute stream is already drained there).
That is gloo, whose futures complete when the all-reduce is done. On ProcessGroupNCCL
(``comm.backend == "nccl"``) the futures complete at enqueue, so the whole ``.then()`` chain
runs inside the autograd hook: U, P (``compute_qs``'s kernels behind it on its stream) and Q
(``decompress``'s behind it) are enqueued at once, and ``decompress``'s
``torch.cuda.synchronize(device)`` blocks the CPU until the device has drained: the compute
stream waits for Q (span ``wait``, ``powersgd synchronize bucket k``), the CPU clock (host
costs) meets the device there, and the backward resumes only then; finalize has nothing left.
Kernel costs are memory-bound (bytes moved / copy bandwidth) and, when the trace's
``environment["peak_flops_per_s"]`` is given, at least ``flops / peak``.

SyncBatchNorm (``config.sync_batchnorm``, :class:`_SyncBatchNorm`): per BatchNorm layer of the
trace, an all-gather of its statistics inside the forward and an all-reduce inside its backward
(right before its first gradient hook), both on the communication stream in order with the
buckets, both waited for by the compute stream (spans ``wait``, ``syncbn forward/backward <layer>``);
``no_sync`` steps run them too.

Jitter and stragglers (:mod:`ddpsim.engine.jitter`): each rank's compute-stream work in an
iteration is scaled by a seeded lognormal factor times its straggler factor.

Scale: only :func:`ddpsim.engine.jitter.choose_explicit_ranks` ranks get their own process (all
ranks up to 8; else rank 0, the stragglers and 8 evenly spaced ranks; with no jitter only
rank 0 and the stragglers, the others being identical to rank 0). The other ranks' factors
are drawn in bulk (numpy, from the same seeded draw) and they are folded into ONE "rest"
process (:class:`_RestRanks`) that runs the same program on a numpy vector of local clocks
(work adds ``factor_r * dur``, a wait takes ``max(t_r, end)``) and launches each collective
at ``max_r t_r``: collective start times are exactly those of the full world (a test checks
32 explicit ranks against 8 + the rest). Cost: O(#buckets) numpy operations per iteration
on a vector of world_size values, no process per rank. What is lost: spans and figures of
the folded ranks (``SimResult.ranks`` lists the explicit ones; step time ends with the
slowest EXPLICIT rank). With interference (rates vary in time) the rest process instead runs one
scalar rank with, per iteration, the largest factor among the folded ranks: an upper bound
on their launch times.

DDP per-iteration overhead: a comm model with ``iteration_overhead_s > 0`` (a calibration
whose ``ddp_iteration_overhead_s`` was measured by the executor) adds that much compute-stream
work (span ``forward``, name ``ddp overhead``) after each synchronised forward: DDP's Python
pre/post-forward and the reducer's fixed per-iteration cost, which a bare trace does not see.
Without it (every analytical model) nothing is added. Likewise a comm model's
``broadcast_per_tensor_s`` (a calibration that measured it): DDP's forward buffer broadcast
flattens every buffer into its bucket and copies each back out, so after the broadcast every
rank runs that much compute-stream work per buffer (span ``forward``, name ``buffer copies``);
a model with many small BatchNorm buffers pays it in every forward. And a comm model's
``ddp_forward_factor`` multiplies every forward; 1 otherwise (a calibration sets it only in
the probe fit's prediction of its probe: ddpsim/interference_fit.py).

Idle launches: a comm model with ``idle_launch_extra_s`` (a calibration with
``allreduce_after_compute``, :meth:`ddpsim.calibration.loader.CalibratedCommModel.idle_launch_extra_s`)
charges ``idle_launch_extra_s(size)`` more to an all-reduce that (1) the last rank launched
onto an idle communication stream (nothing queued ahead of it) and (2) is still running when
every rank waits on a collective (no rank computes: the end-of-backward wait). It is added once,
at the first moment both hold. This is what the executor's two curves show on a host whose idle
CPUs sleep: an all-reduce launched after compute and waited for costs more than one in a
back-to-back loop, and the loop is what ``collectives.allreduce`` holds. An all-reduce that
overlaps backward compute, or runs back to back behind another, pays the loop's cost (what
bert-base at cap 1 measured on the 2-vCPU host: charging every all-reduce the after-compute cost
predicted it 10 % slow). Without ``idle_launch_extra_s`` nothing changes.

Lanes: a comm model with ``comm_lanes > 1`` and ``concurrent_rate`` (a gloo calibration with a
queued curve, :meth:`ddpsim.calibration.loader.CalibratedCommModel.concurrent_rate`) runs the process
group's collectives as ProcessGroupGloo's worker threads work its queue: each starts in launch
order once every rank has launched it and one of the ``comm_lanes`` is free, and up to that many
progress side by side, each at ``concurrent_rate(kind, size, n)`` of its pace alone while ``n``
are in progress (and, with interference, at ``1/comm_slowdown`` of that while any rank
computes; compute slows while any is in flight). An idle-launch extra applies to a collective
that starts with none in progress. One lane (NCCL's stream, every analytical model) is the
in-order stream above.

Interference (``config.interference``): rate-based. While a collective is in flight, every
rank's compute progresses at ``1/compute_slowdown``; while any rank computes, the
collective progresses at ``1/comm_slowdown`` (a ring runs at its slowest member's pace):
``weighting="uniform"`` (what a calibration uses unless it names another). With
``weighting="bandwidth"`` the running collective applies only its
share of moved bytes, ``f = 1 - t(1 byte) / t(size)`` from the comm model: compute progresses
at ``1/(1 + (compute_slowdown - 1) * f)``, so a latency-bound bucket barely slows backward and
a large one slows it fully; with ``weighting="table"`` (the GPU prior of
:mod:`ddpsim.network.contention`) ``f`` is the interference's own share for the collective's size. On every change of that state the remaining work continues at
the new rate. Without
interference the engine takes a fast path (a rank computes its own timeline arithmetically
and only synchronises with SimPy at waits); both paths give the same result.

Determinism: no hidden randomness (one ``numpy.random.default_rng(config.seed)``), no
set/dict iteration order dependence; same inputs and seed -> identical :class:`SimResult`.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, Iterator, Sequence

import numpy as np
import simpy

from ddpsim.engine import jitter as jitter_mod
from ddpsim.network.comm_model import CommModel
from ddpsim.errors import InputError
from ddpsim.plan.planner import Bucket, BucketPlan, MixedPrecision, compute_bucket_assignment_by_size, reducer_param_indices
from ddpsim.engine.result import COMM_STREAM, COMPUTE_STREAM, BucketTiming, IterationStats, SimResult, Span
from ddpsim.engine.config import SimConfig
from ddpsim.network.interference import Interference
from ddpsim.trace.records import Trace
from ddpsim.units import DTYPE_SIZE_BYTES, MIB

__all__ = ["simulate", "kernel_s", "copy_kernel_s", "powersgd_split", "GRAPH_SEARCH_S_PER_PARAM", "BROADCAST_BUCKET_BYTES",
           "POWERSGD_MIN_COMPRESSION_RATE"]

#: find_unused_parameters' autograd-graph DFS (§1.7), seconds per parameter: about two
#: autograd nodes per parameter (its AccumulateGrad and the op producing its gradient),
#: ~2 us each for the unordered_set insert and edge walk on a server CPU. A trace may
#: override it with ``environment["graph_search_s_per_param"]``.
GRAPH_SEARCH_S_PER_PARAM = 4e-6
#: DDP's ``broadcast_bucket_size`` (§1.9)
BROADCAST_BUCKET_BYTES = 250 * MIB
#: PowerSGDState's default ``min_compression_rate`` (§1.10)
POWERSGD_MIN_COMPRESSION_RATE = 2
#: element size of DDP's ``_delay_grad_buffer`` (``torch.zeros`` in the default dtype, float32)
DELAY_GRAD_BUFFER_ELEM_BYTES = 4
#: SyncBatchNorm's statistics (``batch_norm_stats``' mean/invstd, the count, sum_dy, sum_dy_xmu): float32
SYNCBN_STAT_ELEM_BYTES = 4


# ---- pure cost helpers ------------------------------------------------------------------

def kernel_s(bytes_moved: float, flops: float, bandwidth_bytes_per_s: float | None,
             peak_flops_per_s: float | None) -> float:
    """A memory-bound kernel's time, at least ``flops / peak`` when a peak is known."""
    t = bytes_moved / bandwidth_bytes_per_s if bandwidth_bytes_per_s else 0.0
    if peak_flops_per_s:
        t = max(t, flops / peak_flops_per_s)
    return t


def copy_kernel_s(bytes_moved: float, bandwidth_bytes_per_s: float | None, floor_s: float) -> float:
    """One gradient-copy kernel (copy-in, zero-fill, copy-out of one parameter): its bytes at
    the copy bandwidth, at least ``floor_s`` (a kernel's launch and tail on a GPU,
    ``SimConfig.copy_kernel_floor_s``; 0 on a CPU)."""
    t = kernel_s(bytes_moved, 0, bandwidth_bytes_per_s, None)
    return max(t, floor_s) if bytes_moved > 0 else t


def powersgd_split(shapes: Sequence[tuple[int, ...]], elem_bytes: int, rank: int) -> dict[str, float]:
    """Bytes of PowerSGD's three all-reduces and its kernels' traffic/flops for one bucket.

    ``shapes``: the bucket's parameters. A tensor is viewed as ``n x m`` (``shape[0]`` x rest),
    ``r = min(n, m, rank)``; compressed iff ``(n + m) * r * 2 < n * m`` and not 1-D (§1.10).
    """
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


def param_elem_bytes(dtype: str, mixed_precision: MixedPrecision | None) -> tuple[int, int, int]:
    """``(own, grad, reduce)`` element sizes of a parameter of ``dtype`` under DDP's ``_MixedPrecision``.

    ``torch/nn/parallel/distributed.py``: ``_root_copy_hook`` casts parameters to
    ``param_dtype`` before forward, so gradients (and, by ``Reducer::set_mixed_precision_param_dtype``,
    the buckets) are in it; ``mixed_precision_hooks._reducer_allreduce_and_upcast_hook`` casts the
    bucket to ``reduce_dtype`` when it differs (``.to(None)`` is a no-op).
    """
    own = DTYPE_SIZE_BYTES[dtype]
    if mixed_precision is None:
        return own, own, own
    grad = DTYPE_SIZE_BYTES[mixed_precision.param_dtype] if mixed_precision.param_dtype else own
    red = DTYPE_SIZE_BYTES[mixed_precision.reduce_dtype] if mixed_precision.reduce_dtype else grad
    return own, grad, red


# ---- internal state ---------------------------------------------------------------------

class _Coll:
    """One collective of the process group (shared by all ranks)."""

    __slots__ = ("index", "kind", "name", "iteration", "bucket", "size_bytes", "work_s", "slow_weight", "arrivals",
                 "arrival_max_s", "all_arrived", "done", "start_s", "end_s")

    def __init__(self, env: simpy.Environment, index: int) -> None:
        self.index = index
        self.kind: str | None = None
        self.name = ""
        self.iteration = 0
        self.bucket: int | None = None
        self.size_bytes = 0
        self.work_s = 0.0
        #: share of ``compute_slowdown`` that compute pays while this collective runs
        self.slow_weight = 1.0
        self.arrivals = 0
        self.arrival_max_s = -math.inf
        self.all_arrived = env.event()
        self.done = env.event()
        self.start_s = math.nan
        self.end_s = math.nan


class _Layout:
    """Per-bucket figures of one bucket layout, computed once."""

    def __init__(self, trace: Trace, buckets: tuple[Bucket, ...], eng: "_Engine") -> None:
        self.buckets = buckets
        n = trace.num_params
        self.bucket_of = [-1] * n
        for b in buckets:
            for i in b.param_indices:
                self.bucket_of[i] = b.index
        self.counts = [len(b.param_indices) for b in buckets]
        self.sizes = [b.size_bytes for b in buckets]
        self.numels = [sum(trace.params[i].numel for i in b.param_indices) for b in buckets]
        self.has_unused = [any(not trace.params[i].has_grad for i in b.param_indices) for b in buckets]
        #: every parameter unused: skip_all_reduce_unused_params leaves the bucket out (Reducer::is_unused_bucket)
        self.all_unused = [all(not trace.params[i].has_grad for i in b.param_indices) for b in buckets]
        mp = eng.mixed_precision
        own, grad, red = zip(*(param_elem_bytes(b.dtype, mp) for b in buckets)) if buckets else ((), (), ())
        used_numels = [sum(trace.params[i].numel for i in b.param_indices if trace.params[i].has_grad) for b in buckets]
        #: bytes on the wire: the bucket in its reduce dtype (the plan's fp sizes without mixed precision)
        self.reduce_bytes = [n * r for n, r in zip(self.numels, red)]
        # copy-out reads the reduced bucket, writes the parameter's own dtype (used parameters only)
        self.copy_out_bytes = [n * (r + e) for n, r, e in zip(used_numels, red, own)]
        floor = eng.config.copy_kernel_floor_s
        # copy-out: one kernel per parameter (finalize_bucket_dense), each at least the floor
        self.copy_out_s = [kernel_s(nb, 0, eng.copy_bw, None) if floor <= 0 else
                           sum(copy_kernel_s(trace.params[i].numel * (r + e), eng.copy_bw, floor)
                               for i in b.param_indices if trace.params[i].has_grad)
                           for b, nb, r, e in zip(buckets, self.copy_out_bytes, red, own)]
        # batched_grad_copy's flush: _foreach_copy_ of the used gradients, div_ of the flat bucket
        self.flush_copy_bytes = [2 * n * g for n, g in zip(used_numels, grad)]
        self.flush_div_bytes = [2 * n * g for n, g in zip(self.numels, grad)]
        # mixed precision hook: cast to reduce_dtype before, div_ + gradient upcast after the all-reduce
        self.mp_cast_bytes = [n * (g + r) if r != g else 0 for n, g, r in zip(self.numels, grad, red)]
        self.mp_after_bytes = [2 * n * r + (u * (g + e) if g != e else 0)
                               for n, u, g, r, e in zip(self.numels, used_numels, grad, red, own)]
        self.powersgd = [powersgd_split([trace.params[i].shape for i in b.param_indices],
                                        DTYPE_SIZE_BYTES[b.dtype], eng.config.powersgd_rank) for b in buckets] \
            if eng.config.comm_hook == "powersgd" else []


class _DelayedAllReduce:
    """``delay_all_reduce_named_params`` (``DistributedDataParallel._register_delay_all_reduce_hook``).

    The delayed parameters' gradients live in one flat float32 buffer (``_delay_grad_buffer``):
    ``_clear_grad_buffer`` zeroes it after the first forward of an iteration (its grads were set
    to None by ``zero_grad``), and a tensor hook on ``param_to_hook_all_reduce`` -- fired when that
    parameter's gradient is computed, in every backward, ``no_sync`` or not -- divides it by the
    world size and launches one async all-reduce of it that DDP never waits for.
    """

    def __init__(self, hook_param: int, numel: int, hook_offset_s: float, copy_bw: float | None) -> None:
        self.hook_param = hook_param
        self.size_bytes = numel * DELAY_GRAD_BUFFER_ELEM_BYTES
        self.zero_s = kernel_s(self.size_bytes, 0, copy_bw, None)
        self.div_s = kernel_s(2 * self.size_bytes, 0, copy_bw, None)
        #: when the hook fires in a backward without DDP hooks (no_sync), after backward start
        self.hook_offset_s = hook_offset_s

    @classmethod
    def of(cls, trace: Trace, opts: Any, eng: "_Engine") -> "_DelayedAllReduce | None":
        if opts.delay_all_reduce_named_params is None:
            return None
        hook = next(p for p in trace.params if p.name == opts.param_to_hook_all_reduce)
        kept = set(eng.reducer_params)
        numel = sum(p.numel for p in trace.params if p.index not in kept)
        offset = max((eng.ready[q] for q in eng.order[:eng.order.index(hook.index) + 1]), default=0.0) \
            if hook.has_grad else math.nan
        return cls(hook.index, numel, offset, eng.copy_bw)


class _SyncBatchNorm:
    """``nn.SyncBatchNorm`` layers (``torch/nn/modules/_functions.py``, ``SyncBatchNorm``).

    Forward: ``batch_norm_stats``, then an all-gather of ``mean, invstd, count`` (``2C + 1``
    float32 per rank; ``all_gather_into_tensor`` on NCCL, ``all_gather`` on gloo) with
    ``async_op=False``: the forward waits for it. Backward: ``batch_norm_backward_reduce``, then
    an all-reduce of ``sum_dy, sum_dy_xmu`` (``2C`` float32) that the backward waits for, then
    the input gradient; the layer's weight and bias gradients are ready when its backward returns.
    Both collectives go to the process group's stream, in order with DDP's buckets.

    Found in the trace by their ``<module>.running_mean`` and ``<module>.running_var`` buffers
    (``C`` = running_mean's elements); each needs its ``<module>.weight`` or ``<module>.bias``
    among the parameters with a gradient: its ready time places the layer. The backward
    collective is issued right before that parameter's hook; the forward one at
    ``forward * (1 - ready / backward)`` (the backward after the layer mirrors the forward
    before it). Assumed: the layer's input needs a gradient (so the backward all-reduce runs;
    torch skips it for a BatchNorm applied to the raw input). The all-gather's time is half the
    comm model's all-reduce of the gathered bytes (a ring all-reduce is a reduce-scatter then an
    all-gather of the same bytes).
    """

    def __init__(self, trace: Trace, eng: "_Engine") -> None:
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


class _IterAcc:
    __slots__ = ("start_s", "end_s", "forward_s", "backward_s", "optimizer_s", "bwd_end_s", "compute")

    def __init__(self, start_s: float) -> None:
        self.start_s = start_s
        self.end_s = start_s
        self.forward_s = 0.0
        self.backward_s = 0.0
        self.optimizer_s = 0.0
        self.bwd_end_s = start_s
        self.compute: list[tuple[float, float]] = []


class _Engine:
    def __init__(self, env: simpy.Environment, trace: Trace, plan: BucketPlan, comm: CommModel,
                 config: SimConfig) -> None:
        self.env = env
        self.trace = trace
        self.plan = plan
        self.comm = comm
        self.config = config
        opts = plan.options
        #: the reducer's parameters (all but delay_all_reduce_named_params); none: DDP builds no reducer
        self.reducer_params = reducer_param_indices(trace, opts)
        self.has_reducer = bool(self.reducer_params)
        self.find_unused_dynamic = opts.find_unused_parameters and not opts.static_graph and self.has_reducer
        self.static_graph = opts.static_graph and self.has_reducer
        self.gabv = opts.gradient_as_bucket_view
        self.batched = opts.batched_grad_copy
        self.skip_unused = opts.skip_all_reduce_unused_params
        # DDP returns from __init__ before the mixed precision setup when every parameter is delayed
        self.mixed_precision = opts.mixed_precision if self.has_reducer else None
        #: Reducer's comm_hook_ == nullptr: the reducer itself divides by the world size (§1.6)
        self.reducer_divides = config.comm_hook == "none" and self.mixed_precision is None
        self.copy_bw = config.copy_bandwidth_bytes_per_s
        peak = trace.environment.get("peak_flops_per_s") if isinstance(trace.environment, dict) else None
        self.peak_flops = float(peak) if isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0 else None
        gs = trace.environment.get("graph_search_s_per_param", GRAPH_SEARCH_S_PER_PARAM)
        if isinstance(gs, bool) or not isinstance(gs, (int, float)) or not math.isfinite(gs) or gs < 0:
            raise InputError(f"trace.environment.graph_search_s_per_param: {gs!r} is not accepted; expected a number of seconds >= 0")
        self.graph_search_s = float(gs) * trace.num_params
        # DDP's per-iteration fixed cost on this machine (Python pre/post-forward, reducer
        # bookkeeping, waking the backend's threads): measured by the executor's calibration and
        # offered by a calibrated comm model; absent (0) otherwise, so nothing changes
        self.iteration_overhead_s = _comm_seconds(comm, "iteration_overhead_s")
        # DDP's forward buffer broadcast per buffer (flatten, copy back), when calibrated
        self.broadcast_per_tensor_s = _comm_seconds(comm, "broadcast_per_tensor_s")
        ff = getattr(comm, "ddp_forward_factor", 1.0)
        if isinstance(ff, bool) or not isinstance(ff, (int, float)) or not (math.isfinite(ff) and ff > 0):
            raise InputError(f"comm model {type(comm).__name__}.ddp_forward_factor: {ff!r} is not accepted; "
                             "expected a finite number > 0")
        fn = getattr(comm, "idle_launch_extra_s", None)
        self.idle_extra = fn if callable(fn) else None
        lanes = getattr(comm, "comm_lanes", 1)
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise InputError(f"comm model {type(comm).__name__}.comm_lanes: {lanes!r} is not accepted; expected an integer >= 1")
        rate_fn = getattr(comm, "concurrent_rate", None)
        #: collectives of the process group that progress at once (ProcessGroupGloo's worker
        #: threads); 1: one in-order stream (NCCL, every analytical model)
        self.lanes = lanes if callable(rate_fn) else 1
        self.concurrent_rate = rate_fn
        self._rates: dict[tuple[str, int, int], float] = {}
        #: collectives in progress (the multi-lane stream)
        self.running: list[_Coll] = []
        self._idle_extras: dict[int, float] = {}
        #: ranks blocked in a wait (fast path; the slow path's ``busy`` counts the others)
        self.waiting = 0
        self.interfere = config.interference != Interference()
        self.compute_slow = float(config.interference.compute_slowdown)
        self.comm_slow = float(config.interference.comm_slowdown)
        self.bandwidth_weighted = config.interference.weighting == "bandwidth"
        self.table_weighted = config.interference.weighting == "table"
        #: CPU costs on a per-rank CPU timeline (ddpsim.network.host_costs), or None
        self.host = config.host_costs
        #: ProcessGroupNCCL: a collective's future completes at enqueue, so a comm hook's whole
        #: ``.then()`` chain runs on the CPU inside the autograd hook (gloo's completes when done)
        self.futures_at_enqueue = getattr(comm, "backend", None) == "nccl"
        #: the running collective's ``slow_weight`` (slow path)
        self.comm_weight = 1.0
        # the trace's medians (or means: SimConfig.compute_statistic)
        st = config.compute_statistic
        self.forward_s = trace.phase("forward").stat(st) * float(ff)
        self.backward_s = trace.phase("backward").stat(st)
        self.optimizer_s = trace.phase("optimizer").stat(st)
        self.zero_grad_s = trace.phase("zero_grad").stat(st)
        med = trace.grad_ready_stat_s(st)
        for i, t in enumerate(med):
            if t is not None and not (math.isfinite(t) and t >= 0):
                raise InputError(f"trace.iterations[].grad_ready_s[{i}]: median {t!r} is not accepted; expected a finite number of seconds >= 0")
        self.order = list(trace.grad_ready_order)
        # the capture's timing hooks slowed its backward by hook_overhead_frac; DDP's hooks
        # replace them (their work, the copy-in, is modelled on its own)
        unhook = 1.0 / (1.0 + (trace.hook_overhead_frac or 0.0))
        self.ready = [0.0 if t is None else float(t) * unhook for t in med]
        self.backward_s *= unhook
        last = max((self.ready[p] for p in self.order), default=0.0)
        self.bwd_total_s = max(self.backward_s, last)
        self.tail_s = self.bwd_total_s - last
        self.names = [p.name for p in trace.params]
        in_reducer = set(self.reducer_params)
        self.is_reducer = [p.index in in_reducer for p in trace.params]
        self.unused = [p.index for p in trace.params if not p.has_grad and p.index in in_reducer]
        self.has_grad = [p.has_grad for p in trace.params].__getitem__
        self.param_sizes = [p.size_bytes for p in trace.params]
        grad_bytes = [p.numel * param_elem_bytes(p.dtype, self.mixed_precision)[1] for p in trace.params]
        floor = config.copy_kernel_floor_s
        self.copy_in_s = [copy_kernel_s(2 * g, self.copy_bw, floor) for g in grad_bytes]
        self.zero_s = [copy_kernel_s(g, self.copy_bw, floor) for g in grad_bytes]
        #: _root_copy_hook before every forward: each parameter cast into its param_dtype copy
        self.mp_cast_s = 0.0 if self.mixed_precision is None else kernel_s(
            sum(p.size_bytes + g for p, g in zip(trace.params, grad_bytes)), 0, self.copy_bw, None)
        self.syncbn = _SyncBatchNorm(trace, self) if config.sync_batchnorm else None
        self.buffer_buckets = self._buffer_broadcast_buckets(trace, opts)
        #: the per-buffer flatten and copy-back of that broadcast (0 without a measured cost)
        self.buffer_copies_s = self.broadcast_per_tensor_s * len(trace.buffers) if self.buffer_buckets else 0.0
        self.delayed = _DelayedAllReduce.of(trace, opts, self)
        self.layouts: dict[int, _Layout] = {}
        self._layout_cache: dict[tuple[Bucket, ...], _Layout] = {}
        for k in range(1, config.num_iterations + 1):
            bs = plan.layout_for_iteration(k)
            if bs not in self._layout_cache:
                self._layout_cache[bs] = _Layout(trace, bs, self)
            self.layouts[k] = self._layout_cache[bs]
        # collectives and interference state
        self.colls: list[_Coll] = []
        self._durations: dict[tuple[bool, int], float] = {}
        self.num_participants = 0
        self.busy = 0
        self.comm_active = False
        self.changed = env.event()

    def _buffer_broadcast_buckets(self, trace: Trace, opts: Any) -> list[int]:
        """Bytes of each buffer broadcast before a forward: ``_sync_buffers`` ->
        ``_broadcast_coalesced`` in 250 MiB buckets per dtype (§1.9), when
        ``forward_sync_buffers`` (torch 2.13; else ``broadcast_buffers``) and there is a reducer
        (``_pre_forward`` returns first when every parameter is delayed). ``_MixedPrecision.buffer_dtype``
        casts every buffer at construction (``_cast_buffers``)."""
        if not (opts.syncs_buffers_in_forward and trace.buffers and self.has_reducer):
            return []
        bdt = self.mixed_precision.buffer_dtype if self.mixed_precision is not None else None
        dtypes = [bdt or b.dtype for b in trace.buffers]
        sizes = [b.size_bytes // DTYPE_SIZE_BYTES[b.dtype] * DTYPE_SIZE_BYTES[d] for b, d in zip(trace.buffers, dtypes)]
        groups, _ = compute_bucket_assignment_by_size(sizes, dtypes, [BROADCAST_BUCKET_BYTES])
        return [sum(sizes[i] for i in g) for g in groups]

    def skips_bucket(self, b: int, layout: _Layout, static_first: bool) -> bool:
        """skip_all_reduce_unused_params (``Reducer::should_skip_all_reduce_bucket``): every
        parameter of the bucket is in ``unused_parameters_``, which find_unused_parameters fills
        each iteration and static_graph from iteration 1 on (iteration 1 launches every bucket)."""
        return (self.skip_unused and layout.all_unused[b] and not static_first
                and (self.find_unused_dynamic or self.static_graph))

    # -- collectives ----------------------------------------------------------------------
    def coll(self, index: int) -> _Coll:
        while len(self.colls) <= index:
            self.colls.append(_Coll(self.env, len(self.colls)))
        return self.colls[index]

    def duration_s(self, size_bytes: int, broadcast: bool) -> float:
        """The comm model's time for one collective, asked once per (kind, size) and checked."""
        key = (broadcast, size_bytes)
        d = self._durations.get(key)
        if d is None:
            comm = self.comm
            d = comm.broadcast_s(size_bytes) if broadcast else comm.allreduce_s(size_bytes)
            if isinstance(d, bool) or not (isinstance(d, (int, float)) and math.isfinite(d) and d >= 0):
                what = "broadcast_s" if broadcast else "allreduce_s"
                raise InputError(f"comm model {type(comm).__name__}.{what}({size_bytes}): {d!r} is not accepted; "
                                 "expected a finite number of seconds >= 0")
            d = self._durations[key] = float(d)
        return d

    def bandwidth_share(self, size_bytes: int, broadcast: bool, work_s: float) -> float:
        """``1 - t(1 byte) / t(size)``: the share of a collective's time that moves bytes, the
        rest being the comm model's latency floor (``Interference.weighting == "bandwidth"``)."""
        if size_bytes <= 1 or work_s <= 0:
            return 0.0
        return min(1.0, max(0.0, 1.0 - self.duration_s(1, broadcast) / work_s))

    def idle_extra_s(self, size_bytes: int) -> float:
        """The comm model's idle-launch extra for one all-reduce, asked once per size and checked."""
        d = self._idle_extras.get(size_bytes)
        if d is None:
            d = self.idle_extra(size_bytes)
            if isinstance(d, bool) or not (isinstance(d, (int, float)) and math.isfinite(d) and d >= 0):
                raise InputError(f"comm model {type(self.comm).__name__}.idle_launch_extra_s({size_bytes}): {d!r} is not "
                                 "accepted; expected a finite number of seconds >= 0")
            d = self._idle_extras[size_bytes] = float(d)
        return d

    def all_waiting(self) -> bool:
        return self.busy == 0 if self.interfere else self.waiting >= self.num_participants

    def set_waiting(self, delta: int) -> None:
        """Fast path: a rank starts (+1) or stops (-1) waiting; heard only by idle launches."""
        self.waiting += delta
        if self.idle_extra is not None:
            self._notify()

    def arrive(self, index: int, t: float, kind: str, name: str, iteration: int, bucket: int | None,
               size_bytes: int, broadcast: bool, then_s: float = 0.0) -> _Coll:
        c = self.coll(index)
        if c.kind is None:
            c.kind, c.name, c.iteration, c.bucket, c.size_bytes = kind, name, iteration, bucket, size_bytes
            # then_s: kernels a comm hook's .then() callback puts on the same stream behind it
            base = self.duration_s(size_bytes, broadcast)
            if kind == "syncbn_allgather":
                base *= 0.5  # _SyncBatchNorm: half the all-reduce of the gathered bytes
            c.work_s = base + then_s
            if self.bandwidth_weighted:
                c.slow_weight = self.bandwidth_share(size_bytes, broadcast, c.work_s)
            elif self.table_weighted:
                c.slow_weight = self.config.interference.weight_for(size_bytes)
        else:
            assert (c.kind, c.name, c.iteration) == (kind, name, iteration), \
                f"ranks issued different collectives at position {index}: {c.name!r} vs {name!r}"
        c.arrivals += 1
        if t > c.arrival_max_s:
            c.arrival_max_s = t
        if c.arrivals == self.num_participants:
            c.all_arrived.succeed()
        return c

    def comm_stream(self) -> Iterator[simpy.Event]:
        env = self.env
        free_s = 0.0
        i = 0
        while True:
            c = self.coll(i)
            yield c.all_arrived
            start = max(c.arrival_max_s, free_s)
            if start > env.now:
                yield env.timeout(start - env.now)
            c.start_s = start
            extra = 0.0
            if self.idle_extra is not None and c.kind == "allreduce" and c.arrival_max_s > free_s:
                extra = self.idle_extra_s(c.size_bytes)
            if self.interfere:
                self.comm_weight = c.slow_weight
                self.set_comm_active(True)
                yield from self.progress(c.work_s, comm=True, idle_extra_s=extra)
                self.set_comm_active(False)
                c.end_s = env.now
            else:
                end = start + c.work_s
                while extra > 0:  # pending until every rank waits, or the collective ends first
                    if self.all_waiting():
                        end, extra = end + extra, 0.0
                        break
                    if end <= env.now:
                        break
                    timer = env.timeout(end - env.now)
                    res = yield timer | self.changed
                    if timer in res and not self.all_waiting():
                        break
                c.end_s = end
                if c.end_s > env.now:
                    yield env.timeout(c.end_s - env.now)
            free_s = c.end_s
            c.done.succeed()
            i += 1

    def rate(self, c: _Coll, n: int) -> float:
        """The pace of ``c`` while ``n`` collectives progress at once (the comm model's
        ``concurrent_rate``, asked once per (kind, size, n) and checked)."""
        if n <= 1:
            return 1.0
        key = (c.kind or "", c.size_bytes, n)
        r = self._rates.get(key)
        if r is None:
            r = self.concurrent_rate(c.kind, c.size_bytes, n)
            if isinstance(r, bool) or not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0):
                raise InputError(f"comm model {type(self.comm).__name__}.concurrent_rate({c.kind!r}, {c.size_bytes}, {n}): "
                                 f"{r!r} is not accepted; expected a finite number > 0")
            r = self._rates[key] = float(r)
        return r

    def comm_lanes(self) -> Iterator[simpy.Event]:
        """The process group's queue worked by ``lanes`` threads (ProcessGroupGloo): collectives
        start in launch order, each once every rank has launched it and a lane is free, and
        progress side by side, each at the comm model's ``concurrent_rate`` for the number in
        progress (and at ``1/comm_slowdown`` while any rank computes, with interference)."""
        env = self.env
        i = 0
        while True:
            c = self.coll(i)
            yield c.all_arrived
            while len(self.running) >= self.lanes:
                yield self.changed
            if c.arrival_max_s > env.now:
                yield env.timeout(c.arrival_max_s - env.now)
            c.start_s = env.now
            extra = 0.0
            if self.idle_extra is not None and c.kind == "allreduce" and not self.running:
                extra = self.idle_extra_s(c.size_bytes)
            self.running.append(c)
            self._lanes_changed()
            env.process(self._lane(c, extra))
            i += 1

    def _lane(self, c: _Coll, extra: float) -> Iterator[simpy.Event]:
        yield from self.progress(c.work_s, comm=True, idle_extra_s=extra, coll=c)
        c.end_s = self.env.now
        self.running.remove(c)
        self._lanes_changed()
        c.done.succeed()

    def _lanes_changed(self) -> None:
        if self.interfere:
            self.comm_weight = max((r.slow_weight for r in self.running), default=1.0)
            self.comm_active = bool(self.running)
        self._notify()

    # -- interference (slow path) ----------------------------------------------------------
    def _notify(self) -> None:
        old, self.changed = self.changed, self.env.event()
        old.succeed()

    def set_comm_active(self, active: bool) -> None:
        if active != self.comm_active:
            self.comm_active = active
            self._notify()

    def add_busy(self, delta: int) -> None:
        before = self.busy > 0
        self.busy += delta
        assert self.busy >= 0
        if (self.busy > 0) != before:
            self._notify()

    def progress(self, work_s: float, comm: bool, idle_extra_s: float = 0.0,
                 coll: _Coll | None = None) -> Iterator[simpy.Event]:
        """Do ``work_s`` seconds of full-rate work at the current, state-dependent rate (plus
        ``idle_extra_s`` once no rank computes, if that happens before the work is done).
        ``coll``: the collective of a multi-lane stream, paced also by the others in progress."""
        env = self.env
        remaining = work_s
        while remaining > 0:
            if idle_extra_s > 0 and self.all_waiting():
                remaining += idle_extra_s
                work_s += idle_extra_s
                idle_extra_s = 0.0
            if comm:
                rate = 1.0 / self.comm_slow if self.busy > 0 else 1.0
                if coll is not None:
                    rate *= self.rate(coll, len(self.running))
            else:
                rate = 1.0 / (1.0 + (self.compute_slow - 1.0) * self.comm_weight) if self.comm_active else 1.0
            t0 = env.now
            timer = env.timeout(remaining / rate)
            res = yield timer | self.changed
            if timer in res:
                return
            remaining -= (env.now - t0) * rate
            if remaining <= work_s * 1e-12:
                return


class _Rank:
    """One simulated rank (or the 'rest' representative, which records nothing)."""

    def __init__(self, eng: _Engine, rank: int, factors: np.ndarray, record: bool) -> None:
        self.eng = eng
        self.rank = rank
        self.factors = [float(f) for f in factors]
        self.record = record
        self.t = 0.0
        self.seq = 0
        self.iter = 0
        self.acc: _IterAcc | None = None
        self.accs: list[_IterAcc] = []
        #: (iteration, bucket, ready_s, launch_s, first coll index, last coll index)
        self.bucket_log: list[tuple[int, int, float, float, int, int]] = []
        #: compute-stream spans as sortable tuples (start, 0, seq, end, kind, name, iteration, bucket, size)
        self.spans: list[tuple] = []
        self.keep_spans = record and eng.keep_spans
        self.finished = False
        self.fast = not eng.interfere
        #: the CPU's clock (host costs only): when it has enqueued everything issued so far
        self.cpu = 0.0
        self.issue_s = 0.0

    # -- primitives -------------------------------------------------------------------------
    def work(self, kind: str, name: str, dur: float, bucket: int | None = None,
             size: int | None = None) -> Iterator[simpy.Event]:
        """``dur`` seconds of full-rate compute-stream work (a generator: ``yield from``)."""
        if dur <= 0:
            return
        if self.fast:
            self.advance(kind, name, dur, bucket, size)
            return
        start = self.eng.env.now
        yield from self.eng.progress(dur, comm=False)
        self._record(kind, name, start, self.eng.env.now, bucket, size)

    def advance(self, kind: str, name: str, dur: float, bucket: int | None = None, size: int | None = None) -> None:
        """Fast path only (no interference): the same as :meth:`work`, without SimPy."""
        if dur > 0:
            self._record(kind, name, self.t, self.t + dur, bucket, size)

    def _record(self, kind: str, name: str, start: float, end: float, bucket: int | None, size: int | None) -> None:
        self.t = end
        if self.record:
            if self.keep_spans:
                spans = self.spans
                spans.append((start, 0, len(spans), end, kind, name, self.iter, bucket, size))
            acc = self.acc
            comp = acc.compute  # busy blocks of the compute stream: merge back-to-back work
            if comp and comp[-1][1] == start:
                comp[-1] = (comp[-1][0], end)
            else:
                comp.append((start, end))
            if kind == "forward":
                acc.forward_s += end - start
            elif kind == "backward":
                acc.backward_s += end - start
            elif kind == "optimizer":
                acc.optimizer_s += end - start

    def launch(self, kind: str, name: str, bucket: int | None, size_bytes: int, broadcast: bool = False,
               then_s: float = 0.0) -> _Coll:
        t = self.t if self.eng.host is None else self.host_issue(self.eng.host.enqueue_s)
        c = self.eng.arrive(self.seq, t, kind, name, self.iter, bucket, size_bytes, broadcast, then_s)
        self.seq += 1
        self.issue_s = self.t  # the compute stream's clock when the latest collective was issued
        return c

    # -- host costs (ddpsim.network.host_costs): a CPU clock beside the compute stream ------------------
    def host_issue(self, cost_s: float) -> float:
        """The CPU spends ``cost_s`` issuing something: when it is issued (never before the
        device reaches it in stream order)."""
        self.cpu += cost_s
        return self.cpu if self.cpu > self.t else self.t

    def host_step_start(self) -> None:
        """The CPU meets the device at a step's start, then runs DDP's pre-forward."""
        self.cpu = max(self.cpu, self.t) + self.eng.host.pre_forward_s

    def host_gate(self) -> Iterator[simpy.Event]:
        """The device cannot run what the CPU has not enqueued: idle until the CPU's clock."""
        if self.cpu > self.t:
            if self.fast:
                self.t = self.cpu
            else:
                env = self.eng.env
                self.eng.add_busy(-1)
                yield env.timeout(self.cpu - env.now)
                self.eng.add_busy(+1)
                self.t = self.cpu

    def wait(self, c: _Coll, name: str) -> Iterator[simpy.Event]:
        eng = self.eng
        env = eng.env
        if eng.interfere:
            if not c.done.processed:
                eng.add_busy(-1)
                yield c.done
                eng.add_busy(+1)
            start, end = self.t, max(self.t, env.now)
        else:
            if self.t > env.now:
                yield env.timeout(self.t - env.now)
            if not c.done.processed:
                eng.set_waiting(+1)
                yield c.done
                eng.set_waiting(-1)
            start, end = self.t, max(self.t, c.end_s)
        if end > start:
            self.t = end
            if self.keep_spans:
                self.spans.append((start, 0, len(self.spans), end, "wait", name, self.iter, c.bucket, None))

    def wait_until(self, t_abs: float, name: str) -> Iterator[simpy.Event]:
        """The compute stream waits for another stream's work that ends at ``t_abs``."""
        eng = self.eng
        env = eng.env
        if eng.interfere:
            if t_abs > env.now:
                eng.add_busy(-1)
                yield env.timeout(t_abs - env.now)
                eng.add_busy(+1)
        elif t_abs > self.t:
            if self.t > env.now:
                yield env.timeout(self.t - env.now)
            eng.set_waiting(+1)
            yield env.timeout(t_abs - env.now)
            eng.set_waiting(-1)
        start = self.t
        if t_abs > start:
            self.t = t_abs
            if self.keep_spans:
                self.spans.append((start, 0, len(self.spans), t_abs, "wait", name, self.iter, None, None))

    # -- the program ------------------------------------------------------------------------
    def run(self) -> Iterator[simpy.Event]:
        eng = self.eng
        if eng.interfere:
            eng.add_busy(+1)
        for k in range(1, eng.config.num_iterations + 1):
            yield from self.iteration(k)
        if eng.interfere:
            eng.add_busy(-1)
        elif self.t > eng.env.now:
            yield eng.env.timeout(self.t - eng.env.now)
        self.finished = True

    def iteration(self, k: int) -> Iterator[simpy.Event]:
        eng = self.eng
        self.iter = k
        s = self.factors[k - 1]
        self.acc = _IterAcc(self.t)
        layout = eng.layouts[k]
        n_micro = eng.config.no_sync_steps
        if eng.host is not None:
            self.host_step_start()
        # 1. first forward of the iteration: rebuild (§1.4 step 6), buffer broadcast (§1.9)
        if eng.plan.rebuild_iteration is not None and k == eng.plan.rebuild_iteration:
            c = self.launch("rebuild", "rebuild:indices", None, (len(eng.reducer_params) + 1) * 4, broadcast=True)
            yield from self.wait(c, "rebuild:indices")
            c = self.launch("rebuild", "rebuild:bucket_sizes", None, len(layout.buckets) * 4, broadcast=True)
            yield from self.wait(c, "rebuild:bucket_sizes")
        if eng.buffer_buckets:
            c = None
            for j, nbytes in enumerate(eng.buffer_buckets):
                c = self.launch("broadcast", f"buffers[{j}]", None, nbytes, broadcast=True)
            yield from self.wait(c, "broadcast")
            if eng.buffer_copies_s > 0:
                yield from self.work("forward", "buffer copies", eng.buffer_copies_s * s)
        # 2. no_sync micro-steps
        for m in range(n_micro):
            yield from self.forward(f"forward (no_sync {m + 1})", s, first=m == 0)
            yield from self.no_sync_backward(f"backward (no_sync {m + 1})", s)
        # 3. synchronised step
        if eng.host is not None:
            yield from self.host_gate()
        yield from self.forward("forward", s, first=n_micro == 0)
        if eng.iteration_overhead_s > 0:  # DDP's per-iteration fixed cost (calibrated), if any
            yield from self.work("forward", "ddp overhead", eng.iteration_overhead_s * s)
        if eng.find_unused_dynamic:
            yield from self.work("graph_search", "graph_search", eng.graph_search_s * s)
        hook = eng.config.comm_hook
        if hook == "powersgd" and k - 1 < eng.config.powersgd_start_iter:
            hook = "allreduce"
        colls = yield from self.backward(k, layout, s, hook)
        # 4. finalize
        yield from self.finalize(layout, s, hook, colls)
        yield from self.work("optimizer", "optimizer", eng.optimizer_s * s)
        yield from self.work("zero_grad", "zero_grad", eng.zero_grad_s * s)
        self.acc.end_s = self.t
        self.accs.append(self.acc)

    def forward(self, name: str, s: float, first: bool) -> Iterator[simpy.Event]:
        """One forward: mixed precision's parameter casts (``_root_copy_hook``), the module,
        and after the iteration's first forward the delayed-gradient buffer's zeroing."""
        eng = self.eng
        if eng.mp_cast_s > 0:
            yield from self.work("forward", "mixed precision cast", eng.mp_cast_s * s)
        sb = eng.syncbn
        done = 0.0
        if sb is not None:  # each SyncBatchNorm waits for its statistics' all-gather
            for j in sb.forward_order:
                frac = sb.forward_frac[j]
                yield from self.work("forward", name, (frac - done) * eng.forward_s * s)
                done = frac
                label = f"syncbn forward {sb.modules[j]}"
                yield from self.wait(self.launch("syncbn_allgather", label, None, sb.gather_bytes[j]), label)
        yield from self.work("forward", name, (1.0 - done) * eng.forward_s * s)
        if first and eng.delayed is not None:
            yield from self.work("zero_grad", "zero delayed grad buffer", eng.delayed.zero_s * s)

    def no_sync_backward(self, name: str, s: float) -> Iterator[simpy.Event]:
        """A backward under ``no_sync``: no reducer hooks; the delayed all-reduce's hook still fires."""
        eng = self.eng
        d = eng.delayed
        # (offset, 0 = a SyncBatchNorm's all-reduce (inside its backward) / 1 = the delayed hook, layer)
        points = [(r, 0, j) for j, r in enumerate(eng.syncbn.ready_s)] if eng.syncbn is not None else []
        if d is not None and not math.isnan(d.hook_offset_s):
            points.append((d.hook_offset_s, 1, -1))
        done = 0.0
        for off, what, j in sorted(points):
            yield from self.work("backward", name, (off - done) * s)
            done = max(done, off)
            if what == 0:
                yield from self.syncbn_backward(j)
            else:
                yield from self.launch_delayed_all_reduce(s)
        yield from self.work("backward", name, (eng.bwd_total_s - done) * s)

    def syncbn_backward(self, j: int) -> Iterator[simpy.Event]:
        """A SyncBatchNorm's backward all-reduce of ``sum_dy, sum_dy_xmu``; its backward waits."""
        sb = self.eng.syncbn
        label = f"syncbn backward {sb.modules[j]}"
        yield from self.wait(self.launch("syncbn_allreduce", label, None, sb.reduce_bytes[j]), label)

    def launch_delayed_all_reduce(self, s: float) -> Iterator[simpy.Event]:
        """``_delayed_all_reduce_hook``: ``div_`` of the flat buffer, one async all-reduce, no wait."""
        d = self.eng.delayed
        yield from self.work("compress", "delayed_all_reduce div", d.div_s * s)
        self.launch("allreduce", "delayed_all_reduce", None, d.size_bytes)

    def launch_bucket(self, b: int, layout: _Layout, s: float, hook: str) -> Iterator[simpy.Event]:
        eng = self.eng
        size, numel = layout.sizes[b], layout.numels[b]
        name = f"bucket {b}"
        if eng.host is not None:  # Reducer::all_reduce_bucket's own work, before the process group's
            self.cpu += eng.host.bucket_launch_s
        if eng.mixed_precision is not None:
            # _reducer_allreduce_and_upcast_hook: cast to reduce_dtype if it differs, no division before
            yield from self.work("compress", f"mixed precision cast {name}",
                                 kernel_s(layout.mp_cast_bytes[b], 0, eng.copy_bw, None) * s, b, size)
            return [self.launch("allreduce", name, b, layout.reduce_bytes[b])]
        if hook == "allreduce":
            yield from self.work("compress", f"div {name}", kernel_s(2 * size, 0, eng.copy_bw, None) * s, b, size)
            return [self.launch("allreduce", name, b, size)]
        if hook in ("fp16", "bf16"):
            # buffer.to(fp16): read size, write 2N; div_ on the compressed: read 2N, write 2N
            yield from self.work("compress", f"{hook} cast {name}", kernel_s(size + 6 * numel, 0, eng.copy_bw, None) * s, b, size)
            # the hook's fut.then(decompress): ProcessGroupNCCL's future completes at enqueue, so the
            # callback runs here and its copy back into the bucket (read 2N, write 4N) is queued on
            # the collective's stream right behind it (default_hooks.py fp16_compress_hook)
            return [self.launch("allreduce", name, b, 2 * numel, then_s=copy_kernel_s(6 * numel, eng.copy_bw, eng.config.copy_kernel_floor_s))]
        if hook == "powersgd":
            ps = layout.powersgd[b]
            yield from self.work("compress", f"powersgd compress {name}",
                                 kernel_s(ps["launch_bytes"], ps["launch_flops"], eng.copy_bw, eng.peak_flops) * s, b, size)
            first = self.launch("allreduce", f"{name} powersgd:uncompressed", b, int(ps["uncompressed_bytes"]))
            if not eng.futures_at_enqueue:
                return [first]
            return (yield from self.powersgd_chain_in_hook(b, layout, s, first))
        return [self.launch("allreduce", name, b, size)]

    def powersgd_chain_in_hook(self, b: int, layout: _Layout, s: float, first: _Coll) -> Iterator[simpy.Event]:
        """PowerSGD on ProcessGroupNCCL (``powerSGD_hook``): the future of the uncompressed
        all-reduce is complete at enqueue, so ``.then(unpack_..._and_allreduce_ps)``,
        ``.then(compute_qs)`` and ``.then(decompress)`` run at once, in the autograd hook: P's
        all-reduce is enqueued behind the first, ``compute_qs``'s kernels (orthogonalise P,
        ``Q = M^T P``) behind P and Q's all-reduce behind them, ``decompress``'s kernels behind Q;
        then ``decompress`` calls ``torch.cuda.synchronize(device)``: the CPU blocks until the
        device has drained (the backward enqueued so far and the three all-reduces), so no later
        backward kernel is enqueued before that. Per bucket, the backward therefore stops for
        the bucket's whole PowerSGD round: the overlap of the other hooks is lost."""
        eng = self.eng
        ps = layout.powersgd[b]
        size = layout.sizes[b]
        qs_s = kernel_s(ps["qs_bytes"], ps["qs_flops"], eng.copy_bw, eng.peak_flops) * s
        dec_s = kernel_s(ps["decompress_bytes"], ps["decompress_flops"], eng.copy_bw, eng.peak_flops) * s
        p = self.launch("allreduce", f"bucket {b} powersgd:P", b, int(ps["p_bytes"]), then_s=qs_s)
        q = self.launch("allreduce", f"bucket {b} powersgd:Q", b, int(ps["q_bytes"]), then_s=dec_s)
        yield from self.wait(q, f"powersgd synchronize bucket {b}")
        if eng.host is not None:  # the CPU returns from the synchronize once the device is idle
            self.cpu = max(self.cpu, self.t)
        return [first, p, q]

    def flush_bucket(self, b: int, layout: _Layout, s: float) -> Iterator[simpy.Event]:
        """batched_grad_copy (``Reducer::flush_deferred_copies``): when the bucket's last gradient is
        marked, one ``_foreach_copy_`` of the deferred gradients and, without a comm hook, one
        ``div_`` of the flat bucket (the per-parameter copies fused the division instead)."""
        eng = self.eng
        size = layout.sizes[b]
        floor = eng.config.copy_kernel_floor_s  # one fused kernel each: one launch floor, not one per parameter
        yield from self.work("copy_in", f"foreach_copy bucket {b}",
                             copy_kernel_s(layout.flush_copy_bytes[b], eng.copy_bw, floor) * s, b, size)
        if eng.reducer_divides:
            yield from self.work("copy_in", f"div bucket {b}",
                                 copy_kernel_s(layout.flush_div_bytes[b], eng.copy_bw, floor) * s, b, size)

    def drain_upcast_stream(self, layout: _Layout, s: float, live: list[int],
                            colls: list[list[_Coll]]) -> Iterator[simpy.Event]:
        """Mixed precision's upcast stream (``_reducer_allreduce_and_upcast_hook``): per bucket, once
        its all-reduce is done, ``div_`` by the world size and the gradients' upcast, one bucket
        after another; it overlaps backward. ``wait_for_stream_cb`` (queued at the first hook,
        so before the reducer's finalize) makes the compute stream wait for all of it."""
        eng = self.eng
        free_s = -math.inf
        for b in live:
            c = colls[b][-1]
            yield from self.wait(c, f"bucket {b}")
            free_s = max(c.end_s, free_s) + kernel_s(layout.mp_after_bytes[b], 0, eng.copy_bw, None) * s
        yield from self.wait_until(free_s, "mixed precision upcast")

    def backward(self, k: int, layout: _Layout, s: float, hook: str) -> Iterator[simpy.Event]:
        eng = self.eng
        nb = len(layout.buckets)
        pending = list(layout.counts)
        ready_t = [math.nan] * nb
        launch_t = [math.nan] * nb
        colls: list[list[_Coll]] = [[] for _ in range(nb)]
        self._used_map = None
        static_first = eng.static_graph and k == 1
        # unused params are marked ready at the first hook (find_unused, or static graph after iter 1)
        mark_unused = bool(eng.unused) and not static_first
        next_b = 0
        prev = 0.0
        names, ready, bucket_of = eng.names, eng.ready, layout.bucket_of
        first = True
        fast, advance = self.fast, self.advance
        copy_in_s, sizes = eng.copy_in_s, eng.param_sizes
        batched, is_reducer = eng.batched, eng.is_reducer
        delay_hook = eng.delayed.hook_param if eng.delayed is not None else -1
        bn_at = eng.syncbn.at_param if eng.syncbn is not None else {}
        # NOTE: the hot loop. Fast path: no generator per hook; an explicit rank records its
        # spans inline (what _record does), the folded ranks only add up work (advance).
        inline = fast and self.record
        host = eng.host
        acc, spans, it, keep = self.acc, self.spans, self.iter, self.keep_spans
        comp = acc.compute
        for p in eng.order:
            r = ready[p]
            # medians taken per parameter need not follow the ready order: never step back
            d = (r - prev) * s if r > prev else 0.0
            prev = max(prev, r)
            if inline:
                if d > 0:
                    t0 = self.t
                    t1 = t0 + d
                    if keep:
                        spans.append((t0, 0, len(spans), t1, "backward", names[p], it, None, None))
                    if comp and comp[-1][1] == t0:
                        comp[-1] = (comp[-1][0], t1)
                    else:
                        comp.append((t0, t1))
                    acc.backward_s += t1 - t0
                    self.t = t1
            elif fast:
                advance("backward", names[p], d)
            else:
                yield from self.work("backward", names[p], d)
            if p in bn_at:  # inside the SyncBatchNorm's backward, before its gradients are ready
                for j in bn_at[p]:
                    yield from self.syncbn_backward(j)
            if p == delay_hook:  # a tensor hook: fires before the parameter's AccumulateGrad
                yield from self.launch_delayed_all_reduce(s)
            if static_first or not is_reducer[p]:
                continue
            if first:
                first = False
                marks = list(eng.unused) + [p] if mark_unused else [p]
            else:
                marks = (p,)
            for q in marks:
                if host is not None:  # Reducer::autograd_hook on the CPU, then the copy-in is enqueued
                    self.cpu += host.hook_s_per_param
                    yield from self.host_gate()
                if not eng.has_grad(q):
                    yield from self.work("copy_in", f"zero {names[q]}", eng.zero_s[q] * s, bucket_of[q], sizes[q])
                elif batched:
                    pass  # deferred to the bucket's flush
                elif inline:
                    d = copy_in_s[q] * s
                    if d > 0:
                        t0 = self.t
                        t1 = t0 + d
                        if keep:
                            spans.append((t0, 0, len(spans), t1, "copy_in", names[q], it, bucket_of[q], sizes[q]))
                        if comp and comp[-1][1] == t0:
                            comp[-1] = (comp[-1][0], t1)
                        else:
                            comp.append((t0, t1))
                        self.t = t1
                elif fast:
                    advance("copy_in", names[q], copy_in_s[q] * s, bucket_of[q], sizes[q])
                else:
                    yield from self.work("copy_in", names[q], copy_in_s[q] * s, bucket_of[q], sizes[q])
                b = bucket_of[q]
                pending[b] -= 1
                if pending[b] == 0:
                    if batched:
                        yield from self.flush_bucket(b, layout, s)
                    ready_t[b] = self.t
                while next_b < nb and pending[next_b] == 0:
                    if not eng.skips_bucket(next_b, layout, static_first):
                        colls[next_b] = yield from self.launch_bucket(next_b, layout, s, hook)
                    launch_t[next_b] = self.issue_s if colls[next_b] else self.t
                    next_b += 1
                    if next_b == nb and eng.find_unused_dynamic:
                        self._used_map = self.launch("used_map_allreduce", "used_map", None, 4 * len(eng.reducer_params))
        yield from self.work("backward", "backward tail", eng.tail_s * s)
        self.acc.bwd_end_s = self.t
        if static_first:
            # §1.8 delay_all_reduce: used map, copy every gradient in index order, launch all
            # (batched_grad_copy: only zero-fills here, each bucket flushed right before its launch)
            self._used_map = self.launch("used_map_allreduce", "used_map", None, 4 * len(eng.reducer_params))
            for q in eng.reducer_params:
                if not eng.has_grad(q):
                    yield from self.work("copy_in", f"zero {names[q]}", eng.zero_s[q] * s, bucket_of[q], sizes[q])
                elif not batched:
                    yield from self.work("copy_in", names[q], eng.copy_in_s[q] * s, bucket_of[q], sizes[q])
                b = bucket_of[q]
                pending[b] -= 1
                if pending[b] == 0 and not batched:
                    ready_t[b] = self.t
            for b in range(nb):
                if batched:
                    yield from self.flush_bucket(b, layout, s)
                    ready_t[b] = self.t
                colls[b] = yield from self.launch_bucket(b, layout, s, hook)
                launch_t[b] = self.issue_s
            next_b = nb
        assert next_b == nb, f"rank {self.rank} iteration {k}: buckets {next_b}.. never became ready"
        self._ready_t, self._launch_t = ready_t, launch_t
        return colls

    def finalize(self, layout: _Layout, s: float, hook: str, colls: list[list[_Coll]]) -> Iterator[simpy.Event]:
        eng = self.eng
        nb = len(layout.buckets)
        used_map = self._used_map
        # §1.7: the used map is waited lazily at the first locally-unused parameter's bucket
        used_pending = used_map is not None
        # skip_all_reduce_unused_params: a skipped bucket has no work; finalize_backward passes it by
        live = [b for b in range(nb) if colls[b]]
        chained = hook == "powersgd" and not eng.futures_at_enqueue  # else done in the hook
        if chained:
            for b in live:
                yield from self.wait(colls[b][0], f"bucket {b} powersgd:uncompressed")
                colls[b].append(self.launch("allreduce", f"bucket {b} powersgd:P", b, int(layout.powersgd[b]["p_bytes"])))
            for b in live:
                ps = layout.powersgd[b]
                yield from self.wait(colls[b][1], f"bucket {b} powersgd:P")
                yield from self.work("compress", f"powersgd compute_qs bucket {b}",
                                     kernel_s(ps["qs_bytes"], ps["qs_flops"], eng.copy_bw, eng.peak_flops) * s, b, layout.sizes[b])
                colls[b].append(self.launch("allreduce", f"bucket {b} powersgd:Q", b, int(ps["q_bytes"])))
        if eng.mixed_precision is not None:
            yield from self.drain_upcast_stream(layout, s, live, colls)
        for b in live:
            c = colls[b][-1]
            yield from self.wait(c, f"bucket {b}")
            if chained:
                ps = layout.powersgd[b]
                yield from self.work("compress", f"powersgd decompress bucket {b}",
                                     kernel_s(ps["decompress_bytes"], ps["decompress_flops"], eng.copy_bw, eng.peak_flops) * s,
                                     b, layout.sizes[b])
            if used_pending and layout.has_unused[b]:
                yield from self.wait(used_map, "used_map")
                used_pending = False
            if not eng.gabv:
                yield from self.work("copy_out", f"bucket {b}", layout.copy_out_s[b] * s,
                                     b, layout.sizes[b])
            self.bucket_log.append((self.iter, b, self._ready_t[b], self._launch_t[b], colls[b][0].index, c.index))
        if used_pending:
            yield from self.wait(used_map, "used_map")


class _RestRanks(_Rank):
    """Every rank not simulated explicitly, as ONE vectorised process (fast path).

    All ranks run the same program; only their compute factors differ. So the local clocks
    of the R folded ranks are a numpy vector: work adds ``factor_r * dur`` (accumulated
    lazily in ``pend`` and folded in at the next launch or wait), a wait does
    ``t_r = max(t_r, end)``, and a launch arrives at ``max_r t_r``: exactly the latest of
    those ranks. Cost: O(R) numpy work per launch/wait, no per-rank SimPy process.
    """

    def __init__(self, eng: _Engine, factors: np.ndarray) -> None:
        super().__init__(eng, -1, np.ones(factors.shape[0]), record=False)
        self.fm = factors                      # (num_iterations, R)
        self.fk = factors[0]
        self.tv = np.zeros(factors.shape[1])
        self.pend = 0.0

    def _fold(self) -> None:
        if self.pend:
            self.tv = self.tv + self.fk * self.pend
            self.pend = 0.0
        self.t = float(self.tv.max())

    def advance(self, kind: str, name: str, dur: float, bucket: int | None = None, size: int | None = None) -> None:
        if dur > 0:
            self.pend += dur

    def work(self, kind: str, name: str, dur: float, bucket: int | None = None,
             size: int | None = None) -> Iterator[simpy.Event]:
        if dur > 0:
            self.pend += dur
        return
        yield  # NOTE: unreachable; makes this a generator like _Rank.work

    def launch(self, kind: str, name: str, bucket: int | None, size_bytes: int, broadcast: bool = False,
               then_s: float = 0.0) -> _Coll:
        self._fold()
        return super().launch(kind, name, bucket, size_bytes, broadcast, then_s)

    def wait(self, c: _Coll, name: str) -> Iterator[simpy.Event]:
        env = self.eng.env
        self._fold()
        if self.t > env.now:
            yield env.timeout(self.t - env.now)
        if not c.done.processed:
            self.eng.set_waiting(+1)
            yield c.done
            self.eng.set_waiting(-1)
        self.tv = np.maximum(self.tv, c.end_s)  # every folded rank waits, not only the latest
        self.t = max(self.t, c.end_s)

    def wait_until(self, t_abs: float | np.ndarray, name: str) -> Iterator[simpy.Event]:
        """Each folded rank waits until its own ``t_abs`` (a scalar for all, or one per rank)."""
        env = self.eng.env
        self._fold()
        if self.t > env.now:
            yield env.timeout(self.t - env.now)
        latest = float(np.max(t_abs))
        if latest > env.now:
            self.eng.set_waiting(+1)
            yield env.timeout(latest - env.now)
            self.eng.set_waiting(-1)
        self.tv = np.maximum(self.tv, t_abs)
        self.t = float(self.tv.max())

    def drain_upcast_stream(self, layout: _Layout, s: float, live: list[int],
                            colls: list[list[_Coll]]) -> Iterator[simpy.Event]:
        # the side stream's kernels scale with each folded rank's own factor
        eng = self.eng
        free = np.full(self.tv.shape, -np.inf)
        for b in live:
            c = colls[b][-1]
            yield from self.wait(c, f"bucket {b}")
            free = np.maximum(free, c.end_s) + kernel_s(layout.mp_after_bytes[b], 0, eng.copy_bw, None) * self.fk
        yield from self.wait_until(free, "mixed precision upcast")

    def iteration(self, k: int) -> Iterator[simpy.Event]:
        self._fold()
        self.fk = self.fm[k - 1]
        yield from super().iteration(k)

    def run(self) -> Iterator[simpy.Event]:
        yield from super().run()
        self._fold()


# ---- validation -------------------------------------------------------------------------

def _validate(trace: Trace, plan: BucketPlan, comm: CommModel, config: SimConfig) -> None:
    if not isinstance(config, SimConfig):
        raise InputError(f"config: {type(config).__name__} is not accepted; expected a ddpsim.engine.config.SimConfig")
    num_ranks = getattr(comm, "num_ranks", None)
    if not isinstance(num_ranks, int) or isinstance(num_ranks, bool) or num_ranks < 1:
        raise InputError(f"comm.num_ranks: {num_ranks!r} is not accepted; expected an integer >= 1")
    if config.world_size > num_ranks:
        raise InputError(f"world_size: {config.world_size} is not accepted; expected at most {num_ranks}, the ranks the comm model "
                         f"({comm.describe().get('model', type(comm).__name__)}) holds")
    n = trace.num_params
    opts = plan.options
    reducer = set(reducer_param_indices(trace, opts))
    for label, buckets in (("plan.initial", plan.initial), ("plan.steady", plan.steady)):
        seen: dict[int, int] = {}
        for b in buckets:
            for i in b.param_indices:
                if not (isinstance(i, int) and 0 <= i < n):
                    raise InputError(f"{label}[{b.index}]: parameter {i!r} is not in the trace; expected indices in [0, {n})")
                if i in seen:
                    raise InputError(f"{label}[{b.index}]: parameter {i} is already in bucket {seen[i]}; expected every parameter exactly once")
                if i not in reducer:
                    raise InputError(f"{label}[{b.index}]: parameter {trace.params[i].name!r} is in "
                                     "delay_all_reduce_named_params; expected only the reducer's parameters in buckets")
                seen[i] = b.index
        missing = [i for i in sorted(reducer) if i not in seen]
        if missing:
            raise InputError(f"{label}: parameters {missing[:8]}{'...' if len(missing) > 8 else ''} of trace {trace.model!r} are in no bucket; "
                             f"expected a plan covering all {n} parameters (build it from this trace)")
        for k, b in enumerate(buckets):
            if b.index != k:
                raise InputError(f"{label}[{k}].index: {b.index} is out of order; expected {k}")
    for name in ("forward", "backward", "optimizer", "zero_grad"):
        v = trace.phase(name).median_s
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"trace.iterations[].{name}_s: median {v!r} is not accepted; expected a finite number of seconds >= 0")
    if opts.mixed_precision is not None and config.comm_hook != "none":
        raise InputError(f"comm_hook: {config.comm_hook!r} is not accepted with mixed_precision; expected none (DDP "
                         "registers its own hook for mixed precision, and a second register_comm_hook raises)")
    if any(not p.has_grad and p.index in reducer for p in trace.params) and not (opts.find_unused_parameters or opts.static_graph):
        unused = [p.name for p in trace.params if not p.has_grad and p.index in reducer]
        raise InputError(f"find_unused_parameters: False is not accepted for this trace: parameters {unused[:3]} get no gradient, "
                         "which real DDP rejects; expected find_unused_parameters=True or static_graph=True")
    for label, v in (("comm.allreduce_s(0)", comm.allreduce_s(0)), ("comm.broadcast_s(0)", comm.broadcast_s(0))):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise InputError(f"{label}: {v!r} is not accepted; expected a finite number of seconds >= 0")


# ---- results -------------------------------------------------------------------------------

def _overlap_s(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted lists of disjoint intervals."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total




def _skipped_buckets(eng: _Engine, num_iterations: int) -> dict[str, list[int]]:
    """Per iteration (as a string key), the buckets skip_all_reduce_unused_params left out."""
    out: dict[str, list[int]] = {}
    for k in range(1, num_iterations + 1):
        layout = eng.layouts[k]
        skipped = [b for b in range(len(layout.buckets)) if eng.skips_bucket(b, layout, eng.static_graph and k == 1)]
        if skipped:
            out[str(k)] = skipped
    return out


def _config_summary(config: SimConfig) -> dict[str, Any]:
    d = asdict(config)
    d["stragglers"] = {str(k): v for k, v in sorted(config.stragglers.items())}
    if not config.interference.size_weights:  # only the "table" weighting has one
        del d["interference"]["size_weights"]
    if config.host_costs is None:
        del d["host_costs"]
    if not config.copy_kernel_floor_s:
        del d["copy_kernel_floor_s"]
    return d


# ---- public API ----------------------------------------------------------------------------

def _comm_seconds(comm: Any, attr: str) -> float:
    """A comm model's optional cost ``attr`` in seconds (absent or None: 0), checked."""
    v = getattr(comm, attr, 0.0)
    v = 0.0 if v is None else v
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"comm model {type(comm).__name__}.{attr}: {v!r} is not accepted; "
                         "expected a finite number of seconds >= 0")
    return float(v)


def simulate(trace: Trace, plan: BucketPlan, comm: CommModel, config: SimConfig, *, spans: bool = True) -> SimResult:
    """Simulate ``config.num_iterations`` iterations of DDP training of ``trace`` under ``plan``.

    Args:
        trace: the model's measured (or hand-made) step.
        plan: DDP's buckets (``ddpsim.plan.planner.plan_ddp``) or an explicit plan; its ``options``
            (find_unused_parameters, static_graph, gradient_as_bucket_view, broadcast_buffers /
            forward_sync_buffers, batched_grad_copy, skip_all_reduce_unused_params,
            mixed_precision, delay_all_reduce_named_params) shape the simulated reducer.
        comm: collective durations on the process group (``comm.num_ranks >= world_size``).
        config: world size, iterations, seed, comm hook, no_sync, jitter, stragglers,
            interference, copy bandwidth.
        spans: False leaves ``SimResult.spans`` empty (every other figure is the same):
            about a third faster, for sweeps that only need the summary.

    Returns:
        A :class:`SimResult`: every span of the explicitly simulated ranks, per-bucket and
        per-iteration figures; an "iteration" is one no_sync cycle (``no_sync_steps``
        micro-steps plus the synchronised step).

    Raises:
        InputError: a plan that does not cover the reducer's parameters, a world size the comm
            model does not hold, non-finite or negative durations, unused parameters without
            find_unused_parameters/static_graph, mixed_precision with a comm hook.
    """
    _validate(trace, plan, comm, config)
    env = simpy.Environment()
    eng = _Engine(env, trace, plan, comm, config)
    eng.keep_spans = bool(spans)
    rng = np.random.default_rng(config.seed)
    sigma = jitter_mod.jitter_sigma(trace, config.jitter)
    factors = jitter_mod.draw_factors(rng, sigma, config.num_iterations, config.world_size, config.stragglers)
    explicit, need_rest = jitter_mod.choose_explicit_ranks(config.world_size, config.stragglers, sigma, config.rank_group_size)
    ranks = [_Rank(eng, r, factors[:, r], record=True) for r in explicit]
    rest_f = None
    if need_rest:
        rest_f = jitter_mod.rest_factors(factors, explicit)
        if eng.interfere or eng.host is not None:
            # rates depend on time (or a CPU clock gates the device): approximate the folded
            # ranks by their slowest in each iteration
            ranks.append(_Rank(eng, -1, rest_f, record=False))
        else:
            mask = np.ones(config.world_size, dtype=bool)
            mask[list(explicit)] = False
            ranks.append(_RestRanks(eng, factors[:, mask]))
    eng.num_participants = len(ranks)
    for r in ranks:
        env.process(r.run())
    env.process(eng.comm_stream() if eng.lanes == 1 else eng.comm_lanes())
    env.run()
    assert all(r.finished for r in ranks), "simulation deadlocked: a rank waits for a collective that never completes"

    warmup = config.num_warmup_iterations
    if warmup is None:
        warmup = plan.rebuild_iteration if plan.rebuild_iteration is not None else 1
    colls = [c for c in eng.colls if c.kind is not None]
    comm_by_iter: dict[int, list[tuple[float, float]]] = {}
    last_grad_end: dict[int, float] = {}
    comm_rows: list[tuple] = []
    for c in colls:
        assert math.isfinite(c.end_s), f"collective {c.name} never ran"
        comm_by_iter.setdefault(c.iteration, []).append((c.start_s, c.end_s))
        if c.kind in ("allreduce", "used_map_allreduce"):
            last_grad_end[c.iteration] = max(last_grad_end.get(c.iteration, -math.inf), c.end_s)
        comm_rows.append((c.start_s, 1, c.index, c.end_s, c.kind, c.name, c.iteration, c.bucket, c.size_bytes))
    # spans of each rank in time order; at equal start compute first, then issue order
    out_spans: list[Span] = []
    append = out_spans.append
    new, setattr_ = object.__new__, object.__setattr__
    for rk in ranks:
        if rk.keep_spans:
            rows = rk.spans + comm_rows
            rows.sort()  # two sorted runs: a linear merge; (start, stream, order) is unique
            rank = rk.rank
            for (start, flag, _, end, kind, name, it, bucket, size) in rows:
                # NOTE: what Span(...) builds, without the frozen dataclass __init__'s nine
                # object.__setattr__ calls (tens of thousands of spans; Span has no __post_init__)
                sp = new(Span)
                setattr_(sp, "__dict__", {"rank": rank, "stream": COMM_STREAM if flag else COMPUTE_STREAM, "kind": kind,
                                          "name": name, "iteration": it, "start_s": start, "end_s": end,
                                          "bucket": bucket, "size_bytes": size})
                append(sp)
    buckets: list[BucketTiming] = []
    iters: list[IterationStats] = []
    for rk in ranks:
        if not rk.record:
            continue
        for (it, b, ready_s, launch_s, first_i, last_i) in rk.bucket_log:
            layout = eng.layouts[it]
            buckets.append(BucketTiming(rank=rk.rank, iteration=it, bucket=b, size_bytes=layout.sizes[b],
                                        num_params=layout.counts[b], ready_s=ready_s, launch_s=launch_s,
                                        start_s=eng.colls[first_i].start_s, end_s=eng.colls[last_i].end_s))
        for k, acc in enumerate(rk.accs, start=1):
            comm_iv = sorted(comm_by_iter.get(k, []))
            comm_s = sum(e - s for s, e in comm_iv)
            overlapped = _overlap_s(acc.compute, comm_iv)  # compute intervals: sorted, disjoint
            exposed = max(0.0, last_grad_end.get(k, -math.inf) - acc.bwd_end_s)
            iters.append(IterationStats(
                rank=rk.rank, iteration=k, start_s=acc.start_s, end_s=acc.end_s, forward_s=acc.forward_s,
                backward_compute_s=acc.backward_s, exposed_comm_s=exposed, comm_s=comm_s,
                overlap_ratio=overlapped / comm_s if comm_s > 0 else 0.0, optimizer_s=acc.optimizer_s,
                synced=True, warmup=k <= warmup))
    meta: dict[str, Any] = {
        "engine": "ddpsim.engine.simulate",
        "config": _config_summary(config),
        "plan": {"label": plan.options.label(), "source": plan.source, "rebuild_iteration": plan.rebuild_iteration,
                 "num_buckets_initial": len(plan.initial), "num_buckets_steady": len(plan.steady)},
        "comm": comm.describe(),
        "trace": {"model": trace.model, "num_params": trace.num_params, "total_param_bytes": trace.total_param_bytes},
        "iteration_unit": ("one no_sync cycle: no_sync_steps accumulation micro-steps + 1 synchronised step"
                           if config.no_sync_steps else "one synchronised step"),
        "num_warmup_iterations": warmup,
        "jitter_sigma": sigma,
        "explicit_ranks": list(explicit),
        "rest_representative": bool(need_rest),
        "rest_factor_by_iteration": [float(x) for x in rest_f] if rest_f is not None else None,
        "num_collectives": len(colls),
    }
    if eng.skip_unused:
        meta["skipped_buckets"] = _skipped_buckets(eng, config.num_iterations)
    return SimResult(world_size=config.world_size, ranks=tuple(explicit), spans=tuple(out_spans),
                     buckets=tuple(buckets), iterations=tuple(iters), meta=meta)
