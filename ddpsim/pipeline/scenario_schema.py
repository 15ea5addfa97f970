"""The scenario file's declared schema: one pydantic model per section of a scenario YAML.

:class:`ScenarioFile` is the whole document (``ddpsim.pipeline.scenario``'s docstring shows it
in YAML); :func:`ddpsim.schema.validate` turns a bad key into one line
(``<source>: <key.path>: <value> is not accepted; expected ...``). Each default is written
once, on its field (or taken from the runtime class it fills: ``DDPOptions``, ``CostModelSpec``,
``HostCosts``, ``Interference``, ``SimConfig``); each count and size has an upper bound, stated
in its description and its error line. The DDP keys carry PyTorch's names
(``DistributedDataParallel``'s arguments, ``register_comm_hook``, PowerSGD's ``PowerSGDState``).
Checks between sections (exactly one of trace / model, stragglers within ``world_size``,
timelines naming sweep points) are validators of :class:`ScenarioFile`; whether the files it
names exist is checked by :func:`ddpsim.pipeline.scenario.scenario_from_dict`.

``scenarios/schema.json`` is this model's JSON Schema, regenerated with
``python -m ddpsim.pipeline.scenario_schema > scenarios/schema.json`` (:func:`json_schema`;
the text goes to stdout). It describes the current spellings; the loader also reads the
deprecated ones listed in :data:`ddpsim.pipeline.scenario.RENAMED`.
"""

import json
import math
import re
from typing import Annotated, Any, Callable, Literal, Optional, Union

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from ddpsim.engine.config import COMM_HOOKS, SimConfig
from ddpsim.network import host_costs as hostcost
from ddpsim.network.contention import check_fraction
from ddpsim.network.cost_terms import KEYS as COST_MODEL_KEYS, CostModelSpec
from ddpsim.network.host_costs import HostCosts, check_seconds
from ddpsim.network.interference import WEIGHTINGS, Interference
from ddpsim.plan.planner import MIXED_PRECISION_DTYPES, DDPOptions, MixedPrecision, cap_point_id
from ddpsim.pipeline.specs import SweepSpec
from ddpsim.schema import Schema
from ddpsim.errors import InputError
from ddpsim.units import MAX_ITERATIONS, MAX_NODES, MAX_WORLD_SIZE
from ddpsim.trace.records import COMPUTE_STATISTICS

# ---- bounds (far above any real use; each one is named in its key's error line) ----------
MAX_BATCH_SIZE = 1 << 20
MAX_THREADS = 4096
MAX_SEED = 2**63 - 1
#: ``bucket_cap_mb`` and every entry of a ``bucket_cap_mb_list``, MiB
MAX_CAP_MB = 1_000_000
#: points of a ``{min, max, points}`` cap range
MAX_POINTS = 10_000
#: entries of any list (sweep values, cap lists, timelines, parameter names)
MAX_LIST = 10_000
MAX_SLOWDOWN = 1000.0
MAX_JITTER = 100.0
MAX_LATENCY_US = 1e9
MAX_GBPS = 1e9
MAX_POWERSGD_RANK = 65536
MAX_NAME_CHARS = 200
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


# ---- value types: a check with the accepted values in words, then pydantic's strict type ----

def _fail(loc: tuple[Any, ...], value: Any, expected: str) -> None:
    """Raise the validation error of ``value`` at ``loc`` (inside the model being validated)."""
    error = PydanticCustomError("value_error", "expected {expected}", {"expected": expected})
    raise ValidationError.from_exception_data("scenario", [{"type": error, "loc": loc, "input": value}])


def _rule(expected: str, ok: Callable[[Any], bool]) -> BeforeValidator:
    def check(v: Any) -> Any:
        if not ok(v):
            raise ValueError(f"expected {expected}")
        return v
    return BeforeValidator(check)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    """A finite int or float (an int too large for a float is not)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def Int(lo: int, hi: int, *, null: bool = False) -> Any:
    """An integer in [lo, hi] (or null)."""
    base = Annotated[int, Field(ge=lo, le=hi)]
    text = f"an integer >= {lo} and <= {hi}" + (" or null" if null else "")
    return Annotated[Optional[base] if null else base,
                     _rule(text, lambda v: (null and v is None) or (_is_int(v) and lo <= v <= hi))]


def Number(lo: float, hi: float, *, above: bool = False, unit: str = "", null: bool = False) -> Any:
    """A finite number in [lo, hi] (``above``: > lo), or null; read as a float."""
    base = Annotated[float, Field(gt=lo, le=hi) if above else Field(ge=lo, le=hi)]
    text = f"a number{unit} {'>' if above else '>='} {lo:g} and <= {hi:g}" + (" or null" if null else "")
    return Annotated[Optional[base] if null else base, _rule(
        text, lambda v: (null and v is None) or (_is_num(v) and (v > lo if above else v >= lo) and v <= hi))]


def _whole(v: Any) -> Any:
    """A number of MiB as written, an int when whole (``25.0`` -> 25: point ids say ``cap=25``)."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


