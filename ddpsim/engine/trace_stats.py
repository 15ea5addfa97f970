"""What the engine reads of a trace's statistics, computed once per trace object.

A sweep or a design space simulates one trace hundreds of times; every simulation reads its
phases' statistics (:meth:`ddpsim.trace.records.Trace.phase`: median, p10, p90, mean, two
quantiles each) and its per-parameter gradient-ready medians or means
(:meth:`~ddpsim.trace.records.Trace.grad_ready_stat_s`). A :class:`~ddpsim.trace.records.Trace`
is frozen, so these are kept for the last :data:`KEPT_SIZE` traces, each entry holding its
trace (so its ``id`` is not reused while kept), and are the very objects those methods return.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

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
