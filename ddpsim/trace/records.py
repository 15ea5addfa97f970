"""The trace: what one real training step of a model looks like on one device.

A trace is produced by :mod:`ddpsim.trace.capture` (``ddpsim trace``) and consumed by the
planner, the engine and the executor. It is a versioned JSON file::

    {"format": "ddpsim-trace", "version": 1,
     "model": "gpt2-124m", "command": "ddpsim trace --model gpt2-124m ...",
     "environment": {"device": "cpu", "device_name": ..., "torch_version": ..., "batch_size": 2, ...},
     "params":  [{"index": 0, "name": "wte.weight", "shape": [50257, 768], "dtype": "float32",
                  "size_bytes": 154389504, "expect_sparse_gradient": false, "has_grad": true}, ...],
     "buffers": [{"name": "bn1.running_mean", "dtype": "float32", "size_bytes": 256}, ...],
     "grad_ready_order": [147, 146, ...],
     "iterations": [{"forward_s": .., "backward_s": .., "optimizer_s": .., "zero_grad_s": ..,
                     "grad_ready_s": [0.0123, ..., null]}, ...],
     "hook_overhead_frac": 0.004,
     "synthetic": null}

Modelling assumptions, stated once:

* ``params`` are exactly the parameters DDP's reducer gets, in DDP's own order
  (``_build_params_for_reducer``: ``named_modules()``, ``named_parameters(recurse=False)``,
  ``requires_grad``, shared parameters once). ``index`` is the position in that list.
* ``grad_ready_s[i]`` is the time, in seconds after the start of the backward call, at which
  parameter ``i``'s post-accumulate-grad hook fired (on CUDA: a recorded event); ``null``
  when parameter ``i`` got no gradient in that iteration.
* ``grad_ready_order`` is the order in which the hooks fired in the measured iterations: the
  order DDP records to rebuild its buckets. Parameters that never got a gradient are absent.
* ``backward_s`` runs from the start of the backward call to its return (all hooks done).
* ``synthetic`` is null for a measured trace, else a dict saying how the times were derived
  (retimed for another device, derived from a reduced-depth capture, hand-made).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from ddpsim.errors import InputError
from ddpsim.formats import quantile
from ddpsim.units import DTYPE_SIZE_BYTES, dtype_size_bytes

TRACE_FORMAT = "ddpsim-trace"
TRACE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class ParamRecord:
    """One parameter the reducer sees, at position ``index`` of DDP's parameter list."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    size_bytes: int
    expect_sparse_gradient: bool = False
    has_grad: bool = True

    def __post_init__(self) -> None:
        _check_int(self.index, "param.index", minimum=0)
        _check_int(self.size_bytes, f"params[{self.index}].size_bytes", minimum=0)
        dtype_size_bytes(self.dtype, f"params[{self.index}].dtype")
        object.__setattr__(self, "shape", tuple(self.shape))
        for d in self.shape:
            _check_int(d, f"params[{self.index}].shape", minimum=0)

    @property
    def numel(self) -> int:
        return self.size_bytes // DTYPE_SIZE_BYTES[self.dtype]


@dataclass(frozen=True, kw_only=True)
class BufferRecord:
    """A module buffer (broadcast from rank 0 before each forward when ``broadcast_buffers``)."""

    name: str
    dtype: str
    size_bytes: int

    def __post_init__(self) -> None:
        _check_int(self.size_bytes, f"buffers[{self.name}].size_bytes", minimum=0)
        dtype_size_bytes(self.dtype, f"buffers[{self.name}].dtype")


@dataclass(frozen=True, kw_only=True)
class IterationSample:
    """Timings of one measured iteration on one device, in seconds."""

    forward_s: float
    backward_s: float
    optimizer_s: float
    zero_grad_s: float = 0.0
    grad_ready_s: tuple[float | None, ...]

    def __post_init__(self) -> None:
        for name in ("forward_s", "backward_s", "optimizer_s", "zero_grad_s"):
            _check_time(getattr(self, name), f"iterations[].{name}")
        object.__setattr__(self, "grad_ready_s", tuple(self.grad_ready_s))
        for i, t in enumerate(self.grad_ready_s):
            if t is not None:
                _check_time(t, f"iterations[].grad_ready_s[{i}]")


