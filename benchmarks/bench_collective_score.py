"""How close is ddpsim's all-reduce time to measured runs? One command, prints figures, asserts nothing:

    python benchmarks/bench_collective_score.py [--curves DIR] [--sizes] [--loso] [--quantiles]

Scores :func:`ddpsim.network.collective_cost.build_comm_model` against the public all-reduce
curves in ``benchmarks/data/nccl-curves/`` (sources: ``curves_meta.csv.gz``): every ``normal``
curve with NCCL's own choice, every ``forced_algo`` one with its forced algorithm; ``suspect``
and ``pathological`` curves never (nor set a constant). :data:`CASES` describes a curve by
preset, nodes, ranks and ``--set`` options, or says why no preset can.

Printed per curve, in three size bands (< 1 MiB, 1-128 MiB, >= 256 MiB): the median |error|
and the median signed error, error = model time / measured time - 1 (positive: the model is
slower). The summary: the median over curves of the 1-128 MiB median |error| and how many are
within 15 %, over the ``normal`` curves (the goal) and with ``forced_algo``; curves over a
transport no preset models (EFA, GPUDirect-TCPXO; the presets' NICs are InfiniBand / RoCE) apart.
``--sizes``: every size; ``--loso``: each system's error with the fitted constants of
:mod:`ddpsim.network.nccl_exec` refitted without it; ``--quantiles``: the quantiles of measured
/ model time at 64 KiB-64 MiB (the uncertainty band's collective term); ``--diagnose``: per
curve, the 1-128 MiB signed error split by the (algorithm, protocol) the model runs, and the
error at the curve's largest size, where the time is the bandwidth's (a miss there is the
bandwidth, not the ramp); ``--markdown``: the per-curve table and the summary as docs/MODEL.md
holds them.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import itertools
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MiB = 1 << 20
BANDS = (("<1MiB", 0, MiB), ("1-128MiB", MiB, 128 * MiB + 1), (">=256MiB", 256 * MiB, 1 << 50))
DATA = ROOT / "benchmarks" / "data" / "nccl-curves"
WITHIN = 0.15
#: the sizes the step overheads are fitted on, and the grid searched (µs)
FIT_LO, FIT_HI = 64 * 1024, 128 * MiB
GRID = {"ll_round_trip": (0.5, 1.0, 1.5, 2.0), "ll128": (2.0, 4.0, 6.0, 8.0, 12.0, 16.0),
        "simple": (2.0, 4.0, 6.0, 8.0, 12.0)}
#: the sizes of the uncertainty band's collective term (ddpsim.pipeline.resampling)
BAND_LO, BAND_HI = 64 * 1024, 64 * MiB


@dataclass(frozen=True)
class Case:
    """How a curve is described: preset, nodes, ranks, ``--set`` options, forced algorithm, why."""

    preset: str | None
    nodes: int = 1
    ranks: int = 0
    options: dict = field(default_factory=dict)
    algorithm: str | None = None
    transport: str = ""  # a network transport the presets do not model (they model InfiniBand / RoCE verbs)
    note: str = ""


EFA = "EFA (libfabric SRD, aws-ofi-nccl)"


def skip(reason: str) -> Case:
    return Case(preset=None, note=reason)


#: curve id -> its description (suspect / pathological curves are skipped by category)
CASES: dict[str, Case] = {
    "a100_8g_stas00": Case("dgx-a100", 1, 8),
    "b200_8g_stas00_torch": Case("dgx-b200", 1, 8, note="torch all_reduce; AWS tuner plugin"),
    "b200_4x8_efa_stas00_torch": Case("dgx-b200", 4, 32, transport=EFA),
    "h100_2x8_gcp_a3mega_tcpxo": Case("dgx-h100", 2, 16, {"nic_gbit": 200}, transport="GPUDirect-TCPXO (TCP)"),
    "a100_1x8_abci_anode": Case("dgx-a100", 1, 8, note="A100-SXM4-40GB; NVLink as the 80GB's"),
    "a100_2x8_abci_anode": Case("dgx-a100", 2, 16, {"nic_gbit": 100},
                                note="4 x HDR 200 Gb/s per node as 8 x 100 Gb/s (the same 800 Gb/s)"),
    "a100_4x8_abci_anode": Case("dgx-a100", 4, 32, {"nic_gbit": 100},
                                note="4 x HDR 200 Gb/s per node as 8 x 100 Gb/s (the same 800 Gb/s)"),
    "v100_1x4_abci_vnode": Case("dgx-v100", 1, 4, {"gpus_per_node": 4}, note="a quad of the DGX-1 mesh"),
    "v100_2x4_abci_vnode": Case("dgx-v100", 2, 8, {"gpus_per_node": 4}, note="2 x EDR per node"),
    "v100_8x4_abci_vnode": Case("dgx-v100", 8, 32, {"gpus_per_node": 4}, note="2 x EDR per node"),
    "v100_32x4_abci_vnode": Case("dgx-v100", 32, 128, {"gpus_per_node": 4}, note="2 x EDR per node"),
    "a100_2x8_aws_p4d_efa": Case("dgx-a100", 2, 16, {"nic_gbit": 50}, transport=EFA,
                                 note="EFA 4 x 100 Gb/s as 8 x 50 Gb/s"),
    "h100_1x8_xxrjun": Case("dgx-h100", 1, 8),
    "a100pcie_2g_p2p_thomaslie": Case("pcie", 1, 2, {"gpus_per_node": 2}, note="two A100-PCIe on one switch"),
    "b200_2x8_gcp_a4_roce": Case("dgx-b200", 2, 16, note="RoCE 8 x 400 Gb/s as IB"),
    "h100_8g_azure_ndv5_nvls": Case("dgx-h100", 1, 8, algorithm="nvls"),
    "h200_8g_azure_ndv5_nvls": Case("dgx-h200", 1, 8, algorithm="nvls"),
    "a100_8g_azure_ndv4": Case("dgx-a100", 1, 8, note="NCCL_ALGO=NVLS has no effect on A100: NCCL's choice"),
    "gb200_4g_azure_ndv6_ring": Case("gb200-nvl72", 1, 4, {"gpus_per_node": 4}, algorithm="ring",
                                     note="one tray of 4 GPUs"),
    "a100_2x8_dgx_hdr_deepops_ring": Case("dgx-a100", 2, 16, algorithm="ring"),
    "v100_2x8_aws_p3dn_efa_ring": Case("dgx-v100", 2, 16, {"nic_gbit": 25}, algorithm="ring",
                                       transport=EFA, note="EFA 1 x 100 Gb/s as 4 x 25 Gb/s"),
    "mi300x_8g_rccl_aac8": Case("mi300x-platform", 1, 8, transport="RCCL (AMD; NCCL's model stands in)"),
    "mi355x_2x8_rccl_pollara": skip("AMD MI355X with RCCL: no preset"),
    "gh200_2x4_cscs_slingshot": skip("GH200: no catalogue GPU or preset"),
    "gh200_1x4_alps_aws-ofi": skip("GH200: no catalogue GPU or preset"),
    "gh200_16x4_alps_aws-ofi": skip("GH200: no catalogue GPU or preset"),
    "gh200_128x4_alps_aws-ofi": skip("GH200: no catalogue GPU or preset"),
    "a100pcie_4g_azure_nc96v4": skip("NVLink-bridged pairs of PCIe GPUs: no preset"),
    "a100pcie_2g_nvbridge_azure_nc48v4": skip("NVLink bridge between PCIe GPUs: no preset"),
    "rtxpro6000_8g_pcie5_wrx90": skip("RTX PRO 6000 Blackwell (sm_120): no catalogue GPU"),
    "h100_1x4_snellius": skip("4 H100 in a direct NVLink mesh without NVSwitch: no preset (dgx-h100 has NVLS)"),
    "h100_2x4_snellius_ib": skip("4 H100 in a direct NVLink mesh without NVSwitch: no preset (dgx-h100 has NVLS)"),
    "rtx2080ti_2g_pcie3_nop2p_autodl": skip("GeForce RTX 2080 Ti without P2P (through host memory): no preset"),
}


def load(data: Path) -> tuple[list[dict], dict[str, list[tuple[int, float]]]]:
    """The curves' metadata rows and, per curve, its (size_bytes, time_us), sorted by size."""
    with gzip.open(data / "curves_meta.csv.gz", "rt", newline="") as f:
        meta = list(csv.DictReader(f))
    points: dict[str, list[tuple[int, float]]] = {m["curve_id"]: [] for m in meta}
    with gzip.open(data / "curves.csv.gz", "rt", newline="") as f:
        for r in csv.DictReader(f):
            points[r["curve_id"]].append((int(r["size_bytes"]), float(r["time_us"])))
    return meta, {k: sorted(v) for k, v in points.items()}


