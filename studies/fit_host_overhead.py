"""Study: the host's time per op that paces a re-timed GPU step, fitted on some captures, checked on others.

One command, prints the fit and two tables, each with its |error| per GPU; asserts nothing:

    python studies/fit_host_overhead.py [--fit 'traces/a.measured.h100.json,...'] [--check '...']

The retime (``ddpsim.trace.retime``) puts every op it charges through a launch queue: the host
spends a fixed time issuing the op (Python, the dispatcher, autograd, the launch), and the GPU
runs it once it is issued and the previous kernel has ended (``retime.issue``). A phase whose
kernels are shorter than the host's time per op is host-bound; one whose kernels are longer is
GPU-bound and the host's time hides behind them. One figure per phase (forward, backward,
optimizer), since each runs different host code (Python modules, the C++ autograd engine,
``foreach`` kernels over lists).

Fit: for each trace of ``--fit`` (GPU captures of ``ddpsim trace --device cuda``), the CPU trace
of the same model is re-timed for that GPU at the measured batch, sequence and autocast with no
host time, which gives each phase's kernel times. The optimizer's time per op and the time per
tensor argument are fitted together (grids of 1 us and 0.1 us), then forward's and backward's
time per op (0.25 us grid) with that per-tensor figure: each minimises the sum over the traces of
log(modelled / measured)^2. The measured backward is divided by ``1 + hook_overhead_frac``: a
capture's per-gradient hooks are not part of a DDP step. The default fit set is the six
host-bound models captured on one H100 (GPT-2 350M at batch 4 x 512, the mlp, four zoo models),
where the kernels take a few per cent of the step, so what is fitted is the host's time and not
the roofline's error on kernels. Check: the same figures on ``--check``'s traces, which the fit
never saw: the five models scored before (GPT-2 124M and 1.5B, BERT-base, ResNet-50 twice) on
the same H100 host, and on an H200 host, another machine. Printed per trace and phase:
modelled / measured - 1 for the plain roofline (every GEMM at ``compute_efficiency``, no host
time), with unaligned GEMMs at ``unaligned_gemm_efficiency`` and no host time, then with the
fitted host time as well.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_retime_gpu import PHASES, retime_capture  # noqa: E402 -- the benchmark's, one definition

SEEN = ("gpt2-1.5b", "gpt2-124m", "bert-base", "resnet50", "resnet50.fp32-b32")
UNSEEN = ("gpt2-350m.b4-s512", "mlp", "transformer_encoder.b64", "transformer_seq2seq.b64", "tied_lm.b64", "branchy_mlp")
FIT = ",".join(f"traces/{s}.measured.h100.json" for s in UNSEEN)
CHECK = ",".join([f"traces/{s}.measured.h100.json" for s in SEEN] + [f"traces/{s}.measured.h200.json" for s in SEEN])
GRID_US = [k / 4 for k in range(0, 601)]


def kernels_and_measured(path: Path, tmp: Path) -> tuple[dict[str, list[tuple[float, int]]], dict[str, float],
                                                         dict[str, float]] | str:
    """Per phase, the re-timed ops (kernel seconds with no host time, tensor arguments, issued by the host), the
    measured median (backward without the capture's hooks) and the plain roofline's seconds
    (every GEMM at ``compute_efficiency``, no host time); or why the model could not be
    re-timed here."""
    from ddpsim.trace.retime import RooflineAssumptions

    a = RooflineAssumptions().without_host()
    _gpu, measured, ret = retime_capture(path, tmp, a)
    if isinstance(ret, str):
        return ret
    _gpu, _measured, (plain, _log) = retime_capture(path, tmp, replace(a, unaligned_gemm_efficiency=a.compute_efficiency))
    _trace, log = ret
    return ({ph: [(c.time_s, c.tensors, c.host) for c in log if c.phase == ph] for ph in PHASES}, measured,
            {ph: plain.phase(ph).median_s for ph in PHASES})


def modelled_s(ops: list[tuple[float, int, bool]], per_op_s: float, per_tensor_s: float) -> float:
    """The phase through the launch queue with these host times (none for a further kernel of an op)."""
    from ddpsim.trace.retime import launch_queue_s

    return launch_queue_s([(t, per_op_s + n * per_tensor_s if issued else 0.0) for t, n, issued in ops])


def loss(rows: dict, phase: str, per_op_us: float, per_tensor_us: float) -> float:
    return sum(math.log(modelled_s(k[phase], per_op_us * 1e-6, per_tensor_us * 1e-6) / m[phase]) ** 2
               for k, m, _plain in rows.values())


def fit(rows: dict) -> tuple[dict[str, float], float]:
    """Per phase the host time per op, and the time per tensor argument, in seconds: the
    optimizer's (its ``foreach`` ops take hundreds of tensors) fitted first, together, on
    grids of 1 us and 0.1 us; then forward's and backward's on the 0.25 us grid with it."""
    opt_us, tensor_us = min(((a, b / 10) for a in range(0, 301) for b in range(0, 201)),
                            key=lambda ab: loss(rows, "optimizer", *ab))
    per_op = {"optimizer": opt_us * 1e-6}
    for ph in ("forward", "backward"):
        per_op[ph] = min(GRID_US, key=lambda us: loss(rows, ph, us, tensor_us)) * 1e-6
    return per_op, tensor_us * 1e-6


def print_table(title: str, rows: dict, per_op: dict[str, float], per_tensor: float) -> None:
    print(f"\n{title}: modelled / measured - 1, plain roofline -> no host time -> fitted host time (measured ms)")
    print(f"{'measured trace':44s} " + " ".join(f"{ph:>32s}" for ph in PHASES))
    for name, row in rows.items():
        if isinstance(row, str):
            print(f"{name:44s} {row}")
            continue
        k, m, plain = row
        cells = [f"{100 * (plain[ph] / m[ph] - 1):+4.0f} -> {100 * (modelled_s(k[ph], 0, 0) / m[ph] - 1):+4.0f} -> "
                 f"{100 * (modelled_s(k[ph], per_op[ph], per_tensor) / m[ph] - 1):+4.0f}% ({m[ph] * 1e3:6.2f})" for ph in PHASES]
        print(f"{name:44s} " + " ".join(f"{c:>32s}" for c in cells))
    for gpu in sorted({n.rsplit(".", 2)[1] for n, r in rows.items() if not isinstance(r, str)}):
        errs = [(abs(plain[ph] / m[ph] - 1), abs(modelled_s(k[ph], per_op[ph], per_tensor) / m[ph] - 1))
                for n, r in rows.items() if not isinstance(r, str) and n.rsplit(".", 2)[1] == gpu
                for k, m, plain in [r] for ph in PHASES]
        before, after = ([100 * e[i] for e in errs] for i in (0, 1))
        print(f"  {gpu}: |error| over {len(errs)} phase figures, plain roofline -> fitted: median "
              f"{statistics.median(before):.0f} -> {statistics.median(after):.0f} %, mean "
              f"{statistics.fmean(before):.0f} -> {statistics.fmean(after):.0f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", default=FIT, help="measured GPU traces to fit on, comma-separated, from the repository root")
    ap.add_argument("--check", default=CHECK, help="measured GPU traces to check on, comma-separated ('' for none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fitted = {Path(r).name: kernels_and_measured(ROOT / r, Path(tmp)) for r in args.fit.split(",") if r}
        checked = {Path(r).name: kernels_and_measured(ROOT / r, Path(tmp)) for r in args.check.split(",") if r}
    usable = {n: r for n, r in fitted.items() if not isinstance(r, str)}
    if not usable:
        sys.exit("fit_host_overhead: no --fit trace could be re-timed here")
    per_op, per_tensor = fit(usable)
    print("fitted host time per op: " + ", ".join(f"{ph} {per_op[ph] * 1e6:.2f} us" for ph in PHASES)
          + f"; per tensor argument {per_tensor * 1e6:.2f} us (on {len(usable)} traces)")
    print_table("fit set", fitted, per_op, per_tensor)
    if checked:
        print_table("check set (not fitted on)", checked, per_op, per_tensor)

if __name__ == "__main__":
    main()
