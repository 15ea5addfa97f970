"""Study: how far is NCCL's own time estimate from published all_reduce_perf curves, size by size?

One command, prints a table per curve and a summary by size band; asserts nothing:

    python studies/nccl_estimate_by_size.py

ddpsim prices an NCCL all-reduce with NCCL's cost model (``tuning.cc``'s latency plus bytes over
the algorithm's bus bandwidth, as ported in :mod:`ddpsim.network.nccl`). The published checks in
``tests/test_collectives.py`` are at large messages, where NCCL's estimate is built to be right;
DDP's buckets are 1 to 100 MiB (25 MiB by default). Each curve below is a published run of
``all_reduce_perf`` from 1 KiB to 8 GiB on one box (in-place bus bandwidth, GB/s), with the
algorithm the run forced where it did; the model is the preset of that box with the same
algorithm. The three runs come from one harness (``Benchmarks/NVIDIA/NCCLBandwidth.py`` there:
``all_reduce_perf -b 8 -e 8G -f 2 -g N -n 40``, one process driving every GPU, so its launches
run one after another on one thread, which a one-process-per-GPU DDP job does not pay). That
cost is the same at every size; in the H200 run the excess over the model is about 5 us up to
1 MiB and grows to 35-50 us at 16-128 MiB, so most of the mid-size gap is the collective's own. Printed per size: measured busbw, the model's algorithm/protocol and busbw,
model / measured - 1 (positive: the model is faster than the run), and the run's time less the
model's (microseconds). The summary gives, per band
(under 1 MiB, DDP's 1-128 MiB, 256 MiB and up), the median and the range of that error.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KiB, MiB = 1 << 10, 1 << 20
#: the sizes of the curves below, 1 KiB to 8 GiB by factors of 2
SIZES = [KiB << k for k in range(24)]
BANDS = (("< 1 MiB", 0, MiB), ("1-128 MiB (DDP buckets)", MiB, 128 * MiB + 1), (">= 256 MiB", 256 * MiB, 1 << 40))

#: (name, preset, ranks, forced algorithm, source, in-place busbw per size of SIZES)
CURVES = (
    ("8 x H200, NVLS", "dgx-h200", 8, "nvls",
     "Azure/AI-benchmarking-guide Azure_Results/ND_H200_v5_results.md (ND H200 v5, NCCL 2.20.5, NCCL_ALGO=NVLS)",
     [0.06, 0.12, 0.23, 0.47, 0.93, 1.84, 3.72, 7.39, 14.75, 29.38, 52.96, 88.78, 138.44, 181.94, 240.41, 300.91,
      368.11, 412.45, 432.24, 442.72, 467.58, 472.57, 477.41, 479.98]),
    ("4 x GB200 (one tray), ring", "gb200-nvl72", 4, "ring",
     "Azure/AI-benchmarking-guide Azure_Results/ND_GB200_v6_results.md (ND GB200 v6, NCCL 2.25.1, Ring)",
     [0.10, 0.19, 0.38, 0.76, 1.46, 2.88, 5.71, 11.29, 22.41, 44.07, 80.48, 110.43, 146.27, 253.46, 331.09, 422.62,
      550.73, 574.19, 593.53, 618.74, 646.87, 666.63, 673.06, 679.61]),
    ("8 x A100-SXM4-80GB, NCCL's choice", "dgx-a100", 8, None,
     "Azure/AI-benchmarking-guide Azure_Results/ND_A100_v4_results.md (ND A100 v4, NCCL 2.18.5; the run asks for "
     "NVLS, which an A100 does not have)",
     [0.04, 0.08, 0.17, 0.33, 0.67, 1.37, 2.70, 5.15, 10.11, 19.24, 36.22, 53.54, 71.43, 89.99, 109.22, 132.77,
      166.63, 174.18, 213.87, 221.58, 228.10, 230.22, 230.48, 231.58]),
)


def errors(preset: str, ranks: int, algorithm: str | None, measured: list[float]) -> list[tuple[int, str, float, float]]:
    """Per size: (size, the model's algorithm/protocol, its busbw, model / measured - 1)."""
    from ddpsim.network.collective_cost import build_comm_model
    from ddpsim.network.topology import build_preset

    kw = {"algorithm": algorithm} if algorithm else {}
    m = build_comm_model(build_preset(preset), ranks, **kw)
    out = []
    for size, b in zip(SIZES, measured):
        e = m.estimate_allreduce(size)
        out.append((size, f"{e.algorithm}/{e.protocol}", e.busbw_gbps, e.busbw_gbps / b - 1))
    return out


def size_label(size: int) -> str:
    for unit, n in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", KiB)):
        if size >= n:
            return f"{size // n} {unit}"
    return f"{size} B"


def main() -> None:
    summary = []
    for name, preset, ranks, algorithm, source, measured in CURVES:
        rows = errors(preset, ranks, algorithm, measured)
        print(f"\n{name}: {source}; model: {preset}, {ranks} ranks, {algorithm or 'its own choice'}")
        print(f"{'size':>8s} {'measured':>9s} {'model':>20s} {'error':>8s} {'run - model':>12s}")
        factor = 2 * (ranks - 1) / ranks  # busbw = size / time x 2(n-1)/n (nccl-tests' PERFORMANCE.md)
        for (size, algo, bw, err), b in zip(rows, measured):
            extra_us = size * factor * (1 / b - 1 / bw) / 1e3
            print(f"{size_label(size):>8s} {b:9.2f} {algo:>12s} {bw:7.2f} {100 * err:+7.1f}% {extra_us:9.1f} us")
        for band, lo, hi in BANDS:
            errs = [100 * e for s, _a, _b, e in rows if lo <= s < hi]
            summary.append((name, band, statistics.median(errs), min(errs), max(errs)))
    print("\nmodel / measured - 1 by size band: median (min to max)")
    for name, band, med, lo, hi in summary:
        print(f"  {name:36s} {band:24s} {med:+6.1f}% ({lo:+.1f} to {hi:+.1f})")


if __name__ == "__main__":
    main()