@dataclass(frozen=True, kw_only=True)
class PhaseStats:
    """Median, mean and spread of one phase across the measured iterations."""

    median_s: float
    p10_s: float
    p90_s: float
    mean_s: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> "PhaseStats":
        return cls(median_s=statistics.median(samples), p10_s=quantile(samples, 0.1), p90_s=quantile(samples, 0.9),
                   mean_s=statistics.fmean(samples))

    def stat(self, statistic: str) -> float:
        """The phase's ``"median"`` or ``"mean"`` (:data:`COMPUTE_STATISTICS`)."""
        return self.mean_s if check_compute_statistic(statistic) == "mean" else self.median_s


#: how the engine reads a trace's iterations: their median (robust to an outlying iteration: the
#: default) or their mean (what a mean step adds up: ``ddpsim validate``'s predictions)
COMPUTE_STATISTICS = ("median", "mean")


def check_compute_statistic(statistic: Any) -> str:
    """``statistic`` if it is one of :data:`COMPUTE_STATISTICS`.

    Raises:
        InputError: anything else (one line naming ``compute_statistic``).
    """
    if statistic not in COMPUTE_STATISTICS:
        raise InputError(f"compute_statistic: {statistic!r} is not accepted; expected one of {', '.join(COMPUTE_STATISTICS)}")
    return statistic


@dataclass(frozen=True, kw_only=True)
class Trace:
    """A validated trace. Build one with :func:`load_trace` or :func:`trace_from_dict`."""

    model: str
    params: tuple[ParamRecord, ...]
    buffers: tuple[BufferRecord, ...] = ()
    grad_ready_order: tuple[int, ...]
    iterations: tuple[IterationSample, ...]
    environment: dict[str, Any] = field(default_factory=dict)
    hook_overhead_frac: float | None = None
    synthetic: dict[str, Any] | None = None
    command: str | None = None
    version: int = TRACE_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "buffers", tuple(self.buffers))
        object.__setattr__(self, "grad_ready_order", tuple(self.grad_ready_order))
        object.__setattr__(self, "iterations", tuple(self.iterations))
        n = len(self.params)
        if n == 0:
            raise InputError("trace.params: [] is empty; expected at least one trainable parameter")
        for i, p in enumerate(self.params):
            if p.index != i:
                raise InputError(f"trace.params[{i}].index: {p.index} is out of order; expected {i} (DDP parameter order)")
        if not self.iterations:
            raise InputError("trace.iterations: [] is empty; expected at least one measured iteration")
        for k, it in enumerate(self.iterations):
            if len(it.grad_ready_s) != n:
                raise InputError(f"trace.iterations[{k}].grad_ready_s: has {len(it.grad_ready_s)} entries; expected {n} (one per parameter)")
        seen: set[int] = set()
        for idx in self.grad_ready_order:
            if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < n or idx in seen:
                raise InputError(f"trace.grad_ready_order: {idx!r} is not accepted; expected distinct parameter indices in [0, {n})")
            seen.add(idx)
        for p in self.params:
            if p.has_grad and p.index not in seen:
                raise InputError(f"trace.grad_ready_order: parameter {p.index} ({p.name}) has a gradient but is missing; expected every parameter with has_grad=true")
            if not p.has_grad and p.index in seen:
                raise InputError(f"trace.grad_ready_order: parameter {p.index} ({p.name}) has has_grad=false but is listed")

    # ---- derived figures -------------------------------------------------------------
    @property
    def num_params(self) -> int:
        return len(self.params)

    @property
    def total_param_bytes(self) -> int:
        return sum(p.size_bytes for p in self.params)

    @property
    def num_param_elements(self) -> int:
        return sum(p.numel for p in self.params)

    def phase(self, name: str) -> PhaseStats:
        """Stats of ``"forward"``, ``"backward"``, ``"optimizer"`` or ``"zero_grad"``."""
        return PhaseStats.of([getattr(it, f"{name}_s") for it in self.iterations])

    def median_grad_ready_s(self) -> tuple[float | None, ...]:
        """Per parameter, the median hook time after backward start (None if never ready)."""
        return self.grad_ready_stat_s("median")

    def grad_ready_stat_s(self, statistic: str) -> tuple[float | None, ...]:
        """Per parameter, the median or mean (:data:`COMPUTE_STATISTICS`) hook time after
        backward start (None if never ready)."""
        agg = statistics.fmean if check_compute_statistic(statistic) == "mean" else statistics.median
        out: list[float | None] = []
        for i in range(self.num_params):
            xs = [it.grad_ready_s[i] for it in self.iterations if it.grad_ready_s[i] is not None]
            out.append(agg(xs) if xs else None)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": TRACE_FORMAT,
            "version": self.version,
            "model": self.model,
            "command": self.command,
            "environment": self.environment,
            "params": [
                {"index": p.index, "name": p.name, "shape": list(p.shape), "dtype": p.dtype,
                 "size_bytes": p.size_bytes, "expect_sparse_gradient": p.expect_sparse_gradient,
                 "has_grad": p.has_grad}
                for p in self.params
            ],
            "buffers": [{"name": b.name, "dtype": b.dtype, "size_bytes": b.size_bytes} for b in self.buffers],
            "grad_ready_order": list(self.grad_ready_order),
            "iterations": [
                {"forward_s": it.forward_s, "backward_s": it.backward_s, "optimizer_s": it.optimizer_s,
                 "zero_grad_s": it.zero_grad_s, "grad_ready_s": list(it.grad_ready_s)}
                for it in self.iterations
            ],
            "hook_overhead_frac": self.hook_overhead_frac,
            "synthetic": self.synthetic,
        }


