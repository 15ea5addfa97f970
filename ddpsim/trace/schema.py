"""The trace file's declared format: the pydantic schema :func:`ddpsim.trace.records.trace_from_dict` validates.

Each key of the file :mod:`ddpsim.trace.records` reads and writes, with its type, bound and
default, once. Every time is a finite number of seconds in
``[0, MAX_SECONDS]`` and every size an integer of bytes in ``[0, MAX_BYTES]``, so that no value
a hostile or corrupt file holds reaches the engine as an overflow. Checks that span several
keys (parameter order, one ready time per parameter, ``grad_ready_order``) belong to
:class:`ddpsim.trace.records.Trace`, which every trace, read or built, goes through.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from ddpsim.errors import shorten
from ddpsim.schema import Schema, format_version
from ddpsim.units import DTYPE_SIZE_BYTES

TRACE_FORMAT = "ddpsim-trace"
TRACE_VERSION = 1
#: the longest time a trace may hold (seconds: 11.6 days for one phase of one step)
MAX_SECONDS = 1e6
#: the largest size a trace may hold (bytes: 1 PiB for one parameter)
MAX_BYTES = 1 << 50

Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Bytes = Annotated[int, Field(ge=0, le=MAX_BYTES)]


def default_of(model: type[Schema], name: str) -> Any:
    """The default the schema ``model`` declares for its key ``name``."""
    return model.model_fields[name].get_default(call_default_factory=True)


def check_dtype(dtype: str) -> str:
    """``dtype`` if it is one of :data:`ddpsim.units.DTYPE_SIZE_BYTES`."""
    if dtype not in DTYPE_SIZE_BYTES:
        raise ValueError(f"expected one of {', '.join(DTYPE_SIZE_BYTES)}")
    return dtype


#: most dimensions of a parameter's shape (torch allows 64)
MAX_DIMS = 64


class ParamDoc(Schema):
    """One entry of ``params``; ``size_bytes`` must be ``prod(shape)`` elements of ``dtype``."""

    index: Annotated[int, Field(ge=0)]
    name: str
    shape: Annotated[list[Bytes], Field(max_length=MAX_DIMS)]
    dtype: str
    size_bytes: Bytes
    expect_sparse_gradient: bool = False
    has_grad: bool = True

    _dtype = field_validator("dtype")(check_dtype)

    @field_validator("size_bytes")
    @classmethod
    def _matches_shape(cls, v: int, info: ValidationInfo) -> int:
        shape, dtype = info.data.get("shape"), info.data.get("dtype")
        if shape is not None and dtype is not None:
            expected = math.prod(shape) * DTYPE_SIZE_BYTES[dtype]
            if v != expected:
                raise ValueError(f"{shorten(expected)} (shape {shorten(shape)} x {dtype})")
        return v


class BufferDoc(Schema):
    """One entry of ``buffers``."""

    name: str
    dtype: str
    size_bytes: Bytes

    _dtype = field_validator("dtype")(check_dtype)


class IterationDoc(Schema):
    """One entry of ``iterations``: a measured iteration's phases and hook times."""

    forward_s: Seconds
    backward_s: Seconds
    optimizer_s: Seconds
    zero_grad_s: Seconds = 0.0
    grad_ready_s: list[Seconds | None]


class GraphWalkDoc(Schema):
    """One Dynamo graph as DDPOptimizer walks it (:class:`ddpsim.trace.compiled_graph.GraphWalk`)."""

    users: list[Annotated[int, Field(ge=-1)] | None]
    uses: list[Annotated[list[Annotated[int, Field(ge=0, le=MAX_BYTES)]], Field(min_length=3, max_length=3)]]
    #: per node, its inputs that need a gradient in split_module's order: ["param", k] or ["node", j]
    inputs: list[list[Annotated[list[str | int], Field(min_length=2, max_length=2)]]] | None = None
    #: per node, the node whose storage its view result shares (null: none, or not a view)
    alias_of: list[Annotated[int, Field(ge=0)] | None] | None = None


class CompiledGraphDoc(Schema):
    """``compiled_graph``: the model's Dynamo graphs (``ddpsim trace --compiled-graph``)."""

    torch_version: str = ""
    graphs: Annotated[list[GraphWalkDoc], Field(min_length=1)]


class TraceDoc(Schema):
    """A trace file (``format`` ``ddpsim-trace``, ``version`` 1)."""

    format: Literal["ddpsim-trace"]
    version: format_version(TRACE_VERSION)
    model: str
    command: str | None = None
    environment: dict[str, Any] = Field(default_factory=dict)
    params: list[ParamDoc]
    buffers: list[BufferDoc] = Field(default_factory=list)
    grad_ready_order: list[int]
    iterations: list[IterationDoc]
    hook_overhead_frac: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    synthetic: dict[str, Any] | None = None
    compiled_graph: CompiledGraphDoc | None = None

    @field_validator("params")
    @classmethod
    def _some_params(cls, v: list[ParamDoc]) -> list[ParamDoc]:
        if not v:
            raise ValueError("expected at least one trainable parameter")
        return v

    @field_validator("iterations")
    @classmethod
    def _some_iterations(cls, v: list[IterationDoc]) -> list[IterationDoc]:
        if not v:
            raise ValueError("expected at least one measured iteration")
        return v

