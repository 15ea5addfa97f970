"""A scenario's sweep: its axes (:class:`SweepSpec`, resolved from the file's ``sweep``
section by :meth:`ddpsim.pipeline.scenario_schema.SweepSection.resolve`) and its points.

Frozen keyword-only dataclasses; a :class:`SweepPoint` names itself with a stable
``point_id`` (``cap=25``, ``cap=default,hook=fp16``) used for file names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ddpsim.plan.planner import cap_point_id

_POINT_ID_RE = re.compile(r"[^A-Za-z0-9.=,_+-]")


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
    #: round-robin communicators (``ddp.process_groups``)
    process_groups: int = 1

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
        if "process_groups" in self.varied:
            parts.append(f"pg={self.process_groups}")
        return _POINT_ID_RE.sub("_", ",".join(parts))

    def as_dict(self) -> dict[str, Any]:
        return {"point": self.point_id, "bucket_cap_mb": self.bucket_cap_mb,
                **({"bucket_cap_mb_list": list(self.bucket_cap_mb_list)} if self.bucket_cap_mb_list else {}),
                "find_unused_parameters": self.find_unused_parameters,
                "gradient_as_bucket_view": self.gradient_as_bucket_view,
                "comm_hook": self.comm_hook, "nodes": self.nodes,
                **({"process_groups": self.process_groups} if self.process_groups != 1 else {})}


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """The values the sweep's points take: caps (None: DDP's default, always first), cap lists,
    and the other knobs (None: the scenario's own value)."""

    bucket_cap_mb: tuple[float | None, ...] = (None,)
    bucket_cap_mb_list: tuple[tuple[float, ...], ...] = ()
    find_unused_parameters: tuple[bool, ...] | None = None
    gradient_as_bucket_view: tuple[bool, ...] | None = None
    comm_hook: tuple[str, ...] | None = None
    nodes: tuple[int, ...] | None = None
    process_groups: tuple[int, ...] | None = None