def pool_traces(traces: Sequence[Trace]) -> Trace:
    """One trace holding every iteration of ``traces`` (rounds of one model captured apart, so
    that a shared host's drift between rounds is in the samples); the first's other fields."""
    if not traces:
        raise InputError("traces: [] is empty; expected at least one trace to pool")
    first = traces[0]
    for k, t in enumerate(traces[1:], start=1):
        if t.model != first.model or [(p.name, p.shape, p.dtype) for p in t.params] != [
                (p.name, p.shape, p.dtype) for p in first.params]:
            raise InputError(f"traces[{k}].model: {t.model!r} ({t.num_params} parameters) differs from traces[0] "
                             f"({first.model!r}, {first.num_params}); expected rounds of one model")
    return replace(first, iterations=tuple(it for t in traces for it in t.iterations),
                   environment=dict(first.environment))


# ---- loading / saving ---------------------------------------------------------------------

def save_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as JSON atomically (a temp file renamed into place)."""
    from ddpsim.io import write_text_atomic

    return write_text_atomic(path, json.dumps(trace.to_dict(), indent=1, sort_keys=False) + "\n")


def load_trace(path: str | Path) -> Trace:
    """Load and validate a trace file. Raises InputError naming the file and the field."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"trace: {str(path)!r} does not exist or is not a file; expected a trace JSON written by 'ddpsim trace'")
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"trace {p}: not valid JSON ({exc}); expected a trace JSON written by 'ddpsim trace'") from None
    try:
        return trace_from_dict(data)
    except InputError as exc:
        raise InputError(f"trace {p}: {exc}") from None


