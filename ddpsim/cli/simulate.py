"""``ddpsim simulate``: simulate DDP training of a traced model on a modelled cluster."""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import math
import sys
from typing import Any

from ddpsim.errors import InputError

log = logging.getLogger(__name__)

DESCRIPTION = """\
How fast does one DDP configuration of a traced model train on a modelled cluster, iteration by iteration?

Simulate PyTorch DDP training of a traced model: the Reducer's buckets (DDP's own plan, or
--plan), the gradient copy-in at each hook, DDP's strict in-order bucket launch, one
communication stream per process group on which each all-reduce starts only when every
rank has launched it, finalize (wait, copy-out), optimizer, over several iterations so
the first-iteration single bucket, the bucket rebuild and the steady state all show.

The network is a topology (--topology preset or YAML, with --nodes; the NCCL or gloo cost
model, or a measured --calibration) or a plain latency + bandwidth model (--latency-us and
--bandwidth-gbps). The flags make a one-point scenario, built as 'ddpsim run' and 'ddpsim
sweep' build a scenario's points, with the same cost terms (ddpsim.network.cost_terms): on
an analytical NCCL model of GPUs, the compute-communication contention prior, DDP's host
costs and the gradient copies as kernels (HBM share, a floor per kernel); with a calibration,
its measured interference, copy bandwidth and host costs. Copy bandwidth otherwise comes
from the topology's device memory bandwidth (free copies with the latency/bandwidth model).
So 'ddpsim simulate' at a scenario's point (same iterations, seed and jitter) prints the
step time 'ddpsim run' reports for it.

Rank variation: every rank's compute in an iteration is scaled by a seeded lognormal
factor (--jitter trace: the trace's measured spread; none; or a coefficient of variation)
and by --straggler factors. Large worlds are simulated with a few representative ranks
(rank 0, stragglers, 8 samples) plus one process standing for the slowest of the rest.

Printed: per-iteration figures (the slowest simulated rank's step; warm-up marked), the
per-bucket ready/launch/start/end timings of the first steady iteration on rank 0, and the
steady-state summary (p50/p95 step time, forward, backward, exposed communication,
overlap). An "iteration" is one no_sync cycle (--no-sync-steps micro-steps + 1 synced)."""

EPILOG = """\
examples:
  ddpsim simulate --trace traces/gpt2-1.5b.h100.json --topology dgx-h100 --nodes 4 --world-size 32 --bucket-cap-mb 50
  ddpsim simulate --trace traces/resnet50.cpu.json --latency-us 20 --bandwidth-gbps 25 --world-size 8 --comm-hook fp16 --straggler 3:1.2

--format csv prints two CSV tables (iterations per rank, then buckets per rank), each after
a '# name' comment line; --format json prints {summary, iterations, buckets, meta}."""

