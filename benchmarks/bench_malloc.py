"""The executor's ``--malloc`` modes side by side: does a DDP process fault pages into every
forward that a trace captured in the same process pair does not?

    python benchmarks/bench_malloc.py [--model resnet50] [--batch-size 2] [--bucket-cap-mb 25]
                                      [--rounds 2] [--iters 6]

Launches 2 gloo ranks (1 thread each, ``torch.distributed.run`` on this host) once per round
and mode, the modes alternating (``default``, ``steady``, ``default``, ...). Each launch holds
two copies of the model: one under DDP (``broadcast_buffers=False``, so its forward has no
communication), one bare for :func:`ddpsim.capture.capture_trace` in lockstep (a barrier
before every step, as ``executor trace`` captures). It runs a block of DDP steps, then the
trace, each with 2 warm-up steps. A forward pre-hook and a forward hook on each model count the
minor page faults (``ru_minflt``) and the time of every forward. Per launch, rank 0 prints the
median over the measured steps of both: DDP's and the trace's forward, their faults, and the
ratio of the two forwards. The DDP step's forward here is the module's forward only, hooks to
hook (DDP's zero_grad and pre-forward outside it).

``steady`` is :func:`executor.runtime.steady_malloc` (what the executor does on CPU runs by
default), ``default`` glibc left to itself. Figures move with the host's load; compare the
modes within one run of this script, not across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def worker(args: argparse.Namespace) -> None:
    import resource

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from executor.runtime import steady_malloc

    mode = steady_malloc() if args.mode == "steady" else "default"
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    from ddpsim.capture import capture_trace
    from ddpsim.models import build_model, default_loss

    stats: dict[str, list[tuple[int, float]]] = {}

    def instrument(module, key: str) -> None:
        box: dict[str, float] = {}

        def pre(_m, _a):
            box["f"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            box["t"] = time.perf_counter()

        def post(_m, _a, _o):
            stats.setdefault(key, []).append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - box["f"],
                                              time.perf_counter() - box["t"]))

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)

    bare = build_model(args.model, seed=0)
    spec = build_model(args.model, seed=0)
    instrument(bare.module, "trace")
    instrument(spec.module, "ddp")
    ddp = DDP(spec.module, bucket_cap_mb=args.bucket_cap_mb, broadcast_buffers=False)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3, momentum=0.9)
    batch = spec.make_batch(args.batch_size)
    loss_fn = spec.loss_fn or default_loss
    dist.barrier()
    for _ in range(2 + args.iters):
        opt.zero_grad(set_to_none=True)
        out = ddp(*batch) if isinstance(batch, (tuple, list)) else ddp(batch)
        loss_fn(out).backward()
        opt.step()
    capture_trace(bare, device="cpu", batch_size=args.batch_size, num_iters=args.iters, num_warmup=2, num_threads=1,
                  seed=0, step_barrier=dist.barrier, measure_hook_overhead=False)
    if dist.get_rank() == 0:
        rec = {"mode": mode}
        for key in ("ddp", "trace"):
            xs = stats[key][-args.iters:]
            rec[key] = {"faults": statistics.median(f for f, _ in xs), "forward_s": statistics.median(t for _, t in xs)}
        print("RESULT " + json.dumps(rec), flush=True)
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--mode", choices=("steady", "default"), help=argparse.SUPPRESS)  # worker
    args = ap.parse_args()
    if args.mode:
        worker(args)
        return 0
    from executor.launch import torchrun_command

    print(f"{args.model} batch {args.batch_size}, DDP cap {args.bucket_cap_mb:g} MB, 2 gloo ranks x 1 thread; "
          f"medians over {args.iters} steps, rank 0")
    print(f"{'round':>5} {'mode':<8} {'DDP forward':>12} {'faults':>8} {'trace forward':>14} {'faults':>8} {'DDP/trace':>10}")
    ratios: dict[str, list[float]] = {"default": [], "steady": []}
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for rnd in range(1, args.rounds + 1):
        for mode in ("default", "steady"):
            cmd = torchrun_command(["--mode", mode, "--model", args.model, "--batch-size", str(args.batch_size),
                                    "--bucket-cap-mb", str(args.bucket_cap_mb), "--iters", str(args.iters)],
                                   target=[__file__])
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
            if r.returncode != 0 or not lines:
                print(f"bench_malloc: round {rnd} {mode}: launch failed (exit {r.returncode}): "
                      f"{(r.stderr.strip().splitlines() or ['no output'])[-1]}", file=sys.stderr)
                return 1
            rec = json.loads(lines[-1][len("RESULT "):])
            d, t = rec["ddp"], rec["trace"]
            ratio = d["forward_s"] / t["forward_s"]
            ratios[mode].append(ratio)
            print(f"{rnd:>5} {mode:<8} {d['forward_s'] * 1e3:>9.1f} ms {d['faults']:>8.0f} {t['forward_s'] * 1e3:>11.1f} ms "
                  f"{t['faults']:>8.0f} {ratio:>10.3f}", flush=True)
    for mode, xs in ratios.items():
        print(f"{mode:<8} DDP forward / trace forward: median {statistics.median(xs):.3f} over {len(xs)} launches "
              f"(range {min(xs):.3f}-{max(xs):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
