"""``executor ddp``: a model under real ``DistributedDataParallel``.

Runs ``--warmup`` iterations (past DDP's bucket rebuild at iteration 2), then
``--iterations`` measured ones: zero_grad, forward (DDP's pre-forward: rebuild, buffer
broadcast), loss, backward (the reducer's all-reduces overlap it; it returns after
finalize), SGD step. Records per iteration and rank: forward, backward, optimizer and
iteration seconds; the step time of an iteration is the mean of the ranks' (see
:func:`ddpsim.formats.step_times`).

``--timing-hook`` registers a comm hook that wraps the all-reduce and records each bucket's
launch and end (CUDA events on GPUs, wall clock on CPUs). NOTE: any registered hook changes
DDP's division path (torch/csrc/distributed/c10d/reducer.cpp, ``Reducer::mark_variable_ready_dense``
and ``Reducer::finalize_bucket_dense``): the reducer then copies gradients into the bucket
without dividing and the hook divides the bucket (one more pass over it). So the iteration
time used for validation comes from a run WITHOUT the hook; run the hooked run separately to
get per-bucket times (``ddpsim validate`` does both).

With ``--trace`` (a trace of the same model) or ``--plan`` (a plan JSON), the buckets DDP
uses in steady state are compared with the plan ddpsim predicts (``plan_matches``): the
rebuilt ones (``_get_ddp_logging_data()``: ``rebuilt_per_bucket_param_indices``,
``rebuilt_bucket_sizes``), or, when DDP never rebuilt (``find_unused_parameters`` without
``static_graph``), the construction layout (logged ``bucket_sizes``; its parameter indices
from torch's own ``_compute_bucket_assignment_by_size`` over DDP's parameters and limits,
reversed as DDP does).

DDP's options other than the cap arrive as one document, ``--options`` (ddpsim's ``DDPOptions``
as JSON, the form ``ddpsim validate`` writes). torch 2.13's options (``batched_grad_copy``,
``skip_all_reduce_unused_params``, ``forward_sync_buffers``, ``delay_all_reduce_named_params``
with ``param_to_hook_all_reduce``, ``mixed_precision``) reach the DDP constructor by torch's
keyword names, only when not at their default; the record's ``ddp_in_force`` reads them back
from the constructed DDP object (torch's logging data has no fields for them). ``mixed_precision``
is refused on CPU devices: torch's mixed-precision forward records device events the CPU backend lacks.

A point's cap is a ``bucket_cap_mb`` (None: not given) or, as a tuple, a
``bucket_cap_mb_list`` (``--bucket-cap-mb-list``; torch ignores ``bucket_cap_mb`` then).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ddpsim.errors import InputError

from ddpsim.formats import summarize
from executor.runtime import Runtime, Stopwatch, measurement, write_json
from executor.workload import add_model_arguments, build_workload, check_counts, timed_steps


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--bucket-cap-mb", default=None,
                   help="DDP bucket_cap_mb in MiB; omit (or 'none') to leave it unset as PyTorch's default")
    p.add_argument("--bucket-cap-mb-list", default=None, metavar="X,Y,...",
                   help="DDP bucket_cap_mb_list in MiB (torch >= 2.13), e.g. 1,4,25; --bucket-cap-mb is ignored with it")
    add_ddp_option_arguments(p)
    p.add_argument("--timing-hook", action="store_true",
                   help="record per-bucket all-reduce launch/end with a comm hook (changes DDP's division path)")
    p.add_argument("--trace", default=None, help="trace JSON of this model: predict DDP's buckets and compare")
    p.add_argument("--plan", default=None, help="plan JSON (ddpsim plan --format json) to compare instead")
    p.add_argument("--out", required=True, help="measurement JSON to write (rank 0, atomically)")


#: the run modes an options document holds beside DDPOptions' fields (no DDP constructor options):
#: buckets dealt to N process groups in turn (a comm hook), and each rank's batch count under Join
RUN_MODES = ("process_groups", "join_batches")


def add_ddp_option_arguments(p: argparse.ArgumentParser) -> None:
    """DDP's options other than the cap and the run modes as one document (:func:`ddp_options`
    and :func:`run_modes` read it), shared with ``executor round``."""
    p.add_argument("--options", default=None, metavar="JSON|FILE",
                   help="DDP's options other than the cap: one JSON object of ddpsim's DDPOptions fields by torch's "
                        "names, inline or a file, e.g. '{\"find_unused_parameters\": true, \"mixed_precision\": "
                        "{\"param_dtype\": \"bfloat16\"}}', and the run modes: \"process_groups\": N deals the "
                        "buckets' all-reduces to N process groups in turn (a comm hook), \"join_batches\": [B0, B1, "
                        "...] trains each rank's batch count under Join([ddp, recorder]) after the warmup (the measured "
                        "iterations are the longest rank's); default: DDP's defaults, one group, even inputs")


def _document(args: argparse.Namespace) -> dict[str, Any]:
    """``--options``' JSON object (empty without one)."""
    from ddpsim.plan.planner import options_document

    text = getattr(args, "options", None)
    return {} if text is None else options_document(text, "--options")


