"""A real DDP run's torch.profiler profiles against ddpsim's prediction of the same run.

The measured side (:mod:`ddpsim.validation.profile_timeline`): per ``ProfilerStep`` a phase
begins when the CPU reaches it AND the device has finished the work launched before it (a
host-bound step is paced by its CPU, a GPU-bound one by its device), so every phase boundary
is taken as ``max(CPU time, end of the device work launched before it)``:

* ``pre_forward``: DDP's forward start to the module's first kernel-launching op (DDP's
  ``_pre_forward`` and ``_sync_buffers``'s flatten, broadcast, unflatten and copies);
* ``forward``: from there to the backward's start (the loss included);
* ``backward``: the autograd thread's first op (or its first kernel) to its last op (or kernel);
* ``grad_copies``: 0 -- DDP's gradient copies into and out of the buckets run inside the
  profiled backward (the simulation adds them as kernels of their own: that term is the engine's);
* ``exposed_comm``: the last bucket all-reduce's end past the backward's end (0 when earlier);
* ``optimizer``: ``Optimizer.step#`` and its kernels past the backward's end and the exposed tail;
* ``zero_grad`` (``Optimizer.zero_grad#``) and ``other``: the rest of the ``ProfilerStep`` span;
* ``slower_rank``: 0 -- the profiled rank's own step (the simulation's step is its slowest
  rank's: the simulated job minus rank 0's own iteration, and rank 0's wait for the other
  rank at the buffer broadcast, are that term);
* per bucket (DDP launches bucket 0 first): the ``c10d::allreduce_`` launch on the CPU, the NCCL
  kernel's start and end, from the step's effective start (DDP's forward);
* overlap as HolisticTraceAnalysis computes it (``hta/analyzers/communication_analysis.py``
  ``get_comm_comp_overlap``): the time merged communication kernels run while merged computation
  kernels run, over the merged communication time (:func:`hta_overlap_ratio`).

The predicted side is ddpsim's one path into a simulation
(:func:`ddpsim.pipeline.inputs.build_point_inputs`) on a trace made from the same profile
(:func:`effective_trace`: the phases and the gradient-ready times on the critical path above, so
a host-bound run is simulated host-bound), the run's world size, a topology picked from the GPU
(``A100`` -> ``dgx-a100``, ``H100`` -> ``dgx-h100``, else ``--scenario``'s cluster), DDP's default
options (or the scenario's), and DDP's host costs measured from the same CPU timeline
(:func:`host_costs_from_steps`). The simulated step plus the measured ``other`` time is the
predicted step. Compute is an input; what is predicted is DDP's buckets, when each all-reduce
starts and how long it takes, the exposed tail and the overlap -- and the report attributes the
step's error to each term (:func:`attribution`).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ddpsim.errors import InputError
from ddpsim.network.host_costs import HostCosts
from ddpsim.trace.records import IterationSample, Trace
from ddpsim.validation.profile_timeline import StepTimeline

#: the phases a step is split into, in step order (module docstring)
TERMS = ("pre_forward_s", "forward_s", "backward_s", "grad_copies_s", "exposed_comm_s", "optimizer_s", "zero_grad_s",
         "slower_rank_s", "other_s")
#: NCCL kernel names: ``ncclKernel_AllReduce_RING_LL_Sum_float``, ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``
_NCCL_ALGO_PROTO = re.compile(r"_(RING|TREE|NVLS|NVLS_TREE|COLLNET_DIRECT|COLLNET_CHAIN|PAT)_(LL128|LL|SIMPLE)")


def nccl_algorithm_protocol(kernel_name: str) -> tuple[str | None, str | None]:
    """``(algorithm, protocol)`` of an NCCL kernel's name, lower case (None where it does not say)."""
    m = _NCCL_ALGO_PROTO.search(kernel_name)
    return (m.group(1).lower(), m.group(2).lower()) if m else (None, None)


# ---- HTA's overlap ----------------------------------------------------------------------------

