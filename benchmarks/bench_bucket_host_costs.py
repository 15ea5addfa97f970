"""What does a DDP bucket cost beyond its all-reduce kernel on real GPUs? One command, prints figures:

    python benchmarks/bench_bucket_host_costs.py [PROFILE.json.gz ...]

Reads torch.profiler (Kineto) traces of DDP (default: the committed ones, ``tests/data/*_ddp_*.json.gz``,
sources in ``tests/data/README.profiles.md``) with :func:`ddpsim.trace.profile.kineto.read_profile`
and prints, per profile, bucket by bucket (each ``c10d::allreduce_`` of a step) the host time of the
bucket's collective and its parts: ``record_param_comms`` (ProcessGroupNCCL's collective body,
``ProcessGroupNCCL.cpp``: ``syncStream``, the work's events, ``ncclAllReduce``), the
``nccl:all_reduce`` annotation (NCCL's host path, ``enqueue.cc``), the CUDA runtime calls inside
(stream waits, events, the kernel launch); and per parameter the reducer's copy into the bucket
(``torch::distributed::reducer::mul_out``, ``Reducer::mark_variable_ready_dense``) and the copy back
at finalize (``copy_bucket_to_grad``, ``Reducer::finalize_bucket_dense``), with their GPU copies.
Beside them, what the engine charges (:mod:`ddpsim.network.host_costs` defaults): ``bucket_launch_s``
+ ``enqueue_s`` per bucket, ``hook_s_per_param`` per parameter, nothing on the CPU for the copy back.

Profiled CPU ops run slower than unprofiled ones (the profiler records every op and CUDA call),
so the profile's figures bound the costs from above; the world-size-1 profiles have no all-reduce
kernel to launch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ALLREDUCE = "c10d::allreduce_"
PARAM_COMMS = "record_param_comms"
NCCL_ANNOTATION = "nccl:all_reduce"
HOOK_COPY = "torch::distributed::reducer::mul_out"
COPY_BACK = "torch.distributed.ddp.reducer::copy_bucket_to_grad"


def inside(outer, events) -> list:
    """The events of ``outer``'s thread that start and end within it."""
    end = outer.ts + outer.dur
    return [e for e in events if e.tid == outer.tid and outer.ts <= e.ts and e.ts + e.dur <= end and e is not outer]


def buckets(prof) -> list[dict[str, float]]:
    """Per ``c10d::allreduce_``: its host µs and its parts'."""
    out = []
    for op in (o for o in prof.cpu_ops if o.name == ALLREDUCE):
        cpu_in = inside(op, prof.cpu_ops)
        rt_in = inside(op, prof.runtime)
        comms = [o.dur for o in cpu_in if o.name == PARAM_COMMS]
        nccl = [o.dur for o in cpu_in if o.name == NCCL_ANNOTATION]
        launches = sum(r.dur for r in rt_in if "Launch" in r.name)
        out.append({"allreduce_us": op.dur, "param_comms_us": sum(comms), "nccl_host_us": sum(nccl),
                    "runtime_us": sum(r.dur for r in rt_in), "launch_us": launches})
    return out


def per_param(prof, name: str) -> list[float]:
    return [o.dur for o in prof.cpu_ops if o.name == name]


def gpu_copies(prof) -> dict[str, float]:
    """Medians of the GPU copies DDP makes per parameter: device-to-device memcpy and copy kernels."""
    dtod = [g.dur for g in prof.gpu if g.name.startswith("Memcpy DtoD")]
    kern = [g.dur for g in prof.gpu if "copy_kernel" in g.name]
    return {"memcpy_dtod_us": statistics.median(dtod) if dtod else float("nan"), "num_dtod": len(dtod),
            "copy_kernel_us": statistics.median(kern) if kern else float("nan"), "num_copy_kernels": len(kern)}


def report(path: Path) -> None:
    from ddpsim.network import host_costs
    from ddpsim.trace.profile.kineto import read_profile

    prof = read_profile(path)
    bs = buckets(prof)
    print(f"\n{path.name}: {len(bs)} bucket collectives")
    print(f"  {'bucket':>6s} {'allreduce_':>11s} {'param_comms':>12s} {'nccl host':>10s} {'CUDA calls':>11s} "
          f"{'launches':>9s}  (µs)")
    for i, b in enumerate(bs):
        print(f"  {i:6d} {b['allreduce_us']:11.1f} {b['param_comms_us']:12.1f} {b['nccl_host_us']:10.1f} "
              f"{b['runtime_us']:11.1f} {b['launch_us']:9.1f}")
    if bs:
        med = statistics.median(b["allreduce_us"] for b in bs)
        model = (host_costs.BUCKET_LAUNCH_S + host_costs.ENQUEUE_S) * 1e6
        print(f"  per bucket: median {med:.1f} µs on the CPU; the engine charges {model:.0f} µs "
              f"(bucket_launch_s + enqueue_s): {med / model:.1f}x")
    for label, name, model_us in (("copy into the bucket (hook)", HOOK_COPY, host_costs.HOOK_S_PER_PARAM * 1e6),
                                  ("copy back at finalize", COPY_BACK, 0.0)):
        xs = per_param(prof, name)
        if xs:
            print(f"  per parameter, {label}: {len(xs)} ops, median {statistics.median(xs):.1f} µs, "
                  f"{sum(xs) / 1e3:.2f} ms over the profile's steps; the engine charges {model_us:g} µs on the CPU")
    g = gpu_copies(prof)
    print(f"  GPU: {g['num_dtod']} device-to-device memcpy (median {g['memcpy_dtod_us']:.1f} µs), "
          f"{g['num_copy_kernels']} copy kernels (median {g['copy_kernel_us']:.1f} µs)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profiles", nargs="*", type=Path, help="Kineto traces (default: tests/data/*_ddp_*.json.gz)")
    args = ap.parse_args(argv)
    for p in args.profiles or sorted((ROOT / "tests" / "data").glob("*_ddp_*.json.gz")):
        report(p)


if __name__ == "__main__":
    main()
