"""Benchmark: the roofline retime (``ddpsim.trace.retime``) against real GPU profiles.

One command, prints four tables; no assertions:

    python benchmarks/bench_retime_gpu.py [--trace traces/resnet50.cpu.json] [--batch-size 32]
        [--profiles tests/data/resnet50_ddp_2xA100_rank0.json.gz:a100-40gb,tests/data/resnet50_ddp_1xV100_rank0.json.gz:v100]
        [--measured 'traces/*.measured.*.json']

The second table: every trace measured on a GPU (``traces/<model>[.<variant>].measured.<gpu>.json``,
``ddpsim trace --device cuda``, wall time per phase with the device synchronised at each
boundary, median over its iterations, the backward without the capture's hooks) beside the bundled CPU trace of the same model re-timed
for that GPU at the measured run's batch, sequence length and autocast (a model without a bundled
CPU trace is captured on this CPU first: :func:`cpu_trace`), with the retime's default host time
per op. The error is retimed / measured - 1: the roofline's error on the kernels, and the
default host figures' error on a phase the host paces.

For each ``PROFILE:GPU`` pair: the bundled CPU trace of the same model (torchvision's ResNet-50
layout, re-built on the meta device) re-timed for ``GPU`` at the profiles' batch size (32 per
GPU; the retime rebuilds the model at the target batch, so no scaling of the CPU times is
involved), in the profiles' precision (fp32 parameters, convolutions on TF32 tensor cores where
the GPU has them: cuDNN's default ``allow_tf32=True``), with SGD + momentum and no host time (the
kernels alone); beside it the profile's measured forward, backward and optimizer
(:func:`ddpsim.trace.profile.import_profile`): the GPU-busy time of each phase (the union of the
kernels it launched, without the gaps of a host-bound step), its GPU span (first kernel start to last end)
and its CPU span, mean over the profile's steps. The error is retimed / measured busy - 1.

The third table: published ResNet-50 training throughputs (each source in :data:`PUBLISHED`)
beside the bundled CPU trace re-timed at the run's GPU, batch, precision and memory format, with
the default host time; none of the retime's constants comes from these runs. The published
figures include the run's data loader, which the retime does not model.

The fourth table: per kernel class (batch norm, cuDNN's layout conversions, convolutions and
GEMMs, element-wise, pooling, optimizer), milliseconds per step in each ResNet-50 profile of
``tests/data/`` (:data:`KERNEL_PROFILES`) beside the retime's kernels (no host time) at the
profile's GPU, batch and precision: where the roofline's time goes against where the GPU's went.

The profiles are real runs on NVIDIA A100-PG509-200 (an A100-SXM4-40GB class board; 2 ranks)
and Tesla V100-SXM2-32GB (1 rank), published with HolisticTraceAnalysis (``tests/data/``,
MIT licence; copies in ``tests/data/``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROFILES = (f"{ROOT}/tests/data/resnet50_ddp_2xA100_rank0.json.gz:a100-40gb,"
                    f"{ROOT}/tests/data/resnet50_ddp_1xV100_rank0.json.gz:v100")
PHASES = ("forward", "backward", "optimizer")
_DLE = ("NVIDIA DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5/README.md, pytorch-21.03 "
        "NGC, 1 GPU; batch and memory format from configs.yml")
_SKB = "sandeepkumar-skb/pytorch_experiments torchvision_exp/README.md, torchvision ResNet-50, one V100-SXM2"
#: (GPU, per-GPU batch, autocast, channels-last, published images per second, source)
PUBLISHED = (
    ("a100", 256, "fp16", True, 2470.0, f"A100 80GB, AMP, NHWC: {_DLE}"),
    ("a100", 256, "none", False, 938.0, f"A100 80GB, TF32, NCHW: {_DLE}"),
    ("v100", 256, "fp16", True, 1200.0, f"V100 16GB, AMP, NHWC: {_DLE}"),
    ("v100", 112, "none", False, 367.0, f"V100 16GB, FP32, NCHW: {_DLE}"),
    ("v100", 128, "fp16", False, 128 / 0.152, f"AMP, NCHW, 152 ms per step: {_SKB}"),
    ("v100", 128, "fp16", True, 128 / 0.111, f"AMP, channels-last, 111 ms per step: {_SKB}"),
)


def measured_phases_s(profile: str) -> dict[str, dict[str, float]]:
    """Per phase, the mean over the profile's steps of its GPU-busy time, GPU span and CPU span."""
    from ddpsim.trace.profile import import_profile

    imp = import_profile(profile)
    out = {}
    for ph in PHASES:
        times = [getattr(it, ph) for it in imp.iterations]
        out[ph] = {"busy_s": statistics.fmean(t.gpu_busy_s for t in times),
                   "span_s": statistics.fmean(t.gpu_s for t in times),
                   "cpu_s": statistics.fmean(t.cpu_s for t in times)}
    out["gpu_name"] = imp.environment.gpu_name
    out["batch_size"] = imp.environment.batch_size
    return out