def model_for(case: Case):
    from ddpsim.network.collective_cost import build_comm_model
    from ddpsim.network.topology import build_preset

    g = build_preset(case.preset, num_nodes=case.nodes, **case.options)
    return build_comm_model(g, case.ranks, algorithm=case.algorithm)


def residuals(case: Case, points: list[tuple[int, float]]) -> list[tuple[int, float, float, str]]:
    """Per size: (size, measured µs, model µs, algo/proto)."""
    m = model_for(case)
    out = []
    for size, t in points:
        e = m.estimate_allreduce(size)
        out.append((size, t, e.time_s * 1e6, f"{e.algorithm}/{e.protocol}"))
    return out


def band_stats(res: list[tuple[int, float, float, str]]) -> dict[str, tuple[float, float, int] | None]:
    """Per band: (median |error|, median signed error, sizes), or None."""
    out = {}
    for name, lo, hi in BANDS:
        errs = [tm / t - 1 for s, t, tm, _ in res if lo <= s < hi]
        out[name] = (statistics.median(abs(e) for e in errs), statistics.median(errs), len(errs)) if errs else None
    return out


def scored(meta: list[dict]) -> list[tuple[dict, Case]]:
    """The (metadata, description) of every ``normal`` / ``forced_algo`` curve a preset describes."""
    out = []
    for m in meta:
        case = CASES.get(m["curve_id"])
        if m["category"] in ("normal", "forced_algo") and case is not None and case.preset is not None:
            out.append((m, case))
    return out


