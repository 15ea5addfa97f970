"""``ddpsim retime``: re-time a captured trace for a GPU you do not have (the roofline model of
:mod:`ddpsim.trace.retime` on the meta device); and the workload keys ``trace --set`` and ``retime --set``
share (:func:`model_keys`), each with its ``type=`` and bound."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import fields
from typing import Any

from ddpsim.cli.args import (add_verb, boolean, choice, flag_words, int_in, key_values, lower, nonempty, number,
                             output_file, refuse, require_torch)
from ddpsim.errors import InputError
from ddpsim.units import MAX_BATCH_SIZE, MAX_LAYERS, MAX_SEQ_LEN, format_size

DESCRIPTION = """\
How long would this captured model's training step take on a GPU I do not have?

Rebuild the trace's model on PyTorch's meta device at the target batch size and re-time every
operator with a roofline model (peak FLOP/s and HBM bandwidth scaled by achievable fractions,
a floor per kernel), each kernel starting once the host has issued it (a time per op, fitted on
one H100 host: a phase of short kernels waits on the host); the parameters, their order and
sizes stay the trace's. Writes a trace
JSON marked 'synthetic' with every assumption, for 'ddpsim run', 'sweep' and 'simulate'.
GPUs: those of the hardware catalogue ('ddpsim topology --list': v100, a100, a100-40gb, h100,
h200, b200, gb200, l40s, ...), or your own with --catalogue FILE. bf16 needs bf16 tensor
cores (not on the V100: use fp16 there).
Needs PyTorch (pip install "ddpsim[capture]")."""

EPILOG = """\
examples:
  ddpsim retime traces/resnet50.cpu.json --gpu a100 --batch-size 64 --set autocast=bf16 --out resnet50.a100.json
  ddpsim retime traces/gpt2-124m.cpu.json --gpu h100 --batch-size 16 --set seq_len=1024 --set autocast=bf16 --out gpt2-124m.h100.json"""


def parse_shape(text: str) -> tuple[int, ...]:
    """``3,224,224`` -> (3, 224, 224); refused unless 1 to 8 integers in [1, 2**20]."""
    try:
        shape = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        shape = ()
    if not 1 <= len(shape) <= 8 or not all(1 <= d <= MAX_BATCH_SIZE for d in shape):
        raise refuse(text, f"1 to 8 comma-separated integers in [1, {MAX_BATCH_SIZE}] like 3,224,224")
    return shape


def model_keys() -> dict[str, Any]:
    """The workload keys of ``ddpsim trace --set`` (``ddpsim retime --set`` takes some), each with its
    ``type=`` (``--from-profile`` refuses them all)."""
    from ddpsim.trace.capture import AUTOCASTS, DTYPES, OPTIMIZERS

    return {"dtype": choice(DTYPES), "autocast": choice((*AUTOCASTS, "none")), "optimizer": choice(OPTIMIZERS),
            "seq_len": int_in(1, MAX_SEQ_LEN), "n_layer": int_in(1, MAX_LAYERS),
            "input_shape": parse_shape, "input_dtype": nonempty}


#: the keys of ``--set`` that change the workload (the rest are roofline assumptions)
WORKLOAD_KEYS = ("seq_len", "autocast", "optimizer", "channels_last")

SET_HELP = ("repeatable; the workload: seq_len (a token model's; default: the trace's), autocast (bf16, fp16, or none "
            "to turn it off; default: the trace's), optimizer (sgd or adamw; default: the trace's), channels_last "
            "(true: model and 4-D inputs in channels-last memory format, no cuDNN NCHW/NHWC conversions; default "
            "false); the roofline's assumptions, in SI units: compute_efficiency (tensor-core peak, default 0.6), "
            "cuda_core_efficiency (fp32 on CUDA cores, 0.83), tf32_efficiency (0.36), memory_efficiency (HBM, 0.75), "
            "unaligned_gemm_efficiency (0.126), min_kernel_s (4e-6), host_forward_s_per_op / host_backward_s_per_op / "
            "host_optimizer_s_per_op (38.5e-6, 39e-6, 46e-6; 0 for a host that never makes the GPU wait), "
            "host_s_per_tensor (2.3e-6), and every other field of ddpsim.trace.retime.RooflineAssumptions")


def parse_set(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    """``--set``'s items as (the workload's keyword arguments: :data:`WORKLOAD_KEYS`, the
    ``RooflineAssumptions``: every other key, one of its fields, checked by it)."""
    from ddpsim.trace.retime import RooflineAssumptions

    model = model_keys()
    given = key_values(args.assume, {**{k: model[k] for k in WORKLOAD_KEYS[:3]}, "channels_last": boolean,
                                     **{f.name: number for f in fields(RooflineAssumptions)}})
    workload = {k: given.pop(k) for k in WORKLOAD_KEYS if k in given}
    try:
        return workload, RooflineAssumptions(**given)
    except InputError as e:
        raise InputError(f"--set {e}") from None


def add_parser(subparsers: Any) -> None:
    from ddpsim.cli.topology import add_catalogue_flag

    p = add_verb(subparsers, "retime", help="re-time a trace for a GPU (roofline model)", description=DESCRIPTION,
                 epilog=EPILOG)
    p.add_argument("from_trace", metavar="TRACE", type=nonempty, help="trace JSON written by 'ddpsim trace'")
    p.add_argument("--gpu", required=True, type=lower, metavar="GPU",
                   help="the GPU to re-time for: a GPU of the hardware catalogue ('ddpsim topology --list')")
    p.add_argument("--out", required=True, type=output_file, metavar="FILE", help="output trace JSON")
    p.add_argument("--batch-size", type=int_in(1, MAX_BATCH_SIZE), default=None, metavar="N",
                   help="per-GPU batch size (default: the trace's)")
    p.add_argument("--set", dest="assume", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    add_catalogue_flag(p)


def run(args: argparse.Namespace) -> int:
    """Re-time ``args.from_trace`` for ``args.gpu`` and write ``args.out``."""
    require_torch("retime")
    from ddpsim.hardware.catalogue import load_catalogue
    from ddpsim.trace.retime import get_gpu, retime_trace_file

    catalogue = load_catalogue(getattr(args, "catalogue", None))
    get_gpu(args.gpu, catalogue)  # an unknown GPU is refused before the trace is read

    workload, assumptions = parse_set(args)
    sets = [w for item in args.assume for w in ("--set", item)]
    flags = flag_words(args, ("gpu", "batch_size")) + sets + flag_words(args, ("catalogue", "out"))
    command = shlex.join(["ddpsim", "retime", str(args.from_trace), *flags])  # in the trace
    trace = retime_trace_file(args.from_trace, gpu=args.gpu, batch_size=args.batch_size, assumptions=assumptions,
                              command=command, catalogue=catalogue, **workload)
    return write_trace(trace, args.out)


def write_trace(trace: Any, out: str, *head: str) -> int:
    """Save ``trace`` at ``out`` and print ``head``'s lines and its summary: parameters, bytes, median
    phase times, hook overhead."""
    from ddpsim.trace.records import save_trace

    save_trace(trace, out)
    size = trace.total_param_bytes
    lines = [*head, f"model {trace.model}: {trace.num_params} parameter tensors, {trace.num_param_elements:,} "
             f"elements, {format_size(size)} ({size:,} bytes), {len(trace.buffers)} buffers"]
    phases = ", ".join(f"{n} {trace.phase(n).median_s * 1e3:.3f} ms" for n in ("forward", "backward", "optimizer", "zero_grad"))
    lines.append(f"median over {len(trace.iterations)} iterations: {phases}")
    hook = "not measured" if trace.hook_overhead_frac is None else f"{trace.hook_overhead_frac * 100:.2f} %"
    lines.append(f"hook overhead on backward: {hook}")
    if trace.synthetic:
        lines.append(f"synthetic: {trace.synthetic.get('kind')}")
        host, kernels = trace.synthetic.get("phase_host_s"), trace.synthetic.get("phase_kernel_s")
        if host and kernels:
            cells = [f"{ph} {host[ph] * 1e3:.3f} / {kernels[ph] * 1e3:.3f} ms" + (" (host-paced)" if host[ph] > kernels[ph] else "")
                     for ph in host]
            lines.append("host issuing ops / GPU kernels: " + ", ".join(cells))
        lines += _cost_lines(trace.synthetic)
    print(*lines, f"wrote {out}", sep="\n")
    return 0


#: the kernels a re-timed trace counts and what its summary says of them where they take 1 % of the
#: modelled step or more (:mod:`ddpsim.trace.retime`, :mod:`ddpsim.trace.cnn_kernels`)
COST_LINES = (
    ("unaligned_gemms", "unaligned_gemm_s", "unaligned GEMMs: {n} kernels, {t} ms of the {step} ms step (a leading "
     "dimension not a multiple of 16 bytes: cuBLAS's align1 kernels; padding it, e.g. a vocabulary to a multiple of "
     "64, removes them)"),
    ("layout_conversions", "layout_conversion_s", "NCHW layout conversions: around {n} convolutions, {t} ms of the "
     "{step} ms step (cuDNN's tensor-core convolutions work in NHWC; a channels-last model and input remove them)"),
    ("per_channel_batch_norms", "per_channel_batch_norm_s", "batch norm on PyTorch's NCHW kernels: {n} kernels bounded "
     "by one block per channel, {t} ms of the {step} ms step (bf16: cuDNN's are not used; channels-last kernels "
     "spread the reduction over the GPU)"),
)


def _cost_lines(synthetic: dict[str, Any]) -> list[str]:
    """The lines of :data:`COST_LINES` whose kernels take 1 % of the modelled step or more."""
    step = synthetic.get("modelled_step_s")
    return [text.format(n=n, t=f"{t * 1e3:.3f}", step=f"{step * 1e3:.3f}") for count, time, text in COST_LINES
            if (n := synthetic.get(count)) and step and (t := synthetic.get(time)) >= 0.01 * step]
