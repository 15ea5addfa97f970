"""The interface between collective cost models and the engine: a :class:`CommModel` is bound to one
process group and answers how long one collective of ``size_bytes`` takes, in seconds, plus the optional
*capabilities* (:data:`CAPABILITIES`) the engine reads, defaulted for analytical models and overridden by
a calibrated one (:mod:`ddpsim.calibration.loader`).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

from ddpsim.errors import require

GBPS = 1e9  # NCCL / nccl-tests "GB/s": 1e9 bytes per second


#: the optional members of :class:`CommModel`, each with a default there
CAPABILITIES = ("comm_lanes", "concurrent_rate", "idle_launch_extra_s", "ddp_forward_factor",
                "iteration_overhead_s", "broadcast_per_tensor_s")


@runtime_checkable
class CommModel(Protocol):
    """Duration of collectives on one process group (pure methods): ``backend``, ``num_ranks``,
    :meth:`allreduce_s`, :meth:`broadcast_s` and :meth:`describe` required; the capabilities
    (:data:`CAPABILITIES`) default as below for a model that subclasses it (PEP 544)."""

    backend: str
    num_ranks: int
    #: collectives of the process group that progress at once: ProcessGroupGloo's worker
    #: threads (``_Options._threads``); 1 is one in-order stream (NCCL's, every analytical model)
    comm_lanes: int = 1
    #: ``f(size_bytes) -> seconds`` an all-reduce launched onto an idle stream and waited for
    #: costs beyond :meth:`allreduce_s`; None: nothing extra
    idle_launch_extra_s: Callable[[int], float] | None = None
    #: the engine multiplies every forward by it
    ddp_forward_factor: float = 1.0
    #: DDP's fixed cost per synchronised step (Python pre/post-forward, reducer bookkeeping)
    iteration_overhead_s: float = 0.0
    #: DDP's forward buffer broadcast, per buffer beyond the broadcast itself (flatten, copy back)
    broadcast_per_tensor_s: float = 0.0

    def allreduce_s(self, size_bytes: int) -> float:
        """Seconds for one all-reduce of ``size_bytes`` (the buffer size, as nccl-tests counts)."""

    def broadcast_s(self, size_bytes: int) -> float:
        """Seconds for one broadcast of ``size_bytes`` from rank 0."""

    def describe(self) -> dict[str, Any]:
        """A JSON-able description (model kind, constants, calibration used)."""

    def concurrent_rate(self, kind: str | None, size_bytes: int, n: int) -> float:
        """The pace of one collective of ``kind`` and ``size_bytes`` while ``n`` progress at
        once, as a fraction of its pace alone (used only with ``comm_lanes > 1``): 1."""
        return 1.0


class EstimatingCommModel(CommModel):
    """A model whose times are its ``estimate_allreduce``/``estimate_broadcast``'s estimates'."""

    def allreduce_s(self, size_bytes: int) -> float:
        return self.estimate_allreduce(size_bytes).time_s

    def broadcast_s(self, size_bytes: int) -> float:
        return self.estimate_broadcast(size_bytes).time_s


class WrappedCommModel(CommModel):
    """A comm model that changes another's collective times: every capability of the wrapped
    model (:attr:`wrapped`) comes through unchanged, and so do ``backend``, ``num_ranks`` and broadcasts."""

    wrapped: Any

    def broadcast_s(self, size_bytes: int) -> float:
        return self.wrapped.broadcast_s(size_bytes)

    def concurrent_rate(self, kind: str | None, size_bytes: int, n: int) -> float:
        return self.wrapped.concurrent_rate(kind, size_bytes, n)


for _name in ("backend", "num_ranks", *CAPABILITIES):
    if _name != "concurrent_rate":
        setattr(WrappedCommModel, _name, property(operator.attrgetter(f"wrapped.{_name}")))
del _name


@dataclass(frozen=True, kw_only=True)
class AlphaBetaModel(CommModel):
    """``time = latency_s + size_bytes / bandwidth_bytes_per_s`` for every collective."""

    latency_s: float
    bandwidth_bytes_per_s: float = math.inf
    num_ranks: int = 2
    backend: str = "alpha-beta"

    def __post_init__(self) -> None:
        require(math.isfinite(self.latency_s) and self.latency_s >= 0, "latency_s", self.latency_s,
                "a finite number >= 0")
        require(self.bandwidth_bytes_per_s > 0, "bandwidth_bytes_per_s", self.bandwidth_bytes_per_s,
                "> 0")
        require(self.num_ranks >= 1, "num_ranks", self.num_ranks, "an integer >= 1")

    def allreduce_s(self, size_bytes: int) -> float:
        return self.latency_s + size_bytes / self.bandwidth_bytes_per_s

    broadcast_s = allreduce_s

    def describe(self) -> dict[str, Any]:
        return {"model": "alpha-beta", "latency_s": self.latency_s,
                "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "num_ranks": self.num_ranks}


@dataclass(frozen=True, kw_only=True)
class CollectiveEstimate:
    """One collective's predicted cost as nccl-tests prints it (doc/PERFORMANCE.md): ``algbw = size /
    time``, all-reduce ``busbw = algbw * 2(n-1)/n``, broadcast ``busbw = algbw``; GB/s = 1e9 B/s."""

    size_bytes: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    algorithm: str
    protocol: str


def make_estimate(size_bytes: int, time_s: float, num_ranks: int, algorithm: str, protocol: str,
                  coll: str = "allreduce") -> CollectiveEstimate:
    algbw = size_bytes / time_s / GBPS if time_s > 0 else 0.0
    factor = 2.0 * (num_ranks - 1) / num_ranks if coll == "allreduce" else 1.0
    return CollectiveEstimate(size_bytes=int(size_bytes), time_s=float(time_s), algorithm=algorithm,
                              protocol=protocol, algbw_gbps=algbw, busbw_gbps=algbw * factor)
