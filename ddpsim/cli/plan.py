"""``ddpsim plan``: show the buckets real DDP builds for a trace (or check an explicit plan)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import replace
from typing import Any

from ddpsim.cli.args import add_format, add_verb, nonempty, output_file, text_table
from ddpsim.units import format_size


log = logging.getLogger(__name__)

DESCRIPTION = """\
Which gradient buckets does PyTorch DDP build for this traced model, and in which order does it launch them?

The buckets are built as DDP's Reducer builds them (torch's compute_bucket_assignment_by_size,
the bucket reversal at construction and the one-time rebuild in gradient-ready order).
The table lists the steady-state buckets in the order DDP launches their all-reduces
(bucket 0 first), then the first-iteration layout and the iteration the rebuilt layout
applies from. With --plan, an explicit bucket list (JSON) is validated against the trace
and shown instead; it applies from iteration 1.

--format json prints the plan file ('ddpsim-plan' v1) that --plan, 'ddpsim simulate' and the executor read."""

EPILOG = """\
examples:
  ddpsim plan traces/resnet50.cpu.json --options '{"bucket_cap_mb": 25}'
  ddpsim plan traces/gpt2-124m.cpu.json --options '{"bucket_cap_mb_list": [1, 4, 25], "static_graph": true}' --out static.plan.json

