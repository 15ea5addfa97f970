"""``ddpsim simulate``: simulate DDP training of a traced model on a modelled cluster."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from ddpsim.cli.args import add_format, add_verb, text_table
from ddpsim.errors import InputError

DESCRIPTION = """\
How fast does one DDP configuration of a traced model train on a modelled cluster, iteration by iteration?

Simulate PyTorch DDP training of a traced model: the Reducer's buckets (DDP's own plan, or
a plan file), the gradient copy-in at each hook, DDP's strict in-order bucket launch, one
communication stream per process group on which each all-reduce starts only when every
rank has launched it, finalize (wait, copy-out), optimizer, over several iterations so
the first-iteration single bucket, the bucket rebuild and the steady state all show.

The flags make a one-point scenario (every key but the trace and the cluster set with --set
KEY=VALUE, as in a scenario file), built and simulated as 'ddpsim run' builds a scenario's
points: at a scenario's point it prints the step time 'ddpsim run' reports for it.

Printed: per-iteration figures (the slowest simulated rank's step; warm-up marked), the
per-bucket ready/launch/start/end timings of the first steady iteration on rank 0, and the
steady-state summary (p50/p95 step time, forward, backward, exposed communication,
overlap). An "iteration" is one no_sync cycle (simulation.no_sync_steps micro-steps + 1 synced)."""

EPILOG = """\
examples:
  ddpsim simulate --trace traces/gpt2-1.5b.h100.json --topology dgx-h100 --set cluster.nodes=4 --set ddp.bucket_cap_mb=50
  ddpsim simulate --trace traces/resnet50.cpu.json --set world_size=8 --set cluster.latency_us=20 --set cluster.bandwidth_gbps=25 --set ddp.comm_hook=fp16 --set 'simulation.stragglers={3: 1.2}'

world_size: default every device of the topology (2 with a latency + bandwidth model);
calibration: a calibration JSON from the executor, or an nccl-tests all_reduce_perf log.

--format csv prints two CSV tables (iterations per rank, then buckets per rank), each after
a '# name' comment line; --format json prints {summary, iterations, buckets, meta}."""


def add_parser(subparsers: Any) -> None:
    from ddpsim.cli.run import add_scenario_flags

    p = add_verb(subparsers, "simulate", help="simulate DDP training of a trace on a cluster", description=DESCRIPTION,
                 epilog=EPILOG)
    add_scenario_flags(p, topology_default=None)
    add_format(p, "table", "json", "csv")


def _table(rows: list[dict[str, Any]]) -> str:
    """Aligned rows: a bool ``yes`` or empty, a float to 4 significant digits (1 decimal from 1e4)."""
    def cell(v: Any) -> str:
        if isinstance(v, bool):
            return "yes" if v else ""
        return (f"{v:.4g}" if abs(v) < 1e4 else f"{v:.1f}") if isinstance(v, float) else str(v)

    if not rows:
        return "(none)\n"
    return "\n".join(text_table(list(rows[0]), [[cell(v) for v in r.values()] for r in rows])) + "\n"


def run(args: argparse.Namespace) -> int:
    """Print the command line's one point at its scenario's cap (without a topology, 2 ranks unless
    --set gives the world size), simulated alone by :func:`ddpsim.pipeline.sweep.run_sweep`."""
    from ddpsim.cli.plan import warn_cap_ignored
    from ddpsim.cli.run import command_scenario, flag_message, scenario_flags, set_keys
    from ddpsim.pipeline.sweep import run_sweep

    alpha_beta = args.topology is None and not any(k in ("cluster", "cluster.topology") for k in set_keys(args))
    sc = command_scenario(args, "ddpsim simulate", **({"world_size": 2} if alpha_beta else {}))
    warn_cap_ignored(sc.ddp.bucket_cap_mb, sc.ddp.bucket_cap_mb_list, "ddpsim simulate")
    try:
        point = sc.point_at(sc.ddp.bucket_cap_mb, sc.ddp.bucket_cap_mb_list)
        rec = run_sweep(sc, points=[point], jobs=1, progress=False, alone=True)[0]
    except InputError as exc:
        raise InputError(flag_message(str(exc), scenario_flags(args))) from None
    res = rec.result
    summary = res.summary()
    out = sys.stdout
    if args.format != "table":
        from ddpsim.report.tables import to_csv_text

        tables = {"iterations": [dict(asdict(it), iteration_s=it.iteration_s) for it in res.iterations],
                  "buckets": [asdict(b) for b in res.buckets]}
        if args.format == "json":
            out.write(json.dumps({"summary": summary, **tables, "meta": res.meta}, indent=1, default=str) + "\n")
        else:
            out.write("".join(f"# {name}\n{to_csv_text(rows, float_format=None)}"
                              for name, rows in tables.items()))
        return 0
    m, c = res.meta, res.meta["config"]
    out.write(f"{m['trace']['model']}: {rec.world_size} ranks, {m['comm'].get('model', rec.backend)}, "
              f"plan {m['plan']['label']} ({m['plan']['num_buckets_initial']} bucket(s) first, "
              f"{m['plan']['num_buckets_steady']} steady), hook {c['comm_hook']}, iterations {c['num_iterations']}, "
              f"seed {c['seed']}\n")
    out.write(f"simulated ranks: {list(res.ranks)}{' + 1 representative of the rest' if m['rest_representative'] else ''}; "
              f"warm-up iterations: {m['num_warmup_iterations']}; iteration = {m['iteration_unit']}\n\n")
    slowest: dict[int, Any] = {}
    for it in res.iterations:  # the first of the slowest on a tie
        slowest[it.iteration] = max(slowest.get(it.iteration, it), it, key=lambda x: x.iteration_s)
    out.write("per iteration (slowest simulated rank):\n")
    out.write(_table([{"iteration": k, "rank": it.rank, "warmup": it.warmup,
                       "iteration_ms": it.iteration_s * 1e3, "forward_ms": it.forward_s * 1e3,
                       "backward_ms": it.backward_compute_s * 1e3, "comm_ms": it.comm_s * 1e3,
                       "exposed_comm_ms": it.exposed_comm_s * 1e3, "overlap": it.overlap_ratio,
                       "optimizer_ms": it.optimizer_s * 1e3} for k, it in sorted(slowest.items())]))
    k = min((it.iteration for it in res.iterations if not it.warmup), default=None)
    k = max((b.iteration for b in res.buckets), default=None) if k is None else k
    out.write(f"\nbuckets of iteration {k}, rank {res.ranks[0]} (ms from simulation start):\n")
    out.write(_table([{"bucket": b.bucket, "params": b.num_params, "size_mib": b.size_bytes / 2**20,
                       "ready_ms": b.ready_s * 1e3, "launch_ms": b.launch_s * 1e3,
                       "start_ms": b.start_s * 1e3, "end_ms": b.end_s * 1e3,
                       "comm_ms": (b.end_s - b.start_s) * 1e3}
                      for b in res.buckets if b.iteration == k and b.rank == res.ranks[0]]))
    out.write("\nsummary (steady state):\n")
    for key, v in summary.items():  # seconds as milliseconds
        ms = key.endswith("_s")
        out.write(f"  {key[:-2] + '_ms' if ms else key:<22} {v * 1e3 if ms else v:.4g}\n")
    j = m.get("join")
    if j:  # an epoch under Join (ddpsim.engine.join): iteration_mean is the epoch's mean step
        out.write(f"\njoin: epoch {j['epoch_s'] * 1e3:.4g} ms over {j['epoch_iterations']} iterations (final sync "
                  f"{j['exit_s'] * 1e3:.4g} ms) vs {j['even_epoch_s'] * 1e3:.4g} ms dealt evenly: uneven inputs cost "
                  f"{j['epoch_cost_pct']:.1f} % per epoch\n")
    return 0
