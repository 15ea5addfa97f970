"""``executor replay``: run ANY bucket plan with the executor's own reducer.

The reducer does what DDP's C++ reducer does (torch/csrc/distributed/c10d/reducer.cpp:
``Reducer::mark_variable_ready``, ``Reducer::mark_bucket_ready``, ``Reducer::finalize_backward``),
for a plan DDP might never build: one flat buffer per bucket; on each parameter's post-accumulate-grad hook, the
gradient is copied into its bucket view with the division by world size fused
(``torch.mul(grad, 1/world, out=view)``); when a bucket's last gradient arrives, buckets are
launched strictly in plan order (bucket k+1 waits for bucket k) as asynchronous all-reduces;
at the end of backward every all-reduce is waited for, in order, and the buckets are copied
back into the gradients; then the SGD step.

Compute is either the real model (``--compute real``: ``--model`` must be the traced model)
or synthetic (``--compute synthetic``): forward, the gaps between gradient-ready times,
the tail of backward and the optimizer, each as long as the trace's medians say, so a
trace from one machine can be replayed on another. ``--synthetic-kernel matmul`` (default)
runs small matmuls calibrated at start-up (slowed by interference like real compute);
``spin`` busy-waits on the clock (fixed wall time).

Per-bucket launch and end times (seconds from the iteration's start) come from the
reducer itself, so timing costs no extra pass over the data (unlike DDP's comm hook).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

from ddpsim.errors import InputError

from ddpsim.formats import summarize
from executor.runtime import Runtime, measurement, write_json
from executor.workload import add_model_arguments, build_workload, check_counts, forward


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, required=False)
    p.add_argument("--trace", required=True, help="trace JSON: parameter list (and timings for synthetic compute)")
    p.add_argument("--plan", required=True, help="plan JSON: buckets in launch order (any plan, not only DDP's)")
    p.add_argument("--compute", choices=("real", "synthetic"), default="real",
                   help="real: train --model; synthetic: compute timed from the trace (default real)")
    p.add_argument("--synthetic-kernel", choices=("matmul", "spin"), default="matmul",
                   help="synthetic compute as calibrated matmuls (default) or a busy-wait")
    p.add_argument("--out", required=True, help="measurement JSON to write (rank 0, atomically)")


class FlatReducer:
    """Flat bucket buffers, fused copy-in with division, strict in-order async all-reduce."""

    def __init__(self, rt: Runtime, buckets: list[list[int]], shapes: list[tuple[int, ...]], dtypes: list[Any]) -> None:
        import torch

        self.rt = rt
        self.buckets = buckets
        self.scale = 1.0 / rt.world_size
        self.buffers = []
        self.where: dict[int, tuple[int, Any]] = {}
        for k, b in enumerate(buckets):
            numels = [int(torch.Size(shapes[i]).numel()) for i in b]
            buf = torch.zeros(sum(numels), dtype=dtypes[b[0]], device=rt.device)
            self.buffers.append(buf)
            off = 0
            for i, n in zip(b, numels):
                self.where[i] = (k, buf[off:off + n].view(shapes[i]))
                off += n
        self.pending: list[int] = []
        self.next_bucket = 0
        self.works: list[Any] = []
        self.records: list[dict[str, Any]] = []
        self.t0 = 0.0
        self.iteration = 0

    def prepare(self, iteration: int, t0: float) -> None:
        self.iteration, self.t0 = iteration, t0
        self.pending = [len(b) for b in self.buckets]
        self.next_bucket = 0
        self.works = [None] * len(self.buckets)

    def grad_ready(self, index: int, grad: Any) -> None:
        import torch

        k, view = self.where[index]
        torch.mul(grad, self.scale, out=view)
        self.pending[k] -= 1
        if self.pending[k] == 0 and k == self.next_bucket:
            while self.next_bucket < len(self.buckets) and self.pending[self.next_bucket] == 0:
                self._launch(self.next_bucket)
                self.next_bucket += 1

    def _launch(self, k: int) -> None:
        import torch.distributed as dist

        buf = self.buffers[k]
        rec = {"iteration": self.iteration, "bucket": k, "size_bytes": buf.numel() * buf.element_size(),
               "launch_s": time.perf_counter() - self.t0}
        work = dist.all_reduce(buf, async_op=True)
        t0 = self.t0

        def done(f: Any) -> Any:
            rec["end_s"] = time.perf_counter() - t0
            return None

        # NOTE: wait on the chained future, not the work: the callback that stamps end_s runs
        # after the work completes, on the backend's thread
        self.works[k] = (work.get_future().then(done), rec)

    def finish(self, grads_out: Callable[[int, Any], None] | None) -> None:
        """Wait for every bucket in order, then copy back (``grads_out(index, view)``)."""
        assert self.next_bucket == len(self.buckets), f"buckets {self.next_bucket}.. were never launched"
        for fut, rec in self.works:
            fut.wait()
            self.rt.watchdog.beat()
            self.records.append(rec)
        if grads_out is not None:
            for i, (_, view) in self.where.items():
                grads_out(i, view)


class SyntheticCompute:
    """Stand-in compute of a given duration: calibrated small matmuls, or a busy-wait."""

    def __init__(self, rt: Runtime, kernel: str) -> None:
        import torch

        self.kernel = kernel
        self.a = torch.randn(64, 64, device=rt.device)
        self.c = torch.empty(64, 64, device=rt.device)
        self.unit_s = 0.0
        if kernel == "matmul":
            for _ in range(50):
                torch.mm(self.a, self.a, out=self.c)
            samples = []
            for _ in range(7):
                t = time.perf_counter()
                for _ in range(200):
                    torch.mm(self.a, self.a, out=self.c)
                samples.append((time.perf_counter() - t) / 200)
            self.unit_s = statistics.median(samples)

    def run(self, seconds: float) -> None:
        import torch

        if seconds <= 0:
            return
        if self.kernel == "spin":
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
            return
        for _ in range(int(round(seconds / self.unit_s))):
            torch.mm(self.a, self.a, out=self.c)


def run(rt: Runtime, args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    from ddpsim.plan.planner import load_plan
    from ddpsim.trace.records import load_trace

    check_counts(args)
    trace = load_trace(args.trace)
    plan = load_plan(args.plan, trace)
    buckets = [list(b.param_indices) for b in plan.steady]
    shapes = [tuple(p.shape) for p in trace.params]
    dtypes = [getattr(torch, p.dtype) for p in trace.params]
    reducer = FlatReducer(rt, buckets, shapes, dtypes)

    samples: list[dict[str, float]] = []

    def record(it: int, t0: float, t1: float, t2: float, t3: float) -> None:
        rt.watchdog.beat(f"replay iteration {it}")
        if it > args.warmup:
            samples.append({"iteration": it, "forward_s": t1 - t0, "backward_s": t2 - t1,
                            "optimizer_s": t3 - t2, "iteration_s": t3 - t0})

    if args.compute == "real":
        model_name = _replay_real(rt, args, trace, reducer, record)
    else:
        model_name = _replay_synthetic(rt, args, trace, reducer, record, shapes, dtypes)
    recs = [r for r in reducer.records if r["iteration"] > args.warmup]
    gathered: list[Any] = [None] * rt.world_size
    dist.all_gather_object(gathered, {"rank": rt.rank, "iterations": samples, "buckets": recs})
    rt.watchdog.beat()
    if rt.rank == 0:
        summary = summarize([g["iterations"] for g in gathered])
        rec = measurement("replay", rt, model=model_name, compute=args.compute,
                          synthetic_kernel=args.synthetic_kernel if args.compute == "synthetic" else None,
                          batch_size=args.batch_size, num_threads=torch.get_num_threads(), trace=str(args.trace),
                          plan={"source": plan.source, "buckets": buckets,
                                "sizes": [b.size_bytes for b in plan.steady]},
                          warmup=args.warmup, num_iterations=args.iterations, summary=summary, ranks=gathered)
        write_json(args.out, rec)
        rt.log(f"replay: {model_name} ({args.compute} compute) {len(buckets)} buckets: iteration median "
               f"{summary['iteration_s'] * 1e3:.2f} ms p10 {summary['iteration_p10_s'] * 1e3:.2f} "
               f"p90 {summary['iteration_p90_s'] * 1e3:.2f}")
        rt.log(f"replay: wrote {args.out}")
    return 0


def _replay_real(rt: Runtime, args: argparse.Namespace, trace: Any, reducer: FlatReducer,
                 record: Callable[[int, float, float, float, float], None]) -> str:
    """``--compute real``: the traced model's own training steps, its gradients handed to the
    reducer from their post-accumulate-grad hooks; returns the model's name."""
    import torch
    import torch.distributed as dist

    from ddpsim.trace.models import ddp_params

    if args.model is None:
        raise InputError("--model: missing; expected the traced model's name with --compute real")
    wl = build_workload(args, rt.device)
    named = ddp_params(wl.module)
    if [n for n, _, _ in named] != [p.name for p in trace.params]:
        raise InputError(f"--trace: {args.trace!r} does not describe --model {args.model} (parameter names differ); "
                         f"expected a trace of the same model")
    params = [p for _, p, _ in named]
    for p in params:  # every rank starts from rank 0's weights, as DDP does
        dist.broadcast(p.data, src=0)
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda p, i=i: reducer.grad_ready(i, p.grad))
    opt = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)

    def set_grad(i: int, view: Any) -> None:
        params[i].grad.copy_(view)

    rt.barrier()
    for it in range(1, args.warmup + args.iterations + 1):
        t0 = time.perf_counter()
        reducer.prepare(it, t0)
        opt.zero_grad(set_to_none=True)
        loss = wl.loss_fn(forward(wl.module, wl.batch))
        t1 = time.perf_counter()
        loss.backward()
        reducer.finish(set_grad)
        rt.sync()
        t2 = time.perf_counter()
        opt.step()
        rt.sync()
        t3 = time.perf_counter()
        record(it, t0, t1, t2, t3)
    return wl.name


