"""``ddpsim trace --from-profile``: a user's torch.profiler trace as a ddpsim trace, and what its DDP did."""

from __future__ import annotations

import argparse
import shlex
import statistics
from dataclasses import replace
from typing import Any

from ddpsim.cli.args import flag_words
from ddpsim.errors import InputError
from ddpsim.units import DTYPE_SIZE_BYTES

#: flags of 'ddpsim trace' that only a capture reads (and every key of its --set): refused beside
#: --from-profile, not ignored
CAPTURE_ONLY = ("batch_size", "num_threads", "derive_depth_from")


def _command(args: argparse.Namespace) -> str:
    return shlex.join(["ddpsim", "trace", *flag_words(args, ("from_profile", "model")),
                       *(["--seed", str(args.seed)] if args.seed else []), "--out", args.out])


def _ms(x: float) -> str:
    return f"{x * 1e3:.2f}"


def summary(imp: Any, check: Any) -> str:
    """The lines the import prints: environment, phases on both timelines, buckets, collectives, host."""
    from ddpsim.trace.profile.nccl_kernels import bus_bytes_per_s

    env, its = imp.environment, imp.iterations
    steps = f"ProfilerStep#{its[0].step}" + (f"-#{its[-1].step}" if len(its) > 1 else "")
    lines = [f"profile: {env.gpu_name}, world size {env.world_size}, rank {env.rank}, {env.backend} {env.nccl_version}; "
             f"{steps} ({len(its)} steps); batch size {env.batch_size if env.batch_size else 'not recorded'}",
             f"parameters: {imp.mapping.method} ({imp.mapping.confidence}): {imp.mapping.detail}"]

    def med(f: Any) -> str:
        return _ms(statistics.median(f(it) for it in its))

    lines.append(f"median step: CPU {med(lambda i: i.step_s)} ms, GPU {med(lambda i: i.gpu_step_s)} ms first to last kernel")
    for name in ("forward", "backward", "optimizer"):
        lines.append(f"  {name:9s} GPU span {med(lambda i: getattr(i, name).gpu_s)} ms (busy {med(lambda i: getattr(i, name).gpu_busy_s)}),"
                     f" CPU {med(lambda i: getattr(i, name).cpu_s)} ms")
    busy = statistics.median(i.forward.gpu_busy_s + i.backward.gpu_busy_s + i.optimizer.gpu_busy_s for i in its)
    step = statistics.median(i.step_s for i in its)
    bound = "host-bound: the CPU paces the GPU" if busy < 0.8 * step else "GPU-bound"
    lines.append(f"  {bound} (GPU busy {_ms(busy)} ms of compute per {_ms(step)} ms step)")
    host = its[-1].host
    lines.append(f"host, last step: {host.num_accumulate_grad} AccumulateGrad {_ms(host.accumulate_grad_s)} ms, DDP hooks "
                 f"{_ms(host.reducer_hook_s)} ms, {host.num_bucket_launches} bucket launches {_ms(host.bucket_launch_s)} ms, "
                 f"copy_bucket_to_grad {_ms(host.copy_bucket_to_grad_s)} ms, {host.num_kernel_launches} kernel launches "
                 f"{_ms(host.kernel_launch_s)} ms, waiting on the GPU {_ms(host.sync_wait_s)} ms")
    if check is not None:
        lines.append(f"buckets (elements, launch order): {', '.join(f'{n:,}' for n in check.recorded_numels)}: {check.message}")
        other = [f"#{i.step}" for i in its if tuple(b.numel for b in i.buckets) != check.planned_numels]
        lines.append(f"  in every step ({len(its)})" if not other else
                     f"  steps {', '.join(other)} launched other buckets than the plan's steady layout (before DDP's rebuild?)")
    for index, ks in imp.bucket_kernels().items():
        last, transfer = ks[-1], min(k.duration_s for k in ks)
        busbw = None if last.numel is None else bus_bytes_per_s(last.numel * DTYPE_SIZE_BYTES[last.dtype], transfer,
                                                                env.world_size or 1)
        size = f"{last.numel:,} x {last.dtype}" if last.numel is not None else "(size not recorded)"
        lines.append(f"  bucket {index}: all-reduce {size}, {last.ran}, "
                     f"{last.channels} channels; kernel {', '.join(_ms(k.duration_s) for k in ks)} ms; "
                     f"transfer (min over steps) {_ms(transfer)} ms"
                     + (f", bus bandwidth {busbw / 1e9:.1f} GB/s" if busbw else ""))
    lines += [f"note: {n}" for n in imp.notes]
    return "\n".join(lines)


def _modules_check(imp: Any) -> Any:
    """With several DDP modules, the check that each module's own plan (default options) gives its
    recorded buckets (:func:`ddpsim.validation.profile_modules.split_modules`); None where no split does."""
    from ddpsim.plan.planner import DDPOptions
    from ddpsim.plan.profile_check import BucketCheck
    from ddpsim.validation.profile_modules import split_modules

    options = DDPOptions()
    split = split_modules(imp.trace, imp.iterations[-1].buckets, imp.ddp_modules, options)
    if split is None:
        return None
    numels = tuple(imp.recorded_bucket_numels())
    return BucketCheck(options=options, recorded_numels=numels, planned_numels=numels, matches=True,
                       message=f"{len(numels)} buckets match the {imp.ddp_modules} DDP modules' own plans at {options.label()} "
                               f"(the modules found by {split.method})")


def run(args: argparse.Namespace) -> int:
    from ddpsim.cli.retime import model_keys

    given = [("--" + k.replace("_", "-"), k) for k in CAPTURE_ONLY] + [(f"--set {k}", k) for k in model_keys()]
    given = [(flag, k) for flag, k in given if getattr(args, k, None) is not None]
    if given:
        flag, key = given[0]
        raise InputError(f"{flag}: {getattr(args, key)!r} is not accepted with --from-profile; expected only "
                         "--model, --seed and --out (the profile holds the rest)")
    if not args.out:
        raise InputError("--out: missing; expected the path of the trace JSON to write")
    from ddpsim.cli.retime import write_trace
    from ddpsim.plan.profile_check import check_recorded_buckets
    from ddpsim.trace.profile import import_profile

    imp = import_profile(args.from_profile, model=args.model, seed=args.seed, command=_command(args))
    numels = imp.recorded_bucket_numels()
    check = (check_recorded_buckets(imp.trace, numels) if imp.ddp_modules == 1 else _modules_check(imp)) if numels else None
    trace = imp.trace
    if check is not None:
        trace = replace(trace, environment={**trace.environment, "recorded_bucket_numels": list(numels),
                                            "bucket_plan_check": check.message})
    return write_trace(trace, args.out, summary(imp, check))
