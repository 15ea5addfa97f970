"""DDP's program on one rank, per iteration (one ``no_sync`` cycle): the rebuild's and the buffers'
broadcasts, ``no_sync_steps`` micro-steps, then forward, the hooks in gradient-ready order
copying each gradient into its bucket, buckets launched strictly in order (a comm hook's kernels
first), ``finalize_backward``, the optimizer and ``zero_grad``. Source: ``Reducer``
(``torch/csrc/distributed/c10d/reducer.cpp``), ``DistributedDataParallel``
(``torch/nn/parallel/distributed.py``) and ``torch/distributed/algorithms/ddp_comm_hooks/``;
the primitives are :mod:`ddpsim.engine.timeline`'s; docs/MODEL.md, "The engine"."""

from __future__ import annotations

import math
from typing import Iterator

import simpy

from ddpsim.engine.features import BucketLayout
from ddpsim.engine.join import COMMON_RANK, COUNT, FLAG_BYTES, GRAD_SYNC, RANK_BYTES
from ddpsim.engine.segments import Segment, build_segments, gate_floors, gate_table
from ddpsim.engine.streams import Coll
from ddpsim.engine.timeline import IterAcc, RankTimeline
from ddpsim.network.kernel_costs import fp16_compress_s, fp16_decompress_s, read_write_s


class BackwardState:
    """One synchronised backward's bucket bookkeeping on one rank."""

    __slots__ = ("layout", "hook", "static_first", "nb", "pending", "ready_t", "launch_t", "colls", "next_b", "plain",
                 "used_map")

    def __init__(self, layout: BucketLayout, hook: str, static_first: bool, plain: bool) -> None:
        nb = len(layout.buckets)
        self.layout = layout
        self.hook = hook
        #: a ready bucket is launched at once: no flush before it, the reducer's own all-reduce
        #: (no comm hook, no mixed precision): :meth:`Rank.launch_ready`
        self.plain = plain
        #: static_graph's first iteration: hooks only count; the reduction runs after backward
        self.static_first = static_first
        self.nb = nb
        #: gradients each bucket still waits for
        self.pending = list(layout.counts)
        self.ready_t = [math.nan] * nb
        self.launch_t = [math.nan] * nb
        self.colls: list[list[Coll]] = [[] for _ in range(nb)]
        #: the next bucket to launch (DDP launches in order)
        self.next_b = 0
        #: find_unused_parameters' used-map all-reduce, once launched
        self.used_map: Coll | None = None


