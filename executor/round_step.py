"""``executor round``: one round of a validation in ONE launch -- the trace and every point.

For each bucket_cap_mb of ``--caps``, in the order given: a slice of the trace (``--trace-iters``
lockstep training steps of the bare module with gradient-ready hooks, as ``executor trace``
captures them), then that point under a fresh real ``DistributedDataParallel`` over the same
module (``--warmup`` past DDP's rebuild, ``--iterations`` measured, as ``executor ddp``). The
DDP wrapper is freed after its point (the Reducer's destructor removes its autograd hooks), so
the next point's wrapper is the only one on the module.

Why one launch: on a shared CPU host a launch can have a speed of its own (gpt2-124m's run
means can spread 6-7 % over their point's mean where four iterations at their own spread
would give 3-4 %), and a trace captured in a launch of its own need not follow the runs'
drift. With the trace's slices captured in the same process pair as the points, right before
each, the prediction and the measurement share the launch's speed and the moment; so do the
points of a round, whose ratios decide the best cap. Under the steady allocator
(``M_MMAP_MAX=0``, :func:`executor.runtime.steady_malloc`) both layouts meet the same accuracy
targets; a slice after a DDP point otherwise runs 3-5 % faster in backward, from page faults
of blocks above 32 MiB (docs/VALIDATION.md, "Launch layouts")

Writes, atomically as each completes: ``<out-dir>/cap=<cap>.run<round>.json`` per point (the
``executor ddp`` measurement record, plus ``launch``: this round's order and the point's
position) and ``<out-dir>/trace.round<round>.json`` (the slices so far, pooled).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ddpsim.units import parse_caps

from executor.ddp_step import add_ddp_option_arguments, check_ddp_options, measure_point, plan_from_trace, split_cap
from executor.runtime import Runtime, write_json
from executor.workload import add_model_arguments, at_least, check_counts, parse_model_args, workload_from_spec


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--caps", required=True,
                   help="comma list of bucket_cap_mb in MiB ('none' = not given) or list=X+Y+... (a bucket_cap_mb_list), "
                        "run in this order, e.g. none,1,5,25,100,list=1+4+25")
    add_ddp_option_arguments(p)
    p.add_argument("--trace-iters", type=int, default=2,
                   help="recorded trace steps captured before each point (default 2)")
    p.add_argument("--trace-warmup", type=int, default=1,
                   help="unrecorded trace steps before each slice (default 1; the first slice takes at least 3)")
    p.add_argument("--round", type=int, default=1, help="the round's number, in the file names (default 1)")
    p.add_argument("--out-dir", required=True, help="folder for trace.round<R>.json and cap=<cap>.run<R>.json (rank 0)")


def point_id(cap: float | tuple[float, ...] | None) -> str:
    """``ddpsim validate``'s name of a point that differs from the others by its cap only
    (a tuple is a ``bucket_cap_mb_list``: ``list=1+4+8``)."""
    from ddpsim.plan.planner import cap_point_id

    return cap_point_id(*split_cap(cap))



def run(rt: Runtime, args: argparse.Namespace) -> int:
    import torch

    from ddpsim.trace.capture import capture_trace
    from ddpsim.trace.models import build_model, ddp_params
    from ddpsim.trace.records import pool_traces, save_trace

    check_counts(args)
    check_ddp_options(rt, args)
    at_least(args.trace_iters, "--trace-iters", 1)
    at_least(args.trace_warmup, "--trace-warmup", 0)
    at_least(args.round, "--round", 1)
    caps = parse_caps(args.caps)
    out_dir = Path(args.out_dir)
    if rt.rank == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
    # the ddp measurement's fields; no per-bucket timing in a round (it changes DDP's division path)
    args.timing_hook, args.trace, args.plan = False, None, None

    spec = build_model(args.model, seed=args.seed, **parse_model_args(args.model_arg))
    wl = workload_from_spec(spec, args.batch_size, rt.device, args.seed)
    param_names = [n for n, _, _ in ddp_params(wl.module)]
    order = [point_id(c) for c in caps]
    trace_path = out_dir / f"trace.round{args.round}.json"
    slices: list[Any] = []
    for pos, cap in enumerate(caps):
        rt.barrier()
        first = pos == 0
        slices.append(capture_trace(
            spec, device=rt.device.type, batch_size=args.batch_size, num_iters=args.trace_iters,
            num_warmup=max(3, args.trace_warmup) if first else args.trace_warmup,
            num_threads=torch.get_num_threads(), seed=args.seed, step_barrier=rt.barrier,
            measure_hook_overhead=first,
            command=f"torchrun --nproc-per-node {rt.world_size} -m executor round --model {args.model} "
                    f"--batch-size {args.batch_size} --caps {args.caps} --trace-iters {args.trace_iters} "
                    f"--round {args.round} (a slice of {args.trace_iters} steps before each point, "
                    f"captured on all {rt.world_size} ranks at once)"))
        rt.watchdog.beat(f"round {args.round} trace slice {pos + 1}")
        trace = pool_traces(slices)
        if rt.rank == 0:
            trace.environment.update(concurrent_ranks=rt.world_size, lockstep=True, malloc=rt.malloc,
                                     slices=len(slices), interleaved_with=order[:len(slices)], launch="round")
            save_trace(trace, trace_path)
        predicted = plan_from_trace(trace, f"trace.round{args.round} (this launch)", cap, param_names, args)
        rec = measure_point(rt, args, wl, cap, predicted, label=f"round {args.round} {order[pos]}")
        if rec is not None:
            rec["launch"] = {"kind": "round", "round": args.round, "order": order, "position": pos + 1,
                             "trace": trace_path.name}
            path = out_dir / f"{order[pos]}.run{args.round}.json"
            write_json(path, rec)
            rt.log(f"round {args.round}: wrote {path}")
    return 0
