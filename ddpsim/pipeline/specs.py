"""A point of a sweep or of a design space: its value per axis (the caps and cap lists one
``cap`` axis of ``(bucket_cap_mb, bucket_cap_mb_list)`` pairs), the product of the axes
(:func:`crossed`), and the stable ``point_id`` named by the axes it varies (``cap=25``,
``cap=default,hook=fp16``, ``system=dgx-h100,nodes=2,cap=25``); axes that are fields of
:class:`~ddpsim.engine.config.SimConfig` reach the engine as :attr:`Point.settings`.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import MISSING, dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from ddpsim.engine.config import SimConfig
from ddpsim.plan.planner import cap_point_id

_POINT_ID_RE = re.compile(r"[^A-Za-z0-9.=,_+-]")
#: a sweep axis's label in a point id (another axis: its words' initials, :func:`sweep_label`)
_LABELS = {"find_unused_parameters": "find_unused", "gradient_as_bucket_view": "gabv", "comm_hook": "hook", "nodes": "nodes"}
#: the axes the engine's inputs read by name (:mod:`ddpsim.pipeline.inputs`); the others are settings
_INPUT_AXES = ("cap", "find_unused_parameters", "gradient_as_bucket_view", "comm_hook", "nodes")
#: the engine config's fields and defaults: what a setting may name
_SETTING_DEFAULTS = {k: f.default for k, f in SimConfig.__dataclass_fields__.items() if f.default is not MISSING}


@dataclass(frozen=True, kw_only=True)
class Point:
    """One point: its ``(axis, value)`` pairs in the product's order, and the ``(axis, label)``
    pairs of the axes its id names, in the id's order."""

    values: tuple[tuple[str, Any], ...]
    named: tuple[tuple[str, str], ...] = (("cap", "cap"),)

    def value(self, axis: str, default: Any = None) -> Any:
        return next((v for k, v in self.values if k == axis), default)

    def with_value(self, axis: str, value: Any) -> Point:
        """This point with ``axis`` (one of its axes) set to ``value``."""
        return replace(self, values=tuple((k, value if k == axis else v) for k, v in self.values))

    cap = property(lambda self: self.value("cap", (None, None)))
    bucket_cap_mb = property(lambda self: self.cap[0])
    #: a cap list (a tuple; bucket_cap_mb is then None), or None
    bucket_cap_mb_list = property(lambda self: self.cap[1])
    find_unused_parameters = property(lambda self: self.value("find_unused_parameters"))
    gradient_as_bucket_view = property(lambda self: self.value("gradient_as_bucket_view"))
    comm_hook = property(lambda self: self.value("comm_hook"))
    nodes = property(lambda self: self.value("nodes"))

    @property
    def settings(self) -> tuple[tuple[str, Any], ...]:
        """The engine settings among the axes, ``(key, value)``, those at the engine's default left out."""
        return tuple((k, v) for k, v in self.values if is_setting(k) and v != _SETTING_DEFAULTS[k])

    @property
    def is_default_cap(self) -> bool:
        """Neither bucket_cap_mb nor bucket_cap_mb_list given: DDP's default."""
        return self.bucket_cap_mb is None and not self.bucket_cap_mb_list

    @property
    def point_id(self) -> str:
        return _POINT_ID_RE.sub("_", ",".join(cap_point_id(*self.cap) if axis == "cap" else
                                              f"{label}={_value_label(self.value(axis))}" for axis, label in self.named))

    def as_dict(self) -> dict[str, Any]:
        """The point as JSON: its id, the cap as ``bucket_cap_mb`` (and ``bucket_cap_mb_list``), its other axes."""
        cap, cap_list = self.cap
        return {"point": self.point_id, "bucket_cap_mb": cap, **({"bucket_cap_mb_list": list(cap_list)} if cap_list else {}),
                **{k: v for k, v in self.values if k != "cap"}}

    @classmethod
    def from_dict(cls, d: dict[str, Any], named: Sequence[Sequence[str]]) -> Point:
        """The point :meth:`as_dict` wrote, naming the axes ``named``."""
        cap = (d["bucket_cap_mb"], tuple(d["bucket_cap_mb_list"]) if d.get("bucket_cap_mb_list") else None)
        rest = tuple((k, v) for k, v in d.items() if k not in ("point", "bucket_cap_mb", "bucket_cap_mb_list"))
        return cls(values=(("cap", cap), *rest), named=tuple((a, b) for a, b in named))


def _value_label(v: Any) -> str:
    """A value in a point id: null ``default``, a YAML path its stem, a string as written, else JSON."""
    if v is None:
        return "default"
    if isinstance(v, str):
        return Path(v).stem if v.endswith((".yaml", ".yml")) else v
    return json.dumps(v)


def sweep_label(axis: str) -> str:
    """A sweep axis's label in a point id: :data:`_LABELS`, else its words' initials (``a_b_c`` -> ``abc``)."""
    return _LABELS.get(axis) or "".join(w[0] for w in axis.split("_"))


def is_setting(axis: str) -> bool:
    """A sweep axis the engine reads as a setting (:attr:`Point.settings`): no input axis, a config field."""
    return axis not in _INPUT_AXES and axis in _SETTING_DEFAULTS


def crossed(dims: Sequence[tuple[str, Sequence[Any]]], indices: Iterable[int] | None = None) -> list[tuple[tuple[str, Any], ...]]:
    """The product of the axes ``dims`` (name, values), the first outermost, each point as its
    (name, value) pairs: every point, or those at the flat positions ``indices`` (a sample); a
    sweep's points and a design space's alike."""
    if indices is None:
        return list(itertools.product(*([(name, v) for v in vals] for name, vals in dims)))
    import numpy as np

    flat = list(indices)
    digits = np.unravel_index(flat, [len(v) for _, v in dims]) if flat else ()
    return [tuple((name, vals[int(d)]) for (name, vals), d in zip(dims, ds)) for ds in zip(*digits)]
