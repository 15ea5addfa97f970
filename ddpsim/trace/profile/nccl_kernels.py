"""What an NCCL kernel's name and launch say: collective, algorithm, protocol, channels.

NCCL names its device functions after the collective, reduction, type, algorithm and protocol
(NVIDIA/nccl ``src/device/generate.py``; before 2.19 ``src/collectives/device/``): e.g.
``ncclKernel_AllReduce_RING_LL_Sum_float`` (<= 2.18) or ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``
(>= 2.19). A kernel launched through the generic entry (``ncclDevKernel_Generic``) names no
algorithm or protocol: they are then None. NCCL launches one CUDA block per channel
(``enqueue.cc``: ``grid = {nChannels, 1, 1}``), so the grid's x dimension is the channel count.
"""

from __future__ import annotations

import re

ALGORITHMS = ("COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "NVLS", "RING", "TREE", "PAT")
PROTOCOLS = ("LL128", "LL", "SIMPLE")
_ALGO = re.compile(r"_(" + "|".join(ALGORITHMS) + r")(?=_|\(|$)")
_PROTO = re.compile(r"_(" + "|".join(PROTOCOLS) + r")(?=_|\(|$)")
_COLL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
#: NCCL's collective names (kernel name part) -> c10d's ``Collective name``
_COLLECTIVES = {"AllReduce": "allreduce", "Broadcast": "broadcast", "AllGather": "allgather",
                "ReduceScatter": "reduce_scatter", "Reduce": "reduce", "SendRecv": "sendrecv"}


def _base(name: str) -> str:
    return name.split("(", 1)[0]


def algorithm(name: str) -> str | None:
    """``RING``, ``TREE``, ... from an NCCL kernel name; None when the name does not say."""
    m = _ALGO.search(_base(name))
    return m.group(1) if m else None


def protocol(name: str) -> str | None:
    """``LL``, ``LL128`` or ``SIMPLE`` from an NCCL kernel name; None when the name does not say."""
    m = _PROTO.search(_base(name))
    return m.group(1) if m else None


def collective(name: str) -> str | None:
    """``allreduce``, ``broadcast``, ... from an NCCL kernel name; None for the generic kernel."""
    m = _COLL.match(_base(name))
    return _COLLECTIVES.get(m.group(1)) if m else None


def channels(grid: tuple[int, ...] | None) -> int | None:
    """The channel count of an NCCL launch: its grid's x dimension."""
    return grid[0] if grid else None
