"""The hooks of one synchronised backward between two bucket-ready events, in closed form.

Between two ``Reducer::mark_bucket_ready`` events (``torch/csrc/distributed/c10d/reducer.cpp``)
each ready parameter adds its backward compute and, for a reducer parameter, its hook (CPU time,
the device's gate on the CPU's clock, the gradient's copy-in). Where no host gate falls inside,
a segment is one work of ``s * (backward gaps + copy-ins)`` and ``n * hook_s`` of CPU time: hook
``i`` gates where ``cpu0 + i h > now + P0 + s U_i``, so none does when ``cpu0 - now - P0 <=
min_i (s U_i - i h)`` (:func:`gate_floors`, taken at the rank's least factor ``s``, less
:data:`MARGIN_S`); else the hooks run one by one (:meth:`Rank.hooks_one_by_one`), to the same
result."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: clearance of the no-gate test over rounding of the sums (seconds)
MARGIN_S = 1e-9


@dataclass(slots=True)
class Segment:
    """``eng.order[start:stop]``: the hooks up to (and with) the one that makes a bucket ready."""

    start: int
    stop: int
    #: the latest ready time before the segment (backward gaps never step back)
    prev0: float
    #: full-rate backward gaps plus copy-ins of the segment at s=1
    work_s: float
    #: (bucket, gradients of it marked in the segment)
    marks: list[tuple[int, int]]
    #: the bucket whose last gradient ends the segment (None: the backward's tail)
    ready_b: int | None
    #: per reducer hook i (from 1), ``U_i``: the full-rate work before its gate at s=1 (the
    #: first positive: the rank has pending work there)
    gate_work: list[float]
    #: the works the segment defers on a rank that records them (:meth:`Rank.hooks_one_by_one`):
    #: ``(kind, name, seconds at s=1, bucket, size)``, each backward gap before its hook's copy-in
    items: tuple[tuple, ...] = ()

    def closed_form(self, rank: Any, s: float, floor_s: float) -> bool:
        """Whether the segment can be taken in one go on ``rank`` at factor ``s`` (``floor_s``:
        :func:`gate_floors` at the rank's least factor)."""
        if rank.eng.host is None or not self.gate_work:
            return True
        if not (rank.pending or self.gate_work[0] > 0):
            return False
        slack = rank.cpu - rank.eng.env.now - rank.pending_s
        return slack <= floor_s - MARGIN_S

    def take(self, rank: Any, s: float, grads_left: list[int]) -> None:
        """The segment's works and hooks at once, its buckets' gradients marked: on a rank that
        records them, deferred one by one as :meth:`Rank.hooks_one_by_one` defers them (the same
        items, the same additions to ``pending_s`` and to the CPU's clock in the same order) with
        no gate among them (:meth:`closed_form`); on one that records nothing, as one work."""
        host = rank.eng.host
        if rank.record:
            advance = rank.advance
            for kind, name, w, b, size in self.items:
                advance(kind, name, w * s, b, size)
            if host is not None:
                h, cpu = host.hook_s_per_param, rank.cpu
                for _ in self.gate_work:
                    cpu += h
                rank.cpu = cpu
        else:
            rank.advance("backward", "backward segment", self.work_s * s)
            if host is not None:
                rank.cpu += len(self.gate_work) * host.hook_s_per_param
        for b, n in self.marks:
            grads_left[b] -= n


def gate_table(segs: list[Segment]) -> tuple:
    """Every hook's ``U_i`` and ``i`` of ``segs`` as flat arrays, where each segment's hooks
    start, and which segments have hooks (:func:`gate_floors` reads it for every rank)."""
    sizes = np.array([len(seg.gate_work) for seg in segs], dtype=int)
    total = int(sizes.sum())
    u = np.fromiter((w for seg in segs for w in seg.gate_work), dtype=float, count=total)
    starts = np.cumsum(sizes) - sizes
    i = np.arange(total) - np.repeat(starts, sizes) + 1
    return u, i, starts[sizes > 0], sizes > 0


def gate_floors(segs: list[Segment], s_lo: float, h: float, table: tuple | None = None) -> list[float]:
    """Per segment, ``min_i (s_lo U_i - i h)``: the no-gate bound at the least factor ``s_lo``
    with ``h`` seconds of CPU per hook (inf: no hooks), in one pass over all their hooks
    (``table``: :func:`gate_table` of ``segs``, if already built)."""
    u, i, starts, has = table if table is not None else gate_table(segs)
    out = [math.inf] * len(segs)
    if len(u):
        lows = np.minimum.reduceat(s_lo * u - i * h, starts).tolist()
        for k, low in zip(np.flatnonzero(has).tolist(), lows):
            out[k] = low
    return out


def build_segments(eng: Any, layout: Any) -> list[Segment]:
    """The backward's segments for ``layout`` (the same for every rank), of plain hooks only
    (every reducer parameter has a gradient: :meth:`Rank.segments`)."""
    order, ready, bucket_of, names, sizes = eng.order, eng.ready, layout.bucket_of, eng.names, eng.param_sizes
    left = list(layout.counts)
    segs: list[Segment] = []
    prev, start = 0.0, 0
    while start < len(order):
        prev0, back, copy, gate_work, marks, items = prev, 0.0, 0.0, [], {}, []
        ready_b, stop = None, start
        for p in order[start:]:
            stop += 1
            r = ready[p]
            if r > prev:
                back += r - prev
                items.append(("backward", names[p], r - prev, None, None))
                prev = r
            if not eng.is_reducer[p]:
                continue
            items.append(("copy_in", names[p], eng.copy_in_s[p], bucket_of[p], sizes[p]))
            gate_work.append(back + copy)
            copy += eng.copy_in_s[p]
            b = bucket_of[p]
            marks[b] = marks.get(b, 0) + 1
            left[b] -= 1
            if left[b] == 0:
                ready_b = b
                break
        segs.append(Segment(start, stop, prev0, back + copy, sorted(marks.items()), ready_b,
                            gate_work, tuple(items)))
        start = stop
    return segs