def retimed_phases_s(trace: str, gpu: str, batch_size: int) -> dict[str, float]:
    """The re-timed phases with no host time: the kernels alone, to set beside GPU-busy time."""
    from ddpsim.trace.retime import RooflineAssumptions, retime_trace_file

    it = retime_trace_file(trace, gpu=gpu, batch_size=batch_size,
                           assumptions=RooflineAssumptions().without_host()).iterations[0]
    return {ph: getattr(it, f"{ph}_s") for ph in PHASES}


def cpu_trace(model: str, env: dict, tmp: Path) -> Path:
    """The bundled CPU trace of ``model`` (``traces/<model>.cpu.json``), else one captured here at
    batch 1 in fp32 with the measured run's per-sample input. The retime rebuilds the model at the
    target batch and sequence, so neither the CPU batch nor a built-in token model's CPU sequence
    enters its figures: GPT-2 and BERT (fixed position tables) are captured at 64 tokens, the
    zoo's token models (position table sized by the sequence) at the measured one."""
    src = ROOT / "traces" / f"{model}.cpu.json"
    if src.exists():
        return src
    shape = []
    if env.get("seq_len"):
        seq = env["seq_len"] if model.startswith("zoo:") else min(env["seq_len"], 64)
        shape = ["--set", f"seq_len={seq}"]
    elif env.get("input_shape"):
        shape = ["--set", "input_shape=" + ",".join(str(d) for d in env["input_shape"][1:])]
    out = tmp / f"{model.replace(':', '_')}{''.join('.' + v.split('=')[1] for v in shape[1:])}.cpu.json"
    if out.exists():  # captured for an earlier trace of the same model and input
        return out
    cmd = [sys.executable, "-m", "ddpsim", "trace", "--model", model, "--batch-size", "1", "--iterations", "1",
           "--warmup", "1", "--num-threads", "1", "--out", str(out), *shape]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit {done.returncode}")
    return out


def capture_phases_s(meas: Any) -> dict[str, float]:
    """A GPU capture's phase medians, its backward without the capture's per-gradient hooks
    (``1 + hook_overhead_frac``): a DDP step runs DDP's hooks, not the capture's."""
    out = {ph: meas.phase(ph).median_s for ph in PHASES}
    out["backward"] /= 1 + (meas.hook_overhead_frac or 0.0)
    return out


