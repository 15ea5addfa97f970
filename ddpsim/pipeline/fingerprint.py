"""What a stored point was simulated from, as one hash: the resume key. It covers everything the
engine received, read from the built inputs (never from an echo of the scenario file): the
trace's content, the plan, the comm model with every field (a calibration's curves, not its
path), the whole :class:`~ddpsim.engine.config.SimConfig`, the same for each uncertainty
re-simulation, and ddpsim's source. :func:`canonical` makes them plain JSON (floats exactly, by
``float.hex``) and raises ``TypeError`` on an object it cannot read rather than skip it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any, Iterable

@functools.cache
def code_fingerprint() -> str:
    """A hash of ddpsim's source, read once per process: a stored point is reused only by the same code."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]  # the ddpsim package
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def canonical(obj: Any) -> Any:
    """``obj`` as JSON values that two equal inputs share and two different ones do not;
    TypeError on an object of a kind it does not know how to read."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return {"float": obj.hex()} if math.isfinite(obj) else {"float": repr(obj)}
    if isinstance(obj, enum.Enum):
        return {"enum": f"{type(obj).__qualname__}.{obj.name}"}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"type": type(obj).__qualname__,
                "fields": {f.name: canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if isinstance(obj, Mapping):
        items = [(json.dumps(canonical(k), sort_keys=True), canonical(v)) for k, v in obj.items()]
        return {"map": sorted(items, key=lambda kv: kv[0])}
    if isinstance(obj, (list, tuple)):
        return [canonical(x) for x in obj]
    if isinstance(obj, (set, frozenset)):
        return {"set": sorted((canonical(x) for x in obj), key=lambda x: json.dumps(x, sort_keys=True))}
    if isinstance(obj, PurePath):
        return {"path": obj.as_posix()}
    # numpy, pydantic and networkx values; anything else is refused
    mod = type(obj).__module__.split(".")[0]
    if mod == "numpy":
        import numpy as np

        if isinstance(obj, np.ndarray):
            return {"ndarray": [str(obj.dtype), list(obj.shape), hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()]}
        if isinstance(obj, np.generic):
            return canonical(obj.item())
    if mod == "pydantic" or hasattr(type(obj), "model_dump"):
        return {"type": type(obj).__qualname__, "model": canonical(obj.model_dump())}
    if mod == "networkx":
        return {"graph": canonical(dict(obj.graph)),
                "nodes": sorted(([canonical(n), canonical(d)] for n, d in obj.nodes(data=True)), key=_json),
                "edges": sorted(([canonical(u), canonical(v), canonical(d)] for u, v, d in obj.edges(data=True)), key=_json)}
    raise TypeError(f"resume key: cannot read a {type(obj).__module__}.{type(obj).__qualname__}")


def _json(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


def digest(obj: Any) -> str:
    """The sha256 of :func:`canonical` ``(obj)``, in hex."""
    return hashlib.sha256(_json(canonical(obj)).encode()).hexdigest()


def engine_runs_key(point: Any, runs: Iterable[tuple[Any, Any, Any, Any]], labels: Iterable[str] = (),
                    traces: dict[int, tuple[Any, str]] | None = None) -> str:
    """The resume key of one point: ``point`` (its values, as the record stores them), every
    ``(trace, plan, comm, config)`` the engine is given for it (the point's own run first, then
    its re-simulations, named by ``labels``) and the code's fingerprint. ``traces`` (``id(obj) ->
    (obj, hash)``, the object held so its id is not reused) keeps the hash of each object the
    runs and points of one sweep share."""
    from ddpsim import __version__

    seen = {} if traces is None else traces

    def digest_of(obj: Any) -> str:  # computed once per object held in ``seen``
        if id(obj) not in seen:
            seen[id(obj)] = (obj, digest(obj))
        return seen[id(obj)][1]

    parts = [[digest_of(x) for x in run] for run in runs]
    blob = _json({"point": canonical(point), "runs": parts, "labels": list(labels), "version": __version__,
                  "code": code_fingerprint()})
    return hashlib.sha256(blob.encode()).hexdigest()[:20]

