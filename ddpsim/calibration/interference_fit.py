"""The engine's compute slowdown fitted to a real DDP run of a probe model (one per machine). The
executor's interference microbenchmark sees less of the cost DDP's overlapped all-reduces put on
backward than real DDP pays on a CPU host whose ranks share cores with gloo's threads
(docs/VALIDATION.md, "The interference model"). So ``executor collectives`` also trains a probe
(the built-in ``mlp``, none of the validated models) under real DDP at ``bucket_cap_mb=25``, and
:func:`fit_probe` bisects for the ``compute_slowdown`` at which ddpsim predicts its measured step;
the fitted value replaces the microbenchmark's (kept in
``Calibration.interference_microbenchmark``).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Callable

from ddpsim.engine.config import SimConfig
from ddpsim.network.interference import Interference

#: upper end of the bisection
MAX_SLOWDOWN = 16.0
#: how close the bisection comes to the crossing: half the bracket after 40 halvings of [1, MAX_SLOWDOWN]
XTOL = (MAX_SLOWDOWN - 1.0) / 2 ** 41
#: simulated iterations per prediction (as the bundled scenarios)
SIM_ITERATIONS = 10


def predict_probe(trace: Any, cal: Any, cap_mb: float, interference: Interference) -> float:
    """ddpsim's steady step time (p50) of the probe under ``interference``."""
    from ddpsim.network.collective_cost import build_comm_model
    from ddpsim.engine.simulate import simulate
    from ddpsim.plan.planner import DDPOptions, plan_ddp
    from ddpsim.network.topology import build_preset

    graph = build_preset("cpu-gloo" if cal.backend == "gloo" else "dgx-h100")
    base = build_comm_model(graph, cal.world_size)
    # the probe's own forward under DDP (when its phases were kept): that part of its gap is not
    # the overlap's (ddpsim.calibration.loader.probe_forward_factor)
    comm = cal.comm_model(base, ddp_forward_factor=cal.probe_forward_factor or 1.0)
    plan = plan_ddp(trace, DDPOptions(bucket_cap_mb=cap_mb))
    config = SimConfig(world_size=cal.world_size, num_iterations=SIM_ITERATIONS, seed=0, jitter="trace",
                       interference=interference, copy_bandwidth_bytes_per_s=cal.copy_bandwidth_bytes_per_s)
    return float(simulate(trace, plan, comm, config).summary()["iteration_p50_s"])


def bisect_increasing(f: Callable[[float], float], target: float, lo: float, hi: float,
                      xtol: float = XTOL) -> tuple[float, bool]:
    """``(x, clamped)``: x in [lo, hi] within ``xtol`` of where the non-decreasing ``f`` meets
    ``target``; ``(lo, True)`` if ``f(lo) >= target``, ``(hi, True)`` if ``f(hi) <= target``."""
    if f(lo) >= target:
        return lo, True
    if f(hi) <= target:
        return hi, True
    from scipy import optimize  # NOTE: on first use: slow to import, and every CLI verb imports this module

    return optimize.bisect(lambda x: f(x) - target, lo, hi, xtol=xtol), False


def fit_probe(trace: Any, measured_s: float, cal: Any, cap_mb: float, interference: Interference) -> dict[str, Any]:
    """Solve ``predict(compute_slowdown) == measured_s`` on [1, MAX_SLOWDOWN] by bisection
    (``scipy.optimize.bisect``; the prediction is nondecreasing in the slowdown; ``clamped`` when it
    hits a bound), every other field of ``interference`` (the microbenchmark's comm_slowdown, the
    weighting) kept: the fitted ``compute_slowdown`` and how it was reached (``interference_fit``)."""
    cal = replace(cal, interference=None)

    @functools.lru_cache(maxsize=None)  # f(1) and the answer are read again below
    def f(s: float) -> float:
        return predict_probe(trace, cal, cap_mb, replace(interference, compute_slowdown=s))

    s, clamped = bisect_increasing(f, measured_s, 1.0, MAX_SLOWDOWN)
    return {"compute_slowdown": s, "measured_step_s": measured_s, "predicted_step_s": f(s),
            "predicted_without_interference_s": f(1.0), "clamped": clamped}