def retime_capture(path: Path, tmp: Path, assumptions: Any = None) -> tuple[str, dict[str, float], Any]:
    """A trace measured on a GPU and its model's CPU trace re-timed for that GPU at the measured
    batch, sequence and autocast: (the GPU, the measured phases (:func:`capture_phases_s`),
    ``(trace, op log)`` of the retime or why there is none)."""
    from ddpsim.trace.records import load_trace
    from ddpsim.trace.retime import retime_trace_file

    gpu = path.name.rsplit(".", 2)[1]
    meas = load_trace(path)
    env = meas.environment
    try:
        src = cpu_trace(meas.model, env, tmp)
        kw = {"seq_len": env["seq_len"]} if env.get("seq_len") else {}
        ret = retime_trace_file(src, gpu=gpu, batch_size=env["batch_size"], autocast=env.get("autocast") or "none",
                                assumptions=assumptions, return_log=True, **kw)
    except Exception as exc:  # noqa: BLE001 -- a model this machine cannot build (torchvision absent): say so, go on
        ret = f"not re-timed: {exc}"
    return gpu, capture_phases_s(meas), ret


def measured_row(path: Path, tmp: Path) -> tuple[str, str, dict[str, float] | str, dict[str, float], int | None]:
    """One trace measured on a GPU: (its file, the GPU, the re-timed phases (:func:`retime_capture`)
    or why there are none, the measured phases, the number of kernels the retime counts in a
    step), seconds."""
    gpu, measured, ret = retime_capture(path, tmp)
    if isinstance(ret, str):
        return path.name, gpu, ret, measured, None
    trace, _log = ret
    return path.name, gpu, {ph: trace.phase(ph).median_s for ph in PHASES}, measured, trace.synthetic.get("num_kernels")


def measured_rows(pattern: str) -> list[tuple[str, str, dict[str, float] | str, dict[str, float], int | None]]:
    """:func:`measured_row` of every trace matching ``pattern`` (a glob from the repository root)."""
    with tempfile.TemporaryDirectory() as tmp:
        return [measured_row(path, Path(tmp)) for path in sorted(ROOT.glob(pattern))]


def phase_cells(ret: dict[str, float], meas: dict[str, float]) -> list[str]:
    """Per phase, "retimed/measured ms error%"."""
    return [f"{ret[ph] * 1e3:7.2f}/{meas[ph] * 1e3:7.2f} {100 * (ret[ph] / meas[ph] - 1):+5.0f}%" for ph in PHASES]


def print_measured(pattern: str) -> None:
    rows = measured_rows(pattern)
    if not rows:
        return
    print(f"\nretime of traces/<model>.cpu.json against traces measured on GPUs ({pattern}): retimed / measured ms, error")
    print(f"{'measured trace':44s} " + " ".join(f"{ph:>24s}" for ph in PHASES))
    for name, _gpu, ret, meas, _kernels in rows:
        if isinstance(ret, str):
            print(f"{name:44s} {ret}")
            continue
        print(f"{name:44s} " + " ".join(f"{c:>24s}" for c in phase_cells(ret, meas)))


#: (profile in tests/data/, GPU, per-GPU batch, autocast) of the ResNet-50 profiles (README.profiles.md)
KERNEL_PROFILES = (("resnet50_ddp_2xA100_rank0.json.gz", "a100-40gb", 32, "none"),
                   ("resnet50_ddp_1xV100_rank0.json.gz", "v100", 32, "none"),
                   ("resnet50_ddp_1xH100_rank0.json.gz", "h100", 64, "bf16"),
                   ("resnet50_ddp_1xH200_rank0.json.gz", "h200", 64, "bf16"))
def op_class(op: str) -> str:
    """The class of a kernel the retime charged, by its op label (``cnn_kernels.KERNEL_CLASSES``)."""
    from ddpsim.trace.retime import LAYOUT_CONVERSION

    if op == LAYOUT_CONVERSION:
        return "layout conversion"
    if "batch_norm" in op:
        return "batch norm"
    if op.startswith(("convolution", "mm", "addmm")):
        return "convolution/GEMM"
    if "pool" in op:
        return "pooling"
    return "optimizer" if op.startswith("_foreach") else "element-wise"


