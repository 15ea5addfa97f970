"""The trace: what one real training step of a model looks like on one device, written by
:mod:`ddpsim.trace.capture` (``ddpsim trace``) as a versioned JSON file whose every key is declared
once, on the records below (:func:`ddpsim.schema.record`: the file's format and the type the code
uses), and read by the planner, the engine and the executor. ``params`` are exactly the parameters
DDP's reducer gets, in its order (``_build_params_for_reducer``, as
:func:`ddpsim.trace.models.ddp_params` lists them). ``grad_ready_s[i]`` is when parameter ``i``'s
post-accumulate-grad hook fired, in seconds after the backward call's start (null: no gradient
that iteration); ``grad_ready_order`` the order the hooks fired in, the order DDP rebuilds its
buckets by; ``backward_s`` the backward call to its return. ``compiled_graph`` (optional) holds
the Dynamo graphs DDPOptimizer walks (:mod:`ddpsim.trace.compiled_graph`); ``synthetic`` is null
for a measured trace, else how the times were derived.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Sequence

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ddpsim.errors import InputError, require, shorten
from ddpsim.formats import quantile
from ddpsim.io import read_json, write_text_atomic
from ddpsim.schema import Bool, Float, Int, Str, format_version, record, rule, to_plain, validate
from ddpsim.trace.compiled_graph import CompiledGraph
from ddpsim.units import DTYPE_SIZE_BYTES

TRACE_FORMAT = "ddpsim-trace"
TRACE_VERSION = 1
#: the longest time a trace may hold (seconds: 11.6 days for one phase of one step)
MAX_SECONDS = 1e6
#: the largest size a trace may hold (bytes: 1 PiB for one parameter)
MAX_BYTES = 1 << 50
#: most dimensions of a parameter's shape (torch allows 64)
MAX_DIMS = 64

#: every time a finite number of seconds, every size an integer of bytes, bounded so that no value
#: a hostile or corrupt file holds reaches the engine as an overflow
Seconds = Annotated[Float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Bytes = Annotated[Int, Field(ge=0, le=MAX_BYTES)]


#: a dtype name of :data:`ddpsim.units.DTYPE_SIZE_BYTES`
Dtype = Annotated[Str, rule(f"one of {', '.join(DTYPE_SIZE_BYTES)}",
                            lambda v: isinstance(v, str) and v in DTYPE_SIZE_BYTES)]


@record("trace")
class ParamRecord:
    """One parameter the reducer sees, at position ``index`` of DDP's parameter list;
    ``size_bytes`` must be ``prod(shape)`` elements of ``dtype``."""

    index: Annotated[Int, Field(ge=0)]
    name: Str
    shape: Annotated[tuple[Bytes, ...], Field(max_length=MAX_DIMS)]
    dtype: Dtype
    size_bytes: Bytes
    expect_sparse_gradient: Bool = False
    has_grad: Bool = True

    @field_validator("size_bytes")
    @classmethod
    def _matches_shape(cls, v: int, info: ValidationInfo) -> int:
        shape, dtype = info.data.get("shape"), info.data.get("dtype")
        if shape is not None and dtype is not None:
            expected = math.prod(shape) * DTYPE_SIZE_BYTES[dtype]
            if v != expected:
                raise ValueError(f"{shorten(expected)} (shape {shorten(list(shape))} x {dtype})")
        return v

    @property
    def numel(self) -> int:
        return self.size_bytes // DTYPE_SIZE_BYTES[self.dtype]


@record("trace")
class BufferRecord:
    """A module buffer (broadcast from rank 0 before each forward when ``broadcast_buffers``)."""

    name: Str
    dtype: Dtype
    size_bytes: Bytes


def param_records(plist: Sequence[tuple[str, Any, bool]], has_grad: Any = None) -> tuple[ParamRecord, ...]:
    """One record per DDP parameter of ``plist`` (``(name, tensor, expect_sparse_gradient)``, as
    :func:`ddpsim.trace.models.ddp_params` lists them); ``has_grad(index)`` when given."""
    return tuple(ParamRecord(index=i, name=name, shape=tuple(p.shape), dtype=str(p.dtype).removeprefix("torch."),
                             size_bytes=p.numel() * p.element_size(), expect_sparse_gradient=sparse,
                             **({} if has_grad is None else {"has_grad": has_grad(i)}))
                 for i, (name, p, sparse) in enumerate(plist))


def buffer_records(module: Any) -> tuple[BufferRecord, ...]:
    """One record per buffer of ``module`` (``named_buffers()``)."""
    return tuple(BufferRecord(name=n, dtype=str(b.dtype).removeprefix("torch."), size_bytes=b.numel() * b.element_size())
                 for n, b in module.named_buffers())


@record("trace")
class IterationSample:
    """Timings of one measured iteration on one device, in seconds."""

    forward_s: Seconds
    backward_s: Seconds
    optimizer_s: Seconds
    zero_grad_s: Seconds = 0.0
    grad_ready_s: tuple[Seconds | None, ...]


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
    """``statistic`` if it is one of :data:`COMPUTE_STATISTICS`, else InputError."""
    require(statistic in COMPUTE_STATISTICS, "compute_statistic", statistic,
            f"one of {', '.join(COMPUTE_STATISTICS)}")
    return statistic


@record("trace")
class Trace:
    """A trace (``format`` ``ddpsim-trace``, ``version`` 1), read (:func:`load_trace`) or built."""

    format: Literal["ddpsim-trace"] = TRACE_FORMAT
    version: format_version(TRACE_VERSION) = TRACE_VERSION
    model: Str
    command: Str | None = None
    environment: dict[Str, Any] = Field(default_factory=dict)
    params: tuple[ParamRecord, ...]
    buffers: tuple[BufferRecord, ...] = ()
    grad_ready_order: tuple[Int, ...]
    iterations: tuple[IterationSample, ...]
    hook_overhead_frac: Annotated[Float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    synthetic: dict[Str, Any] | None = None
    #: the model's Dynamo graphs as DDPOptimizer walks them, or None
    compiled_graph: CompiledGraph | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _a_file_names_its_format(cls, data: Any) -> Any:
        """A file must name ``format`` and ``version`` (the code's traces take their defaults)."""
        if isinstance(data, dict) and (key := next((k for k in ("format", "version") if k not in data), None)):
            if key == "format" or data["format"] == TRACE_FORMAT:  # else the format's error comes first
                raise InputError(f"{key}: missing; expected this key (it is required)")
        return data

    @field_validator("params", "iterations")
    @classmethod
    def _not_empty(cls, v: tuple, info: ValidationInfo) -> tuple:
        if not v:
            what = "trainable parameter" if info.field_name == "params" else "measured iteration"
            raise ValueError(f"expected at least one {what}")
        return v

    def __post_init__(self) -> None:
        n = len(self.params)
        for i, p in enumerate(self.params):
            if p.index != i:
                raise InputError(f"params[{i}].index: {p.index} is out of order; expected {i} (DDP parameter order)")
        for k, it in enumerate(self.iterations):
            if len(it.grad_ready_s) != n:
                raise InputError(f"iterations[{k}].grad_ready_s: has {len(it.grad_ready_s)} entries; "
                                 f"expected {n} (one per parameter)")
        seen: set[int] = set()
        for k, idx in enumerate(self.grad_ready_order):
            require(0 <= idx < n and idx not in seen, f"grad_ready_order[{k}]", idx,
                    f"distinct parameter indices in [0, {n})")
            seen.add(idx)
        for p in self.params:
            if p.has_grad != (p.index in seen):
                raise InputError(f"grad_ready_order: parameter {p.index} ({p.name}) " + (
                    "has a gradient but is missing; expected every parameter with has_grad=true" if p.has_grad
                    else "has has_grad=false but is listed; expected only parameters with has_grad=true"))
        if self.compiled_graph is not None:
            self.compiled_graph.check(n)

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

    def _derived(self, key: tuple, compute: Any) -> Any:
        """A figure derived from the (immutable) trace, computed on first use and kept with it:
        every simulation of the trace reads its phases and ready times (not a field: the trace's
        equality, hash and resume key are its fields')."""
        kept = self.__dict__.setdefault("_kept_figures", {})
        if key not in kept:
            kept[key] = compute()
        return kept[key]

    def phase(self, name: str) -> PhaseStats:
        """Stats of ``"forward"``, ``"backward"``, ``"optimizer"`` or ``"zero_grad"``."""
        return self._derived(("phase", name), lambda: PhaseStats.of([getattr(it, f"{name}_s") for it in self.iterations]))

    def grad_ready_stat_s(self, statistic: str) -> tuple[float | None, ...]:
        """Per parameter, the median or mean (:data:`COMPUTE_STATISTICS`) hook time after
        backward start (None if never ready)."""
        agg = statistics.fmean if check_compute_statistic(statistic) == "mean" else statistics.median

        def compute() -> tuple[float | None, ...]:
            ready = [[t for it in self.iterations if (t := it.grad_ready_s[i]) is not None] for i in range(self.num_params)]
            return tuple(agg(xs) if xs else None for xs in ready)

        return self._derived(("grad_ready", statistic), compute)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)


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
    return write_text_atomic(path, json.dumps(trace.to_dict(), indent=1, sort_keys=False) + "\n")