A hand-written plan is {"buckets": [[11, 10], [9, 8, 7], ...]} (parameter indices or names,
in launch order, every trainable parameter exactly once, one dtype per bucket)."""


def add_parser(subparsers: Any) -> None:
    p = add_verb(subparsers, "plan", help="show DDP's bucket plan for a trace", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("trace", metavar="TRACE", type=nonempty, help="trace JSON written by 'ddpsim trace'")
    p.add_argument("--options", metavar="JSON|FILE", default=None,
                   help="DDP's options as one JSON object of DDPOptions fields, inline or in a file (the "
                        "document the executor reads): bucket_cap_mb (MiB > 0; not given: 25 MiB, the first rebuilt "
                        "bucket 1 MiB), bucket_cap_mb_list (torch >= 2.13: per-bucket limits in MiB, "
                        "the last reused; bucket_cap_mb is ignored with it), find_unused_parameters, static_graph, "
                        "gradient_as_bucket_view, semantics ('modern': an explicit cap also caps the first rebuilt "
                        "bucket; 'legacy': always 1 MiB), delay_all_reduce_named_params with "
                        "param_to_hook_all_reduce, ...")
    p.add_argument("--plan", metavar="FILE", default=None, type=nonempty,
                   help="validate and show this explicit plan JSON instead of DDP's")
    add_format(p, "table", "csv", "json")
    p.add_argument("--out", metavar="FILE", default=None, type=output_file, help="also write the plan JSON to FILE")


def warn_cap_ignored(bucket_cap_mb: float | None, bucket_cap_mb_list: tuple[float, ...] | None, command: str) -> None:
    """Say (a warning) that bucket_cap_mb is ignored when bucket_cap_mb_list is given too (as in torch)."""
    if bucket_cap_mb_list is not None and bucket_cap_mb is not None:
        log.warning("%s: bucket_cap_mb %g is ignored: bucket_cap_mb_list is given "
                    "(torch ignores bucket_cap_mb when bucket_cap_mb_list is given)", command, bucket_cap_mb)


def run(args: argparse.Namespace) -> int:
    from ddpsim.io import write_text_atomic
    from ddpsim.plan.planner import DDPOptions, load_plan, options_document, plan_ddp
    from ddpsim.schema import validate
    from ddpsim.trace.records import load_trace

    doc = {} if args.options is None else options_document(args.options, "--options")
    warn_cap_ignored(doc.get("bucket_cap_mb"), doc.get("bucket_cap_mb_list"), "ddpsim plan")
    options = validate(DDPOptions, doc, "--options")
    trace = load_trace(args.trace)
    plan = (plan_ddp(trace, options) if args.plan is None
            else replace(load_plan(args.plan, trace), options=options))
    plan_json = json.dumps(plan.to_dict(), indent=1) + "\n"
    if args.format == "json":
        text = plan_json
    elif args.format == "csv":  # the steady layout, then (if buckets are rebuilt) the first-iteration one
        from ddpsim.report.tables import to_csv_text

        text = to_csv_text(_rows(plan, trace), CSV_FIELDS, float_format=None)
    else:
        text = format_table(plan, trace, trace_path=args.trace, plan_path=args.plan)
    if args.out is not None:
        write_text_atomic(args.out, plan_json, "--out")
    sys.stdout.write(text)
    if args.out is not None:
        log.info("ddpsim: wrote %s", args.out)
    return 0


# ---- formatting (pure) ----------------------------------------------------------------------


def _rows(plan: Any, trace: Any) -> list[dict[str, Any]]:
    rows = []
    layouts = [("steady", plan.steady, plan.rebuild_iteration or 1)]
    if plan.rebuild_iteration is not None:
        layouts.append(("first_iteration", plan.initial, 1))
    for layout, buckets, from_iter in layouts:
        for b in buckets:
            first, last = trace.params[b.param_indices[0]], trace.params[b.param_indices[-1]]
            rows.append({"layout": layout, "index": b.index, "num_params": len(b.param_indices),
                         "size_bytes": b.size_bytes, "size": format_size(b.size_bytes), "dtype": b.dtype,
                         "first_param": first.name, "last_param": last.name, "from_iteration": from_iter,
                         "param_indices": " ".join(str(i) for i in b.param_indices)})
    return rows


CSV_FIELDS = ["layout", "index", "num_params", "size_bytes", "size", "dtype", "first_param", "last_param",
              "from_iteration", "param_indices"]


def format_table(plan: Any, trace: Any, *, trace_path: str = "", plan_path: str | None = None) -> str:
    """The human view: header, steady-state buckets in launch order, first-iteration line."""
    o = plan.options
    cap = (f"not given ({format_size(o.bucket_bytes_cap)})" if o.bucket_cap_mb is None else
           f"{o.bucket_cap_mb:g} MiB")
    if o.bucket_cap_mb_list:
        from ddpsim.plan.planner import mb_text

        cap = f"ignored, bucket_cap_mb_list=[{', '.join(mb_text(x) for x in o.bucket_cap_mb_list)}] MiB"
    flags = [n for n in ("find_unused_parameters", "static_graph", "gradient_as_bucket_view") if getattr(o, n)]
    if o.delay_all_reduce_named_params is not None:
        flags.append(f"delay_all_reduce_named_params={','.join(o.delay_all_reduce_named_params)} "
                     f"(hook {o.param_to_hook_all_reduce})")
    lines = [f"trace: {trace_path} (model {trace.model}, {trace.num_params} parameters, "
             f"{trace.total_param_bytes} B = {format_size(trace.total_param_bytes)})"]
    if plan_path is not None:
        lines.append(f"plan: explicit, from {plan_path} (validated; applies from iteration 1, never rebuilt)")
    else:
        lines.append(f"options: bucket_cap_mb={cap}, {', '.join(flags) if flags else 'no other options'}, "
                     f"semantics={o.semantics}")
    rows = [r for r in _rows(plan, trace) if r["layout"] == "steady"]
    if not rows:
        lines += ["", "no buckets: every parameter is in delay_all_reduce_named_params (DDP builds no reducer)", ""]
        return "\n".join(lines)
    title = ("steady-state buckets" if plan.rebuild_iteration is not None else "buckets") + \
        f" (from iteration {rows[0]['from_iteration']}), in launch order:"
    lines += ["", title]
    header = ["bucket", "params", "size_bytes", "size", "dtype", "first .. last parameter", "from_iter"]
    table = [[str(r["index"]), str(r["num_params"]), str(r["size_bytes"]), r["size"], r["dtype"],
              r["first_param"] if r["num_params"] == 1 else f"{r['first_param']} .. {r['last_param']}",
              str(r["from_iteration"])] for r in rows]
    lines += [*text_table(header, table, right={0, 1, 2, 3, 6}), ""]
    if plan.rebuild_iteration is not None:
        first_iters = "1" if plan.rebuild_iteration == 2 else f"1..{plan.rebuild_iteration - 1}"
        first = plan.initial
        sizes = ", ".join(f"{b.size_bytes} B ({format_size(b.size_bytes)})" for b in first[:4])
        more = f", ... ({len(first) - 4} more)" if len(first) > 4 else ""
        lines.append(f"first iteration layout (iteration {first_iters}): {len(first)} "
                     f"bucket{'s' if len(first) != 1 else ''}: {sizes}{more}")
        lines.append(f"rebuild: at the start of iteration {plan.rebuild_iteration}, in gradient-ready order")
    elif plan_path is None:
        lines.append("rebuild: never (find_unused_parameters without static_graph); "
                     "this construction layout applies to every iteration")
    return "\n".join(lines) + "\n"
