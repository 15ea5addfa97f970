"""A rank's clocks and the primitives of its program: compute-stream work, collective launches,
waits, and the CPU clock of host costs.

A rank's compute stream is a clock ``t``: work advances it (``yield env.timeout`` on the slow
path, arithmetic on the fast path, where SimPy is met only at waits), a wait on a collective
moves it to the collective's end (span ``wait``), and every piece of work is recorded as a span
and in the iteration's figures. With host costs (:mod:`ddpsim.network.host_costs`) a CPU clock
runs beside it: the device cannot run what the CPU has not enqueued, as on a GPU whose host
thread launches every kernel (``torch/csrc/distributed/c10d/reducer.cpp``'s hooks run on it).
The DDP program built from these primitives is :mod:`ddpsim.engine.reducer`.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import simpy

from ddpsim.engine.streams import Coll, Engine


class IterAcc:
    """One iteration's figures of one rank, accumulated as its spans are recorded."""

    __slots__ = ("start_s", "end_s", "forward_s", "backward_s", "optimizer_s", "bwd_end_s", "compute")

    def __init__(self, start_s: float) -> None:
        self.start_s = start_s
        self.end_s = start_s
        self.forward_s = 0.0
        self.backward_s = 0.0
        self.optimizer_s = 0.0
        self.bwd_end_s = start_s
        self.compute: list[tuple[float, float]] = []


class RankTimeline:
    """One simulated rank's clocks and primitives (or the 'rest' representative's, which records nothing)."""

    def __init__(self, eng: Engine, rank: int, factors: np.ndarray, record: bool) -> None:
        self.eng = eng
        self.rank = rank
        self.factors = [float(f) for f in factors]
        self.record = record
        self.t = 0.0
        self.seq = 0
        self.iter = 0
        self.acc: IterAcc | None = None
        self.accs: list[IterAcc] = []
        #: (iteration, bucket, ready_s, launch_s, first coll index, last coll index)
        self.bucket_log: list[tuple[int, int, float, float, int, int]] = []
        #: compute-stream spans as sortable tuples (start, 0, seq, end, kind, name, iteration, bucket, size)
        self.spans: list[tuple] = []
        self.keep_spans = record and eng.keep_spans
        self.finished = False
        self.fast = not eng.interfere
        #: the CPU's clock (host costs only): when it has enqueued everything issued so far
        self.cpu = 0.0
        self.issue_s = 0.0

    # -- primitives -------------------------------------------------------------------------
    def work(self, kind: str, name: str, dur: float, bucket: int | None = None,
             size: int | None = None) -> Iterator[simpy.Event]:
        """``dur`` seconds of full-rate compute-stream work (a generator: ``yield from``)."""
        if dur <= 0:
            return
        if self.fast:
            self.advance(kind, name, dur, bucket, size)
            return
        start = self.eng.env.now
        yield from self.eng.progress(dur, comm=False)
        self._record(kind, name, start, self.eng.env.now, bucket, size)

    def advance(self, kind: str, name: str, dur: float, bucket: int | None = None, size: int | None = None) -> None:
        """Fast path only (no interference): the same as :meth:`work`, without SimPy."""
        if dur > 0:
            self._record(kind, name, self.t, self.t + dur, bucket, size)

    def _record(self, kind: str, name: str, start: float, end: float, bucket: int | None, size: int | None) -> None:
        self.t = end
        if self.record:
            if self.keep_spans:
                spans = self.spans
                spans.append((start, 0, len(spans), end, kind, name, self.iter, bucket, size))
            acc = self.acc
            comp = acc.compute  # busy blocks of the compute stream: merge back-to-back work
            if comp and comp[-1][1] == start:
                comp[-1] = (comp[-1][0], end)
            else:
                comp.append((start, end))
            if kind == "forward":
                acc.forward_s += end - start
            elif kind == "backward":
                acc.backward_s += end - start
            elif kind == "optimizer":
                acc.optimizer_s += end - start

    def launch(self, kind: str, name: str, bucket: int | None, size_bytes: int, broadcast: bool = False,
               then_s: float = 0.0) -> Coll:
        t = self.t if self.eng.host is None else self.host_issue(self.eng.host.enqueue_s)
        c = self.eng.arrive(self.seq, t, kind, name, self.iter, bucket, size_bytes, broadcast, then_s)
        self.seq += 1
        self.issue_s = self.t  # the compute stream's clock when the latest collective was issued
        return c

    # -- host costs (ddpsim.network.host_costs): a CPU clock beside the compute stream ------------------
    def host_issue(self, cost_s: float) -> float:
        """The CPU spends ``cost_s`` issuing something: when it is issued (never before the
        device reaches it in stream order)."""
        self.cpu += cost_s
        return self.cpu if self.cpu > self.t else self.t

    def host_step_start(self) -> None:
        """The CPU meets the device at a step's start, then runs DDP's pre-forward."""
        self.cpu = max(self.cpu, self.t) + self.eng.host.pre_forward_s

    def host_gate(self) -> Iterator[simpy.Event]:
        """The device cannot run what the CPU has not enqueued: idle until the CPU's clock."""
        if self.cpu > self.t:
            if self.fast:
                self.t = self.cpu
            else:
                env = self.eng.env
                self.eng.add_busy(-1)
                yield env.timeout(self.cpu - env.now)
                self.eng.add_busy(+1)
                self.t = self.cpu

    def wait(self, c: Coll, name: str) -> Iterator[simpy.Event]:
        eng = self.eng
        env = eng.env
        if eng.interfere:
            if not c.done.processed:
                eng.add_busy(-1)
                yield c.done
                eng.add_busy(+1)
            start, end = self.t, max(self.t, env.now)
        else:
            if self.t > env.now:
                yield env.timeout(self.t - env.now)
            if not c.done.processed:
                eng.set_waiting(+1)
                yield c.done
                eng.set_waiting(-1)
            start, end = self.t, max(self.t, c.end_s)
        if end > start:
            self.t = end
            if self.keep_spans:
                self.spans.append((start, 0, len(self.spans), end, "wait", name, self.iter, c.bucket, None))

    def wait_until(self, t_abs: float, name: str) -> Iterator[simpy.Event]:
        """The compute stream waits for another stream's work that ends at ``t_abs``."""
        eng = self.eng
        env = eng.env
        if eng.interfere:
            if t_abs > env.now:
                eng.add_busy(-1)
                yield env.timeout(t_abs - env.now)
                eng.add_busy(+1)
        elif t_abs > self.t:
            if self.t > env.now:
                yield env.timeout(self.t - env.now)
            eng.set_waiting(+1)
            yield env.timeout(t_abs - env.now)
            eng.set_waiting(-1)
        start = self.t
        if t_abs > start:
            self.t = t_abs
            if self.keep_spans:
                self.spans.append((start, 0, len(self.spans), t_abs, "wait", name, self.iter, None, None))
