"""A scenario's sweep points (the product of the file's ``sweep`` section,
:class:`ddpsim.pipeline.scenario_schema.SweepSection`, made by
:meth:`ddpsim.pipeline.scenario.Scenario.points`).

A :class:`SweepPoint` (a frozen keyword-only dataclass) names itself with a stable
``point_id`` (``cap=25``, ``cap=default,hook=fp16``) used for file names.

The axes beyond DDP's constructor options and the cluster's nodes are generic: a ``ddp`` key
that is also a sweep axis and a field of :class:`~ddpsim.engine.config.SimConfig` of the same
name (round-robin communicators) is carried as a ``(key, value)`` pair of ``settings``, named
in a point id by its initials (``pg=2``), and reaches the engine's config by its name; a value
at the config's default is left out, so a point reads the same whether it names it or not.
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, dataclass
from typing import Any, Iterable, Sequence

from ddpsim.engine.config import SimConfig
from ddpsim.plan.planner import cap_point_id

_POINT_ID_RE = re.compile(r"[^A-Za-z0-9.=,_+-]")
#: an axis's name in a point id (a generic axis: its initials, :func:`_initials`)
_LABELS = {"find_unused_parameters": "find_unused", "gradient_as_bucket_view": "gabv", "comm_hook": "hook", "nodes": "nodes"}


@dataclass(frozen=True, kw_only=True, order=False)
class SweepPoint:
    """One point of a sweep: the values that differ from point to point."""

    bucket_cap_mb: float | None = None
    find_unused_parameters: bool = False
    gradient_as_bucket_view: bool = False
    comm_hook: str = "none"
    nodes: int = 1
    #: the axes the sweep varies, the cap first (they appear in the point id, in this order)
    varied: tuple[str, ...] = ("bucket_cap_mb",)
    #: a bucket_cap_mb_list point (bucket_cap_mb is then None); part of the cap dimension
    bucket_cap_mb_list: tuple[float, ...] | None = None
    #: the generic axes' values, engine settings (:func:`engine_settings`)
    settings: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.bucket_cap_mb_list is not None:
            object.__setattr__(self, "bucket_cap_mb_list", tuple(self.bucket_cap_mb_list))
        object.__setattr__(self, "settings", engine_settings(self.settings))

    def value(self, key: str) -> Any:
        """The point's value of axis ``key`` (a setting it leaves out: the engine's default)."""
        if key in self.__dataclass_fields__:
            return getattr(self, key)
        return setting(self.settings, key)

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
        for k in self.varied[1:]:
            v = self.value(k)
            parts.append(f"{_LABELS.get(k) or _initials(k)}={str(v).lower() if isinstance(v, bool) else v}")
        return _POINT_ID_RE.sub("_", ",".join(parts))

    def as_dict(self) -> dict[str, Any]:
        return {"point": self.point_id, "bucket_cap_mb": self.bucket_cap_mb,
                **({"bucket_cap_mb_list": list(self.bucket_cap_mb_list)} if self.bucket_cap_mb_list else {}),
                "find_unused_parameters": self.find_unused_parameters,
                "gradient_as_bucket_view": self.gradient_as_bucket_view,
                "comm_hook": self.comm_hook, "nodes": self.nodes, **dict(self.settings)}

    @classmethod
    def from_dict(cls, d: dict[str, Any], varied: tuple[str, ...]) -> "SweepPoint":
        """The point :meth:`as_dict` wrote (its other keys: settings)."""
        named = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**named, varied=varied, settings=tuple((k, v) for k, v in d.items() if k not in named and k != "point"))


def is_setting(key: str) -> bool:
    """A sweep axis carried generically, as an engine setting: no field of :class:`SweepPoint`."""
    return key not in SweepPoint.__dataclass_fields__


#: the engine config's fields and defaults: what a generic axis may name
_SETTING_DEFAULTS = {k: f.default for k, f in SimConfig.__dataclass_fields__.items() if f.default is not MISSING}


def engine_settings(pairs: Any) -> tuple[tuple[str, Any], ...]:
    """``(key, value)`` pairs of engine settings, those at the engine's default left out."""
    return tuple((k, v) for k, v in pairs if v != _SETTING_DEFAULTS[k])


def setting(pairs: tuple[tuple[str, Any], ...], key: str) -> Any:
    """The value of engine setting ``key`` in ``pairs`` (:func:`engine_settings`), else its default."""
    return dict(pairs).get(key, _SETTING_DEFAULTS[key])


def _initials(key: str) -> str:
    """A generic axis's name in a point id: its words' initials (``a_b_c`` -> ``abc``)."""
    return "".join(w[0] for w in key.split("_"))


def crossed(dims: Sequence[tuple[str, Sequence[Any]]], indices: Iterable[int] | None = None) -> list[tuple[tuple[str, Any], ...]]:
    """The product of the axes ``dims`` (name, values), the first outermost, each point as its
    (name, value) pairs: every point, or those at the flat positions ``indices`` (a sample).
    A sweep's points (:meth:`ddpsim.pipeline.scenario.Scenario.points`) and a design space's
    (:func:`ddpsim.pipeline.explore.space_points`) are both made here."""
    sizes = [len(v) for _, v in dims]
    out = []
    for flat in range(math.prod(sizes)) if indices is None else indices:
        digits = []
        for size in reversed(sizes):
            flat, d = divmod(flat, size)
            digits.append(d)
        out.append(tuple((name, v[d]) for (name, v), d in zip(dims, reversed(digits))))
    return out
