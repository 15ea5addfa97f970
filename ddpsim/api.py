"""The notebook facade: a few functions over the pieces, returning DataFrames and figures.

Examples::

    from ddpsim import api
    trace = api.load_trace("traces/mlp.cpu.json")
    api.plan(trace, bucket_cap_mb=5)                      # DataFrame of steady buckets
    res = api.simulate(trace, topology="cpu-gloo", world_size=2, bucket_cap_mb=5)
    table = api.sweep(trace, topology="cpu-gloo", world_size=2, bucket_cap_mb=[None, 1, 5, 25])
    report = api.run_scenario("default")                  # writes reports/default/
    api.sweep_figure(report.sweep)                        # a matplotlib Figure

Each builds a scenario and runs its points as ``ddpsim run`` does.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.pipeline import scenario_run
from ddpsim.pipeline.run import cost_terms  # noqa: F401  (re-exported)
from ddpsim.pipeline.scenario import Scenario, load_scenario, scenario_from_dict  # noqa: F401  (re-exported)
from ddpsim.pipeline.scenario_schema import ScenarioFile
from ddpsim.pipeline.sweep import run_sweep, sweep_table
from ddpsim.plan.planner import BucketPlan, DDPOptions, plan_ddp
from ddpsim.report.plots import sweep_figure, timeline_figure  # noqa: F401  (re-exported)
from ddpsim.report.scenario_report import Report, start_drawing, write_report
from ddpsim.schema import validate
from ddpsim.trace.records import Trace, load_trace  # noqa: F401  (re-exported)


def plan(trace: Trace, *, bucket_cap_mb: float | None = None, **ddp_options: Any):
    """The steady-state buckets DDP builds for ``trace`` (a DataFrame, one row per bucket)."""
    import pandas as pd

    p = plan_ddp(trace, DDPOptions(bucket_cap_mb=bucket_cap_mb, **ddp_options))
    return pd.DataFrame([{"bucket": b.index, "size_bytes": b.size_bytes, "num_params": len(b.param_indices),
                          "dtype": b.dtype, "first_param": trace.params[b.param_indices[0]].name} for b in p.steady])


def adhoc_scenario(*, trace: Trace | str | Path, topology: str = "cpu-gloo", world_size: int | None = 2, nodes: int = 1,
                   bucket_cap_mb: Sequence[float | None] = (None,), iterations: int = 6, seed: int = 0,
                   comm_hook: str = "none", name: str = "adhoc", **extra: Any) -> Scenario:
    """A :class:`Scenario` from keyword arguments, checked as a scenario file (every key's bound and
    every check between sections); ``trace``: a trace JSON path, or a :class:`Trace` in memory (the
    scenario then names no file: give the trace to what runs it). A section in ``extra`` adds its keys
    to the section the keywords make (its own win), as ``--set`` does."""
    d: dict[str, Any] = {"name": name, "trace": "<in-memory>" if isinstance(trace, Trace) else str(trace),
                         "cluster": {"topology": topology, "nodes": nodes},
                         "world_size": world_size, "ddp": {"comm_hook": comm_hook},
                         "simulation": {"iterations": iterations, "seed": seed},
                         "sweep": {"bucket_cap_mb": list(bucket_cap_mb)}, "timelines": []}
    for key, value in extra.items():
        both = isinstance(d.get(key), dict) and isinstance(value, dict)
        d[key] = {**d[key], **value} if both else value
    if isinstance(trace, Trace):
        return Scenario(validate(ScenarioFile, d, "api"))
    return scenario_from_dict(d, source="api")


def simulate(trace: Trace | str | Path, *, topology: str = "cpu-gloo", world_size: int | None = 2, nodes: int = 1,
             bucket_cap_mb: float | None = None, iterations: int = 6, seed: int = 0, comm_hook: str = "none",
             plan: BucketPlan | None = None, simulate_fn: Callable | None = None, **extra: Any):
    """Simulate one configuration; returns the engine's :class:`~ddpsim.engine.result.SimResult`, the
    point run as ``ddpsim simulate`` runs its point (the points runner, alone); ``plan`` replaces
    DDP's buckets, ``simulate_fn`` the engine; ``extra``: the scenario's other sections, as
    :func:`adhoc_scenario` takes them (``ddp={...}``, ``cost_model={...}``)."""
    tr = trace if isinstance(trace, Trace) else load_trace(trace)
    sc = adhoc_scenario(trace=tr, topology=topology, world_size=world_size, nodes=nodes, bucket_cap_mb=[bucket_cap_mb],
                        iterations=iterations, seed=seed, comm_hook=comm_hook, **extra)
    build = None if plan is None else (lambda s, p, t: replace(s.build_point(p, trace=t), plan=plan))
    return run_sweep(sc, trace=tr, jobs=1, progress=False, points=[sc.point_at(bucket_cap_mb)], alone=True,
                     simulate=simulate_fn, build=build)[0].result


#: the caps a sweep runs unless given (None: not given, DDP's default)
SWEEP_CAPS = (None, 1, 5, 25, 100)


def sweep(trace: Trace | str | Path, *, topology: str = "cpu-gloo", world_size: int | None = 2, nodes: int = 1,
          bucket_cap_mb: Sequence[float | None] = SWEEP_CAPS, iterations: int = 6, seed: int = 0,
          comm_hook: str = "none", jobs: int | None = None, progress: bool = False, simulate_fn: Callable | None = None,
          **extra: Any):
    """Sweep ``bucket_cap_mb``; returns the sweep table (a DataFrame, one row per point); ``extra``:
    as :func:`simulate`'s."""
    tr = trace if isinstance(trace, Trace) else load_trace(trace)
    sc = adhoc_scenario(trace=tr, topology=topology, world_size=world_size, nodes=nodes, iterations=iterations, seed=seed,
                        comm_hook=comm_hook, bucket_cap_mb=list(dict.fromkeys([None, *bucket_cap_mb])), **extra)
    return sweep_table(run_sweep(sc, trace=tr, jobs=jobs, progress=progress, simulate=simulate_fn))


def run_scenario(scenario: Scenario | str | Path | None = None, *, out_dir: str | Path = "reports",
                 jobs: int | None = None, plots: bool = True, progress: bool = True,
                 simulate_fn: Callable | None = None, build_fn: Callable | None = None,
                 method_error: str | Path | None = None) -> Report:
    """Write ``<out_dir>/<name>/`` as ``ddpsim run`` does (resumable; ``jobs``: processes, default the
    CPUs this process may use); returns a :class:`Report`. ``simulate_fn`` / ``build_fn`` replace the
    engine and :meth:`Scenario.build_point`; ``method_error``: a residual file whose measured error
    the answer states (:mod:`ddpsim.pipeline.method_error`)."""
    rep = scenario_run.run_scenario(scenario, out_dir=out_dir, jobs=jobs, progress=progress, simulate_fn=simulate_fn,
                                    build_fn=build_fn, method_error=method_error,
                                    start_report=partial(start_drawing, plots=plots))
    return write_report(rep, plots=plots)
