"""Predictions that do not move with a shared host's load: the trace on the CPU clock. A rank of
one thread computes only while it holds a CPU, so each captured phase is scaled by ``min(1,
cpu / wall)`` of the capture's process CPU time in it (``environment.cpu_phase_s``;
gradient-ready times by backward's factor); to compare with steps measured under load, the
prediction is stretched by the share of a CPU the ranks held (:func:`cpu_share`)."""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Sequence

from ddpsim.errors import InputError
from ddpsim.trace.capture import check_count
from ddpsim.trace.records import IterationSample, Trace
from ddpsim.validation.compare import run_spread_pct


def cpu_clock_trace(trace: Trace) -> Trace:
    """``trace`` on the CPU clock (module docstring). InputError: no ``environment.cpu_phase_s`` (one per
    iteration), or a capture of more than one thread."""
    env = trace.environment or {}
    cpu = env.get("cpu_phase_s")
    if not isinstance(cpu, list) or len(cpu) != len(trace.iterations):
        raise InputError(f"trace {trace.model!r}: environment.cpu_phase_s: {len(cpu) if isinstance(cpu, list) else cpu!r} "
                         f"entries; expected one per measured iteration ({len(trace.iterations)}), recorded by a CPU capture")
    if env.get("num_threads", 1) != 1:
        raise InputError(f"trace {trace.model!r}: environment.num_threads: {env.get('num_threads')!r} is not accepted "
                         f"on the CPU clock; expected 1 (a rank's CPU time sums its threads)")
    its, backward_shares = [], []
    for it, (cf, cb, co) in zip(trace.iterations, cpu):
        rf, rb, ro = (1.0 if w <= 0 else min(1.0, max(0.0, c) / w)
                      for c, w in ((cf, it.forward_s), (cb, it.backward_s), (co, it.optimizer_s)))
        backward_shares.append(rb)
        its.append(IterationSample(forward_s=it.forward_s * rf, backward_s=it.backward_s * rb,
                                   optimizer_s=it.optimizer_s * ro, zero_grad_s=it.zero_grad_s,
                                   grad_ready_s=tuple(None if t is None else t * rb for t in it.grad_ready_s)))
    synthetic = {"kind": "cpu-clock", "source_synthetic": trace.synthetic,
                 "median_backward_cpu_share": round(statistics.median(backward_shares), 6),
                 "method": "each iteration's forward, backward (gradient-ready times alike) and optimizer scaled by "
                           "min(1, process CPU time / wall time) of that phase; zero_grad kept"}
    return replace(trace, iterations=tuple(its), synthetic=synthetic, environment=dict(env))


def spread_pct(values: Sequence[float]) -> float | None:
    """``100 * (max - min) / median`` of ``values``; None with fewer than 2."""
    return run_spread_pct(list(values), statistics.median(values) if values else None)


def cpu_share(other_pct: float, *, num_cpus: int, num_busy_threads: int) -> float:
    """The share of a CPU each busy rank thread holds when other work takes ``other_pct`` % of the
    host's CPU time (``host_other_pct``, from ``/proc/stat``), shared fairly:
    ``min(1, num_cpus * (1 - other_pct / 100) / num_busy_threads)``. InputError: ``other_pct`` outside
    [0, 100), a count below 1."""
    if not 0.0 <= other_pct < 100.0:
        raise InputError(f"other_pct: {other_pct!r} is not accepted; expected a percentage in [0, 100)")
    check_count(num_cpus, "num_cpus", 1)
    check_count(num_busy_threads, "num_busy_threads", 1)
    return min(1.0, num_cpus * (1.0 - other_pct / 100.0) / num_busy_threads)
