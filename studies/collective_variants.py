"""Do global changes to the execution model close its 1-128 MiB gap to the measured curves? One
command, prints figures:

    python studies/collective_variants.py

Scores :mod:`ddpsim.network.nccl_exec` against the public all-reduce curves
(``benchmarks/data/nccl-curves/``) with :mod:`ddpsim.network.curve_score`, as
``benchmarks/bench_collective_score.py`` does, once as it is and once per variant, each variant
one global change for every GPU generation and transport (never per curve). Per variant: the
median over the ``normal`` curves of InfiniBand / RoCE / NVLink / PCIe systems of the 1-128 MiB
median |error| and how many are within 15 %, the same with the ``forced_algo`` curves, the
< 1 MiB median; where the variant changes what the fitted constants mean, the constants refitted
on a grid (:func:`curve_score.fit_overheads`) and the leave-one-system-out median; and the signed
error of the four published large-message checks of ``tests/test_collectives.py`` (8 V100 at
128 MiB, 129.14 GB/s; 8 A100 at 8 GiB, 230; 2 x 8 A100 at 8 GiB, 192; 8 H100 ring at 8 GiB, 370;
each must stay within 10 %).

The mechanisms tried, each read in NCCL's sources:

* **Every slice's synchronisation paid in full.** ``prims_simple.h genericOp`` runs waitPeer,
  subBarrier, reduceCopy, barrier and postPeer (``fence_acq_rel_sys`` then the step store) one
  slice after the other on one thread group; ``prims_ll128.h GenericOp`` waitSend, barrier, the
  lines, barrier, postSend (``__threadfence``). The model charges each slice the overhead for the
  share of a full slice it lacks (NCCL's bandwidth holds it for full slices); here each slice pays
  all of it, on the rings, the trees, or every algorithm: large messages pay it twice.
* **Only the first pass's synchronisations, in full.** Before any slice is in flight, a step waits
  for the previous rank's post of the step before (``waitPeer`` on the tail ``postPeer`` stores):
  the 2(n-1) steps of a ring's first loop, a tree's levels, are a chain; the later slices' syncs
  hidden. For every protocol or for LL128 only.
* **P2P read on Ampere.** ``paths.cc ncclTopoCheckP2p`` enables P2P read for NVLink between
  compute-capability 8.0 GPUs only ("Enable P2P Read for Ampere/NVLink only"); ``p2p.cc`` then
  keeps the Simple buffer on the sender ("the SIMPLE buffer is tagged on the end of the
  ncclSendMem structure") and the receiver's threads load each slice across NVLink after its
  wait: a read round trip per Simple slice that the writes of other generations do not pay.
* **What a torch.distributed curve times.** ``all_reduce_bench.py`` at the curve's commit
  records the start event on an idle stream, then calls ``dist.all_reduce`` once: the time holds
  the call's host path (the script's later revision: "PyTorch's per-call host overhead of some
  20-30us"). The score adds the middle of that span to those curves' model times
  (``curve_score.TORCH_CALL_US``, 25 us); here it is either end of the span, and none. The engine
  charges DDP's own host path apart (``host_costs.ENQUEUE_S``, from profiles).
* **The last loop of a ring.** A ring loop moves nChannels x nRanks chunks (2 MiB for Simple);
  a message that is not a whole number of loops leaves a partial last loop. Were the channels
  without a chunk idle while the others move whole ones, the last loop would cost a whole loop's
  time. NCCL's code does not do that: v2.30.7 gives each channel an equal contiguous part
  (``enqueue.cc scheduleCollTasksToPlan``, ``device.h ncclCollCbdPart``) and ``device/all_reduce.h
  runRing`` shrinks the chunk of a channel's last loop to ``divUp(remCount, nranks)``; v2.8-v2.18's
  ``runRing`` sets Simple's ``realChunkSize`` to ``divUp(size - gridOffset, nChannels * nranks)``
  rounded to 8 bytes per thread, and LL / LL128's to a multiple of ``minChunkSize`` (8 bytes per
  thread; 60 / 2 bytes per LL128 thread), their chunks interleaved across channels
  (``(chunk * nChannels + bid) * realChunkSize``), so a channel's last chunks can be short or empty.
  The model splits every loop evenly, as v2.30.7. Tried here: the whole loop paid (the idle
  channels, not NCCL's code: a counterfactual), and v2.8-v2.18's rounding (the versions of the
  A100 curves), where a channel's time is its fullest rank's work: LL / LL128 forward lines as
  they arrive, so a rank's 2(n-1) steps are its serial work (all chunks twice but the two after
  its own); Simple posts whole slices, so its largest chunk sets each of the 2(n-1) steps.
* **Without the tree's size correction.** The model scales a tree's bandwidth by ``tuning.cc``'s
  ``treeCorrectionFactor`` where ``ncclTopoGetAlgoTime`` does; here it is left out of the execution
  (NCCL's choice unchanged), with each changed curve's 1-128 MiB median and its error at 2 and 16 MiB.
* **A generation's own constants at the common values.** The model gives Hopper (``nccl.arch_index``
  row 2) its own LL128 step and LL round trip, and Blackwell (row 3) its own LL round trip, fitted on
  their curves (0 us each); here each in turn takes the other generations' value, with that
  generation's curves' 1-128 MiB median and their error at each size of 512 KiB and more that NCCL
  runs with LL.
* Kept from before: every LL round trip counted (``prims_ll.h``), other step overheads, a
  per-channel ceiling on ring LL128.

Then the ``normal`` curves split by NCCL version (2.8 against the rest). Nothing of it is the
model.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ddpsim.network import curve_score, host_costs, nccl, nccl_exec  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "nccl-curves"
MIB = 1 << 20
#: the grid the serial variants refit on: their overheads are paid more often, so smaller values
#: (Hopper's and Blackwell's LL round trips, which no variant touches, stay as the model has them)
SERIAL_GRID = {"ll_round_trip": (1.0, 2.0), "ll128": (0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 12.0),
               "simple": (0.0, 1.0, 2.0, 4.0, 6.0, 8.0), "hopper_ll128": (0.0, 2.0, 4.0, 12.0)}


def scored_cases(meta: list[dict]) -> list[tuple[dict, Any, Any]]:
    """(metadata, description, comm model) of every scored curve of a modelled transport."""
    return [(m, c, curve_score.model_for(c)) for m, c in curve_score.scored(meta) if not c.transport]


def mid_errors(cases: list, points: dict) -> dict[str, list[tuple[str, dict]]]:
    """Per category, each curve's band statistics with the model as it is now."""
    out: dict[str, list[tuple[str, dict]]] = {"normal": [], "forced_algo": []}
    for m, case, model in cases:
        out[m["category"]].append((m["curve_id"], curve_bands(m, case, model, points)))
    return out


