"""The engine's closed-form progress (Engine.run_compute): a rank's works between two changes of
what is in flight are computed, not scheduled one by one; SimPy meets them only at changes
that move the rate, at gates that make the device idle, and at the end."""

from __future__ import annotations

import simpy

from ddpsim.engine.streams import Engine


class Stub:
    """What run_compute reads of the engine: the clock, the change event, the compute rate."""

    run_compute = Engine.run_compute
    _run_works = Engine._run_works
    _notify = Engine._notify
    add_busy = Engine.add_busy
    _init_work_clock, work_at, times_at = Engine._init_work_clock, Engine.work_at, Engine.times_at
    _rate_from_now, _arm, _woken = Engine._rate_from_now, Engine._arm, Engine._woken
    arrive, coll, _all_arrived, time_at_work = Engine.arrive, Engine.coll, Engine._all_arrived, Engine.time_at_work
    bandwidth_weighted = table_weighted = False

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.changed = self.env.event()
        self.rate = 1.0
        self.busy = 1
        self.wakeups = 0
        self.colls: list = []
        self.num_participants = 2
        self._init_work_clock()

    def duration_s(self, size_bytes: int, broadcast: bool) -> float:
        return 0.0

    def compute_rate(self) -> float:
        return self.rate


def run(stub: Stub, works: list[float], gates: list[bool], changes: list[tuple[float, float]]) -> list[float]:
    out: list[float] = []

    def rank():
        out.extend((yield from stub.run_compute(works, gates)))

    def changer():
        for t, r in changes:
            yield stub.env.timeout(t - stub.env.now)
            stub.rate = r
            stub._notify()

    stub.env.process(rank())
    stub.env.process(changer())
    stub.env.run()
    return out


def test_works_at_rate_one_end_back_to_back():
    assert run(Stub(), [0.25, 0.5, 0.125], [False] * 3, []) == [0.25, 0.75, 0.875]


def test_a_change_of_rate_stretches_the_work_it_cuts_and_those_after():
    # 0.25 at rate 1 ends at 0.25; the second (0.25) has 0.125 done at 0.375 when the rate halves:
    # its other 0.125 takes 0.25 -> 0.625; the third (0.5) at half rate -> 1.625
    assert run(Stub(), [0.25, 0.25, 0.5], [False] * 3, [(0.375, 0.5)]) == [0.25, 0.625, 1.625]


def test_a_change_that_keeps_the_rate_moves_nothing():
    assert run(Stub(), [0.25, 0.25, 0.5], [False] * 3, [(0.375, 1.0), (0.5, 1.0)]) == [0.25, 0.5, 1.0]


def test_a_gate_idles_the_device_until_the_cpu_and_one_that_is_passed_costs_nothing():
    # gate at 0.5 after 0.25 of work: idle 0.25 -> 0.5, then 0.25 of work; a gate at 0.5 is passed
    stub = Stub()
    busy_seen = []
    orig = stub.add_busy

    def add_busy(delta: int) -> None:
        busy_seen.append((stub.env.now, delta))
        orig(delta)

    stub.add_busy = add_busy
    assert run(stub, [0.25, 0.5, 0.25, 0.5, 0.125], [False, True, False, True, False], []) == [0.25, 0.5, 0.75, 0.75, 0.875]
    assert busy_seen == [(0.25, -1), (0.5, +1)]   # idle (not busy) only while it waited for the CPU


def record_steps(env: simpy.Environment) -> list[float]:
    """The times SimPy steps at from now on (one entry per event processed)."""
    seen: list[float] = []
    orig_step = env.step

    def step():
        seen.append(env.now)
        orig_step()

    env.step = step
    return seen


def test_simpy_meets_the_works_only_at_changes_and_at_the_end():
    def steps(n: int) -> int:
        stub = Stub()
        seen = record_steps(stub.env)
        ends = run(stub, [1.0 / n] * (2 * n), [False] * (2 * n), [(1.0, 0.5)])
        assert abs(ends[-1] - 3.0) < 1e-12   # half the work at rate 1, half at rate 1/2
        return len(seen)

    # as many SimPy steps for 16 works as for 1,600: none per work
    assert steps(8) == steps(800)


