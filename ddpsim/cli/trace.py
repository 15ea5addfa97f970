"""``ddpsim trace``: capture a model's training-step trace, derive a deeper one, or retime one for a GPU."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from ddpsim.errors import InputError

EXAMPLES = """\
examples:
  ddpsim trace --model zoo:resnet18 --batch-size 4 --iters 5 --warmup 2 --num-threads 1 --out resnet18.cpu.json
  ddpsim trace --model mlp --batch-size 32 --iters 5 --warmup 2 --num-threads 1 --out traces/mlp.cpu.json
  # your own model: any 'package.module:factory' returning an nn.Module (on a GPU: CUDA events)
  ddpsim trace --model mypkg.models:build --input-shape 3,32,32 --batch-size 8 --iters 5 --warmup 1 --device cuda --out my.json
  # re-time a CPU capture for a GPU you do not have (roofline model on the meta device; synthetic):
  ddpsim trace --retime-for h100 --from traces/gpt2-1.5b.cpu.json --batch-size 8 --seq-len 1024 --autocast bf16 --out traces/gpt2-1.5b.h100.json

'ddpsim trace --list-models' lists the built-ins; --derive-depth-from K captures K blocks of a
deep transformer and extends them to full depth.

A CPU trace meant to validate 2-rank gloo runs on a 2-core machine should use --num-threads 1.
"""


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape; expected comma-separated integers like 3,224,224") from None
    return shape


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "trace", help="capture a model's training-step trace (or derive / retime one)",
        description="Run a real model for warm-up + measured training steps on one device and record, in\n"
                    "DDP's parameter order, each parameter's shape, bytes and gradient-ready time\n"
                    "(post-accumulate-grad hooks), plus forward/backward/optimizer/zero_grad times.\n"
                    "With --derive-depth-from, capture a reduced-depth transformer and extend it to full\n"
                    "depth; with --retime-for, re-time a trace for an A100 or H100 with a roofline model\n"
                    "on the meta device. Writes a versioned trace JSON (both derived kinds are marked\n"
                    "'synthetic' with every assumption).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list-models", action="store_true", help="print the built-in and zoo model names and exit")
    p.add_argument("--model", help="built-in name, zoo:<name> (see --list-models) or package.module:factory")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--batch-size", type=int, help="per-device batch size (required to capture; default for a factory "
                                                  "returning (module, example_input): the example's batch dimension)")
    p.add_argument("--iters", type=int, default=5, help="measured iterations (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up iterations (default 2)")
    p.add_argument("--out", help="output trace JSON")
    p.add_argument("--dtype", default=None, help="cast the parameters to float32, bfloat16 or float16 (default: keep the "
                                                 "model's own dtypes; built-in models are float32)")
    p.add_argument("--autocast", default=None, help="bf16 or fp16: forward under torch.autocast (default off; with --retime-for: the source trace's, 'none' turns it off)")
    p.add_argument("--optimizer", default=None, help="sgd (momentum 0.9) or adamw (default sgd; with --retime-for: the source trace's)")
    p.add_argument("--num-threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    p.add_argument("--input-shape", type=_shape, default=None, help="one sample's shape, e.g. 3,224,224")
    p.add_argument("--input-dtype", default=None, help="input dtype for float-input models and factories (default float32)")
    p.add_argument("--seq-len", type=int, default=None, help="sequence length of token models (default 128)")
    p.add_argument("--n-layer", type=int, default=None, help="number of blocks of bert-base / gpt2-* (default: the model's)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and inputs (default 0)")
    p.add_argument("--no-hook-overhead", action="store_true", help="skip the with/without-hooks backward timing")
    p.add_argument("--derive-depth-from", type=int, default=None, metavar="K",
                   help="capture K blocks of a transformer and derive the full-depth trace from them")
    p.add_argument("--retime-for", default=None, metavar="GPU", help="a100 or h100: re-time --from TRACE for that GPU")
    p.add_argument("--from", dest="from_trace", default=None, metavar="TRACE", help="trace to re-time (with --retime-for)")
    p.add_argument("--compute-efficiency", type=float, default=None, metavar="F",
                   help="with --retime-for: achievable fraction of peak FLOP/s (default 0.6)")
    p.add_argument("--memory-efficiency", type=float, default=None, metavar="F",
                   help="with --retime-for: achievable fraction of HBM bandwidth (default 0.75)")
    p.add_argument("--min-kernel-us", type=float, default=None, metavar="US",
                   help="with --retime-for: per-kernel floor in microseconds (default 4)")
    p.set_defaults(func=run)


def _command(args: argparse.Namespace) -> str:
    parts = ["ddpsim", "trace"]
    skip = {"func", "command", "list_models", "no_hook_overhead"}
    items = list(vars(args).items())
    if args.retime_for is not None:  # only what re-timing reads, in the order one would type it
        keep = ("retime_for", "from_trace", "batch_size", "seq_len", "autocast", "optimizer",
                "compute_efficiency", "memory_efficiency", "min_kernel_us", "out")
        items = [(k, getattr(args, k)) for k in keep]
    else:
        skip |= {"compute_efficiency", "memory_efficiency", "min_kernel_us"}
    for key, value in items:
        if key in skip or value is None:
            continue
        flag = "--from" if key == "from_trace" else "--" + key.replace("_", "-")
        if isinstance(value, tuple):
            value = ",".join(map(str, value))
        parts += [flag, str(value)]
    if args.no_hook_overhead:
        parts.append("--no-hook-overhead")
    return shlex.join(parts)


def _model_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if args.seq_len is not None:
        kw["seq_len"] = args.seq_len
    if args.n_layer is not None:
        kw["n_layer"] = args.n_layer
    return kw


def summary(trace: Any) -> str:
    """A few lines: parameters, bytes, median phase times, hook overhead."""
    from ddpsim.units import format_size

    lines = [f"model {trace.model}: {trace.num_params} parameter tensors, {trace.num_param_elements:,} elements, "
             f"{format_size(trace.total_param_bytes)} ({trace.total_param_bytes:,} bytes), {len(trace.buffers)} buffers"]
    phases = ", ".join(f"{n} {trace.phase(n).median_s * 1e3:.3f} ms" for n in ("forward", "backward", "optimizer", "zero_grad"))
    lines.append(f"median over {len(trace.iterations)} iterations: {phases}")
    hook = "not measured" if trace.hook_overhead_frac is None else f"{trace.hook_overhead_frac * 100:.2f} %"
    lines.append(f"hook overhead on backward: {hook}")
    if trace.synthetic:
        lines.append(f"synthetic: {trace.synthetic.get('kind')}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ddpsim.trace.models import list_models

    if args.list_models:
        from ddpsim.trace.models.zoo import zoo_names

        print("\n".join(list_models() + zoo_names()))
        return 0
    if not args.out:
        raise InputError("--out: missing; expected the path of the trace JSON to write")
    from ddpsim.trace.records import save_trace

    if args.retime_for is not None:
        if not args.from_trace:
            raise InputError("--from: missing; expected the trace to re-time with --retime-for")
        from ddpsim.trace.retime import RooflineAssumptions, retime_trace_file

        given = {k: v for k, v in (("compute_efficiency", args.compute_efficiency), ("memory_efficiency", args.memory_efficiency),
                                   ("min_kernel_s", None if args.min_kernel_us is None else args.min_kernel_us * 1e-6)) if v is not None}
        assumptions = RooflineAssumptions(**given)
        trace = retime_trace_file(args.from_trace, gpu=args.retime_for, batch_size=args.batch_size,
                                  seq_len=args.seq_len, autocast=args.autocast, optimizer=args.optimizer,
                                  assumptions=assumptions, command=_command(args))
        save_trace(trace, args.out)
        print(summary(trace))
        print(f"wrote {args.out}")
        return 0
    if args.from_trace is not None:
        raise InputError("--from: given without --retime-for; expected --retime-for a100|h100 with it")
    if not args.model:
        raise InputError("--model: missing; expected a built-in name (ddpsim trace --list-models) or package.module:factory")
    if args.device not in ("cpu", "cuda"):
        raise InputError(f"--device: {args.device!r} is not accepted; expected 'cpu' or 'cuda'")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device: 'cuda' is not available on this machine (torch.cuda.is_available() is False); expected 'cpu'")
    from ddpsim.trace.capture import capture_trace, derive_depth
    from ddpsim.trace.models import build_model

    kwargs = _model_kwargs(args)
    target_blocks = None
    if args.derive_depth_from is not None:
        if isinstance(args.derive_depth_from, bool) or args.derive_depth_from < 3:
            raise InputError(f"--derive-depth-from: {args.derive_depth_from!r} is not accepted; expected an integer >= 3 (blocks to capture)")
        with torch.device("meta"):
            full = build_model(args.model, seed=args.seed, input_shape=args.input_shape, input_dtype=args.input_dtype, **kwargs)
        target_blocks = (full.info or {}).get("n_layer")
        if target_blocks is None:
            raise InputError(f"--derive-depth-from: model {args.model!r} has no n_layer; expected bert-base or gpt2-*")
        if args.derive_depth_from > target_blocks:
            raise InputError(f"--derive-depth-from: {args.derive_depth_from} is more than the model's {target_blocks} blocks")
        del full
        kwargs["n_layer"] = args.derive_depth_from
    spec = build_model(args.model, seed=args.seed, input_shape=args.input_shape, input_dtype=args.input_dtype, **kwargs)
    if args.batch_size is None:
        args.batch_size = (spec.info or {}).get("example_batch_size")
        if args.batch_size is None:
            raise InputError("--batch-size: missing; expected an integer >= 1 (or a factory returning (module, example_input))")
    command = _command(args)
    trace = capture_trace(spec, device=args.device, batch_size=args.batch_size, num_iters=args.iters, num_warmup=args.warmup,
                          dtype=args.dtype, autocast=None if args.autocast in (None, "none") else args.autocast,
                          optimizer=args.optimizer or "sgd", num_threads=args.num_threads,
                          measure_hook_overhead=not args.no_hook_overhead, command=command, seed=args.seed)
    if target_blocks is not None:
        trace = derive_depth(trace, num_blocks=target_blocks, command=command)
    save_trace(trace, args.out)
    print(summary(trace))
    print(f"wrote {args.out}")
    return 0

