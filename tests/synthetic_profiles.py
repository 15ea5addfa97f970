"""Synthetic torch.profiler profiles made from the committed ones, for the tests (and by hand:
``python tests/synthetic_profiles.py rccl OUT.json.gz``).

* :func:`rccl_from_nccl`: a profile as ROCm's torch writes it for RCCL -- the same events with
  RCCL's kernel name for every collective (``ncclDevKernel_Generic_4``: RCCL launches one generic
  kernel for every collective, so the name says none), the kernels' copies of
  ``record_param_comms``' args removed (the collective is left to the launch's op), HIP's launch
  calls, and an AMD Instinct MI300X (64-lane wavefronts) in ``deviceProperties``.
* :func:`hand_profile`: one step of a rank built by hand (two gradients, one bucket), and
  :func:`late_rank_docs`: every rank's, one of them launching the all-reduce late.
* :func:`many_gradients_doc`: one step of a model with any number of 1,000-element gradients,
  a bucket every ``per_bucket`` of them (for the cost of ``ddpsim compare``,
  ``benchmarks/bench_compare.py``).
* :func:`two_ddp_modules_doc`: one step of a model with two DDP modules (a recommender's dense
  parts), built by hand: module B's gradients (100 and 200,000 elements) become ready first,
  then module A's (50 and 300,000); each module's reducer launches one bucket (200,100 and
  300,050 elements), as each plans its own gradients -- planned together they make one bucket
  of 500,150 (DDP's first bucket is capped at 1 MiB and closes on the gradient that passes it).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
NCCL_A100 = DATA / "resnet50_ddp_2xA100_rank0.json.gz"
RCCL_KERNEL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
#: the args Kineto copies from record_param_comms onto an NCCL kernel
COMM_KERNEL_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "In split size",
                    "Out split size", "Process Group Name", "Process Group Description", "Process Group Ranks")
HIP_CALLS = {"cudaLaunchKernel": "hipLaunchKernel", "cudaLaunchKernelExC": "hipExtLaunchKernel"}
MI300X = {"name": "AMD Instinct MI300X", "totalGlobalMem": 205822885888, "computeMajor": 9, "computeMinor": 4,
          "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 64,
          "sharedMemPerBlock": 65536, "numSms": 304}


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def save(doc: dict[str, Any], path: Path) -> Path:
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def rccl_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (an NCCL profile) as RCCL's (module docstring)."""
    for e in doc["traceEvents"]:
        name = e.get("name", "")
        if e.get("cat") == "kernel" and name.startswith("nccl"):
            e["name"] = RCCL_KERNEL
            for k in COMM_KERNEL_ARGS:
                e.get("args", {}).pop(k, None)
        elif e.get("cat") in ("cuda_runtime", "cuda_driver") and name.startswith("cuda"):
            e["name"] = HIP_CALLS.get(name, "hip" + name[4:])
    doc["deviceProperties"] = [{"id": d["id"], **MI300X} for d in doc["deviceProperties"]]
    doc["distributedInfo"]["nccl_version"] = "2.21.5"
    return doc


def event(name: str, ts: float, dur: float, tid: int, cat: str = "cpu_op", **args: Any) -> dict[str, Any]:
    """A complete ("X") event of the host (pid 1)."""
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


def launch(ts: float, corr: int, tid: int, name: str = "cudaLaunchKernel") -> dict[str, Any]:
    """A runtime call launching the device op of correlation id ``corr``."""
    return event(name, ts, 5, tid, cat="cuda_runtime", correlation=corr)


def kernel(name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
    """A kernel on stream 7, tied to its launch by ``corr``."""
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
            "args": {"correlation": corr, "stream": 7, **args}}


def _launched(ts: float, corr: int, tid: int, name: str, start: float, dur: float, **args: Any) -> list[dict[str, Any]]:
    return [launch(ts, corr, tid), kernel(name, start, dur, corr, **args)]