def load_trace(path: str | Path) -> Trace:
    """Load and validate a trace file. Raises InputError naming the file and the key."""
    data = read_json(path, "trace", "a trace JSON written by 'ddpsim trace'")
    if isinstance(data, dict) and "traceEvents" in data and "format" not in data:
        raise InputError(f"trace: {shorten(str(path))} is a Chrome/Kineto trace (traceEvents), not a ddpsim trace; expected "
                         f"a trace JSON written by 'ddpsim trace' (a torch.profiler trace becomes one with 'ddpsim trace "
                         f"--from-profile {shorten(str(path))} --out trace.json')")
    return validate(Trace, data, f"trace {shorten(str(path))}")


def make_trace(*, model: str, params: Iterable[tuple[str, Sequence[int], str]], ready_s: Sequence[float | None],
               forward_s: float, backward_s: float, optimizer_s: float, num_iterations: int = 1,
               **kwargs: Any) -> Trace:
    """A hand-made trace (tests, examples), ``params`` as ``(name, shape, dtype)``, every iteration
    alike, ready in ``ready_s``'s order (ties: higher index first, as autograd reaches later layers first)."""
    recs = [ParamRecord(index=i, name=name, shape=tuple(shape), dtype=dtype,
                        size_bytes=math.prod(shape) * DTYPE_SIZE_BYTES.get(dtype, 0), has_grad=ready_s[i] is not None)
            for i, (name, shape, dtype) in enumerate(params)]
    order = sorted((i for i, t in enumerate(ready_s) if t is not None), key=lambda i: (ready_s[i], -i))
    sample = IterationSample(forward_s=forward_s, backward_s=backward_s, optimizer_s=optimizer_s, grad_ready_s=tuple(ready_s))
    return Trace(model=model, params=tuple(recs), grad_ready_order=tuple(order),
                 iterations=(sample,) * num_iterations, synthetic=kwargs.pop("synthetic", {"kind": "hand-made"}), **kwargs)