FORMATS = ("table", "json", "csv")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from ddpsim.cli.args import (MAX_ITERATIONS, MAX_NODES, MAX_SEED, MAX_WORLD_SIZE, add_verb, bucket_cap_mb_list, float_in, from_parser, int_in, nonempty)
    from ddpsim.cli.plan import parse_bucket_cap_mb
    from ddpsim.engine.config import COMM_HOOKS

    p = add_verb(subparsers, "simulate", help="simulate DDP training of a trace on a cluster", description=DESCRIPTION,
                 epilog=EPILOG)
    p.add_argument("--trace", required=True, metavar="FILE", type=nonempty, help="trace JSON written by 'ddpsim trace'")
    net = p.add_argument_group("network (a topology, or a latency + bandwidth model)")
    net.add_argument("--topology", metavar="PRESET|FILE", default=None, type=nonempty,
                     help="topology preset (dgx-a100, dgx-h100, pcie, cpu-gloo) or YAML file")
    net.add_argument("--nodes", metavar="N", type=int_in(1, MAX_NODES), default=1, help="nodes of a preset topology; default 1")
    net.add_argument("--catalogue", metavar="FILE", default=None, type=nonempty,
                     help="hardware catalogue YAML adding GPUs and systems (presets) to the bundled one")
    net.add_argument("--latency-us", metavar="X", type=float_in(0), default=None, help="alpha-beta model: latency per collective (us)")
    net.add_argument("--bandwidth-gbps", metavar="Y", type=float_in(0, above=True), default=None,
                     help="alpha-beta model: bandwidth (GB/s = 1e9 B/s) of a collective")
    net.add_argument("--calibration", metavar="FILE", default=None, type=nonempty,
                     help="calibration JSON (measured collectives, interference, copy bandwidth) or an nccl-tests "
                          "all_reduce_perf log, for --topology")
    p.add_argument("--world-size", metavar="N", type=int_in(1, MAX_WORLD_SIZE), required=True, help="ranks in the process group")
    ddp = p.add_argument_group("DDP options")
    ddp.add_argument("--bucket-cap-mb", metavar="X", default=None, type=from_parser(parse_bucket_cap_mb), help="bucket_cap_mb in MiB; default: not given")
    ddp.add_argument("--bucket-cap-mb-list", metavar="X,Y,...", default=None, type=bucket_cap_mb_list,
                     help="bucket_cap_mb_list in MiB (torch >= 2.13), e.g. 1,4,25; bucket_cap_mb is ignored with it")
    ddp.add_argument("--find-unused-parameters", action="store_true", help="find_unused_parameters=True")
    ddp.add_argument("--static-graph", action="store_true", help="static_graph=True")
    ddp.add_argument("--gradient-as-bucket-view", action="store_true", help="gradient_as_bucket_view=True")
    ddp.add_argument("--comm-hook", choices=COMM_HOOKS, default="none", help="DDP comm hook; default none")
    add_torch213_ddp_flags(ddp)
    ddp.add_argument("--plan", metavar="FILE", default=None, type=nonempty,
                     help="explicit bucket plan JSON instead of DDP's (the scenario key 'plan')")
    ddp.add_argument("--process-groups", metavar="N", type=int_in(1, 64), default=1,
                     help="deal the collectives to N communicators in turn (_round_robin_process_groups); default 1")
    ddp.add_argument("--join-batches", metavar="B0,B1,...", default=None, type=join_batches,
                     help="an epoch under model.join() with these per-rank batch counts (uneven inputs); default: even")
    ddp.add_argument("--sync-batchnorm", action="store_true",
                     help="the model's BatchNorm layers are nn.SyncBatchNorm (their statistics' collectives)")
    sim = p.add_argument_group("simulation")
    sim.add_argument("--no-sync-steps", metavar="N", type=int_in(0, MAX_ITERATIONS), default=0, help="no_sync accumulation micro-steps per iteration")
    sim.add_argument("--iterations", metavar="N", type=int_in(1, MAX_ITERATIONS), default=4, help="iterations to simulate; default 4")
    sim.add_argument("--seed", metavar="S", type=int_in(0, MAX_SEED), default=0, help="random seed; default 0")
    sim.add_argument("--jitter", metavar="trace|none|CV", default="trace", type=from_parser(parse_jitter), help="rank compute jitter; default trace")
    sim.add_argument("--straggler", metavar="RANK:FACTOR", action="append", default=[], type=from_parser(parse_straggler),
                     help="a slow rank (repeatable), e.g. 3:1.25")
    sim.add_argument("--interference", metavar="COMPUTE:COMM[:WEIGHTING]", default=None,
                     type=from_parser(parse_interference),
                     help="compute slowdown while a collective runs : collective slowdown while compute runs "
                          "(both >= 1) [: uniform (every collective applies all of the compute slowdown; the "
                          "default here) or bandwidth (a collective applies it in proportion to its share of "
                          "moved bytes; what a calibration uses)], e.g. 1.2:1.5 or 2.5:3:bandwidth; overrides "
                          "the calibration's and the contention prior; default: the calibration's, else the "
                          "contention prior (analytical NCCL on GPUs), else 1:1")
    sim.add_argument("--copy-bandwidth-gbps", metavar="X", type=float_in(0, above=True), default=None,
                     help="memory bandwidth (GB/s) of gradient copy-in/out; overrides the calibration's and the "
                          "topology's; default: calibration, else topology (a share of HBM on GPUs), else free copies")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format; default table")
    p.set_defaults(func=run)
    return p


def add_torch213_ddp_flags(group: Any) -> None:
    """Flags of torch 2.13's DDP options (shared by the commands that build DDPOptions)."""
    group.add_argument("--batched-grad-copy", action="store_true", help="batched_grad_copy=True")
    group.add_argument("--skip-all-reduce-unused-params", action="store_true", help="skip_all_reduce_unused_params=True")
    from ddpsim.cli.args import from_parser
    from ddpsim.plan.planner import parse_mixed_precision

    group.add_argument("--forward-sync-buffers", action=argparse.BooleanOptionalAction, default=None,
                       help="forward_sync_buffers (buffer broadcast before each forward); default: DDP's (on)")
    group.add_argument("--broadcast-buffers", action=argparse.BooleanOptionalAction, default=None,
                       help="the deprecated broadcast_buffers (used when --forward-sync-buffers is not given)")
    group.add_argument("--mixed-precision", metavar="PARAM[:REDUCE[:BUFFER]]", default=None,
                       type=from_parser(parse_mixed_precision),
                       help="DDP's _MixedPrecision dtypes (float16, bfloat16, float32, float64; '-' leaves one unset), "
                            "e.g. bfloat16:float32 or float16:-:float16")
    group.add_argument("--delay-all-reduce-params", metavar="NAME[,NAME...]", default=None,
                       help="delay_all_reduce_named_params: parameters all-reduced from a hook on --param-to-hook-all-reduce")
    group.add_argument("--param-to-hook-all-reduce", metavar="NAME", default=None, help="param_to_hook_all_reduce")


