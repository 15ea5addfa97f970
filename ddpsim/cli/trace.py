"""``ddpsim trace``: capture a model's training-step trace (or derive a deeper one);
``--from-profile``: a user's torch.profiler trace as a ddpsim trace, and what its DDP did."""

from __future__ import annotations

import argparse
import shlex
import statistics
from dataclasses import replace
from functools import partial
from typing import Any

from ddpsim.cli.args import (add_verb, flag_words, int_in, key_values, lower, nonempty, output_file,
                             require_torch, value_word)
from ddpsim.cli.retime import model_keys, write_trace
from ddpsim.errors import InputError
from ddpsim.units import (DTYPE_SIZE_BYTES, MAX_BATCH_SIZE, MAX_ITERATIONS, MAX_LAYERS, MAX_SEED,
                          MAX_THREADS)

DESCRIPTION = """\
What does one training step of this model cost, parameter by parameter, on this device?

Run a real model for warm-up + measured training steps on one device and record, in DDP's
parameter order, each parameter's shape, bytes and gradient-ready time (post-accumulate-grad
hooks), plus forward/backward/optimizer/zero_grad times (--derive-depth-from's trace is marked
'synthetic' with every assumption). Writes a versioned trace JSON; 'ddpsim retime' re-times one
for a GPU. Needs PyTorch (pip install "ddpsim[capture]").

With --from-profile, the trace comes from a real run instead: one rank's torch.profiler trace
(the Chrome/Kineto JSON of export_chrome_trace or tensorboard_trace_handler, .json or
.json.gz) becomes a ddpsim trace: ProfilerStep#N iterations, forward/backward/optimizer on the
GPU timeline, gradient-ready times from the backward's AccumulateGrad ops (named by --model,
else sized by the buckets the run's DDP recorded), and it prints what the run's DDP did: its
buckets checked against ddpsim's plan, each bucket's NCCL all-reduce, the host's costs."""

EPILOG = """\
examples:
  ddpsim trace --model mlp --batch-size 32 --iterations 5 --warmup 2 --num-threads 1 --out mlp.cpu.json
  ddpsim trace --model gpt2-1.5b --derive-depth-from 4 --batch-size 2 --set seq_len=128 --iterations 3 --warmup 1 --out gpt2.json

'ddpsim trace --list-models' lists the built-ins and the zoo (zoo:<name>); your own model is
any 'package.module:factory' returning an nn.Module (--set input_shape=3,224,224 gives one sample's shape;
on a GPU, --device cuda times with CUDA events). A CPU trace meant to validate gloo ranks
that share a host's cores should use as many threads as each rank gets (--num-threads). For a scenario's compile: block, add the
Dynamo graphs to a trace of the same model: 'ddpsim trace --model bert-base --compiled-graph
--batch-size 1 --set seq_len=128 --graph-into traces/bert-base.a100.json --out bert.compiled.json'.

importing a real run's torch.profiler trace (no PyTorch needed without --model):
    ddpsim trace --from-profile tests/data/resnet50_ddp_2xA100_rank0.json.gz --model resnet50 --out resnet50.a100.json
    ddpsim trace --from-profile my_run/rank0.pt.trace.json.gz --out mine.json
Record it with torch.profiler.profile(activities=[CPU, CUDA], record_shapes=True,
schedule=torch.profiler.schedule(wait=1, warmup=1, active=3)) and prof.step() once per step;
README.md, "Bring your own profile"."""

SET_HELP = ("how the model is built and run, repeatable: dtype (float32, bfloat16, float16: cast the parameters; "
            "default: the model's own dtypes, float32 for the built-ins), autocast (bf16, fp16 or none: the forward "
            "under torch.autocast; default none), optimizer (sgd: momentum 0.9, the default; or adamw), seq_len "
            "(token models; default 128), n_layer (blocks of bert-base / gpt2-*; default: the model's), input_shape "
            "(one sample's shape, e.g. 3,224,224), input_dtype (float-input models and factories; default float32)")


