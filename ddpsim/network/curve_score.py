"""ddpsim's all-reduce time held against measured curves: each curve described by a preset, and the
error of the model per size band. A public all-reduce curve (nccl-tests ``all_reduce_perf`` or
``torch.distributed.all_reduce``, ``benchmarks/data/nccl-curves/`` with its sources) is described by a
preset, nodes, ranks, ``--set`` options and a forced algorithm (:data:`CASES`), or named with why no
preset can. :func:`residuals` times it with :func:`ddpsim.network.collective_cost.build_comm_model`, as
the curve's tool times it (one ``torch.distributed`` call from an idle device: plus its host path);
:func:`band_stats` gives the median |error| and median signed error per size band (< 1 MiB, 1-128 MiB:
DDP's buckets, >= 256 MiB). Only ``normal`` and ``forced_algo`` curves are scored and only ``normal``
ones set a constant (:func:`fit_points`); curves over a transport no preset models (EFA,
GPUDirect-TCPXO, Slingshot, RCCL) are kept apart. Printed by ``benchmarks/bench_collective_score.py``.
"""

from __future__ import annotations

import collections
import csv
import functools
import gzip
import itertools
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpsim.network import nccl_exec
from ddpsim.network.collective_cost import build_comm_model
from ddpsim.network.comm_model import CommModel
from ddpsim.network.topology import build_preset
from ddpsim.units import KIB, MIB

BANDS = (("<1MiB", 0, MIB), ("1-128MiB", MIB, 128 * MIB + 1), (">=256MiB", 256 * MIB, 1 << 50))
WITHIN = 0.15
#: the sizes the step overheads are fitted on, and the grid searched (µs); a tie keeps a key's first value,
#: so Blackwell's LL round trip lists the common 2 µs first: a fold with no Blackwell LL size keeps it
FIT_LO, FIT_HI = 64 * KIB, 128 * MIB
GRID = {"ll_round_trip": (0.5, 1.0, 1.5, 2.0), "ll128": (0.0, 2.0, 4.0, 6.0, 8.0, 12.0),
        "simple": (0.0, 0.5, 1.0, 2.0, 4.0), "hopper_ll128": (0.0, 2.0, 4.0, 12.0),
        "hopper_ll_round_trip": (0.0, 1.0, 2.0), "blackwell_ll_round_trip": (2.0, 1.0, 0.0)}
#: the published large-message checks of tests/test_collectives.py (sources there), which every fitted set
#: of constants keeps within :data:`CHECK_TOLERANCE`: preset, nodes, size, forced algorithm, busbw GB/s
#: (8 V100 at 128 MiB, 8 A100 at 8 GiB, 2 x 8 A100 at 8 GiB, 8 H100 ring at 8 GiB)
PUBLISHED_CHECKS = (("dgx-v100", 1, 128 * MIB, None, 129.14), ("dgx-a100", 1, 8192 * MIB, None, 230.0),
                    ("dgx-a100", 2, 8192 * MIB, None, 192.0), ("dgx-h100", 1, 8192 * MIB, "ring", 370.0))
CHECK_TOLERANCE = 0.10
#: the generation-specific constants: key -> (generation row, constant) of nccl_exec.GENERATION_US
GENERATION_KEYS = {"hopper_ll128": (2, "ll128"), "hopper_ll_round_trip": (2, "ll_round_trip"),
                   "blackwell_ll_round_trip": (3, "ll_round_trip")}
#: µs of ``torch.distributed.all_reduce``'s host path (the c10d op, ProcessGroupNCCL's enqueue, NCCL's
#: launch). ``all_reduce_bench.py`` (stas00/ml-engineering at the curves' commit, 744d01e) times one call
#: between CUDA events recorded after a barrier, on an idle device, so every time holds it; the tool's
#: later docstring puts it at "some 20-30us": the middle of that span, not fitted
TORCH_CALL_US = 25.0
TORCH_TIMED = ", one torch call timed"


