"""The scenario validator: one function per section of a scenario mapping.

Each ``parse_*`` checks its keys and types and returns the section's values as the
dataclasses of :mod:`ddpsim.pipeline.specs`; a bad value raises
:class:`~ddpsim.errors.InputError` naming the source, the key path, the value and what is
accepted (``scenarios/x.yaml: ddp.bucket_cap_mb: 'abc' is not accepted; expected a number > 0
or null``). :func:`ddpsim.pipeline.scenario.scenario_from_dict` calls them in order.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ddpsim.engine.config import COMM_HOOKS
from ddpsim.errors import InputError
from ddpsim.network.interference import Interference
from ddpsim.plan.planner import DDPOptions, cap_point_id, check_cap_list
from ddpsim.pipeline.specs import ClusterSpec, ModelSpec, SimulationSpec, SweepSpec, ValidationSpec
from ddpsim.trace.records import COMPUTE_STATISTICS

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

#: the top-level keys of a scenario
TOP_KEYS = ("name", "description", "trace", "model", "cluster", "world_size", "ddp", "comm_hook", "powersgd",
            "simulation", "calibration", "sweep", "timelines", "validation", "cost_model", "plan")


class Ctx:
    """The source of the mapping being checked and the checks of single values."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, value: Any, accepted: str) -> InputError:
        return InputError(f"{self.source}: {key}: {value!r} is not accepted; expected {accepted}")

    def obj(self, d: Any, key: str, allowed: tuple[str, ...]) -> dict:
        if d is None:
            return {}
        if not isinstance(d, dict):
            raise self.fail(key, d, "a mapping")
        for k in d:
            if k not in allowed:
                where = f"{key}.{k}" if key else str(k)
                raise InputError(f"{self.source}: {where}: unknown key; expected one of {', '.join(allowed)}")
        return d

    def int_(self, v: Any, key: str, minimum: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self.fail(key, v, f"an integer >= {minimum}")
        return v

    def bool_(self, v: Any, key: str) -> bool:
        if not isinstance(v, bool):
            raise self.fail(key, v, "true or false")
        return v

    def str_(self, v: Any, key: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.fail(key, v, "a non-empty string")
        return v

    def cap(self, v: Any, key: str) -> float | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise self.fail(key, v, "a number > 0 or null")
        return float(v) if not float(v).is_integer() else int(v)

    def cap_list(self, v: Any, key: str) -> tuple[float, ...] | None:
        return check_cap_list(v, f"{self.source}: {key}")

    def hook(self, v: Any, key: str) -> str:
        if v not in COMM_HOOKS:
            raise self.fail(key, v, f"one of {', '.join(COMM_HOOKS)}")
        return v

    def list_(self, v: Any, key: str) -> list:
        if not isinstance(v, list) or not v:
            raise self.fail(key, v, "a non-empty list")
        return v


#: ``ddp.<key>`` of torch 2.13's DDP options (see :class:`ddpsim.plan.planner.DDPOptions`)
DDP_TORCH213_KEYS = ("batched_grad_copy", "skip_all_reduce_unused_params", "forward_sync_buffers", "mixed_precision",
                     "delay_all_reduce_named_params", "param_to_hook_all_reduce")


def _ddp_torch213_options(ctx: "Ctx", dd: dict) -> dict[str, Any]:
    """The torch 2.13 keys of the ``ddp`` block as DDPOptions keyword arguments, validated."""
    from ddpsim.plan.planner import MIXED_PRECISION_DTYPES, MixedPrecision

    out: dict[str, Any] = {}
    for key in ("batched_grad_copy", "skip_all_reduce_unused_params"):
        if key in dd:
            out[key] = ctx.bool_(dd[key], f"ddp.{key}")
    if dd.get("forward_sync_buffers") is not None:
        out["forward_sync_buffers"] = ctx.bool_(dd["forward_sync_buffers"], "ddp.forward_sync_buffers")
    if dd.get("mixed_precision") is not None:
        md = ctx.obj(dd["mixed_precision"], "ddp.mixed_precision", ("param_dtype", "reduce_dtype", "buffer_dtype"))
        for k, v in md.items():
            if v is not None and v not in MIXED_PRECISION_DTYPES:
                raise ctx.fail(f"ddp.mixed_precision.{k}", v, f"one of {', '.join(MIXED_PRECISION_DTYPES)} or null")
        out["mixed_precision"] = MixedPrecision(**md)
    names, hook = dd.get("delay_all_reduce_named_params"), dd.get("param_to_hook_all_reduce")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ctx.fail("ddp.delay_all_reduce_named_params", names, "a list of parameter names")
        out["delay_all_reduce_named_params"] = tuple(names)
    if hook is not None:
        out["param_to_hook_all_reduce"] = ctx.str_(hook, "ddp.param_to_hook_all_reduce")
    if (names is None) != (hook is None):
        raise ctx.fail("ddp.param_to_hook_all_reduce", hook, "a parameter name together with ddp.delay_all_reduce_named_params "
                       "(both or neither)")
    return out


def _resolve_path(text: str, base: Path | None) -> Path:
    p = Path(text)
    if p.is_absolute() or base is None:
        return p
    for cand in (Path.cwd() / p, base / p, base.parent / p):
        if cand.exists():
            return cand
    return p


def _cap_range(ctx: Ctx, d: dict) -> list[float]:
    d = ctx.obj(d, "sweep.bucket_cap_mb", ("min", "max", "points", "scale", "include_default"))
    for k in ("min", "max", "points"):
        if k not in d:
            raise InputError(f"{ctx.source}: sweep.bucket_cap_mb.{k}: missing; expected a number")
    lo = ctx.cap(d["min"], "sweep.bucket_cap_mb.min")
    hi = ctx.cap(d["max"], "sweep.bucket_cap_mb.max")
    n = ctx.int_(d["points"], "sweep.bucket_cap_mb.points", 1)
    if lo is None or hi is None or hi < lo:
        raise ctx.fail("sweep.bucket_cap_mb.max", d["max"], f"a number >= min ({d['min']!r})")
    scale = d.get("scale", "log")
    if scale not in ("log", "linear"):
        raise ctx.fail("sweep.bucket_cap_mb.scale", scale, "'log' or 'linear'")
    vals = []
    for i in range(n):
        f = i / (n - 1) if n > 1 else 0.0
        v = lo * (hi / lo) ** f if scale == "log" else lo + (hi - lo) * f
        v = float(f"{v:.3g}")  # 3 significant digits: readable point ids
        v = int(v) if v.is_integer() else v
        if v not in vals:
            vals.append(v)
    return vals


# ---- one function per section -------------------------------------------------------------

def parse_name(ctx: Ctx, data: dict, path: Path | None) -> tuple[str, str]:
    """``name`` (default: the file's stem) and ``description``."""
    name = data.get("name", path.stem if path is not None else "scenario")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ctx.fail("name", name, "a folder name of letters, digits, '.', '_' or '-'")
    desc = data.get("description", "") or ""
    if not isinstance(desc, str):
        raise ctx.fail("description", desc, "a string")
    return name, desc.strip()


def parse_source(ctx: Ctx, data: dict, base: Path | None) -> tuple[Path | None, ModelSpec | None]:
    """Exactly one of ``trace`` (a trace JSON path) and ``model`` (a bundled model to capture)."""
    if ("trace" in data) == ("model" in data):
        raise InputError(f"{ctx.source}: trace/model: {'both are' if 'trace' in data else 'neither is'} given; expected exactly "
                         "one of 'trace' (a trace JSON path) or 'model' (a bundled model to capture)")
    if "trace" in data:
        t = ctx.str_(data["trace"], "trace")
        trace_path = _resolve_path(t, base)
        if not trace_path.is_file():
            raise InputError(f"{ctx.source}: trace: {t!r} does not exist or is not a file; expected a trace JSON (e.g. traces/mlp.cpu.json)")
        return trace_path, None
    md = data["model"]
    if isinstance(md, str):
        md = {"name": md}
    md = ctx.obj(md, "model", ("name", "batch_size", "device", "iters", "warmup", "num_threads", "options"))
    if "name" not in md:
        raise InputError(f"{ctx.source}: model.name: missing; expected a bundled model name")
    nt = md.get("num_threads", 1)
    return None, ModelSpec(
        name=ctx.str_(md["name"], "model.name"),
        batch_size=ctx.int_(md.get("batch_size", 8), "model.batch_size", 1),
        device=ctx.str_(md.get("device", "cpu"), "model.device"),
        iters=ctx.int_(md.get("iters", 5), "model.iters", 1),
        warmup=ctx.int_(md.get("warmup", 2), "model.warmup", 0),
        num_threads=None if nt is None else ctx.int_(nt, "model.num_threads", 1),
        options=ctx.obj(md.get("options", {}), "model.options", tuple(md.get("options", {}) or ())))


def parse_cluster(ctx: Ctx, data: dict, base: Path | None) -> ClusterSpec:
    """``cluster``: a topology (preset or YAML path) with ``nodes`` and ``options``, or a
    latency + bandwidth model (``latency_us``, ``bandwidth_gbps``)."""
    cd = data.get("cluster")
    if cd is None:
        raise InputError(f"{ctx.source}: cluster: missing; expected {{topology: <preset or YAML path>, nodes: 1}}")
    if isinstance(cd, str):
        cd = {"topology": cd}
    cd = ctx.obj(cd, "cluster", ("topology", "nodes", "options", "latency_us", "bandwidth_gbps"))
    nodes = ctx.int_(cd.get("nodes", 1), "cluster.nodes", 1)
    if "topology" not in cd and ("latency_us" in cd or "bandwidth_gbps" in cd):
        lat, bw = cd.get("latency_us"), cd.get("bandwidth_gbps")
        if not _number(lat) or lat < 0:
            raise ctx.fail("cluster.latency_us", lat, "a number of microseconds >= 0 (with cluster.bandwidth_gbps)")
        if not _number(bw) or bw <= 0:
            raise ctx.fail("cluster.bandwidth_gbps", bw, "a number of GB/s > 0 (with cluster.latency_us)")
        return ClusterSpec(nodes=nodes, latency_us=float(lat), bandwidth_gbps=float(bw))
    if "topology" not in cd:
        raise InputError(f"{ctx.source}: cluster.topology: missing; expected a preset name (dgx-a100, dgx-h100, pcie, cpu-gloo) "
                         "or a topology YAML path (or cluster.latency_us and cluster.bandwidth_gbps)")
    for k in ("latency_us", "bandwidth_gbps"):
        if k in cd:
            raise ctx.fail(f"cluster.{k}", cd[k], "no value with cluster.topology (a topology, or a latency + bandwidth model)")
    topo = ctx.str_(cd["topology"], "cluster.topology")
    if topo.endswith((".yaml", ".yml")):
        tp = _resolve_path(topo, base)
        if not tp.is_file():
            raise InputError(f"{ctx.source}: cluster.topology: {topo!r} does not exist; expected a preset name or a topology YAML path")
        topo = str(tp)
    opts = cd.get("options", {}) or {}
    if not isinstance(opts, dict):
        raise ctx.fail("cluster.options", opts, "a mapping")
    return ClusterSpec(topology=topo, nodes=nodes, options=opts)


def parse_world_size(ctx: Ctx, data: dict, cluster: ClusterSpec) -> int | None:
    """``world_size``: ranks, or null/'all' for every device of the cluster (a topology's)."""
    ws = data.get("world_size", 2)
    if ws in (None, "all") and cluster.topology is None:
        raise ctx.fail("world_size", ws, "an integer >= 1 with cluster.latency_us/bandwidth_gbps (no devices to count)")
    return None if ws in (None, "all") else ctx.int_(ws, "world_size", 1)


def parse_ddp(ctx: Ctx, data: dict) -> tuple[DDPOptions, bool]:
    """The ``ddp`` block: DDPOptions and ``sync_batchnorm``."""
    dd = ctx.obj(data.get("ddp"), "ddp", ("bucket_cap_mb", "bucket_cap_mb_list", "find_unused_parameters", "static_graph",
                                          "gradient_as_bucket_view", "broadcast_buffers", "sync_batchnorm")
                 + DDP_TORCH213_KEYS)
    sync_batchnorm = ctx.bool_(dd.get("sync_batchnorm", False), "ddp.sync_batchnorm")
    ddp = DDPOptions(
        bucket_cap_mb=ctx.cap(dd.get("bucket_cap_mb"), "ddp.bucket_cap_mb"),
        bucket_cap_mb_list=ctx.cap_list(dd.get("bucket_cap_mb_list"), "ddp.bucket_cap_mb_list"),
        find_unused_parameters=ctx.bool_(dd.get("find_unused_parameters", False), "ddp.find_unused_parameters"),
        static_graph=ctx.bool_(dd.get("static_graph", False), "ddp.static_graph"),
        gradient_as_bucket_view=ctx.bool_(dd.get("gradient_as_bucket_view", False), "ddp.gradient_as_bucket_view"),
        broadcast_buffers=ctx.bool_(dd.get("broadcast_buffers", True), "ddp.broadcast_buffers"),
        **_ddp_torch213_options(ctx, dd))
    return ddp, sync_batchnorm


def parse_hook(ctx: Ctx, data: dict) -> tuple[str, int, int]:
    """``comm_hook`` and ``powersgd: {rank, start_iter}``."""
    hook = ctx.hook(data.get("comm_hook", "none"), "comm_hook")
    pd_ = ctx.obj(data.get("powersgd"), "powersgd", ("rank", "start_iter"))
    return (hook, ctx.int_(pd_.get("rank", 1), "powersgd.rank", 1),
            ctx.int_(pd_.get("start_iter", 0), "powersgd.start_iter", 0))


def parse_simulation(ctx: Ctx, data: dict, world_size: int | None) -> SimulationSpec:
    """The ``simulation`` block."""
    sd = ctx.obj(data.get("simulation"), "simulation",
                 ("iterations", "warmup", "seed", "jitter", "stragglers", "no_sync_steps", "interference",
                  "compute_statistic", "copy_bandwidth_gbps"))
    iters = ctx.int_(sd.get("iterations", 6), "simulation.iterations", 1)
    warm = sd.get("warmup")
    if warm is not None:
        warm = ctx.int_(warm, "simulation.warmup", 0)
        if warm >= iters:
            raise ctx.fail("simulation.warmup", warm, f"fewer than simulation.iterations ({iters}) or null")
    jitter = sd.get("jitter", "trace")
    if not (jitter in ("trace", "none") or (_number(jitter) and jitter >= 0)):
        raise ctx.fail("simulation.jitter", jitter, "'trace', 'none' or a coefficient of variation >= 0")
    statistic = sd.get("compute_statistic", "median")
    if statistic not in COMPUTE_STATISTICS:
        raise ctx.fail("simulation.compute_statistic", statistic, " or ".join(COMPUTE_STATISTICS))
    copy_bw = sd.get("copy_bandwidth_gbps")
    if copy_bw is not None and not (_number(copy_bw) and copy_bw > 0):
        raise ctx.fail("simulation.copy_bandwidth_gbps", copy_bw, "a number of GB/s > 0 or null")
    return SimulationSpec(iterations=iters, warmup=warm, seed=ctx.int_(sd.get("seed", 0), "simulation.seed", 0),
                          jitter=jitter, stragglers=_stragglers(ctx, sd, world_size),
                          no_sync_steps=ctx.int_(sd.get("no_sync_steps", 0), "simulation.no_sync_steps", 0),
                          interference=_interference(ctx, sd), compute_statistic=statistic,
                          copy_bandwidth_gbps=None if copy_bw is None else float(copy_bw))


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _stragglers(ctx: Ctx, sd: dict, world_size: int | None) -> dict[int, float]:
    strag_in = sd.get("stragglers", {}) or {}
    if not isinstance(strag_in, dict):
        raise ctx.fail("simulation.stragglers", strag_in, "a mapping rank -> slowdown factor >= 1")
    out = {}
    for r, f in strag_in.items():
        rr = ctx.int_(int(r) if isinstance(r, str) and r.isdigit() else r, "simulation.stragglers", 0)
        if world_size is not None and rr >= world_size:
            raise ctx.fail("simulation.stragglers", r, f"a rank in [0, {world_size})")
        if not _number(f) or f < 1.0:
            raise ctx.fail(f"simulation.stragglers.{r}", f, "a slowdown factor >= 1.0")
        out[rr] = float(f)
    return out


def _interference(ctx: Ctx, sd: dict) -> Interference | None:
    if sd.get("interference") is None:
        return None
    idd = ctx.obj(sd["interference"], "simulation.interference", ("compute_slowdown", "comm_slowdown", "weighting"))
    try:
        return Interference(**idd)
    except InputError as exc:
        raise InputError(f"{ctx.source}: simulation.{exc}") from None


def parse_file(ctx: Ctx, data: dict, key: str, base: Path | None, expected: str) -> Path | None:
    """A file key (``calibration``, ``plan``): null, or a path that exists."""
    value = data.get(key)
    if value is None:
        return None
    p = _resolve_path(ctx.str_(value, key), base)
    if not p.is_file():
        raise InputError(f"{ctx.source}: {key}: {value!r} does not exist or is not a file; expected {expected}")
    return p


def parse_sweep(ctx: Ctx, data: dict, ddp: DDPOptions, world_size: int | None) -> SweepSpec:
    """The ``sweep`` block: the caps (the default one first), the cap lists, the other knobs."""
    swd = data.get("sweep")
    if swd is None:
        swd = {"bucket_cap_mb": [None]}
    swd = ctx.obj(swd, "sweep", ("bucket_cap_mb", "bucket_cap_mb_list", "find_unused_parameters", "gradient_as_bucket_view",
                                 "comm_hook", "nodes"))
    caps = _sweep_caps(ctx, swd, ddp)
    if "bucket_cap_mb_list" in swd:
        lists = [ctx.cap_list(v, f"sweep.bucket_cap_mb_list[{i}]")
                 for i, v in enumerate(ctx.list_(swd["bucket_cap_mb_list"], "sweep.bucket_cap_mb_list"))]
    else:
        lists = [ddp.bucket_cap_mb_list] if ddp.bucket_cap_mb_list else []

    def each(key: str, check) -> tuple | None:
        if key not in swd:
            return None
        return tuple(dict.fromkeys(check(v, f"sweep.{key}[{i}]") for i, v in enumerate(ctx.list_(swd[key], f"sweep.{key}"))))

    fup, gabv, hooks = each("find_unused_parameters", ctx.bool_), each("gradient_as_bucket_view", ctx.bool_), each("comm_hook", ctx.hook)
    nodes = each("nodes", lambda v, k: ctx.int_(v, k, 1))
    if nodes is not None and world_size is not None and len(nodes) > 1:
        raise ctx.fail("world_size", world_size, "null (every device of the cluster) when sweep.nodes lists several node counts")
    return SweepSpec(bucket_cap_mb=tuple(caps), bucket_cap_mb_list=tuple(dict.fromkeys(lists)), find_unused_parameters=fup,
                     gradient_as_bucket_view=gabv, comm_hook=hooks, nodes=nodes)


def _sweep_caps(ctx: Ctx, swd: dict, ddp: DDPOptions) -> list[float | None]:
    caps_in = swd.get("bucket_cap_mb", [ddp.bucket_cap_mb])
    if isinstance(caps_in, dict):
        caps = _cap_range(ctx, caps_in)
    else:
        if isinstance(caps_in, list) and not caps_in:
            raise ctx.fail("sweep.bucket_cap_mb", caps_in, "at least one point (a list of numbers > 0 or null, or {min, max, points})")
        caps = []
        for i, c in enumerate(caps_in if isinstance(caps_in, list) else [caps_in]):
            v = ctx.cap(c, f"sweep.bucket_cap_mb[{i}]")
            if v not in caps:
                caps.append(v)
    if None not in caps:
        caps.insert(0, None)
    return caps


def parse_timelines(ctx: Ctx, data: dict, sweep: SweepSpec) -> tuple[Any, ...]:
    """``timelines``: caps of the sweep, cap lists of the sweep (as point ids), 'best', point ids."""
    tl_in = data.get("timelines", [None])
    out = []
    for i, t in enumerate(tl_in if isinstance(tl_in, list) else [tl_in]):
        if isinstance(t, str):
            out.append(t)
        elif isinstance(t, list):
            v = ctx.cap_list(t, f"timelines[{i}]")
            if v not in sweep.bucket_cap_mb_list:
                raise ctx.fail(f"timelines[{i}]", t, "a bucket_cap_mb_list of the sweep, a bucket_cap_mb, 'best' or a point id")
            out.append(cap_point_id(None, v))
        else:
            v = ctx.cap(t, f"timelines[{i}]")
            if v not in sweep.bucket_cap_mb:
                caps = ", ".join("null" if c is None else f"{c:g}" for c in sweep.bucket_cap_mb)
                raise ctx.fail(f"timelines[{i}]", t, f"a bucket_cap_mb of the sweep ({caps}), 'best' or a point id")
            out.append(v)
    return tuple(out)


def parse_validation(ctx: Ctx, data: dict) -> ValidationSpec | None:
    """The ``validation`` block (what ``ddpsim validate`` runs for real), or None."""
    if data.get("validation") is None:
        return None
    vd = ctx.obj(data["validation"], "validation", ("model", "batch_size", "iterations", "warmup", "num_threads",
                                                    "device", "bucket_cap_mb", "options"))
    vcaps = None
    if "bucket_cap_mb" in vd:
        vcaps = tuple(ctx.cap_list(c, f"validation.bucket_cap_mb[{i}]") if isinstance(c, list)
                      else ctx.cap(c, f"validation.bucket_cap_mb[{i}]")
                      for i, c in enumerate(ctx.list_(vd["bucket_cap_mb"], "validation.bucket_cap_mb")))
    vopts = vd.get("options", {}) or {}
    if not isinstance(vopts, dict):
        raise ctx.fail("validation.options", vopts, "a mapping")

    def opt_int(key: str, minimum: int) -> int | None:
        return None if vd.get(key) is None else ctx.int_(vd[key], f"validation.{key}", minimum)

    return ValidationSpec(
        model=None if vd.get("model") is None else ctx.str_(vd["model"], "validation.model"),
        batch_size=opt_int("batch_size", 1),
        iterations=ctx.int_(vd.get("iterations", 20), "validation.iterations", 1),
        warmup=ctx.int_(vd.get("warmup", 5), "validation.warmup", 0),
        num_threads=opt_int("num_threads", 1),
        device=None if vd.get("device") is None else ctx.str_(vd["device"], "validation.device"),
        bucket_cap_mb=vcaps, options=vopts)
