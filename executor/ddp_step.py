"""``executor ddp``: a model under real ``DistributedDataParallel``.

Runs ``--warmup`` iterations (past DDP's bucket rebuild at iteration 2), then
``--iterations`` measured ones: zero_grad, forward (DDP's pre-forward: rebuild, buffer
broadcast), loss, backward (the reducer's all-reduces overlap it; it returns after
finalize), SGD step. Records per iteration and rank: forward, backward, optimizer and
iteration seconds; the step time of an iteration is the mean of the ranks' (see
:func:`step_times`).

``--timing-hook`` registers a comm hook that wraps the all-reduce and records each bucket's
launch and end (CUDA events on GPUs, wall clock on CPUs). NOTE: any registered hook changes
DDP's division path (reference §1.6/§1.10): the reducer then copies gradients into the bucket
without dividing and the hook divides the bucket (one more pass over it). So the iteration
time used for validation comes from a run WITHOUT the hook; run the hooked run separately to
get per-bucket times (``ddpsim validate`` does both).

With ``--trace`` (a trace of the same model) or ``--plan`` (a plan JSON), DDP's rebuilt
buckets (``_get_ddp_logging_data()``: ``rebuilt_per_bucket_param_indices``,
``rebuilt_bucket_sizes``) are compared with the plan ddpsim predicts (``plan_matches``).
DDP never rebuilds under ``find_unused_parameters`` without ``static_graph``
(``has_rebuilt_buckets`` stays 0): its logging then gives only the sizes of the buckets it
keeps (``bucket_sizes``), and the sizes alone are compared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from ddpsim.errors import InputError

from executor.runtime import Runtime, measurement, quantile, write_json
from executor.workload import add_model_arguments, build_workload, check_counts, timed_steps


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--bucket-cap-mb", default=None,
                   help="DDP bucket_cap_mb in MiB; omit (or 'none') to leave it unset as PyTorch's default")
    add_ddp_option_arguments(p)
    p.add_argument("--timing-hook", action="store_true",
                   help="record per-bucket all-reduce launch/end with a comm hook (changes DDP's division path)")
    p.add_argument("--trace", default=None, help="trace JSON of this model: predict DDP's buckets and compare")
    p.add_argument("--plan", default=None, help="plan JSON (ddpsim plan --format json) to compare instead")
    p.add_argument("--out", required=True, help="measurement JSON to write (rank 0, atomically)")


def add_ddp_option_arguments(p: argparse.ArgumentParser) -> None:
    """DDP's options other than the cap (:func:`ddp_kwargs` reads them), shared with ``executor round``."""
    p.add_argument("--find-unused-parameters", action="store_true")
    p.add_argument("--static-graph", action="store_true")
    p.add_argument("--gradient-as-bucket-view", action="store_true")
    p.add_argument("--no-broadcast-buffers", action="store_true", help="broadcast_buffers=False")


def parse_cap(value: str | None) -> float | None:
    """``--bucket-cap-mb`` -> MiB; None (PyTorch's default) when omitted, empty or none/null/default."""
    from ddpsim.commands._args import parse_cap_value

    if value is None or not str(value).strip():
        return None
    return parse_cap_value(value, "--bucket-cap-mb", "a number of MiB > 0 or 'none'")


def parse_index_groups(text: str) -> list[list[int]]:
    """``'5 4 3 2, 1 0'`` -> ``[[5, 4, 3, 2], [1, 0]]`` (DDP logging's format)."""
    return [[int(x) for x in g.split()] for g in str(text).split(",") if g.strip()]


def parse_ints(text: str) -> list[int]:
    return [int(x) for x in str(text).replace(",", " ").split()]


def predicted_plan(args: argparse.Namespace, cap: float | None, param_names: list[str]) -> dict[str, Any] | None:
    """The plan ddpsim predicts: ``{"buckets": [[idx...]...], "sizes": [...], "source": ...}``."""
    if args.plan is None and args.trace is None:
        return None
    from ddpsim.trace import load_trace

    if args.plan is not None:
        p = Path(args.plan)
        if not p.is_file():
            raise InputError(f"--plan: {args.plan!r} does not exist; expected a plan JSON")
        data = json.loads(p.read_text())
        buckets = [b["param_indices"] if isinstance(b, dict) else b for b in data["buckets"]]
        sizes = [b.get("size_bytes") if isinstance(b, dict) else None for b in data["buckets"]]
        return {"buckets": buckets, "sizes": sizes, "source": f"plan {args.plan}"}
    return plan_from_trace(load_trace(args.trace), f"trace {args.trace}", cap, param_names, args)


