"""The interface between collective cost models and the engine.

A :class:`CommModel` is bound to one process group (a backend and a number of ranks) and
answers how long one collective of ``size_bytes`` takes, in seconds. The NCCL and gloo
models live in :mod:`ddpsim.network.collective_cost`; :class:`AlphaBetaModel` is the plain
``latency + bytes / bandwidth`` model used by hand-made tests and examples.
:class:`CollectiveEstimate` (:func:`make_estimate`) is one collective's cost as every model
answers it, analytical or calibrated (:mod:`ddpsim.calibration.loader`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ddpsim.errors import InputError

GBPS = 1e9  # NCCL / nccl-tests "GB/s": 1e9 bytes per second


@runtime_checkable
class CommModel(Protocol):
    """Duration of collectives on one process group. All methods are pure."""

    backend: str
    num_ranks: int

    def allreduce_s(self, size_bytes: int) -> float:
        """Seconds for one all-reduce of ``size_bytes`` (the buffer size, as nccl-tests counts)."""

    def broadcast_s(self, size_bytes: int) -> float:
        """Seconds for one broadcast of ``size_bytes`` from rank 0."""

    def describe(self) -> dict[str, Any]:
        """A JSON-able description (model kind, constants, calibration used)."""


@dataclass(frozen=True, kw_only=True)
class AlphaBetaModel:
    """``time = latency_s + size_bytes / bandwidth_bytes_per_s`` for every collective."""

    latency_s: float
    bandwidth_bytes_per_s: float = math.inf
    num_ranks: int = 2
    backend: str = "alpha-beta"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0):
            raise InputError(f"latency_s: {self.latency_s!r} is not accepted; expected a finite number >= 0")
        if not self.bandwidth_bytes_per_s > 0:
            raise InputError(f"bandwidth_bytes_per_s: {self.bandwidth_bytes_per_s!r} is not accepted; expected > 0")
        if self.num_ranks < 1:
            raise InputError(f"num_ranks: {self.num_ranks!r} is not accepted; expected an integer >= 1")

    def allreduce_s(self, size_bytes: int) -> float:
        return self.latency_s + size_bytes / self.bandwidth_bytes_per_s

    def broadcast_s(self, size_bytes: int) -> float:
        return self.latency_s + size_bytes / self.bandwidth_bytes_per_s

    def describe(self) -> dict[str, Any]:
        return {"model": "alpha-beta", "latency_s": self.latency_s,
                "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "num_ranks": self.num_ranks}


@dataclass(frozen=True, kw_only=True)
class CollectiveEstimate:
    """One collective's predicted cost, as nccl-tests prints it (§2.7).

    ``algbw_gbps = size / time``; all-reduce ``busbw_gbps = algbw * 2(n-1)/n``,
    broadcast ``busbw = algbw``. GB/s = 1e9 bytes/s.
    """

    size_bytes: int
    time_s: float
    algorithm: str
    protocol: str
    algbw_gbps: float
    busbw_gbps: float

    def as_dict(self) -> dict[str, Any]:
        return {"size_bytes": self.size_bytes, "time_s": self.time_s, "algbw_gbps": self.algbw_gbps,
                "busbw_gbps": self.busbw_gbps, "algorithm": self.algorithm, "protocol": self.protocol}


def make_estimate(size_bytes: int, time_s: float, num_ranks: int, algorithm: str, protocol: str,
                  coll: str = "allreduce") -> CollectiveEstimate:
    algbw = size_bytes / time_s / GBPS if time_s > 0 else 0.0
    factor = 2.0 * (num_ranks - 1) / num_ranks if coll == "allreduce" else 1.0
    return CollectiveEstimate(size_bytes=int(size_bytes), time_s=float(time_s), algorithm=algorithm,
                              protocol=protocol, algbw_gbps=algbw, busbw_gbps=algbw * factor)
