"""The engine's shared state and its streams: the process group's collectives and the time
advance of every rank's work under interference.

A collective starts when every rank has launched it and its stream (or, with ``comm_lanes > 1``,
one of ProcessGroupGloo's worker lanes, ``torch/csrc/distributed/c10d/ProcessGroupGloo.cpp``)
is free, and runs ``comm.allreduce_s(bytes)`` (or ``broadcast_s``) on every rank at once; an
all-reduce launched onto an idle stream pays ``idle_launch_extra_s`` once every rank waits.
Interference is rate-based (:class:`ddpsim.network.interference.Interference`), the same for
every rank, so one piecewise-linear work clock ``W(t)`` gives every rank's works in closed form
(:meth:`Engine.run_compute`): SimPy meets a rank once per run of works, never per work or per
change of rate; with ``steps_only`` a rank that records nothing posts its arrivals on that
clock (:meth:`Engine.arrive`). docs/MODEL.md, "The engine" and "Collectives, lanes and idle launches"."""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from functools import partial
from heapq import heappop, heappush
from itertools import accumulate
from typing import Callable, Iterator

import simpy

from ddpsim.engine.config import SimConfig, checked_s
from ddpsim.engine.features import (GRAPH_SEARCH_S_PER_PARAM, BucketLayout, DelayedAllReduce, SyncBatchNorm,
                                    buffer_broadcast_buckets)
from ddpsim.errors import InputError
from ddpsim.network.comm_model import CommModel
from ddpsim.network.interference import Interference
from ddpsim.network.kernel_costs import copy_kernel_s, mp_param_cast_s, param_elem_bytes, read_write_s
from ddpsim.plan.planner import BucketPlan, reducer_param_indices
from ddpsim.schema import is_num
from ddpsim.trace.records import Trace


@dataclass(slots=True, eq=False)
class Coll:
    """One collective of the process group (shared by all ranks)."""

    index: int
    all_arrived: simpy.Event
    done: simpy.Event
    kind: str | None = None
    name: str = ""
    iteration: int = 0
    bucket: int | None = None
    size_bytes: int = 0
    work_s: float = 0.0
    #: share of ``compute_slowdown`` that compute pays while this collective runs
    slow_weight: float = 1.0
    arrivals: int = 0
    arrival_max_s: float = -math.inf
    #: the latest arrival posted on the work clock (:meth:`Engine.arrive`'s ``work``)
    arrival_work: float = -math.inf
    start_s: float = math.nan
    end_s: float = math.nan