def hand_profile(host_bound: bool = True) -> dict[str, Any]:
    """One step (ProfilerStep#7, 0..1000 us; main thread 1, autograd thread 2). Host-bound: every
    kernel ends before the CPU's next boundary; GPU-bound: the backward's kernel runs to 900 us."""
    bwd_kernel_dur = 200 if host_bound else 470
    ev = [
        event("ProfilerStep#7", 0, 1000, 1, cat="user_annotation"),
        event("Optimizer.zero_grad#SGD.zero_grad", 5, 10, 1, cat="user_annotation"),
        event("DistributedDataParallel.forward", 20, 300, 1, cat="user_annotation"),
        event("c10d::broadcast_", 30, 20, 1),
        event("aten::conv2d", 100, 50, 1), launch(120, 1, 1), kernel("conv_fwd", 130, 100, 1),
        # backward, autograd thread: two AccumulateGrads; the second's hook launches the only bucket
        event("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 400, 60, 2),
        event("torch::autograd::AccumulateGrad", 405, 10, 2),
        launch(420, 2, 2), kernel("conv_bwd", 430, bwd_kernel_dur, 2),
        event("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 500, 200, 2),
        event("torch::autograd::AccumulateGrad", 505, 10, 2),
        event("c10d::allreduce_", 550, 100, 2),
        event("record_param_comms", 560, 60, 2, **{"In msg nelems": 10, "dtype": "Float", "Group size": 2,
                                                "Collective name": "allreduce"}),
        launch(570, 3, 2, "cudaLaunchKernelExC"),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", 640, 100, 3, **{"In msg nelems": 10}),
        event("Optimizer.step#SGD.step", 800, 100, 1, cat="user_annotation"),
        launch(810, 4, 1), kernel("sgd", 820, 30, 4),
    ]
    return {"deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "numSms": 108}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2}, "traceEvents": ev}


def late_rank_docs(late: int = 5, arrive: float = 640, transfer: float = 40, ranks: int = 8) -> list[tuple[int, dict[str, Any]]]:
    """Every rank's :func:`hand_profile` on one host clock, out of rank order: rank ``late``
    launches the all-reduce 60 us after the others (its kernel starts at ``arrive + 60``, theirs at
    ``arrive``) and every kernel ends at ``arrive + 60 + transfer``: the transfer is ``transfer``
    us, every other rank waits 60 us for rank ``late``."""
    out = []
    for r in sorted(range(ranks), key=lambda r: (r * 5 + 3) % ranks):
        doc = hand_profile()
        doc["distributedInfo"].update(rank=r, world_size=ranks)
        start = arrive + (60 if r == late else 0)
        for e in doc["traceEvents"]:
            if e["name"].startswith("ncclKernel"):
                e["ts"], e["dur"] = start, arrive + 60 + transfer - start
        out.append((r, doc))
    return out


#: two DDP modules' gradients in ready order (their dims) and buckets (launch order)
TWO_MODULE_GRADS = ((100,), (200, 1000), (50,), (300, 1000))
TWO_MODULE_BUCKETS = (200_100, 300_050)


def two_ddp_modules_doc(process_groups: tuple[str, str] | None = None, modules: int = 2) -> dict[str, Any]:
    """One step (ProfilerStep#3, 0..2000 us) of two DDP modules (module docstring); each bucket's
    ``record_param_comms`` names its process group where ``process_groups`` gives them; with
    ``modules=1`` the step shows one ``DistributedDataParallel.forward`` (the model as one module)."""
    ev = [event("ProfilerStep#3", 0, 2000, 1, cat="user_annotation"),
          event("DistributedDataParallel.forward", 20, 180, 1, cat="user_annotation"),
          event("aten::linear", 50, 40, 1), *_launched(60, 1, 1, "gemm_a", 70, 80)]
    if modules == 2:
        ev.append(event("DistributedDataParallel.forward", 220, 180, 1, cat="user_annotation"))
    ev += [event("aten::linear", 250, 40, 1), *_launched(260, 2, 1, "gemm_b", 270, 80),
           event("autograd::engine::evaluate_function: AddmmBackward0", 450, 40, 2), *_launched(460, 5, 2, "gemm_bwd", 470, 20)]
    corr = 10
    for k, dims in enumerate(TWO_MODULE_GRADS):
        t = 500 + 120 * k
        ev += [event("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", t, 100, 2),
               event("torch::autograd::AccumulateGrad", t + 2, 5, 2, **{"Input Dims": [list(dims)]}),
               event("torch::distributed::reducer::mul_out", t + 10, 5, 2)]
        if k % 2:  # the module's last gradient: its reducer launches its one bucket
            numel = TWO_MODULE_BUCKETS[k // 2]
            comms = {"In msg nelems": numel, "dtype": "Float", "Group size": 2, "Collective name": "allreduce"}
            if process_groups is not None:
                comms["Process Group Name"] = process_groups[k // 2]
            ev += [event("c10d::allreduce_", t + 20, 40, 2), event("record_param_comms", t + 25, 30, 2, **comms),
                   *_launched(t + 30, corr, 2, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", t + 40, 60,
                              **{"In msg nelems": numel})]
            corr += 1
    ev += [event("Optimizer.step#SGD.step", 1100, 100, 1, cat="user_annotation"), *_launched(1110, 6, 1, "sgd", 1120, 30)]
    return {"deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "numSms": 108}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2}, "traceEvents": ev}


def many_gradients_doc(grads: int, per_bucket: int = 10, rank: int = 0, world: int = 8) -> dict[str, Any]:
    """One step (module docstring): per gradient a backward op with its kernel, then its
    AccumulateGrad, DDP's hook and its copy kernel; every ``per_bucket`` gradients a bucket's
    launch and NCCL kernel."""
    ev = [event("ProfilerStep#3", 0, 200 * grads + 5000, 1, cat="user_annotation"),
          event("DistributedDataParallel.forward", 20, 1000, 1, cat="user_annotation"),
          event("aten::linear", 50, 40, 1), *_launched(60, 1, 1, "gemm", 70, 80)]
    corr, t = 10, 2000
    for k in range(grads):
        ev += [event("autograd::engine::evaluate_function: AddmmBackward0", t, 50, 2), *_launched(t + 5, corr, 2, "gemm_bwd", t + 10, 30),
               event("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", t + 60, 100, 2),
               event("torch::autograd::AccumulateGrad", t + 62, 5, 2, **{"Input Dims": [[1000]]}),
               event("torch::distributed::reducer::mul_out", t + 70, 5, 2), *_launched(t + 71, corr + 1, 2, "copy", t + 72, 2)]
        corr += 2
        if k % per_bucket == per_bucket - 1:
            numel = 1000 * per_bucket
            comms = {"In msg nelems": numel, "dtype": "Float", "Group size": world, "Collective name": "allreduce"}
            ev += [event("c10d::allreduce_", t + 80, 40, 2), event("record_param_comms", t + 85, 30, 2, **comms),
                   *_launched(t + 90, corr, 2, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", t + 100, 60,
                              **{"In msg nelems": numel})]
            corr += 1
        t += 180
    ev += [event("Optimizer.step#SGD.step", t + 100, 100, 1, cat="user_annotation"), *_launched(t + 110, corr, 1, "sgd", t + 120, 30)]
    return {"deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "numSms": 108}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world}, "traceEvents": ev}


def rccl_from_nccl(out: Path, src: Path = NCCL_A100) -> Path:
    return save(rccl_doc(load(src)), out)


if __name__ == "__main__":
    kind, out = sys.argv[1], Path(sys.argv[2])
    if kind != "rccl":
        raise SystemExit(f"kind {kind!r} is not accepted; expected rccl")
    print(rccl_from_nccl(out))