def print_kernel_classes(trace: str) -> None:
    """The fourth table: :data:`KERNEL_PROFILES`' kernel classes against ``trace`` re-timed."""
    from ddpsim.trace.cnn_kernels import KERNEL_CLASSES, profile_classes_s
    from ddpsim.trace.retime import RooflineAssumptions, retime_trace_file

    print(f"\nkernel classes of the ResNet-50 profiles against {trace} re-timed (no host time): "
          "profile / retimed ms per step")
    print(f"{'profile':36s} " + " ".join(f"{c:>19s}" for c in KERNEL_CLASSES))
    for name, gpu, batch, autocast in KERNEL_PROFILES:
        measured = profile_classes_s(ROOT / "tests/data" / name)
        _, log = retime_trace_file(trace, gpu=gpu, batch_size=batch, autocast=autocast,
                                   assumptions=RooflineAssumptions().without_host(), return_log=True)
        retimed = dict.fromkeys(KERNEL_CLASSES, 0.0)
        for c in log:
            retimed[op_class(c.op)] += c.time_s
        print(f"{name:36s} " + " ".join(f"{measured[c] * 1e3:8.2f} / {retimed[c] * 1e3:8.2f}" for c in KERNEL_CLASSES))


def print_published(trace: str) -> None:
    """The third table: :data:`PUBLISHED` against ``trace`` re-timed at each run's settings."""
    from ddpsim.trace.retime import retime_trace_file

    print(f"\nretime of {trace} against published ResNet-50 training throughputs (img/s, error)")
    for gpu, batch, autocast, nhwc, measured, source in PUBLISHED:
        step = retime_trace_file(trace, gpu=gpu, batch_size=batch, autocast=autocast,
                                 channels_last=nhwc).synthetic["modelled_step_s"]
        setting = f"{gpu} b{batch} {autocast if autocast != 'none' else 'fp32'} {'NHWC' if nhwc else 'NCHW'}"
        print(f"{setting:24s} {batch / step:7.0f} / {measured:7.0f} {100 * (batch / step / measured - 1):+6.1f}%  {source}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default=str(ROOT / "traces/resnet50.cpu.json"), help="the CPU trace to re-time")
    ap.add_argument("--batch-size", type=int, default=32, help="per-GPU batch of the retime (the profiles': 32)")
    ap.add_argument("--profiles", default=DEFAULT_PROFILES, help="PROFILE:GPU pairs, comma-separated")
    ap.add_argument("--measured", default="traces/*.measured.*.json",
                    help="glob (from the repository root) of traces measured on GPUs; '' skips the second table")
    args = ap.parse_args()
    print(f"retime of {args.trace} at batch {args.batch_size} (fp32, TF32 convolutions where the GPU has them, SGD)")
    print(f"{'gpu (modelled) / profile':34s} {'phase':9s} {'retimed ms':>10s} {'busy ms':>8s} {'span ms':>8s} "
          f"{'cpu ms':>8s} {'error':>7s}")
    for pair in args.profiles.split(","):
        profile, _, gpu = pair.rpartition(":")
        meas = measured_phases_s(profile)
        pred = retimed_phases_s(args.trace, gpu, args.batch_size)
        label = f"{gpu} / {meas['gpu_name']}"
        for ph in PHASES:
            m = meas[ph]
            err = pred[ph] / m["busy_s"] - 1.0 if m["busy_s"] > 0 else float("nan")
            print(f"{label:34s} {ph:9s} {pred[ph] * 1e3:10.2f} {m['busy_s'] * 1e3:8.2f} {m['span_s'] * 1e3:8.2f} "
                  f"{m['cpu_s'] * 1e3:8.2f} {err * 100:+6.1f}%")
            label = ""
        if meas["batch_size"] not in (None, args.batch_size):
            print(f"  note: the profile's batch size is {meas['batch_size']}, the retime's {args.batch_size}")
    if args.measured:
        print_measured(args.measured)
    print_published(args.trace)
    print_kernel_classes(args.trace)


if __name__ == "__main__":
    main()