_CAP_TEXT = f"a number > 0 (MiB, at most {MAX_CAP_MB})"
_CAP_SCHEMA = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_CAP_MB}


def _is_cap(v: Any) -> bool:
    return _is_num(v) and 0 < v <= MAX_CAP_MB


#: ``bucket_cap_mb``: MiB, kept an int when whole
Cap = Annotated[Union[int, float], _rule(_CAP_TEXT, _is_cap), AfterValidator(_whole), WithJsonSchema(_CAP_SCHEMA)]
#: ``bucket_cap_mb`` or null (DDP's default)
OptCap = Annotated[Optional[Union[int, float]], _rule(f"a number > 0 or null (MiB, at most {MAX_CAP_MB}; null: DDP's default)",
                                                 lambda v: v is None or _is_cap(v)),
                   AfterValidator(_whole), WithJsonSchema({"anyOf": [_CAP_SCHEMA, {"type": "null"}]})]
_CAP_LIST_TEXT = f"a non-empty list of numbers of MiB > 0 and <= {MAX_CAP_MB} (at most {MAX_LIST}; e.g. [1, 4, 8])"
#: ``bucket_cap_mb_list``: per-bucket limits, MiB


def _is_cap_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and 0 < len(v) <= MAX_LIST and all(_is_cap(x) for x in v)


CapList = Annotated[list[Cap], Field(min_length=1, max_length=MAX_LIST), _rule(_CAP_LIST_TEXT, _is_cap_list)]

Bool = Annotated[bool, _rule("true or false", lambda v: isinstance(v, bool))]
OptBool = Annotated[Optional[bool], _rule("true or false or null", lambda v: v is None or isinstance(v, bool))]
Text = Annotated[str, _rule("a non-empty string", lambda v: isinstance(v, str) and v != "")]
OptText = Annotated[Optional[str], _rule("a non-empty string or null",
                                         lambda v: v is None or (isinstance(v, str) and v != ""))]
Hook = Annotated[Literal[COMM_HOOKS], _rule(f"one of {', '.join(COMM_HOOKS)}", lambda v: v in COMM_HOOKS)]
Options = Annotated[dict[str, Any], BeforeValidator(lambda v: {} if v is None else v)]


def _project_check(check: Callable[[Any, str], None]) -> BeforeValidator:
    """A check of :mod:`ddpsim.network` (which raises InputError) as a field rule with its words."""
    def run(v: Any) -> Any:
        try:
            check(v, "value")
        except InputError as exc:
            raise ValueError("expected " + str(exc).partition("; expected ")[2]) from None
        return v
    return BeforeValidator(run)


def Listed(item: Any, what: str = "values") -> Any:
    """A non-empty list of at most :data:`MAX_LIST` ``item``."""
    return Annotated[list[item], Field(min_length=1, max_length=MAX_LIST), _rule(
        f"a non-empty list of at most {MAX_LIST} {what}", lambda v: isinstance(v, list) and 0 < len(v) <= MAX_LIST)]


def _mapping(model: type[Schema]) -> BeforeValidator:
    """A section: a mapping of ``model``'s keys; null gives every default."""
    keys = ", ".join(f.alias or k for k, f in model.model_fields.items())
    return _rule(f"a mapping of {keys}", lambda v: v is None or isinstance(v, dict))


def _section(model: type[Schema]) -> Any:
    """A section field of ``model`` (null: every default)."""
    return Annotated[model, _mapping(model), BeforeValidator(lambda v: {} if v is None else v)]


