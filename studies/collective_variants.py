"""Do global changes to the execution model close its 1-128 MiB gap to the measured curves? One
command, prints figures:

    python studies/collective_variants.py

Scores :mod:`ddpsim.network.nccl_exec` against the public all-reduce curves
(``benchmarks/data/nccl-curves/``) with :mod:`ddpsim.network.curve_score`, as
``benchmarks/bench_collective_score.py`` does, once as it is and once per variant, each variant
one global change for every GPU generation and transport (never per curve):

* every LL round trip counted, not only those past a step's first (``prims_ll.h``: a step's
  first round is its hop latency), at a round trip of 1, 1.5 and 2 µs;
* the Simple / LL128 step overheads (``prims_simple.h`` / ``prims_ll128.h`` waitPeer /
  postPeer) set to 8 or 12 / 12 or 16 µs;
* a ceiling on each ring LL128 channel's bus bandwidth (one block of 640 threads,
  ``prims_ll128.h``), 4-11 GB/s, with the LL128 step overhead at 0, 4 or 12 µs.

Per variant: the median over the ``normal`` curves of InfiniBand / RoCE / NVLink / PCIe systems of
the 1-128 MiB median |error| and how many are within 15 %, the same with the ``forced_algo``
curves, and the < 1 MiB median. Then the ``normal`` curves split by NCCL version (2.8 against
the rest). Nothing is fitted here and nothing of it is the model.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ddpsim.network import curve_score, nccl_exec  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "nccl-curves"


def scored_cases(meta: list[dict]) -> list[tuple[dict, Any, Any]]:
    """(metadata, description, comm model) of every scored curve of a modelled transport."""
    return [(m, c, curve_score.model_for(c)) for m, c in curve_score.scored(meta) if not c.transport]


def mid_errors(cases: list, points: dict) -> dict[str, list[tuple[str, dict]]]:
    """Per category, each curve's band statistics with the model as it is now."""
    out: dict[str, list[tuple[str, dict]]] = {"normal": [], "forced_algo": []}
    for m, _, model in cases:
        res = [(s, t, model.estimate_allreduce(s).time_s * 1e6, "") for s, t in points[m["curve_id"]]]
        out[m["category"]].append((m["curve_id"], curve_score.band_stats(res)))
    return out


def line(label: str, cases: list, points: dict) -> str:
    errs = mid_errors(cases, points)
    norm = [b["1-128MiB"][0] for _, b in errs["normal"] if b["1-128MiB"]]
    both = norm + [b["1-128MiB"][0] for _, b in errs["forced_algo"] if b["1-128MiB"]]
    low = [b["<1MiB"][0] for _, b in errs["normal"] + errs["forced_algo"] if b["<1MiB"]]
    within = curve_score.WITHIN
    return (f"{label:44s} normal {100 * statistics.median(norm):5.1f} % ({sum(e <= within for e in norm)}/{len(norm)})"
            f"  + forced {100 * statistics.median(both):5.1f} % ({sum(e <= within for e in both)}/{len(both)})"
            f"  < 1 MiB {100 * statistics.median(low):5.1f} %")


@contextlib.contextmanager
def patched(name: str, value: Any) -> Iterator[None]:
    """``nccl_exec.<name>`` set to ``value`` for the block."""
    old = getattr(nccl_exec, name)
    setattr(nccl_exec, name, value)
    try:
        yield
    finally:
        setattr(nccl_exec, name, old)


@contextlib.contextmanager
def overheads(**values: float) -> Iterator[None]:
    """The step overheads of ``values`` (protocol -> µs) for the block."""
    with patched("STEP_OVERHEAD_US", {**nccl_exec.STEP_OVERHEAD_US, **values}):
        yield


def every_ll_round(rtt: float) -> Callable:
    """``ll_rounds_us`` counting every round trip of a step, the first included."""
    def rounds(sys_: Any, algo: str, proto: str, size: int, ex: Any) -> float:
        if proto != "ll":
            return 0.0
        per_round = nccl_exec.MAX_THREADS["ll"] * ex.thread_fraction * 8
        return nccl_exec.wire_bytes_per_channel(sys_, algo, size, ex.num_channels) / per_round * rtt
    return rounds


def ll128_ceiling(gbps: float) -> Callable:
    """``bandwidth_gbps`` with each ring LL128 channel's bus bandwidth at most ``gbps``."""
    base = nccl_exec.bandwidth_gbps

    def bandwidth(sys_: Any, algo: str, proto: str, ex: Any) -> float:
        bw = base(sys_, algo, proto, ex)
        if proto == "ll128" and algo == "ring":
            n = sys_.num_ranks
            bw = min(bw, ex.num_channels * gbps * n / (2 * (n - 1)))
        return bw
    return bandwidth


def main() -> None:
    meta, points = curve_score.load(DATA)
    cases = scored_cases(meta)
    print(line("as it is", cases, points))
    for rtt in (1.0, 1.5, 2.0):
        with patched("ll_rounds_us", every_ll_round(rtt)):
            print(line(f"every LL round trip, {rtt:g} us", cases, points))
    for simple in (8.0, 12.0):
        for ll128 in (12.0, 16.0):
            with overheads(simple=simple, ll128=ll128):
                print(line(f"step overheads Simple {simple:g} / LL128 {ll128:g} us", cases, points))
    for o in (0.0, 4.0, 12.0):
        for cap in (4.0, 6.0, 8.0, 11.0):
            with overheads(ll128=o), patched("bandwidth_gbps", ll128_ceiling(cap)):
                print(line(f"ring LL128 <= {cap:g} GB/s per channel, {o:g} us", cases, points))
    print("\nnormal curves by NCCL version: median 1-128 MiB |error| (curves within 15 %)")
    errs = dict(mid_errors(cases, points)["normal"])
    version = {m["curve_id"]: m["nccl_version"] for m, _, _ in cases}
    for label, old in (("NCCL 2.8", True), ("other or not printed", False)):
        e = [b["1-128MiB"][0] for cid, b in errs.items() if b["1-128MiB"] and version[cid].startswith("2.8.") == old]
        print(f"  {label:22s} {len(e):2d} curves  {100 * statistics.median(e):5.1f} % "
              f"({sum(x <= curve_score.WITHIN for x in e)})")


if __name__ == "__main__":
    main()