def group(m: dict, case: Case) -> str:
    """The summary a scored curve counts in."""
    return "other transport" if case.transport else m["category"]


def system_key(m: dict) -> str:
    """A system for leave-one-system-out: one source and GPU."""
    return f"{m['source_repo']}|{m['gpu_model']}"


def fit_points(meta: list[dict], points: dict, exclude: str | None = None) -> list[tuple[Any, list, float]]:
    """(model, points, weight) of the ``normal`` curves of modelled transports, without the system
    ``exclude``; each system weighs 1."""
    out = []
    chosen = [(m, case) for m, case in scored(meta)
              if m["category"] == "normal" and not case.transport and system_key(m) != exclude]
    per_system: dict[str, int] = {}
    for m, _ in chosen:
        per_system[system_key(m)] = per_system.get(system_key(m), 0) + 1
    for m, case in chosen:
        pts = [(s, t) for s, t in points[m["curve_id"]] if FIT_LO <= s <= FIT_HI]
        if pts:
            out.append((model_for(case), pts, 1.0 / per_system[system_key(m)]))
    return out


def constants() -> dict[str, float]:
    """The fitted constants in use: LL's round trip and the LL128 / Simple step overheads (µs)."""
    from ddpsim.network import nccl_exec

    return {"ll_round_trip": nccl_exec.LL_ROUND_TRIP_US, "ll128": nccl_exec.STEP_OVERHEAD_US["ll128"],
            "simple": nccl_exec.STEP_OVERHEAD_US["simple"]}


def set_constants(c: dict[str, float]) -> None:
    from ddpsim.network import nccl_exec

    nccl_exec.LL_ROUND_TRIP_US = c["ll_round_trip"]
    nccl_exec.STEP_OVERHEAD_US.update(ll128=c["ll128"], simple=c["simple"])


def fit_overheads(curves: list[tuple[Any, list, float]]) -> dict[str, float]:
    """The constants minimising the mean over systems of the median |log(model / run)| (grid search)."""
    saved = constants()
    best: tuple[float, dict[str, float]] | None = None
    try:
        for o in itertools.product(*GRID.values()):
            c = dict(zip(GRID, o))
            set_constants(c)
            cost = sum(w * statistics.median(abs(math.log(m.estimate_allreduce(s).time_s * 1e6 / t)) for s, t in pts)
                       for m, pts, w in curves)
            if best is None or cost < best[0] - 1e-12:
                best = (cost, c)
    finally:
        set_constants(saved)
    assert best is not None
    return best[1]


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


