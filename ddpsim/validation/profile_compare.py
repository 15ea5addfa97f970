"""A real DDP run's torch.profiler profiles against ddpsim's prediction of the same run: the
measured side is :mod:`ddpsim.validation.profile_measure`; the predicted side goes through
:func:`ddpsim.pipeline.inputs.build_point_inputs` on the profile's critical-path trace, the run's
world size, the catalogue system of its GPU (:func:`preset_for`, else ``--scenario``'s cluster)
and the host costs measured on its CPU timeline, and the step's error is attributed to each term
(:func:`attribution`). docs/MODEL.md, "Comparing with a profile"."""

from __future__ import annotations

import re
import statistics
from dataclasses import replace
from typing import Any, Sequence

from ddpsim.errors import InputError
from ddpsim.network.host_costs import HostCosts
from ddpsim.trace.profile.result import ProfileIteration
from ddpsim.trace.records import Trace
from ddpsim.validation.compare import predicted_bucket_times
from ddpsim.validation.profile_measure import (TERMS, boundaries, bucket_kernels, effective_trace,
                                               gpu_busy_s, host_costs_from_steps, hta_overlap_ratio, launch_delays,
                                               measured_summary, median_or_none)
from ddpsim.validation.profile_modules import ModuleSplit, split_modules


#: iterations simulated: DDP's first (construction-time buckets), the rebuild, then steady ones
SIM_ITERATIONS = 6


def preset_for(gpu_name: str | None) -> tuple[str, int] | None:
    """The catalogue's first system (and its GPUs per node) whose GPU has the family (``V100`` of
    ``V100-SXM2-32GB``) and form (PCIe or not) the profile's GPU name names; ``NVIDIA H100 80GB HBM3``
    -> ``dgx-h100``; None where none matches."""
    from ddpsim.hardware.catalogue import bundled

    if not gpu_name:
        return None
    words = set(re.split(r"[\s_-]+", gpu_name.upper()))
    cat = bundled()
    for name, system in cat.systems.items():
        model = cat.gpus[system.gpu].model.upper()
        if model.split("-")[0] in words and ("PCIE" in model) == ("PCIE" in words):
            return name, system.gpus_per_node
    return None


