"""Bucket plans: DDP's bucket assignment reproduced exactly, and explicit plans.

Source of truth: ``torch/csrc/distributed/c10d/reducer.cpp`` (``compute_bucket_assignment_by_size``,
``Reducer::rebuild_buckets``) and ``torch/nn/parallel/distributed.py``
(``_build_params_for_reducer``, ``_ddp_init_helper``, ``_BucketCapacityConfig``). At construction
the limits are ``[sys.maxsize]`` (one bucket per dtype) unless ``find_unused_parameters`` without
``static_graph`` (then ``[1 MiB, cap]``, or ``[cap]`` when ``bucket_cap_mb`` is given); buckets are
sorted by lowest parameter index, then **reversed**. Unless ``find_unused_parameters`` without
``static_graph``, they are rebuilt once in gradient-ready order with ``[first_cap, cap]``
(first_cap: 1 MiB when ``bucket_cap_mb`` is not given, else cap; always 1 MiB with
``semantics="legacy"``), no sort, from iteration 2 (3 with ``static_graph``). A
``bucket_cap_mb_list`` is the limit list of both assignments, per dtype, its last limit reused.
Buckets are listed in the order DDP launches them (reducer order)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Sequence

from pydantic import Field, Strict

from ddpsim.errors import InputError, shorten
from ddpsim.io import read_json
from ddpsim.schema import Schema, format_version, record, rule, validate
from ddpsim.trace.records import Trace
from ddpsim.value_types import MAX_CAP_MB, MAX_LIST, Bool, _fail, OptBool, OptCap, OptCapList, OptText
from ddpsim.units import DEFAULT_BUCKET_CAP_MB, DEFAULT_FIRST_BUCKET_BYTES, LIST_POINT_PREFIX, MIB, SIZE_MAX, mb_to_bytes

PLAN_FORMAT = "ddpsim-plan"
PLAN_VERSION = 1


def compute_bucket_assignment_by_size(
    sizes_bytes: Sequence[int],
    dtypes: Sequence[str],
    bucket_size_limits: Sequence[int],
    expect_sparse_gradient: Sequence[bool] = (),
    tensor_indices: Sequence[int] = (),
) -> tuple[list[list[int]], list[int]]:
    """``torch.distributed._compute_bucket_assignment_by_size``: ``(bucket_indices,
    per_bucket_size_limits)`` as torch returns them. One accumulator and limit position per
    dtype, the last limit reused; ``expect_sparse_gradient`` (indexed by tensor index): a bucket
    of its own; ``tensor_indices``: the tensors' labels (rebuild), else positions and the result
    sorted by lowest index. Leftover buckets of several dtypes come out most-recently-created
    dtype first (libstdc++'s ``std::unordered_map`` iteration for a few keys)."""
    assert len(sizes_bytes) == len(dtypes)
    assert bucket_size_limits, "bucket_size_limits must not be empty"
    result: list[tuple[list[int], int]] = []
    # dtype -> [indices, size, limit, limit_position]; insertion-ordered dict
    buckets: dict[str, list[Any]] = {}
    for i, (size, dtype) in enumerate(zip(sizes_bytes, dtypes)):
        tensor_index = tensor_indices[i] if tensor_indices else i
        if expect_sparse_gradient and expect_sparse_gradient[tensor_index]:
            result.append(([tensor_index], 0))
            continue
        acc = buckets.setdefault(dtype, [[], 0, 0, 0])
        acc[0].append(tensor_index)
        acc[1] += size
        acc[2] = bucket_size_limits[acc[3]]
        if acc[1] >= acc[2]:
            result.append((acc[0], acc[2]))
            acc[0], acc[1] = [], 0
            if acc[3] + 1 < len(bucket_size_limits):
                acc[3] += 1
    for acc in reversed(list(buckets.values())):
        if acc[0]:
            result.append((acc[0], acc[2]))
    if not tensor_indices:
        result.sort(key=lambda r: min(r[0]))
    return [r[0] for r in result], [r[1] for r in result]


def mb_text(value: float) -> str:
    """A MiB value as Python reads it back exactly: ``8``, ``2.5``, ``0.0400390625``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def cap_list_label(bucket_cap_mb_list: Sequence[float]) -> str:
    """A ``bucket_cap_mb_list`` as point names spell it: ``1+4+8``."""
    return "+".join(mb_text(x) for x in bucket_cap_mb_list)


def cap_point_id(bucket_cap_mb: float | None, bucket_cap_mb_list: Sequence[float] | None = None) -> str:
    """The cap part of a point id: ``cap=default``, ``cap=25``, or ``list=1+4+8`` (the list wins)."""
    if bucket_cap_mb_list:
        return f"{LIST_POINT_PREFIX}{cap_list_label(bucket_cap_mb_list)}"
    return "cap=default" if bucket_cap_mb is None else f"cap={bucket_cap_mb:g}"


#: the dtypes ``_MixedPrecision`` casts to (DDP casts floating-point tensors only)
MIXED_PRECISION_DTYPES = ("float16", "bfloat16", "float32", "float64")


#: a ``MixedPrecision`` dtype: one of :data:`MIXED_PRECISION_DTYPES` or None
Dtype = Annotated[Optional[Literal[MIXED_PRECISION_DTYPES]],
                  rule(f"one of {', '.join(MIXED_PRECISION_DTYPES)} or null", lambda v: v is None or v in MIXED_PRECISION_DTYPES)]


@record("mixed_precision")
class MixedPrecision:
    """DDP's ``_MixedPrecision`` (``torch/nn/parallel/distributed.py``), dtypes by name (None:
    unchanged): gradients, hence buckets, are in ``param_dtype``; ``reduce_dtype`` defaults to it,
    else the parameter's own; buffers are cast to ``buffer_dtype`` at construction."""

    param_dtype: Dtype = Field(None, description="parameters cast to it before every forward")
    reduce_dtype: Dtype = Field(None, description="the dtype gradients are all-reduced in")
    buffer_dtype: Dtype = Field(None, description="the dtype buffers are cast to")

    def label(self) -> str:
        return "/".join(d or "-" for d in (self.param_dtype, self.reduce_dtype, self.buffer_dtype))


