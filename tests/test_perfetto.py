"""Chrome/Kineto trace export: format, one tid per stream, and HTA's overlap by hand."""

from __future__ import annotations

import gzip
import json

import pytest

from ddpsim.report.perfetto import (COMM_TID, COMPUTE_TID, CPU_TID, chrome_trace, comm_comp_overlap,
                             written_traces)
from ddpsim.engine.result import BucketTiming, IterationStats, SimResult, Span


def hand_result() -> SimResult:
    """One rank, one iteration: compute 0-10 ms (forward 0-4, backward 4-10), a wait 10-12 ms,
    optimizer 12-13 ms; bucket 0 all-reduce 6-9 ms, bucket 1 9-12 ms.
    Communication 6 ms, of which 6-10 ms (4 ms) overlaps compute: overlap 4/6."""
    sp = [Span(rank=0, stream="compute", kind="forward", name="forward", iteration=1, start_s=0.0, end_s=0.004),
          Span(rank=0, stream="compute", kind="backward", name="backward", iteration=1, start_s=0.004, end_s=0.010),
          Span(rank=0, stream="compute", kind="wait", name="wait for allreduce", iteration=1, start_s=0.010, end_s=0.012),
          Span(rank=0, stream="compute", kind="optimizer", name="optimizer", iteration=1, start_s=0.012, end_s=0.013),
          Span(rank=0, stream="comm", kind="allreduce", name="allreduce", iteration=1, start_s=0.006, end_s=0.009, bucket=0, size_bytes=100),
          Span(rank=0, stream="comm", kind="allreduce", name="allreduce", iteration=1, start_s=0.009, end_s=0.012, bucket=1, size_bytes=200)]
    bt = [BucketTiming(rank=0, iteration=1, bucket=0, size_bytes=100, num_params=1, ready_s=0.006, launch_s=0.006, start_s=0.006, end_s=0.009),
          BucketTiming(rank=0, iteration=1, bucket=1, size_bytes=200, num_params=2, ready_s=0.008, launch_s=0.008, start_s=0.009, end_s=0.012)]
    it = [IterationStats(rank=0, iteration=1, start_s=0.0, end_s=0.013, forward_s=0.004, backward_compute_s=0.006,
                         exposed_comm_s=0.002, comm_s=0.006, overlap_ratio=4 / 6, optimizer_s=0.001)]
    return SimResult(world_size=4, ranks=(0,), spans=tuple(sp), buckets=tuple(bt), iterations=tuple(it))


def test_format():
    d = chrome_trace(hand_result(), 0, backend="nccl", point="cap=25")
    assert d["distributedInfo"] == {"rank": 0, "world_size": 4, "backend": "nccl"}
    assert isinstance(d["baseTimeNanoseconds"], int)
    xs = [e for e in d["traceEvents"] if e["ph"] == "X" and e["cat"] != "user_annotation"]
    comm = [e for e in xs if e["tid"] == COMM_TID]
    assert [(e["name"], e["ts"], e["dur"]) for e in comm] == [
        ("ncclDevKernel_AllReduce_Sum (bucket 0)", 6000, 3000), ("ncclDevKernel_AllReduce_Sum (bucket 1)", 9000, 3000)]
    assert comm[1]["args"]["ready_us"] == 8000 and comm[1]["args"]["launch_us"] == 8000
    assert {e["tid"] for e in xs if e["name"] in ("forward", "backward", "optimizer")} == {COMPUTE_TID}
    wait = next(e for e in xs if e["name"].startswith("wait"))
    assert wait["cat"] == "wait" and "stream" not in wait["args"]  # idle time, not a kernel
    names = {(e["name"], e["args"]["name"]) for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert ("thread_name", f"stream {COMM_TID} nccl comm") in names
    assert sum(1 for e in d["traceEvents"] if e["ph"] == "i") == 4  # ready + launch per bucket


def test_iterations_are_profiler_steps_and_kernels_have_launches_as_torch_profiler_writes_them():
    d = chrome_trace(hand_result(), 0)
    steps = [e for e in d["traceEvents"] if e.get("cat") == "user_annotation"]
    # torch.profiler: {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#<k>"} on the host thread
    assert [(e["ph"], e["name"], e["tid"], e["ts"], e["dur"]) for e in steps] == [("X", "ProfilerStep#1", CPU_TID, 0, 13000)]
    kernels = {e["args"]["correlation"]: e for e in d["traceEvents"] if e.get("cat") == "kernel"}
    launches = [e for e in d["traceEvents"] if e.get("cat") == "cuda_runtime"]
    assert sorted(kernels) == [1, 2, 3, 4, 5]  # forward, backward, optimizer, two all-reduces; not the wait
    assert sorted(e["args"]["correlation"] for e in launches) == [1, 2, 3, 4, 5]  # one launch per kernel
    for e in launches:
        k = kernels[e["args"]["correlation"]]
        assert e["tid"] == CPU_TID and e["dur"] == 0 and "stream" not in e["args"]  # a host event
        assert steps[0]["ts"] <= e["ts"] <= k["ts"]  # inside its step, not after its kernel starts
    # an all-reduce is launched when DDP launches its bucket (bucket 1: ready and launched at 8 ms, runs 9-12 ms)
    by_name = {kernels[e["args"]["correlation"]]["name"]: e["ts"] for e in launches}
    assert by_name["ncclDevKernel_AllReduce_Sum (bucket 1)"] == 8000 and by_name["backward"] == 4000


def test_overlap_by_hand():
    assert comm_comp_overlap(chrome_trace(hand_result(), 0)) == pytest.approx(4 / 6)


def test_hta_kernel_classes():
    from ddpsim.trace.profile.kernel_kinds import COMM, COMP, MEMORY, OTHER, kernel_kind

    assert kernel_kind("ncclDevKernel_AllReduce_Sum (bucket 3)") == COMM
    assert kernel_kind("backward") == COMP
    assert kernel_kind("Memcpy DtoD") == MEMORY
    assert kernel_kind("cudaDeviceSync") == OTHER


def test_write_is_deterministic_and_hta_readable(tmp_path):
    (rank, a, d), = written_traces(hand_result(), tmp_path / "a", "cap=25", backend="gloo")
    (_, b, _), = written_traces(hand_result(), tmp_path / "b", "cap=25", backend="gloo")
    assert rank == 0 and a.name == "trace_cap-25_rank0.json.gz"
    assert a.read_bytes() == b.read_bytes()
    text = gzip.decompress(a.read_bytes()).decode()
    assert '"rank": 0' in text  # HTA finds the rank with the regex '"rank":\s+(\d+)'
    assert json.loads(text) == d == chrome_trace(hand_result(), 0, backend="gloo", point="cap=25")


def test_representative_ranks():
    from dataclasses import replace

    from ddpsim.report.perfetto import representative_ranks

    base = hand_result()
    its = []
    for r, dur in enumerate([5.0, 3.0, 9.0, 4.0, 5.0, 6.0]):
        its.append(replace(base.iterations[0], rank=r, end_s=dur))
    res = replace(base, ranks=tuple(range(6)), iterations=tuple(its))
    # rank 0, fastest (1), slowest (2), last (5)
    assert representative_ranks(res) == [0, 1, 2, 5]
    assert representative_ranks(base) == [0]
