"""How fast is the SimPy engine? One command, prints figures:

    python benchmarks/bench_engine.py [--trace traces/gpt2-1.5b.h100.json] [--quick]

1. one 1,024-rank simulation of GPT-2 1.5B with jitter (iteration 1 single bucket,
   iteration 2 rebuild, iteration 3 steady state);
2. a 32-point ``bucket_cap_mb`` sweep of it (target: <= 1 s in total on a 2-core machine; caps that give the same buckets
   share one simulation, ``ddpsim.engine.simulate.simulate``);
3. how the cost grows from 8 to 16,384 ranks;
4. the same run over the NCCL model of 128 DGX H100 nodes;
5. what one re-simulation of the uncertainty band costs on the default scenario's shape (GPT-2
   124M measured on an H100, 16 ranks, 10 iterations, compute/comm interference and host costs
   on): the full simulation, without spans, and with ``steps_only`` (what a band sample runs).

Without the real trace (``traces/gpt2-1.5b.h100.json``), a synthetic one with GPT-2 1.5B's
580 parameter shapes (48 layers, d_model 1600, vocab 50257, context 1024; fp32 master
gradients) and H100-like times is built with ``make_trace``. Network: an alpha-beta model
(100 us, 22.5 GB/s algorithm bandwidth: a ring over 400 Gb/s NDR) so that only the engine
is timed; copy bandwidth 3.35 TB/s (H100 HBM3).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from ddpsim.network.comm_model import AlphaBetaModel
from ddpsim.engine.simulate import simulate
from ddpsim.plan.planner import DDPOptions, plan_ddp
from ddpsim.engine.config import SimConfig
from ddpsim.trace.records import load_trace, make_trace

REAL_TRACE = Path(__file__).resolve().parents[1] / "traces" / "gpt2-1.5b.h100.json"


def gpt2_xl_shapes(n_layer: int = 48, d: int = 1600, vocab: int = 50257, ctx: int = 1024):
    params = [("wte.weight", (vocab, d)), ("wpe.weight", (ctx, d))]
    for i in range(n_layer):
        h = f"h.{i}."
        params += [(h + "ln_1.weight", (d,)), (h + "ln_1.bias", (d,)),
                   (h + "attn.c_attn.weight", (d, 3 * d)), (h + "attn.c_attn.bias", (3 * d,)),
                   (h + "attn.c_proj.weight", (d, d)), (h + "attn.c_proj.bias", (d,)),
                   (h + "ln_2.weight", (d,)), (h + "ln_2.bias", (d,)),
                   (h + "mlp.c_fc.weight", (d, 4 * d)), (h + "mlp.c_fc.bias", (4 * d,)),
                   (h + "mlp.c_proj.weight", (4 * d, d)), (h + "mlp.c_proj.bias", (d,))]
    params += [("ln_f.weight", (d,)), ("ln_f.bias", (d,))]
    return params


def synthetic_gpt2_xl(forward_s: float = 0.065, backward_s: float = 0.13, optimizer_s: float = 0.012):
    """GPT-2 1.5B shapes; backward time spread in reverse layer order in proportion to the
    parameters' sizes, the tied lm_head (= wte) matmul first, wte's hook last."""
    shapes = gpt2_xl_shapes()
    numel = [math.prod(s) for _, s in shapes]
    total = sum(numel) + numel[0]  # the lm_head matmul costs like wte once more
    per = backward_s / total
    ready = [0.0] * len(shapes)
    t = numel[0] * per  # lm_head backward
    for i in range(len(shapes) - 1, 1, -1):  # ln_f, then layers 47..0 (reverse param order)
        t += numel[i] * per
        ready[i] = t
    t += numel[1] * per
    ready[1] = t          # wpe
    ready[0] = backward_s  # wte (tied): after the embedding backward
    return make_trace(model="gpt2-1.5b (synthetic)", params=[(n, s, "float32") for n, s in shapes], ready_s=ready,
                      forward_s=forward_s, backward_s=backward_s, optimizer_s=optimizer_s,
                      synthetic={"kind": "hand-made", "note": "GPT-2 1.5B shapes, H100-like times (bench_engine.py)"})


def forget() -> None:
    """Drop the results ``simulate`` keeps for points with the same inputs, so that the next
    timed run simulates (a repeated run would otherwise take the kept result)."""
    import ddpsim.engine.simulate as engine

    getattr(engine, "_MEMO", {}).clear()


def run(world_size: int, trace, cap: float | None, iterations: int = 3, jitter: float = 0.05, spans: bool = True,
        fresh: bool = True):
    """One timed simulation; ``fresh``: none of the kept results used (a sweep's points share theirs)."""
    if fresh:
        forget()
    plan = plan_ddp(trace, DDPOptions(bucket_cap_mb=cap))
    comm = AlphaBetaModel(latency_s=100e-6, bandwidth_bytes_per_s=22.5e9, num_ranks=world_size)
    cfg = SimConfig(world_size=world_size, num_iterations=iterations, jitter=jitter, seed=0,
                    copy_bandwidth_bytes_per_s=3.35e12)
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate(trace, plan, comm, cfg, spans=spans)
    return (time.perf_counter() - t0, time.process_time() - c0), res, plan


BAND_TRACE = Path(__file__).resolve().parents[1] / "traces" / "gpt2-124m.measured.h100.json"


def band(repeats: int = 5) -> None:
    """Part 5: one band re-simulation (``steps_only``) against the full simulation it replaces."""
    from ddpsim.network.host_costs import HostCosts
    from ddpsim.network.interference import Interference

    if not BAND_TRACE.is_file():
        return
    trace = load_trace(BAND_TRACE)
    comm = AlphaBetaModel(latency_s=20e-6, bandwidth_bytes_per_s=40e9, num_ranks=16)
    cfg = SimConfig(world_size=16, num_iterations=10, jitter="trace", seed=0, copy_bandwidth_bytes_per_s=2.5e12,
                    copy_kernel_floor_s=4e-6, host_costs=HostCosts(),
                    interference=Interference(compute_slowdown=1.07, comm_slowdown=1.0))
    print(f"\n[5] a band re-simulation: {trace.model}, 16 ranks, 10 iterations, interference and host costs")
    print("    cap_mb  buckets  full_ms  no_spans_ms  steps_only_ms  full/steps_only")
    for cap in (None, 1, 5):
        plan = plan_ddp(trace, DDPOptions(bucket_cap_mb=cap))
        cpus = {}
        for label, kw in (("full", {}), ("lean", {"spans": False}), ("steps", {"steps_only": True})):
            best = math.inf
            for _ in range(repeats):
                forget()
                c0 = time.process_time()
                simulate(trace, plan, comm, cfg, **kw)
                best = min(best, time.process_time() - c0)
            cpus[label] = best
        print(f"    {cap or 'default':>6}  {len(plan.steady):>7d}  {cpus['full'] * 1e3:>7.1f}  {cpus['lean'] * 1e3:>11.1f}  "
              f"{cpus['steps'] * 1e3:>13.1f}  {cpus['full'] / cpus['steps']:>15.2f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=None, help=f"trace JSON (default: {REAL_TRACE.name} if present, else synthetic)")
    ap.add_argument("--quick", action="store_true", help="8 sweep points and fewer world sizes")
    args = ap.parse_args(argv)
    path = Path(args.trace) if args.trace else (REAL_TRACE if REAL_TRACE.is_file() else None)
    trace = load_trace(path) if path else synthetic_gpt2_xl()
    jitter = 0.05
    print(f"trace: {trace.model}: {trace.num_params} params, {trace.total_param_bytes / 2**30:.2f} GiB of gradients"
          f"{'' if path else ' (synthetic)'}; jitter CV {jitter}; alpha-beta 100 us, 22.5 GB/s; 3 iterations per run")

    # warm up imports and caches
    run(8, trace, None, iterations=1)

    # 1. one 1,024-rank simulation
    (wall, cpu), res, plan = run(1024, trace, None, jitter=jitter)
    s = res.summary()
    print(f"\n[1] 1,024 ranks, default cap ({len(plan.steady)} steady buckets): {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU "
          f"for 3 iterations "
          f"({len(res.ranks)} explicit ranks + {'1 rest representative' if res.meta['rest_representative'] else 'none'}, "
          f"{len(res.spans)} spans, {res.meta['num_collectives']} collectives)")
    print(f"    predicted step p50 {s['iteration_p50_s'] * 1e3:.1f} ms, exposed comm {s['exposed_comm_s'] * 1e3:.1f} ms, "
          f"overlap {s['overlap_ratio']:.2f}")
    cpu3 = min(run(1024, trace, None, iterations=3, jitter=jitter)[0][1] for _ in range(3))
    cpu6 = min(run(1024, trace, None, iterations=6, jitter=jitter)[0][1] for _ in range(3))
    print(f"    one more steady-state iteration costs {(cpu6 - cpu3) / 3 * 1e3:.1f} ms CPU "
          f"(3 iterations {cpu3 * 1e3:.1f} ms, 6 iterations {cpu6 * 1e3:.1f} ms; best of 3)")

    # 2. 32-point sweep
    caps = [float(f"{c:.3g}") for c in np.geomspace(1, 512, 8 if args.quick else 32)]
    t0, c0 = time.perf_counter(), time.process_time()
    rows = []
    forget()
    for cap in caps:
        _, r, p = run(1024, trace, cap, jitter=jitter, fresh=False)
        rows.append((cap, len(p.steady), r.summary()["iteration_p50_s"]))
    total, total_cpu = time.perf_counter() - t0, time.process_time() - c0
    best = min(rows, key=lambda x: x[2])
    print(f"\n[2] bucket_cap_mb sweep, {len(caps)} points x 1,024 ranks x 3 iterations: {total:.2f} s wall, "
          f"{total_cpu:.2f} s CPU ({total_cpu / len(caps) * 1e3:.0f} ms CPU per point); target <= 1 s "
          f"(load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    t0, c0 = time.perf_counter(), time.process_time()
    forget()
    for cap in caps:
        run(1024, trace, cap, jitter=jitter, spans=False, fresh=False)
    lean, lean_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"    the same sweep with simulate(..., spans=False) (summary figures only): {lean:.2f} s wall, {lean_cpu:.2f} s CPU")
    print("    cap_mb  buckets  step_p50_ms")
    for cap, nb, t in rows[:: max(1, len(rows) // 8)] + ([best] if best not in rows[:: max(1, len(rows) // 8)] else []):
        print(f"    {cap:>6g}  {nb:>7d}  {t * 1e3:>11.2f}{'  <- best' if (cap, nb, t) == best else ''}")

    # 3. scaling in world size
    sizes = [8, 64, 1024, 16384] if args.quick else [8, 16, 64, 256, 1024, 4096, 16384]
    print("\n[3] cost vs world size (default cap, 3 iterations):")
    print("    ranks  explicit  wall_ms  cpu_ms  spans  step_p50_ms")
    for w in sizes:
        walls, cpus = [], []
        for _ in range(2):
            (wall, cpu), r, _ = run(w, trace, None, jitter=jitter)
            walls.append(wall)
            cpus.append(cpu)
        print(f"    {w:>5d}  {len(r.ranks):>8d}  {min(walls) * 1e3:>7.1f}  {min(cpus) * 1e3:>6.1f}  {len(r.spans):>5d}  "
              f"{r.summary()['iteration_p50_s'] * 1e3:>11.2f}")

    band()

    # 4. the same run over the NCCL model of 128 DGX H100 nodes (topology + collectives modules)
    try:
        from ddpsim.network.collective_cost import build_comm_model
        from ddpsim.network.topology import resolve_topology
    except ImportError:  # pragma: no cover - modules of other engineers
        return 0
    t0 = time.process_time()
    graph = resolve_topology("dgx-h100", num_nodes=128)
    comm = build_comm_model(graph, 1024)
    build = time.process_time() - t0
    cfg = SimConfig(world_size=1024, num_iterations=3, jitter=jitter, seed=0, copy_bandwidth_bytes_per_s=3.35e12)
    for cap in (None, 100):
        plan = plan_ddp(trace, DDPOptions(bucket_cap_mb=cap))
        c0 = time.process_time()
        r = simulate(trace, plan, comm, cfg)
        cpu = time.process_time() - c0
        s = r.summary()
        print(f"\n[4] NCCL model, dgx-h100 x 128 nodes (model built in {build:.2f} s CPU), cap {cap or 'default'}: "
              f"{cpu * 1e3:.0f} ms CPU; step p50 {s['iteration_p50_s'] * 1e3:.1f} ms, exposed comm "
              f"{s['exposed_comm_s'] * 1e3:.1f} ms, overlap {s['overlap_ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