def options_document(text: str, where: str) -> dict[str, Any]:
    """The JSON object ``text`` holds, inline (``{...}``) or in the file it names (``ddpsim plan
    --options``, the executor's ``--options``); ``where`` (the flag) names it in errors."""
    if not text.lstrip().startswith("{"):
        doc = read_json(text, where, "a JSON object or its file")
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: not JSON ({e.msg} at line {e.lineno} column {e.colno}); expected a JSON object") from None
    if not isinstance(doc, dict):
        raise InputError(f"{where}: {type(doc).__name__} is not accepted; expected a JSON object of DDPOptions fields")
    return doc


def check_delayed(opts: Any) -> None:
    """``delay_all_reduce_named_params`` and ``param_to_hook_all_reduce`` (of ``opts``, options or
    their scenario section): both set or neither (DDP raises ValueError otherwise)."""
    if (opts.delay_all_reduce_named_params is None) != (opts.param_to_hook_all_reduce is None):
        _fail(("param_to_hook_all_reduce",), opts.param_to_hook_all_reduce,
              "a parameter name together with delay_all_reduce_named_params (both set or neither)")


ParamNames = Annotated[Optional[Annotated[tuple[str, ...], Field(max_length=MAX_LIST), Strict(False)]], rule(
    f"a list of parameter names (at most {MAX_LIST}) or null", lambda v: v is None or (
        isinstance(v, (list, tuple)) and len(v) <= MAX_LIST and all(isinstance(n, str) and n for n in v)))]