def torch213_ddp_options(args: argparse.Namespace) -> dict[str, Any]:
    """DDPOptions keyword arguments from :func:`add_torch213_ddp_flags`' flags."""
    from ddpsim.units import parse_delay_flags

    out: dict[str, Any] = {"batched_grad_copy": args.batched_grad_copy,
                           "skip_all_reduce_unused_params": args.skip_all_reduce_unused_params,
                           "forward_sync_buffers": args.forward_sync_buffers, "mixed_precision": args.mixed_precision}
    if args.broadcast_buffers is not None:
        out["broadcast_buffers"] = args.broadcast_buffers
    out.update(parse_delay_flags(args.delay_all_reduce_params, args.param_to_hook_all_reduce))
    return out


def join_batches(text: str) -> list[int]:
    """``--join-batches 12,8`` -> ``[12, 8]`` (counts checked by the scenario: one per rank, >= 1)."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; expected comma-separated batch counts, "
                                         "one integer >= 1 per rank") from None


def parse_straggler(text: str) -> tuple[int, float]:
    """``"3:1.25"`` -> (3, 1.25); InputError otherwise (a rank < 0, a factor < 1)."""
    try:
        r, f = text.split(":")
        rank, factor = int(r), float(f)
    except ValueError:
        raise InputError(f"--straggler: {text!r} is not accepted; expected RANK:FACTOR, e.g. 3:1.25") from None
    if rank < 0 or not (math.isfinite(factor) and factor >= 1):
        raise InputError(f"--straggler: {text!r} is not accepted; expected RANK:FACTOR with a rank >= 0 and a "
                         "slowdown factor >= 1, e.g. 3:1.25")
    return rank, factor


def parse_interference(text: str):
    """``"1.2:1.5"`` -> Interference(compute_slowdown=1.2, comm_slowdown=1.5); ``"1.2:1.5:bandwidth"``
    also sets the weighting; InputError otherwise."""
    from ddpsim.network.interference import WEIGHTINGS, Interference

    expected = (f"COMPUTE:COMM slowdowns >= 1, optionally :WEIGHTING ({' or '.join(WEIGHTINGS)}), "
                "e.g. 1.2:1.5 or 2.5:3:bandwidth")
    parts = text.split(":")
    weighting = parts.pop() if len(parts) == 3 else "uniform"
    try:
        c, m = parts
        compute, comm = float(c), float(m)
    except ValueError:
        raise InputError(f"--interference: {text!r} is not accepted; expected {expected}") from None
    if not (math.isfinite(compute) and math.isfinite(comm) and compute >= 1 and comm >= 1) or weighting not in WEIGHTINGS:
        raise InputError(f"--interference: {text!r} is not accepted; expected {expected}")
    return Interference(compute_slowdown=compute, comm_slowdown=comm, weighting=weighting)


def parse_jitter(text: str) -> str | float:
    """``trace``, ``none`` or a coefficient of variation >= 0; InputError otherwise."""
    if text in ("trace", "none"):
        return text
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"--jitter: {text!r} is not accepted; expected trace, none or a coefficient of variation >= 0") from None
    if not math.isfinite(v) or v < 0:
        raise InputError(f"--jitter: {text!r} is not accepted; expected trace, none or a coefficient of variation >= 0")
    return v


#: scenario keys -> the flags that set them (errors of the scenario name the flag)
FLAGS = {"trace": "--trace", "cluster.topology": "--topology", "cluster.nodes": "--nodes", "cluster.catalogue": "--catalogue",
         "cluster.latency_us": "--latency-us", "cluster.bandwidth_gbps": "--bandwidth-gbps", "world_size": "--world-size",
         "ddp.comm_hook": "--comm-hook", "calibration": "--calibration", "plan": "--plan",
         "simulation.iterations": "--iterations", "simulation.seed": "--seed", "simulation.no_sync_steps": "--no-sync-steps",
         "simulation.stragglers": "--straggler", "ddp.delay_all_reduce_named_params": "--delay-all-reduce-params",
         "ddp.param_to_hook_all_reduce": "--param-to-hook-all-reduce", "ddp.process_groups": "--process-groups",
         "ddp.join.batches_per_rank": "--join-batches"}


def build_scenario(args: argparse.Namespace):
    """The one-point scenario of the parsed arguments (:func:`ddpsim.cli.args.scenario_from_flags`)."""
    from ddpsim.cli.args import scenario_from_flags
    from ddpsim.cli.plan import warn_cap_ignored

    cap, cap_list = args.bucket_cap_mb, args.bucket_cap_mb_list
    warn_cap_ignored(cap, cap_list, "ddpsim simulate")
    ddp = {"bucket_cap_mb": cap, "bucket_cap_mb_list": None if cap_list is None else list(cap_list),
           "find_unused_parameters": args.find_unused_parameters, "static_graph": args.static_graph,
           "gradient_as_bucket_view": args.gradient_as_bucket_view, "sync_batchnorm": args.sync_batchnorm,
           "comm_hook": args.comm_hook, **_ddp_keys(torch213_ddp_options(args)),
           **({"process_groups": args.process_groups} if args.process_groups != 1 else {}),
           **({"join": {"batches_per_rank": args.join_batches}} if args.join_batches else {})}
    data: dict[str, Any] = {
        "name": "simulate", "trace": args.trace, "cluster": _cluster(args), "world_size": args.world_size,
        "ddp": ddp, "simulation": _simulation(args), "sweep": {"bucket_cap_mb": [cap]},
        "timelines": []}
    if args.calibration:
        data["calibration"] = args.calibration
    if args.plan:
        data["plan"] = args.plan
    return scenario_from_flags(data, "ddpsim simulate", FLAGS)


def _ddp_keys(options: dict[str, Any]) -> dict[str, Any]:
    """DDPOptions keyword arguments as the scenario's ``ddp`` keys."""
    from dataclasses import asdict

    out = dict(options)
    if out.get("mixed_precision") is not None:
        out["mixed_precision"] = asdict(out["mixed_precision"])
    if out.get("delay_all_reduce_named_params") is not None:
        out["delay_all_reduce_named_params"] = list(out["delay_all_reduce_named_params"])
    return out


