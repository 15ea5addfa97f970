"""Synthetic torch.profiler profiles made from the committed ones, for the tests (and by hand:
``python tests/synthetic_profiles.py rccl OUT.json.gz``).

* :func:`rccl_from_nccl`: a profile as ROCm's torch writes it for RCCL -- the same events with
  RCCL's kernel name for every collective (``ncclDevKernel_Generic_4``: RCCL launches one generic
  kernel for every collective, so the name says none), the kernels' copies of
  ``record_param_comms``' args removed (the collective is left to the launch's op), HIP's launch
  calls, and an AMD Instinct MI300X (64-lane wavefronts) in ``deviceProperties``.
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


def _x(name: str, ts: float, dur: float, tid: int, cat: str = "cpu_op", **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


def _launched(ts: float, corr: int, tid: int, kernel: str, start: float, dur: float, **args: Any) -> list[dict[str, Any]]:
    """A launch call and the kernel it launched (tied by ``correlation``)."""
    return [_x("cudaLaunchKernel", ts, 5, tid, cat="cuda_runtime", correlation=corr),
            {"ph": "X", "cat": "kernel", "name": kernel, "ts": start, "dur": dur, "pid": 0, "tid": 7,
             "args": {"correlation": corr, "stream": 7, **args}}]


#: two DDP modules' gradients in ready order (their dims) and buckets (launch order)
TWO_MODULE_GRADS = ((100,), (200, 1000), (50,), (300, 1000))
TWO_MODULE_BUCKETS = (200_100, 300_050)


def two_ddp_modules_doc(process_groups: tuple[str, str] | None = None, modules: int = 2) -> dict[str, Any]:
    """One step (ProfilerStep#3, 0..2000 us) of two DDP modules (module docstring); each bucket's
    ``record_param_comms`` names its process group where ``process_groups`` gives them; with
    ``modules=1`` the step shows one ``DistributedDataParallel.forward`` (the model as one module)."""
    ev = [_x("ProfilerStep#3", 0, 2000, 1, cat="user_annotation"),
          _x("DistributedDataParallel.forward", 20, 180, 1, cat="user_annotation"),
          _x("aten::linear", 50, 40, 1), *_launched(60, 1, 1, "gemm_a", 70, 80)]
    if modules == 2:
        ev.append(_x("DistributedDataParallel.forward", 220, 180, 1, cat="user_annotation"))
    ev += [_x("aten::linear", 250, 40, 1), *_launched(260, 2, 1, "gemm_b", 270, 80),
           _x("autograd::engine::evaluate_function: AddmmBackward0", 450, 40, 2), *_launched(460, 5, 2, "gemm_bwd", 470, 20)]
    corr = 10
    for k, dims in enumerate(TWO_MODULE_GRADS):
        t = 500 + 120 * k
        ev += [_x("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", t, 100, 2),
               _x("torch::autograd::AccumulateGrad", t + 2, 5, 2, **{"Input Dims": [list(dims)]}),
               _x("torch::distributed::reducer::mul_out", t + 10, 5, 2)]
        if k % 2:  # the module's last gradient: its reducer launches its one bucket
            numel = TWO_MODULE_BUCKETS[k // 2]
            comms = {"In msg nelems": numel, "dtype": "Float", "Group size": 2, "Collective name": "allreduce"}
            if process_groups is not None:
                comms["Process Group Name"] = process_groups[k // 2]
            ev += [_x("c10d::allreduce_", t + 20, 40, 2), _x("record_param_comms", t + 25, 30, 2, **comms),
                   *_launched(t + 30, corr, 2, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", t + 40, 60,
                              **{"In msg nelems": numel})]
            corr += 1
    ev += [_x("Optimizer.step#SGD.step", 1100, 100, 1, cat="user_annotation"), *_launched(1110, 6, 1, "sgd", 1120, 30)]
    return {"deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "numSms": 108}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2}, "traceEvents": ev}


def rccl_from_nccl(out: Path, src: Path = NCCL_A100) -> Path:
    return save(rccl_doc(load(src)), out)


if __name__ == "__main__":
    kind, out = sys.argv[1], Path(sys.argv[2])
    if kind != "rccl":
        raise SystemExit(f"kind {kind!r} is not accepted; expected rccl")
    print(rccl_from_nccl(out))
