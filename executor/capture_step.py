"""``executor trace``: capture a trace on EVERY rank at once (no communication), rank 0 writes it.

A trace captured by one lone process is faster than the same compute while every other rank
of the host computes too (shared cores, caches, memory bandwidth). For a prediction to be
compared with a real multi-rank run on the same host, the trace must be captured under the
run's conditions: the same ranks per host and threads per rank, computing concurrently.
This step does exactly that with :func:`ddpsim.trace.capture.capture_trace`.
"""

from __future__ import annotations

import argparse

from executor.runtime import Runtime
from executor.workload import parse_model_args


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="built-in model or pkg.mod:factory")
    p.add_argument("--batch-size", type=int, default=8, help="per-rank batch size (default 8)")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE", help="model option (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--iterations", type=int, default=10, help="measured iterations (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up iterations (default 3)")
    p.add_argument("--no-lockstep", action="store_true",
                   help="let the ranks run their steps unsynchronised (default: a barrier before every step and before its optimizer, "
                        "so that the ranks compute in lockstep as under DDP)")
    p.add_argument("--out", required=True, help="trace JSON to write (rank 0, atomically)")


def run(rt: Runtime, args: argparse.Namespace) -> int:
    import torch

    from ddpsim.trace.capture import capture_trace
    from ddpsim.trace.models import build_model
    from ddpsim.trace.records import save_trace

    spec = build_model(args.model, seed=args.seed, **parse_model_args(args.model_arg))
    rt.barrier()
    trace = capture_trace(spec, device=rt.device.type, batch_size=args.batch_size, num_iters=args.iterations,
                          num_warmup=args.warmup, num_threads=torch.get_num_threads(), seed=args.seed,
                          step_barrier=None if args.no_lockstep else rt.barrier,
                          command=f"torchrun --nproc-per-node {rt.world_size} -m executor trace --model {args.model} "
                                  f"--batch-size {args.batch_size} --iterations {args.iterations} --warmup {args.warmup} "
                                  f"(captured on all {rt.world_size} ranks at once)")
    rt.watchdog.beat("trace")
    rt.barrier()
    if rt.rank == 0:
        trace.environment["concurrent_ranks"] = rt.world_size
        trace.environment["lockstep"] = not args.no_lockstep
        trace.environment["malloc"] = rt.malloc
        save_trace(trace, args.out)
        rt.log(f"trace: {args.model} batch {args.batch_size}: forward {trace.phase('forward').median_s * 1e3:.2f} ms, "
               f"backward {trace.phase('backward').median_s * 1e3:.2f} ms, optimizer {trace.phase('optimizer').median_s * 1e3:.2f} ms "
               f"(captured on {rt.world_size} ranks at once); wrote {args.out}")
    return 0