@record("")
class DDPOptions:
    """The DDP constructor options, with PyTorch's names, as the scenario's ``ddp`` section takes
    them (:func:`~ddpsim.value_types.section_of`) but ``semantics`` and ``small_bucket_last``."""

    bucket_cap_mb: OptCap = Field(None, description=f"MiB per bucket, <= {MAX_CAP_MB}; null: not given (25 MiB, a "
                                                    "1 MiB first bucket after the rebuild)")
    bucket_cap_mb_list: OptCapList = Field(None, description="per-bucket limits in MiB, the last reused (torch >= "
                                                             f"2.13; bucket_cap_mb is then ignored); at most {MAX_LIST} entries")
    find_unused_parameters: Bool = Field(False, description="DDP's find_unused_parameters")
    static_graph: Bool = Field(False, description="DDP's static_graph")
    gradient_as_bucket_view: Bool = Field(False, description="DDP's gradient_as_bucket_view")
    broadcast_buffers: Bool = Field(True, description="DDP's broadcast_buffers")
    semantics: Annotated[Literal["modern", "legacy"],
                         rule("'modern' or 'legacy'", lambda v: v in ("modern", "legacy"))] = "modern"
    #: DDP_SET_LAST_BUCKET_CAP=1: the small first-cap bucket becomes the last one at rebuild
    small_bucket_last: Bool = False
    # -- torch 2.13 options (the reducer side is modelled in ddpsim.engine.simulate) --
    batched_grad_copy: Bool = Field(False, description="torch 2.13: one _foreach_copy_ per bucket")
    skip_all_reduce_unused_params: Bool = Field(False, description="torch 2.13: no all-reduce of an all-unused bucket")
    forward_sync_buffers: OptBool = Field(None, description="torch 2.13: buffer broadcast before forward; null: "
                                                            "broadcast_buffers decides")
    mixed_precision: Optional[MixedPrecision] = Field(None, description="DDP's _MixedPrecision")
    #: left out of the reducer, all-reduced as one flat buffer from a hook on
    #: ``param_to_hook_all_reduce``'s gradient; both or neither (torch raises otherwise)
    delay_all_reduce_named_params: ParamNames = Field(
        None, description="parameter names all-reduced as one buffer from param_to_hook_all_reduce's hook")
    param_to_hook_all_reduce: OptText = Field(None, description="the parameter whose gradient hook all-reduces them")

    def __post_init__(self) -> None:
        if self.bucket_cap_mb_list and self.semantics == "legacy":
            raise InputError(f"bucket_cap_mb_list: {list(self.bucket_cap_mb_list)!r} is not accepted with semantics "
                             f"'legacy' (torch without bucket_cap_mb_list); expected semantics 'modern'")
        check_delayed(self)

    @property
    def syncs_buffers_in_forward(self) -> bool:
        """torch 2.13: ``forward_sync_buffers`` if given, else the deprecated ``broadcast_buffers``."""
        return self.broadcast_buffers if self.forward_sync_buffers is None else self.forward_sync_buffers

    @property
    def bucket_bytes_cap(self) -> int:
        if self.bucket_cap_mb_list:  # torch: the effective cap is the list's largest
            return mb_to_bytes(max(self.bucket_cap_mb_list))
        return mb_to_bytes(DEFAULT_BUCKET_CAP_MB if self.bucket_cap_mb is None else self.bucket_cap_mb)

    @property
    def first_bucket_bytes_cap(self) -> int:
        if not self.bucket_cap_mb_list and (self.semantics == "legacy" or self.bucket_cap_mb is None):
            return DEFAULT_FIRST_BUCKET_BYTES
        return self.bucket_bytes_cap

    @property
    def list_bytes_caps(self) -> list[int] | None:
        """``bucket_cap_mb_list`` in bytes (``int(mb * 1024 * 1024)`` each, as torch), or None."""
        return None if not self.bucket_cap_mb_list else [mb_to_bytes(x) for x in self.bucket_cap_mb_list]

    @property
    def rebuilds(self) -> bool:
        """``Reducer::should_rebuild_buckets``: static graph, or not find_unused."""
        return self.static_graph or not self.find_unused_parameters

    def label(self) -> str:
        flags = {"find_unused_parameters": "find_unused", "static_graph": "static_graph",
                 "gradient_as_bucket_view": "grad_as_bucket_view", "batched_grad_copy": "batched_grad_copy",
                 "skip_all_reduce_unused_params": "skip_unused"}
        extra = [name for key, name in flags.items() if getattr(self, key)]
        extra += [f"mp={self.mixed_precision.label()}"] if self.mixed_precision else []
        names = self.delay_all_reduce_named_params
        extra += [f"delay_all_reduce={len(names)}"] if names is not None else []
        return ",".join([cap_point_id(self.bucket_cap_mb, self.bucket_cap_mb_list), *extra])


@dataclass(frozen=True, kw_only=True)
class Bucket:
    """One bucket: parameter indices in the order DDP lays them out in the flat buffer."""

    index: int
    param_indices: tuple[int, ...]
    size_bytes: int
    dtype: str
    size_limit_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True, kw_only=True)