def test_ranks_share_one_clock_and_a_change_wakes_none_of_them():
    # two ranks compute through the same changes: rank a 0.5 then 0.5, rank b 100; the rate
    # halves at 0.25 and is back to 1 at 0.75. W (full-rate work done) is 0.25 at 0.25, 0.5 at
    # 0.75, then +1 per second: a's works end where W is 0.5 (0.75) and 1.0 (1.25), b's where
    # it is 100 (100.25)
    stub = Stub()
    env = stub.env
    out: dict[str, list[float]] = {}
    steps = record_steps(env)

    def rank(name: str, works: list[float]):
        out[name] = yield from stub.run_compute(works, [False] * len(works))

    def changer(changes: list[tuple[float, float]]):
        for t, r in changes:
            yield env.timeout(t - env.now)
            stub.rate = r
            stub._notify()

    env.process(rank("a", [0.5, 0.5]))
    env.process(rank("b", [100.0]))
    env.process(changer([(0.25, 0.5), (0.75, 1.0)] + [(2.0 + k, 1.0) for k in range(50)]))
    env.run()
    assert out == {"a": [0.75, 1.25], "b": [100.25]}
    # a change that keeps the rate costs only the changer's timer (no one waits for the change
    # event), none of the computing rank's
    assert len([t for t in steps if 2.0 <= t < 51.0]) == 49


def arrivals(posts: list[tuple[float, float, float | None]], changes: list[tuple[float, float]]) -> tuple[float, float]:
    """Two ranks launch collective 0, each ``(at, t, work)``: at time ``at`` it arrives at ``t``
    or, given ``work``, where the work clock reaches it; (when all_arrived fired, arrival_max_s)."""
    stub = Stub()
    env = stub.env
    seen: list[float] = []

    def rank(at: float, t: float, work: float | None):
        yield env.timeout(at)
        stub.arrive(0, t, "allreduce", "bucket 0", 1, 0, 4, False, work=work)

    def comm():
        c = stub.coll(0)
        yield c.all_arrived
        seen.extend([env.now, c.arrival_max_s])

    def changer():
        for t, r in changes:
            yield env.timeout(t - env.now)
            stub.rate = r
            stub._notify()

    for post in posts:
        env.process(rank(*post))
    env.process(comm())
    env.process(changer())
    env.run()
    return seen[0], seen[1]


def test_an_arrival_posted_on_the_work_clock_happens_where_w_reaches_it():
    # rank a arrives for real at 0.5; rank b, posted at 0, computes until W = 0.75; the rate
    # halves at 0.25: W = 0.25 + (t - 0.25) / 2 reaches 0.75 at 1.25, the collective's arrival
    assert arrivals([(0.0, -float("inf"), 0.75), (0.5, 0.5, None)], [(0.25, 0.5)]) == (1.25, 1.25)
    # the latest of two posted on the clock: W = 0.5 at 0.75, W = 0.6 at 0.95
    assert arrivals([(0.0, -float("inf"), 0.5), (0.0, -float("inf"), 0.6)], [(0.25, 0.5)]) == (0.95, 0.95)


def test_an_arrival_on_the_work_clock_already_passed_takes_its_own_time():
    # b posted W = 0.5 at 0 (reached at 0.75: the rate halves at 0.25); a arrives last, at 2.0,
    # for an arrival at 1.5: every rank is in at 2.0, the latest arrival is a's 1.5
    assert arrivals([(0.0, -float("inf"), 0.5), (2.0, 1.5, None)], [(0.25, 0.5)]) == (2.0, 1.5)
    # a CPU that issues later than the device gets there: the arrival is the CPU's
    assert arrivals([(0.0, 3.0, 0.5), (2.0, 1.5, None)], [(0.25, 0.5)]) == (2.0, 3.0)