def _with_shorthand(alternative: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A field's JSON Schema that also takes the shorthand ``alternative`` (the loader reads it so)."""
    def extra(schema: dict[str, Any]) -> None:
        ref = schema.pop("$ref", None)
        if ref is not None:
            schema["anyOf"] = [{"$ref": ref}, alternative]
        else:
            schema["anyOf"] = [*schema.pop("anyOf", []), alternative]
    return extra


def default_of(model: type[Schema], key: str) -> Any:
    """The default of ``model``'s field ``key``."""
    return model.model_fields[key].get_default(call_default_factory=True)


# ---- the sections --------------------------------------------------------------------------

class ModelSpec(Schema):
    """``model``: capture a trace from a bundled model instead of reading a trace file."""

    name: Text = Field(description="a bundled model name (ddpsim trace --list-models)")
    batch_size: Int(1, MAX_BATCH_SIZE) = Field(8, description=f"samples per rank, 1 to {MAX_BATCH_SIZE}")
    device: Text = Field("cpu", description="the device the trace is captured on (cpu, cuda)")
    iterations: Int(1, MAX_ITERATIONS) = Field(5, description=f"timed iterations, 1 to {MAX_ITERATIONS}")
    warmup: Int(0, MAX_ITERATIONS) = Field(2, description=f"untimed iterations first, 0 to {MAX_ITERATIONS}")
    num_threads: Int(1, MAX_THREADS, null=True) = Field(
        1, description=f"torch CPU threads, 1 to {MAX_THREADS}; null: torch's default")
    options: Options = Field(default_factory=dict, description="keyword arguments of the model's builder")


class ClusterSpec(Schema):
    """``cluster``: a topology (preset name or YAML path) with ``nodes`` and its options, or,
    with ``topology`` null, a plain latency + bandwidth model of every collective
    (:class:`ddpsim.network.comm_model.AlphaBetaModel`; ``latency_us`` and ``bandwidth_gbps``)."""

    topology: OptText = Field(None, description="a preset (dgx-a100, dgx-h100, pcie, cpu-gloo) or a topology YAML "
                                                "path (relative to the cwd, the scenario's folder or its parent)")
    nodes: Int(1, MAX_NODES) = Field(1, description=f"nodes of the topology, 1 to {MAX_NODES}")
    options: Options = Field(default_factory=dict, description="keyword arguments of the topology preset")
    catalogue: OptText = Field(None, description="a hardware catalogue YAML adding GPUs and systems (presets) to the "
                                                 "bundled one (relative to the cwd, the scenario's folder or its parent)")
    latency_us: Number(0, MAX_LATENCY_US, unit=" of microseconds", null=True) = Field(
        None, description=f"without topology: every collective's latency, 0 to {MAX_LATENCY_US:g} us")
    bandwidth_gbps: Number(0, MAX_GBPS, above=True, unit=" of GB/s", null=True) = Field(
        None, description=f"without topology: every collective's bandwidth, > 0 and <= {MAX_GBPS:g} GB/s")

    @property
    def label(self) -> str:
        """The topology, or the latency + bandwidth model in words."""
        if self.topology is not None:
            return self.topology
        return f"{self.latency_us:g} us + bytes / {self.bandwidth_gbps:g} GB/s"

    @model_validator(mode="before")
    @classmethod
    def _one_model(cls, data: Any) -> Any:
        """A topology, or both latency_us and bandwidth_gbps (the values as written)."""
        if not isinstance(data, dict):
            return data
        given = {k: data[k] for k in ("latency_us", "bandwidth_gbps") if data.get(k) is not None}
        if data.get("topology") is not None:
            for key, value in given.items():
                _fail((key,), value, "no value with cluster.topology (a topology, or a latency + bandwidth model)")
        elif not given:
            _fail(("topology",), None, "a preset name (dgx-a100, dgx-h100, pcie, cpu-gloo) or a topology YAML path "
                                      "(or cluster.latency_us and cluster.bandwidth_gbps)")
        elif "latency_us" not in given:
            _fail(("latency_us",), None, "a number of microseconds >= 0 (with cluster.bandwidth_gbps)")
        elif "bandwidth_gbps" not in given:
            _fail(("bandwidth_gbps",), None, "a number of GB/s > 0 (with cluster.latency_us)")
        return data


class PowerSgd(Schema):
    """``ddp.powersgd``: PowerSGD's ``PowerSGDState`` arguments
    (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook)."""

    matrix_approximation_rank: Int(1, MAX_POWERSGD_RANK) = Field(
        SimConfig.powersgd_rank, description=f"the rank of the low-rank approximation, 1 to {MAX_POWERSGD_RANK}")
    start_powerSGD_iter: Int(0, MAX_ITERATIONS) = Field(
        SimConfig.powersgd_start_iter, description=f"iterations of plain all-reduce first, 0 to {MAX_ITERATIONS}")


_DTYPE_TEXT = f"one of {', '.join(MIXED_PRECISION_DTYPES)} or null"
Dtype = Annotated[Optional[Literal[MIXED_PRECISION_DTYPES]],
                  _rule(_DTYPE_TEXT, lambda v: v is None or v in MIXED_PRECISION_DTYPES)]


class MixedPrecisionSpec(Schema):
    """``ddp.mixed_precision``: DDP's ``_MixedPrecision``, dtypes by name (null: left as it is)."""

    param_dtype: Dtype = Field(MixedPrecision.param_dtype, description="parameters cast to it before every forward")
    reduce_dtype: Dtype = Field(MixedPrecision.reduce_dtype, description="the dtype gradients are all-reduced in")
    buffer_dtype: Dtype = Field(MixedPrecision.buffer_dtype, description="the dtype buffers are cast to")


ParamNames = Annotated[Optional[Annotated[list[str], Field(max_length=MAX_LIST)]], _rule(
    f"a list of parameter names (at most {MAX_LIST}) or null",
    lambda v: v is None or (isinstance(v, list) and len(v) <= MAX_LIST and all(isinstance(n, str) and n for n in v)))]


class DdpSection(Schema):
    """``ddp``: DistributedDataParallel's constructor arguments, its comm hook and SyncBatchNorm."""

    bucket_cap_mb: OptCap = Field(DDPOptions.bucket_cap_mb, description=f"MiB per bucket, <= {MAX_CAP_MB}; null: not "
                                  "given (25 MiB, a 1 MiB first bucket after the rebuild)")
    bucket_cap_mb_list: Annotated[Optional[CapList],
                                  _rule(f"{_CAP_LIST_TEXT}, or null", lambda v: v is None or _is_cap_list(v))] = Field(
        DDPOptions.bucket_cap_mb_list, description="per-bucket limits in MiB, the last reused (torch >= 2.13; "
                                                   f"bucket_cap_mb is then ignored); at most {MAX_LIST} entries")
    find_unused_parameters: Bool = Field(DDPOptions.find_unused_parameters, description="DDP's find_unused_parameters")
    static_graph: Bool = Field(DDPOptions.static_graph, description="DDP's static_graph")
    gradient_as_bucket_view: Bool = Field(DDPOptions.gradient_as_bucket_view, description="DDP's gradient_as_bucket_view")
    broadcast_buffers: Bool = Field(DDPOptions.broadcast_buffers, description="DDP's broadcast_buffers")
    sync_batchnorm: Bool = Field(False, description="the BatchNorm layers are nn.SyncBatchNorm (convert_sync_batchnorm)")
    batched_grad_copy: Bool = Field(DDPOptions.batched_grad_copy, description="torch 2.13: one _foreach_copy_ per bucket")
    skip_all_reduce_unused_params: Bool = Field(DDPOptions.skip_all_reduce_unused_params,
                                                description="torch 2.13: no all-reduce of an all-unused bucket")
    forward_sync_buffers: OptBool = Field(DDPOptions.forward_sync_buffers,
                                          description="torch 2.13: buffer broadcast before forward; null: "
                                                      "broadcast_buffers decides")
    mixed_precision: Optional[MixedPrecisionSpec] = Field(DDPOptions.mixed_precision, description="DDP's _MixedPrecision")
    delay_all_reduce_named_params: ParamNames = Field(
        None, description="parameter names all-reduced as one buffer from param_to_hook_all_reduce's hook")
    param_to_hook_all_reduce: OptText = Field(DDPOptions.param_to_hook_all_reduce,
                                              description="the parameter whose gradient hook all-reduces them")
    comm_hook: Hook = Field("none", description=f"DDP.register_comm_hook: one of {', '.join(COMM_HOOKS)}")
    powersgd: _section(PowerSgd) = Field(default_factory=PowerSgd, description="PowerSGDState's arguments (comm_hook: powersgd)")

    @model_validator(mode="after")
    def _both_or_neither(self) -> "DdpSection":
        if (self.delay_all_reduce_named_params is None) != (self.param_to_hook_all_reduce is None):
            _fail(("param_to_hook_all_reduce",), self.param_to_hook_all_reduce,
                 "a parameter name together with ddp.delay_all_reduce_named_params (both or neither)")
        return self

    def options(self) -> DDPOptions:
        """The DDP constructor options of this section."""
        mp = self.mixed_precision
        names = self.delay_all_reduce_named_params
        return DDPOptions(
            bucket_cap_mb=self.bucket_cap_mb,
            bucket_cap_mb_list=None if self.bucket_cap_mb_list is None else tuple(self.bucket_cap_mb_list),
            find_unused_parameters=self.find_unused_parameters, static_graph=self.static_graph,
            gradient_as_bucket_view=self.gradient_as_bucket_view, broadcast_buffers=self.broadcast_buffers,
            batched_grad_copy=self.batched_grad_copy, skip_all_reduce_unused_params=self.skip_all_reduce_unused_params,
            forward_sync_buffers=self.forward_sync_buffers,
            mixed_precision=None if mp is None else MixedPrecision(**mp.model_dump()),
            delay_all_reduce_named_params=None if names is None else tuple(names),
            param_to_hook_all_reduce=self.param_to_hook_all_reduce)


Slowdown = Number(1.0, MAX_SLOWDOWN)
#: the weightings a scenario may give ('table' needs the GPU prior's size table)
SCENARIO_WEIGHTINGS = tuple(w for w in WEIGHTINGS if w != "table")


class InterferenceSpec(Schema):
    """``simulation.interference``: mutual slowdown of compute and communication
    (:class:`ddpsim.network.interference.Interference`)."""

    compute_slowdown: Slowdown = Field(Interference.compute_slowdown,
                                       description="compute runs this many times slower under a collective, "
                                                   f"1 to {MAX_SLOWDOWN:g}")
    comm_slowdown: Slowdown = Field(Interference.comm_slowdown,
                                    description=f"a collective runs this many times slower under compute, 1 to {MAX_SLOWDOWN:g}")
    weighting: Annotated[Literal[SCENARIO_WEIGHTINGS], _rule(f"one of {', '.join(SCENARIO_WEIGHTINGS)}",
                                                   lambda v: v in SCENARIO_WEIGHTINGS)] = Field(
        Interference.weighting, description="how much of compute_slowdown a collective in flight applies")


def _interference(v: InterferenceSpec | None) -> Interference | None:
    return None if v is None else Interference(**v.model_dump())


def _rank_keys(v: Any) -> Any:
    """``{"3": 1.2}`` (a rank written as a string) -> ``{3: 1.2}``."""
    if not isinstance(v, dict):
        return v
    return {int(k) if isinstance(k, str) and k.isdigit() else k: f for k, f in v.items()}


Stragglers = Annotated[
    dict[Int(0, MAX_WORLD_SIZE - 1), Slowdown],
    _rule(f"a mapping rank -> slowdown factor >= 1 and <= {MAX_SLOWDOWN:g}", lambda v: v is None or isinstance(v, dict)),
    BeforeValidator(lambda v: {} if v is None else _rank_keys(v))]
Jitter = Annotated[Union[Literal["trace", "none"], int, float], _rule(
    f"'trace', 'none' or a coefficient of variation >= 0 and <= {MAX_JITTER:g}",
    lambda v: v in ("trace", "none") or (_is_num(v) and 0 <= v <= MAX_JITTER)),
    WithJsonSchema({"anyOf": [{"enum": ["trace", "none"]}, {"type": "number", "minimum": 0, "maximum": MAX_JITTER}]})]


class SimulationSpec(Schema):
    """``simulation``: the engine's iterations and the noise and slowdowns it applies."""

    iterations: Int(1, MAX_ITERATIONS) = Field(6, description=f"simulated iterations, 1 to {MAX_ITERATIONS}")
    warmup: Int(0, MAX_ITERATIONS, null=True) = Field(
        None, description="iterations left out of the statistics, fewer than iterations; null: through the first "
                          "rebuilt-bucket iteration")
    seed: Int(0, MAX_SEED) = Field(0, description="the jitter's random seed")
    jitter: Jitter = Field("trace", description="'trace' (the trace's own spread), 'none', or a coefficient of variation")
    stragglers: Stragglers = Field(default_factory=dict, json_schema_extra={"propertyNames": {"pattern": "^[0-9]+$"}},
                                   description=f"rank -> compute slowdown (1 to {MAX_SLOWDOWN:g})")
    no_sync_steps: Int(0, MAX_ITERATIONS) = Field(0, description=f"no_sync() steps before each synced one, 0 to {MAX_ITERATIONS}")
    interference: Annotated[Optional[_section(InterferenceSpec)], AfterValidator(_interference)] = Field(
        None, description="given compute / communication interference (null: the calibration's or the GPU prior)")
    compute_statistic: Annotated[Literal[COMPUTE_STATISTICS], _rule(" or ".join(COMPUTE_STATISTICS),
                                                                   lambda v: v in COMPUTE_STATISTICS)] = Field(
        "median", description="the trace statistic each compute time is taken from")
    copy_bandwidth_gbps: Number(0, MAX_GBPS, above=True, unit=" of GB/s", null=True) = Field(
        None, description="gradient copy bandwidth, GB/s (overrides the calibration's and the topology's)")

    @model_validator(mode="after")
    def _warmup_below_iterations(self) -> "SimulationSpec":
        if self.warmup is not None and self.warmup >= self.iterations:
            _fail(("warmup",), self.warmup, f"fewer than simulation.iterations ({self.iterations}) or null")
        return self


Fraction = Annotated[float, _project_check(check_fraction)]
Seconds = Annotated[float, _project_check(check_seconds)]


class CostModelSection(Schema):
    """``cost_model``: which GPU cost terms apply and their values (:mod:`ddpsim.network.cost_terms`)."""

    contention: Bool = Field(CostModelSpec.contention, description="compute-communication contention prior")
    memory_bound_fraction: Fraction = Field(CostModelSpec.memory_bound_fraction,
                                            description="backward's memory-bound share, in [0, 1]")
    memory_efficiency: Annotated[Fraction, _rule("a number in (0, 1]", lambda v: not _is_num(v) or v > 0)] = Field(
        CostModelSpec.memory_efficiency, description="HBM share a memory-bound kernel reaches, in (0, 1]")
    copy_kernels: Bool = Field(CostModelSpec.copy_kernels, description="gradient copies as kernels")
    min_kernel_s: Seconds = Field(CostModelSpec.min_kernel_s, description="a kernel's launch and tail, seconds")
    host: Bool = Field(CostModelSpec.host, description="CPU timeline with DDP's host costs")
    pre_forward_s: Seconds = Field(HostCosts.pre_forward_s, description="host seconds per step before forward")
    hook_s_per_param: Seconds = Field(HostCosts.hook_s_per_param, description="host seconds per autograd hook")
    bucket_launch_s: Seconds = Field(HostCosts.bucket_launch_s, description="host seconds per bucket launch")
    enqueue_s: Seconds = Field(HostCosts.enqueue_s, description="host seconds per collective enqueued")
    uncertainty: Bool = Field(CostModelSpec.uncertainty, description="re-simulate every point under the uncertain inputs")

    def spec(self) -> CostModelSpec:
        values = self.model_dump()
        host = HostCosts(**{k: values.pop(k) for k in hostcost.FIELDS})
        return CostModelSpec(**values, host_costs=host)


assert tuple(CostModelSection.model_fields) == COST_MODEL_KEYS, "cost_model keys in cost_terms.KEYS order"


class CapRange(Schema):
    """``sweep.bucket_cap_mb: {min, max, points, scale}``: caps spaced over a range."""

    min: Cap = Field(description=f"the smallest cap, MiB (<= {MAX_CAP_MB})")
    max: Cap = Field(description=f"the largest cap, MiB (>= min, <= {MAX_CAP_MB})")
    points: Int(1, MAX_POINTS) = Field(description=f"how many caps, 1 to {MAX_POINTS}")
    scale: Annotated[Literal["log", "linear"], _rule("'log' or 'linear'", lambda v: v in ("log", "linear"))] = Field(
        "log", description="log or linear spacing")

    @model_validator(mode="after")
    def _ordered(self) -> "CapRange":
        if self.max < self.min:
            _fail(("max",), self.max, f"a number >= min ({self.min!r})")
        return self

    def caps(self) -> list[int | float]:
        """The caps, 3 significant digits (readable point ids), duplicates dropped."""
        lo, hi, n = self.min, self.max, self.points
        vals: list[int | float] = []
        for i in range(n):
            f = i / (n - 1) if n > 1 else 0.0
            v = lo * (hi / lo) ** f if self.scale == "log" else lo + (hi - lo) * f
            v = _whole(float(f"{v:.3g}"))
            if v not in vals:
                vals.append(v)
        return vals


def _caps_in(v: Any) -> Any:
    """``sweep.bucket_cap_mb``: a range mapping validated as :class:`CapRange`; one value -> a list."""
    if isinstance(v, dict):
        return CapRange.model_validate(v)
    if isinstance(v, list):
        if not v:
            raise ValueError("expected at least one point (a list of numbers > 0 or null, or {min, max, points})")
        if len(v) > MAX_LIST:
            raise ValueError(f"expected at most {MAX_LIST} caps")
        return v
    return v if isinstance(v, CapRange) else [v]


class SweepSection(Schema):
    """``sweep``: the values each sweep point takes; the points are their product, caps outermost."""

    bucket_cap_mb: Annotated[Union[Annotated[list[OptCap], Field(min_length=1, max_length=MAX_LIST)], CapRange],
                             BeforeValidator(_caps_in)] = Field(
        None, json_schema_extra=_with_shorthand({"anyOf": [_CAP_SCHEMA, {"type": "null"}]}),
        description=f"caps (MiB, null: DDP's default; at most {MAX_LIST}) or {{min, max, points, scale}}; the null "
                    "point is added first when missing; not given: ddp.bucket_cap_mb")
    bucket_cap_mb_list: Listed(CapList, "cap lists") = Field(
        None, description="cap lists, one point each after the caps; not given: ddp.bucket_cap_mb_list")
    find_unused_parameters: Listed(Bool) = Field(None, description="values of find_unused_parameters")
    gradient_as_bucket_view: Listed(Bool) = Field(None, description="values of gradient_as_bucket_view")
    comm_hook: Listed(Hook) = Field(None, description="comm hooks (ddp.comm_hook's values)")
    nodes: Listed(Int(1, MAX_NODES)) = Field(None, description="node counts (needs world_size: null)")

    def resolve(self, ddp: DdpSection) -> SweepSpec:
        """The sweep's axes: caps (the default point first), cap lists, the other values deduplicated."""
        if self.bucket_cap_mb is None:
            caps = [ddp.bucket_cap_mb]
        elif isinstance(self.bucket_cap_mb, CapRange):
            caps = self.bucket_cap_mb.caps()
        else:
            caps = list(dict.fromkeys(self.bucket_cap_mb))
        if None not in caps:
            caps.insert(0, None)
        if self.bucket_cap_mb_list is not None:
            lists = [tuple(x) for x in self.bucket_cap_mb_list]
        else:
            lists = [tuple(ddp.bucket_cap_mb_list)] if ddp.bucket_cap_mb_list else []

        def each(key: str) -> tuple | None:
            v = getattr(self, key)
            return None if v is None else tuple(dict.fromkeys(v))

        return SweepSpec(bucket_cap_mb=tuple(caps), bucket_cap_mb_list=tuple(dict.fromkeys(lists)),
                         find_unused_parameters=each("find_unused_parameters"),
                         gradient_as_bucket_view=each("gradient_as_bucket_view"), comm_hook=each("comm_hook"),
                         nodes=each("nodes"))


def _tuples(v: Any) -> Any:
    """YAML lists as tuples (strict tuples take no list)."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


ValidationCap = Annotated[Union[OptCap, Annotated[tuple[Cap, ...], Field(min_length=1, max_length=MAX_LIST)]], _rule(
    f"{_CAP_TEXT}, a cap list (a non-empty list of such numbers) or null",
    lambda v: v is None or _is_cap(v) or _is_cap_list(v)),
    WithJsonSchema({"anyOf": [_CAP_SCHEMA, {"type": "null"}, {"type": "array", "items": _CAP_SCHEMA, "minItems": 1,
                                                               "maxItems": MAX_LIST}]})]


class ValidationSpec(Schema):
    """``validation``: what ``ddpsim validate`` runs for real (read by the executor side)."""

    model: OptText = Field(None, description="a bundled model name; null: the scenario's model or the trace's")
    batch_size: Int(1, MAX_BATCH_SIZE, null=True) = Field(None, description="samples per rank; null: the trace's")
    iterations: Int(1, MAX_ITERATIONS) = Field(20, description=f"measured iterations, 1 to {MAX_ITERATIONS}")
    warmup: Int(0, MAX_ITERATIONS) = Field(5, description=f"unmeasured iterations first, 0 to {MAX_ITERATIONS}")
    num_threads: Int(1, MAX_THREADS, null=True) = Field(None, description="torch CPU threads; null: the trace's")
    device: OptText = Field(None, description="the device; null: the trace's")
    bucket_cap_mb: Annotated[Optional[tuple[ValidationCap, ...]], _rule(
        f"a non-empty list of at most {MAX_LIST} caps or null",
        lambda v: v is None or (isinstance(v, (list, tuple)) and 0 < len(v) <= MAX_LIST)),
        BeforeValidator(_tuples)] = Field(None, description="caps run for real (a list in it: a cap list); null: the "
                                                            "sweep's")
    options: Options = Field(default_factory=dict, description="keyword arguments of the model's builder")


# ---- the document --------------------------------------------------------------------------

Name = Annotated[Optional[str], Field(pattern=NAME_PATTERN, max_length=MAX_NAME_CHARS), _rule(
    f"a folder name of letters, digits, '.', '_' or '-' (at most {MAX_NAME_CHARS} characters)",
    lambda v: v is None or (isinstance(v, str) and len(v) <= MAX_NAME_CHARS and re.match(NAME_PATTERN, v) is not None))]
WorldSize = Annotated[Union[Annotated[int, Field(ge=1, le=MAX_WORLD_SIZE)], Literal["all"], None], _rule(
    f"an integer >= 1 and <= {MAX_WORLD_SIZE}, 'all' or null (every device of the cluster)",
    lambda v: v in (None, "all") or (_is_int(v) and 1 <= v <= MAX_WORLD_SIZE))]
_TIMELINE_TEXT = "a bucket_cap_mb of the sweep, a bucket_cap_mb_list of the sweep, 'best' or a point id"
Timeline = Annotated[Any, _rule(_TIMELINE_TEXT,
                                lambda v: v is None or _is_cap(v) or _is_cap_list(v) or (isinstance(v, str) and v != "")),
                     BeforeValidator(lambda v: _whole(v) if _is_num(v) else v),
                     WithJsonSchema({"anyOf": [_CAP_SCHEMA, {"type": "null"}, {"type": "string", "minLength": 1},
                                               {"type": "array", "items": _CAP_SCHEMA, "minItems": 1}]})]
FilePath = Annotated[Optional[str], _rule("a file path (a non-empty string) or null",
                                          lambda v: v is None or (isinstance(v, str) and v != ""))]


#: a scenario without ``sweep`` (or ``sweep: null``): the default point only
NO_SWEEP = {"bucket_cap_mb": [None]}


def _model_in(v: Any) -> Any:
    return {"name": v} if isinstance(v, str) else v


def _cluster_in(v: Any) -> Any:
    return {"topology": v} if isinstance(v, str) else v


class ScenarioFile(Schema):
    """A scenario YAML: what to simulate and what to sweep (``ddpsim.pipeline.scenario``)."""

    name: Name = Field(None, description="the report folder reports/<name>/; null: the file's stem")
    description: Annotated[str, BeforeValidator(lambda v: "" if v is None else v), AfterValidator(str.strip)] = Field(
        "", description="free text, shown in the report")
    trace: FilePath = Field(None, description="a trace JSON (relative to the cwd, the scenario's folder or its parent); "
                                              "exactly one of trace and model")
    model: Annotated[Optional[ModelSpec], BeforeValidator(_model_in)] = Field(
        None, json_schema_extra=_with_shorthand({"type": "string", "minLength": 1}),
        description="a bundled model to capture a trace from (a name, or a mapping); exactly one of trace and model")
    cluster: Annotated[ClusterSpec, _mapping(ClusterSpec), BeforeValidator(_cluster_in)] = Field(
        json_schema_extra=_with_shorthand({"type": "string", "minLength": 1}),
        description="the cluster: a preset name / topology YAML path, or a mapping")
    world_size: WorldSize = Field(2, description="ranks; null or 'all': every device of the cluster's topology")
    ddp: _section(DdpSection) = Field(default_factory=DdpSection, description="DDP's options, PyTorch's names")
    simulation: _section(SimulationSpec) = Field(default_factory=SimulationSpec, description="the engine's knobs")
    calibration: FilePath = Field(None, description="a calibration JSON written by the executor, or null")
    sweep: Annotated[SweepSection, _mapping(SweepSection),
                     BeforeValidator(lambda v: dict(NO_SWEEP) if v is None else v)] = Field(
        default_factory=lambda: SweepSection(**NO_SWEEP), description="the values the sweep's points take")
    timelines: Annotated[list[Timeline], Field(max_length=MAX_LIST),
                         _rule(f"at most {MAX_LIST} timelines", lambda v: len(v) <= MAX_LIST),
                         BeforeValidator(lambda v: v if isinstance(v, list) else [v])] = Field(
        default_factory=lambda: [None], description=f"sweep points that get a timeline: {_TIMELINE_TEXT}")
    validation: Optional[ValidationSpec] = Field(None, description="what 'ddpsim validate' runs for real, or null")
    cost_model: _section(CostModelSection) = Field(default_factory=CostModelSection, description="GPU cost terms")
    plan: FilePath = Field(None, description="an explicit bucket plan JSON ('ddpsim plan --format json') used at "
                                             "every point instead of DDP's buckets, or null")

    @model_validator(mode="after")
    def _across_sections(self) -> "ScenarioFile":
        if (self.trace is None) == (self.model is None):
            both = self.trace is not None
            _fail(("trace",), self.trace, "exactly one of 'trace' (a trace JSON path) or 'model' (a bundled model to "
                                         f"capture){', not both' if both else ''}")
        ws = self.ranks
        if ws is None and self.cluster.topology is None:
            _fail(("world_size",), self.world_size, "an integer >= 1 with cluster.latency_us/bandwidth_gbps (no devices "
                                                   "to count)")
        for r in self.simulation.stragglers:
            if ws is not None and r >= ws:
                _fail(("simulation", "stragglers"), r, f"a rank in [0, {ws})")
        sweep = self.sweep.resolve(self.ddp)
        if sweep.nodes is not None and ws is not None and len(sweep.nodes) > 1:
            _fail(("world_size",), ws, "null (every device of the cluster) when sweep.nodes lists several node counts")
        self.timeline_keys(sweep)
        return self

    @property
    def ranks(self) -> int | None:
        """``world_size``; None: every device of the cluster."""
        return None if self.world_size in (None, "all") else self.world_size

    def timeline_keys(self, sweep: SweepSpec) -> tuple[Any, ...]:
        """``timelines`` as :meth:`ddpsim.pipeline.scenario.Scenario.timeline_points` reads them: caps of
        the sweep, 'best' and point ids (a cap list of the sweep becomes its point id)."""
        out: list[Any] = []
        for i, t in enumerate(self.timelines):
            if isinstance(t, list):
                if tuple(_whole(x) for x in t) not in sweep.bucket_cap_mb_list:
                    _fail(("timelines", i), t, _TIMELINE_TEXT)
                out.append(cap_point_id(None, tuple(_whole(x) for x in t)))
            elif t is None or not isinstance(t, str):
                if t not in sweep.bucket_cap_mb:
                    caps = ", ".join("null" if c is None else f"{c:g}" for c in sweep.bucket_cap_mb)
                    _fail(("timelines", i), t, f"a bucket_cap_mb of the sweep ({caps}), 'best' or a point id")
                out.append(t)
            else:
                out.append(t)
        return tuple(out)


def json_schema() -> str:
    """``scenarios/schema.json``: :class:`ScenarioFile`'s JSON Schema (draft 2020-12), sorted keys."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **ScenarioFile.model_json_schema(by_alias=True)}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(json_schema(), end="")
