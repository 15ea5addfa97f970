"""The CPU clock (ddpsim/validation/stability.py) and the paired hook-overhead estimate (ddpsim/trace/capture.py),
with figures worked out by hand."""

import pytest

from ddpsim.trace.capture import hook_overhead_estimate
from ddpsim.errors import InputError
from ddpsim.validation.stability import cpu_clock_trace, spread_pct
from ddpsim.trace.records import make_trace


def _trace(cpu, num_threads=1):
    return make_trace(model="toy", params=[("a", (4,), "float32"), ("b", (2,), "float32")], ready_s=[0.3, 0.1],
                      forward_s=0.2, backward_s=0.4, optimizer_s=0.05, num_iterations=len(cpu) if cpu else 1,
                      environment={"cpu_phase_s": cpu, "num_threads": num_threads})


def test_cpu_clock_scales_each_phase_and_backwards_ready_times():
    # forward 0.2 s wall, 0.1 s CPU -> 0.1; backward 0.4 wall, 0.2 CPU -> x0.5 (ready 0.3, 0.1 -> 0.15, 0.05);
    # optimizer 0.05 wall, 0.06 CPU (clock tick) -> kept at 0.05
    t = cpu_clock_trace(_trace([[0.1, 0.2, 0.06], [0.2, 0.4, 0.05]]))
    a, b = t.iterations
    assert (a.forward_s, a.backward_s, a.optimizer_s) == pytest.approx((0.1, 0.2, 0.05))
    assert a.grad_ready_s == pytest.approx((0.15, 0.05))
    assert (b.forward_s, b.backward_s, b.optimizer_s) == pytest.approx((0.2, 0.4, 0.05))
    assert b.grad_ready_s == pytest.approx((0.3, 0.1))
    assert t.synthetic["kind"] == "cpu-clock" and t.synthetic["median_backward_cpu_share"] == pytest.approx(0.75)
    assert t.grad_ready_order == (1, 0)


@pytest.mark.parametrize("cpu,threads,match", [
    (None, 1, "environment.cpu_phase_s: None"),
    ([[0.1, 0.2, 0.05]], 2, "num_threads: 2 is not accepted"),
])
def test_cpu_clock_refuses(cpu, threads, match):
    tr = _trace(cpu, threads)
    with pytest.raises(InputError, match=match):
        cpu_clock_trace(tr)


def test_cpu_clock_refuses_a_count_mismatch():
    tr = make_trace(model="toy", params=[("a", (4,), "float32")], ready_s=[0.1], forward_s=0.2, backward_s=0.4,
                    optimizer_s=0.05, num_iterations=3, environment={"cpu_phase_s": [[0.1, 0.2, 0.05]]})
    with pytest.raises(InputError, match="1 entries; expected one per measured iteration \\(3\\)"):
        cpu_clock_trace(tr)


def test_spread_pct():
    assert spread_pct([100.0, 110.0, 104.0]) == pytest.approx(100 * 10 / 104)
    assert spread_pct([5.0]) is None


def test_hook_overhead_is_the_median_of_paired_ratios():
    assert hook_overhead_estimate([1.1, 1.3, 2.0], [1.0, 1.0, 1.0]) == pytest.approx((0.3, 0.3))
    # a burst of load on one pass: the median ignores it where the ratio of minima would not
    assert hook_overhead_estimate([1.02, 1.02, 1.02, 1.02], [1.0, 0.5, 1.0, 1.0]) == pytest.approx((0.02, 0.02))
    assert hook_overhead_estimate([0.9, 0.95], [1.0, 1.0]) == pytest.approx((0.0, -0.075))
    with pytest.raises(InputError, match="hook overhead: 1 timings with hooks and 2 without"):
        hook_overhead_estimate([1.0], [1.0, 1.0])


def test_cpu_share_at_load():
    from ddpsim.validation.stability import cpu_share

    # 2 CPUs, other work 72.6 %: 2 * 0.274 = 0.548 CPU left for 2 rank threads -> 0.274 each
    assert cpu_share(72.6, num_cpus=2, num_busy_threads=2) == pytest.approx(0.274)
    # 8 CPUs, 2 threads, 50 % other: 4 CPUs left, more than the 2 threads can use
    assert cpu_share(50.0, num_cpus=8, num_busy_threads=2) == 1.0
    with pytest.raises(InputError, match="other_pct: 100.0 is not accepted"):
        cpu_share(100.0, num_cpus=2, num_busy_threads=2)
