"""Chrome / Kineto-format trace JSON of a simulated run, one gzip file per rank
(``trace_<point>_rank<r>.json.gz``, as torch.profiler's ``tensorboard_trace_handler(use_gzip=True)``
writes them), for Perfetto, chrome://tracing and HolisticTraceAnalysis (HTA). Layout: Kineto's
top-level keys (``schemaVersion``, ``distributedInfo`` with ``"rank": r``, ``baseTimeNanoseconds``: a
fixed time 0, reproducible files) and ``traceEvents``. One ``tid`` per stream (Perfetto does not
stack overlapping slices): :data:`COMPUTE_TID`, :data:`COMM_TID`. Compute and communication spans
are GPU-kernel-like (``cat: "kernel"``, an integer ``args.stream``: how HTA tells kernels from CPU
ops); communication spans are named ``ncclDevKernel_<Op> (bucket k)``, gloo's too (with
``args.backend``), since HTA classifies communication kernels by name only (``^nccl``,
:mod:`ddpsim.trace.profile.kernel_kinds`). The end-of-backward wait is ``cat: "wait"`` without a
stream (idle time, which HTA ignores). Bucket ready and launch are instant events (``ph: "i"``) on
the communication track, and ``args`` of each collective (``ready_us``, ``launch_us``,
``size_bytes``). ``ts``/``dur`` are whole microseconds (Kineto's unit; HTA rounds finer floats
itself with ``ceil(ts)`` and ``floor(ts + dur)``: whole ones keep its overlap identical to
:func:`comm_comp_overlap`'s). Iterations are ``ProfilerStep#<k>`` slices
(``cat: "user_annotation"``) on the host thread :data:`CPU_TID`, where every kernel-like event has
its ``cudaLaunchKernel`` (``cat: "cuda_runtime"``, zero duration, linked by ``args.correlation``) at
the moment the engine issues it (a bucket's all-reduce: DDP's launch; else its start): HTA assigns
each kernel to the ProfilerStep of its launch, and leaves the last step out unless given
``include_last_profiler_step=True``. :func:`comm_comp_overlap` computes from these events exactly
what HTA's ``get_comm_comp_overlap`` computes over every iteration (merged communication intervals
overlapped by merged computation intervals / merged communication time).
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

from ddpsim.io import file_id, write_bytes_atomic
from ddpsim.engine.result import COMM_STREAM, COMPUTE_STREAM, SimResult
from ddpsim.trace.intervals import overlap_ratio

CPU_TID = 1
COMPUTE_TID = 7
COMM_TID = 20
BASE_TIME_NS = 1_700_000_000_000_000_000
_STREAM_TID = {COMPUTE_STREAM: COMPUTE_TID, COMM_STREAM: COMM_TID}
_COMM_OP = {"allreduce": "AllReduce_Sum", "broadcast": "Broadcast", "used_map_allreduce": "AllReduce_Sum",
            "syncbn_allgather": "AllGather", "syncbn_allreduce": "AllReduce_Sum",
            "rebuild": "Broadcast"}


def _us(t_s: float) -> int:
    return int(round(t_s * 1e6))


def chrome_trace(result: SimResult, rank: int, *, backend: str = "nccl",
                 point: str | None = None) -> dict[str, Any]:
    """The Chrome/Kineto trace dict of one simulated rank (see the module docstring)."""
    assert rank in result.ranks, f"rank {rank} was not simulated ({result.ranks})"
    tracks = {CPU_TID: "python (iterations, launches)", COMPUTE_TID: f"stream {COMPUTE_TID} compute",
              COMM_TID: f"stream {COMM_TID} {backend} comm"}
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}},
        {"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}},
        *({"ph": "M", "name": "thread_name", "pid": rank, "tid": t, "args": {"name": name}}
          for t, name in tracks.items()),
        *({"ph": "M", "name": "thread_sort_index", "pid": rank, "tid": t, "args": {"sort_index": i}}
          for i, t in enumerate(tracks))]
    for it in sorted((i for i in result.iterations if i.rank == rank), key=lambda i: i.iteration):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{it.iteration}", "pid": rank,
                   "tid": CPU_TID, "ts": _us(it.start_s), "dur": _us(it.end_s) - _us(it.start_s),
                   "args": {"iteration": it.iteration, "warmup": it.warmup}})
    bt = {(b.iteration, b.bucket): b for b in result.buckets if b.rank == rank}
    spans = sorted((s for s in result.spans if s.rank == rank),
                   key=lambda s: (s.start_s, _STREAM_TID.get(s.stream, 99), s.end_s, s.name))
    launches: list[dict[str, Any]] = []
    for s in spans:
        ts = _us(s.start_s)
        tid = _STREAM_TID.get(s.stream, COMPUTE_TID)
        args: dict[str, Any] = {"iteration": s.iteration, "kind": s.kind}
        cat = "wait" if s.kind == "wait" else "kernel"
        if cat == "kernel":
            args.update({"stream": tid, "device": rank, "correlation": len(launches) + 1})
        name = s.name
        if s.stream == COMM_STREAM:
            args["backend"] = backend
            where = s.name if s.bucket is None else f"bucket {s.bucket}"
            name = f"ncclDevKernel_{_COMM_OP.get(s.kind, s.kind)} ({where})"
        args.update({k: v for k, v in (("bucket", s.bucket), ("size_bytes", s.size_bytes)) if v is not None})
        b = bt.get((s.iteration, s.bucket)) if s.kind == "allreduce" else None
        launch_us = ts if b is None else _us(b.launch_s)
        if b is not None:
            args.update({"ready_us": _us(b.ready_s), "launch_us": launch_us, "num_params": b.num_params})
        if cat == "kernel":
            launches.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": rank, "tid": CPU_TID,
                             "ts": launch_us, "dur": 0, "args": {"correlation": args["correlation"]}})
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": rank, "tid": tid,
                   "ts": ts, "dur": _us(s.end_s) - ts, "args": args})
    ev += sorted(launches, key=lambda e: (e["ts"], e["args"]["correlation"]))
    for b in sorted(bt.values(), key=lambda b: (b.iteration, b.bucket)):
        for what, t in (("ready", b.ready_s), ("launch", b.launch_s)):
            ev.append({"ph": "i", "s": "t", "cat": "bucket", "name": f"bucket {b.bucket} {what}", "pid": rank,
                       "tid": COMM_TID, "ts": _us(t), "args": {"iteration": b.iteration, "bucket": b.bucket}})
    info: dict[str, Any] = {"rank": rank, "world_size": result.world_size, "backend": backend}
    out = {"schemaVersion": 1, "deviceProperties": [], "distributedInfo": info, "displayTimeUnit": "ms",
           "baseTimeNanoseconds": BASE_TIME_NS, "traceEvents": ev}
    if point is not None:
        out["ddpsim"] = {"point": point, "note": "simulated by ddpsim; communication kernels are named "
                                                 "ncclDevKernel_* so that HTA classifies them"}
    return out


def representative_ranks(result: SimResult, max_ranks: int = 4) -> list[int]:
    """Every simulated rank if at most ``max_ranks``; else rank 0, the fastest, the slowest
    (total iteration time) and the last simulated rank, in rank order."""
    ranks = list(result.ranks)
    if len(ranks) <= max_ranks:
        return ranks
    total: dict[int, float] = {}
    for it in result.iterations:
        total[it.rank] = total.get(it.rank, 0.0) + it.iteration_s
    by_time = sorted(ranks, key=lambda r: (total.get(r, 0.0), r))
    return sorted({ranks[0], by_time[0], by_time[-1], ranks[-1]})


def written_traces(result: SimResult, out_dir: str | Path, point_id: str, *,
                   backend: str = "nccl") -> list[tuple[int, Path, dict[str, Any]]]:
    """Write ``trace_<file_id(point_id)>_rank<r>.json.gz`` per rank of :func:`representative_ranks` (no
    time or name in gzip's header); each ``(rank, path, trace dict)``."""
    out = []
    for r in representative_ranks(result):
        d = chrome_trace(result, r, backend=backend, point=point_id)
        text = json.dumps(d) + "\n"  # NOTE: '"rank": r' with a space: HTA finds ranks by regex
        # zlib's default level: a fifth of level 9's time for about 15 % more bytes
        out.append((r, write_bytes_atomic(Path(out_dir) / f"trace_{file_id(point_id)}_rank{r}.json.gz",
                                          gzip.compress(text.encode(), compresslevel=6, mtime=0)), d))
    return out


def comm_comp_overlap(trace: dict[str, Any]) -> float:
    """HTA's ``get_comm_comp_overlap`` ratio for one rank's trace dict (0 if no communication), its
    kernels classified as HTA does (:mod:`ddpsim.trace.profile.kernel_kinds`, imported only here)."""
    from ddpsim.trace.profile.kernel_kinds import COMM, COMP, kernel_kind

    kind = functools.cache(kernel_kind)  # a trace repeats its kernels' names every iteration
    found: dict[str, list[tuple[int, int]]] = {COMM: [], COMP: []}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and isinstance(e.get("args", {}).get("stream"), int):
            found.get(kind(e["name"]), []).append((e["ts"], e["ts"] + e["dur"]))
    return overlap_ratio(found[COMM], found[COMP]) or 0.0