def run_modes(args: argparse.Namespace) -> dict[str, Any]:
    """The run modes (:data:`RUN_MODES`) ``--options`` gives, by name."""
    doc = _document(args)
    return {k: doc[k] for k in RUN_MODES if k in doc}


def _is_count(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1


def check_join_batches(counts: Any, world_size: int) -> list[int] | None:
    """The options document's ``join_batches``: None, or one count >= 1 per rank."""
    if counts is None:
        return None
    if not isinstance(counts, list) or len(counts) != world_size or not all(_is_count(c) for c in counts):
        raise InputError(f"--options: join_batches {counts!r} is not accepted; expected a list of {world_size} batch "
                         "counts (one per rank), each an integer >= 1")
    return counts


def check_groups(n: Any) -> int:
    """The options document's ``process_groups``: an integer >= 1."""
    if not _is_count(n):
        raise InputError(f"--options: process_groups {n!r} is not accepted; expected an integer >= 1")
    return n


def ddp_options(args: argparse.Namespace) -> Any:
    """``args.options`` (:func:`add_ddp_option_arguments`) as :class:`ddpsim.plan.planner.DDPOptions`,
    checked by its constructor (the run modes aside); absent: DDP's defaults. The cap is ``--bucket-cap-mb`` /
    ``--bucket-cap-mb-list`` (a round measures several), never the document's.

    Raises:
        InputError: text that is neither a JSON object nor a readable file of one, an unknown
            field, a cap field, or a bad value (one line naming the field).
    """
    from ddpsim.plan.planner import DDPOptions
    from ddpsim.schema import validate

    doc = {k: v for k, v in _document(args).items() if k not in RUN_MODES}
    for key in ("bucket_cap_mb", "bucket_cap_mb_list"):
        if doc.get(key) is not None:
            raise InputError(f"--options: {key} is not accepted in the document; expected it as --{key.replace('_', '-')}")
    return validate(DDPOptions, doc, "--options")


def torch213_options(args: argparse.Namespace) -> dict[str, Any]:
    """The torch 2.13 options of ``args``' :func:`ddp_options` as
    :class:`ddpsim.plan.planner.DDPOptions` keyword arguments; one at its default stays so."""
    o = ddp_options(args)
    return {k: getattr(o, k) for k in ("batched_grad_copy", "skip_all_reduce_unused_params", "forward_sync_buffers",
                                       "mixed_precision", "delay_all_reduce_named_params", "param_to_hook_all_reduce")}


def check_ddp_options(rt: Runtime, args: argparse.Namespace) -> dict[str, Any]:
    """:func:`torch213_options` of ``args``, refusing what this device cannot run.

    Raises:
        InputError: a bad value; ``--mixed-precision`` on a CPU device (torch 2.13's
            mixed-precision forward waits on device events: "cpu backend doesn't support events").
    """
    out = torch213_options(args)
    if out["mixed_precision"] is not None and not rt.is_cuda:
        raise InputError(f"--options: mixed_precision {out['mixed_precision'].label()} is not accepted on a {rt.device.type} device "
                         f"({rt.backend}): torch's mixed-precision forward records device events, which the CPU backend "
                         "lacks (\"cpu backend doesn't support events\"); expected it only with CUDA devices")
    return out


def parse_cap(value: str | None) -> float | None:
    """``--bucket-cap-mb`` -> MiB; None (PyTorch's default) when omitted, empty or none/null/default."""
    from ddpsim.units import parse_cap_value

    if value is None or not str(value).strip():
        return None
    return parse_cap_value(value, "--bucket-cap-mb", "a number of MiB > 0 or 'none'")


def parse_index_groups(text: str) -> list[list[int]]:
    """``'5 4 3 2, 1 0'`` -> ``[[5, 4, 3, 2], [1, 0]]`` (DDP logging's format)."""
    return [[int(x) for x in g.split()] for g in str(text).split(",") if g.strip()]


def parse_ints(text: str) -> list[int]:
    return [int(x) for x in str(text).replace(",", " ").split()]


def predicted_plan(args: argparse.Namespace, cap: float | None, param_names: list[str]) -> dict[str, Any] | None:
    """The plan ddpsim predicts: ``{"buckets": [[idx...]...], "sizes": [...], "source": ...}``."""
    if args.plan is None and args.trace is None:
        return None
    from ddpsim.trace.records import load_trace

    if args.plan is not None:
        p = Path(args.plan)
        if not p.is_file():
            raise InputError(f"--plan: {args.plan!r} does not exist; expected a plan JSON")
        data = json.loads(p.read_text())
        buckets = [b["param_indices"] if isinstance(b, dict) else b for b in data["buckets"]]
        sizes = [b.get("size_bytes") if isinstance(b, dict) else None for b in data["buckets"]]
        return {"buckets": buckets, "sizes": sizes, "source": f"plan {args.plan}"}
    return plan_from_trace(load_trace(args.trace), f"trace {args.trace}", cap, param_names, args)


def plan_from_trace(trace: Any, label: str, cap: float | None, param_names: list[str],
                    args: argparse.Namespace) -> dict[str, Any]:
    """DDP's steady buckets as ddpsim plans them from ``trace`` (``label`` names it) at ``cap``
    with ``args``' DDP options; the trace must describe the model whose DDP order is ``param_names``."""
    from ddpsim.plan.planner import plan_ddp

    names = [p.name for p in trace.params]
    if names != param_names:
        diff = next((i for i, (a, b) in enumerate(zip(names, param_names)) if a != b), min(len(names), len(param_names)))
        raise InputError(f"--trace: {label!r} does not describe this model (parameter {diff}: "
                         f"{names[diff] if diff < len(names) else None!r} vs {param_names[diff] if diff < len(param_names) else None!r}); "
                         f"expected a trace of --model {args.model}")
    opts = replace(ddp_options(args), bucket_cap_mb=None if isinstance(cap, tuple) else cap,
                   bucket_cap_mb_list=cap if isinstance(cap, tuple) else None)
    plan = plan_ddp(trace, opts)
    return {"buckets": [list(b.param_indices) for b in plan.steady], "sizes": [b.size_bytes for b in plan.steady],
            "source": f"plan_ddp({label}, {opts.label()})"}


class BucketTimer:
    """A comm hook recording each bucket's all-reduce launch and end (seconds from iteration start)."""

    def __init__(self, rt: Runtime, round_robin: Any = None) -> None:
        self.rt = rt
        #: an executor.ddp_modes.RoundRobin whose groups the all-reduces are dealt to, or None
        self.round_robin = round_robin
        self.iteration = 0
        self.t0: Any = None
        self.records: list[dict[str, Any]] = []
        self.clock = Stopwatch(rt)

    def start_iteration(self, iteration: int) -> None:
        self.iteration = iteration
        self.t0 = self.clock.start()

    def hook(self, state: Any, bucket: Any):
        import torch.distributed as dist

        buf = bucket.buffer()
        rec = {"iteration": self.iteration, "bucket": bucket.index(), "size_bytes": buf.numel() * buf.element_size(),
               "_t0": self.t0, "_launch": self.clock.start()}
        buf.div_(self.rt.world_size)
        group = self.round_robin.next() if self.round_robin is not None else None
        fut = dist.all_reduce(buf, group=group, async_op=True).get_future()

        def done(f: Any):
            rec["_end"] = self.clock.start()
            self.records.append(rec)
            return f.value()[0]

        return fut.then(done)

    def as_hook(self):
        """A plain function with real (not string) annotations, which DDP's hook check wants."""
        import torch
        import torch.distributed as dist

        def timing_hook(state, bucket):
            return self.hook(state, bucket)

        timing_hook.__annotations__ = {"state": object, "bucket": dist.GradBucket,
                                       "return": torch.futures.Future[torch.Tensor]}
        return timing_hook

    def resolve(self) -> list[dict[str, Any]]:
        """Turn marks into seconds from the iteration's start (synchronises on GPUs)."""
        self.rt.sync()
        out = []
        for r in self.records:
            out.append({"iteration": r["iteration"], "bucket": r["bucket"], "size_bytes": r["size_bytes"],
                        "launch_s": self.clock.between(r["_t0"], r["_launch"]),
                        "end_s": self.clock.between(r["_t0"], r["_end"])})
        return sorted(out, key=lambda r: (r["iteration"], r["bucket"]))


def ddp_kwargs(rt: Runtime, args: argparse.Namespace, cap: float | None, module: Any) -> dict[str, Any]:
    """The ``DistributedDataParallel`` keyword arguments of ``args``' options at ``cap`` for
    ``module``. torch 2.13's options are passed only when not at their default (a default run
    builds DDP as a torch without them does); ``delay_all_reduce_named_params`` as torch takes
    it, ``(name, parameter)`` pairs of ``module``, and ``param_to_hook_all_reduce`` as the parameter.

    Raises:
        InputError: a delayed or hook parameter name that ``module`` does not have.
    """
    import torch

    o = ddp_options(args)
    kwargs: dict[str, Any] = dict(find_unused_parameters=o.find_unused_parameters, static_graph=o.static_graph,
                                  gradient_as_bucket_view=o.gradient_as_bucket_view)
    if not o.broadcast_buffers:
        kwargs["broadcast_buffers"] = False
    if isinstance(cap, tuple):
        kwargs["bucket_cap_mb_list"] = list(cap)
    elif cap is not None:
        kwargs["bucket_cap_mb"] = cap
    new = torch213_options(args)
    for key in ("batched_grad_copy", "skip_all_reduce_unused_params"):
        if new[key]:
            kwargs[key] = True
    if new["forward_sync_buffers"] is not None:
        kwargs["forward_sync_buffers"] = new["forward_sync_buffers"]
    mp = new["mixed_precision"]
    if mp is not None:
        from torch.nn.parallel.distributed import _MixedPrecision

        kwargs["mixed_precision"] = _MixedPrecision(
            **{k: None if v is None else getattr(torch, v) for k, v in
               (("param_dtype", mp.param_dtype), ("reduce_dtype", mp.reduce_dtype), ("buffer_dtype", mp.buffer_dtype))})
    if new.get("delay_all_reduce_named_params") is not None:
        named = dict(module.named_parameters())
        flags = {"--options: delay_all_reduce_named_params": new["delay_all_reduce_named_params"],
                 "--options: param_to_hook_all_reduce": (new["param_to_hook_all_reduce"],)}
        for flag, names in flags.items():
            bad = [n for n in names if n not in named]
            if bad:
                raise InputError(f"{flag}: {bad[0]!r} is not a parameter of this model; expected one of its parameter "
                                 f"names (e.g. {', '.join(repr(n) for n in list(named)[:3])})")
        kwargs["delay_all_reduce_named_params"] = [(n, named[n]) for n in new["delay_all_reduce_named_params"]]
        kwargs["param_to_hook_all_reduce"] = named[new["param_to_hook_all_reduce"]]
    if rt.is_cuda:
        kwargs["device_ids"] = [rt.device.index]
    return kwargs


def options_record(args: argparse.Namespace, cap: float | tuple[float, ...] | None) -> dict[str, Any]:
    """A measurement's ``options``: the DDP options it ran with, by torch's names, as JSON
    (torch 2.13's only when not at their default; delayed parameters by name)."""
    o = ddp_options(args)
    new = torch213_options(args)
    out: dict[str, Any] = {"bucket_cap_mb": None if isinstance(cap, tuple) else cap,
                           "broadcast_buffers": o.broadcast_buffers,
                           "find_unused_parameters": o.find_unused_parameters, "static_graph": o.static_graph,
                           "gradient_as_bucket_view": o.gradient_as_bucket_view}
    if isinstance(cap, tuple):
        out["bucket_cap_mb_list"] = list(cap)
    for key in ("batched_grad_copy", "skip_all_reduce_unused_params"):
        if new[key]:
            out[key] = True
    if new["forward_sync_buffers"] is not None:
        out["forward_sync_buffers"] = new["forward_sync_buffers"]
    if new["mixed_precision"] is not None:
        out["mixed_precision"] = new["mixed_precision"].label()
    if new.get("delay_all_reduce_named_params") is not None:
        out["delay_all_reduce_named_params"] = list(new["delay_all_reduce_named_params"])
        out["param_to_hook_all_reduce"] = new["param_to_hook_all_reduce"]
    return {**out, **run_modes(args)}


def in_force(model: Any) -> dict[str, Any]:
    """The options as the real DDP object holds them after construction (torch 2.13 attributes;
    None where this torch lacks one): what ran, not what was asked."""
    delayed = getattr(model, "_delay_all_reduce_params", None)
    return {"batched_grad_copy": getattr(model, "batched_grad_copy", None),
            "skip_all_reduce_unused_params": getattr(model, "skip_all_reduce_unused_params", None),
            "forward_sync_buffers": getattr(model, "forward_sync_buffers", None),
            "delayed_params": None if delayed is None else len(delayed),
            "mixed_precision": None if getattr(model, "mixed_precision", None) is None else str(model.mixed_precision)}


def measure_point(rt: Runtime, args: argparse.Namespace, wl: Any, cap: float | None,
                  predicted: dict[str, Any] | None, *, label: str = "ddp") -> dict[str, Any] | None:
    """Wrap ``wl.module`` in a fresh real DDP at ``cap`` (``args``' options), train
    ``args.warmup + args.iterations`` steps with a fresh SGD, and return the measurement record
    on rank 0 (None on the others). The DDP wrapper and its Reducer are freed before returning
    (the Reducer's destructor removes its autograd hooks), so the same module can be wrapped
    again: ``executor round`` measures every point of a round in one launch that way."""
    import gc

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from executor.ddp_modes import RoundRobin, join_steps

    check_ddp_options(rt, args)
    modes = run_modes(args)
    groups = check_groups(modes.get("process_groups", 1))
    batches = check_join_batches(modes.get("join_batches"), rt.world_size)
    kwargs = ddp_kwargs(rt, args, cap, wl.module)
    model = DDP(wl.module, **kwargs)
    forced = in_force(model)
    rr = RoundRobin(rt.backend, groups) if groups > 1 else None
    timer = BucketTimer(rt, rr) if args.timing_hook else None
    if timer is not None:
        model.register_comm_hook(None, timer.as_hook())
    elif rr is not None:
        model.register_comm_hook(None, rr.hook(rt.world_size))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    samples = timed_steps(rt, model, opt, wl, warmup=args.warmup, iterations=0 if batches else args.iterations,
                          label=label, before=timer.start_iteration if timer is not None else None)
    join_epoch_s = None
    if batches:
        samples, join_epoch_s = join_steps(rt, model, opt, wl, batches, label=label)
    logging = {k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
               for k, v in model._get_ddp_logging_data().items()}
    construction = construction_buckets(model)
    buckets_rec = timer.resolve() if timer is not None else []
    opt.zero_grad(set_to_none=True)
    del model, opt
    gc.collect()
    gathered: list[Any] = [None] * rt.world_size
    dist.all_gather_object(gathered, {"rank": rt.rank, "iterations": samples, "buckets": buckets_rec,
                                      **({"join_epoch_s": join_epoch_s} if batches else {})})
    rt.watchdog.beat()
    real = {"buckets": parse_index_groups(logging.get("rebuilt_per_bucket_param_indices", "")),
            "sizes": parse_ints(logging.get("rebuilt_bucket_sizes", "")),
            "grad_ready_order": parse_ints(logging.get("prev_iteration_grad_ready_order_indices", "")),
            "layout": "rebuilt"}
    if not real["sizes"]:  # never rebuilt: DDP runs its construction layout in every iteration
        real.update(buckets=construction, sizes=parse_ints(logging.get("bucket_sizes", "")), layout="construction")
    real.update(buckets=to_model_indices(real["buckets"], wl.module, args),
                grad_ready_order=to_model_indices([real["grad_ready_order"]], wl.module, args)[0])
    matches = None
    if predicted is not None:
        matches = (real["buckets"] is not None and predicted["buckets"] == real["buckets"]) and (
            all(s is None for s in predicted["sizes"]) or predicted["sizes"] == real["sizes"])
    if rt.rank != 0:
        return None
    summary = summarize([g["iterations"] for g in gathered])
    rec = measurement(
        "ddp", rt, model=wl.name, model_info=wl.info, batch_size=args.batch_size, num_threads=torch.get_num_threads(),
        options=options_record(args, cap), ddp_in_force=forced,
        timing_hook=bool(args.timing_hook), warmup=args.warmup, num_iterations=len(summary["step_times_s"]),
        summary=summary, ranks=gathered, ddp_logging=logging, real_buckets=real,
        predicted_buckets=predicted, plan_matches=matches)
    from ddpsim.plan.planner import cap_point_id

    rt.log(f"{label}: {wl.name} batch {args.batch_size} {cap_point_id(*split_cap(cap))}"
           f"{' (timing hook)' if timer else ''}: iteration median {summary['iteration_s'] * 1e3:.2f} ms "
           f"p10 {summary['iteration_p10_s'] * 1e3:.2f} p90 {summary['iteration_p90_s'] * 1e3:.2f} "
           f"over {len(summary['step_times_s'])} iterations; {len(real['sizes'])} {real['layout']} buckets {real['sizes']}")
    if matches is not None:
        rt.log(f"{label}: plan_matches: {str(matches).lower()} (real DDP {real['layout']} buckets vs {predicted['source']})")
    return rec


def to_model_indices(groups: list[list[int]] | None, module: Any, args: argparse.Namespace) -> list[list[int]] | None:
    """Reducer parameter indices (DDP's logging, its construction layout) as indices into all of
    ``module``'s DDP parameters (the trace's, the plan's): DDP leaves ``delay_all_reduce_named_params``
    out of its reducer's list, which shifts every later index; without them, ``groups`` as they are."""
    delayed = set(torch213_options(args).get("delay_all_reduce_named_params") or ())
    if groups is None or not delayed:
        return groups
    from ddpsim.trace.models import ddp_params

    reducer = [i for i, (n, _, _) in enumerate(ddp_params(module)) if n not in delayed]
    return [[reducer[k] for k in g] for g in groups]


def split_cap(cap: float | tuple[float, ...] | None) -> tuple[float | None, tuple[float, ...] | None]:
    """A point's cap as ``(bucket_cap_mb, bucket_cap_mb_list)``."""
    return (None, cap) if isinstance(cap, tuple) else (cap, None)


def construction_buckets(model: Any) -> list[list[int]] | None:
    """The construction layout of a real DDP ``model``, in reducer order: torch's own
    ``_compute_bucket_assignment_by_size`` over DDP's own parameter list and construction limits
    (torch 2.13's ``_build_params_for_reducer`` and ``_bucket_config``), reversed as
    ``_ddp_init_helper`` does. None on a torch without them."""
    import torch.distributed as dist

    try:
        params, sparse = model._build_params_for_reducer()
        limits = model._bucket_config.compute_bucket_size_limits(
            static_graph=model.static_graph, find_unused_parameters=model.find_unused_parameters)[0]
    except AttributeError:
        return None
    groups, _ = dist._compute_bucket_assignment_by_size(params, limits, sparse)
    return [list(g) for g in reversed(groups)]


def run(rt: Runtime, args: argparse.Namespace) -> int:
    from ddpsim.units import parse_cap_list

    check_counts(args)
    check_ddp_options(rt, args)
    cap = parse_cap(args.bucket_cap_mb)
    cap_list = parse_cap_list(args.bucket_cap_mb_list, "--bucket-cap-mb-list")
    if cap_list is not None:
        if cap is not None:
            rt.log(f"ddp: --bucket-cap-mb {cap:g} is ignored: --bucket-cap-mb-list is given (as torch does)")
        cap = cap_list
    wl = build_workload(args, rt.device)
    from ddpsim.trace.models import ddp_params

    param_names = [n for n, _, _ in ddp_params(wl.module)]
    predicted = predicted_plan(args, cap, param_names)
    rec = measure_point(rt, args, wl, cap, predicted)
    if rec is not None:
        write_json(args.out, rec)
        rt.log(f"ddp: wrote {args.out}")
    return 0
