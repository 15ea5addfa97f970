"""The recommendation with its uncertainty: each point re-simulated under the model's uncertain
inputs, one at a time, with deterministic values and seeds: ``memory_bound_fraction`` 0.3 and
0.7 (the contention prior's one unsourced value, :mod:`ddpsim.network.contention`), every host
cost x0.5 and x2 (:mod:`ddpsim.network.host_costs`), NCCL's 64 KiB-64 MiB all-reduces at the 10 %
and 90 % quantiles of measured / model time over the public curves
(:data:`ddpsim.network.nccl_exec.MID_SIZE_RATIOS`; analytical NCCL only), and the jitter seed +1, +2
(a calibrated model varies only the seeds). The runs with GPU cost terms off
(:mod:`ddpsim.pipeline.term_effects`) are stored beside them and are no sample of the band.
:func:`summarize` gives each point's band, its regret per sample, the robust set (within
:data:`ROBUST_TOLERANCE` of the best in every sample), the input the ranking is most sensitive
to, and the safest point.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ddpsim.network.nccl_exec import MID_HI_BYTES, MID_LO_BYTES, MID_SIZE_RATIOS
from ddpsim.network.contention import gpu_terms
from ddpsim.pipeline.inputs import contention_prior, p50_s, point_graph, sim_config
from ddpsim.pipeline.recommend import ScaledComm

#: a point within this relative distance of a sample's best counts as "as good" in that sample
ROBUST_TOLERANCE = 0.01
PHI_VALUES = (0.3, 0.7)
HOST_FACTORS = (0.5, 2.0)
SEED_OFFSETS = (1, 2)
#: the input of a point's runs with cost terms off (not an uncertain input: left out of the band)
TERMS_INPUT = "cost terms off"
#: the GPU cost terms, in the order the summary names them (CostModelSpec's switches)
TERMS = ("contention", "copy_kernels", "host")


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One re-simulation: one uncertain input moved off its prior value."""

    input: str
    label: str
    memory_bound_fraction: float | None = None
    host_factor: float | None = None
    mid_factor: float | None = None
    seed_offset: int = 0
    #: the cost terms switched off (a run of :mod:`ddpsim.pipeline.term_effects`, no sample of the band)
    terms_off: tuple[str, ...] = ()


def samples_for(scenario: Any, inputs: Any) -> list[Sample]:
    """Every re-simulation of one point, in the order it is stored: the band's samples, then
    the runs with cost terms off (:func:`term_samples`)."""
    return band_samples(scenario, inputs) + term_samples(scenario, inputs)


def terms_on(scenario: Any) -> tuple[str, ...]:
    """The cost terms the scenario has switched on."""
    return tuple(t for t in TERMS if getattr(scenario.cost_model, t))


def off_sets(scenario: Any) -> list[tuple[str, ...]]:
    """The sets of terms :func:`ddpsim.pipeline.term_effects.term_effects` may switch off, in its
    order: all the terms on, then each alone where more than one is on; none without a term on
    or with one point."""
    on = terms_on(scenario)
    if not on or len(scenario.points()) < 2:
        return []
    return [on] + ([(t,) for t in on] if len(on) > 1 else [])


def off_label(off: Sequence[str]) -> str:
    """The label of a point's stored run with the terms ``off`` switched off."""
    return "cost terms off: " + "+".join(off)


def term_samples(scenario: Any, inputs: Any) -> list[Sample]:
    """The point's runs with cost terms off (:func:`off_sets`) that :mod:`ddpsim.pipeline.term_effects`
    reads; none where no term is in force, nor where the point's config is not the scenario's own
    (a test's build: term_effects simulates those runs with it)."""
    sets = off_sets(scenario)
    if not sets:
        return []
    graph = point_graph(scenario, inputs.point.nodes)
    if (terms_off_config(scenario, inputs, graph, ()) != inputs.config
            or terms_off_config(scenario, inputs, graph, sets[0]) == inputs.config):
        return []
    return [Sample(input=TERMS_INPUT, label=off_label(off), terms_off=off) for off in sets]


def terms_off_config(scenario: Any, inputs: Any, graph: Any, off: tuple[str, ...]) -> Any:
    """The point's SimConfig with the cost terms ``off`` switched off: what the scenario without
    them builds for the point (:func:`ddpsim.pipeline.inputs.sim_config`), over the point's graph and comm model.
    Where contention stays on, its interference is the point's own (the prior reads none of the
    other switches), taken as it is rather than derived again."""
    keep = "contention" not in off
    variant = scenario.updated(cost_model={**{t: False for t in off}, **({"contention": False} if keep else {})})
    cfg = sim_config(variant, inputs.point, world_size=inputs.config.world_size, graph=graph,
                     calibration=scenario.calibration, comm=inputs.comm)
    return dataclasses.replace(cfg, interference=inputs.config.interference) if keep else cfg