def add_parser(subparsers: Any) -> None:
    p = add_verb(subparsers, "trace", help="capture a model's training-step trace", description=DESCRIPTION,
                 epilog=EPILOG)
    p.add_argument("--list-models", action="store_true", help="print the built-in and zoo model names and exit")
    p.add_argument("--model", type=nonempty, help="built-in name, zoo:<name> (see --list-models) or package.module:factory")
    p.add_argument("--device", default="cpu", type=lower, choices=("cpu", "cuda"), help="default cpu")
    p.add_argument("--batch-size", type=int_in(1, MAX_BATCH_SIZE),
                   help="per-device batch size (required to capture; default for a factory returning "
                        "(module, example_input): the example's batch dimension)")
    p.add_argument("--iterations", type=int_in(1, MAX_ITERATIONS), default=5, metavar="N",
                   help="measured iterations (default 5)")
    p.add_argument("--warmup", type=int_in(0, MAX_ITERATIONS), default=2, metavar="N", help="warm-up iterations (default 2)")
    p.add_argument("--out", type=output_file, metavar="FILE", help="output trace JSON")
    p.add_argument("--from-profile", type=nonempty, default=None, metavar="PROFILE",
                   help="import one rank's torch.profiler trace (.json or .json.gz) instead of capturing; "
                        "--model (optional) names its parameters")
    p.add_argument("--num-threads", type=int_in(1, MAX_THREADS), default=None, metavar="N", help="torch.set_num_threads (CPU)")
    p.add_argument("--set", dest="model_set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    p.add_argument("--seed", type=int_in(0, MAX_SEED), default=0, metavar="S", help="seed of weights and inputs (default 0)")
    p.add_argument("--no-hook-overhead", action="store_true", help="skip the with/without-hooks backward timing")
    p.add_argument("--compiled-graph", action="store_true",
                   help="also record the model's Dynamo graphs as torch.compile's DDPOptimizer walks them (needed by a "
                        "scenario's compile: {ddp_optimizer: true}); one forward under torch.compile")
    p.add_argument("--graph-into", type=nonempty, default=None, metavar="TRACE",
                   help="with --compiled-graph: time nothing; add the graphs to TRACE (a trace of the same model, e.g. a "
                        "re-timed one) and write it to --out")
    p.add_argument("--derive-depth-from", type=int_in(3, MAX_LAYERS), default=None, metavar="K",
                   help="capture K blocks of a transformer and derive the full-depth trace from them")


def _command(args: argparse.Namespace) -> str:
    """The ``ddpsim trace`` command line of ``args`` (stored in the trace): the capture's flags in the order one
    would type them, ``--set``'s keys, then the switches."""
    sets = [w for key in model_keys() if (v := getattr(args, key, None)) is not None
            for w in ("--set", f"{key}={value_word(v)}")]
    flags = ("model", "device", "batch_size", "iterations", "warmup", "out", "num_threads", "seed", "derive_depth_from")
    return shlex.join(["ddpsim", "trace", *flag_words(args, flags), *sets,
                       *flag_words(args, ("no_hook_overhead", "compiled_graph"))])


def _model_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {key: getattr(args, key) for key in ("seq_len", "n_layer") if getattr(args, key) is not None}


def apply_model_set(args: argparse.Namespace) -> None:
    """``args`` with every key of :func:`model_keys` set as an attribute: ``--set``'s value, else None."""
    table = model_keys()
    vars(args).update({key: None for key in table}, **key_values(args.model_set, table))


def run(args: argparse.Namespace) -> int:
    apply_model_set(args)
    if args.from_profile is not None:
        return run_from_profile(args)
    require_torch("trace")
    from ddpsim.trace.models import list_models

    if args.list_models:
        from ddpsim.trace.models.zoo import zoo_names

        print("\n".join(list_models() + zoo_names()))
        return 0
    if not args.out:
        raise InputError("--out: missing; expected the path of the trace JSON to write")
    if not args.model:
        raise InputError("--model: missing; expected a built-in name (ddpsim trace --list-models) or package.module:factory")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device: 'cuda' is not available on this machine (torch.cuda.is_available() is False); expected 'cpu'")
    from ddpsim.trace.capture import capture_trace, derive_depth
    from ddpsim.trace.models import build_model, ddp_params

    build = partial(build_model, args.model, seed=args.seed, input_shape=args.input_shape, input_dtype=args.input_dtype,
                    **_model_kwargs(args))
    target_blocks, depth = None, {}
    if args.derive_depth_from is not None:
        with torch.device("meta"):
            target_blocks = (build().info or {}).get("n_layer")
        if target_blocks is None:
            raise InputError(f"--derive-depth-from: model {args.model!r} has no n_layer; expected bert-base or gpt2-*")
        if args.derive_depth_from > target_blocks:
            raise InputError(f"--derive-depth-from: {args.derive_depth_from} is more than the model's {target_blocks} blocks")
        depth = {"n_layer": args.derive_depth_from}
    spec = build(**depth)
    if args.batch_size is None:
        args.batch_size = (spec.info or {}).get("example_batch_size")
        if args.batch_size is None:
            raise InputError("--batch-size: missing; expected an integer >= 1 (or a factory returning (module, example_input))")
    if args.graph_into is not None and not args.compiled_graph:
        raise InputError("--graph-into: given without --compiled-graph; expected both")
    if args.compiled_graph and target_blocks is not None:
        raise InputError("--compiled-graph: not accepted with --derive-depth-from (the graphs of fewer blocks are not "
                         "the model's); expected a full-depth model")
    graph = None
    if args.compiled_graph:  # the model's Dynamo graphs, as DDPOptimizer walks them
        from ddpsim.trace.compiled_graph import capture_compiled_graph

        graph = capture_compiled_graph(spec, [p for _, p, _ in ddp_params(spec.module)], batch_size=args.batch_size)
    if args.graph_into is not None:  # refused unless it holds the parameters of the model
        from ddpsim.trace.records import load_trace

        trace = load_trace(args.graph_into)
        mine = [(n, tuple(p.shape)) for n, p, _ in ddp_params(spec.module)]
        if [(p.name, p.shape) for p in trace.params] != mine:
            raise InputError(f"--graph-into: {args.graph_into} holds other parameters than model {args.model!r} "
                             f"({trace.num_params} vs {len(mine)}); expected a trace of the same model and options")
    else:
        command = _command(args)
        trace = capture_trace(spec, device=args.device, batch_size=args.batch_size, num_iters=args.iterations,
                              num_warmup=args.warmup, dtype=args.dtype,
                              autocast=None if args.autocast in (None, "none") else args.autocast,
                              optimizer=args.optimizer or "sgd", num_threads=args.num_threads,
                              measure_hook_overhead=not args.no_hook_overhead, command=command, seed=args.seed)
        if target_blocks is not None:
            trace = derive_depth(trace, num_blocks=target_blocks, command=command)
    if graph is not None:
        trace = replace(trace, compiled_graph=graph)
    return write_trace(trace, args.out)


# ---- --from-profile ---------------------------------------------------------------------------

#: flags of 'ddpsim trace' that only a capture reads (and every key of its --set): refused beside
#: --from-profile, not ignored
CAPTURE_ONLY = ("batch_size", "num_threads", "derive_depth_from")


def _ms(x: float) -> str:
    return f"{x * 1e3:.2f}"


def profile_summary(imp: Any, check: Any) -> str:
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


def run_from_profile(args: argparse.Namespace) -> int:
    """``--from-profile``: the profile imported, its buckets checked, the trace written."""
    for flag, key in [*(("--" + k.replace("_", "-"), k) for k in CAPTURE_ONLY),
                      *((f"--set {k}", k) for k in model_keys())]:  # the first given is named
        if getattr(args, key, None) is not None:
            raise InputError(f"{flag}: {getattr(args, key)!r} is not accepted with --from-profile; expected only "
                             "--model, --seed and --out (the profile holds the rest)")
    if not args.out:
        raise InputError("--out: missing; expected the path of the trace JSON to write")
    from ddpsim.plan.profile_check import check_recorded_buckets
    from ddpsim.trace.profile import import_profile

    command = shlex.join(["ddpsim", "trace", *flag_words(args, ("from_profile", "model")),
                          *(["--seed", str(args.seed)] if args.seed else []), "--out", args.out])
    imp = import_profile(args.from_profile, model=args.model, seed=args.seed, command=command)
    numels = imp.recorded_bucket_numels()
    check = (check_recorded_buckets(imp.trace, numels) if imp.ddp_modules == 1 else _modules_check(imp)) if numels else None
    trace = imp.trace
    if check is not None:
        trace = replace(trace, environment={**trace.environment, "recorded_bucket_numels": list(numels),
                                            "bucket_plan_check": check.message})
    return write_trace(trace, args.out, profile_summary(imp, check))