def trace_from_dict(data: Any) -> Trace:
    """Validate a decoded trace JSON object and build a :class:`Trace`."""
    if not isinstance(data, dict):
        raise InputError(f"trace: top level is {type(data).__name__}; expected a JSON object")
    if data.get("format") != TRACE_FORMAT:
        raise InputError(f"trace.format: {data.get('format')!r} is not accepted; expected {TRACE_FORMAT!r}")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != TRACE_VERSION:
        raise InputError(f"trace.version: {data.get('version')!r} is not supported; expected {TRACE_VERSION}")
    params = [
        ParamRecord(
            index=_get(d, "index", int, f"params[{i}]"),
            name=_get(d, "name", str, f"params[{i}]"),
            shape=tuple(_get(d, "shape", list, f"params[{i}]")),
            dtype=_get(d, "dtype", str, f"params[{i}]"),
            size_bytes=_get(d, "size_bytes", int, f"params[{i}]"),
            expect_sparse_gradient=_get(d, "expect_sparse_gradient", bool, f"params[{i}]", default=False),
            has_grad=_get(d, "has_grad", bool, f"params[{i}]", default=True),
        )
        for i, d in enumerate(_get(data, "params", list, "trace"))
    ]
    for i, p in enumerate(params):
        expected = math.prod(p.shape) * DTYPE_SIZE_BYTES[p.dtype]
        if p.size_bytes != expected:
            raise InputError(f"trace.params[{i}].size_bytes: {p.size_bytes} does not match shape {list(p.shape)} x {p.dtype}; expected {expected}")
    buffers = [
        BufferRecord(name=_get(d, "name", str, f"buffers[{i}]"), dtype=_get(d, "dtype", str, f"buffers[{i}]"),
                     size_bytes=_get(d, "size_bytes", int, f"buffers[{i}]"))
        for i, d in enumerate(_get(data, "buffers", list, "trace", default=[]))
    ]
    iterations = []
    for k, d in enumerate(_get(data, "iterations", list, "trace")):
        where = f"iterations[{k}]"
        ready = _get(d, "grad_ready_s", list, where)
        for j, t in enumerate(ready):
            if t is not None:
                _check_time(t, f"trace.{where}.grad_ready_s[{j}]")
        iterations.append(IterationSample(
            forward_s=_time(d, "forward_s", where), backward_s=_time(d, "backward_s", where),
            optimizer_s=_time(d, "optimizer_s", where), zero_grad_s=_time(d, "zero_grad_s", where, default=0.0),
            grad_ready_s=tuple(ready)))
    hook = data.get("hook_overhead_frac")
    if hook is not None:
        _check_time(hook, "trace.hook_overhead_frac")
    env = _get(data, "environment", dict, "trace", default={})
    synthetic = data.get("synthetic")
    if synthetic is not None and not isinstance(synthetic, dict):
        raise InputError(f"trace.synthetic: {synthetic!r} is not accepted; expected null or an object")
    return Trace(
        model=_get(data, "model", str, "trace"),
        params=tuple(params), buffers=tuple(buffers),
        grad_ready_order=tuple(_get(data, "grad_ready_order", list, "trace")),
        iterations=tuple(iterations), environment=env, hook_overhead_frac=hook,
        synthetic=synthetic, command=data.get("command"), version=data["version"],
    )


_MISSING = object()


def _get(d: Any, key: str, typ: type | tuple[type, ...], where: str, default: Any = _MISSING) -> Any:
    # NOTE: where="trace" names a top-level key ("trace.model"), else "trace.<where>.<key>"
    prefix = "trace" if where == "trace" else f"trace.{where}"
    if not isinstance(d, dict):
        raise InputError(f"{prefix}: {d!r} is not accepted; expected an object")
    expected = typ.__name__ if isinstance(typ, type) else "number"
    if key not in d:
        if default is _MISSING:
            raise InputError(f"{prefix}.{key}: missing; expected a {expected}")
        return default
    v = d[key]
    ok = isinstance(v, typ) and not (typ is not bool and isinstance(v, bool))
    if not ok:
        raise InputError(f"{prefix}.{key}: {v!r} is not accepted; expected a {expected}")
    return v


def _time(d: Any, key: str, where: str, default: Any = _MISSING) -> float:
    v = _get(d, key, (int, float), where, default)  # type: ignore[arg-type]
    _check_time(v, f"trace.{where}.{key}")
    return float(v)


def _check_time(v: Any, field_name: str) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"{field_name}: {v!r} is not accepted; expected a finite number of seconds >= 0")


def _check_int(v: Any, field_name: str, minimum: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise InputError(f"{field_name}: {v!r} is not accepted; expected an integer >= {minimum}")


def make_trace(*, model: str, params: Iterable[tuple[str, Sequence[int], str]], ready_s: Sequence[float | None],
               forward_s: float, backward_s: float, optimizer_s: float, num_iterations: int = 1,
               **kwargs: Any) -> Trace:
    """Build a hand-made trace (tests, examples): ``params`` as ``(name, shape, dtype)``.

    Every iteration gets the same times; ``grad_ready_order`` is the order of ``ready_s``
    (ties broken by higher index first, as autograd usually reaches later layers first).
    """
    recs = []
    for i, (name, shape, dtype) in enumerate(params):
        recs.append(ParamRecord(index=i, name=name, shape=tuple(shape), dtype=dtype,
                                size_bytes=math.prod(shape) * dtype_size_bytes(dtype), has_grad=ready_s[i] is not None))
    order = sorted((i for i, t in enumerate(ready_s) if t is not None), key=lambda i: (ready_s[i], -i))
    sample = IterationSample(forward_s=forward_s, backward_s=backward_s, optimizer_s=optimizer_s, grad_ready_s=tuple(ready_s))
    return Trace(model=model, params=tuple(recs), grad_ready_order=tuple(order),
                 iterations=(sample,) * num_iterations, synthetic=kwargs.pop("synthetic", {"kind": "hand-made"}), **kwargs)
