"""``executor collectives``: the calibration ddpsim reads.

* All-reduce and broadcast sweep, nccl-tests style: for each size, warm-up operations, then
  ``repeats`` samples (fewer for sizes whose one run outlasts ``--loop-ms``: about the same
  seconds of samples per size), interleaved one size after another (one sample of every size,
  then the next round), each started right after a barrier; a sample is a run of ``m``
  back-to-back operations (``m`` chosen so that the run lasts about ``--loop-ms``, at most 50)
  divided by ``m``, the slowest rank's. A single operation timed after a barrier also times
  the ranks' skew leaving the barrier (on a busy host a peer's thread is woken milliseconds
  late, and small samples turn bimodal); a loop
  amortises it, as nccl-tests do. ``--loop-ms 0``: one operation per sample. Per size:
  ``time_s`` = the MEAN of the samples (the expected cost; small all-reduces on a loaded CPU host
  are bimodal and their median jumps between modes from size to size), ``median_s``, p10, p90.
  CUDA events on GPUs.
  ``--gap-ms G`` (G > 0) samples instead ONE operation launched after G ms of compute on every
  rank, without a barrier, timed from the last rank's launch to the last rank's end: the way
  DDP issues the all-reduce it waits for at the end of backward. On a CPU host whose idle
  cores sleep, a mid-size all-reduce costs more that way than in the loop, as a DDP bucket
  does; small ones cost the same. It is not the default: as the engine's curve it also charges the all-reduces
  that overlap backward, whose cost the interference model already holds (with it, bert-base
  at cap 1 is predicted 10 % slow). Across hosts the clocks are not compared: the last
  launcher's own launch-to-end.
  ``--after-compute-ms G`` (default 2 on CPUs) adds such a curve for the all-reduces up to
  ``--after-compute-max-bytes``, beside the loop curves (``allreduce_after_compute``): both
  measured in one run, on one machine state. ddpsim's engine charges the difference only to
  an all-reduce launched onto an idle stream and waited for (:mod:`ddpsim.engine.simulate`).
* ``allreduce_queued`` (``--queued-ops N``, default 8 on CPUs; 0 = skip; GPUs: none): per size
  up to ``--queued-max-bytes``, N all-reduces issued at once (``async_op=True``) and then all
  waited for -- as DDP's reducer queues the buckets of a backward -- per op = the batch / N,
  the slowest rank's, ``--queued-repeats`` samples interleaved across sizes. ProcessGroupGloo
  works its queue with ``comm_threads`` worker threads (``_Options._threads``, 2 by default,
  recorded beside the curve), so that many all-reduces progress at once and a queued one
  costs a fraction of a blocking one. ddpsim
  runs a calibrated gloo group's collectives on that many lanes, paced by the two curves
  (:meth:`ddpsim.calibration.loader.CalibratedCommModel.concurrent_rate`).
* Interference: a compute unit (matmul + elementwise, the mix of a backward pass) timed
  alone, an all-reduce of ``--interference-bytes`` timed alone, then both at once (a thread
  runs back-to-back all-reduces while the main thread runs compute units, as DDP's reducer
  overlaps gloo/NCCL work with backward). ``compute_slowdown`` = median unit time while
  all-reduces run / alone; ``comm_slowdown`` likewise for the all-reduce.
* ``ddp_iteration_overhead_s``: DDP's fixed cost per iteration on the measured host. A tiny MLP
  (two 64x64 linears, ~33 KiB of gradients, one bucket) trains with and without
  ``DistributedDataParallel``, interleaved in rounds; overhead = mean DDP step (mean over ranks)
  - mean bare step - the all-reduce curve just measured at the gradients' size - the copy-in
  and copy-out at the copy bandwidth, clamped at 0. It holds what the trace and the curve do not
  see: DDP's Python pre/post-forward, the reducer's bookkeeping, waking gloo's threads for a
  collective issued from inside backward. The engine adds it once per synchronised step.
* ``interference_probe`` (``--probe-rounds``, default 4): the built-in ``mlp`` (width 2048, depth
  6, batch 128), none of the validated models, captured as a trace on all ranks in lockstep and
  trained under real DDP at ``bucket_cap_mb=25``, alternating (:mod:`executor.probe`). ddpsim
  fits its engine's ``compute_slowdown`` so that its prediction of this probe equals the
  measured step (:mod:`ddpsim.calibration.interference_fit`): on a CPU host the microbenchmark above sees
  less of what overlapped all-reduces cost a real backward than DDP pays. The DDP steps' phases
  are kept too (``ddp_phase_samples_s``): forward under DDP overlaps no all-reduce, so its
  excess over the trace's forward is a slowdown that is not the overlap's, and the fit leaves
  it out (``ddpsim.calibration.loader.probe_forward_factor``). The fit moves with the moment of the
  host it is measured at (the fit to one round alone differs from the next round's), so the
  probe runs four rounds; ddpsim also keeps each round's own fit as
  the interval's alternatives (``ddpsim.calibration.loader.Calibration.probe_round_fits``). The host's
  other load during the DDP steps is recorded (``host_other_pct``); above 10 % ddpsim calls the
  calibration untrustworthy.
* ``broadcast_per_tensor_s``: what DDP's forward buffer broadcast costs per buffer beyond the
  broadcast itself. ``_sync_buffers`` hands every module buffer to ``dist._broadcast_coalesced``,
  which flattens them into one tensor per 250 MiB bucket and dtype, broadcasts it and copies
  each buffer back out: per buffer a few dispatcher rounds on the rank's own core, which a model
  with many small buffers (BatchNorm's running_mean, running_var, num_batches_tracked) pays in
  every forward. Timed as DDP calls it, interleaved: ``--buffer-tensors`` float32 tensors of 64
  elements against one tensor of the same bytes; per tensor = (mean many - mean one) /
  (count - 1), means over ranks, floored at 0 (``buffer_broadcast``: the figures behind it).
* ``copy_bandwidth_bytes_per_s``: DDP's copy-in, ``torch.mul(grad, 1/world, out=bucket_view)``,
  timed; counted as read + write (2 x bytes per second), the way the engine charges a copy.

Output (rank 0; written atomically)::

    {"format": "ddpsim-calibration", "version": 1, "backend": "gloo", "world_size": 2, "device": "cpu",
     "environment": {"torch_version": ..., "hostname_hash": ...},
     "collectives": {"allreduce": [{"size_bytes", "time_s", "p10_s", "p90_s", "num_samples"}, ...],
                     "broadcast": [...]},
     "interference": {"compute_slowdown": 1.35, "comm_slowdown": 1.2, "details": {...}},
     "copy_bandwidth_bytes_per_s": 5.1e9, "ddp_iteration_overhead_s": 2e-3, "ddp_overhead": {...},
     "allreduce_queued": [{"size_bytes", "time_s", ..., "ops_per_sample"}, ...], "comm_threads": 2}

A measurement JSON (``--progress``) is rewritten after every round of the sweep (with rank 0's
samples so far per size), after every op and after every later stage (``interference``,
``copy``, ``ddp_overhead``), so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ddpsim.errors import InputError
from ddpsim.formats import CALIBRATION_FORMAT, CALIBRATION_VERSION, quantile
from ddpsim.units import parse_size_bytes

from executor.runtime import (ExecutorFailure, Runtime, Stopwatch, max_across_ranks, mean_across_ranks, measurement,
                              stats, write_json)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="calibration JSON to write (rank 0)")
    p.add_argument("--progress", default=None, help="measurement JSON rewritten after each size (default: OUT with .progress.json)")
    p.add_argument("--min-bytes", default="4KiB", help="smallest size (default 4KiB)")
    p.add_argument("--max-bytes", default="64MiB", help="largest size (default 64MiB)")
    p.add_argument("--factor", type=int, default=4, help="size multiplier between points (default 4)")
    p.add_argument("--warmup", type=int, default=3, help="untimed operations per size (default 3)")
    p.add_argument("--repeats", type=int, default=100,
                   help="timed samples per size (default 100; sizes whose run outlasts --loop-ms get about "
                        "the same seconds of samples, at least 5)")
    p.add_argument("--loop-ms", type=float, default=20.0,
                   help="a sample is a back-to-back run of about this many ms, averaged (default 20; 0 = one op)")
    p.add_argument("--gap-ms", type=float, default=0.0,
                   help="a sample is ONE op launched after this many ms of compute on every rank (as DDP launches "
                        "the all-reduce it waits for at the end of backward), timed from the last rank's launch "
                        "to the last rank's end (CPU; default 0 = the back-to-back runs of --loop-ms)")
    p.add_argument("--after-compute-ms", type=float, default=None,
                   help="besides the curves, time all-reduces up to --after-compute-max-bytes the way of --gap-ms, "
                        "after this many ms of compute, into the calibration's allreduce_after_compute ("
                        "what the engine charges an all-reduce launched after compute and waited for; default 2 on CPUs, 0 = skip; GPUs: 0)")
    p.add_argument("--after-compute-max-bytes", default="16MiB",
                   help="largest size of the --after-compute-ms curve (default 16MiB)")
    p.add_argument("--queued-ops", type=int, default=None,
                   help="all-reduces queued at once per sample of the queued curve (allreduce_queued: what gloo's "
                        "worker threads make of a backward's queued buckets; default 8 on CPUs, 0 = skip; GPUs: 0)")
    p.add_argument("--queued-max-bytes", default="64MiB", help="largest size of the queued curve (default 64MiB)")
    p.add_argument("--queued-repeats", type=int, default=10, help="samples per size of the queued curve (default 10)")
    p.add_argument("--ops", default="allreduce,broadcast", help="comma list of allreduce, broadcast")
    p.add_argument("--interference-bytes", default="8MiB", help="all-reduce size for the interference test (default 8MiB)")
    p.add_argument("--interference-repeats", type=int, default=12, help="all-reduces timed in each interference phase")
    p.add_argument("--interference-compute", choices=("gemm", "mixed"), default="gemm",
                   help="compute unit of the interference test: gemm (a 256x256 matmul, like the GEMM/conv "
                        "kernels that dominate a backward pass; default) or mixed (128x128 matmul + elementwise)")
    p.add_argument("--skip-interference", action="store_true", help="write slowdowns 1.0 (not measured; no probe)")
    p.add_argument("--probe-rounds", type=int, default=4,
                   help="rounds of the interference probe (the built-in mlp, width 2048, depth 6, batch 128, traced and "
                        "run under real DDP at bucket_cap_mb=25; ddpsim fits its compute slowdown to it); 0 = no probe "
                        "(default 4: the fit moves from one moment of the host to the next)")
    p.add_argument("--buffer-tensors", type=int, default=96,
                   help="small tensors of the buffer-broadcast test (default 96; 0 = skip it)")
    p.add_argument("--ddp-overhead-rounds", type=int, default=30,
                   help="rounds of the DDP-overhead test (5 bare + 5 DDP steps each; default 30; 0 = skip it)")
    p.add_argument("--dtype", default="float32", help="element type (default float32)")


def sizes_from_args(args: argparse.Namespace, elem: int) -> list[int]:
    lo = parse_size_bytes(args.min_bytes, "--min-bytes")
    hi = parse_size_bytes(args.max_bytes, "--max-bytes")
    if hi < lo:
        raise InputError(f"--max-bytes: {args.max_bytes!r} is below --min-bytes {args.min_bytes!r}; expected max >= min")
    if args.factor < 2:
        raise InputError(f"--factor: {args.factor!r} is not accepted; expected an integer >= 2")
    out, s = [], lo
    while s <= hi:
        out.append(max(elem, s // elem * elem))
        s *= args.factor
    return out


def _dtype(name: str):
    import torch

    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise InputError(f"--dtype: {name!r} is not accepted; expected a torch dtype name such as float32")
    return dt


class _Collective:
    """One (op, size) of the sweep: its tensor, its ops per sample and its samples so far."""

    def __init__(self, rt: Runtime, op: str, size_bytes: int, dtype) -> None:
        import torch

        self.rt, self.op = rt, op
        elem = torch.empty((), dtype=dtype).element_size()
        self.t = torch.ones(max(1, size_bytes // elem), dtype=dtype, device=rt.device)
        self.size_bytes = int(self.t.numel() * elem)
        self.m = 1
        self.repeats = 0
        self.samples: list[float] = []
        self.gap_s = 0.0
        self.gap_unit: Any = None
        self.marks: list[tuple[float, float]] = []  # gap mode: (launch, end) per sample, this rank's clock

    def one(self) -> None:
        import torch.distributed as dist

        if self.op == "allreduce":
            dist.all_reduce(self.t)
        else:
            dist.broadcast(self.t, src=0)

    def prepare(self, warmup: int, repeats: int, loop_s: float, gap_s: float = 0.0) -> None:
        """Warm up; choose the ops per sample (a run of about ``loop_s``) and the samples: sizes
        whose run is longer than ``loop_s`` get fewer (about ``repeats * loop_s`` seconds of
        samples, at least 5 or ``repeats`` if smaller); agreed on through rank 0's max over ranks.
        ``gap_s > 0`` (CPU): one op per sample, after ``gap_s`` of compute (see :meth:`sample`)."""
        rt, sw = self.rt, Stopwatch(self.rt)
        for _ in range(warmup):
            self.one()
            rt.watchdog.beat()
        rt.sync()
        firsts = []
        for _ in range(5 if loop_s > 0 else 1):  # one op's time: the median of 5 (small ops can be bimodal)
            rt.barrier()
            tok = sw.start()
            self.one()
            firsts.append(sw.stop(tok))
        first_s = statistics.median(max_across_ranks(rt, firsts))
        if loop_s > 0:
            self.m = max(1, min(50, int(loop_s / max(first_s, 1e-6))))
            run_s = max(self.m * first_s, 1e-9)
            self.repeats = max(min(5, repeats), min(repeats, math.ceil(repeats * loop_s / run_s)))
        else:
            self.m, self.repeats = 1, repeats
        if gap_s > 0:
            self.m, self.gap_s = 1, gap_s
            self.gap_unit = ComputeUnit(rt, n=256, elems=0)

    def sample(self) -> None:
        rt, sw = self.rt, Stopwatch(self.rt)
        if self.gap_s > 0:
            # as DDP issues a bucket's all-reduce: after compute, no barrier; the ranks launch
            # when their compute ends (their skew is the compute's, as in a backward pass)
            t = time.perf_counter()
            while time.perf_counter() - t < self.gap_s:
                self.gap_unit()
            t0 = time.perf_counter()
            self.one()
            self.marks.append((t0, time.perf_counter()))
            rt.watchdog.beat(f"{self.op} of {self.size_bytes} B")
            return
        rt.barrier()
        tok = sw.start()
        for _ in range(self.m):
            self.one()
        self.samples.append(sw.stop(tok) / self.m)
        rt.watchdog.beat(f"{self.op} of {self.size_bytes} B")

    def result(self) -> dict[str, Any]:
        if self.gap_s > 0:
            if one_host(self.rt):
                # from the last rank's launch to the last rank's end (one host: one monotonic clock)
                launches = max_across_ranks(self.rt, [a for a, _ in self.marks])
                ends = max_across_ranks(self.rt, [b for _, b in self.marks])
                samples = [e - a for a, e in zip(launches, ends)]
            else:
                # clocks of different hosts are not comparable: the last launcher's own view
                samples = [-v for v in max_across_ranks(self.rt, [a - b for a, b in self.marks])]
            return {"size_bytes": self.size_bytes, **stats(samples), "ops_per_sample": 1, "gap_ms": self.gap_s * 1e3}
        samples = max_across_ranks(self.rt, self.samples)
        return {"size_bytes": self.size_bytes, **stats(samples), "ops_per_sample": self.m}


def sweep_queued(rt: Runtime, sizes: Sequence[int], dtype, ops: int, repeats: int, warmup: int = 1) -> list[dict[str, Any]]:
    """Per-op times (slowest rank) of ``ops`` all-reduces issued at once and then waited for,
    at every size; samples interleaved across sizes (see :func:`sweep_collectives`)."""
    import torch
    import torch.distributed as dist

    sw = Stopwatch(rt)
    elem = torch.empty((), dtype=dtype).element_size()
    bufs = {s: [torch.ones(max(1, s // elem), dtype=dtype, device=rt.device) for _ in range(ops)] for s in sizes}

    def batch(size: int) -> None:
        for w in [dist.all_reduce(t, async_op=True) for t in bufs[size]]:
            w.wait()

    for s in sizes:
        for _ in range(warmup):
            batch(s)
        rt.watchdog.beat(f"queued all-reduces of {s} B")
    samples: dict[int, list[float]] = {s: [] for s in sizes}
    for _ in range(repeats):
        for s in sizes:
            rt.barrier()
            tok = sw.start()
            batch(s)
            samples[s].append(sw.stop(tok) / ops)
            rt.watchdog.beat(f"queued all-reduces of {s} B")
    return [{"size_bytes": int(bufs[s][0].numel() * elem), **stats(max_across_ranks(rt, samples[s])), "ops_per_sample": ops}
            for s in sizes]


def gloo_threads() -> int | None:
    """ProcessGroupGloo's worker threads per process group (``_Options._threads``), or None."""
    import torch.distributed as dist

    pg = getattr(dist, "ProcessGroupGloo", None)
    n = getattr(pg._Options(), "_threads", None) if pg is not None and hasattr(pg, "_Options") else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else None