def _cluster(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario's ``cluster``: the topology, or the latency + bandwidth model."""
    ab = args.latency_us is not None or args.bandwidth_gbps is not None
    if ab == (args.topology is not None):
        raise InputError(f"--topology: {args.topology!r} with --latency-us {args.latency_us!r} / --bandwidth-gbps {args.bandwidth_gbps!r} "
                         "is not accepted; expected either --topology, or both --latency-us and --bandwidth-gbps")
    if not ab:
        return {"topology": args.topology, "nodes": args.nodes,
                **({"catalogue": args.catalogue} if args.catalogue is not None else {})}
    if args.latency_us is None or args.bandwidth_gbps is None:
        raise InputError("--latency-us/--bandwidth-gbps: only one given; expected both")
    if args.calibration:
        raise InputError(f"--calibration: {args.calibration!r} is not accepted with --latency-us/--bandwidth-gbps; expected --topology")
    return {"latency_us": args.latency_us, "bandwidth_gbps": args.bandwidth_gbps, "nodes": args.nodes}


def _simulation(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario's ``simulation`` block."""
    out: dict[str, Any] = {"iterations": args.iterations, "seed": args.seed, "no_sync_steps": args.no_sync_steps,
                           "jitter": args.jitter, "stragglers": dict(args.straggler)}
    if args.interference is not None:
        i = args.interference
        out["interference"] = {"compute_slowdown": i.compute_slowdown, "comm_slowdown": i.comm_slowdown,
                               "weighting": i.weighting}
    if args.copy_bandwidth_gbps is not None:
        out["copy_bandwidth_gbps"] = args.copy_bandwidth_gbps
    return out


def build_inputs(args: argparse.Namespace):
    """(trace, plan, comm, config) from the parsed arguments: their scenario's one point, built
    as every command builds a point (:func:`ddpsim.pipeline.inputs.build_point_inputs`)."""
    sc = build_scenario(args)
    warning = sc.calibration_warning()
    if warning:
        log.warning("ddpsim simulate: WARNING: %s", warning)
    try:
        inputs = sc.build_point(sc.point_at(sc.ddp.bucket_cap_mb, sc.ddp.bucket_cap_mb_list))
    except InputError as exc:
        from ddpsim.cli.args import flag_message

        raise InputError(flag_message(str(exc), FLAGS)) from None
    return inputs.trace, inputs.plan, inputs.comm, inputs.config


def _iteration_rows(res) -> list[dict[str, Any]]:
    """Per iteration: the slowest simulated rank's figures."""
    rows: dict[int, Any] = {}
    for it in res.iterations:
        cur = rows.get(it.iteration)
        if cur is None or it.iteration_s > cur.iteration_s:
            rows[it.iteration] = it
    return [{"iteration": k, "rank": it.rank, "warmup": it.warmup, "iteration_ms": it.iteration_s * 1e3,
             "forward_ms": it.forward_s * 1e3, "backward_ms": it.backward_compute_s * 1e3,
             "comm_ms": it.comm_s * 1e3, "exposed_comm_ms": it.exposed_comm_s * 1e3,
             "overlap": it.overlap_ratio, "optimizer_ms": it.optimizer_s * 1e3}
            for k, it in sorted(rows.items())]


def _steady_bucket_rows(res) -> tuple[int | None, list[dict[str, Any]]]:
    steady = sorted({it.iteration for it in res.iterations if not it.warmup})
    k = steady[0] if steady else max((b.iteration for b in res.buckets), default=None)
    r0 = res.ranks[0]
    rows = [{"bucket": b.bucket, "params": b.num_params, "size_mib": b.size_bytes / 2**20,
             "ready_ms": b.ready_s * 1e3, "launch_ms": b.launch_s * 1e3, "start_ms": b.start_s * 1e3,
             "end_ms": b.end_s * 1e3, "comm_ms": (b.end_s - b.start_s) * 1e3}
            for b in res.buckets if b.iteration == k and b.rank == r0]
    return k, rows


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(none)\n"
    cols = list(rows[0])

    def fmt(v: Any) -> str:
        if isinstance(v, bool):
            return "yes" if v else ""
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.1f}"
        return str(v)

    cells = [[fmt(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    out = ["  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    out += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ddpsim.engine.simulate import simulate

    trace, plan, comm, config = build_inputs(args)
    res = simulate(trace, plan, comm, config)
    summary = res.summary()
    out = sys.stdout
    if args.format == "json":
        doc = {"summary": summary,
               "iterations": [dict(asdict(it), iteration_s=it.iteration_s) for it in res.iterations],
               "buckets": [asdict(b) for b in res.buckets], "meta": res.meta}
        out.write(json.dumps(doc, indent=1, default=str) + "\n")
        return 0
    if args.format == "csv":
        for name, rows in (("iterations", [dict(asdict(it), iteration_s=it.iteration_s) for it in res.iterations]),
                           ("buckets", [asdict(b) for b in res.buckets])):
            buf = io.StringIO()
            out.write(f"# {name}\n")
            if rows:
                w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
                w.writeheader()
                w.writerows(rows)
            out.write(buf.getvalue())
        return 0
    m = res.meta
    out.write(f"{trace.model}: {config.world_size} ranks, {m['comm'].get('model', comm.backend)}, "
              f"plan {m['plan']['label']} ({m['plan']['num_buckets_initial']} bucket(s) first, "
              f"{m['plan']['num_buckets_steady']} steady), hook {config.comm_hook}, iterations {config.num_iterations}, "
              f"seed {config.seed}\n")
    out.write(f"simulated ranks: {list(res.ranks)}{' + 1 representative of the rest' if m['rest_representative'] else ''}; "
              f"warm-up iterations: {m['num_warmup_iterations']}; iteration = {m['iteration_unit']}\n\n")
    out.write("per iteration (slowest simulated rank):\n")
    out.write(_table(_iteration_rows(res)))
    k, brows = _steady_bucket_rows(res)
    out.write(f"\nbuckets of iteration {k}, rank {res.ranks[0]} (ms from simulation start):\n")
    out.write(_table(brows))
    out.write("\nsummary (steady state):\n")
    for key, v in summary.items():
        if key.endswith("_s"):
            out.write(f"  {key[:-2] + '_ms':<22} {v * 1e3:.4g}\n")
        else:
            out.write(f"  {key:<22} {v:.4g}\n")
    j = m.get("join")
    if j:  # an epoch under Join (ddpsim.engine.join): iteration_mean is the epoch's mean step
        out.write(f"\njoin: epoch {j['epoch_s'] * 1e3:.4g} ms over {j['epoch_iterations']} iterations (final sync "
                  f"{j['exit_s'] * 1e3:.4g} ms) vs {j['even_epoch_s'] * 1e3:.4g} ms dealt evenly: uneven inputs cost "
                  f"{j['epoch_cost_pct']:.1f} % per epoch\n")
    return 0
