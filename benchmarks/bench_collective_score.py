"""How close is ddpsim's all-reduce time to measured runs? One command, prints figures, asserts nothing:

    python benchmarks/bench_collective_score.py [--curves DIR] [--sizes] [--loso] [--quantiles] [--spread]

Scores :func:`ddpsim.network.collective_cost.build_comm_model` against the public all-reduce
curves in ``benchmarks/data/nccl-curves/`` (sources: ``curves_meta.csv.gz``) with
:mod:`ddpsim.network.curve_score`: every ``normal``
curve with NCCL's own choice, every ``forced_algo`` one with its forced algorithm; ``suspect``
and ``pathological`` curves never (nor set a constant). :data:`CASES` describes a curve by
preset, nodes, ranks and ``--set`` options, or says why no preset can.

A curve timed through one ``torch.distributed.all_reduce`` call on an idle device (``Case.torch_call``)
is held against the model plus that call's host path (``curve_score.TORCH_CALL_US``); nccl-tests'
kernels run back to back and are held against the model alone.

Printed per curve, in three size bands (< 1 MiB, 1-128 MiB, >= 256 MiB): the median |error|
and the median signed error, error = model time / measured time - 1 (positive: the model is
slower). The summary: the median over curves of the 1-128 MiB median |error| and how many are
within 15 %, over the ``normal`` curves (the goal) and with ``forced_algo``; curves over a
transport no preset models (EFA, GPUDirect-TCPXO, Slingshot over libfabric; the presets' NICs
are InfiniBand / RoCE) apart.
``--sizes``: every size; ``--loso``: each system's error with the fitted constants of
:mod:`ddpsim.network.nccl_exec` refitted without it; ``--quantiles``: the quantiles of measured
/ model time at 64 KiB-64 MiB (the uncertainty band's collective term); ``--diagnose``: per
curve, the 1-128 MiB signed error split by the (algorithm, protocol) the model runs, and the
error at the curve's largest size, where the time is the bandwidth's (a miss there is the
bandwidth, not the ramp); ``--markdown``: the per-curve table and the summary as docs/MODEL.md
holds them; ``--nccl-estimate``: the same scores with NCCL's own ``tuning.cc`` estimate timing the
configuration it picks (the column docs/MODEL.md sets beside the execution model); ``--spread``: how far
apart the curves that describe one system are (slowest / fastest time at their common 1-128 MiB
sizes), the spread no one model's time can be within.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ddpsim.network import nccl, nccl_exec  # noqa: E402
from ddpsim.network.curve_score import (CASES, TORCH_TIMED, WITHIN, band_stats, fit_overheads,  # noqa: E402
                                        fit_points, constants, diagnose_line, load, markdown_lines,
                                        mid_size_ratios, residuals, same_system_spread, scored,
                                        set_constants, system_key)

DATA = ROOT / "benchmarks" / "data" / "nccl-curves"


def loso(meta: list[dict], points: dict) -> None:
    """Per system: the constants fitted without it, and its curves' error with them."""
    saved = constants()
    print(f"\nfitted on every system: {fit_overheads(fit_points(meta, points))}; in use: {saved}")
    print("leave one system out: curve, constants fitted without its system, 1-128 MiB median |error| "
          "with those / in use")
    fitted = [(m, c) for m, c in scored(meta) if m["category"] == "normal" and not c.transport]
    held_out = []
    for key in sorted({system_key(m) for m, _ in fitted}):
        o = fit_overheads(fit_points(meta, points, exclude=key))
        for m, case in fitted:
            if system_key(m) != key:
                continue
            try:
                set_constants(o)
                b_out = band_stats(residuals(case, points[m["curve_id"]]))["1-128MiB"]
            finally:
                set_constants(saved)
            b_in = band_stats(residuals(case, points[m["curve_id"]]))["1-128MiB"]
            if b_out is None:
                continue
            held_out.append(b_out[0])
            print(f"  {m['curve_id']:30s} {o}  {100 * b_out[0]:5.1f} % / {100 * b_in[0]:5.1f} %")
    if held_out:
        print(f"leave-one-system-out: median of the 1-128 MiB median |error| {100 * statistics.median(held_out):.1f} %,"
              f" within 15 %: {sum(e <= WITHIN for e in held_out)}/{len(held_out)}")


def residual_quantiles(meta: list[dict], points: dict) -> None:
    """Quantiles of :func:`mid_size_ratios` (:data:`ddpsim.network.nccl_exec.MID_SIZE_RATIOS`)."""
    ratios = mid_size_ratios(meta, points)
    qs = statistics.quantiles(ratios, n=20, method="inclusive")
    print(f"\nmeasured / model time at 64 KiB-64 MiB, {len(ratios)} sizes: 5 % {qs[0]:.3f}, 10 % {qs[1]:.3f}, "
          f"median {statistics.median(ratios):.3f}, 90 % {qs[17]:.3f}, 95 % {qs[18]:.3f}")