def plan_from_trace(trace: Any, label: str, cap: float | None, param_names: list[str],
                    args: argparse.Namespace) -> dict[str, Any]:
    """DDP's steady buckets as ddpsim plans them from ``trace`` (``label`` names it) at ``cap``
    with ``args``' DDP options; the trace must describe the model whose DDP order is ``param_names``."""
    from ddpsim.plan import DDPOptions, plan_ddp

    names = [p.name for p in trace.params]
    if names != param_names:
        diff = next((i for i, (a, b) in enumerate(zip(names, param_names)) if a != b), min(len(names), len(param_names)))
        raise InputError(f"--trace: {label!r} does not describe this model (parameter {diff}: "
                         f"{names[diff] if diff < len(names) else None!r} vs {param_names[diff] if diff < len(param_names) else None!r}); "
                         f"expected a trace of --model {args.model}")
    opts = DDPOptions(bucket_cap_mb=cap, find_unused_parameters=args.find_unused_parameters,
                      static_graph=args.static_graph, gradient_as_bucket_view=args.gradient_as_bucket_view)
    plan = plan_ddp(trace, opts)
    return {"buckets": [list(b.param_indices) for b in plan.steady], "sizes": [b.size_bytes for b in plan.steady],
            "source": f"plan_ddp({label}, {opts.label()})"}


class BucketTimer:
    """A comm hook recording each bucket's all-reduce launch and end (seconds from iteration start)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.iteration = 0
        self.t0: Any = None
        self.records: list[dict[str, Any]] = []

    def start_iteration(self, iteration: int) -> None:
        import torch

        self.iteration = iteration
        if self.rt.is_cuda:
            self.t0 = torch.cuda.Event(enable_timing=True)
            self.t0.record()
        else:
            self.t0 = time.perf_counter()

    def _mark(self) -> Any:
        import torch

        if self.rt.is_cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def hook(self, state: Any, bucket: Any):
        import torch.distributed as dist

        buf = bucket.buffer()
        rec = {"iteration": self.iteration, "bucket": bucket.index(), "size_bytes": buf.numel() * buf.element_size(),
               "_t0": self.t0, "_launch": self._mark()}
        buf.div_(self.rt.world_size)
        fut = dist.all_reduce(buf, async_op=True).get_future()

        def done(f: Any):
            rec["_end"] = self._mark()
            self.records.append(rec)
            return f.value()[0]

        return fut.then(done)

    def as_hook(self):
        """A plain function with real (not string) annotations, which DDP's hook check wants."""
        import torch
        import torch.distributed as dist

        def timing_hook(state, bucket):
            return self.hook(state, bucket)

        timing_hook.__annotations__ = {"state": object, "bucket": dist.GradBucket,
                                       "return": torch.futures.Future[torch.Tensor]}
        return timing_hook

    def resolve(self) -> list[dict[str, Any]]:
        """Turn marks into seconds from the iteration's start (synchronises on GPUs)."""
        self.rt.sync()
        out = []
        for r in self.records:
            if self.rt.is_cuda:
                launch = r["_t0"].elapsed_time(r["_launch"]) / 1e3
                end = r["_t0"].elapsed_time(r["_end"]) / 1e3
            else:
                launch, end = r["_launch"] - r["_t0"], r["_end"] - r["_t0"]
            out.append({"iteration": r["iteration"], "bucket": r["bucket"], "size_bytes": r["size_bytes"],
                        "launch_s": launch, "end_s": end})
        return sorted(out, key=lambda r: (r["iteration"], r["bucket"]))


def step_times(per_rank: list[list[dict[str, float]]]) -> list[float]:
    """The job's step time per measured iteration: the MEAN over ranks of each rank's own
    iteration time (start of zero_grad to the end of the optimizer step, back to back).

    The ranks meet in every iteration's all-reduces, so every rank's iteration times add up to
    the job's wall time and their per-iteration mean does too (whatever the ranks' clocks).
    The per-iteration MAX over ranks does not: a delay on one rank after an iteration's last
    all-reduce (its optimizer step, say) lengthens that rank's iteration k and, as the other
    rank waits for it in the next all-reduce, the other rank's iteration k + 1 -- the max
    counts it twice. On the 2-vCPU host, where millisecond steps stall on 1-4 ms wake-ups,
    that put the mlp's median 0.5-1.1 ms (10-25 %) above its wall time per step; on the
    seconds-long steps of the big models it moved nothing.
    """
    n = min(len(r) for r in per_rank)
    return [statistics.fmean(r[i]["iteration_s"] for r in per_rank) for i in range(n)]


def summarize(per_rank: list[list[dict[str, float]]]) -> dict[str, Any]:
    """Step time per iteration (:func:`step_times`); median / p10 / p90 over measured iterations."""
    n = min(len(r) for r in per_rank)
    steps = step_times(per_rank)
    out: dict[str, Any] = {"iteration_s": statistics.median(steps), "iteration_p10_s": quantile(steps, 0.1),
                           "iteration_p90_s": quantile(steps, 0.9), "iteration_mean_s": statistics.fmean(steps),
                           "step_times_s": steps}
    for ph in ("forward_s", "backward_s", "optimizer_s"):
        out[ph] = statistics.median(statistics.fmean(r[i][ph] for r in per_rank) for i in range(n))
    return out


