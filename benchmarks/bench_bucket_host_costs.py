"""What does a DDP bucket cost beyond its all-reduce kernel on real GPUs? One command, prints figures:

    python benchmarks/bench_bucket_host_costs.py [PROFILE.json.gz ...]

Per torch.profiler trace of DDP (default: ``tests/data/*_ddp_*.json.gz``, read with
:func:`~ddpsim.trace.profile.kineto.read_profile`), bucket by bucket: the host time of each
``c10d::allreduce_`` and its parts (``record_param_comms``: ProcessGroupNCCL's collective body;
``nccl:all_reduce``: NCCL's host path; CUDA calls; launches); per parameter the reducer's copy in
(``mul_out``) and copy back (``copy_bucket_to_grad``); beside the engine's host-cost defaults
(:mod:`ddpsim.network.host_costs`). Profiled CPU ops run slower: an upper bound. Then, per profile, the
terms :mod:`ddpsim.network.host_cost_profiles` measures (the profiler's cost per nested event and the
waits on a full launch queue removed), each bucket's host time against the model's, and the
defaults derived from them.
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
    end = outer.ts + outer.dur
    return [e for e in events if e.tid == outer.tid and outer.ts <= e.ts and e.ts + e.dur <= end and e is not outer]


def buckets(prof) -> list[dict[str, float]]:
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


def median(xs: list) -> float:
    return statistics.median(xs) if xs else float("nan")


def report(path: Path) -> None:
    from ddpsim.network import host_costs
    from ddpsim.trace.profile.kineto import read_profile

    prof = read_profile(path)
    bs = buckets(prof)
    print(f"\n{path.name}: {len(bs)} buckets")
    print(f"  {'bucket':>6s} {'allreduce_':>11s} {'param_comms':>12s} {'nccl host':>10s} {'CUDA calls':>11s} "
          f"{'launches':>9s}  (µs)")
    for i, b in enumerate(bs):
        print(f"  {i:6d} {b['allreduce_us']:11.1f} {b['param_comms_us']:12.1f} {b['nccl_host_us']:10.1f} "
              f"{b['runtime_us']:11.1f} {b['launch_us']:9.1f}")
    if bs:
        med = statistics.median(b["allreduce_us"] for b in bs)
        model = (host_costs.BUCKET_LAUNCH_S + host_costs.ENQUEUE_S) * 1e6
        print(f"  per bucket: median {med:.1f} µs; the engine charges {model:.0f} (bucket_launch_s + enqueue_s)")
    for label, name, model_us in (("copy into the bucket (hook)", HOOK_COPY, host_costs.HOOK_S_PER_PARAM * 1e6),
                                  ("copy back at finalize", COPY_BACK, host_costs.COPY_BACK_S_PER_PARAM * 1e6)):
        xs = per_param(prof, name)
        if xs:
            print(f"  per parameter, {label}: {len(xs)} ops, median {median(xs):.1f} µs, {sum(xs) / 1e3:.2f} ms "
                  f"in all; the engine charges {model_us:g} µs on the CPU")
    dtod = [g.dur for g in prof.gpu if g.name.startswith("Memcpy DtoD")]
    kern = [g.dur for g in prof.gpu if "copy_kernel" in g.name]
    print(f"  GPU: {len(dtod)} DtoD memcpy (median {median(dtod):.1f} µs), {len(kern)} copy kernels "
          f"(median {median(kern):.1f} µs)")


def derived(paths: list[Path]) -> None:
    from ddpsim.network import host_cost_profiles as hp
    from ddpsim.network.host_costs import HostCosts

    ms = hp.measure_all(paths)
    bound = hp.host_bound([m.probe_op_s for m in ms])
    d = hp.derive_defaults(ms, HostCosts().pre_forward_s)
    print(f"\nterms per profile (µs; model = n x hook + launch + enqueue, with the defaults "
          f"{d.hook_s_per_param * 1e6:.1f} / {d.bucket_launch_s * 1e6:.1f} / {d.enqueue_s * 1e6:.1f} derived here, "
          f"{HostCosts().hook_s_per_param * 1e6:g} / {HostCosts().bucket_launch_s * 1e6:g} / "
          f"{HostCosts().enqueue_s * 1e6:g} in host_costs)")
    for m, b in zip(ms, bound):
        ratios = [x.host_s / hp.model_bucket_s(HostCosts(), x.num_params) for x in m.buckets]
        print(f"  {Path(m.source).name}{' (host-bound: left out, profiler cost kept)' if b else ''}: "
              f"probe {m.probe_op_s * 1e6:.2f}, hook {m.hook_s_per_param * 1e6:.1f}, launch "
              f"{m.bucket_launch_s * 1e6:.1f}, enqueue {m.enqueue_s * 1e6:.1f}, copy back "
              f"{m.copy_back_s_per_param * 1e6:.1f}")
        print("    measured / model per bucket (params): "
              + " ".join(f"{r:.2f}({x.num_params})" for r, x in zip(ratios, m.buckets)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profiles", nargs="*", type=Path, help="Kineto traces (default: the committed ones)")
    args = ap.parse_args(argv)
    paths = args.profiles or sorted((ROOT / "tests" / "data").glob("*_ddp_*.json.gz"))
    for p in paths:
        report(p)
    derived(paths)


if __name__ == "__main__":
    main()
