"""The files ddpsim and its executor exchange (format names and versions) and how both read a
run's figures: the step time per iteration is the mean over ranks (:func:`step_times`),
summarised by median, mean and ``numpy.quantile``'s linear quantiles (:func:`quantile`); the
host's CPU shares come from ``/proc/stat`` (:func:`host_shares`). The executor imports it; it
imports nothing of ddpsim.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

import numpy as np

#: the ``format`` and ``version`` tags of the executor's measurement files (``executor ddp``, ``replay``,
#: ``round``) and of its calibration file (``executor collectives``)
MEASUREMENT_FORMAT = "ddpsim-measurement"
MEASUREMENT_VERSION = 1
CALIBRATION_FORMAT = "ddpsim-calibration"
CALIBRATION_VERSION = 1


def quantile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``samples``, linear between the order statistics at ``(n - 1) * q``
    (``numpy.quantile``'s default method)."""
    assert len(samples), "quantile of an empty list"
    return float(np.quantile(samples, q))


#: the least host CPU time (summed over CPUs, seconds) one run's steps must span for its host
#: figures to be given: ``/proc/stat`` counts in ticks of 10 ms, each charged to the state the
#: CPU is in at the tick, so a share measured over N ticks scatters by about sqrt(p(1-p)/N):
#: 500 ticks put a 95 % share within about 1 %; the mlp's millisecond runs (20-50 ticks)
#: scatter by about 10 % and get none.
MIN_HOST_CPU_S = 5.0


def host_shares(ranks_cpu_s: float, busy_s: float, steal_s: float, all_s: float) -> dict[str, float]:
    """What the host's CPUs did over some steps, as percentages of all their time (``all_s``,
    summed over CPUs, each rank's read of the host's counters averaged): ``other_pct``, busy
    with anything but the ranks (the host's ``busy_s`` less the ranks' own CPU time,
    ``ranks_cpu_s``, every rank's summed); ``steal_pct``, taken by the hypervisor;
    ``ranks_pct``, the ranks' own."""
    return {"other_pct": 100.0 * (busy_s - ranks_cpu_s) / all_s, "steal_pct": 100.0 * steal_s / all_s,
            "ranks_pct": 100.0 * ranks_cpu_s / all_s}


def step_times(per_rank: list[list[dict[str, float]]]) -> list[float]:
    """The job's step time per measured iteration: the MEAN over ranks of each rank's own
    iteration time (start of zero_grad to the end of the optimizer step, back to back). The
    ranks meet in every iteration's all-reduces, so the mean adds up to the job's wall time; the
    MAX does not: one rank's delay after iteration k's last all-reduce lengthens its iteration k
    and, as the other waits in the next all-reduce, the other's k + 1, counted twice."""
    n = min(len(r) for r in per_rank)
    return [statistics.fmean(r[i]["iteration_s"] for r in per_rank) for i in range(n)]


def summarize(per_rank: list[list[dict[str, float]]]) -> dict[str, Any]:
    """Step time per iteration (:func:`step_times`); median / p10 / p90 over measured iterations."""
    steps = step_times(per_rank)
    out: dict[str, Any] = {"iteration_s": statistics.median(steps), "iteration_p10_s": quantile(steps, 0.1),
                           "iteration_p90_s": quantile(steps, 0.9), "iteration_mean_s": statistics.fmean(steps),
                           "step_times_s": steps}
    for ph in ("forward_s", "backward_s", "optimizer_s"):
        out[ph] = statistics.median(statistics.fmean(r[i][ph] for r in per_rank) for i in range(len(steps)))
    return out