@dataclass(frozen=True)
class Case:
    """How a curve is described: preset, nodes, ranks, ``--set`` options, forced algorithm, how its
    tool timed it, why."""

    preset: str | None
    nodes: int = 1
    ranks: int = 0
    options: dict = field(default_factory=dict)
    algorithm: str | None = None
    transport: str = ""  # a network transport the presets do not model (they model InfiniBand / RoCE verbs)
    note: str = ""
    torch_call: bool = False  # one torch.distributed.all_reduce timed from the host's call on an idle device


EFA = "EFA (libfabric SRD, aws-ofi-nccl)"
SLINGSHOT = "Slingshot-11 (libfabric CXI, aws-ofi-nccl)"
RCCL = "RCCL (AMD; NCCL's model stands in)"


def skip(reason: str) -> Case:
    """A curve no preset describes, and why."""
    return Case(preset=None, note=reason)


#: curve id -> its description (suspect / pathological curves are skipped by category)
CASES: dict[str, Case] = {
    "a100_8g_stas00": Case("dgx-a100", 1, 8),
    "b200_8g_stas00_torch": Case("dgx-b200", 1, 8, note="AWS tuner plugin", torch_call=True),
    "b200_4x8_efa_stas00_torch": Case("dgx-b200", 4, 32, transport=EFA, torch_call=True),
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
    "mi300x_8g_rccl_aac8": Case("mi300x-platform", 1, 8, transport=RCCL),
    "mi355x_2x8_rccl_pollara": skip("AMD MI355X across nodes with RCCL and Pollara NICs: not described"),
    "gh200_2x4_cscs_slingshot": Case("gh200-quad", 2, 8, transport=SLINGSHOT),
    "gh200_1x4_alps_aws-ofi": Case("gh200-quad", 1, 4),
    "gh200_16x4_alps_aws-ofi": Case("gh200-quad", 16, 64, transport=SLINGSHOT),
    "gh200_128x4_alps_aws-ofi": Case("gh200-quad", 128, 512, transport=SLINGSHOT),
    "a100pcie_4g_azure_nc96v4": skip("NVLink-bridged pairs of PCIe GPUs: no preset"),
    "a100pcie_2g_nvbridge_azure_nc48v4": skip("NVLink bridge between PCIe GPUs: no preset"),
    "rtxpro6000_8g_pcie5_wrx90": skip("RTX PRO 6000 Blackwell (sm_120): no catalogue GPU"),
    "h100_1x4_snellius": Case("hgx-h100-4", 1, 4),
    "h100_2x4_snellius_ib": Case("hgx-h100-4", 2, 8, {"nic_gbit": 200}, note="4 x 200 Gb/s InfiniBand (the run's ibstat)"),
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


def model_for(case: Case) -> CommModel:
    """The comm model of the system a curve is described as."""
    g = build_preset(case.preset, num_nodes=case.nodes, **case.options)
    return build_comm_model(g, case.ranks, algorithm=case.algorithm)


def as_timed(case: Case, kernel_us: float) -> float:
    """What the curve's tool times when the all-reduce takes ``kernel_us``: with a torch call's host
    path (:data:`TORCH_CALL_US`) where the tool times one."""
    return kernel_us + TORCH_CALL_US * case.torch_call


def residuals(case: Case, points: list[tuple[int, float]],
              model: CommModel | None = None) -> list[tuple[int, float, float, str]]:
    """Per size: (size, measured µs, model µs as the curve's tool times it, algo/proto); the model
    :func:`model_for` builds unless given."""
    m = model or model_for(case)
    estimates = [(size, t, m.estimate_allreduce(size)) for size, t in points]
    return [(size, t, as_timed(case, e.time_s * 1e6), f"{e.algorithm}/{e.protocol}") for size, t, e in estimates]


def band_stats(res: list[tuple[int, float, float, str]]) -> dict[str, tuple[float, float, int] | None]:
    """Per band: (median |error|, median signed error, sizes), or None."""
    out = {}
    for name, lo, hi in BANDS:
        errs = [tm / t - 1 for s, t, tm, _ in res if lo <= s < hi]
        out[name] = (statistics.median(abs(e) for e in errs), statistics.median(errs), len(errs)) if errs else None
    return out


def scored(meta: list[dict]) -> list[tuple[dict, Case]]:
    """The (metadata, description) of every ``normal`` / ``forced_algo`` curve a preset describes."""
    return [(m, CASES[m["curve_id"]]) for m in meta if m["category"] in ("normal", "forced_algo")
            and getattr(CASES.get(m["curve_id"]), "preset", None) is not None]


def system_key(m: dict) -> str:
    """A system for leave-one-system-out: one source and GPU."""
    return f"{m['source_repo']}|{m['gpu_model']}"


def fit_points(meta: list[dict], points: dict, exclude: str | None = None) -> list[tuple[Any, Case, list, float]]:
    """(model, description, points, weight) of the ``normal`` curves of modelled transports but system
    ``exclude``'s."""
    out = []
    chosen = [(m, case) for m, case in scored(meta)
              if m["category"] == "normal" and not case.transport and system_key(m) != exclude]
    per_system = collections.Counter(system_key(m) for m, _ in chosen)
    for m, case in chosen:
        pts = [(s, t) for s, t in points[m["curve_id"]] if FIT_LO <= s <= FIT_HI]
        if pts:
            out.append((model_for(case), case, pts, 1.0 / per_system[system_key(m)]))
    return out


def constants() -> dict[str, float]:
    """The fitted constants in use: LL's round trip, the LL128 / Simple step overheads and the
    generations' own (µs)."""
    return {"ll_round_trip": nccl_exec.LL_ROUND_TRIP_US, "ll128": nccl_exec.STEP_OVERHEAD_US["ll128"],
            "simple": nccl_exec.STEP_OVERHEAD_US["simple"],
            **{k: nccl_exec.GENERATION_US[g] for k, g in GENERATION_KEYS.items()}}


def set_constants(c: dict[str, float]) -> None:
    """Put ``c`` (keys as :func:`constants` gives them; a missing one stays) in :mod:`ddpsim.network.nccl_exec`."""
    nccl_exec.LL_ROUND_TRIP_US = c.get("ll_round_trip", nccl_exec.LL_ROUND_TRIP_US)
    nccl_exec.STEP_OVERHEAD_US.update({k: c[k] for k in ("ll128", "simple") if k in c})
    nccl_exec.GENERATION_US.update({g: c[k] for k, g in GENERATION_KEYS.items() if k in c})


@functools.cache
def _check_models() -> tuple[CommModel, ...]:
    return tuple(build_comm_model(build_preset(preset, num_nodes=nodes), 8 * nodes, algorithm=algo)
                 for preset, nodes, _, algo, _ in PUBLISHED_CHECKS)


def check_errors() -> list[float]:
    """The signed error of the model's bus bandwidth in each of :data:`PUBLISHED_CHECKS`."""
    return [m.estimate_allreduce(size).busbw_gbps / busbw - 1
            for m, (_, _, size, _, busbw) in zip(_check_models(), PUBLISHED_CHECKS)]


def fit_overheads(curves: list[tuple[Any, Case, list, float]]) -> dict[str, float]:
    """The constants minimising the mean over systems of the median |log(model / run)| (grid search;
    the model as each curve's tool times it), among those that keep every published check within
    :data:`CHECK_TOLERANCE`."""
    saved = constants()
    best: tuple[float, dict[str, float]] | None = None
    try:
        for o in itertools.product(*GRID.values()):
            c = dict(zip(GRID, o))
            set_constants(c)
            if any(abs(e) > CHECK_TOLERANCE for e in check_errors()):
                continue
            cost = sum(w * statistics.median(abs(math.log(as_timed(case, m.estimate_allreduce(s).time_s * 1e6) / t))
                                             for s, t in pts)
                       for m, case, pts, w in curves)
            if best is None or cost < best[0] - 1e-12:
                best = (cost, c)
    finally:
        set_constants(saved)
    if best is None:
        raise ValueError(f"no point of the grid keeps every published check within {CHECK_TOLERANCE:.0%}")
    return best[1]


def same_system_spread(meta: list[dict], points: dict) -> list[tuple[tuple, list[str], list[tuple[int, float]]]]:
    """The scored curves of modelled transports that describe the same system (preset, nodes, ranks,
    options; any algorithm), two or more: (system, curve ids, [(size, slowest / fastest time)] at their
    common 1-128 MiB sizes), how far apart runs of one kind of system are."""
    groups: dict[tuple, list[str]] = {}
    for m, case in scored(meta):
        if not case.transport and not case.torch_call:
            key = (case.preset, case.nodes, case.ranks, tuple(sorted(case.options.items())))
            groups.setdefault(key, []).append(m["curve_id"])
    out = []
    for key, ids in groups.items():
        times = [dict(points[i]) for i in ids]
        common = sorted(set.intersection(*(set(t) for t in times)))
        sizes = [s for s in common if BANDS[1][1] <= s < BANDS[1][2]]
        if len(ids) > 1 and sizes:
            out.append((key, ids, [(s, max(t[s] for t in times) / min(t[s] for t in times)) for s in sizes]))
    return out


def mid_size_ratios(meta: list[dict], points: dict) -> list[float]:
    """Measured / model time at the uncertainty band's sizes (64 KiB-64 MiB), scored curves of modelled transports, sorted."""
    return sorted(t / tm for m, case in scored(meta) if not case.transport
                  for s, t, tm, _ in residuals(case, points[m["curve_id"]])
                  if nccl_exec.MID_LO_BYTES <= s <= nccl_exec.MID_HI_BYTES)


def diagnose_line(res: list[tuple[int, float, float, str]]) -> str:
    """The 1-128 MiB signed error per (algorithm, protocol), and the error at the largest size."""
    by: dict[str, list[float]] = {}
    for s, t, tm, ap in res:
        if BANDS[1][1] <= s < BANDS[1][2]:
            by.setdefault(ap, []).append(tm / t - 1)
    parts = [f"{ap} {100 * statistics.median(e):+.0f}% ({len(e)})" for ap, e in sorted(by.items())]
    s, t, tm, ap = res[-1]
    return (f"1-128 MiB by algo/proto: {', '.join(parts) or '-'}; largest size {s / MIB:g} MiB "
            f"{100 * (tm / t - 1):+.1f}% {ap}")


def _md_band(b: tuple[float, float, int] | None) -> str:
    return "–" if b is None else f"{100 * b[0]:.1f} ({100 * b[1]:+.1f})"


def markdown_lines(rows: list[tuple[dict, Case, dict]]) -> list[str]:
    """The per-curve table of docs/MODEL.md (curves of other transports last)."""
    out = ["| curve | category | model: preset, nodes, ranks, options, algorithm | < 1 MiB | 1–128 MiB | ≥ 256 MiB |",
           "|---|---|---|---:|---:|---:|"]
    order = {"normal": 0, "forced_algo": 1}
    for m, case, b in sorted(rows, key=lambda r: (bool(r[1].transport), order[r[0]["category"]], r[0]["curve_id"])):
        cat = m["category"] + (" (other transport: apart)" if case.transport else "")
        opts = "".join(f", `{k}={v}`" for k, v in case.options.items())
        timed = TORCH_TIMED * case.torch_call
        model = f"{case.preset}, {case.nodes}, {case.ranks}{opts}, {case.algorithm or 'choice'}{timed}"
        out.append(f"| `{m['curve_id']}` | {cat} | {model} | {_md_band(b['<1MiB'])} | {_md_band(b['1-128MiB'])} "
                   f"| {_md_band(b['>=256MiB'])} |")
    return out
