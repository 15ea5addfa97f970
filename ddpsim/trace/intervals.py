"""Unions and intersections of time intervals, and the computation-communication overlap as
HolisticTraceAnalysis computes it (``merge_kernel_intervals`` and ``get_comm_comp_overlap`` in
``hta/analyzers/communication_analysis.py``): communication and computation each merged into
disjoint intervals, the time both run over the merged communication time."""

from __future__ import annotations

from typing import Iterable, Sequence


def merge_intervals(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``intervals`` as sorted disjoint intervals (HTA's ``merge_kernel_intervals``)."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def intersection_s(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted lists of disjoint intervals."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def overlap_ratio(comm: Iterable[tuple[float, float]], comp: Iterable[tuple[float, float]]) -> float | None:
    """HTA's overlap: the merged ``comm`` time that merged ``comp`` covers, over the merged
    ``comm`` time; None without communication."""
    merged = merge_intervals(comm)
    total = sum(b - a for a, b in merged)
    return intersection_s(merged, merge_intervals(comp)) / total if total > 0 else None