def curve_bands(m: dict, case: Any, model: Any, points: dict) -> dict:
    """One curve's band statistics (``curve_score.band_stats``) with the model as it is now."""
    return curve_score.band_stats(curve_score.residuals(case, points[m["curve_id"]], model))


def checks() -> str:
    """The signed error of the published large-message checks (V100, A100, 2 x A100, H100 ring)."""
    errs = curve_score.check_errors()
    ok = "hold" if all(abs(e) <= curve_score.CHECK_TOLERANCE for e in errs) else "FAIL"
    return f"checks {' '.join(f'{100 * e:+.1f}' for e in errs)} % {ok}"


def line(label: str, cases: list, points: dict) -> str:
    errs = mid_errors(cases, points)
    norm = [b["1-128MiB"][0] for _, b in errs["normal"] if b["1-128MiB"]]
    both = norm + [b["1-128MiB"][0] for _, b in errs["forced_algo"] if b["1-128MiB"]]
    low = [b["<1MiB"][0] for _, b in errs["normal"] + errs["forced_algo"] if b["<1MiB"]]
    within = curve_score.WITHIN
    return (f"{label:46s} normal {100 * statistics.median(norm):5.1f} % ({sum(e <= within for e in norm)}/{len(norm)})"
            f"  + forced {100 * statistics.median(both):5.1f} % ({sum(e <= within for e in both)}/{len(both)})"
            f"  < 1 MiB {100 * statistics.median(low):5.1f} %  {checks()}")