def one_host(rt: Runtime) -> bool:
    """Every rank on this host (torchrun's LOCAL_WORLD_SIZE equals the world size)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "0")) == rt.world_size


def sweep_collectives(rt: Runtime, op: str, sizes: Sequence[int], dtype, warmup: int, repeats: int,
                      loop_s: float = 0.0,
                      on_round: Callable[[int, list[_Collective]], None] | None = None,
                      gap_s: float = 0.0) -> list[dict[str, Any]]:
    """Per-op times (slowest rank) of ``op`` at every size; a sample averages a back-to-back run
    of about ``loop_s`` seconds (one op when 0), or (``gap_s > 0``) is one op launched after
    ``gap_s`` of compute, timed from the last rank's launch to the last rank's end.

    The samples are INTERLEAVED: one sample of every size, then the next round. On a host of 2
    vCPUs, 2 ranks' small gloo all-reduces switch between a fast regime and a ~4x slower one
    (which of the ranks' gloo threads share a vCPU) that lasts hundreds of ms; consecutive
    samples of one size would see one regime, and neighbouring sizes different mixes (a jagged curve).
    """
    colls = [_Collective(rt, op, s, dtype) for s in sizes]
    for c in colls:
        c.prepare(warmup, repeats, loop_s, gap_s)
    for rnd in range(max(c.repeats for c in colls)):
        for c in colls:
            if rnd < c.repeats:
                c.sample()
        if on_round is not None:
            on_round(rnd, colls)
    return [c.result() for c in colls]



class ComputeUnit:
    """A short compute kernel mix: a matmul and a few elementwise passes (~backward's mix)."""

    def __init__(self, rt: Runtime, n: int = 192, elems: int = 1 << 18) -> None:
        """``n x n`` matmul, then (``elems > 0``) a multiply and an add over ``elems`` floats."""
        import torch

        g = torch.Generator(device="cpu").manual_seed(0)
        self.a = torch.randn(n, n, generator=g).to(rt.device)
        self.b = torch.randn(n, n, generator=g).to(rt.device)
        self.c = torch.empty(n, n, device=rt.device)
        self.x = torch.randn(elems, generator=g).to(rt.device)
        self.y = torch.empty_like(self.x)

    def __call__(self) -> None:
        import torch

        torch.mm(self.a, self.b, out=self.c)
        if self.x.numel():
            torch.mul(self.x, 0.5, out=self.y)
            self.y.add_(self.x)


def measure_interference(rt: Runtime, size_bytes: int, repeats: int, dtype, compute: str = "gemm") -> dict[str, Any]:
    """compute alone / comm alone / both at once; slowdowns are ratios of medians (slowest rank).

    Both at once, the way DDP's reducer overlaps them: the main thread launches an
    asynchronous all-reduce and keeps running compute units, polling the work between
    units; when it completes, its duration is recorded and the next one is launched. The
    collective progresses on the backend's own threads (gloo) or stream (NCCL), never
    waiting for the Python GIL (a Python comm thread would: that measures the GIL, not the
    machine). Resolution: one compute unit (tens of microseconds on a CPU).
    """
    import torch
    import torch.distributed as dist

    sw = Stopwatch(rt)
    unit = ComputeUnit(rt, n=256, elems=0) if compute == "gemm" else ComputeUnit(rt, n=128, elems=1 << 16)
    for _ in range(20):
        unit()
    rt.sync()

    elem = torch.empty((), dtype=dtype).element_size()
    buf = torch.ones(max(1, size_bytes // elem), dtype=dtype, device=rt.device)
    for _ in range(2):
        dist.all_reduce(buf)
    # the three measurements interleaved, `repeats` rounds, so that the slow drift of a
    # shared machine hits all three alike
    compute_alone: list[float] = []
    comm_alone: list[float] = []
    comm_busy: list[float] = []
    unit_busy: list[float] = []
    for _ in range(repeats):
        rt.barrier()
        tok = sw.start()
        for _ in range(20):
            unit()
        compute_alone.append(sw.stop(tok) / 20)
        rt.barrier()
        tok = sw.start()
        dist.all_reduce(buf)
        comm_alone.append(sw.stop(tok))
        rt.barrier()
        t0 = time.perf_counter()
        work = dist.all_reduce(buf, async_op=True)
        n = 0
        while not work.is_completed():
            unit()
            n += 1
            if rt.is_cuda:
                torch.cuda.synchronize(rt.device)
            if time.perf_counter() - t0 > rt.timeout_s:
                raise ExecutorFailure(f"interference: an all-reduce of {size_bytes} B did not complete within {rt.timeout_s:g} s")
        t1 = time.perf_counter()
        work.wait()
        comm_busy.append(t1 - t0)
        if n:
            unit_busy.append((t1 - t0) / n)
        rt.watchdog.beat("interference")
    if not unit_busy:
        unit_busy = [statistics.median(compute_alone)]
    vals = max_across_ranks(rt, [statistics.median(compute_alone), statistics.median(unit_busy),
                                 statistics.median(comm_busy), statistics.median(comm_alone)])
    c_alone, c_busy, a_busy, a_alone = vals
    return {
        "compute_slowdown": max(1.0, c_busy / c_alone),
        "comm_slowdown": max(1.0, a_busy / a_alone),
        "details": {"allreduce_size_bytes": int(buf.numel() * elem),
                    "compute_unit_alone_s": c_alone, "compute_unit_with_comm_s": c_busy,
                    "allreduce_alone_s": a_alone, "allreduce_with_compute_s": a_busy,
                    "num_allreduces": repeats,
                    "raw_compute_slowdown": c_busy / c_alone, "raw_comm_slowdown": a_busy / a_alone,
                    "compute": ("torch.mm 256x256" if compute == "gemm" else "torch.mm 128x128 + mul/add over 2**16 elements")
                               + " per unit, polled between units",
                    "num_threads": torch.get_num_threads()},
    }


def measure_copy_bandwidth(rt: Runtime, size_bytes: int = 16 << 20, repeats: int = 15) -> dict[str, Any]:
    """DDP's copy-in (``mul_out`` with 1/world): bytes read + written per second."""
    import torch

    sw = Stopwatch(rt)
    n = size_bytes // 4
    grad = torch.randn(n, device=rt.device)
    bucket = torch.empty(n, device=rt.device)
    scale = 1.0 / rt.world_size
    for _ in range(3):
        torch.mul(grad, scale, out=bucket)
    rt.sync()
    samples = []
    for _ in range(repeats):
        tok = sw.start()
        torch.mul(grad, scale, out=bucket)
        samples.append(sw.stop(tok))
    med = max_across_ranks(rt, [statistics.median(samples)])[0]
    return {"copy_bandwidth_bytes_per_s": 2 * n * 4 / med, "copy_size_bytes": n * 4, "copy_time_s": med}


def measure_buffer_broadcast(rt: Runtime, tensors: int = 96, elems: int = 64, rounds: int = 30) -> dict[str, Any]:
    """Per-buffer cost of DDP's forward buffer broadcast (module docstring): ``tensors`` small
    float32 tensors against one of the same bytes, each through ``dist._broadcast_coalesced``
    from rank 0 with DDP's 250 MiB bucket, alternating, a barrier before each call."""
    import torch
    import torch.distributed as dist

    many = [torch.zeros(elems, device=rt.device) for _ in range(tensors)]
    one = [torch.zeros(tensors * elems, device=rt.device)]
    pg = dist.group.WORLD

    def call(bufs: list[Any]) -> float:
        rt.barrier()
        rt.sync()
        t0 = time.perf_counter()
        dist._broadcast_coalesced(pg, bufs, BROADCAST_BUCKET_BYTES, 0)
        rt.sync()
        return time.perf_counter() - t0

    for _ in range(3):
        call(many)
        call(one)
    many_s: list[float] = []
    one_s: list[float] = []
    for _ in range(rounds):
        many_s.append(call(many))
        one_s.append(call(one))
    rt.watchdog.beat("buffer broadcast")
    m, o = statistics.fmean(mean_across_ranks(rt, many_s)), statistics.fmean(mean_across_ranks(rt, one_s))
    raw = (m - o) / (tensors - 1)
    return {"broadcast_per_tensor_s": max(0.0, raw),
            "details": {"tensors": tensors, "elements_per_tensor": elems, "many_s": m, "one_s": o,
                        "raw_per_tensor_s": raw, "rounds": rounds}}


#: DDP's ``broadcast_bucket_size`` (``int(250 * 1024 * 1024)``)
BROADCAST_BUCKET_BYTES = 250 * 1024 * 1024


def measure_ddp_overhead(rt: Runtime, allreduce_points: list[dict[str, Any]], copy_bandwidth: float | None,
                         rounds: int = 30, steps: int = 5, width: int = 64) -> dict[str, Any]:
    """DDP's fixed per-iteration cost: a tiny MLP stepped bare and under DDP (module docstring)."""
    import copy

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpsim.network.curve_fit import CalibrationPoint, fit_curve

    torch.manual_seed(0)
    bare = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width)).to(rt.device)
    ddp = DDP(copy.deepcopy(bare), device_ids=[rt.device.index] if rt.is_cuda else None)
    x = torch.randn(8, width, device=rt.device)
    opts = {id(bare): torch.optim.SGD(bare.parameters(), lr=1e-3), id(ddp): torch.optim.SGD(ddp.parameters(), lr=1e-3)}
    nbytes = sum(p.numel() * p.element_size() for p in bare.parameters())

    def step(m: Any) -> float:
        rt.sync()
        t0 = time.perf_counter()
        opt = opts[id(m)]
        opt.zero_grad(set_to_none=True)
        m(x).square().mean().backward()
        opt.step()
        rt.sync()
        return time.perf_counter() - t0

    for _ in range(10):  # past DDP's bucket rebuild (iteration 2)
        step(bare)
        step(ddp)
    bare_s: list[float] = []
    ddp_s: list[float] = []
    for _ in range(rounds):  # interleaved, so that drift hits both alike
        rt.barrier()
        bare_s += [step(bare) for _ in range(steps)]
        rt.barrier()
        ddp_s += [step(ddp) for _ in range(steps)]
        rt.watchdog.beat("ddp overhead")
    # the step time of ddpsim.formats.step_times: the mean over ranks (the max would count a
    # rank's delay after the step's all-reduce twice, and a bare step's noise once per rank)
    bare_s = mean_across_ranks(rt, bare_s)
    ddp_s = mean_across_ranks(rt, ddp_s)
    curve = fit_curve([CalibrationPoint(size_bytes=p["size_bytes"], time_s=p["time_s"],
                                        num_samples=p.get("num_samples")) for p in allreduce_points])
    ar = curve.time_s(nbytes)
    copies = 4 * nbytes / copy_bandwidth if copy_bandwidth else 0.0  # copy-in + copy-out, read + write
    # means, like the all-reduce curve (the expected cost; on a loaded CPU host these steps are bimodal too)
    b, d = statistics.fmean(bare_s), statistics.fmean(ddp_s)
    raw = d - b - ar - copies
    return {"ddp_iteration_overhead_s": max(0.0, raw),
            "details": {"model": f"Linear({width},{width}) ReLU Linear({width},{width}), batch 8, SGD",
                        "gradient_bytes": nbytes, "bare_step_s": b, "ddp_step_s": d,
                        "ddp_step_p10_s": quantile(ddp_s, 0.1), "ddp_step_p90_s": quantile(ddp_s, 0.9),
                        "allreduce_curve_s": ar, "copy_s": copies, "raw_overhead_s": raw,
                        "num_steps": len(ddp_s), "rounds": rounds}}


@dataclass(frozen=True, kw_only=True)
class _Plan:
    """What ``executor collectives`` measures, from its checked arguments."""

    ops: list[str]
    gap_ms: float
    after_ms: float
    after_max_bytes: int
    queued_ops: int
    queued_max_bytes: int


def _plan(rt: Runtime, args: argparse.Namespace) -> _Plan:
    """The arguments checked (InputError naming the option, the value and what is accepted)."""
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    for o in ops:
        if o not in ("allreduce", "broadcast"):
            raise InputError(f"--ops: {o!r} is not accepted; expected a comma list of allreduce, broadcast")
    if not args.loop_ms >= 0:
        raise InputError(f"--loop-ms: {args.loop_ms!r} is not accepted; expected a number of milliseconds >= 0")
    gap_ms = args.gap_ms
    if not 0 <= gap_ms <= 1000 or (gap_ms > 0 and rt.is_cuda):
        raise InputError(f"--gap-ms: {args.gap_ms!r} is not accepted; expected a number of milliseconds in [0, 1000] "
                         "(0 on GPUs)")
    after_ms = (0.0 if rt.is_cuda else 2.0) if args.after_compute_ms is None else args.after_compute_ms
    if not 0 <= after_ms <= 1000 or (after_ms > 0 and rt.is_cuda):
        raise InputError(f"--after-compute-ms: {args.after_compute_ms!r} is not accepted; expected a number of "
                         "milliseconds in [0, 1000] (0 on GPUs)")
    after_max = parse_size_bytes(args.after_compute_max_bytes, "--after-compute-max-bytes")
    queued_ops = (0 if rt.is_cuda else 8) if args.queued_ops is None else args.queued_ops
    if queued_ops < 0 or queued_ops == 1 or (queued_ops > 0 and (rt.is_cuda or rt.backend != "gloo")):
        raise InputError(f"--queued-ops: {args.queued_ops!r} is not accepted; expected 0 (skip) or an integer >= 2 "
                         "(gloo only)")
    queued_max = parse_size_bytes(args.queued_max_bytes, "--queued-max-bytes")
    if args.queued_repeats < 1:
        raise InputError(f"--queued-repeats: {args.queued_repeats!r} is not accepted; expected an integer >= 1")
    if args.probe_rounds < 0:
        raise InputError(f"--probe-rounds: {args.probe_rounds!r} is not accepted; expected an integer >= 0")
    if args.buffer_tensors != 0 and args.buffer_tensors < 2:
        raise InputError(f"--buffer-tensors: {args.buffer_tensors!r} is not accepted; expected 0 (skip) or an integer >= 2")
    if args.ddp_overhead_rounds < 0:
        raise InputError(f"--ddp-overhead-rounds: {args.ddp_overhead_rounds!r} is not accepted; expected an integer >= 0")
    for name in ("warmup", "repeats", "interference_repeats"):
        v = getattr(args, name)
        if v < (0 if name == "warmup" else 1):
            raise InputError(f"--{name.replace('_', '-')}: {v!r} is not accepted; expected an integer >= {0 if name == 'warmup' else 1}")
    return _Plan(ops=ops, gap_ms=gap_ms, after_ms=after_ms, after_max_bytes=after_max, queued_ops=queued_ops,
                 queued_max_bytes=queued_max)


class _Progress:
    """Rank 0's measurement JSON at ``path``, rewritten as each stage finishes."""

    def __init__(self, rt: Runtime, path: str) -> None:
        self.rt = rt
        self.path = path
        self.rec = measurement("collectives", rt, points=[], complete=False)

    def write(self) -> None:
        if self.rt.rank == 0:
            write_json(self.path, self.rec)

    def keep(self, stage: str, value: Any) -> None:
        # each finished stage goes into the progress file at once: a later stage that fails
        # (the probe running out of memory, a peer dying) does not lose it
        if self.rt.rank == 0:
            self.rec[stage] = value
            write_json(self.path, self.rec)


def _sweep_ops(rt: Runtime, args: argparse.Namespace, plan: _Plan, sizes: Sequence[int], dtype,
               progress: _Progress) -> dict[str, list[dict[str, Any]]]:
    """The all-reduce and broadcast curves, each round of each op's sweep kept in ``progress``."""
    results: dict[str, list[dict[str, Any]]] = {o: [] for o in ("allreduce", "broadcast")}
    rec = progress.rec
    for op in plan.ops:
        def on_round(rnd: int, colls: list[_Collective], op: str = op) -> None:
            if rt.rank == 0:
                rec["in_progress"] = {"op": op, "rounds_done": rnd + 1, "rank0_samples": {
                    str(c.size_bytes): {"ops_per_sample": c.m, "samples_s": list(c.samples)} for c in colls}}
                progress.write()

        for r in sweep_collectives(rt, op, sizes, dtype, args.warmup, args.repeats, args.loop_ms / 1e3, on_round,
                                   gap_s=plan.gap_ms / 1e3):
            results[op].append(r)
            rt.log(f"collectives: {op:9s} {r['size_bytes']:>11d} B  mean {r['time_s'] * 1e3:9.3f} ms  "
                   f"median {r['median_s'] * 1e3:9.3f}  p10 {r['p10_s'] * 1e3:9.3f}  p90 {r['p90_s'] * 1e3:9.3f}  "
                   f"({r['num_samples']} samples of {r['ops_per_sample']} ops)")
            if rt.rank == 0:
                rec["points"].append({"op": op, **r})
        if rt.rank == 0:
            rec.pop("in_progress", None)
            progress.write()
    return results


def _after_compute_curve(rt: Runtime, args: argparse.Namespace, plan: _Plan, sizes: Sequence[int], dtype,
                         progress: _Progress) -> list[dict[str, Any]]:
    """The all-reduces up to ``--after-compute-max-bytes`` launched after compute (``--after-compute-ms``)."""
    small = [s for s in sizes if s <= plan.after_max_bytes]
    if not (plan.after_ms > 0 and "allreduce" in plan.ops and small):
        return []
    after = sweep_collectives(rt, "allreduce", small, dtype, args.warmup, args.repeats, 0.0, gap_s=plan.after_ms / 1e3)
    for r in after:
        rt.log(f"collectives: allreduce after {plan.after_ms:g} ms of compute {r['size_bytes']:>11d} B  "
               f"mean {r['time_s'] * 1e3:9.3f} ms  median {r['median_s'] * 1e3:9.3f}")
    progress.keep("allreduce_after_compute", after)
    return after


def _queued_curve(rt: Runtime, args: argparse.Namespace, plan: _Plan, sizes: Sequence[int], dtype,
                  progress: _Progress, threads: int | None) -> list[dict[str, Any]]:
    """The all-reduces up to ``--queued-max-bytes`` queued ``--queued-ops`` at once (gloo)."""
    small = [s for s in sizes if s <= plan.queued_max_bytes]
    if not (plan.queued_ops > 0 and "allreduce" in plan.ops and len(small) >= 2 and threads is not None):
        return []
    queued = sweep_queued(rt, small, dtype, plan.queued_ops, args.queued_repeats)
    for r in queued:
        rt.log(f"collectives: allreduce queued {plan.queued_ops} at once ({threads} gloo threads) {r['size_bytes']:>11d} B  "
               f"mean {r['time_s'] * 1e3:9.3f} ms per op  median {r['median_s'] * 1e3:9.3f}")
    progress.keep("allreduce_queued", queued)
    return queued


def _interference_and_copy(rt: Runtime, args: argparse.Namespace, dtype,
                           progress: _Progress) -> tuple[dict[str, Any], dict[str, Any]]:
    """The interference slowdowns (1.0 with ``--skip-interference``) and the copy bandwidth."""
    if args.skip_interference:
        interference: dict[str, Any] = {"compute_slowdown": 1.0, "comm_slowdown": 1.0, "details": {"measured": False}}
    else:
        interference = measure_interference(rt, parse_size_bytes(args.interference_bytes, "--interference-bytes"),
                                            args.interference_repeats, dtype, args.interference_compute)
        rt.log(f"collectives: interference compute_slowdown {interference['compute_slowdown']:.3f}  "
               f"comm_slowdown {interference['comm_slowdown']:.3f}")
    progress.keep("interference", interference)
    copy = measure_copy_bandwidth(rt)
    rt.log(f"collectives: copy bandwidth {copy['copy_bandwidth_bytes_per_s'] / 1e9:.2f} GB/s (read+write)")
    interference["details"]["copy"] = copy
    progress.keep("copy", copy)
    return interference, copy


def _ddp_costs(rt: Runtime, args: argparse.Namespace, allreduce: list[dict[str, Any]], copy: dict[str, Any],
               progress: _Progress) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    """DDP's per-iteration overhead, its per-buffer broadcast cost and the interference probe
    (each None when skipped)."""
    overhead = None
    if args.ddp_overhead_rounds > 0 and allreduce and len(allreduce) >= 2:
        overhead = measure_ddp_overhead(rt, allreduce, copy["copy_bandwidth_bytes_per_s"],
                                        rounds=args.ddp_overhead_rounds)
        det = overhead["details"]
        rt.log(f"collectives: ddp overhead {overhead['ddp_iteration_overhead_s'] * 1e3:.3f} ms per iteration "
               f"(tiny MLP: DDP step {det['ddp_step_s'] * 1e3:.3f} ms, bare {det['bare_step_s'] * 1e3:.3f} ms, "
               f"all-reduce curve {det['allreduce_curve_s'] * 1e3:.3f} ms)")
        progress.keep("ddp_overhead", overhead)
    buffers = None
    if args.buffer_tensors > 0:
        buffers = measure_buffer_broadcast(rt, tensors=args.buffer_tensors)
        det = buffers["details"]
        rt.log(f"collectives: buffer broadcast {buffers['broadcast_per_tensor_s'] * 1e6:.1f} us per tensor "
               f"({det['tensors']} tensors {det['many_s'] * 1e3:.3f} ms, one {det['one_s'] * 1e3:.3f} ms)")
        progress.keep("buffer_broadcast", buffers)
    probe = None
    if not args.skip_interference and args.probe_rounds > 0:
        from executor.probe import measure_probe

        probe = measure_probe(rt, rounds=args.probe_rounds)
        rt.log(f"collectives: interference probe ({probe['model']} {probe['model_args']}, batch {probe['batch_size']}): "
               f"DDP step {probe['ddp_step_s'] * 1e3:.2f} ms at bucket_cap_mb={probe['bucket_cap_mb']:g}")
    return overhead, buffers, probe


def run(rt: Runtime, args: argparse.Namespace) -> int:
    dtype = _dtype(args.dtype)
    import torch

    elem = torch.empty((), dtype=dtype).element_size()
    sizes = sizes_from_args(args, elem)
    plan = _plan(rt, args)
    progress = _Progress(rt, args.progress or str(args.out).removesuffix(".json") + ".progress.json")
    results = _sweep_ops(rt, args, plan, sizes, dtype, progress)
    after = _after_compute_curve(rt, args, plan, sizes, dtype, progress)
    threads = gloo_threads() if rt.backend == "gloo" else None
    queued = _queued_curve(rt, args, plan, sizes, dtype, progress, threads)
    interference, copy = _interference_and_copy(rt, args, dtype, progress)
    overhead, buffers, probe = _ddp_costs(rt, args, results["allreduce"], copy, progress)
    if rt.rank == 0:
        cal = {
            "format": CALIBRATION_FORMAT, "version": CALIBRATION_VERSION, "backend": rt.backend,
            "world_size": rt.world_size, "device": rt.device.type,
            "environment": measurement("collectives", rt)["environment"],
            "collectives": {"allreduce": results["allreduce"], "broadcast": results["broadcast"]},
            "interference": interference,
            "copy_bandwidth_bytes_per_s": copy["copy_bandwidth_bytes_per_s"],
        }
        if overhead is not None:
            cal["ddp_iteration_overhead_s"] = overhead["ddp_iteration_overhead_s"]
            cal["ddp_overhead"] = overhead["details"]
        if buffers is not None:
            cal["broadcast_per_tensor_s"] = buffers["broadcast_per_tensor_s"]
            cal["buffer_broadcast"] = buffers["details"]
        if probe is not None:
            cal["interference_probe"] = probe
        if after:
            cal["allreduce_after_compute"] = after
        if queued:
            cal["allreduce_queued"] = queued
            cal["comm_threads"] = threads
        write_json(args.out, cal)
        progress.rec.update(complete=True, calibration=str(args.out))
        progress.write()
        print(f"collectives: wrote {args.out}", flush=True)
    return 0
