"""Mutual slowdown of compute and communication on one device: the :class:`Interference` a
calibration measures (the executor's ``collectives`` step) or the GPU contention prior
(:mod:`ddpsim.network.contention`) supplies, and the engine applies while both run."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from ddpsim.errors import InputError

#: how a collective in flight weights ``Interference.compute_slowdown``
WEIGHTINGS = ("uniform", "bandwidth", "table")


@dataclass(frozen=True, kw_only=True)
class Interference:
    """Mutual slowdown of compute and communication sharing a device (or a CPU).

    ``compute_slowdown``: compute runs this many times slower while a collective is in
    flight. ``comm_slowdown``: a collective runs this many times slower while compute runs.
    1.0 = no interference. Measured by the executor (``collectives`` step) and stored in
    the calibration file.

    ``weighting``: how much of ``compute_slowdown`` a collective in flight applies.
    ``"uniform"``: all of it, whatever the collective. ``"bandwidth"``: the share of the
    collective's time that moves bytes, ``f = 1 - t(smallest) / t(size)`` from the comm
    model's own curve (``allreduce_s(1)``: its latency floor), so compute runs
    ``1 + (compute_slowdown - 1) * f`` times slower. On a CPU host the bytes are what
    takes the cores (gloo's copies and reductions, the kernel's socket copies); the latency
    part of a small collective is a wait that leaves them to compute. ``"table"``: the
    share given by ``size_weights``, ``(size_bytes, share)`` pairs in increasing size; a
    collective takes the share of the largest listed size <= its own (0 below the first):
    the GPU prior of :mod:`ddpsim.network.contention`, where a collective's share follows the SMs
    and HBM bandwidth NCCL takes at that size.
    """

    compute_slowdown: float = 1.0
    comm_slowdown: float = 1.0
    weighting: str = "uniform"
    size_weights: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        for name in ("compute_slowdown", "comm_slowdown"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 1.0:
                raise InputError(f"interference.{name}: {v!r} is not accepted; expected a number >= 1.0")
        if self.weighting not in WEIGHTINGS:
            raise InputError(f"interference.weighting: {self.weighting!r} is not accepted; expected one of "
                             f"{', '.join(WEIGHTINGS)}")
        try:
            pairs = tuple((int(a), float(b)) for a, b in self.size_weights)
        except (TypeError, ValueError):
            pairs = None
        if (pairs is None or any(not 0.0 <= w <= 1.0 or s < 0 for s, w in pairs)
                or any(b[0] <= a[0] for a, b in zip(pairs, pairs[1:]))):
            raise InputError(f"interference.size_weights: {self.size_weights!r} is not accepted; expected "
                             "(size_bytes, share) pairs with increasing sizes >= 0 and shares in [0, 1]")
        if self.weighting == "table" and not pairs:
            raise InputError("interference.size_weights: () is not accepted with weighting 'table'; expected at least one "
                             "(size_bytes, share) pair")
        object.__setattr__(self, "size_weights", pairs)

    def weight_for(self, size_bytes: int) -> float:
        """``weighting == "table"``: the share of the largest listed size <= ``size_bytes``."""
        i = bisect.bisect_right(self.size_weights, (size_bytes, math.inf)) - 1
        return self.size_weights[i][1] if i >= 0 else 0.0
