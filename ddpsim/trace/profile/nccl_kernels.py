"""What an NCCL kernel launch says of the collective that ran: collective, algorithm, protocol,
channels. The name gives the algorithm up to NCCL 2.18 (``NCCL_FUNC5`` in ``src/enqueue.cc``),
only tree or not from 2.19 (``best_kernel`` in ``src/device/generate.py``); the block size, set
per (algorithm, protocol) by ``enqueue.cc``, narrows the protocol (:func:`candidates`); the
grid's x dimension is the channel count. RCCL's kernels are read by name only (:func:`block_of`,
:func:`collective_of`). The thread counts per NCCL version: docs/MODEL.md, "How a profile
becomes a trace"."""

from __future__ import annotations

import re

from ddpsim.trace.profile.kineto import GpuOp, KinetoProfile, int_or_none

ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree")
PROTOCOLS = ("ll", "ll128", "simple")
_OLD = re.compile(r"^ncclKernel_[A-Za-z]+_(RING|TREE|NVLS_TREE|NVLS|COLLNET_DIRECT|COLLNET_CHAIN)_LL_")
_NEW = re.compile(r"^ncclDevKernel_[A-Za-z]+(?:_[A-Za-z0-9]+)*?_(RING|TREE)_LL$")
_COLL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
#: the generic kernel (NCCL from 2.19, every RCCL launch): ``ncclDevKernel_Generic``, ``..._Generic_4``
_GENERIC = re.compile(r"^ncclDevKernel_Generic(?:_\d+)?$")
#: NCCL's collective names (kernel name part) -> c10d's ``Collective name``
_COLLECTIVES = {"AllReduce": "allreduce", "Broadcast": "broadcast", "AllGather": "allgather",
                "ReduceScatter": "reduce_scatter", "Reduce": "reduce", "SendRecv": "sendrecv"}
_WARP = 32


def _base(name: str) -> str:
    return name.split("(", 1)[0]


def collective(name: str) -> str | None:
    """``allreduce``, ``broadcast``, ... from an NCCL kernel name; None for the generic kernel."""
    m = _COLL.match(_base(name))
    return _COLLECTIVES.get(m.group(1)) if m else None


def collective_of(op: GpuOp) -> str | None:
    """The collective a communication kernel ran: its launch's ``Collective name`` (c10d's:
    ``allreduce``, ``broadcast``, ...), else the one its NCCL name says (None for the generic kernel)."""
    name = (op.args or {}).get("Collective name")
    return name if isinstance(name, str) and name else collective(op.name)


def block_of(block: tuple[int, ...] | None, device_properties: list[dict]) -> tuple[int, ...] | None:
    """``block`` where every GPU of the profile (its ``deviceProperties``) has 32-thread warps,
    else None: the thread counts of :func:`block_sizes` are NVIDIA NCCL's."""
    return block if all(d.get("warpSize", 32) == 32 for d in device_properties) else None


def profile_version(distributed_info: dict) -> str | None:
    """The NCCL version a profile's ``distributedInfo`` records (``"2.17.1"``), or None."""
    v = distributed_info.get("nccl_version")
    return v if isinstance(v, str) else None


def _named_algorithms(name: str) -> tuple[str, ...]:
    """The algorithms a kernel of this name can run (module docstring); () for none ddpsim models."""
    base = _base(name)
    if m := _OLD.match(base):
        algo = m.group(1).lower()
        return (algo,) if algo in ALGORITHMS else ()
    if m := _NEW.match(base):
        return ("tree",) if m.group(1) == "TREE" else ("ring", "nvls", "nvls_tree")
    return ALGORITHMS if _GENERIC.match(base) else ()


def _halvings(threads: int) -> list[int]:
    """``threads`` and what NCCL's loop halves it to for smaller messages (while a multiple of 128)."""
    out = [threads]
    while out[-1] % 128 == 0:
        out.append(out[-1] // 2)
    return out


def block_sizes(algorithm: str, protocol: str, version: tuple[int, int]) -> frozenset[int]:
    """The block sizes NCCL ``version`` launches an (algorithm, protocol) with (module docstring)."""
    if algorithm in ("nvls", "nvls_tree"):
        sizes = [640] if protocol == "simple" else []
    elif algorithm == "tree" and version >= (2, 23):
        sizes = [640]
    elif protocol == "ll128":
        sizes = _halvings(640)
    elif protocol == "ll":
        sizes = _halvings(512)
    elif algorithm == "ring":
        sizes = [t + _WARP for t in _halvings(512) + _halvings(256)]
    else:  # tree Simple before 2.23
        sizes = [t + 4 * _WARP for t in _halvings(512)]
    floor = 4 * _WARP if version >= (2, 22) else 3 * _WARP
    return frozenset(max(t, floor) for t in sizes)


def candidates(name: str, block: tuple[int, ...] | None, nccl_version: str | None) -> tuple[tuple[str, str], ...]:
    """The (algorithm, protocol) pairs an NCCL launch of kernel ``name`` with ``block`` threads
    can have run under ``nccl_version`` (the profile's; None: any release its naming allows).
    A block no default thread count gives (``NCCL_NTHREADS`` set), or none, rules nothing out."""
    algos = _named_algorithms(name)
    m = re.match(r"(\d+)\.(\d+)", nccl_version or "")
    old = _OLD.match(_base(name)) is not None  # without a version: the releases the kernel's naming allows
    versions = [(int(m.group(1)), int(m.group(2)))] if m else [(2, 18)] if old else [(2, 19), (2, 22), (2, 23)]
    named = [(a, p) for a in algos for p in PROTOCOLS if a in ("ring", "tree") or p == "simple"]
    fits = [(a, p) for a, p in named if block and any(block[0] in block_sizes(a, p, ver) for ver in versions)]
    return tuple(fits or named)


def ran(name: str, block: tuple[int, ...] | None, nccl_version: str | None) -> tuple[str | None, str | None, str]:
    """The algorithm and the protocol an NCCL launch ran, each None where :func:`candidates`
    leaves more than one (or none), and the candidates as text: ``ring/simple``, ``tree/?``
    (one algorithm, its protocol open), ``ring/ll128 or nvls/simple`` (up to three pairs), ``?``."""
    pairs = candidates(name, block, nccl_version)
    algos, protos = {a for a, _ in pairs}, {p for _, p in pairs}
    algorithm, protocol = (algos.pop() if len(algos) == 1 else None, protos.pop() if len(protos) == 1 else None)
    if algorithm is not None:
        text = f"{algorithm}/{protocol or '?'}"
    else:
        text = " or ".join(f"{a}/{p}" for a, p in pairs) if 0 < len(pairs) <= 3 else "?"
    return algorithm, protocol, text


def launch(op: GpuOp, prof: KinetoProfile) -> tuple[int | None, str | None, str | None, str]:
    """One NCCL launch of a profile: its elements (``In msg nelems``; None where not an integer)
    and what it ran (:func:`ran` of its name and block, under the profile's NCCL version and
    warp size)."""
    numel = (op.args or {}).get("In msg nelems")
    algorithm, protocol, text = ran(op.name, block_of(op.block, prof.device_properties),
                                    profile_version(prof.distributed_info))
    return int_or_none(numel), algorithm, protocol, text


def bus_bytes_per_s(size_bytes: int, time_s: float, world_size: int) -> float | None:
    """An all-reduce's bus bandwidth as nccl-tests reports it (``PERFORMANCE.md``: bytes / time x
    2(n-1)/n); None for one rank or no time."""
    if world_size < 2 or time_s <= 0:
        return None
    return size_bytes / time_s * 2 * (world_size - 1) / world_size