class Rank(RankTimeline):
    """One simulated rank running DDP's program (or the 'rest' representative, which records nothing)."""

    def run(self) -> Iterator[simpy.Event]:
        """The rank's SimPy process: every iteration, then the end of its last work."""
        eng = self.eng
        if eng.interfere:
            eng.add_busy(+1)
        for k in range(1, eng.config.num_iterations + 1):
            yield from self.iteration(k)
        if eng.join is not None:
            yield from eng.join.exit(self)
        if eng.interfere:
            eng.add_busy(-1)
        elif self.t > eng.env.now:
            yield eng.env.timeout(self.t - eng.env.now)
        self.finished = True

    def iteration(self, k: int) -> Iterator[simpy.Event]:
        """Iteration ``k``: one no_sync cycle ending with the synchronised step."""
        eng = self.eng
        self.iter = k
        s = self.factors[k - 1]
        self.acc = IterAcc(self.t)
        layout = eng.layouts[k]
        n_micro = eng.config.no_sync_steps
        if eng.host is not None:  # the CPU meets the device at the step's start, then runs DDP's pre-forward
            self.cpu = max(self.cpu, self.t) + eng.host.pre_forward_s
        # 1. before the first forward of the iteration
        yield from self.first_forward_broadcasts(k, layout, s)
        # 2. no_sync micro-steps
        for m in range(n_micro):
            yield from self.forward(f"forward (no_sync {m + 1})", s, first=m == 0)
            yield from self.no_sync_backward(f"backward (no_sync {m + 1})", s)
        # 3. synchronised step
        if eng.host is not None:
            yield from self.host_gate()
        yield from self.forward("forward", s, first=n_micro == 0)
        if eng.iteration_overhead_s > 0:  # DDP's per-iteration fixed cost, when the comm model declares it
            yield from self.work("forward", "ddp overhead", eng.iteration_overhead_s * s)
        if eng.find_unused_dynamic:
            yield from self.work("graph_search", "graph_search", eng.graph_search_s * s)
        hook = eng.config.comm_hook
        if hook == "powersgd" and k - 1 < eng.config.powersgd.start_powerSGD_iter:
            hook = "allreduce"
        bw = yield from self.backward(k, layout, s, hook)
        # 4. finalize
        yield from self.finalize(bw, s)
        self.advance("optimizer", "optimizer", eng.optimizer_s * s)  # run with zero_grad's (flush)
        yield from self.work("zero_grad", "zero_grad", eng.zero_grad_s * s)
        if self.pending:  # a lazy rank's works (RankTimeline.work)
            yield from self.flush()
        self.acc.end_s = self.t
        self.accs.append(self.acc)

    def first_forward_broadcasts(self, k: int, layout: BucketLayout, s: float) -> Iterator[simpy.Event]:
        """The bucket rebuild's two blocking broadcasts (``Reducer::rebuild_buckets``: the index
        tensor, then the bucket sizes; in the rebuild iteration only), then the buffer broadcast
        (``_sync_buffers``) and, when the comm model declares a cost per buffer, its copies."""
        eng = self.eng
        if eng.join is not None:  # Join.notify_join_context: the count's async all-reduce
            self.launch("join", COUNT, None, FLAG_BYTES)
        if eng.plan.rebuild_iteration is not None and k == eng.plan.rebuild_iteration:
            c = self.launch("rebuild", "rebuild:indices", None, (len(eng.reducer_params) + 1) * 4, broadcast=True)
            yield from self.wait(c, "rebuild:indices")
            c = self.launch("rebuild", "rebuild:bucket_sizes", None, len(layout.buckets) * 4, broadcast=True)
            yield from self.wait(c, "rebuild:bucket_sizes")
        if eng.buffer_buckets:
            if eng.join is not None:  # _sync_buffers under Join: _find_common_rank, blocking
                c = self.launch("join", COMMON_RANK, None, RANK_BYTES)
                yield from self.wait(c, COMMON_RANK)
            for j, nbytes in enumerate(eng.buffer_buckets):
                c = self.launch("broadcast", f"buffers[{j}]", None, nbytes, broadcast=True)
            yield from self.wait(c, "broadcast")
            if eng.buffer_copies_s > 0:
                yield from self.work("forward", "buffer copies", eng.buffer_copies_s * s)
        if eng.join is not None:  # _check_global_requires_backward_grad_sync: async, active rank
            self.launch("join", GRAD_SYNC, None, FLAG_BYTES)

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

    def launch_bucket(self, b: int, layout: BucketLayout, s: float, hook: str) -> Iterator[simpy.Event]:
        """``Reducer::all_reduce_bucket``: the comm hook's kernels before the collective, then its
        launch (without a hook, the reducer's own all-reduce, the gradients divided at copy-in);
        returns the bucket's collectives (PowerSGD on NCCL: all three)."""
        eng = self.eng
        size, numel = layout.sizes[b], layout.numels[b]
        name = layout.names[b]
        if eng.host is not None:  # Reducer::all_reduce_bucket's own work, before the process group's
            self.cpu += eng.host.bucket_launch_s
        if eng.mixed_precision is None and hook == "none":
            return [self.launch("allreduce", name, b, size)]
        if eng.mixed_precision is not None:
            # _reducer_allreduce_and_upcast_hook: cast to reduce_dtype if it differs, no division before
            yield from self.work("compress", f"mixed precision cast {name}", layout.mp_cast_s[b] * s, b, size)
            return [self.launch("allreduce", name, b, layout.reduce_bytes[b])]
        if eng.config.comm_hook_call_s > 0:  # the Python hook's call, future and callback (calibrated)
            yield from self.work("compress", f"comm hook call {name}", eng.config.comm_hook_call_s * s, b, size)
        if hook == "allreduce":
            yield from self.work("compress", f"div {name}", read_write_s(size, eng.copy_bw) * s, b, size)
            return [self.launch("allreduce", name, b, size)]
        if hook in ("fp16", "bf16"):
            # buffer.to(fp16): read size, write 2N; div_ on the compressed: read 2N, write 2N
            yield from self.work("compress", f"{hook} cast {name}", fp16_compress_s(size, numel, eng.copy_bw) * s, b, size)
            # the hook's fut.then(decompress): ProcessGroupNCCL's future completes at enqueue, so the
            # callback runs here and its copy back into the bucket (read 2N, write 4N) is queued on
            # the collective's stream right behind it (default_hooks.py fp16_compress_hook)
            decompress_s = fp16_decompress_s(numel, eng.copy_bw, eng.config.copy_kernel_floor_s)
            return [self.launch("allreduce", name, b, 2 * numel, then_s=decompress_s)]
        # powersgd (the hooks are SimConfig's COMM_HOOKS)
        ps = layout.powersgd[b]
        yield from self.work("compress", f"powersgd compress {name}", layout.powersgd_compress_s[b] * s, b, size)
        first = self.launch("allreduce", f"{name} powersgd:uncompressed", b, int(ps["uncompressed_bytes"]))
        if not eng.futures_at_enqueue:  # gloo: the rest of the round in finalize
            return [first]
        # ProcessGroupNCCL (powerSGD_hook): the uncompressed all-reduce's future is complete at
        # enqueue, so .then(unpack_..._and_allreduce_ps), .then(compute_qs) and .then(decompress)
        # run at once, in the autograd hook: P's all-reduce enqueued behind the first,
        # compute_qs's kernels (orthogonalise P, Q = M^T P) behind P and Q's all-reduce behind
        # them, decompress's kernels behind Q; then decompress calls torch.cuda.synchronize: the
        # CPU blocks until the device has drained, so no later backward kernel is enqueued
        # before. The backward stops for each bucket's whole round: the hooks' overlap is lost.
        p = self.launch("allreduce", f"{name} powersgd:P", b, int(ps["p_bytes"]),
                        then_s=layout.powersgd_qs_s[b] * s)
        q = self.launch("allreduce", f"{name} powersgd:Q", b, int(ps["q_bytes"]),
                        then_s=layout.powersgd_decompress_s[b] * s)
        yield from self.wait(q, f"powersgd synchronize {name}")
        if eng.host is not None:  # the CPU returns from the synchronize once the device is idle
            self.cpu = max(self.cpu, self.t)
        return [first, p, q]

    def flush_bucket(self, b: int, layout: BucketLayout, s: float) -> Iterator[simpy.Event]:
        """batched_grad_copy (``Reducer::flush_deferred_copies``): when the bucket's last gradient is
        marked, one ``_foreach_copy_`` of the deferred gradients and, without a comm hook, one
        ``div_`` of the flat bucket (the per-parameter copies fused the division instead)."""
        size = layout.sizes[b]
        yield from self.work("copy_in", f"foreach_copy bucket {b}", layout.flush_copy_s[b] * s, b, size)
        if self.eng.reducer_divides:
            yield from self.work("copy_in", f"div bucket {b}", layout.flush_div_s[b] * s, b, size)

    def drain_upcast_stream(self, layout: BucketLayout, s: float, live: list[int],
                            colls: list[list[Coll]]) -> Iterator[simpy.Event]:
        """Mixed precision's upcast stream (``_reducer_allreduce_and_upcast_hook``): per bucket, once
        its all-reduce is done, ``div_`` by the world size and the gradients' upcast, one bucket
        after another; it overlaps backward. ``wait_for_stream_cb`` (queued at the first hook,
        so before the reducer's finalize) makes the compute stream wait for all of it."""
        free_s = -math.inf
        for b in live:
            c = colls[b][-1]
            yield from self.wait(c, f"bucket {b}")
            free_s = max(c.end_s, free_s) + layout.mp_upcast_s[b] * s
        yield from self.wait_until(free_s, "mixed precision upcast")

    # -- the synchronised backward: Reducer::autograd_hook per gradient, buckets in order ---
    def backward(self, k: int, layout: BucketLayout, s: float, hook: str) -> Iterator[simpy.Event]:
        """The backward of the synchronised step; returns its state for :meth:`finalize` (each
        bucket's collectives, ``[]`` for a skipped bucket, ready and launch times)."""
        eng = self.eng
        bw = BackwardState(layout, hook, static_first=eng.static_graph and k == 1,
                           plain=not eng.batched and eng.mixed_precision is None and hook == "none")
        yield from self.hooks_in_ready_order(bw, s)
        yield from self.work("backward", "backward tail", eng.tail_s * s)
        self.acc.bwd_end_s = self.t
        if bw.static_first:
            yield from self.static_graph_first_reduce(bw, s)
        assert bw.next_b == bw.nb, f"rank {self.rank} iteration {k}: buckets {bw.next_b}.. never became ready"
        return bw

    def hooks_in_ready_order(self, bw: "BackwardState", s: float) -> Iterator[simpy.Event]:
        """Per parameter in gradient-ready order: the backward compute up to its ready time,
        a SyncBatchNorm's or the delayed all-reduce's hook there, then the reducer's hook
        (with find_unused_parameters the first hook also marks every unused parameter).
        Under interference the hooks between two bucket-ready events are taken in one go where
        no host gate falls inside (:meth:`ddpsim.engine.segments.Segment.take`)."""
        found = self.segments(bw)
        if found is None:
            yield from self.hooks_one_by_one(bw, s, 0, len(self.eng.order), 0.0)
            return
        segs, floors = found
        grads_left, plain = bw.pending, bw.plain
        for seg, floor_s in zip(segs, floors):
            if seg.closed_form(self, s, floor_s):
                seg.take(self, s, grads_left)
                if seg.ready_b is not None:
                    if self.pending and not self.runs_on():
                        yield from self.flush()
                    if plain:
                        self.launch_ready(seg.ready_b, bw)
                    else:
                        yield from self.bucket_ready(seg.ready_b, s, bw)
            else:
                yield from self.hooks_one_by_one(bw, s, seg.start, seg.stop, seg.prev0)

    def segments(self, bw: "BackwardState") -> "tuple[list[Segment], list[float]] | None":
        """The backward's segments between bucket-ready events (built once per layout for
        every rank) and their no-gate bounds at this rank's least factor, or None where works
        run at rate 1 (there one by one is already cheap, and the same arithmetic as a full run)
        or a hook may do more than a plain copy-in: with a SyncBatchNorm, the delayed
        all-reduce, an unused parameter, batched copies or static_graph's first iteration."""
        eng = self.eng
        if self.fast or eng.batched or eng.unused or bw.static_first or eng.syncbn or eng.delayed:
            return None
        key = id(bw.layout)
        if key not in self.segments_of:
            if key not in eng.segments_of:
                segs = build_segments(eng, bw.layout)
                eng.segments_of[key] = (bw.layout, segs, gate_table(segs))
            _, segs, table = eng.segments_of[key]
            s_lo, h = min(self.factors), eng.host.hook_s_per_param if eng.host is not None else 0.0
            self.segments_of[key] = (bw.layout, (segs, gate_floors(segs, s_lo, h, table)))
        return self.segments_of[key][1]

    def hooks_one_by_one(self, bw: "BackwardState", s: float, start: int, stop: int,
                         prev: float) -> Iterator[simpy.Event]:
        """The hooks of ``eng.order[start:stop]``, one after another (``prev``: the latest
        ready time before them)."""
        eng = self.eng
        names, ready, bucket_of, grads_left = eng.names, eng.ready, bw.layout.bucket_of, bw.pending
        first = True
        advance = self.advance
        copy_in_s, has_grad, sizes = eng.copy_in_s, eng.has_grad, eng.param_sizes
        is_reducer, static_first = eng.is_reducer, bw.static_first
        delay_hook = eng.delayed.hook_param if eng.delayed is not None else -1
        bn_at = eng.syncbn.at_param if eng.syncbn is not None else {}
        # NOTE: the hot loop: no generator per hook (advance: at rate 1 done at once, else
        # deferred to one flush at the next interaction)
        pending = self.pending
        # a gradient's copy-in without batching needs no generator (autograd_hook; host costs first)
        plain_copy_in = not eng.batched
        host_hook_s = eng.host.hook_s_per_param if eng.host is not None else None
        for p in eng.order[start:stop]:
            r = ready[p]
            # medians taken per parameter need not follow the ready order: never step back
            d, prev = ((r - prev) * s, r) if r > prev else (0.0, prev)
            advance("backward", names[p], d)
            if pending and (p in bn_at or p == delay_hook):
                yield from self.flush()
            if p in bn_at:  # inside the SyncBatchNorm's backward, before its gradients are ready
                for j in bn_at[p]:
                    yield from self.syncbn_backward(j)
            if p == delay_hook:  # a tensor hook: fires before the parameter's AccumulateGrad
                yield from self.launch_delayed_all_reduce(s)
            if static_first or not is_reducer[p]:
                continue
            if first:
                first = False
                marks = list(eng.unused) + [p] if eng.unused else [p]  # the first hook marks the unused too
            else:
                marks = (p,)
            for q in marks:
                if plain_copy_in and has_grad(q):  # the common case: what autograd_hook does
                    if host_hook_s is not None:  # the hook's CPU time, then host_gate without SimPy
                        self.cpu += host_hook_s
                        self.gate()
                    advance("copy_in", names[q], copy_in_s[q] * s, bucket_of[q], sizes[q])
                else:
                    if pending:
                        yield from self.flush()
                    yield from self.autograd_hook(q, s, bw.layout)
                b = bucket_of[q]
                grads_left[b] -= 1
                if grads_left[b] == 0:
                    if pending:
                        yield from self.flush()
                    if bw.plain:
                        self.launch_ready(b, bw)
                    else:
                        yield from self.bucket_ready(b, s, bw)

    def autograd_hook(self, q: int, s: float, layout: BucketLayout, on_cpu: bool = True) -> Iterator[simpy.Event]:
        """``Reducer::autograd_hook`` -> ``mark_variable_ready_dense`` for parameter ``q``: on the
        CPU (host costs; not ``on_cpu``: no hook, ``delay_all_reduce``'s call), then an unused
        parameter's zero-fill or the gradient's copy-in into its bucket view (none with
        batched_grad_copy: deferred to the bucket's flush)."""
        eng = self.eng
        names, bucket_of, sizes = eng.names, layout.bucket_of, eng.param_sizes
        if on_cpu and eng.host is not None:  # the hook runs on the CPU, then the copy-in is enqueued
            self.cpu += eng.host.hook_s_per_param
            yield from self.host_gate()
        if not eng.has_grad(q):
            yield from self.work("copy_in", f"zero {names[q]}", eng.zero_s[q] * s, bucket_of[q], sizes[q])
        elif not eng.batched:  # batched: deferred to the bucket's flush
            yield from self.work("copy_in", names[q], eng.copy_in_s[q] * s, bucket_of[q], sizes[q])

    def launch_ready(self, ready: int, bw: "BackwardState") -> None:
        """:meth:`bucket_ready` of bucket ``ready`` in a plain backward (``bw.plain``), without a
        generator: every bucket ready in order launched with the reducer's own all-reduce."""
        eng = self.eng
        layout, pending, nb, colls = bw.layout, bw.pending, bw.nb, bw.colls
        bw.ready_t[ready] = self.t
        b = bw.next_b
        skips, launch_s = eng.skip_unused, eng.host.bucket_launch_s if eng.host is not None else None
        names, sizes, launch = layout.names, layout.sizes, self.launch
        while b < nb and pending[b] == 0:
            if skips and eng.skips_bucket(b, layout, bw.static_first):
                bw.launch_t[b] = self.t
            else:  # NOTE: what launch_bucket does without a hook, without a generator per bucket
                if launch_s is not None:
                    self.cpu += launch_s
                colls[b] = [launch("allreduce", names[b], b, sizes[b])]
                bw.launch_t[b] = self.issue_s
            b += 1
        bw.next_b = b
        if b == nb and eng.find_unused_dynamic:
            bw.used_map = self.launch("used_map_allreduce", "used_map", None, 4 * len(eng.reducer_params))

    def bucket_ready(self, b: int, s: float, bw: "BackwardState") -> Iterator[simpy.Event]:
        """Bucket ``b``'s last gradient is marked (``Reducer::mark_bucket_ready``): batched_grad_copy's
        flush, then DDP launches every bucket ready in order (``launch_k = max(ready_k, launch_{k-1})``),
        passing by those skip_all_reduce_unused_params leaves out; after the last one,
        find_unused_parameters' used-map all-reduce."""
        eng = self.eng
        layout, pending, nb = bw.layout, bw.pending, bw.nb
        if eng.batched:
            yield from self.flush_bucket(b, layout, s)
        bw.ready_t[b] = self.t
        while bw.next_b < nb and pending[bw.next_b] == 0:
            b = bw.next_b
            if not eng.skips_bucket(b, layout, bw.static_first):
                bw.colls[b] = yield from self.launch_bucket(b, layout, s, bw.hook)
            bw.launch_t[b] = self.issue_s if bw.colls[b] else self.t
            bw.next_b += 1
            if bw.next_b == nb and eng.find_unused_dynamic:
                bw.used_map = self.launch("used_map_allreduce", "used_map", None, 4 * len(eng.reducer_params))

    def static_graph_first_reduce(self, bw: "BackwardState", s: float) -> Iterator[simpy.Event]:
        """static_graph's first iteration (``Reducer::delay_all_reduce``): after backward, the
        used map, every gradient copied in index order, then every bucket launched back to back
        (batched_grad_copy: only zero-fills here, each bucket flushed right before its launch)."""
        eng = self.eng
        layout, pending = bw.layout, bw.pending
        bw.used_map = self.launch("used_map_allreduce", "used_map", None, 4 * len(eng.reducer_params))
        for q in eng.reducer_params:
            yield from self.autograd_hook(q, s, layout, on_cpu=False)
            b = layout.bucket_of[q]
            pending[b] -= 1
            if pending[b] == 0 and not eng.batched:
                bw.ready_t[b] = self.t
        for b in range(bw.nb):
            if eng.batched:
                yield from self.flush_bucket(b, layout, s)
                bw.ready_t[b] = self.t
            bw.colls[b] = yield from self.launch_bucket(b, layout, s, bw.hook)
            bw.launch_t[b] = self.issue_s
        bw.next_b = bw.nb

    def finalize(self, bw: BackwardState, s: float) -> Iterator[simpy.Event]:
        """``Reducer::finalize_backward`` after backward compute: per bucket in order, wait for its
        collective, PowerSGD's remaining rounds on gloo, the used map, the copy-out."""
        eng = self.eng
        layout, colls, used_map = bw.layout, bw.colls, bw.used_map
        # the used map is waited lazily at the first locally-unused parameter's bucket
        # (Reducer::finalize_backward)
        used_pending = used_map is not None
        # skip_all_reduce_unused_params: a skipped bucket has no work; finalize_backward passes it by
        live = [b for b in range(bw.nb) if colls[b]]
        chained = bw.hook == "powersgd" and not eng.futures_at_enqueue  # else done in the hook
        if chained:
            for b in live:
                yield from self.wait(colls[b][0], f"bucket {b} powersgd:uncompressed")
                colls[b].append(self.launch("allreduce", f"bucket {b} powersgd:P", b, int(layout.powersgd[b]["p_bytes"])))
            for b in live:
                yield from self.wait(colls[b][1], f"bucket {b} powersgd:P")
                yield from self.work("compress", f"powersgd compute_qs bucket {b}",
                                     layout.powersgd_qs_s[b] * s, b, layout.sizes[b])
                colls[b].append(self.launch("allreduce", f"bucket {b} powersgd:Q", b, int(layout.powersgd[b]["q_bytes"])))
        if eng.mixed_precision is not None:
            yield from self.drain_upcast_stream(layout, s, live, colls)
        names, record = layout.names, self.record
        copy_out = not eng.gabv  # run with the next wait's or the optimizer's work (flush)
        copy_back_s = eng.host.copy_back_s_per_param if eng.host is not None else 0.0
        counts, copy_out_s, sizes, advance = layout.counts, layout.copy_out_s, layout.sizes, self.advance
        for b in live:
            c = colls[b][-1]
            yield from self.wait(c, names[b])
            if chained:
                yield from self.work("compress", f"powersgd decompress bucket {b}",
                                     layout.powersgd_decompress_s[b] * s, b, layout.sizes[b])
            if used_pending and layout.has_unused[b]:
                yield from self.wait(used_map, "used_map")
                used_pending = False
            if copy_out:
                if copy_back_s:
                    # copy_bucket_to_grad: one copy_ launched per gradient on the CPU first
                    self.cpu += copy_back_s * counts[b]
                    self.gate()
                advance("copy_out", names[b], copy_out_s[b] * s, b, sizes[b])
            if record:
                self.bucket_log.append((self.iter, b, bw.ready_t[b], bw.launch_t[b], colls[b][0].index, c.index))
        if used_pending:
            yield from self.wait(used_map, "used_map")