def _replay_synthetic(rt: Runtime, args: argparse.Namespace, trace: Any, reducer: FlatReducer,
                      record: Callable[[int, float, float, float, float], None], shapes: list[tuple[int, ...]],
                      dtypes: list[Any]) -> str:
    """``--compute synthetic``: the trace's median phases and gradient-ready gaps as synthetic
    compute, a gradient of ones handed to the reducer at each ready time; returns the trace's model."""
    import torch

    comp = SyntheticCompute(rt, args.synthetic_kernel)
    ready = trace.grad_ready_stat_s("median")
    order = sorted((t, i) for i, t in enumerate(ready) if t is not None)
    grads = [torch.ones(shapes[i], dtype=dtypes[i], device=rt.device) for i in range(len(shapes))]
    fwd = trace.phase("forward").median_s
    bwd = trace.phase("backward").median_s
    opt_s = trace.phase("optimizer").median_s + trace.phase("zero_grad").median_s
    rt.barrier()
    for it in range(1, args.warmup + args.iterations + 1):
        t0 = time.perf_counter()
        reducer.prepare(it, t0)
        comp.run(fwd)
        t1 = time.perf_counter()
        prev = 0.0
        for t, i in order:
            comp.run(t - prev)
            prev = t
            reducer.grad_ready(i, grads[i])
        comp.run(bwd - prev)
        reducer.finish(None)
        t2 = time.perf_counter()
        comp.run(opt_s)
        t3 = time.perf_counter()
        record(it, t0, t1, t2, t3)
    return trace.model