def print_spread(meta: list[dict], points: dict) -> None:
    """How far apart the curves of one system are (:func:`same_system_spread`)."""
    print("\ncurves of one system (preset nodes ranks options): slowest / fastest time at their common "
          "1-128 MiB sizes")
    for (preset, nodes, ranks, opts), ids, ratios in same_system_spread(meta, points):
        sizes = ", ".join(f"{s // (1 << 20)} MiB x{r:.2f}" for s, r in ratios)
        print(f"  {preset} {nodes} {ranks} {' '.join(f'{k}={v}' for k, v in opts)}: {', '.join(ids)}: {sizes}")


def fmt(b: tuple[float, float, int] | None) -> str:
    return f"{'-':>15s}" if b is None else f"{100 * b[0]:6.1f} {100 * b[1]:+7.1f}%"


def summary(label: str, stats: list[tuple[str, dict]]) -> None:
    mids = [(cid, b["1-128MiB"]) for cid, b in stats if b["1-128MiB"] is not None]
    if not mids:
        return
    med = statistics.median(b[0] for _, b in mids)
    within = sum(1 for _, b in mids if b[0] <= WITHIN)
    lows = [b["<1MiB"][0] for _, b in stats if b["<1MiB"] is not None]
    highs = [b[">=256MiB"][0] for _, b in stats if b[">=256MiB"] is not None]
    print(f"{label}: {len(mids)} curves with 1-128 MiB sizes; median of the 1-128 MiB median |error| "
          f"{100 * med:.1f} %; within 15 %: {within}/{len(mids)}; <1 MiB median {100 * statistics.median(lows):.1f} %; "
          f">=256 MiB median {100 * statistics.median(highs):.1f} %")


def print_sizes(cid: str, res: list[tuple[int, float, float, str]]) -> None:
    print(f"  {cid}: size, measured us, model us, error, model's algo/proto")
    for s, t, tm, ap in res:
        print(f"    {s:>12d} {t:11.2f} {tm:11.2f} {100 * (tm / t - 1):+7.1f}% {ap}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--curves", type=Path, default=DATA, help="folder with curves.csv.gz and curves_meta.csv.gz")
    ap.add_argument("--sizes", action="store_true", help="print every size of every scored curve")
    ap.add_argument("--loso", action="store_true", help="leave-one-system-out errors of the fitted step overheads")
    ap.add_argument("--quantiles", action="store_true", help="quantiles of measured / model time, 64 KiB-64 MiB")
    ap.add_argument("--diagnose", action="store_true",
                    help="per curve: 1-128 MiB signed error by algo/proto, and the error at the largest size")
    ap.add_argument("--markdown", action="store_true", help="print the per-curve table as docs/MODEL.md holds it")
    ap.add_argument("--spread", action="store_true",
                    help="how far apart the curves of one system are, at their common 1-128 MiB sizes")
    ap.add_argument("--nccl-estimate", action="store_true",
                    help="score NCCL's own tuning.cc estimate (its ranking key) in place of the execution model")
    args = ap.parse_args(argv)
    if args.nccl_estimate:
        nccl_exec.time_us = nccl.time_us  # this process only: the comm model times the choice by the estimate
    meta, points = load(args.curves)
    print(f"{'curve':34s} {'category':11s} {'model (preset nodes ranks options algo)':58s} "
          f"{'<1MiB |e| sgn':>15s} {'1-128MiB':>15s} {'>=256MiB':>15s}")
    stats: dict[str, list] = {"normal": [], "forced_algo": [], "other transport": []}
    rows = []
    for m, case in scored(meta):
        res = residuals(case, points[m["curve_id"]])
        b = band_stats(res)
        stats["other transport" if case.transport else m["category"]].append((m["curve_id"], b))
        rows.append((m, case, b))
        opts = " ".join(f"{k}={v}" for k, v in case.options.items())
        timed = TORCH_TIMED * case.torch_call
        desc = f"{case.preset} {case.nodes} {case.ranks} {opts} {case.algorithm or 'choice'}{timed}"
        print(f"{m['curve_id']:34s} {m['category']:11s} {desc:58s} {fmt(b['<1MiB'])} {fmt(b['1-128MiB'])} "
              f"{fmt(b['>=256MiB'])}")
        for note in (case.note, f"no preset models {case.transport}: apart" * bool(case.transport)):
            if note:
                print(f"{'':47s}({note})")
        if args.diagnose:
            print(f"    {diagnose_line(res)}")
        if args.sizes:
            print_sizes(m["curve_id"], res)
    print("\nnot scored:")
    for m in meta:
        case = CASES.get(m["curve_id"])
        if m["category"] not in ("normal", "forced_algo"):
            print(f"  {m['curve_id']:34s} {m['category']}: never scored")
        elif case is None or case.preset is None:
            print(f"  {m['curve_id']:34s} {m['category']}: {case.note if case else 'no description'}")
    print()
    summary("normal (the goal)", stats["normal"])
    summary("normal + forced_algo", stats["normal"] + stats["forced_algo"])
    summary("other transports (EFA, TCPXO, Slingshot, RCCL)", stats["other transport"])
    if args.markdown:
        print()
        print("\n".join(markdown_lines(rows)))
    if args.loso:
        loso(meta, points)
    if args.quantiles:
        residual_quantiles(meta, points)
    if args.spread:
        print_spread(meta, points)


if __name__ == "__main__":
    main()