class BucketPlan:
    """Which buckets DDP uses in which iteration (from 1): ``initial`` before
    ``rebuild_iteration``, ``steady`` from it on (without a rebuild: the same, and None)."""

    initial: tuple[Bucket, ...]
    steady: tuple[Bucket, ...]
    rebuild_iteration: int | None
    source: str = "ddp"
    options: DDPOptions = field(default_factory=DDPOptions)

    def layout_for_iteration(self, iteration: int) -> tuple[Bucket, ...]:
        if self.rebuild_iteration is not None and iteration >= self.rebuild_iteration:
            return self.steady
        return self.initial

    def to_dict(self) -> dict[str, Any]:
        o = self.options
        keys = ("bucket_cap_mb", "find_unused_parameters", "static_graph", "gradient_as_bucket_view", "semantics")
        return {
            "format": PLAN_FORMAT, "version": PLAN_VERSION, "source": self.source,
            "options": {**{k: getattr(o, k) for k in keys},
                        **({"bucket_cap_mb_list": list(o.bucket_cap_mb_list)} if o.bucket_cap_mb_list else {})},
            "buckets": [b.to_dict() for b in self.steady],
            "first_iteration": {"buckets": [b.to_dict() for b in self.initial]},
            "rebuild_iteration": self.rebuild_iteration,
        }


def _make_buckets(trace: Trace, groups: Sequence[Sequence[int]], limits: Sequence[int] | None) -> tuple[Bucket, ...]:
    """The buckets of ``groups`` (parameter indices, launch order); an explicit plan's may mix dtypes."""
    out = []
    for k, g in enumerate(groups):
        dtypes = sorted({trace.params[i].dtype for i in g})
        if len(dtypes) > 1:
            raise InputError(f"plan.buckets[{k}]: mixes dtypes {dtypes}; expected one dtype per bucket")
        out.append(Bucket(index=k, param_indices=tuple(g), size_bytes=sum(trace.params[i].size_bytes for i in g),
                          dtype=dtypes[0], size_limit_bytes=None if limits is None else int(limits[k])))
    return tuple(out)


def reducer_param_indices(trace: Trace, options: DDPOptions) -> tuple[int, ...]:
    """The trace parameters DDP's reducer gets: all but ``delay_all_reduce_named_params``
    (``DistributedDataParallel.__init__`` adds them to ``parameters_to_ignore``)."""
    names = options.delay_all_reduce_named_params
    if names is None:
        return tuple(range(trace.num_params))
    by_name = {p.name: p.index for p in trace.params}
    for field_name, values in (("delay_all_reduce_named_params", names), ("param_to_hook_all_reduce", (options.param_to_hook_all_reduce,))):
        for n in values:
            if n not in by_name:
                raise InputError(f"{field_name}: {shorten(n)} is not a parameter of trace {shorten(trace.model)}; expected one of its "
                                 f"parameter names (e.g. {', '.join(repr(p.name) for p in trace.params[:3])})")
    delayed = {by_name[n] for n in names}
    return tuple(i for i in range(trace.num_params) if i not in delayed)


def rebuild_order(trace: Trace, options: DDPOptions, ready_order: Sequence[int] | None = None) -> tuple[list[int], tuple[int, ...]]:
    """``(order, reducer params)``: the reducer's parameters in the order the rebuild walks them
    (gradient-ready order; with static_graph, those that never fired appended, as the finalize
    callback does)."""
    keep = reducer_param_indices(trace, options)
    kept = set(keep)
    order = [i for i in (trace.grad_ready_order if ready_order is None else ready_order) if i in kept]
    if options.static_graph:
        seen = set(order)
        order += [i for i in keep if i not in seen]
    return order, keep


def rebuilt_assignment(trace: Trace, options: DDPOptions, ready_order: Sequence[int] | None = None) -> tuple[Bucket, ...]:
    """The buckets ``Reducer::rebuild_buckets`` builds from the gradient-ready order."""
    order, keep = rebuild_order(trace, options, ready_order)
    if not options.static_graph and len(order) != len(keep):
        unused = [trace.params[i].name for i in keep if i not in set(order)]
        raise InputError(
            f"find_unused_parameters: False is not accepted for this trace: parameters {unused[:3]}"
            f"{'...' if len(unused) > 3 else ''} get no gradient, which real DDP rejects; expected find_unused_parameters=True or static_graph=True")
    return _make_buckets(trace, *assign_in_ready_order(trace, order, options))


