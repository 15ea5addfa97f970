"""Mutual slowdown of compute and communication on one device: the :class:`Interference` a
calibration measures (the executor's ``collectives`` step) or the GPU contention prior
(:mod:`ddpsim.network.contention`) supplies, and the engine applies while both run."""

from __future__ import annotations

import bisect
import math
from typing import Annotated, Any

from pydantic import Field

from ddpsim.errors import InputError
from ddpsim.schema import record, rule
from ddpsim.value_types import MAX_SLOWDOWN, Slowdown

#: how a collective in flight weights ``Interference.compute_slowdown``
WEIGHTINGS = ("uniform", "bandwidth", "table")

Weighting = Annotated[str, rule(f"one of {', '.join(WEIGHTINGS)}", lambda v: v in WEIGHTINGS)]


def _size_weights(v: Any) -> bool:
    try:
        pairs = [(int(a), float(b)) for a, b in v]
    except (TypeError, ValueError):
        return False
    return all(0.0 <= w <= 1.0 and s >= 0 for s, w in pairs) and all(a[0] < b[0] for a, b in zip(pairs, pairs[1:]))


@record("interference.")
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

    compute_slowdown: Slowdown = Field(
        1.0, description=f"compute runs this many times slower under a collective, 1 to {MAX_SLOWDOWN:g}")
    comm_slowdown: Slowdown = Field(
        1.0, description=f"a collective runs this many times slower under compute, 1 to {MAX_SLOWDOWN:g}")
    weighting: Weighting = Field(
        "uniform", description="how much of compute_slowdown a collective in flight applies")
    size_weights: Annotated[tuple[tuple[int, float], ...], rule(
        "(size_bytes, share) pairs with increasing sizes >= 0 and shares in [0, 1]", _size_weights)] = ()

    def __post_init__(self) -> None:
        if self.weighting == "table" and not self.size_weights:
            raise InputError("size_weights: () is not accepted with weighting 'table'; expected at least one "
                             "(size_bytes, share) pair")

    def weight_for(self, size_bytes: int) -> float:
        """``weighting == "table"``: the share of the largest listed size <= ``size_bytes``."""
        i = bisect.bisect_right(self.size_weights, (size_bytes, math.inf)) - 1
        return self.size_weights[i][1] if i >= 0 else 0.0