def merge_intervals(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``intervals`` as sorted disjoint intervals (HTA's ``merge_kernel_intervals``)."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def intersection_s(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted lists of disjoint intervals."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def hta_overlap_ratio(intervals: Sequence[tuple[float, float, str]]) -> float | None:
    """HolisticTraceAnalysis's computation-communication overlap of ``(start, end, kind)``
    device intervals (``kind`` from :func:`~ddpsim.validation.profile_timeline.kernel_kind`):
    communication and computation kernels each merged into disjoint intervals, the time both
    run over the merged communication time (memory copies count as neither). None without
    communication."""
    comm = merge_intervals([(a, b) for a, b, k in intervals if k == "comm"])
    comp = merge_intervals([(a, b) for a, b, k in intervals if k == "comp"])
    total = sum(b - a for a, b in comm)
    return intersection_s(comm, comp) / total if total > 0 else None


# ---- the measured side ------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Boundaries:
    """A step's phase boundaries on its critical path (seconds from the step's ProfilerStep start)."""

    start_s: float
    module_s: float
    backward_s: float
    backward_end_s: float
    optimizer_end_s: float


def _later(cpu: float, gpu: float | None) -> float:
    return cpu if gpu is None else max(cpu, gpu)


def boundaries(st: StepTimeline) -> Boundaries:
    """The phase boundaries of ``st``: each the later of the CPU reaching it and the device
    finishing the (non-communication) work launched before it (module docstring)."""
    g = st.gpu_done
    start = _later(st.forward_start_s, g["forward"])
    module = max(start, _later(st.module_start_s, g["module"]))
    bwd = max(module, _later(st.backward_cpu_start_s, g["backward"]))
    bwd_end = max(bwd, _later(st.backward_cpu_end_s, g["backward_end"]))
    opt_end = max(bwd_end, _later(st.optimizer_cpu_end_s, g["optimizer_end"]))
    return Boundaries(start_s=start, module_s=module, backward_s=bwd, backward_end_s=bwd_end, optimizer_end_s=opt_end)


def step_figures(st: StepTimeline) -> dict[str, Any]:
    """The measured figures of one step (module docstring): the :data:`TERMS` (which add up to
    ``step_s``), HTA's overlap and per bucket launch/start/end from the step's effective start."""
    b = boundaries(st)
    last_end = max((k.end_s for k in st.allreduces), default=-math.inf)
    exposed = max(0.0, last_end - b.backward_end_s)
    out: dict[str, Any] = {
        "step": st.step, "step_s": st.step_s, "pre_forward_s": b.module_s - b.start_s, "forward_s": b.backward_s - b.module_s,
        "backward_s": b.backward_end_s - b.backward_s, "grad_copies_s": 0.0, "exposed_comm_s": exposed,
        "optimizer_s": max(0.0, b.optimizer_end_s - b.backward_end_s - exposed), "zero_grad_s": st.zero_grad_s,
        "slower_rank_s": 0.0}
    out["other_s"] = st.step_s - sum(out[k] for k in TERMS[:-1])
    out["overlap_ratio"] = hta_overlap_ratio(st.intervals)
    out["buckets"] = [{"bucket": i, "numel": k.numel, "launch_s": (st.launches[i].start_s if i < len(st.launches) else k.start_s) - b.start_s,
                       "start_s": k.start_s - b.start_s, "end_s": k.end_s - b.start_s, "duration_s": k.duration_s,
                       "algorithm": nccl_algorithm_protocol(k.name)[0], "protocol": nccl_algorithm_protocol(k.name)[1]}
                      for i, k in enumerate(st.allreduces)]
    return out


def effective_ready_s(st: StepTimeline) -> list[float]:
    """Per AccumulateGrad in ready order, when the gradient was ready on the step's critical
    path (the later of the op's CPU end and the device finishing the backward launched before
    it), after the backward's start (:func:`boundaries`)."""
    b = boundaries(st)
    return [max(0.0, _later(h.op_end_s, h.gpu_ready_s) - b.backward_s) for h in st.hooks]


def effective_trace(trace: Trace, steps: Sequence[StepTimeline], source: str) -> Trace:
    """``trace`` (the profile's import: parameters in DDP's order, ``grad_ready_order``) with one
    iteration per step on the critical path: forward, backward, optimizer and zero_grad from
    :func:`step_figures`, gradient-ready times from :func:`effective_ready_s`.

    Raises:
        InputError: a step whose AccumulateGrad count differs from the trace's ready order."""
    order = trace.grad_ready_order
    samples = []
    for st in steps:
        ready = effective_ready_s(st)
        if len(ready) != len(order):
            raise InputError(f"{source}: ProfilerStep#{st.step} has {len(ready)} AccumulateGrad ops; expected "
                             f"{len(order)} (one per parameter with a gradient, as the imported trace has)")
        per_param: list[float | None] = [None] * trace.num_params
        for p, r in zip(order, ready):
            per_param[p] = r
        f = step_figures(st)
        samples.append(IterationSample(forward_s=f["forward_s"], backward_s=max(f["backward_s"], max(ready)),
                                       optimizer_s=f["optimizer_s"], zero_grad_s=f["zero_grad_s"], grad_ready_s=tuple(per_param)))
    synthetic = {"kind": "profile-critical-path", "source": source,
                 "method": "phases and gradient-ready times as max(CPU time, GPU time) on the profile's timelines "
                           "(ddpsim.validation.profile_compare)"}
    return replace(trace, iterations=tuple(samples), synthetic=synthetic, hook_overhead_frac=None)


def host_costs_from_steps(steps: Sequence[StepTimeline]) -> tuple[HostCosts, dict[str, Any]]:
    """DDP's host costs (:class:`~ddpsim.network.host_costs.HostCosts`) measured on the CPU
    timeline -- the pre-forward the mean over the steps (as the simulation takes the steps' mean
    phases), the others medians over the steps' events -- and the figures behind them:

    * ``pre_forward_s``: DDP's forward start to the module's first kernel-launching op
      (``_pre_forward`` and ``_sync_buffers``);
    * ``hook_s_per_param``: an AccumulateGrad's ``evaluate_function`` minus the op itself, over
      the hooks that launch no bucket (``Reducer::autograd_hook``, ``mark_variable_ready``, the
      gradient's ``mul_out`` into the bucket);
    * ``enqueue_s``: the ``record_param_comms`` inside a bucket's ``c10d::allreduce_``
      (``ProcessGroupNCCL::collective``: stream sync, ``ncclAllReduce``, its kernel launch);
    * ``bucket_launch_s``: the rest of ``c10d::allreduce_`` (the dispatcher and the op's own work).
    """
    hooks = [h.end_s - h.start_s - h.op_s for st in steps for h in st.hooks if h.launches == 0]
    launches = [x for st in steps for x in st.launches]
    pre = [boundaries(st).module_s - boundaries(st).start_s for st in steps]
    launch_calls = sum(st.kernel_launches for st in steps)
    host = HostCosts(pre_forward_s=statistics.fmean(pre),
                     hook_s_per_param=statistics.median(hooks) if hooks else HostCosts().hook_s_per_param,
                     bucket_launch_s=statistics.median(x.op_s - x.enqueue_s for x in launches) if launches else HostCosts().bucket_launch_s,
                     enqueue_s=statistics.median(x.enqueue_s for x in launches) if launches else HostCosts().enqueue_s)
    detail = {"num_hooks": len(hooks), "num_bucket_launches": len(launches),
              "kernel_launch_s_per_call": sum(st.kernel_launch_s for st in steps) / launch_calls if launch_calls else None,
              "kernel_launches_per_step": launch_calls / len(steps),
              "accumulate_grad_op_s": statistics.median(h.op_s for st in steps for h in st.hooks)}
    return host, detail


# ---- the predicted side -----------------------------------------------------------------------

#: a profile's GPU name -> the topology preset of its box (the run's ranks are GPUs of one node)
GPU_PRESETS = (("H100", "dgx-h100"), ("A100", "dgx-a100"))
#: iterations simulated: DDP's first (construction-time buckets), the rebuild, then steady ones
SIM_ITERATIONS = 6


def preset_for(gpu_name: str | None) -> str | None:
    """The topology preset of a profile's GPU (:data:`GPU_PRESETS`), or None."""
    return next((preset for key, preset in GPU_PRESETS if gpu_name and key in gpu_name.upper()), None)


def profile_scenario(*, name: str, source: str, gpu_name: str | None, world_size: int, host: HostCosts,
                     scenario: Any = None) -> Any:
    """The one-point scenario of the profiled run: ``scenario``'s cluster, DDP options and cost
    model if given, else the topology of :func:`preset_for` with DDP's defaults; always the
    profile's world size, the measured host costs and the mean of the trace's iterations.

    Raises:
        InputError: no ``scenario`` and a GPU without a preset; a scenario whose world size is not
        the profile's."""
    from ddpsim.pipeline.scenario import scenario_from_dict

    if scenario is None:
        preset = preset_for(gpu_name)
        if preset is None:
            raise InputError(f"profile: GPU {gpu_name!r} has no topology preset; expected an A100 or H100 profile, "
                             "or --scenario naming the cluster the run used")
        scenario = scenario_from_dict({"name": name, "trace": source, "cluster": {"topology": preset, "nodes": 1},
                                       "world_size": world_size, "sweep": {"bucket_cap_mb": [None]}, "timelines": []},
                                      source="ddpsim compare")
    elif scenario.world_size not in (None, world_size):
        raise InputError(f"--scenario: world_size {scenario.world_size} is not accepted; expected the profile's "
                         f"world size {world_size}")
    sim = scenario.simulation.model_copy(update={"iterations": max(SIM_ITERATIONS, scenario.simulation.iterations),
                                                 "compute_statistic": "mean"})
    return replace(scenario, world_size=world_size, simulation=sim, cost_model=replace(scenario.cost_model, host=True, host_costs=host))


def simulate_profile(scenario: Any, trace: Trace) -> tuple[Any, Any]:
    """``(inputs, result)`` of the scenario's default point on ``trace``, through
    :func:`ddpsim.pipeline.inputs.build_point_inputs` (the one path into a simulation)."""
    from ddpsim.engine.simulate import simulate
    from ddpsim.pipeline.inputs import build_point_inputs

    point = scenario.point_at(scenario.ddp.bucket_cap_mb, scenario.ddp.bucket_cap_mb_list)
    inputs = build_point_inputs(scenario, point, trace=trace)
    return inputs, simulate(inputs.trace, inputs.plan, inputs.comm, inputs.config)


def predicted_figures(result: Any, measured_other_s: float, host: HostCosts | None) -> dict[str, Any]:
    """The simulation's steady-state figures on :data:`TERMS` (rank 0, mean over the steady
    iterations): its forward, backward, gradient-copy (copy-in and copy-out), optimizer and
    zero_grad spans, the engine's exposed tail, ``other_s`` the measured one (an input),
    ``slower_rank_s`` the simulated step (its slowest rank's) minus rank 0's own iteration plus
    rank 0's wait for the buffer broadcast past ``host``'s pre-forward and enqueue (the other
    rank's arrival), and
    ``pre_forward_s`` the rest of rank 0's iteration (DDP's host pre-forward, the buffer
    broadcast, any other wait)."""
    from ddpsim.validation.compare import predicted_bucket_times

    s = result.summary()
    steady = [it for it in result.steady_iterations() if it.rank == 0]
    kinds = {"forward_s": ("forward",), "backward_s": ("backward",), "grad_copies_s": ("copy_in", "copy_out"),
             "optimizer_s": ("optimizer",), "zero_grad_s": ("zero_grad",)}
    out = {k: statistics.fmean(_span_total(result, it, ks) for it in steady) for k, ks in kinds.items()}
    out["exposed_comm_s"] = statistics.fmean(it.exposed_comm_s for it in steady)
    out["other_s"] = measured_other_s
    step = s["iteration_mean_s"]
    own = statistics.fmean(it.iteration_s for it in steady)
    host_s = host.pre_forward_s + host.enqueue_s if host is not None else 0.0
    bcast = statistics.fmean(max(0.0, _span_total(result, it, ("wait",), "broadcast") - host_s) for it in steady)
    out["slower_rank_s"] = step - own + bcast
    out["pre_forward_s"] = step - sum(out[k] for k in TERMS if k not in ("pre_forward_s", "other_s"))
    out["step_s"] = step + measured_other_s
    out["overlap_ratio_engine"] = s["overlap_ratio"]
    out["buckets"] = predicted_bucket_times(result)
    return out


def _span_total(result: Any, it: Any, kinds: tuple[str, ...], name: str | None = None) -> float:
    return sum(sp.duration_s for sp in result.spans if sp.rank == it.rank and sp.iteration == it.iteration
               and sp.kind in kinds and sp.stream == "compute" and (name is None or sp.name == name))


# ---- predicted against measured -----------------------------------------------------------------

def _median(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def measured_summary(steps: Sequence[StepTimeline]) -> dict[str, Any]:
    """Per step :func:`step_figures`, their means on :data:`TERMS`, and HTA's overlap over all
    the steps' device intervals (as ``get_comm_comp_overlap`` takes a whole trace)."""
    figs = [step_figures(st) for st in steps]
    mean = {k: statistics.fmean(f[k] for f in figs) for k in ("step_s",) + TERMS}
    mean["overlap_ratio"] = hta_overlap_ratio([(st.start_us * 1e-6 + a, st.start_us * 1e-6 + b, k)
                                               for st in steps for a, b, k in st.intervals])
    return {"steps": [{k: v for k, v in f.items() if k != "buckets"} for f in figs], "mean": mean,
            "buckets": _measured_buckets(figs)}


def _measured_buckets(figs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per bucket (launch order), medians over the steps; ``transfer_bound_s`` the shortest
    kernel (an upper bound on the transfer: every kernel also holds its wait for the peers)."""
    n = min(len(f["buckets"]) for f in figs)
    out = []
    for i in range(n):
        bs = [f["buckets"][i] for f in figs]
        durs = [b["duration_s"] for b in bs]
        out.append({"bucket": i, "numel": bs[0]["numel"], "algorithm": bs[0]["algorithm"], "protocol": bs[0]["protocol"],
                    "launch_s": _median([b["launch_s"] for b in bs]), "start_s": _median([b["start_s"] for b in bs]),
                    "end_s": _median([b["end_s"] for b in bs]), "duration_s": _median(durs), "transfer_bound_s": min(durs),
                    "wait_mean_s": statistics.fmean(d - min(durs) for d in durs)})
    return out


def bucket_rows(predicted: list[dict[str, Any]], measured: list[dict[str, Any]], comm: Any, forced: Any) -> list[dict[str, Any]]:
    """Per bucket index both sides have: predicted launch/start/duration (and the model's
    algorithm and protocol), the model's time with the profile's algorithm and protocol forced
    (``forced``: bucket -> estimate or None), and the measured ones."""
    meas = {b["bucket"]: b for b in measured}
    rows = []
    for p in predicted:
        m = meas.get(p["bucket"])
        if m is None:
            continue
        est = comm.estimate_allreduce(p["size_bytes"])
        f = forced.get(p["bucket"])
        rows.append({"bucket": p["bucket"], "size_bytes": p["size_bytes"], "numel_recorded": m["numel"],
                     "predicted_launch_s": p["launch_s"], "predicted_start_s": p["start_s"],
                     "predicted_duration_s": p["end_s"] - p["start_s"], "model_algorithm": est.algorithm,
                     "model_protocol": est.protocol, "model_s": est.time_s,
                     "model_recorded_protocol_s": None if f is None else f.time_s,
                     "measured_launch_s": m["launch_s"], "measured_start_s": m["start_s"], "measured_duration_s": m["duration_s"],
                     "measured_transfer_bound_s": m["transfer_bound_s"], "measured_wait_mean_s": m["wait_mean_s"],
                     "measured_algorithm": m["algorithm"], "measured_protocol": m["protocol"]})
    return rows


def forced_estimates(scenario: Any, world_size: int, predicted: list[dict[str, Any]],
                     measured: list[dict[str, Any]]) -> dict[int, Any]:
    """Per bucket, the NCCL model's all-reduce time with the algorithm and protocol the profile's
    kernel ran (``NCCL_ALGO``/``NCCL_PROTO`` forced), where the kernel name says them."""
    from ddpsim.network.collective_cost import build_comm_model

    if scenario.cluster.topology is None:
        return {}
    graph = scenario.graph(scenario.cluster.nodes)
    sizes = {p["bucket"]: p["size_bytes"] for p in predicted}
    out: dict[int, Any] = {}
    for m in measured:
        if m["bucket"] in sizes and m["algorithm"] in ("ring", "tree") and m["protocol"]:
            try:
                model = build_comm_model(graph, world_size, algorithm=m["algorithm"], protocol=m["protocol"])
            except InputError:
                continue
            if model.backend == "nccl":
                out[m["bucket"]] = model.estimate_allreduce(sizes[m["bucket"]])
    return out


def attribution(predicted: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Per term of :data:`TERMS`, predicted, measured, the error (predicted - measured) and its
    share of the step's error (the terms add up to the step on both sides, so the shares add up
    to 100 %)."""
    step_err = predicted["step_s"] - measured["step_s"]
    rows = []
    for k in TERMS:
        err = predicted[k] - measured[k]
        rows.append({"term": k.removesuffix("_s"), "predicted_s": predicted[k], "measured_s": measured[k], "error_s": err,
                     "share_pct": 100.0 * err / step_err if step_err else None})
    return rows


def compare(profiles: Sequence[str], steps: Sequence[Sequence[StepTimeline]], *, trace: Trace, gpu_name: str | None,
            world_size: int, recorded_numels: Sequence[int], scenario: Any = None, name: str = "compare") -> dict[str, Any]:
    """Predicted against measured for one profiled run (module docstring).

    Args:
        profiles: the profiles' paths (rank 0's first).
        steps: per profile, its :func:`~ddpsim.validation.profile_timeline.step_timelines`.
        trace: the import of rank 0's profile (parameters in DDP's order, the ready order).
        gpu_name, world_size: what the profile says of the run.
        recorded_numels: the buckets the run's DDP launched (elements, launch order).
        scenario: a :class:`~ddpsim.pipeline.scenario.Scenario` for the cluster and DDP options.
        name: the report's name.

    Returns:
        The report's data (:func:`ddpsim.validation.profile_report.write_compare_report` writes it)."""
    rank0 = steps[0]
    host, host_detail = host_costs_from_steps(rank0)
    eff = effective_trace(trace, rank0, profiles[0])
    sc = profile_scenario(name=name, source=profiles[0], gpu_name=gpu_name, world_size=world_size, host=host, scenario=scenario)
    inputs, result = simulate_profile(sc, eff)
    meas = measured_summary(rank0)
    pred = predicted_figures(result, meas["mean"]["other_s"], inputs.config.host_costs)
    if len(steps) > 1:
        _last_rank_starts(meas["buckets"], steps)
    forced = forced_estimates(sc, world_size, pred["buckets"], meas["buckets"])
    buckets = bucket_rows(pred["buckets"], meas["buckets"], inputs.comm, forced)
    pred["overlap_ratio"] = _overlap_over_measured_kernels(pred["buckets"], rank0)
    plan_numels = [sum(inputs.trace.params[i].numel for i in b.param_indices) for b in inputs.plan.steady]
    return {"format": "ddpsim-profile-compare", "version": 1, "name": name, "profiles": list(profiles),
            "gpu": gpu_name, "world_size": world_size, "topology": sc.cluster.label, "nodes": sc.cluster.nodes,
            "comm": inputs.comm.describe() if hasattr(inputs.comm, "describe") else {"backend": inputs.backend},
            "bucket_cap_mb": sc.ddp.bucket_cap_mb, "num_steps": len(rank0), "steps": [st.step for st in rank0],
            "plan": {"predicted_numels": plan_numels, "recorded_numels": list(recorded_numels),
                     "matches": list(recorded_numels) == plan_numels},
            "host_costs": {"measured": host.as_dict(), "defaults": HostCosts().as_dict(), **host_detail,
                           "launch_delays": launch_delays(rank0), "gpu_busy": _busy_summary(rank0)},
            "measured": meas, "predicted": pred, "terms": attribution(pred, meas["mean"]), "buckets": buckets}


def _last_rank_starts(buckets: list[dict[str, Any]], steps: Sequence[Sequence[StepTimeline]]) -> None:
    """With every rank's profile: per bucket, the median over steps of the last rank's kernel
    start (all ranks on one host clock), and the transfer as rank 0's end minus it."""
    by_step = [{st.step: st for st in rank} for rank in steps]
    common = sorted(set.intersection(*(set(d) for d in by_step)))
    for b in buckets:
        starts, transfers = [], []
        for n in common:
            sts = [d[n] for d in by_step]
            if all(len(st.allreduces) > b["bucket"] for st in sts):
                t0 = sts[0].start_us * 1e-6 + boundaries(sts[0]).start_s
                last = max(st.start_us * 1e-6 + st.allreduces[b["bucket"]].start_s for st in sts)
                starts.append(last - t0)
                transfers.append(sts[0].start_us * 1e-6 + sts[0].allreduces[b["bucket"]].end_s - last)
        if starts:
            b["start_s"], b["transfer_bound_s"] = _median(starts), min(transfers)
            b["ranks"] = len(steps)


def _overlap_over_measured_kernels(predicted: list[dict[str, Any]], steps: Sequence[StepTimeline]) -> float | None:
    """HTA's overlap of the predicted all-reduces (one steady iteration, from its start) over
    the measured computation kernels of each step (from its effective start), averaged."""
    vals = []
    for st in steps:
        t0 = boundaries(st).start_s
        ivs = [(a - t0, b - t0, k) for a, b, k in st.intervals if k == "comp"]
        ivs += [(p["start_s"], p["end_s"], "comm") for p in predicted]
        v = hta_overlap_ratio(ivs)
        if v is not None:
            vals.append(v)
    return statistics.fmean(vals) if vals else None


def launch_delays(steps: Sequence[StepTimeline]) -> list[dict[str, Any]]:
    """Per bucket (launch order), the median over steps of the CPU time from its last
    gradient's AccumulateGrad end to the ``c10d::allreduce_`` start (DDP's hook, then the
    reducer's launch), and of the launch op itself: what a bucket costs the host."""
    out = []
    for st in steps:
        launching = [h for h in st.hooks for _ in range(h.launches)]
        for i, (h, x) in enumerate(zip(launching, st.launches)):
            out.append((i, x.start_s - h.op_end_s, x.op_s))
    n = max((i for i, _, _ in out), default=-1) + 1
    return [{"bucket": i, "hook_to_launch_s": _median([d for j, d, _ in out if j == i]),
             "launch_op_s": _median([o for j, _, o in out if j == i])} for i in range(n)]


def _busy_summary(steps: Sequence[StepTimeline]) -> dict[str, float]:
    """Per step means: the CPU's step span, the GPU's busy time (merged kernels, copies, sets)."""
    busy = [sum(b - a for a, b in merge_intervals([(a, b) for a, b, _ in st.intervals])) for st in steps]
    return {"step_s": statistics.fmean(st.step_s for st in steps), "gpu_busy_s": statistics.fmean(busy)}


# ---- where the model is off ---------------------------------------------------------------------

def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1e3:.2f} ms"


def transfer_line(buckets: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """A least-squares line ``seconds = fixed_s + bytes / bandwidth`` through the buckets'
    fastest measured kernels (None with fewer than two sizes): a transfer grows with the bytes,
    a wait for the peers does not."""
    import numpy as np

    pts = [(b["size_bytes"], b["measured_transfer_bound_s"]) for b in buckets]
    if len({x for x, _ in pts}) < 2:
        return None
    slope, fixed = np.polyfit([x for x, _ in pts], [y for _, y in pts], 1)
    return {"fixed_s": float(fixed), "bytes_per_s": float(1.0 / slope) if slope > 0 else None}


def findings(data: dict[str, Any]) -> list[str]:
    """Where the prediction is off and which term is responsible, one paragraph each."""
    pred, meas = data["predicted"], data["measured"]["mean"]
    busy = data["host_costs"]["gpu_busy"]
    err = pred["step_s"] - meas["step_s"]
    bound = "host-bound" if busy["gpu_busy_s"] < 0.8 * busy["step_s"] else "GPU-bound"
    terms = sorted((t for t in data["terms"] if t["error_s"]), key=lambda t: -abs(t["error_s"]))
    out = [f"Step: predicted {_ms(pred['step_s'])}, measured {_ms(meas['step_s'])} (mean of {data['num_steps']} steps), "
           f"error {100 * err / meas['step_s']:+.1f} %. The run is {bound}: {_ms(busy['gpu_busy_s'])} of device work "
           f"(kernels, copies, sets merged) per {_ms(busy['step_s'])} step. The prediction follows the step's critical "
           "path (a phase begins when the CPU reaches it and the device has finished the work before it), so the "
           "compute is the profile's and the error is "
           "what the simulation adds: " + ("; ".join(f"{t['term']} {t['error_s'] * 1e3:+.2f} ms ({t['share_pct']:+.0f} % of the "
                                                      "error)" for t in terms[:4]) or "nothing") + "."]
    if "grad_copies" in {t["term"] for t in terms}:
        out.append("grad_copies: the engine charges DDP's copy-in and copy-out as kernels of their own "
                   f"({_ms(pred['grad_copies_s'])}), but a profile's backward already holds them (the reducer's mul_out "
                   "and copy_bucket_to_grad run inside the measured backward): on a profile this term is counted twice.")
    out.append(_plan_finding(data["plan"]))
    out += _comm_findings(data)
    out.append(_overlap_finding(pred, meas))
    out.append(_host_finding(data["host_costs"]))
    return out


def _plan_finding(plan: dict[str, Any]) -> str:
    if plan["matches"]:
        return (f"Buckets: ddpsim's plan equals the run's own {len(plan['recorded_numels'])} buckets "
                f"({', '.join(f'{n:,}' for n in plan['recorded_numels'])} elements, launch order).")
    return (f"Buckets: ddpsim's plan ({', '.join(f'{n:,}' for n in plan['predicted_numels'])} elements) differs from the run's "
            f"({', '.join(f'{n:,}' for n in plan['recorded_numels'])}): buckets are matched by index below.")


def _comm_findings(data: dict[str, Any]) -> list[str]:
    bs = data["buckets"]
    if not bs:
        return ["All-reduces: the run launched none (one rank, or no NCCL kernels in the profile)."]
    model = f"{bs[0]['model_algorithm']}/{bs[0]['model_protocol']}"
    ran = {f"{b['measured_algorithm']}/{b['measured_protocol']}" for b in bs}
    forced = [b["model_recorded_protocol_s"] for b in bs if b["model_recorded_protocol_s"] is not None]
    line = transfer_line(bs)
    text = (f"All-reduce time: the NCCL model ({model}) predicts {_ms(min(b['model_s'] for b in bs))} to "
            f"{_ms(max(b['model_s'] for b in bs))} per bucket; the profile's kernels took {_ms(min(b['measured_duration_s'] for b in bs))} "
            f"to {_ms(max(b['measured_duration_s'] for b in bs))} (median over steps), the fastest "
            f"{_ms(min(b['measured_transfer_bound_s'] for b in bs))} to {_ms(max(b['measured_transfer_bound_s'] for b in bs))}. "
            f"They ran {', '.join(sorted(ran))}")
    if forced:
        text += f"; with that forced the model gives {_ms(min(forced))} to {_ms(max(forced))}"
    text += "."
    waits = [b["predicted_start_s"] - b["predicted_launch_s"] for b in bs]
    text += (f" The simulated all-reduces wait {_ms(min(waits))} to {_ms(max(waits))} after rank 0's launch for the other "
             f"rank (its compute drawn from the steps' spread) and the previous bucket; the measured kernels ran "
             f"{_ms(min(b['measured_wait_mean_s'] for b in bs))} to {_ms(max(b['measured_wait_mean_s'] for b in bs))} longer "
             "on average than their fastest step.")
    ranks = data["measured"]["buckets"][0].get("ranks") if data["measured"]["buckets"] else None
    if line is not None:
        bw = "no growth with size" if line["bytes_per_s"] is None else f"bytes / {line['bytes_per_s'] / 1e9:.1f} GB/s"
        text += (f" A line through the fastest kernels: {_ms(line['fixed_s'])} + {bw}. A transfer grows with the bytes; "
                 "what does not is waiting: an NCCL kernel starts when its rank launches it and spins until the peers "
                 "arrive, so its duration holds the wait for the slowest rank.")
    if not ranks:
        text += (" With one rank's profile the wait cannot be separated from the transfer (the fastest kernel is an "
                 "upper bound on it): give every rank's profile to measure it. The gap between the model and the "
                 "fastest kernel is therefore the per-bucket collective term's upper bound, not its measured error.")
    return [text]


def _overlap_finding(pred: dict[str, Any], meas: dict[str, Any]) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:.0f} %"

    return (f"Overlap (HTA's get_comm_comp_overlap: communication time under computation kernels / communication time): "
            f"measured {pct(meas['overlap_ratio'])}; the predicted all-reduces over the profile's computation kernels "
            f"{pct(pred['overlap_ratio'])}; the engine's own figure {pct(pred['overlap_ratio_engine'])} counts its compute "
            "stream busy for the whole phase, which a host-bound step's device is not (it idles between launches).")


def _host_finding(h: dict[str, Any]) -> str:
    m, d = h["measured"], h["defaults"]
    delays = [x["hook_to_launch_s"] for x in h["launch_delays"] if x["hook_to_launch_s"] is not None]
    per_bucket = "" if not delays else (
        f" Per bucket, from its last gradient's AccumulateGrad to the launch: {_ms(min(delays))} to {_ms(max(delays))} "
        f"(the model: hook + bucket launch = {_ms(m['hook_s_per_param'] + m['bucket_launch_s'])}, then the enqueue).")
    return (f"Host costs measured on the CPU timeline (they replace ddpsim's defaults in this prediction): pre-forward "
            f"{_ms(m['pre_forward_s'])} (default {_ms(d['pre_forward_s'])}; DDP's _pre_forward and _sync_buffers), hook "
            f"{m['hook_s_per_param'] * 1e6:.0f} us per parameter (default {d['hook_s_per_param'] * 1e6:.0f}), bucket launch "
            f"{m['bucket_launch_s'] * 1e6:.0f} us + enqueue {m['enqueue_s'] * 1e6:.0f} us (defaults "
            f"{d['bucket_launch_s'] * 1e6:.0f} + {d['enqueue_s'] * 1e6:.0f}), kernel launches "
            f"{(h['kernel_launch_s_per_call'] or 0) * 1e6:.1f} us x {h['kernel_launches_per_step']:.0f} per step." + per_bucket
            + " Every op of a profiled run carries the profiler's own cost, so these are upper bounds for the same run unprofiled.")