def assign_in_ready_order(trace: Trace, order: Sequence[int], options: DDPOptions) -> tuple[list[list[int]], list[int]]:
    """``(groups, limits)``: ``compute_bucket_assignment_by_size`` over the parameters ``order``
    (gradient-ready order) as ``Reducer::rebuild_buckets`` calls it, with the limits
    ``[first_bucket_bytes, bucket_bytes_cap]`` (or the cap list) and, for small_bucket_last, the
    order and the result reversed."""
    limits = options.list_bytes_caps or [options.first_bucket_bytes_cap, options.bucket_bytes_cap]
    order = list(order)[::-1] if options.small_bucket_last else list(order)
    groups, lims = compute_bucket_assignment_by_size(
        [trace.params[i].size_bytes for i in order], [trace.params[i].dtype for i in order], limits,
        [p.expect_sparse_gradient for p in trace.params], order)
    if options.small_bucket_last:
        groups, lims = groups[::-1], lims[::-1]
    return groups, lims


def plan_ddp(trace: Trace, options: DDPOptions | None = None) -> BucketPlan:
    """The plan real DDP follows for ``trace`` under ``options``: the buckets it builds at construction
    (reducer order), then, where it rebuilds, :func:`rebuilt_assignment`'s."""
    options = options or DDPOptions()
    # one bucket per dtype until the rebuild; without one, the rebuild's limits ([first, cap] is [cap] when equal)
    limits = options.list_bytes_caps or ([SIZE_MAX] if options.rebuilds else
                                         [options.first_bucket_bytes_cap, options.bucket_bytes_cap])
    keep = reducer_param_indices(trace, options)
    params = [trace.params[i] for i in keep]
    groups, lims = compute_bucket_assignment_by_size(
        [p.size_bytes for p in params], [p.dtype for p in params], limits,
        [p.expect_sparse_gradient for p in params])
    # positions in the reducer's list -> trace indices (an increasing map: the sort is kept)
    groups = [[keep[j] for j in g] for g in groups]
    initial = _make_buckets(trace, list(reversed(groups)), list(reversed(lims)))
    if not options.rebuilds or not initial:  # no reducer at all when every parameter is delayed
        return BucketPlan(initial=initial, steady=initial, rebuild_iteration=None, options=options)
    steady = rebuilt_assignment(trace, options)
    return BucketPlan(initial=initial, steady=steady, rebuild_iteration=3 if options.static_graph else 2, options=options)


def _short_mb(lo_bytes: int, hi_bytes: float, prefer: str) -> float:
    """The MiB value with the fewest significant digits whose ``int(v * 1024 * 1024)`` lies in
    ``(lo_bytes, hi_bytes]``; ``prefer`` ``"high"`` tries values near ``hi_bytes`` first."""
    from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

    anchors = ([(hi_bytes, ROUND_FLOOR)] if prefer == "high" and math.isfinite(hi_bytes) else []) + [(lo_bytes + 1, ROUND_CEILING)]
    for digits in range(1, 19):
        for anchor, rounding in anchors:
            x = Decimal(int(anchor)) / Decimal(MIB)
            exp = x.adjusted() - digits + 1
            v = float(x.quantize(Decimal(1).scaleb(exp), rounding=rounding))
            if v > 0 and lo_bytes < mb_to_bytes(v) <= hi_bytes:
                return int(v) if v.is_integer() else v
    return hi_bytes / MIB  # NOTE: exact (a power-of-two division); reached only for empty-looking ranges


