"""Study: how far is the CPU-to-GPU retime from a real GPU on models it has not been scored on?

One command, prints a table, asserts nothing:

    python studies/retime_unseen.py [--traces 'traces/mlp.measured.h100.json,...']

The traces are the ones ``bash studies/gpu_unseen.sh OUT h100`` measures on one H100
(``ddpsim trace --device cuda``: GPT-2 350M, the mlp and the zoo's models; traces/README.md):
models without a bundled CPU trace apart from the mlp. For each, a CPU trace of the model is
captured here at batch 1 in fp32 (a few seconds; GPT-2 350M about a minute) and re-timed for
the measured GPU at the measured batch, sequence and autocast, as
``benchmarks/bench_retime_gpu.py`` does for every measured trace (:func:`measured_row`).
Printed per phase: retimed / measured ms and retimed / measured - 1. Then, per trace, the
kernels the retime counts in a step and the step (forward + backward + optimizer) per counted
kernel, re-timed and measured. Where the roofline's kernels average a few microseconds (its
floor is 4 us) and the measured step spends tens of microseconds per kernel, the host's
Python, autograd and launches pace the step, which the roofline does not model; where both
are large, the kernels themselves take the time.
zoo:resnet18 and zoo:vit_small need torchvision (``pip install "ddpsim[zoo]"``); without it
their rows say so.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_retime_gpu import PHASES, measured_row, phase_cells  # noqa: E402 -- the benchmark's scoring, one definition

UNSEEN = ("gpt2-350m.b4-s512", "mlp", "transformer_encoder.b64", "transformer_seq2seq.b64", "tied_lm.b64",
          "branchy_mlp", "vit_small.b64", "resnet18.b64")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default=",".join(f"traces/{s}.measured.h100.json" for s in UNSEEN),
                    help="measured GPU traces, comma-separated, from the repository root")
    args = ap.parse_args()
    print("retime of a CPU capture against traces measured on the GPU: retimed / measured ms, error")
    print(f"{'measured trace':44s} " + " ".join(f"{ph:>24s}" for ph in PHASES) + f" {'kernels':>8s} {'us/kernel retimed/measured':>27s}")
    with tempfile.TemporaryDirectory() as tmp:
        for rel in args.traces.split(","):
            name, _gpu, ret, meas, kernels = measured_row(ROOT / rel, Path(tmp))
            if isinstance(ret, str):
                print(f"{name:44s} {ret}")
                continue
            cells = phase_cells(ret, meas)
            per = [f"{sum(t.values()) / kernels * 1e6:.1f}" if kernels else "-" for t in (ret, meas)]
            print(f"{name:44s} " + " ".join(f"{c:>24s}" for c in cells) + f" {kernels or 0:8d} {'/'.join(per):>27s}")


if __name__ == "__main__":
    main()
