"""gloo's ring all-reduce for CPU tensors, as a closed form.

``ProcessGroupGloo::allreduce`` on dense CPU tensors calls ``gloo::allreduce`` with no
algorithm set, which runs ``ring()`` (gloo/allreduce.cc, commit cc441984):

* P ranks, S bytes of elements of ``element_size_bytes``;
  ``maxSegmentBytes = elementSize * max(1, kMaxSegmentSize / elementSize)``, kMaxSegmentSize = 1 MiB;
  ``numSegments = roundUp(max(ceil(S / maxSegmentBytes), 2P), P)``;
  ``segmentBytes = roundUp(ceil(S / numSegments), elementSize)``.
* reduce-scatter then all-gather, each ``numSegments - numSegments/P`` segment transfers
  per rank (plus 2 drain iterations without data). Bytes sent per rank
  ``2 * (numSegments - numSegments/P) * segmentBytes`` ~ ``2 (P-1)/P * S``.
* the reduce-scatter sums each received segment on the CPU.

Model (our assumption, derived from the loop bounds): each segment transfer costs the
ring hop's latency plus ``segmentBytes / hop bandwidth``; two transfers in flight hide
nothing of the bandwidth term (the link is busy either way) and we charge the latency per
hop in full (small tensors: ``4 (P-1)`` hops, latency-bound); the reduction adds
``reduced bytes / reduce bandwidth``::

    hops      = 2 * (numSegments - numSegments/P)
    time_s    = hops * (hop_latency_s + segmentBytes / hop_bandwidth)
              + (numSegments - numSegments/P) * segmentBytes / reduce_bandwidth

Broadcast (``gloo::broadcast`` via ProcessGroupGloo): modelled as a binomial tree,
``ceil(log2 P)`` rounds of ``latency + S / bandwidth``.
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
        return 2 * self.steps_per_phase

    @property
    def bytes_sent_per_rank(self) -> int:
        return self.num_hops * self.segment_bytes


def ring_schedule(size_bytes: int, num_ranks: int, element_size_bytes: int = 4) -> RingSchedule:
    """gloo ``ring()``'s segmentation of one all-reduce."""
    assert num_ranks >= 2 and size_bytes >= 0 and element_size_bytes >= 1
    max_seg = element_size_bytes * max(1, K_MAX_SEGMENT_BYTES // element_size_bytes)
    num_segments = _round_up(max(math.ceil(size_bytes / max_seg), 2 * num_ranks), num_ranks)
    seg_bytes = _round_up(math.ceil(size_bytes / num_segments), element_size_bytes)
    per_rank = num_segments // num_ranks
    return RingSchedule(num_segments=num_segments, segment_bytes=seg_bytes,
                        steps_per_phase=num_segments - per_rank)


def ring_allreduce_s(size_bytes: int, num_ranks: int, *, hop_latency_s: float, hop_bandwidth_bytes_per_s: float,
                     reduce_bandwidth_bytes_per_s: float, element_size_bytes: int = 4) -> float:
    """Seconds for gloo's ring all-reduce (closed form in the module docstring)."""
    if num_ranks <= 1 or size_bytes <= 0:
        return 0.0
    s = ring_schedule(size_bytes, num_ranks, element_size_bytes)
    transfer = s.num_hops * (hop_latency_s + s.segment_bytes / hop_bandwidth_bytes_per_s)
    reduce = s.steps_per_phase * s.segment_bytes / reduce_bandwidth_bytes_per_s
    return transfer + reduce


def broadcast_s(size_bytes: int, num_ranks: int, *, hop_latency_s: float, hop_bandwidth_bytes_per_s: float) -> float:
    """Seconds for a binomial-tree broadcast: ceil(log2 P) rounds of latency + S / bw."""
    if num_ranks <= 1 or size_bytes <= 0:
        return 0.0
    rounds = math.ceil(math.log2(num_ranks))
    return rounds * (hop_latency_s + size_bytes / hop_bandwidth_bytes_per_s)