def band_samples(scenario: Any, inputs: Any) -> list[Sample]:
    """The samples of the band (module docstring): none when ``cost_model.uncertainty`` is off."""
    cm = scenario.cost_model
    if not cm.uncertainty:
        return []
    cfg = inputs.config
    out: list[Sample] = []
    prior_used = cfg.interference.weighting == "table" and scenario.simulation.interference is None
    if prior_used:
        out += [Sample(input="memory_bound_fraction", label=f"memory_bound_fraction={v:g}", memory_bound_fraction=v)
                for v in PHI_VALUES]
    if cfg.host_costs is not None:
        out += [Sample(input="host costs", label=f"host costs x{f:g}", host_factor=f) for f in HOST_FACTORS]
    if gpu_terms(inputs.comm):
        out += [Sample(input="NCCL mid-size", label=f"NCCL 64 KiB-64 MiB x{f:g}", mid_factor=f) for f in MID_SIZE_RATIOS]
    if cfg.jitter != "none" and cfg.jitter != 0:
        out += [Sample(input="jitter seed", label=f"seed {cfg.seed + k}", seed_offset=k) for k in SEED_OFFSETS]
    return out


def sample_inputs(scenario: Any, inputs: Any, graph: Any, sample: Sample) -> tuple[Any, Any]:
    """(comm, config) of ``inputs`` under ``sample``."""
    comm, cfg = inputs.comm, inputs.config
    if sample.terms_off:
        return comm, terms_off_config(scenario, inputs, graph, sample.terms_off)
    if sample.memory_bound_fraction is not None:
        variant = scenario.updated(cost_model={"memory_bound_fraction": sample.memory_bound_fraction})
        prior = contention_prior(variant.cost_model, graph, comm)
        if prior is not None:
            cfg = dataclasses.replace(cfg, interference=prior.interference)
    if sample.host_factor is not None and cfg.host_costs is not None:
        cfg = dataclasses.replace(cfg, host_costs=cfg.host_costs.scaled(sample.host_factor))
    if sample.mid_factor is not None:
        comm = ScaledComm(comm, sample.mid_factor, lo_bytes=MID_LO_BYTES, hi_bytes=MID_HI_BYTES)
    if sample.seed_offset:
        cfg = dataclasses.replace(cfg, seed=cfg.seed + sample.seed_offset)
    return comm, cfg


def sample_runs(scenario: Any, point: Any, inputs: Any) -> list[tuple[Sample, Any, Any]]:
    """``(sample, comm, config)`` of every re-simulation of one point, in sample order."""
    samples = samples_for(scenario, inputs)
    graph = point_graph(scenario, point.nodes) if samples else None
    return [(smp, *sample_inputs(scenario, inputs, graph, smp)) for smp in samples]


def simulate_sample(scenario: Any, point: Any, inputs: Any, k: int, simulate: Callable | None) -> float:
    """Sample ``k``'s p50 step time alone (a task of the sweep's worker pool): only that sample's
    inputs are built."""
    sample = samples_for(scenario, inputs)[k]
    return p50_s(simulate, inputs, *sample_inputs(scenario, inputs, point_graph(scenario, point.nodes), sample))


def summarize(points: Sequence[str], prior_p50: Sequence[float], samples: Sequence[dict[str, Any]],
              tolerance: float = ROBUST_TOLERANCE) -> dict[str, Any] | None:
    """Bands, regrets, the robust set and the most sensitive input over a sweep's points, None when
    no point has samples. ``samples[i]`` is what point i stores of its samples (``labels``,
    ``inputs``, ``p50_s``); points whose samples differ in labels (another comm hook, another node
    count) are compared on the labels all share; the runs with cost terms off (:data:`TERMS_INPUT`)
    are no samples of the band."""
    if not samples or not all(s for s in samples):
        return None
    inputs_of = dict(zip(samples[0]["labels"], samples[0]["inputs"]))
    common = [lab for lab in samples[0]["labels"]
              if inputs_of[lab] != TERMS_INPUT and all(lab in s["labels"] for s in samples)]
    if not common:
        return None
    cols = ["prior"] + common
    table = [[p] + [s["p50_s"][s["labels"].index(lab)] for lab in common] for p, s in zip(prior_p50, samples)]
    best_in = [min(row[j] for row in table) for j in range(len(cols))]
    regret = [[row[j] / best_in[j] - 1.0 for j in range(len(cols))] for row in table]
    prior_best = min(range(len(points)), key=lambda i: (prior_p50[i], i))
    robust = [points[i] for i in range(len(points)) if max(regret[i]) <= tolerance]
    safest = min(range(len(points)), key=lambda i: (max(regret[i]), i))
    sens: dict[str, float] = {}
    spread: dict[str, float] = {}
    for j, lab in enumerate(cols[1:], start=1):
        inp = inputs_of[lab]
        sens[inp] = max(sens.get(inp, 0.0), regret[prior_best][j])
        # how much the sample moves the points' order: the largest change of a point's regret
        spread[inp] = max(spread.get(inp, 0.0), max(abs(regret[i][j] - regret[i][0]) for i in range(len(points))))
    most = max(sorted(spread), key=lambda k: (sens[k], spread[k])) if spread else None
    best_under = {lab: points[min(range(len(points)), key=lambda i: (table[i][j], i))] for j, lab in enumerate(cols)}
    return {
        "tolerance": tolerance, "samples": common, "inputs": sorted(set(inputs_of[c] for c in common)),
        "points": [{"point": p, "p50_lo_s": min(row), "p50_hi_s": max(row), "regret_max": max(reg)}
                   for p, row, reg in zip(points, table, regret)],
        "robust": robust, "prior_best": points[prior_best], "best_under": best_under,
        "safest": points[safest], "safest_regret_max": max(regret[safest]),
        "sensitivity": {k: {"prior_best_regret": sens[k], "regret_shift": spread[k]} for k in sorted(sens)},
        "most_sensitive": most,
    }
