"""The ranks not simulated one by one, folded into one vectorised process: the same program
(:mod:`ddpsim.engine.reducer`) on a numpy vector of clocks, one per rank's compute factor
(:mod:`ddpsim.engine.jitter`): work adds ``factor_r * dur``, a wait takes ``max(t_r, end)``, a
launch arrives at ``max_r t_r``, so collectives start as in the full world. Their spans and
figures are not kept."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import simpy

from ddpsim.engine.features import BucketLayout
from ddpsim.engine.reducer import Rank
from ddpsim.engine.streams import Coll, Engine


class RestRanks(Rank):
    """Every rank not simulated explicitly, as one process without interference: work adds up
    in ``pend``, folded into the clocks at the next launch or wait (O(R) numpy work each)."""

    def __init__(self, eng: Engine, factors: np.ndarray) -> None:
        super().__init__(eng, -1, np.ones(factors.shape[0]), record=False)
        self.fm = factors                      # (num_iterations, R)
        self.fk = factors[0]
        self.tv = np.zeros(factors.shape[1])
        self.pend = 0.0

    def _fold(self) -> None:
        if self.pend:
            self.tv = self.tv + self.fk * self.pend
            self.pend = 0.0
        self.t = float(self.tv.max())

    def advance(self, kind: str, name: str, dur: float, bucket: int | None = None, size: int | None = None) -> None:
        if dur > 0:
            self.pend += dur

    def launch(self, kind: str, name: str, bucket: int | None, size_bytes: int, broadcast: bool = False,
               then_s: float = 0.0) -> Coll:
        self._fold()
        return super().launch(kind, name, bucket, size_bytes, broadcast, then_s)

    def wait(self, c: Coll, name: str) -> Iterator[simpy.Event]:
        self._fold()
        yield from super().wait(c, name)
        self.tv = np.maximum(self.tv, c.end_s)  # every folded rank waits, not only the latest

    def wait_until(self, t_abs: float | np.ndarray, name: str) -> Iterator[simpy.Event]:
        """Each folded rank waits until its own ``t_abs`` (a scalar for all, or one per rank)."""
        env = self.eng.env
        self._fold()
        if self.t > env.now:
            yield env.timeout(self.t - env.now)
        latest = float(np.max(t_abs))
        if latest > env.now:
            self.eng.set_waiting(+1)
            yield env.timeout(latest - env.now)
            self.eng.set_waiting(-1)
        self.tv = np.maximum(self.tv, t_abs)
        self.t = float(self.tv.max())

    def drain_upcast_stream(self, layout: BucketLayout, s: float, live: list[int],
                            colls: list[list[Coll]]) -> Iterator[simpy.Event]:
        # the side stream's kernels scale with each folded rank's own factor
        free = np.full(self.tv.shape, -np.inf)
        for b in live:
            c = colls[b][-1]
            yield from self.wait(c, f"bucket {b}")
            free = np.maximum(free, c.end_s) + layout.mp_upcast_s[b] * self.fk
        yield from self.wait_until(free, "mixed precision upcast")

    def iteration(self, k: int) -> Iterator[simpy.Event]:
        self._fold()
        self.fk = self.fm[k - 1]
        yield from super().iteration(k)

    def run(self) -> Iterator[simpy.Event]:
        yield from super().run()
        self._fold()
