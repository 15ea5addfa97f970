"""Round-robin process groups: DDP's ``k``-th collective goes to communicator ``k mod N``, as
``ProcessGroupRoundRobin::next()`` did (``torch/csrc/distributed/c10d/ProcessGroupRoundRobin.cpp``,
made by ``distributed_c10d.py``'s ``_round_robin_process_groups``; removed by pytorch/pytorch#132888,
torch 2.5; Li et al., "PyTorch Distributed", VLDB 2020, section 5.4). Each group is an in-order
stream; collectives of different groups run at once, at the comm model's ``concurrent_rate`` when
it measured concurrency, else sharing the topology's capacity (the rate of a 1 GiB all-reduce)
by bandwidth, their latencies at full pace. The model and its approximations: docs/MODEL.md,
"Round-robin process groups"."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Iterator

import simpy

#: the all-reduce whose rate stands for the topology's capacity (1 GiB)
CAPACITY_PROBE_BYTES = 1 << 30


class GroupStreams:
    """``n`` communicators' streams over the engine's collectives (``Engine.colls``)."""

    def __init__(self, eng: Any, n: int) -> None:
        self.eng = eng
        self.n = n
        self._demand: dict[int, float] = {}  # rate() asks it for every collective in flight, at every change
        self._latency_s = eng.duration_s(1, False)
        self.capacity = self.demand(CAPACITY_PROBE_BYTES)

    def demand(self, size_bytes: int) -> float:
        """Bytes per second an all-reduce of ``size_bytes`` moves alone (inf when it is all latency)."""
        if (d := self._demand.get(size_bytes)) is None:
            t = self.eng.duration_s(size_bytes, False)
            d = self._demand[size_bytes] = size_bytes / (t - self._latency_s) if t > self._latency_s else math.inf
        return d

    def stream(self, g: int) -> Iterator[simpy.Event]:
        """Group ``g``: its collectives (``g, g + n, ...``) in order, ``lanes`` at a time."""
        eng, env = self.eng, self.eng.env
        mine: list[Any] = []
        #: when this group's last collective ended
        free_s = 0.0
        i = g
        while True:
            c = eng.coll(i)
            yield c.all_arrived
            while sum(1 for r in mine if not r.done.triggered) >= eng.lanes:
                yield eng.changed
            if c.arrival_max_s > env.now:
                yield env.timeout(c.arrival_max_s - env.now)
            c.start_s = env.now
            free_s = max([free_s] + [r.end_s for r in mine if r.done.triggered])
            mine = [r for r in mine if not r.done.triggered]
            idle = not mine and c.arrival_max_s > free_s
            extra = eng.ask("idle_launch_extra_s", c.size_bytes) if idle and eng.idle_launches and c.kind == "allreduce" else 0.0
            mine.append(c)
            eng.running.append(c)
            eng.in_flight_changed()
            env.process(eng.in_flight(c, partial(self.rate, c), extra))
            i += self.n

    def rate(self, c: Any) -> float:
        """``c``'s pace with the collectives now in flight, as a fraction of its pace alone, and
        ``1/comm_slowdown`` while any rank computes."""
        eng = self.eng
        r = 1.0
        if eng.lanes > 1:  # the comm model measured concurrency
            r = eng.rate(c)
        elif len(eng.running) > 1:  # every group's collectives in flight share the topology
            finite = [self.demand(x.size_bytes) for x in eng.running]
            if not any(math.isinf(d) for d in finite):
                f = min(1.0, self.capacity / sum(finite))
                w = eng.bandwidth_share(c.size_bytes, False, eng.duration_s(c.size_bytes, False))
                r = 1.0 / ((1.0 - w) + w / f)
        return r * eng.comm_pace() if eng.interfere else r
