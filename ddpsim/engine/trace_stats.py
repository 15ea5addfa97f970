"""What the engine derives from a trace, computed once per trace object.

A sweep or a design space simulates one trace hundreds of times; every simulation reads its
phases' statistics (:meth:`ddpsim.trace.records.Trace.phase`: median, p10, p90, mean, two
quantiles each) and its per-parameter gradient-ready medians or means
(:meth:`~ddpsim.trace.records.Trace.grad_ready_stat_s`). A :class:`~ddpsim.trace.records.Trace`
is frozen, so these are kept for the last :data:`KEPT_SIZE` traces, each entry holding its
trace (so its ``id`` is not reused while kept), and are the very objects those methods return.
Figures the engine derives from a trace and a few settings (per-parameter kernel times, a bucket
layout's per-bucket figures) are kept by :func:`derived` for the last :data:`DERIVED_SIZE` keys:
points of a design space that share a trace and a plan share that work.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from ddpsim.trace.records import PhaseStats, Trace

#: traces whose statistics are kept
KEPT_SIZE = 8
_KEPT: "OrderedDict[int, tuple[Trace, dict[tuple, Any]]]" = OrderedDict()


def _figures(trace: Trace) -> dict[tuple, Any]:
    got = _KEPT.get(id(trace))
    if got is None or got[0] is not trace:
        got = _KEPT[id(trace)] = (trace, {})
        if len(_KEPT) > KEPT_SIZE:
            _KEPT.popitem(last=False)
    else:
        _KEPT.move_to_end(id(trace))
    return got[1]


def phase(trace: Trace, name: str) -> PhaseStats:
    """``trace.phase(name)``, once per trace."""
    figures = _figures(trace)
    key = ("phase", name)
    if key not in figures:
        figures[key] = trace.phase(name)
    return figures[key]


def grad_ready_stat_s(trace: Trace, statistic: str) -> tuple[float | None, ...]:
    """``trace.grad_ready_stat_s(statistic)``, once per trace."""
    figures = _figures(trace)
    key = ("grad_ready", statistic)
    if key not in figures:
        figures[key] = trace.grad_ready_stat_s(statistic)
    return figures[key]


#: derived figures kept (:func:`derived`)
DERIVED_SIZE = 256
_DERIVED: "OrderedDict[tuple, tuple[Trace, Any]]" = OrderedDict()


def derived(trace: Trace, key: tuple, make: Callable[[], Any]) -> Any:
    """``make()``, kept for ``trace`` and ``key`` (hashable: what ``make`` reads besides the trace;
    an unhashable key is not kept). What is kept is shared: never modify it."""
    k = (id(trace), *key)
    try:
        got = _DERIVED.get(k)
    except TypeError:
        return make()
    if got is not None and got[0] is trace:
        _DERIVED.move_to_end(k)
        return got[1]
    value = make()
    _DERIVED[k] = (trace, value)
    if len(_DERIVED) > DERIVED_SIZE:
        _DERIVED.popitem(last=False)
    return value
