"""Which parameter each gradient of a profile is (a backward shows one unnamed ``AccumulateGrad``
per parameter, in ready order), surest first: ``factory`` (``--model``: the factory's
parameters in DDP's order, ``_build_params_for_reducer``, ordered by one backward on the
``meta`` device and checked against the profile's gradient count, dims and bucket sizes),
``shapes`` (``record_shapes`` dims) or ``bucket-sizes`` (each recorded bucket split among its
gradients by the threads of DDP's copy kernels). docs/MODEL.md, "How a profile becomes a trace"."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Sequence

from ddpsim.errors import InputError
from ddpsim.trace.profile.result import ParamMapping, RecordedBucket
from ddpsim.trace.records import BufferRecord, ParamRecord, buffer_records, param_records
from ddpsim.units import DTYPE_SIZE_BYTES


@dataclass(frozen=True)
class GradInfo:
    """What the profile says about the gradients of its last step (ready order)."""

    num_grads: int
    buckets: tuple[RecordedBucket, ...]
    shapes: tuple[tuple[int, ...] | None, ...]
    work: tuple[float, ...]
    #: one sample's shape (the forward's batch input without its batch dimension, ``record_shapes``)
    input_shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class MappedParams:
    """Parameters in DDP's order, and the parameter index of each gradient in ready order."""

    params: tuple[ParamRecord, ...]
    buffers: tuple[BufferRecord, ...]
    ready_order: tuple[int, ...]
    mapping: ParamMapping
    notes: tuple[str, ...] = ()


def map_params(grads: GradInfo, *, model: str | None, seed: int, source: str) -> MappedParams:
    """Name the profile's gradients (see the module docstring); InputError on a mismatch."""
    if model is not None:
        return _by_factory(grads, model, seed)
    if grads.shapes and all(s is not None for s in grads.shapes):
        return _by_shapes(grads)
    return _by_bucket_sizes(grads, source)


def _bucket_slices(grads: GradInfo) -> list[tuple[RecordedBucket, range]]:
    """Each recorded bucket with the positions (ready order) of the gradients it holds."""
    ends = accumulate(b.num_grads for b in grads.buckets)
    return [(b, range(end - b.num_grads, end)) for b, end in zip(grads.buckets, ends)]


# ---- factory ---------------------------------------------------------------------------------

#: the sample shape a factory returning a bare module is built with when the profile records none:
#: only its parameters are read (its backward on it may fail; then the ready order is DDP's reversed)
PLACEHOLDER_SHAPE = (1,)


def _factory_order(model: str, seed: int, input_shape: tuple[int, ...] | None = None
                   ) -> tuple[Any, list[Any], list[int] | None, str]:
    """The factory's model, its DDP parameters, their ready order and where it was taken (a
    ``meta`` backward, else a CPU one); a bare module gets the profile's ``input_shape`` or
    :data:`PLACEHOLDER_SHAPE`."""
    import torch

    from ddpsim.trace.autocast_order import autocast_ready_order
    from ddpsim.trace.models import build_model, ddp_params

    shape = (input_shape or PLACEHOLDER_SHAPE) if ":" in model else None
    with torch.random.fork_rng():
        for device in ("meta", "cpu"):
            try:
                with torch.device(device):
                    spec = build_model(model, seed=seed, input_shape=shape)
            except (RuntimeError, NotImplementedError):
                continue
            plist = ddp_params(spec.module)
            order = autocast_ready_order(spec, [p for _, p, _ in plist], None, device)  # meta: shapes only
            if order is not None and sorted(order) == list(range(len(plist))):
                return spec, plist, order, f"a {device} backward"
        spec = build_model(model, seed=seed, input_shape=shape)
    return spec, ddp_params(spec.module), None, ""


def _by_factory(grads: GradInfo, model: str, seed: int) -> MappedParams:
    spec, plist, order, where = _factory_order(model, seed, grads.input_shape)
    n = len(plist)
    if n != grads.num_grads:
        raise InputError(f"--model: {model!r} has {n} trainable parameters but the profile's backward accumulated "
                         f"{grads.num_grads} gradients per step; expected the model the profile ran")
    notes = []
    if order is None:
        order = list(range(n - 1, -1, -1))
        where = "the reverse of DDP's order (the model's backward could not be run)"
        notes.append(f"{model}: its backward could not be run on meta or CPU; ready order taken as the reverse of DDP's order")
    numel = [p.numel() for _, p, _ in plist]
    shapes = [tuple(p.shape) for _, p, _ in plist]
    aligned = align_order(order, shapes, grads.shapes)
    if aligned != order:
        moved = sum(a != b for a, b in zip(aligned, order))
        notes.append(f"{model}: {moved} gradients became ready in another order than {where} gives; "
                     "the profile's recorded shapes set their order")
        order, where = aligned, f"{where}, reordered by the profile's recorded shapes"
    for pos, idx in enumerate(order):
        got = grads.shapes[pos] if pos < len(grads.shapes) else None
        if got is not None and tuple(got) != tuple(shapes[idx]):
            raise InputError(f"--model: {model!r} parameter {idx} has shape {list(shapes[idx])} but the profile's gradient "
                             f"{pos} (ready order) has {list(got)}; expected the model the profile ran")
    for b, span in _bucket_slices(grads):
        total = sum(numel[order[pos]] for pos in span if pos < len(order))
        if total != b.numel:
            raise InputError(f"--model: {model!r} does not match the profile's buckets: bucket {b.index} holds {b.numel:,} "
                             f"elements in the profile, {total:,} in the model's {len(span)} parameters that were ready for it; "
                             "expected the model the profile ran")
    params, buffers = param_records(plist), buffer_records(spec.module)
    checked = "every recorded bucket's element count" if grads.buckets else "the gradient count (no buckets recorded)"
    mapping = ParamMapping(method="factory", confidence="exact" if grads.buckets else "count",
                           detail=f"{model}: {n} parameters in DDP's order; ready order from {where}; matched {checked}")
    return MappedParams(params=params, buffers=buffers, ready_order=tuple(order), mapping=mapping, notes=tuple(notes))


