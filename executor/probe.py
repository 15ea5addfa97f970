"""The interference probe of ``executor collectives``: one model, traced and run under real DDP.

ddpsim fits its engine's ``compute_slowdown`` to this (:mod:`ddpsim.calibration.interference_fit`): the
probe's trace, captured on all ranks at once in lockstep (as ``executor trace`` does), and
its step time under real DDP at ``bucket_cap_mb=25`` (as ``executor ddp`` times it: slowest
rank per iteration). Rounds alternate trace and DDP, so that a shared host's drift hits both.
The probe is the built-in ``mlp`` (width 2048, depth 6, batch 128; 96 MiB of gradients in
three buckets), none of the validated models.
"""

from __future__ import annotations

import statistics
from typing import Any

from ddpsim.formats import MIN_HOST_CPU_S, host_shares
from executor.runtime import Runtime, _reduce_across_ranks, mean_across_ranks

MODEL = "mlp"
MODEL_ARGS = {"width": 2048, "depth": 6}
BATCH_SIZE = 128
BUCKET_CAP_MB = 25.0


def measure_probe(rt: Runtime, rounds: int = 2, iterations: int = 10, warmup: int = 3) -> dict[str, Any]:
    """``{"model", "model_args", "batch_size", "bucket_cap_mb", "trace", "ddp_step_s", ...}``."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpsim.trace.capture import capture_trace
    from ddpsim.trace.models import build_model
    from ddpsim.trace.records import pool_traces

    from executor.workload import timed_steps, workload_from_spec

    traces = []
    # this rank's CPU time and the host's busy / stolen / total CPU time over the probe's DDP steps
    host = {"cpu_s": 0.0, "host_busy_s": 0.0, "host_steal_s": 0.0, "host_all_s": 0.0}
    steps: list[float] = []
    phases: dict[str, list[float]] = {"forward_s": [], "backward_s": [], "optimizer_s": []}
    for rnd in range(rounds):
        spec = build_model(MODEL, seed=0, **MODEL_ARGS)
        rt.barrier()
        traces.append(capture_trace(spec, device=rt.device.type, batch_size=BATCH_SIZE, num_iters=iterations,
                                    num_warmup=warmup, num_threads=torch.get_num_threads(), measure_hook_overhead=False,
                                    step_barrier=rt.barrier, command="executor collectives (interference probe)"))
        rt.watchdog.beat(f"probe trace {rnd + 1}")
        wl = workload_from_spec(build_model(MODEL, seed=0, **MODEL_ARGS), BATCH_SIZE, rt.device)
        kwargs: dict[str, Any] = {"bucket_cap_mb": BUCKET_CAP_MB}
        if rt.is_cuda:
            kwargs["device_ids"] = [rt.device.index]
        model = DDP(wl.module, **kwargs)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

        timed = timed_steps(rt, model, opt, wl, warmup=warmup, iterations=iterations, label=f"probe ddp {rnd + 1}")
        for key in host:
            host[key] += sum(s.get(key, 0.0) for s in timed)
        steps += mean_across_ranks(rt, [s["iteration_s"] for s in timed])  # ddpsim.formats.step_times' step
        for ph, xs in phases.items():  # per phase too: forward under DDP has no overlapped all-reduce
            xs += mean_across_ranks(rt, [s[ph] for s in timed])
        del model, opt, wl
    # the host's other load during the probe's DDP steps, as validate's runs report it: every
    # rank's own CPU time summed, the host's counters averaged over the ranks' reads
    cpu_sum, busy, steal, total = _reduce_across_ranks(rt, [host[k] for k in ("cpu_s", "host_busy_s", "host_steal_s", "host_all_s")], "SUM")
    w = rt.world_size
    shares = host_shares(cpu_sum, busy / w, steal / w, total / w) if total / w >= MIN_HOST_CPU_S else None
    load = {} if shares is None else {"host_other_pct": shares["other_pct"], "host_steal_pct": shares["steal_pct"]}
    merged = pool_traces(traces)
    merged.environment["concurrent_ranks"] = rt.world_size
    merged.environment["lockstep"] = True
    return {"model": MODEL, "model_args": dict(MODEL_ARGS), "batch_size": BATCH_SIZE, "bucket_cap_mb": BUCKET_CAP_MB,
            "rounds": rounds, "iterations": iterations, "warmup": warmup,
            "ddp_step_s": statistics.median(steps), "ddp_step_samples_s": steps,
            "ddp_phase_samples_s": phases, **load, "trace": merged.to_dict()}
