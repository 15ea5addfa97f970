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
    """Mutual slowdown of compute and communication sharing a device (or a CPU); 1.0 = none.

    ``compute_slowdown``: compute's slowdown while a collective is in flight; ``comm_slowdown``: a
    collective's while compute runs (the executor's ``collectives`` step measures both). ``weighting``:
    the share of ``compute_slowdown`` a collective applies: ``"uniform"`` all of it; ``"bandwidth"``
    the share of its time that moves bytes, ``f = 1 - t(smallest) / t(size)`` on the comm model's
    curve (on a CPU the bytes take the cores, the latency leaves them to compute), compute running
    ``1 + (compute_slowdown - 1) * f`` times slower; ``"table"`` the share of the largest
    ``size_weights`` size <= its own (0 below the first): the GPU prior of :mod:`ddpsim.network.contention`.
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
