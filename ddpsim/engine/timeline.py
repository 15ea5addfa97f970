"""A rank's clocks and the primitives of its program: compute-stream work, collective launches,
waits, and the CPU clock of host costs.

The compute stream is a clock ``t`` that work advances in closed form (at rate 1 without
interference, else on the engine's work clock, :meth:`Engine.run_compute`, one run up to the
rank's next launch or wait); a wait moves it to the collective's end (span ``wait``). With host
costs (:mod:`ddpsim.network.host_costs`) a CPU clock runs beside it: the device cannot run what
the CPU has not enqueued (``torch/csrc/distributed/c10d/reducer.cpp``'s hooks run on that
thread). The DDP program built from these primitives is :mod:`ddpsim.engine.reducer`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import simpy

from ddpsim.engine.streams import Coll, Engine


@dataclass(slots=True)
class IterAcc:
    """One iteration's figures of one rank, accumulated as its spans are recorded (its end and
    its backward compute's end set when reached)."""

    start_s: float
    end_s: float = math.nan
    forward_s: float = 0.0
    backward_s: float = 0.0
    optimizer_s: float = 0.0
    bwd_end_s: float = math.nan
    #: busy blocks of the compute stream (back-to-back works merge)
    compute: list[tuple[float, float]] = field(default_factory=list)


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
        #: launches need not run the works before them first (:meth:`launch`)
        self.lazy = eng.steps_only and not record and not self.fast and eng.join is None
        #: works not yet run (interference: rates change with what is in flight; :meth:`flush`)
        self.pending: list[tuple] = []
        self.pending_s = 0.0
        #: the CPU's clock (host costs only): when it has enqueued everything issued so far
        self.cpu = 0.0
        self.issue_s = 0.0
        #: id(layout) -> (layout, its backward's segments) (:mod:`ddpsim.engine.segments`)
        self.segments_of: dict[int, tuple] = {}

    # -- primitives -------------------------------------------------------------------------
    def work(self, kind: str, name: str, dur: float, bucket: int | None = None,
             size: int | None = None) -> Iterator[simpy.Event]:
        """``dur`` seconds of full-rate compute-stream work (a generator: ``yield from``). A rank
        that launches without running its works first (``lazy``) runs them at its next wait or
        gate, or at the step's end, with every work in between."""
        self.advance(kind, name, dur, bucket, size)
        if self.pending and not self.lazy:
            yield from self.flush()

    def advance(self, kind: str, name: str, dur: float, bucket: int | None = None, size: int | None = None) -> None:
        """``dur`` seconds of full-rate compute-stream work, without SimPy. At rate 1 (no
        interference) it is done and recorded at once (what :meth:`_record_run` does for a run
        of one); else it joins the works :meth:`flush` runs at the rank's next interaction."""
        if dur > 0:
            if self.fast:
                t0 = self.t
                t1 = self.t = t0 + dur
                if self.record:
                    acc = self.acc
                    if self.keep_spans:
                        self.spans.append((t0, 0, len(self.spans), t1, kind, name, self.iter, bucket, size))
                    comp = acc.compute
                    if comp and comp[-1][1] == t0:
                        comp[-1] = (comp[-1][0], t1)
                    else:
                        comp.append((t0, t1))
                    if kind == "backward":
                        acc.backward_s += t1 - t0
                    elif kind == "forward":
                        acc.forward_s += t1 - t0
                    elif kind == "optimizer":
                        acc.optimizer_s += t1 - t0
                return
            pending = self.pending
            self.pending_s += dur
            if not self.record and pending and pending[-1][0] is not None:
                # the folded ranks' representative records nothing: one work for the run of works
                pending[-1] = (kind, name, pending[-1][2] + dur, None, None)
            else:
                pending.append((kind, name, dur, bucket, size))

    def flush(self) -> Iterator[simpy.Event]:
        """Run the deferred works at the rates in force (:meth:`Engine.run_compute`: SimPy
        only where what is in flight changes) and record them."""
        items = self.pending[:]
        self.pending.clear()
        self.pending_s = 0.0
        start = self.eng.env.now
        ends = yield from self.eng.run_compute([it[2] for it in items], [it[0] is None for it in items])
        if self.record:
            self._record_run(items, start, ends)
        self.t = ends[-1]

    def _record_run(self, items: Sequence[tuple], start: float, ends: Sequence[float]) -> None:
        """The spans, busy blocks (back-to-back works merge) and iteration figures of a run of works
        from ``start``, each ending at its ``ends`` entry (a host gate, kind None, has no span)."""
        acc = self.acc
        spans = self.spans if self.keep_spans else None
        comp, it = acc.compute, self.iter
        fwd, bwd, opt = acc.forward_s, acc.backward_s, acc.optimizer_s
        for (kind, name, _, bucket, size), end in zip(items, ends):
            if kind is not None:
                if spans is not None:
                    spans.append((start, 0, len(spans), end, kind, name, it, bucket, size))
                if comp and comp[-1][1] == start:  # busy blocks: back-to-back works merge
                    comp[-1] = (comp[-1][0], end)
                else:
                    comp.append((start, end))
                if kind == "backward":
                    bwd += end - start
                elif kind == "forward":
                    fwd += end - start
                elif kind == "optimizer":
                    opt += end - start
            start = end
        acc.forward_s, acc.backward_s, acc.optimizer_s = fwd, bwd, opt

    def runs_on(self) -> bool:
        """Whether the rank may launch before its pending works have run (:meth:`launch`):
        it records nothing, and they are one run of works without a gate."""
        pending = self.pending
        return self.lazy and len(pending) == 1 and pending[0][0] is not None

    def launch(self, kind: str, name: str, bucket: int | None, size_bytes: int, broadcast: bool = False,
               then_s: float = 0.0) -> Coll:
        """Launch a collective once the compute stream has reached this point. With works
        pending (:meth:`runs_on`), the rank arrives where the work clock reaches their end,
        ``W(now) + pending_s`` (what :meth:`flush` runs them to), without SimPy."""
        eng = self.eng
        work = None
        host = eng.host
        pending = self.pending
        if host is not None:  # the CPU issues it (never before the device reaches it)
            self.cpu += host.enqueue_s
            t = self.cpu if self.cpu > self.t else self.t
        else:
            t = -math.inf if pending else self.t
        if pending:
            assert self.runs_on(), "a launch must follow the rank's work: flush() first (or runs_on())"
            work = eng.work_at(eng.env.now) + self.pending_s
        c = eng.arrive(self.seq, t, kind, name, self.iter, bucket, size_bytes, broadcast, then_s, work)
        self.seq += 1
        self.issue_s = self.t  # the compute stream's clock when the latest collective was issued
        return c

    # -- host costs (ddpsim.network.host_costs): a CPU clock beside the compute stream ------------------
    def host_gate(self) -> Iterator[simpy.Event]:
        """The device cannot run what the CPU has not enqueued: idle until the CPU's clock."""
        self.gate()
        if self.pending:
            yield from self.flush()

    def gate(self) -> None:
        """:meth:`host_gate` without SimPy: at rate 1 at once, else a gate item that
        :meth:`flush` runs with the works around it."""
        if self.fast:
            if self.cpu > self.t:
                self.t = self.cpu
        elif self.cpu > (self.eng.env.now + self.pending_s if self.pending else self.t):
            # rates are at most 1: the device reaches this point no earlier than now plus the
            # works before it; a CPU clock not past that cannot make it idle
            self.pending.append((None, "host gate", self.cpu, None, None))

    def wait(self, c: Coll, name: str) -> Iterator[simpy.Event]:
        eng = self.eng
        if self.pending:
            if c.done.processed:
                # it ended by now, before the rank gets past the works it has not yet run: no
                # wait, and the works run on with those that follow (one flush for all)
                return
            yield from self.flush()
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
        if self.pending:
            yield from self.flush()
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