def loso(meta: list, points: dict) -> list[float]:
    """Each ``normal`` curve's 1-128 MiB median |error| with the constants fitted without its system."""
    saved, held = curve_score.constants(), []
    fitted = [(m, k) for m, k in curve_score.scored(meta) if m["category"] == "normal" and not k.transport]
    try:
        for key in sorted({curve_score.system_key(m) for m, _ in fitted}):
            curve_score.set_constants(curve_score.fit_overheads(curve_score.fit_points(meta, points, exclude=key)))
            for m, k in fitted:
                b = curve_score.band_stats(curve_score.residuals(k, points[m["curve_id"]]))["1-128MiB"]
                if b and curve_score.system_key(m) == key:
                    held.append(b[0])
    finally:
        curve_score.set_constants(saved)
    return held


def refit_line(label: str, meta: list, points: dict, cases: list, grid: dict) -> str:
    """``label``'s line with the constants refitted on ``grid``, and its leave-one-system-out median."""
    saved, saved_grid = curve_score.constants(), curve_score.GRID
    curve_score.GRID = grid
    try:
        fit = curve_score.fit_overheads(curve_score.fit_points(meta, points))
        held = loso(meta, points)
        curve_score.set_constants(fit)
        out = line(label, cases, points)
    finally:
        curve_score.GRID = saved_grid
        curve_score.set_constants(saved)
    fitted = "/".join(f"{v:g}" for v in fit.values())
    return (f"{out}\n{'':46s} fitted LL round trip / LL128 / Simple / Hopper LL128 {fitted} us;"
            f" leave one system out {100 * statistics.median(held):5.1f} % "
            f"({sum(e <= curve_score.WITHIN for e in held)}/{len(held)})")


@contextlib.contextmanager
def patched(name: str, value: Any, module: Any = nccl_exec) -> Iterator[None]:
    """``module.<name>`` (``nccl_exec`` unless said) set to ``value`` for the block."""
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


@contextlib.contextmanager
def overheads(**values: float) -> Iterator[None]:
    """The step overheads of ``values`` (protocol -> µs) for the block."""
    with patched("STEP_OVERHEAD_US", {**nccl_exec.STEP_OVERHEAD_US, **values}):
        yield


@contextlib.contextmanager
def constants(**values: float) -> Iterator[None]:
    """The fitted constants named in ``values`` (:func:`curve_score.constants`' keys) set for the block."""
    saved = curve_score.constants()
    curve_score.set_constants(values)
    try:
        yield
    finally:
        curve_score.set_constants(saved)


def syncs_paid(applies: Callable[[str, str], bool], paid: Callable[[str, Any], int]) -> Callable:
    """``time_us`` with ``paid(algo, execution)`` synchronisations charged in full, instead of
    the share of a full slice each lacks, where ``applies(algo, proto)``."""
    base = nccl_exec.time_us

    def time_us(sys_: Any, algo: str, proto: str, size: int) -> float:
        t = base(sys_, algo, proto, size)
        if not applies(algo, proto) or not math.isfinite(t):
            return t
        ex = nccl_exec.plan(sys_, algo, proto, size)
        return t - nccl_exec.sync_us(sys_, algo, proto, ex) + paid(algo, ex) * nccl_exec.step_overhead_us(sys_, proto)
    return time_us


def serial_syncs(algos: tuple[str, ...]) -> Callable:
    """``time_us`` with every slice's synchronisation paid in full on ``algos`` (a ring channel's
    slices one after the other; a tree's or NVLS's chunks after crossing the levels)."""
    return syncs_paid(lambda algo, _: algo in algos,
                      lambda algo, ex: nccl_exec.serial_steps(algo, ex))


def first_pass_syncs(protocols: tuple[str, ...]) -> Callable:
    """``time_us`` with the first pass's synchronisations paid in full (not hidden) for ``protocols``."""
    return syncs_paid(lambda _, proto: proto in protocols, lambda _, ex: ex.syncs)


def ampere_read(read_us: float, base: Callable) -> Callable:
    """``base`` plus ``read_us`` per Simple slice of a ring or tree over NVLink between compute
    capability 8.0 GPUs (P2P read: ``paths.cc``, ``p2p.cc``)."""
    def time_us(sys_: Any, algo: str, proto: str, size: int) -> float:
        t = base(sys_, algo, proto, size)
        if (proto != "simple" or algo not in ("ring", "tree") or sys_.compute_capability != 80
                or not math.isfinite(t) or not {"ring": sys_.ring, "tree": sys_.tree}[algo].nvlink_intra):
            return t
        ex = nccl_exec.plan(sys_, algo, proto, size)
        return t + read_us * nccl_exec.serial_steps(algo, ex)
    return time_us


