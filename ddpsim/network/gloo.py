"""gloo's ring all-reduce for CPU tensors as a closed form: ``ProcessGroupGloo::allreduce`` on dense
CPU tensors runs ``gloo::allreduce``'s ``ring()`` (gloo/allreduce.cc, commit cc441984): segments of at
most ``kMaxSegmentSize`` = 1 MiB, ``numSegments = roundUp(max(ceil(S / maxSegmentBytes), 2P), P)``, a
reduce-scatter (summing each received segment on the CPU) then an all-gather of ``numSegments - numSegments/P``
transfers each. Model (an assumption from the loop bounds): every transfer pays the hop's latency in full
plus its bytes at the hop's bandwidth, the reduction its bytes at the reduce bandwidth::

    time_s = 2 * (numSegments - numSegments/P) * (hop_latency_s + segmentBytes / hop_bandwidth)
           + (numSegments - numSegments/P) * segmentBytes / reduce_bandwidth

Broadcast (``gloo::broadcast``): a binomial tree, ``ceil(log2 P)`` rounds of ``latency + S / bandwidth``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

K_MAX_SEGMENT_BYTES = 1024 * 1024  # gloo/allreduce.h kMaxSegmentSize


def _round_up(x: int, m: int) -> int:
    return ((x + m - 1) // m) * m


@dataclass(frozen=True, kw_only=True)
class RingSchedule:
    num_segments: int
    segment_bytes: int
    steps_per_phase: int  # segment transfers per rank in each phase

    @property
    def num_hops(self) -> int:
        """Segment transfers per rank in both phases."""
        return 2 * self.steps_per_phase


def ring_schedule(size_bytes: int, num_ranks: int, element_size_bytes: int = 4) -> RingSchedule:
    """gloo ``ring()``'s segmentation of one all-reduce."""
    assert num_ranks >= 2 and size_bytes >= 0 and element_size_bytes >= 1
    max_seg = element_size_bytes * max(1, K_MAX_SEGMENT_BYTES // element_size_bytes)
    num_segments = _round_up(max(math.ceil(size_bytes / max_seg), 2 * num_ranks), num_ranks)
    seg_bytes = _round_up(math.ceil(size_bytes / num_segments), element_size_bytes)
    steps = num_segments - num_segments // num_ranks
    return RingSchedule(num_segments=num_segments, segment_bytes=seg_bytes, steps_per_phase=steps)


def ring_allreduce_s(size_bytes: int, num_ranks: int, *, hop_latency_s: float, hop_bandwidth_bytes_per_s: float,
                     reduce_bandwidth_bytes_per_s: float) -> float:
    """Seconds for gloo's ring all-reduce of float32 elements (closed form in the module docstring)."""
    if num_ranks <= 1 or size_bytes <= 0:
        return 0.0
    s = ring_schedule(size_bytes, num_ranks)
    transfer = s.num_hops * (hop_latency_s + s.segment_bytes / hop_bandwidth_bytes_per_s)
    reduce = s.steps_per_phase * s.segment_bytes / reduce_bandwidth_bytes_per_s
    return transfer + reduce


def broadcast_s(size_bytes: int, num_ranks: int, *, hop_latency_s: float, hop_bandwidth_bytes_per_s: float) -> float:
    """Seconds for a binomial-tree broadcast: ceil(log2 P) rounds of latency + S / bw."""
    if num_ranks <= 1 or size_bytes <= 0:
        return 0.0
    rounds = math.ceil(math.log2(num_ranks))
    return rounds * (hop_latency_s + size_bytes / hop_bandwidth_bytes_per_s)
