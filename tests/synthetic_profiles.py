"""Synthetic torch.profiler profiles made from the committed ones, for the tests (and by hand:
``python tests/synthetic_profiles.py rccl OUT.json.gz``).

* :func:`rccl_from_nccl`: a profile as ROCm's torch writes it for RCCL -- the same events with
  RCCL's kernel name for every collective (``ncclDevKernel_Generic_4``: RCCL launches one generic
  kernel for every collective, so the name says none), the kernels' copies of
  ``record_param_comms``' args removed (the collective is left to the launch's op), HIP's launch
  calls, and an AMD Instinct MI300X (64-lane wavefronts) in ``deviceProperties``.
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


def rccl_from_nccl(out: Path, src: Path = NCCL_A100) -> Path:
    return save(rccl_doc(load(src)), out)


if __name__ == "__main__":
    kind, out = sys.argv[1], Path(sys.argv[2])
    if kind != "rccl":
        raise SystemExit(f"kind {kind!r} is not accepted; expected rccl")
    print(rccl_from_nccl(out))