class Engine:
    """What every rank shares: options, phase times, comm model, layouts, collectives, interference."""

    #: Join's end of the epoch (ddpsim.engine.join.JoinProgram), or None
    join = None
    #: ``simulate(steps_only=True)``: ranks that record nothing launch before running their
    #: works (:meth:`RankTimeline.launch`); a collective no change can pace runs as one timer
    steps_only = False

    def __init__(self, env: simpy.Environment, trace: Trace, plan: BucketPlan, comm: CommModel,
                 config: SimConfig) -> None:
        self.env = env
        self.trace = trace
        self.plan = plan
        self.comm = comm
        self.config = config
        # the reducer DDP builds under the plan's options
        opts = plan.options
        #: the reducer's parameters (all but delay_all_reduce_named_params); none: DDP builds no reducer
        self.reducer_params = reducer_param_indices(trace, opts)
        self.has_reducer = bool(self.reducer_params)
        self.find_unused_dynamic = opts.find_unused_parameters and not opts.static_graph and self.has_reducer
        self.static_graph = opts.static_graph and self.has_reducer
        self.gabv = opts.gradient_as_bucket_view
        self.batched = opts.batched_grad_copy
        self.skip_unused = opts.skip_all_reduce_unused_params
        # DDP returns from __init__ before the mixed precision setup when every parameter is delayed
        self.mixed_precision = opts.mixed_precision if self.has_reducer else None
        #: Reducer's comm_hook_ == nullptr: the reducer itself divides by the world size (reducer.cpp)
        self.reducer_divides = config.comm_hook == "none" and self.mixed_precision is None
        self.copy_bw = config.copy_bandwidth_bytes_per_s
        peak = trace.environment.get("peak_flops_per_s")
        self.peak_flops = float(peak) if is_num(peak) and peak > 0 else None
        gs = trace.environment.get("graph_search_s_per_param", GRAPH_SEARCH_S_PER_PARAM)
        self.graph_search_s = checked_s(gs, "trace.environment.graph_search_s_per_param:") * trace.num_params
        self._init_comm(comm, config)
        self._init_phases(trace, config)
        self._init_kernels(trace, config)
        self.syncbn = SyncBatchNorm(trace, self) if config.sync_batchnorm else None
        self.buffer_buckets = buffer_broadcast_buckets(trace, opts, self.mixed_precision, self.has_reducer)
        #: the per-buffer flatten and copy-back of that broadcast (0 without a measured cost)
        self.buffer_copies_s = self.broadcast_per_tensor_s * len(trace.buffers) if self.buffer_buckets else 0.0
        delayed = opts.delay_all_reduce_named_params is not None
        self.delayed = DelayedAllReduce(trace, self) if delayed else None
        self.layouts: dict[int, BucketLayout] = {}
        #: id(layout) -> (layout, its backward's segments, their gate table) (:mod:`ddpsim.engine.segments`)
        self.segments_of: dict[int, tuple] = {}
        # one layout per distinct bucket tuple (the plan hands out the same tuple objects: looked
        # up by identity, then by value, not hashed per iteration)
        by_id: dict[int, BucketLayout] = {}
        for k in range(1, config.num_iterations + 1):
            bs = plan.layout_for_iteration(k)
            layout = by_id.get(id(bs))
            if layout is None:
                layout = next((lay for lay in by_id.values() if lay.buckets == bs), None) or BucketLayout(trace, bs, self)
                by_id[id(bs)] = layout
            self.layouts[k] = layout
        # collectives and interference state
        self.colls: list[Coll] = []
        self.num_participants = 0
        self.busy = 0
        self.comm_active = False
        self.changed = env.event()
        self._init_work_clock()

    def _init_comm(self, comm: CommModel, config: SimConfig) -> None:
        """The comm model's capabilities, checked (an InputError names the first bad one), and the
        interference in force."""
        where = f"comm model {type(comm).__name__}."
        #: the comm model's answers (:meth:`ask`)
        self._asked: dict[tuple, float] = {}
        # DDP's per-iteration fixed cost on this machine (Python pre/post-forward, reducer
        # bookkeeping, waking the backend's threads) and its forward buffer broadcast per buffer
        # (flatten, copy back), when the comm model declares them (None: 0)
        v = comm.iteration_overhead_s
        self.iteration_overhead_s = checked_s(0.0 if v is None else v,
                                              f"{where}iteration_overhead_s:")
        v = comm.broadcast_per_tensor_s
        self.broadcast_per_tensor_s = checked_s(0.0 if v is None else v,
                                                f"{where}broadcast_per_tensor_s:")
        self.forward_factor = checked_s(comm.ddp_forward_factor, f"{where}ddp_forward_factor:", True)
        #: the comm model charges an all-reduce launched onto an idle stream (``idle_launch_extra_s``)
        self.idle_launches = callable(comm.idle_launch_extra_s)
        #: collectives of the process group that progress at once (ProcessGroupGloo's worker
        #: threads); 1: one in-order stream (NCCL, every analytical model)
        self.lanes = comm.comm_lanes
        if isinstance(self.lanes, bool) or not isinstance(self.lanes, int) or self.lanes < 1:
            raise InputError(f"{where}comm_lanes: {self.lanes!r} is not accepted; expected an integer >= 1")
        #: collectives in progress (the multi-lane stream, or every round-robin group's)
        self.running: list[Coll] = []
        #: compute's slowdown weight from their shares: the largest; round-robin groups
        #: (:mod:`ddpsim.engine.process_groups`) run at once, so compute pays their sum
        self.combine_weights: Callable = sum if config.process_groups > 1 else max
        #: ranks blocked in a wait (fast path; the slow path's ``busy`` counts the others)
        self.waiting = 0
        self.interfere = config.interference != Interference()
        self.compute_slow = float(config.interference.compute_slowdown)
        self.comm_slow = float(config.interference.comm_slowdown)
        self.bandwidth_weighted = config.interference.weighting == "bandwidth"
        self.table_weighted = config.interference.weighting == "table"
        #: CPU costs on a per-rank CPU timeline (ddpsim.network.host_costs), or None
        self.host = config.host_costs
        #: ProcessGroupNCCL: a collective's future completes at enqueue, so a comm hook's whole
        #: ``.then()`` chain runs on the CPU inside the autograd hook (gloo's completes when done)
        self.futures_at_enqueue = comm.backend == "nccl"
        #: the running collective's ``slow_weight`` (slow path)
        self.comm_weight = 1.0

    def _init_phases(self, trace: Trace, config: SimConfig) -> None:
        """The trace's phase times and gradient-ready offsets (``SimConfig.compute_statistic``)."""
        st = config.compute_statistic
        self.forward_s = trace.phase("forward").stat(st) * self.forward_factor
        self.backward_s = trace.phase("backward").stat(st)
        self.optimizer_s = trace.phase("optimizer").stat(st)
        self.zero_grad_s = trace.phase("zero_grad").stat(st)
        med = trace.grad_ready_stat_s(st)
        for i, t in enumerate(med):
            if t is not None:
                checked_s(t, f"trace.iterations[].grad_ready_s[{i}]: median")
        self.order = list(trace.grad_ready_order)
        # the capture's timing hooks slowed its backward by hook_overhead_frac; DDP's hooks
        # replace them (their work, the copy-in, is modelled on its own)
        unhook = 1.0 / (1.0 + (trace.hook_overhead_frac or 0.0))
        self.ready = [0.0 if t is None else float(t) * unhook for t in med]
        self.backward_s *= unhook
        last = max((self.ready[p] for p in self.order), default=0.0)
        self.bwd_total_s = max(self.backward_s, last)
        self.tail_s = self.bwd_total_s - last

    def _init_kernels(self, trace: Trace, config: SimConfig) -> None:
        """Per parameter: its hook's copy-in or zero-fill, and mixed precision's cast before forward."""
        self.names = [p.name for p in trace.params]
        in_reducer = set(self.reducer_params)
        self.is_reducer = [p.index in in_reducer for p in trace.params]
        self.unused = [p.index for p in trace.params if not p.has_grad and p.index in in_reducer]
        self.has_grad = [p.has_grad for p in trace.params].__getitem__
        self.param_sizes = [p.size_bytes for p in trace.params]
        mp, bw, floor_s = self.mixed_precision, self.copy_bw, config.copy_kernel_floor_s
        grad_bytes = [p.numel * param_elem_bytes(p.dtype, mp)[1] for p in trace.params]
        self.copy_in_s = [read_write_s(g, bw, floor_s) for g in grad_bytes]
        self.zero_s = [copy_kernel_s(g, bw, floor_s) for g in grad_bytes]
        # mixed precision's cast of every parameter before forward (_root_copy_hook)
        self.mp_cast_s = 0.0 if mp is None else mp_param_cast_s(sum(self.param_sizes), sum(grad_bytes), bw)

    def skips_bucket(self, b: int, layout: BucketLayout, static_first: bool) -> bool:
        """skip_all_reduce_unused_params (``Reducer::should_skip_all_reduce_bucket``): every
        parameter in ``unused_parameters_`` (filled by find_unused_parameters, or static_graph
        after iteration 1)."""
        return (self.skip_unused and layout.all_unused[b] and not static_first
                and (self.find_unused_dynamic or self.static_graph))

    # -- collectives ----------------------------------------------------------------------
    def coll(self, index: int) -> Coll:
        while len(self.colls) <= index:
            self.colls.append(Coll(len(self.colls), self.env.event(), self.env.event()))
        return self.colls[index]

    def ask(self, what: str, *args: object, positive: bool = False) -> float:
        """The comm model's ``what(*args)`` in seconds (``positive``: a rate > 0), asked once per
        arguments and checked."""
        key = (what, *args)
        v = self._asked.get(key)
        if v is None:
            where = f"comm model {type(self.comm).__name__}.{what}({', '.join(map(repr, args))}):"
            v = self._asked[key] = checked_s(getattr(self.comm, what)(*args), where, positive)
        return v

    def duration_s(self, size_bytes: int, broadcast: bool) -> float:
        """The comm model's time for one collective."""
        return self.ask("broadcast_s" if broadcast else "allreduce_s", size_bytes)

    def bandwidth_share(self, size_bytes: int, broadcast: bool, work_s: float) -> float:
        """``1 - t(1 byte) / t(size)``: the share of a collective's time that moves bytes, the
        rest being the comm model's latency floor (``Interference.weighting == "bandwidth"``)."""
        if size_bytes <= 1 or work_s <= 0:
            return 0.0
        return min(1.0, max(0.0, 1.0 - self.duration_s(1, broadcast) / work_s))

    def all_waiting(self) -> bool:
        return self.busy == 0 if self.interfere else self.waiting >= self.num_participants

    def set_waiting(self, delta: int) -> None:
        """Fast path: a rank starts (+1) or stops (-1) waiting; heard only by idle launches."""
        self.waiting += delta
        if self.idle_launches:
            self._notify()

    def arrive(self, index: int, t: float, kind: str, name: str, iteration: int, bucket: int | None,
               size_bytes: int, broadcast: bool, then_s: float = 0.0, work: float | None = None) -> Coll:
        """A rank launches collective ``index`` at ``t`` (given ``work``: no earlier than where
        the work clock reaches it); once every rank is in, ``all_arrived`` succeeds at the latest
        arrival, ``arrival_max_s``."""
        c = self.colls[index] if index < len(self.colls) else self.coll(index)
        if c.kind is None:
            c.kind, c.name, c.iteration, c.bucket, c.size_bytes = kind, name, iteration, bucket, size_bytes
            # then_s: kernels a comm hook's .then() callback puts on the same stream behind it
            base = self.duration_s(size_bytes, broadcast)
            if kind == "syncbn_allgather":
                base *= 0.5  # _SyncBatchNorm: half the all-reduce of the gathered bytes
            c.work_s = base + then_s
            if self.bandwidth_weighted:
                c.slow_weight = self.bandwidth_share(size_bytes, broadcast, c.work_s)
            elif self.table_weighted:
                c.slow_weight = self.config.interference.weight_for(size_bytes)
        else:
            assert c.name == name and c.kind == kind and c.iteration == iteration, \
                f"ranks issued different collectives at position {index}: {c.name!r} vs {name!r}"
        c.arrivals += 1
        if t > c.arrival_max_s:
            c.arrival_max_s = t
        if work is not None and work > c.arrival_work:
            c.arrival_work = work
        if c.arrivals == self.num_participants:
            if c.arrival_work == -math.inf:
                c.all_arrived.succeed()
            elif c.arrival_work <= self.work_at(self.env.now):  # reached already: at its time
                self._all_arrived(c, self.time_at_work(c.arrival_work))
            else:  # when the work clock reaches it (:meth:`_woken`)
                self._target_seq += 1
                heappush(self._targets, (c.arrival_work, self._target_seq, c))
                if self._targets[0][2] is c:
                    self._arm()
        return c

    def _all_arrived(self, c: Coll, t: float) -> None:
        """The latest arrival posted on the work clock took place at ``t``."""
        if t > c.arrival_max_s:
            c.arrival_max_s = t
        c.all_arrived.succeed()

    def comm_stream(self) -> Iterator[simpy.Event]:
        env = self.env
        free_s = 0.0
        i = 0
        while True:
            c = self.coll(i)
            yield c.all_arrived
            start = max(c.arrival_max_s, free_s)
            if start > env.now:
                yield env.timeout(start - env.now)
            c.start_s = start
            extra = 0.0
            if self.idle_launches and c.kind == "allreduce" and c.arrival_max_s > free_s:
                extra = self.ask("idle_launch_extra_s", c.size_bytes)
            if self.interfere:
                self.comm_weight, self.comm_active = c.slow_weight, True  # (the one stream sets it)
                self._notify()
                if self.steps_only and self.comm_slow == 1.0 and not extra:  # at rate 1 whatever happens
                    if c.work_s > 0:
                        yield env.timeout(c.work_s)
                else:
                    yield from self.advance(c.work_s, self.comm_pace, extra)
                self.comm_active = False
                self._notify()
                c.end_s = env.now
            else:
                end = start + c.work_s
                while extra > 0:  # pending until every rank waits, or the collective ends first
                    if self.all_waiting():
                        end, extra = end + extra, 0.0
                        break
                    if end <= env.now:
                        break
                    timer = env.timeout(end - env.now)
                    res = yield timer | self.changed
                    if timer in res and not self.all_waiting():
                        break
                c.end_s = end
                if c.end_s > env.now:
                    yield env.timeout(c.end_s - env.now)
            free_s = c.end_s
            c.done.succeed()
            i += 1

    def rate(self, c: Coll) -> float:
        """The pace of ``c`` among the collectives in progress (``concurrent_rate``, cached, checked)."""
        n = len(self.running)
        return 1.0 if n <= 1 else self.ask("concurrent_rate", c.kind, c.size_bytes, n, positive=True)

    def comm_pace(self) -> float:
        """A collective's pace from interference alone: ``1/comm_slowdown`` while any rank computes."""
        return 1.0 / self.comm_slow if self.busy > 0 else 1.0

    def lane_rate(self, c: Coll) -> float:
        """A lane's pace: :meth:`rate` at :meth:`comm_pace`."""
        return self.comm_pace() * self.rate(c)

    def comm_lanes(self) -> Iterator[simpy.Event]:
        """The process group's queue worked by ``lanes`` threads (ProcessGroupGloo): collectives
        start in launch order once every rank launched them and a lane is free, each at the comm
        model's ``concurrent_rate`` for the number in progress (``/comm_slowdown`` under compute)."""
        env = self.env
        i = 0
        while True:
            c = self.coll(i)
            yield c.all_arrived
            while len(self.running) >= self.lanes:
                yield self.changed
            if c.arrival_max_s > env.now:
                yield env.timeout(c.arrival_max_s - env.now)
            c.start_s = env.now
            extra = 0.0
            if self.idle_launches and c.kind == "allreduce" and not self.running:
                extra = self.ask("idle_launch_extra_s", c.size_bytes)
            self.running.append(c)
            self.in_flight_changed()
            env.process(self.in_flight(c, partial(self.lane_rate, c), extra))
            i += 1

    def in_flight(self, c: Coll, rate: Callable[[], float], extra: float) -> Iterator[simpy.Event]:
        """``c``, one of the collectives in progress (``running``), until its work is done at
        ``rate()`` (:meth:`advance`; ``extra``: its idle launch's cost)."""
        yield from self.advance(c.work_s, rate, extra)
        c.end_s = self.env.now
        self.running.remove(c)
        self.in_flight_changed()
        c.done.succeed()

    def in_flight_changed(self) -> None:
        """The collectives in progress changed: compute pays ``combine_weights`` of their shares."""
        if self.interfere:
            running = self.running
            self.comm_weight = self.combine_weights(r.slow_weight for r in running) if running else 1.0
            self.comm_active = bool(running)
        self._notify()

    # -- interference (slow path) ----------------------------------------------------------
    def _notify(self) -> None:
        """What is in flight changed: the compute rate from now on, then whoever waits for a change."""
        self._rate_from_now()
        old = self.changed
        if old.callbacks:  # else no one waits for it: it stays the event of the next change
            self.changed = self.env.event()
            old.succeed()

    def add_busy(self, delta: int) -> None:
        before = self.busy > 0
        self.busy += delta
        assert self.busy >= 0
        if (self.busy > 0) != before:
            self._notify()

    def compute_rate(self) -> float:
        """Compute-stream work per second now: ``1 / (1 + (compute_slowdown - 1) * weight)``
        while a collective runs (``weight``: its share), 1 otherwise."""
        return 1.0 / (1.0 + (self.compute_slow - 1.0) * self.comm_weight) if self.comm_active else 1.0

    def run_compute(self, works: list[float], gates: list[bool]) -> Iterator[simpy.Event]:
        """Run one rank's compute-stream items from now, in turn; returns when each ended. An item
        is ``works[k]`` seconds of full-rate work or, where ``gates[k]``, a host-cost gate: the
        device idles until the absolute time ``works[k]`` its CPU enqueues the next work."""
        env = self.env
        ends: list[float] = []
        n = len(works)
        i = 0
        while i < n:
            if gates[i]:
                if works[i] > env.now:  # idle until the CPU has enqueued the next work
                    self.add_busy(-1)
                    yield env.timeout(works[i] - env.now)
                    self.add_busy(+1)
                    ends.append(works[i])
                else:
                    ends.append(ends[-1] if ends else env.now)
                i += 1
                continue
            k = i + 1
            while k < n and not gates[k]:
                k += 1
            yield from self._run_works(works[i:k], ends)
            i = k
        return ends

    # -- the work clock: compute-stream work done at the rate in force, shared by every rank --
    def _init_work_clock(self) -> None:
        """The work clock ``W(t)``: full-rate seconds of compute-stream work done from 0 to ``t``,
        piecewise linear (``_clock_t``, ``_clock_w``, ``_clock_r``: each piece's start, W there,
        its rate). Every rank computes at the same rate, so a run of works ends where W reaches
        its target; the targets wait in one heap behind one timer (:meth:`_run_works`)."""
        self._clock_t = [0.0]
        self._clock_w = [0.0]
        self._clock_r = [self.compute_rate()]
        #: (target W, order, event) of every rank's run of works in progress
        self._targets: list[tuple[float, int, simpy.Event]] = []
        self._target_seq = 0
        #: the timer of the earliest target (a later timer makes it stale)
        self._wake: simpy.Event | None = None

    def work_at(self, t: float) -> float:
        """W(t) for ``t`` at or after the clock's last breakpoint."""
        return self._clock_w[-1] + (t - self._clock_t[-1]) * self._clock_r[-1]

    def time_at_work(self, w: float) -> float:
        """When W reached ``w`` (at most W(now)): on the clock's piece that holds it."""
        k = max(0, bisect_right(self._clock_w, w) - 1)
        return self._clock_t[k] + (w - self._clock_w[k]) / self._clock_r[k]

    def _rate_from_now(self) -> None:
        """Where a change moves the compute rate: a breakpoint, and the earliest target's timer moved."""
        r = self.compute_rate()
        if r != self._clock_r[-1]:
            now = self.env.now
            w = self.work_at(now)
            if self._clock_t[-1] == now:  # a second change at this instant: it replaces the first
                self._clock_r[-1] = r
            else:
                self._clock_t.append(now)
                self._clock_w.append(w)
                self._clock_r.append(r)
            if self._targets:
                self._arm()

    def _arm(self) -> None:
        """The timer of the earliest target at the rate in force (any earlier one goes stale)."""
        env = self.env
        target = self._targets[0][0]
        delay = max(0.0, (target - self.work_at(env.now)) / self._clock_r[-1])
        timer = self._wake = env.timeout(delay, target)
        timer.callbacks.append(self._woken)

    def _woken(self, timer: simpy.Event) -> None:
        """The earliest target reached: its run of works (and any that ends with it) is done."""
        if timer is not self._wake:
            return  # stale: the rate changed after it was set
        self._wake = None
        targets, reached = self._targets, timer.value
        while targets and targets[0][0] <= reached:
            waiter = heappop(targets)[2]
            if type(waiter) is Coll:  # a collective's latest arrival (arrive's work)
                self._all_arrived(waiter, self.env.now)
            else:
                waiter.succeed()
        if targets:
            self._arm()

    def _run_works(self, works: list[float], ends: list[float]) -> Iterator[simpy.Event]:
        """Works in turn from now, their ends appended to ``ends``: work ``k`` ends where W reaches
        ``W(now) + works[0] + ... + works[k]``; SimPy meets the run once, at its end."""
        env = self.env
        first = len(self._clock_w) - 1
        goals = list(accumulate(works, initial=self.work_at(env.now)))[1:]
        done = env.event()
        self._target_seq += 1
        heappush(self._targets, (goals[-1], self._target_seq, done))
        if self._targets[0][2] is done:
            self._arm()
        yield done
        now = env.now
        ends += self.times_at(goals[:-1], first, now)
        ends.append(now)

    def times_at(self, goals: list[float], first: int, now: float) -> list[float]:
        """When W reaches each of ``goals`` (increasing; none after ``now``), from breakpoint ``first``."""
        ws, ts, rs = self._clock_w, self._clock_t, self._clock_r
        k, last = first, len(ws) - 1
        out = []
        if k == last:  # no change of the rate during the run: one piece
            t0, w0, r0 = ts[k], ws[k], rs[k]
            out = [t0 + (w - w0) / r0 for w in goals]
        else:
            for w in goals:
                while k < last and ws[k + 1] <= w:
                    k += 1
                out.append(ts[k] + (w - ws[k]) / rs[k])
        i = len(out) - 1
        while i >= 0 and out[i] > now:  # rounding at the run's end
            out[i] = now
            i -= 1
        return out

    def advance(self, work_s: float, rate: Callable[[], float], idle_extra_s: float = 0.0) -> Iterator[simpy.Event]:
        """Do ``work_s`` seconds of full-rate work at ``rate()``, asked again at every change
        (``self.changed``); ``idle_extra_s`` is added once every rank waits, if before the end."""
        env = self.env
        remaining = work_s
        while remaining > 0:
            if idle_extra_s > 0 and self.all_waiting():
                remaining += idle_extra_s
                work_s += idle_extra_s
                idle_extra_s = 0.0
            r = rate()
            t0 = env.now
            timer = env.timeout(remaining / r)
            res = yield timer | self.changed
            if timer in res:
                return
            remaining -= (env.now - t0) * r
            if remaining <= work_s * 1e-12:
                return