def cap_list_for_buckets(trace: Trace, buckets: Sequence[Bucket], options: DDPOptions | None = None,
                         ready_order: Sequence[int] | None = None) -> tuple[tuple[float, ...] | None, str]:
    """``(list, "")``: a ``bucket_cap_mb_list`` whose rebuilt layout is exactly ``buckets``
    (launch order), or ``(None, reason)``. DDP's rebuild walks the gradient-ready order, each
    dtype with its own bucket and list position, closing a bucket once its size reaches the limit
    (``>=``, after adding a gradient; the last limit reused). So a dtype's ``j``-th bucket of
    ``size`` bytes, last gradient ``last`` bytes, needs limit ``j`` in ``(size - last, size]``
    (``> size - last`` for a dtype's last bucket, which may be left over to the end); every
    dtype's ``j``-th limits must meet in one value. The shortest MiB value in the range is
    taken, and the list verified by planning it again (:func:`rebuilt_assignment`)."""
    options = replace(options or DDPOptions(), bucket_cap_mb=None, bucket_cap_mb_list=None, semantics="modern",
                      small_bucket_last=False)
    if not options.rebuilds:
        return None, ("DDP never rebuilds with find_unused_parameters and without static_graph: a list shapes "
                      "only the construction layout, in parameter order")
    order, _ = rebuild_order(trace, options, ready_order)
    if any(trace.params[i].expect_sparse_gradient for i in order):
        return None, "a sparse-gradient parameter has a bucket of its own that no limit shapes"
    pos = {i: k for k, i in enumerate(order)}
    target = [tuple(b.param_indices) for b in buckets]
    if sorted(i for g in target for i in g) != sorted(order):
        return None, "the buckets do not hold exactly the parameters of the gradient-ready order"
    runs: dict[str, list[tuple[int, ...]]] = {}
    for g in target:
        runs.setdefault(trace.params[g[0]].dtype, []).append(g)
    for dt, gs in runs.items():
        gs.sort(key=lambda g: pos[g[0]])
        if [i for g in gs for i in g] != [i for i in order if trace.params[i].dtype == dt]:
            return None, (f"a {dt} bucket is not a run of consecutive {dt} gradients in ready order "
                          "(DDP fills each dtype's bucket in ready order)")
    n = max(len(gs) for gs in runs.values())
    inf = float("inf")
    for force_close in (False, True):
        lo, hi, top = [0] * n, [inf] * n, [0] * n
        for gs in runs.values():
            for j, g in enumerate(gs):
                size = sum(trace.params[i].size_bytes for i in g)
                lo[j], top[j] = max(lo[j], size - trace.params[g[-1]].size_bytes), max(top[j], size)
                if j < len(gs) - 1 or force_close:
                    hi[j] = min(hi[j], size)
        k = next((j for j in range(n) if lo[j] >= hi[j]), None)
        if k is not None:
            reason = (f"the dtypes' bucket {k} need limits that do not meet ({lo[k]} < limit <= {hi[k]:.0f} bytes): "
                      "each dtype walks the same list")
            continue
        caps = tuple(_short_mb(lo[j], hi[j], "high") if math.isfinite(hi[j])
                     else _short_mb(max(lo[j], top[j] - 1), inf, "low") for j in range(n))
        got = rebuilt_assignment(trace, replace(options, bucket_cap_mb_list=caps), order)
        if [tuple(b.param_indices) for b in got] == target:
            return caps, ""
        reason = "DDP's assignment launches these buckets in another order (a dtype's last bucket is left over to the end)"
    return None, reason


def approximate_cap_list(trace: Trace, buckets: Sequence[Bucket]) -> tuple[float, ...]:
    """One limit per bucket of ``buckets`` (launch order), each the shortest MiB value in
    ``(size - last gradient, size]``: the list that reproduces them when one dtype walks it
    (:func:`cap_list_for_buckets` says when it does); a starting point when none does."""
    return tuple(_short_mb(b.size_bytes - trace.params[b.param_indices[-1]].size_bytes, b.size_bytes, "high")
                 for b in buckets)


def check_buckets(trace: Trace, groups: Sequence[Sequence[int]], options: DDPOptions, label: str) -> None:
    """Raise an InputError naming ``label`` unless ``groups`` (parameter indices) hold every
    parameter of the reducer of ``trace`` under ``options`` exactly once, and no other."""
    n = trace.num_params
    keep = reducer_param_indices(trace, options)
    kept = set(keep)
    seen: dict[int, int] = {}
    for k, g in enumerate(groups):
        for i in g:
            if not 0 <= i < n:
                raise InputError(f"{label}[{k}]: {shorten(i)} is not accepted; expected a parameter index in "
                                 f"[0, {n}) or a name")
            if i in seen:
                raise InputError(f"{label}[{k}]: parameter {i} ({trace.params[i].name}) is already in bucket "
                                 f"{seen[i]}; expected every parameter exactly once")
            if i not in kept:
                raise InputError(f"{label}: parameter {trace.params[i].name!r} is in delay_all_reduce_named_params; "
                                 "expected the reducer's parameters only")
            seen[i] = k
    missing = [i for i in keep if i not in seen]
    if missing:
        more = "..." if len(missing) > 8 else ""
        raise InputError(f"{label}: parameters {missing[:8]}{more} of trace {trace.model!r} are in no bucket; "
                         "expected every parameter exactly once")


