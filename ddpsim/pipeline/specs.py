"""The small pieces of a scenario: the model to capture, the cluster, the simulation's knobs,
the sweep and its points, the validation block (``ddpsim.pipeline.scenario``'s schema).

Frozen keyword-only dataclasses holding values already checked by
:mod:`ddpsim.pipeline.scenario_check`; a :class:`SweepPoint` names itself with a stable
``point_id`` (``cap=25``, ``cap=default,hook=fp16``) used for file names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ddpsim.network.interference import Interference
from ddpsim.plan.planner import cap_point_id

_POINT_ID_RE = re.compile(r"[^A-Za-z0-9.=,_+-]")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Capture a trace from a bundled model instead of reading a trace file."""

    name: str
    batch_size: int = 8
    device: str = "cpu"
    iters: int = 5
    warmup: int = 2
    num_threads: int | None = 1
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """The modelled cluster: a topology (preset name or YAML path) with ``nodes`` and its
    options, or, with ``topology`` None, a plain latency + bandwidth model of every collective
    (:class:`ddpsim.network.comm_model.AlphaBetaModel`; ``latency_us`` and ``bandwidth_gbps``)."""

    topology: str | None = None
    nodes: int = 1
    options: Mapping[str, Any] = field(default_factory=dict)
    latency_us: float | None = None
    bandwidth_gbps: float | None = None

    @property
    def label(self) -> str:
        """The topology, or the latency + bandwidth model in words."""
        if self.topology is not None:
            return self.topology
        return f"{self.latency_us:g} us + bytes / {self.bandwidth_gbps:g} GB/s"

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))


@dataclass(frozen=True, kw_only=True)
class SimulationSpec:
    iterations: int = 6
    warmup: int | None = None
    seed: int = 0
    jitter: str | float = "trace"
    stragglers: Mapping[int, float] = field(default_factory=dict)
    no_sync_steps: int = 0
    interference: Interference | None = None
    compute_statistic: str = "median"
    #: memory bandwidth of gradient copy-in/out; None: the calibration's, else the topology's
    copy_bandwidth_gbps: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stragglers", dict(self.stragglers))


@dataclass(frozen=True, kw_only=True)
class ValidationSpec:
    """What ``ddpsim validate`` runs for real (read by the executor side).

    ``bucket_cap_mb``: caps to run for real (None: the sweep's caps); a tuple in it is a
    ``bucket_cap_mb_list`` point. ``model``: a bundled
    model name (default: the scenario's model or the trace's model).
    """

    model: str | None = None
    batch_size: int | None = None
    iterations: int = 20
    warmup: int = 5
    num_threads: int | None = None
    device: str | None = None
    bucket_cap_mb: tuple[float | None, ...] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))


@dataclass(frozen=True, kw_only=True, order=False)
class SweepPoint:
    """One point of a sweep: the values that differ from point to point."""

    bucket_cap_mb: float | None = None
    find_unused_parameters: bool = False
    gradient_as_bucket_view: bool = False
    comm_hook: str = "none"
    nodes: int = 1
    #: which of the fields above the sweep varies (they appear in the point id)
    varied: tuple[str, ...] = ("bucket_cap_mb",)
    #: a bucket_cap_mb_list point (bucket_cap_mb is then None); part of the cap dimension
    bucket_cap_mb_list: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.bucket_cap_mb_list is not None:
            object.__setattr__(self, "bucket_cap_mb_list", tuple(self.bucket_cap_mb_list))

    @property
    def is_default_cap(self) -> bool:
        """Neither bucket_cap_mb nor bucket_cap_mb_list given: DDP's default."""
        return self.bucket_cap_mb is None and not self.bucket_cap_mb_list

    @property
    def cap_label(self) -> str:
        return cap_point_id(self.bucket_cap_mb, self.bucket_cap_mb_list).partition("=")[2]

    @property
    def point_id(self) -> str:
        parts = [cap_point_id(self.bucket_cap_mb, self.bucket_cap_mb_list)]
        if "find_unused_parameters" in self.varied:
            parts.append(f"find_unused={str(self.find_unused_parameters).lower()}")
        if "gradient_as_bucket_view" in self.varied:
            parts.append(f"gabv={str(self.gradient_as_bucket_view).lower()}")
        if "comm_hook" in self.varied:
            parts.append(f"hook={self.comm_hook}")
        if "nodes" in self.varied:
            parts.append(f"nodes={self.nodes}")
        return _POINT_ID_RE.sub("_", ",".join(parts))

    def as_dict(self) -> dict[str, Any]:
        return {"point": self.point_id, "bucket_cap_mb": self.bucket_cap_mb,
                **({"bucket_cap_mb_list": list(self.bucket_cap_mb_list)} if self.bucket_cap_mb_list else {}),
                "find_unused_parameters": self.find_unused_parameters,
                "gradient_as_bucket_view": self.gradient_as_bucket_view,
                "comm_hook": self.comm_hook, "nodes": self.nodes}


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    bucket_cap_mb: tuple[float | None, ...] = (None,)
    bucket_cap_mb_list: tuple[tuple[float, ...], ...] = ()
    find_unused_parameters: tuple[bool, ...] | None = None
    gradient_as_bucket_view: tuple[bool, ...] | None = None
    comm_hook: tuple[str, ...] | None = None
    nodes: tuple[int, ...] | None = None