def without_tree_correction() -> Callable:
    """``time_us`` with the transfer at the bandwidth before ``treeCorrectionFactor``."""
    base = nccl_exec.time_us

    def time_us(sys_: Any, algo: str, proto: str, size: int) -> float:
        t = base(sys_, algo, proto, size)
        factor = nccl.tree_correction(sys_, algo, proto, size)
        if factor == 1.0 or not math.isfinite(t):
            return t
        bw = nccl_exec.bandwidth_gbps(sys_, algo, proto, nccl_exec.plan(sys_, algo, proto, size))
        return t - size / (1000.0 * bw) * (1.0 / factor - 1.0)
    return time_us


def tree_correction_curves(cases: list, points: dict) -> None:
    """The curves the tree's size correction moves: 1-128 MiB median |error|, and the error at 2 and
    16 MiB, without it -> with it."""
    def stats() -> dict:
        out = {}
        for m, case, model in cases:
            res = curve_score.residuals(case, points[m["curve_id"]], model)
            at = {s: tm / t - 1 for s, t, tm, _ in res if s in (2 * MIB, 16 * MIB)}
            out[m["curve_id"]] = (curve_score.band_stats(res)["1-128MiB"], at)
        return out
    with_it = stats()
    with patched("time_us", without_tree_correction()):
        without = stats()
    for cid, (band, at) in with_it.items():
        if band != without[cid][0]:
            sizes = "; ".join(f"{s // MIB} MiB {100 * without[cid][1][s]:+.0f} -> {100 * e:+.0f} %" for s, e in at.items())
            print(f"  {cid}: {100 * without[cid][0][0]:.1f} -> {100 * band[0]:.1f} %; {sizes}")