def explicit_plan(trace: Trace, buckets: Sequence[Sequence[int | str]], options: DDPOptions | None = None,
                  source: str = "explicit") -> BucketPlan:
    """A plan from a user-given list of buckets (parameter indices or names) in launch order:
    every reducer parameter exactly once, one dtype per bucket, applying from iteration 1."""
    options = options or DDPOptions()
    by_name = {p.name: p.index for p in trace.params}
    if not buckets:
        raise InputError("plan.buckets: [] is empty; expected a list of buckets, each a list of parameter indices or names")
    groups: list[list[int]] = []
    for k, b in enumerate(buckets):
        if not b:
            raise InputError(f"plan.buckets[{k}]: {shorten(b)} is not accepted; expected a non-empty list of parameter indices or names")
        bad = next((x for x in b if isinstance(x, str) and x not in by_name), None)
        if bad is not None:
            raise InputError(f"plan.buckets[{k}]: parameter name {shorten(bad)} is not in the trace; "
                             "expected one of the trace's parameter names")
        groups.append([by_name[x] if isinstance(x, str) else x for x in b])
    check_buckets(trace, groups, options, "plan.buckets")
    bs = _make_buckets(trace, groups, None)
    return BucketPlan(initial=bs, steady=bs, rebuild_iteration=None, source=source, options=options)


def without_delayed(plan: BucketPlan, trace: Trace, options: DDPOptions) -> BucketPlan:
    """``plan`` with ``options``' delayed parameters taken out of its buckets (emptied buckets
    dropped) and ``options`` attached: a plan made for every parameter, fit for the reducer."""
    keep = set(reducer_param_indices(trace, options))
    groups = [[i for i in b.param_indices if i in keep] for b in plan.steady]
    return explicit_plan(trace, [g for g in groups if g], options=options, source=plan.source)


class PlanBucketDoc(Schema):
    """A bucket of a plan file as :meth:`Bucket.to_dict` writes it (``param_indices``), or by
    parameter names (``params``); the other keys are read for nothing."""

    index: int | None = None
    param_indices: list[int | str] | None = None
    params: list[int | str] | None = None
    size_bytes: int | None = None
    dtype: str | None = None
    size_limit_bytes: int | None = None


PlanBucket = list[int | str] | PlanBucketDoc


#: most buckets a plan file may hold (one per parameter of a 100,000-tensor model)
MAX_PLAN_BUCKETS = 100_000


class PlanDoc(Schema):
    """A plan file: ``ddpsim plan --format json``'s output, a report's ``recommended_plan.json``
    (with its ``bucket_cap_mb_list`` advice), or a hand-written ``{"buckets": [...]}``."""

    format: Literal["ddpsim-plan"] = PLAN_FORMAT
    version: format_version(PLAN_VERSION) = PLAN_VERSION
    source: str = "explicit"
    options: dict[str, Any] | None = None  # a record of the options it was made with: the scenario's apply
    buckets: list[PlanBucket]
    first_iteration: dict[str, list[PlanBucket]] | None = None
    rebuild_iteration: int | None = None
    bucket_cap_mb_list: dict[str, Any] | None = None


def load_plan(path: str | Path, trace: Trace) -> BucketPlan:
    """The explicit plan of a plan JSON (:class:`PlanDoc`) for ``trace``."""
    source = f"plan {shorten(str(path))}"
    data = read_json(path, "plan", "a plan JSON ('ddpsim plan --format json' or a list of buckets)")
    buckets = data if isinstance(data, list) else data.get("buckets") if isinstance(data, dict) else None
    if isinstance(buckets, list) and len(buckets) > MAX_PLAN_BUCKETS:
        raise InputError(f"{source}: buckets: {len(buckets)} buckets are not accepted; expected at most {MAX_PLAN_BUCKETS}")
    doc = validate(PlanDoc, {"buckets": data} if isinstance(data, list) else data, source)
    groups = [b if isinstance(b, list) else b.param_indices if b.param_indices is not None else b.params
              for b in doc.buckets]
    try:
        return explicit_plan(trace, groups, source=doc.source)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