def mid_size_ratios(meta: list[dict], points: dict) -> list[float]:
    """Measured / model time at 64 KiB-64 MiB, scored curves of modelled transports, sorted."""
    ratios = []
    for m, case in scored(meta):
        if case.transport:
            continue
        ratios += [t / tm for s, t, tm, _ in residuals(case, points[m["curve_id"]]) if BAND_LO <= s <= BAND_HI]
    return sorted(ratios)


def residual_quantiles(meta: list[dict], points: dict) -> None:
    """Quantiles of :func:`mid_size_ratios` (:mod:`ddpsim.network.collective_residuals`)."""
    ratios = mid_size_ratios(meta, points)
    qs = statistics.quantiles(ratios, n=20, method="inclusive")
    print(f"\nmeasured / model time at 64 KiB-64 MiB, {len(ratios)} sizes: 5 % {qs[0]:.3f}, 10 % {qs[1]:.3f}, "
          f"median {statistics.median(ratios):.3f}, 90 % {qs[17]:.3f}, 95 % {qs[18]:.3f}")


def diagnose(m: dict, res: list[tuple[int, float, float, str]]) -> None:
    """The 1-128 MiB signed error per (algorithm, protocol), and the error at the largest size."""
    by: dict[str, list[float]] = {}
    for s, t, tm, ap in res:
        if BANDS[1][1] <= s < BANDS[1][2]:
            by.setdefault(ap, []).append(tm / t - 1)
    parts = [f"{ap} {100 * statistics.median(e):+.0f}% ({len(e)})" for ap, e in sorted(by.items())]
    s, t, tm, ap = res[-1]
    print(f"    1-128 MiB by algo/proto: {', '.join(parts) or '-'}; largest size {s / MiB:g} MiB "
          f"{100 * (tm / t - 1):+.1f}% {ap}")


def md_band(b: tuple[float, float, int] | None) -> str:
    return "–" if b is None else f"{100 * b[0]:.1f} ({100 * b[1]:+.1f})"


def markdown(rows: list[tuple[dict, Case, dict]]) -> None:
    """The per-curve table of docs/MODEL.md (curves of other transports last)."""
    print("| curve | category | model: preset, nodes, ranks, options, algorithm | < 1 MiB | 1–128 MiB | ≥ 256 MiB |")
    print("|---|---|---|---:|---:|---:|")
    order = {"normal": 0, "forced_algo": 1}
    for m, case, b in sorted(rows, key=lambda r: (bool(r[1].transport), order[r[0]["category"]], r[0]["curve_id"])):
        cat = m["category"] + (" (other transport: apart)" if case.transport else "")
        opts = "".join(f", `{k}={v}`" for k, v in case.options.items())
        model = f"{case.preset}, {case.nodes}, {case.ranks}{opts}, {case.algorithm or 'choice'}"
        print(f"| `{m['curve_id']}` | {cat} | {model} | {md_band(b['<1MiB'])} | {md_band(b['1-128MiB'])} "
              f"| {md_band(b['>=256MiB'])} |")


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
    args = ap.parse_args(argv)
    meta, points = load(args.curves)
    print(f"{'curve':34s} {'category':11s} {'model (preset nodes ranks options algo)':58s} "
          f"{'<1MiB |e| sgn':>15s} {'1-128MiB':>15s} {'>=256MiB':>15s}")
    stats: dict[str, list] = {"normal": [], "forced_algo": [], "other transport": []}
    rows = []
    for m, case in scored(meta):
        res = residuals(case, points[m["curve_id"]])
        b = band_stats(res)
        stats[group(m, case)].append((m["curve_id"], b))
        rows.append((m, case, b))
        opts = " ".join(f"{k}={v}" for k, v in case.options.items())
        desc = f"{case.preset} {case.nodes} {case.ranks} {opts} {case.algorithm or 'choice'}"
        print(f"{m['curve_id']:34s} {m['category']:11s} {desc:58s} {fmt(b['<1MiB'])} {fmt(b['1-128MiB'])} "
              f"{fmt(b['>=256MiB'])}")
        for note in (case.note, f"no preset models {case.transport}: apart" * bool(case.transport)):
            if note:
                print(f"{'':47s}({note})")
        if args.diagnose:
            diagnose(m, res)
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
    summary("other transports (EFA, TCPXO, RCCL)", stats["other transport"])
    if args.markdown:
        print()
        markdown(rows)
    if args.loso:
        loso(meta, points)
    if args.quantiles:
        residual_quantiles(meta, points)


if __name__ == "__main__":
    main()