def profile_scenario(*, name: str, source: str, gpu_name: str | None, world_size: int, host: HostCosts,
                     scenario: Any = None, bucket_cap_mb: float | None = None) -> Any:
    """The one-point scenario of the profiled run: ``scenario``'s, else :func:`preset_for`'s topology with
    DDP's defaults (and ``bucket_cap_mb``); always the profile's world size, the measured host costs and
    the trace's mean. InputError: no ``scenario`` and no preset, or another world size."""
    from ddpsim.pipeline.scenario import scenario_from_dict

    if scenario is None:
        found = preset_for(gpu_name)
        if found is None:
            raise InputError(f"profile: GPU {gpu_name!r} has no system in the hardware catalogue; expected a GPU of "
                             "'ddpsim topology --list', or --scenario naming the cluster the run used")
        preset, per_node = found
        nodes = -(-world_size // per_node)
        scenario = scenario_from_dict({"name": name, "trace": source, "cluster": {"topology": preset, "nodes": nodes},
                                       "world_size": world_size, "ddp": {"bucket_cap_mb": bucket_cap_mb},
                                       "sweep": {"bucket_cap_mb": [bucket_cap_mb]}, "timelines": []},
                                      source="ddpsim compare")
    elif scenario.world_size not in (None, world_size):
        raise InputError(f"--scenario: world_size {scenario.world_size} is not accepted; expected the profile's "
                         f"world size {world_size}")
    sim = scenario.simulation.model_copy(update={"iterations": max(SIM_ITERATIONS, scenario.simulation.iterations),
                                                 "compute_statistic": "mean"})
    return scenario.updated(world_size=world_size, simulation=sim, cost_model={"host": True, **host.as_dict()})


def simulate_profile(scenario: Any, trace: Trace, modules: int = 1,
                     recorded: Sequence[Any] = ()) -> tuple[Any, Any, Any]:
    """``(inputs, result, split)`` of the scenario's point on ``trace``, DDP's copy kernels free (a profile's
    phases hold ``mul_out`` and ``copy_bucket_to_grad``); with several DDP ``modules``, each planned on its
    own where :func:`~ddpsim.validation.profile_modules.split_modules` finds the ``recorded`` buckets."""
    from ddpsim.engine.simulate import simulate
    from ddpsim.pipeline.inputs import build_point_inputs

    point = scenario.point_at(scenario.ddp.bucket_cap_mb, scenario.ddp.bucket_cap_mb_list)
    inputs = build_point_inputs(scenario, point, trace=trace)
    inputs = replace(inputs, config=replace(inputs.config, copy_bandwidth_bytes_per_s=None, copy_kernel_floor_s=0.0))
    split = split_modules(inputs.trace, recorded, modules, inputs.plan.options) if modules > 1 else None
    if split is not None:
        inputs = replace(inputs, plan=split.plan(inputs.trace, inputs.plan.options))
    return inputs, simulate(inputs.trace, inputs.plan, inputs.comm, inputs.config), split


def predicted_figures(result: Any, measured_other_s: float, host: HostCosts | None,
                      copy_back: tuple[float, float] = (0.0, 0.0)) -> dict[str, Any]:
    """The simulation's steady figures on :data:`TERMS` (rank 0's means): its phase spans and exposed tail,
    ``other_s`` the measured one, the measured ``copy_back`` moved into ``grad_copies_s`` (the host part was
    simulated in the backward), ``slower_rank_s`` the step minus rank 0's iteration plus its broadcast wait
    past ``host``'s pre-forward and enqueue, and ``pre_forward_s`` the rest."""
    s = result.summary()
    steady = [it for it in result.steady_iterations() if it.rank == 0]
    kinds = {"forward_s": ("forward",), "backward_s": ("backward",), "grad_copies_s": ("copy_in", "copy_out"),
             "optimizer_s": ("optimizer",), "zero_grad_s": ("zero_grad",)}
    out = {k: statistics.fmean(_span_total(result, it.iteration, ks) for it in steady) for k, ks in kinds.items()}
    out["exposed_comm_s"] = statistics.fmean(it.exposed_comm_s for it in steady)
    out["other_s"] = measured_other_s
    step = s["iteration_mean_s"]
    own = statistics.fmean(it.iteration_s for it in steady)
    host_s = host.pre_forward_s + host.enqueue_s if host is not None else 0.0
    bcast = statistics.fmean(max(0.0, _span_total(result, it.iteration, ("wait",), "broadcast") - host_s) for it in steady)
    out["slower_rank_s"] = step - own + bcast
    out["pre_forward_s"] = step - sum(out[k] for k in TERMS if k not in ("pre_forward_s", "other_s"))
    copy_host, copy_device = copy_back
    out["backward_s"] -= copy_host
    out["grad_copies_s"] += copy_host + copy_device
    out["step_s"] = step + measured_other_s + copy_device
    out["overlap_ratio_engine"] = s["overlap_ratio"]
    out["buckets"] = predicted_bucket_times(result)
    return out


def _span_total(result: Any, iteration: int, kinds: tuple[str, ...], name: str | None = None) -> float:
    """Rank 0's compute-stream time in spans of ``kinds`` (named ``name``) in ``iteration``."""
    return sum(sp.duration_s for sp in result.spans if sp.rank == 0 and sp.stream == "compute" and sp.iteration == iteration
               and sp.kind in kinds and (name is None or sp.name == name))


def bucket_rows(scenario: Any, world_size: int, predicted: list[dict[str, Any]], measured: list[dict[str, Any]],
                comm: Any) -> list[dict[str, Any]]:
    """Per bucket both sides have: predicted and measured times, the model's algorithm, protocol and time,
    and the NCCL model's time with the profile kernel's algorithm (and protocol) forced, as
    ``NCCL_ALGO``/``NCCL_PROTO`` would (none where the kernel leaves the algorithm open)."""
    from ddpsim.network.collective_cost import build_comm_model

    meas = {b["bucket"]: b for b in measured}
    graph = None if scenario.cluster.topology is None else scenario.graph(scenario.cluster.nodes)
    models: dict[tuple, Any] = {}  # one model per (algorithm, protocol) the kernels name; None: rejected
    copied = ("launch_s", "start_s", "duration_s", "transfer_bound_s", "wait_mean_s", "algorithm", "protocol", "ran",
              "transfer_s", "last_rank")  # of each measured bucket, as measured_<key>
    rows = []
    for p in predicted:
        m = meas.get(p["bucket"])
        if m is None:
            continue
        key = (m["algorithm"], m["protocol"])
        if graph is not None and key[0] is not None and key not in models:
            try:
                models[key] = build_comm_model(graph, world_size, algorithm=key[0], protocol=key[1])
            except InputError:
                models[key] = None
        forced = models.get(key)
        est = comm.estimate_allreduce(p["size_bytes"])
        rows.append({"bucket": p["bucket"], "size_bytes": p["size_bytes"], "numel_recorded": m["numel"],
                     "predicted_launch_s": p["launch_s"], "predicted_start_s": p["start_s"],
                     "predicted_duration_s": p["end_s"] - p["start_s"], "model_algorithm": est.algorithm,
                     "model_protocol": est.protocol, "model_s": est.time_s,
                     "model_as_run_s": (forced.estimate_allreduce(p["size_bytes"]).time_s
                                        if forced is not None and forced.backend == "nccl" else None),
                     **{f"measured_{k}": m.get(k) for k in copied}})
    return rows


def attribution(predicted: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Per term of :data:`TERMS`: predicted, measured, the error and its share of the step's (sum: 100 %)."""
    step_err = predicted["step_s"] - measured["step_s"]
    errs = {k: predicted[k] - measured[k] for k in TERMS}
    return [{"term": k.removesuffix("_s"), "predicted_s": predicted[k], "measured_s": measured[k], "error_s": err,
             "share_pct": 100.0 * err / step_err if step_err else None} for k, err in errs.items()]


def compare(profiles: Sequence[str], steps: Sequence[Sequence[ProfileIteration]], *, trace: Trace, gpu_name: str | None,
            world_size: int, recorded_numels: Sequence[int], scenario: Any = None, name: str = "compare",
            ranks: Sequence[int] | None = None, ddp_modules: int = 1,
            recorded_buckets: Sequence[Any] = ()) -> dict[str, Any]:
    """Predicted against measured for one profiled run (``profiles`` and their ``steps``: rank 0's first;
    ``scenario``: the cluster, else :func:`preset_for`'s): the data
    :func:`ddpsim.validation.profile_report.write_compare_report` writes."""
    from ddpsim.plan.profile_check import check_recorded_buckets

    rank0 = steps[0]
    host, host_detail = host_costs_from_steps(rank0)
    eff = effective_trace(trace, rank0, profiles[0])
    cap = None  # the cap that gives the run's buckets where DDP's default does not
    if scenario is None and ddp_modules == 1 and recorded_numels:
        check = check_recorded_buckets(trace, recorded_numels)
        cap = check.options.bucket_cap_mb if check.matches else None
    sc = profile_scenario(name=name, source=profiles[0], gpu_name=gpu_name, world_size=world_size, host=host,
                          scenario=scenario, bucket_cap_mb=cap)
    inputs, result, split = simulate_profile(sc, eff, ddp_modules, recorded_buckets)
    meas = measured_summary(rank0, recorded_numels)
    pred = predicted_figures(result, meas["mean"]["other_s"], inputs.config.host_costs,
                             (meas["mean"]["copy_back_host_s"], meas["mean"]["copy_back_device_s"]))
    rank_waits = _last_rank_starts(meas["buckets"], steps, recorded_numels, ranks) if len(steps) > 1 else []
    buckets = bucket_rows(sc, world_size, pred["buckets"], meas["buckets"], inputs.comm)
    pred["overlap_ratio"] = _overlap_over_measured_kernels(pred["buckets"], rank0)
    plan_numels = [sum(inputs.trace.params[i].numel for i in b.param_indices) for b in inputs.plan.steady]
    return {"format": "ddpsim-profile-compare", "version": 1, "name": name, "profiles": list(profiles),
            "gpu": gpu_name, "world_size": world_size, "topology": sc.cluster.label, "nodes": sc.cluster.nodes,
            "comm": inputs.comm.describe(),
            "bucket_cap_mb": sc.ddp.bucket_cap_mb, "cap_from_buckets": cap is not None, "num_steps": len(rank0), "steps": [st.step for st in rank0],
            "plan": _plan_check(plan_numels, recorded_numels, ddp_modules, split, inputs.trace),
            "host_costs": {"measured": host.as_dict(), "defaults": HostCosts().as_dict(), **host_detail,
                           "launch_delays": launch_delays(rank0),
                           "gpu_busy": {"step_s": meas["mean"]["step_s"], "gpu_busy_s": gpu_busy_s(rank0)}},
            "measured": meas, "predicted": pred, "terms": attribution(pred, meas["mean"]), "buckets": buckets,
            "ranks": rank_waits}


def _plan_check(plan_numels: list[int], recorded: Sequence[int], ddp_modules: int, split: ModuleSplit | None,
                trace: Trace) -> dict[str, Any]:
    """The plan against the run's buckets (element counts); with several DDP modules, known only where
    each module's own plan gave its buckets."""
    out: dict[str, Any] = {"predicted_numels": plan_numels, "recorded_numels": list(recorded), "ddp_modules": ddp_modules}
    if ddp_modules == 1:
        out["matches"] = list(recorded) == plan_numels
    elif split is None:
        out["matches"] = None
    else:
        out["matches"] = True
        out["modules"] = [{"process_group": g, "buckets": list(b),
                           "predicted_numels": [sum(trace.params[i].numel for i in bucket) for bucket in planned]}
                          for b, planned, g in zip(split.buckets, split.planned, split.groups)]
        out["split"] = split.method
    return out


def _last_rank_starts(buckets: list[dict[str, Any]], steps: Sequence[Sequence[ProfileIteration]],
                      numels: Sequence[int] | None, ranks: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """With every rank's profile (one host clock): a collective's transfer runs from the last rank's kernel
    start (arrival) to the last end (as PyTorch's profile-guided estimator measures them), each rank
    waiting from its own arrival. Sets per bucket (medians over steps) ``start_s``, ``transfer_s``,
    ``transfer_bound_s`` (shortest), ``last_rank`` (mode), ``wait_by_rank_s``; returns per rank its mean
    wait and whom it waited for."""
    def host_clock(st: ProfileIteration) -> list[tuple[float, float]]:  # its bucket kernels' (start, end)
        t, ks = st.start_us * 1e-6, [st.allreduces[j] for j in bucket_kernels(st, numels)]
        return [(t + k.start_s, t + k.end_s) for k in ks]

    ranks = list(ranks) if ranks is not None else list(range(len(steps)))
    by_step = [{st.step: st for st in rank} for rank in steps]
    common = sorted(set.intersection(*(set(d) for d in by_step)))
    kernels = {n: [host_clock(d[n]) for d in by_step] for n in common}
    waits: dict[int, list[float]] = {r: [] for r in ranks}
    waited_for: dict[int, list[int]] = {r: [] for r in ranks}
    for b in buckets:
        starts, transfers, lasts, per_rank = [], [], [], {r: [] for r in ranks}
        for n in common:
            ks = [k[b["bucket"]] for k in kernels[n] if b["bucket"] < len(k)]
            if len(ks) != len(by_step):
                continue
            t0 = by_step[0][n].start_us * 1e-6 + boundaries(by_step[0][n]).start_s
            arrive = max(a for a, _ in ks)
            last = ranks[max(range(len(ks)), key=lambda j: (ks[j][0], -j))]
            starts.append(arrive - t0)
            transfers.append(max(e for _, e in ks) - arrive)
            lasts.append(last)
            for r, (a, _) in zip(ranks, ks):
                per_rank[r].append(arrive - a)
                if arrive - a > 0:
                    waited_for[r].append(last)
        if starts:
            b["start_s"], b["transfer_s"], b["transfer_bound_s"] = median_or_none(starts), median_or_none(transfers), min(transfers)
            b["last_rank"] = statistics.mode(lasts)
            b["wait_by_rank_s"] = {str(r): median_or_none(w) for r, w in per_rank.items()}
            b["ranks"] = len(steps)
            for r, w in per_rank.items():
                waits[r].append(median_or_none(w))
    return [{"rank": r, "wait_mean_s": statistics.fmean(waits[r]) if waits[r] else None,
             "waited_for": statistics.mode(waited_for[r]) if waited_for[r] else None} for r in ranks]


def _overlap_over_measured_kernels(predicted: list[dict[str, Any]], steps: Sequence[ProfileIteration]) -> float | None:
    """HTA's overlap of the predicted all-reduces over each step's measured computation kernels, averaged."""
    vals = []
    for st in steps:
        t0 = boundaries(st).start_s
        ivs = [(a - t0, b - t0, k) for a, b, k in st.intervals if k == "comp"]
        ivs += [(p["start_s"], p["end_s"], "comm") for p in predicted]
        v = hta_overlap_ratio(ivs)
        if v is not None:
            vals.append(v)
    return statistics.fmean(vals) if vals else None