def generation_errors(cases: list, points: dict, row: int) -> dict:
    """Per curve of generation ``row`` (``nccl.arch_index``): its 1-128 MiB median |error| and the
    signed error at each LL size from 512 KiB."""
    out: dict = {}
    for m, case, model in cases:
        if nccl.arch_index(model.system.compute_capability) != row:
            continue
        res = curve_score.residuals(case, points[m["curve_id"]], model)
        band = curve_score.band_stats(res)["1-128MiB"]
        ll = {s: tm / t - 1 for s, t, tm, ap in res if ap.endswith("/ll") and s >= MIB // 2}
        out[m["curve_id"]] = (band[0] if band else math.nan, ll)
    return out


def generation_constants(cases: list, points: dict) -> None:
    """Each generation's own constant (``curve_score.GENERATION_KEYS``) at the common value: that
    generation's curves' 1-128 MiB median and LL sizes, the common value -> its own."""
    common = curve_score.constants()
    own = {row: generation_errors(cases, points, row) for row, _ in curve_score.GENERATION_KEYS.values()}
    for key, (row, what) in curve_score.GENERATION_KEYS.items():
        with constants(**{key: common[what]}):
            print(line(f"{key} at the common {common[what]:g} us", cases, points))
            other = generation_errors(cases, points, row)
        for cid, (band, ll) in own[row].items():
            sizes = "; ".join(f"{s // 1024} KiB {100 * other[cid][1][s]:+.0f} -> {100 * e:+.0f} %" for s, e in ll.items())
            print(f"  {cid}: 1-128 MiB {100 * other[cid][0]:.1f} -> {100 * band:.1f} %" + (f"; LL {sizes}" if sizes else ""))


def every_ll_round(sys_: Any, algo: str, proto: str, size: int, ex: Any) -> float:
    """``ll_rounds_us`` counting every round trip of a step, the first included, each at the
    generation's round trip (``nccl_exec.ll_round_trip_us``)."""
    if proto != "ll":
        return 0.0
    per_round = nccl_exec.MAX_THREADS["ll"] * ex.thread_fraction * 8
    return (nccl_exec.wire_bytes_per_channel(sys_, algo, size, ex.num_channels) / per_round
            * nccl_exec.ll_round_trip_us(sys_))


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


def torch_floor(cases: list, points: dict) -> str:
    """Each scored torch.distributed curve's time less the model's kernel at its smallest size, against
    ``TORCH_CALL_US`` and ``ENQUEUE_S``."""
    parts = []
    for m, case, model in cases:
        if case.torch_call:
            size, t = points[m["curve_id"]][0]
            parts.append(f"{m['curve_id']} {t - model.estimate_allreduce(size).time_s * 1e6:.1f} us")
    return (f"  torch curves, run less model kernel at the smallest size: {', '.join(parts)}; the score's "
            f"host path {curve_score.TORCH_CALL_US:g} us; host_costs.ENQUEUE_S {host_costs.ENQUEUE_S * 1e6:g} us "
            f"would leave a negative time")


def _old_ring_channel_steps(rem: int, nc: int, n: int, chunk: int, grain: int, simple: bool) -> float:
    """Chunk-steps of the slowest channel in a v2.8-v2.18 ring loop of ``rem`` bytes, in bytes
    (``runRing``'s ``realChunkSize`` and offsets; module docstring)."""
    if simple:
        real = min(chunk, -(-rem // (nc * n)))
        real = -(-real // grain) * grain
        return 2 * (n - 1) * min(real, rem)  # store-and-forward slices: the largest chunk sets every step
    real = min(chunk, -(-rem // (nc * n * grain)) * grain)
    worst = 0.0
    for bid in range(nc):
        w = [min(real, max(0, rem - (c * nc + bid) * real)) for c in range(n)]
        skipped = min(w[(r + 1) % n] + w[(r + 2) % n] for r in range(n)) if n > 2 else 0
        worst = max(worst, 2 * sum(w) - skipped if n > 2 else sum(w))
    return worst


def last_loop(whole: bool) -> Callable:
    """``time_us`` with a ring's last loop as ``whole`` says: True, the whole loop paid (idle
    channels); False, v2.8-v2.18's ``realChunkSize`` rounding (module docstring)."""
    base = nccl_exec.time_us

    def time_us(sys_: Any, algo: str, proto: str, size: int) -> float:
        t = base(sys_, algo, proto, size)
        if algo != "ring" or not math.isfinite(t) or (whole and proto != "simple"):
            return t
        n, ex = sys_.num_ranks, nccl_exec.plan(sys_, algo, proto, size)
        nc = ex.num_channels
        chunk = nccl_exec.STEP_DATA_BYTES[proto] * (nccl_exec.ALLREDUCE_CHUNKSTEPS if proto == "simple" else 1)
        loop = nc * n * chunk
        loops = -(-size // loop)
        if whole:
            moved = loops * loop
        else:
            threads = nccl_exec.MAX_THREADS[proto] * ex.thread_fraction
            grain = int(threads * {"simple": 8, "ll": 8, "ll128": 30}[proto])
            rem = size - (loops - 1) * loop
            steps = _old_ring_channel_steps(rem, nc, n, chunk, grain, proto == "simple")
            moved = (loops - 1) * loop + nc * steps * n / (2 * (n - 1))
        return t + max(0.0, moved - size) / (1000.0 * nccl_exec.bandwidth_gbps(sys_, algo, proto, ex))
    return time_us


def last_loop_sizes(cases: list, points: dict) -> None:
    """Per single-node A100 curve at 4-256 MiB: the run, the model, and the two last-loop variants."""
    for m, case, model in cases:
        if case.preset != "dgx-a100" or case.nodes != 1:
            continue
        cols = []
        for s, t in points[m["curve_id"]]:
            if 4 * MIB <= s <= 256 * MIB:
                row = [t, model.estimate_allreduce(s).time_s * 1e6]
                for whole in (True, False):
                    with patched("time_us", last_loop(whole)):
                        row.append(model.estimate_allreduce(s).time_s * 1e6)
                cols.append(f"{s // MIB} MiB {'/'.join(f'{v:.0f}' for v in row)}")
        print(f"  {m['curve_id']}: run/model/whole loop/v2.18 rounding us: {'; '.join(cols)}")


def execution_variants(meta: list, points: dict, cases: list) -> None:
    """The synchronisation and P2P-read variants (module docstring)."""
    print(refit_line("as it is, refitted on the wider grid", meta, points, cases, SERIAL_GRID))
    for algos in (("ring",), ("ring", "tree"), ("ring", "tree", "nvls", "nvls_tree")):
        with patched("time_us", serial_syncs(algos)):
            print(refit_line(f"every slice's sync in full: {'+'.join(algos)}", meta, points, cases, SERIAL_GRID))
    for protos in (("ll128", "simple"), ("ll128",)):
        with patched("time_us", first_pass_syncs(protos)):
            print(refit_line(f"first pass's syncs only, in full: {'+'.join(protos)}", meta, points, cases,
                             SERIAL_GRID))
    with patched("time_us", first_pass_syncs(("ll128", "simple"))):
        grid = {**SERIAL_GRID, "ll_round_trip": (1.0,)}
        print(refit_line("  the same, LL's round trip kept at 1 us", meta, points, cases, grid))
    for simple in (0.5, 1.0, 2.0):
        with patched("time_us", first_pass_syncs(("ll128", "simple"))), constants(ll_round_trip=2.0, ll128=4.0, simple=simple):
            print(line(f"  the same, LL 2 / LL128 4 / Simple {simple:g} us", cases, points))
    for read in (2.0, 3.0, 4.0):
        with patched("time_us", ampere_read(read, nccl_exec.time_us)):
            print(line(f"P2P read on Ampere, {read:g} us per Simple slice", cases, points))
        with patched("time_us", ampere_read(read, first_pass_syncs(("ll128",)))), constants(ll_round_trip=2.0, ll128=4.0, simple=0.5):
            print(line("  with LL128's first pass not hidden (4 us)", cases, points))
    for host_us in (0.0, 20.0, 30.0):
        with patched("TORCH_CALL_US", host_us, module=curve_score):
            print(line(f"torch curves' host path {host_us:g} us", cases, points))
    print(torch_floor(cases, points))
    for whole, label in ((True, "last ring loop whole (idle channels)"),
                         (False, "last ring loop as v2.8-v2.18 round it")):
        with patched("time_us", last_loop(whole)):
            print(line(label, cases, points))
    last_loop_sizes(cases, points)


def earlier_variants(cases: list, points: dict) -> None:
    """The tree's size correction left out, LL round trips, other step overheads, a ring LL128
    ceiling (module docstring)."""
    with patched("time_us", without_tree_correction()):
        print(line("without the tree's size correction", cases, points))
    tree_correction_curves(cases, points)
    generation_constants(cases, points)
    for rtt in (1.0, 1.5, 2.0):
        with patched("ll_rounds_us", every_ll_round), patched("LL_ROUND_TRIP_US", rtt):
            print(line(f"every LL round trip, {rtt:g} us", cases, points))
    for simple in (8.0, 12.0):
        for ll128 in (12.0, 16.0):
            with overheads(simple=simple, ll128=ll128):
                print(line(f"step overheads Simple {simple:g} / LL128 {ll128:g} us", cases, points))
    for o in (0.0, 4.0, 12.0):
        for cap in (4.0, 6.0, 8.0, 11.0):
            with overheads(ll128=o), patched("bandwidth_gbps", ll128_ceiling(cap)):
                print(line(f"ring LL128 <= {cap:g} GB/s per channel, {o:g} us", cases, points))


def main() -> None:
    meta, points = curve_score.load(DATA)
    cases = scored_cases(meta)
    print(line("as it is", cases, points))
    execution_variants(meta, points, cases)
    earlier_variants(cases, points)
    print("\nnormal curves by NCCL version: median 1-128 MiB |error| (curves within 15 %)")
    errs = dict(mid_errors(cases, points)["normal"])
    version = {m["curve_id"]: m["nccl_version"] for m, _, _ in cases}
    for label, old in (("NCCL 2.8", True), ("other or not printed", False)):
        e = [b["1-128MiB"][0] for cid, b in errs.items() if b["1-128MiB"] and version[cid].startswith("2.8.") == old]
        print(f"  {label:22s} {len(e):2d} curves  {100 * statistics.median(e):5.1f} % "
              f"({sum(x <= curve_score.WITHIN for x in e)})")


if __name__ == "__main__":
    main()