def ddp_kwargs(rt: Runtime, args: argparse.Namespace, cap: float | None) -> dict[str, Any]:
    """The ``DistributedDataParallel`` keyword arguments of ``args``' options at ``cap``."""
    kwargs: dict[str, Any] = dict(find_unused_parameters=args.find_unused_parameters, static_graph=args.static_graph,
                                  gradient_as_bucket_view=args.gradient_as_bucket_view)
    if args.no_broadcast_buffers:
        kwargs["broadcast_buffers"] = False
    if cap is not None:
        kwargs["bucket_cap_mb"] = cap
    if rt.is_cuda:
        kwargs["device_ids"] = [rt.device.index]
    return kwargs


def measure_point(rt: Runtime, args: argparse.Namespace, wl: Any, cap: float | None,
                  predicted: dict[str, Any] | None, *, label: str = "ddp") -> dict[str, Any] | None:
    """Wrap ``wl.module`` in a fresh real DDP at ``cap`` (``args``' options), train
    ``args.warmup + args.iterations`` steps with a fresh SGD, and return the measurement record
    on rank 0 (None on the others). The DDP wrapper and its Reducer are freed before returning
    (the Reducer's destructor removes its autograd hooks), so the same module can be wrapped
    again: ``executor round`` measures every point of a round in one launch that way."""
    import gc

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    kwargs = ddp_kwargs(rt, args, cap)
    model = DDP(wl.module, **kwargs)
    timer = BucketTimer(rt) if args.timing_hook else None
    if timer is not None:
        model.register_comm_hook(None, timer.as_hook())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    samples = timed_steps(rt, model, opt, wl, warmup=args.warmup, iterations=args.iterations, label=label,
                          before=timer.start_iteration if timer is not None else None)
    logging = {k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
               for k, v in model._get_ddp_logging_data().items()}
    buckets_rec = timer.resolve() if timer is not None else []
    opt.zero_grad(set_to_none=True)
    del model, opt
    gc.collect()
    gathered: list[Any] = [None] * rt.world_size
    dist.all_gather_object(gathered, {"rank": rt.rank, "iterations": samples, "buckets": buckets_rec})
    rt.watchdog.beat()
    real = {"buckets": parse_index_groups(logging.get("rebuilt_per_bucket_param_indices", "")),
            "sizes": parse_ints(logging.get("rebuilt_bucket_sizes", "")),
            "grad_ready_order": parse_ints(logging.get("prev_iteration_grad_ready_order_indices", ""))}
    rebuilt = bool(logging.get("has_rebuilt_buckets", 1))
    if not rebuilt:  # the buckets DDP kept: their sizes only (no per-bucket parameter indices logged)
        real["sizes"] = parse_ints(logging.get("bucket_sizes", ""))
    matches = None
    if predicted is not None:
        matches = (predicted["buckets"] == real["buckets"] if rebuilt else True) and (
            all(s is None for s in predicted["sizes"]) or predicted["sizes"] == real["sizes"])
    if rt.rank != 0:
        return None
    summary = summarize([g["iterations"] for g in gathered])
    rec = measurement(
        "ddp", rt, model=wl.name, model_info=wl.info, batch_size=args.batch_size, num_threads=torch.get_num_threads(),
        options={"bucket_cap_mb": cap, "broadcast_buffers": not args.no_broadcast_buffers,
                 **{k: v for k, v in kwargs.items() if k not in ("device_ids", "bucket_cap_mb", "broadcast_buffers")}},
        timing_hook=bool(args.timing_hook), warmup=args.warmup, num_iterations=args.iterations,
        summary=summary, ranks=gathered, ddp_logging=logging, real_buckets=real,
        predicted_buckets=predicted, plan_matches=matches)
    rt.log(f"{label}: {wl.name} batch {args.batch_size} cap {cap if cap is not None else 'unset'}"
           f"{' (timing hook)' if timer else ''}: iteration median {summary['iteration_s'] * 1e3:.2f} ms "
           f"p10 {summary['iteration_p10_s'] * 1e3:.2f} p90 {summary['iteration_p90_s'] * 1e3:.2f} "
           f"over {len(summary['step_times_s'])} iterations; {len(real['buckets'])} rebuilt buckets {real['sizes']}")
    if matches is not None:
        rt.log(f"{label}: plan_matches: {str(matches).lower()} (real DDP rebuilt buckets vs {predicted['source']})")
    return rec


def run(rt: Runtime, args: argparse.Namespace) -> int:
    check_counts(args)
    cap = parse_cap(args.bucket_cap_mb)
    wl = build_workload(args, rt.device)
    from ddpsim.models import ddp_params

    param_names = [n for n, _, _ in ddp_params(wl.module)]
    predicted = predicted_plan(args, cap, param_names)
    rec = measure_point(rt, args, wl, cap, predicted)
    if rec is not None:
        write_json(args.out, rec)
        rt.log(f"ddp: wrote {args.out}")
    return 0
