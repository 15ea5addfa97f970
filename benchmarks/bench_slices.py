"""Does a bare backward run faster in a process that has just run DDP? The trace slices of
``validate --launch round`` say so for bert-base and gpt2-124m (session 18); this measures it.

    python benchmarks/bench_slices.py [--model gpt2-124m] [--batch-size 2] [--rounds 2] [--iters 6]

Launches 2 gloo ranks (1 thread each, the executor's steady allocator, ``torch.distributed.run``
on this host) once per round. Each launch, over ONE module, in this order:

1. ``cold``: a trace captured as ``executor trace`` does (lockstep, 3 warm-up steps, ``--iters``
   recorded), the launch's first work;
2. ``again``: a second capture right after (1 warm-up step): the same process, warmer by time only;
3. ``ddp``: a point under real DDP at the default cap (``executor ddp``'s ``measure_point``: 3
   warm-up steps, ``--ddp-iters`` measured; its wrapper freed after);
4. ``after``: a capture right after that point (1 warm-up step), as ``executor round``'s slices are.

Per launch, rank 0's medians over the recorded steps (the ranks' mean for the DDP point):
forward and backward, and each capture's backward over ``again``'s; and rank 0's minor page
faults (``ru_minflt``) per step of each block, warm-up steps included. If ``after`` is faster
than ``again`` the DDP point left the process in a state the bare backward profits from;
if ``cold`` alone is slow, it is the process's warm-up. The DDP point's own forward and
backward+comm are printed beside it. Figures move with the host's load; compare the blocks
within one launch, not launches with one another.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BLOCKS = ("cold", "again", "after")


def worker(args: argparse.Namespace) -> None:
    import resource

    import torch

    from ddpsim.capture import capture_trace
    from ddpsim.models import build_model

    from executor.ddp_step import measure_point
    from executor.runtime import distributed
    from executor.workload import workload_from_spec

    with distributed(backend="gloo", timeout_s=600, num_threads=1, malloc="steady") as rt:
        spec = build_model(args.model, seed=0)
        wl = workload_from_spec(spec, args.batch_size, rt.device)
        out: dict[str, dict[str, float]] = {}

        def faults() -> int:
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

        def capture(name: str, warmup: int) -> None:
            f0 = faults()
            t = capture_trace(spec, device="cpu", batch_size=args.batch_size, num_iters=args.iters, num_warmup=warmup,
                              num_threads=torch.get_num_threads(), seed=0, step_barrier=rt.barrier,
                              measure_hook_overhead=False)
            out[name] = {"forward_s": statistics.median(it.forward_s for it in t.iterations),
                         "backward_s": statistics.median(it.backward_s for it in t.iterations),
                         "faults_per_step": (faults() - f0) / (warmup + args.iters)}

        capture("cold", 3)
        capture("again", 1)
        ns = argparse.Namespace(find_unused_parameters=False, static_graph=False, gradient_as_bucket_view=False,
                                no_broadcast_buffers=False, timing_hook=False, lr=1e-3, momentum=0.9, warmup=3,
                                iterations=args.ddp_iters, batch_size=args.batch_size, model=args.model)
        f0 = faults()
        rec = measure_point(rt, ns, wl, None, None, label="bench_slices ddp")
        ddp_faults = (faults() - f0) / (ns.warmup + ns.iterations)
        capture("after", 1)
        if rt.rank == 0:
            out["ddp"] = {"forward_s": rec["summary"]["forward_s"], "backward_s": rec["summary"]["backward_s"],
                          "faults_per_step": ddp_faults}
            print("RESULT " + json.dumps(out), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2-124m")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=6, help="recorded steps per capture (default 6)")
    ap.add_argument("--ddp-iters", type=int, default=4, help="measured DDP steps (default 4)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0
    from executor.launch import torchrun_command

    print(f"{args.model} batch {args.batch_size}, 2 gloo ranks x 1 thread, steady allocator; medians over "
          f"{args.iters} recorded steps per capture, {args.ddp_iters} DDP steps; rank 0")
    print(f"{'round':>5} {'block':<6} {'forward':>10} {'backward':>10} {'faults/step':>11} {'bwd/again':>9}")
    ratios: dict[str, list[float]] = {b: [] for b in BLOCKS}
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    for rnd in range(1, args.rounds + 1):
        cmd = torchrun_command(["--worker", "--model", args.model, "--batch-size", str(args.batch_size),
                                "--iters", str(args.iters), "--ddp-iters", str(args.ddp_iters)], target=[__file__])
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
        if r.returncode != 0 or not lines:
            print(f"bench_slices: round {rnd}: launch failed (exit {r.returncode}): "
                  f"{(r.stderr.strip().splitlines() or ['no output'])[-1]}", file=sys.stderr)
            return 1
        rec = json.loads(lines[-1][len("RESULT "):])
        for name in ("cold", "again", "ddp", "after"):
            b = rec[name]
            ratio = b["backward_s"] / rec["again"]["backward_s"] if name in BLOCKS else None
            if ratio is not None:
                ratios[name].append(ratio)
            print(f"{rnd:>5} {name:<6} {b['forward_s'] * 1e3:7.1f} ms {b['backward_s'] * 1e3:7.1f} ms {b['faults_per_step']:11.0f} "
                  f"{'' if ratio is None else format(ratio, '9.3f')}"
                  + ("   (forward with zero_grad and DDP's pre-forward; backward with its all-reduces)" if name == "ddp" else ""),
                  flush=True)
    for name in ("cold", "after"):
        xs = ratios[name]
        print(f"{name:<6} backward / again's: median {statistics.median(xs):.3f} over {len(xs)} launches "
              f"(range {min(xs):.3f}-{max(xs):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