def align_order(order: Sequence[int], shapes: Sequence[tuple[int, ...]],
                recorded: Sequence[tuple[int, ...] | None]) -> list[int]:
    """``order`` (a backward's ready order) made to agree with the profile's recorded shapes: each
    takes the first parameter of its shape not yet taken (autograd may run a node's
    ``AccumulateGrad`` inputs, a Linear's weight and bias, in either order, device by device).
    Unchanged where the shapes are missing or cannot be matched (the shape check reports that)."""
    if len(recorded) != len(order) or any(r is None for r in recorded):
        return list(order)
    pending: dict[tuple[int, ...], list[int]] = {}
    for idx in reversed(order):
        pending.setdefault(tuple(shapes[idx]), []).append(idx)
    out = []
    for shape in recorded:
        queue = pending.get(tuple(shape))  # type: ignore[arg-type]
        if not queue:
            return list(order)
        out.append(queue.pop())
    return out


# ---- without a factory ---------------------------------------------------------------------

def _unnamed(grads: GradInfo, numels: Sequence[int], shapes: Sequence[tuple[int, ...]],
             mapping: ParamMapping) -> MappedParams:
    """Parameters ``param<index>``, indexed in the reverse of the ready order, each of its
    bucket's dtype (float32 where no bucket was recorded)."""
    by_pos = {pos: b.dtype for b, span in _bucket_slices(grads) for pos in span}
    dtypes = [by_pos.get(pos, "float32") for pos in range(grads.num_grads)]
    order = tuple(range(len(numels) - 1, -1, -1))
    recs = [ParamRecord(index=idx, name=f"param{idx}", shape=tuple(shapes[pos]), dtype=dtypes[pos],
                        size_bytes=numels[pos] * DTYPE_SIZE_BYTES[dtypes[pos]])
            for pos, idx in enumerate(order)]
    return MappedParams(params=tuple(reversed(recs)), buffers=(), ready_order=order, mapping=mapping)


def _by_shapes(grads: GradInfo) -> MappedParams:
    shapes = [tuple(s) for s in grads.shapes]  # type: ignore[arg-type]
    numels = [math.prod(s) for s in shapes]
    bad = [b.index for b, span in _bucket_slices(grads) if sum(numels[p] for p in span if p < len(numels)) != b.numel]
    checked = ("no bucket sizes recorded: totals not checked" if not grads.buckets
               else "bucket totals match" if not bad else f"buckets {bad} do not add up to the recorded sizes")
    detail = f"{len(shapes)} gradients sized by record_shapes; names unknown (param<index>, index = reverse ready order); {checked}"
    return _unnamed(grads, numels, shapes, ParamMapping(method="shapes", confidence="order-only" if bad else "shapes",
                                                        detail=detail))


def _split(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder), each part >= 1 where possible."""
    w = [max(x, 1.0) for x in weights]
    s = sum(w)
    raw = [total * x / s for x in w]
    parts = [max(1, int(r)) if total >= len(w) else int(r) for r in raw]
    diff = total - sum(parts)
    ranked = sorted(range(len(w)), key=lambda k: (-(raw[k] - int(raw[k])), k))
    k = 0
    while diff != 0 and ranked:
        j = ranked[k % len(ranked)]
        if diff > 0:
            parts[j] += 1
            diff -= 1
        elif parts[j] > 1:
            parts[j] -= 1
            diff += 1
        k += 1
    return parts


def _by_bucket_sizes(grads: GradInfo, source: str) -> MappedParams:
    covered = sum(b.num_grads for b in grads.buckets)
    if not grads.buckets or covered != grads.num_grads:
        raise InputError(f"{source}: its DDP recorded no bucket sizes for {grads.num_grads - covered} of its {grads.num_grads} "
                         "gradients (no record_param_comms all-reduce after them) and no --model was given; expected "
                         "--model FACTORY, or a profile of DDP recorded with record_shapes=True")
    numels: list[int] = []
    for b, span in _bucket_slices(grads):
        numels += _split(b.numel, [grads.work[p] for p in span])
    detail = (f"{len(numels)} gradients in {len(grads.buckets)} recorded buckets; bucket totals exact, each gradient's size "
              "from its bucket-copy kernel's launch grid (approximate); names unknown (param<index>)")
    return _unnamed(grads, numels, [(x,) for x in numels],
                    ParamMapping(method="bucket-sizes", confidence="bucket-totals", detail=detail))
