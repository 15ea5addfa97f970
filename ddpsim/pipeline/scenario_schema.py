"""The scenario file's declared schema: one pydantic model per section of a scenario YAML,
:class:`ScenarioFile` the whole, each key's default and upper bound written once on its field,
the DDP keys under PyTorch's names; checks between sections are its validators.
``scenarios/schema.json`` is its JSON Schema:
``python -m ddpsim.pipeline.scenario_schema > scenarios/schema.json``.
"""

import json
import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, model_validator

from ddpsim.engine.config import ComputeStatistic, PowerSGDState
from ddpsim.network.cost_terms import CostModelSpec
from ddpsim.network.host_costs import HostCosts
from ddpsim.network.interference import WEIGHTINGS, Interference
from ddpsim.plan.compiled import CompileOptions
from ddpsim.plan.planner import DDPOptions, MixedPrecision, check_delayed, cap_point_id
from ddpsim.schema import Schema, is_num, models_in, rule, validate
from ddpsim.errors import InputError
from ddpsim.units import MAX_BATCH_SIZE, MAX_ITERATIONS, MAX_NODES, MAX_SEED, MAX_THREADS, MAX_WORLD_SIZE
from ddpsim.value_types import (  # noqa: F401 (the MAX_* bounds re-exported)
    COMM_HOOKS, MAX_BATCHES, MAX_CAP_MB, MAX_GBPS, MAX_LATENCY_US, MAX_LIST, MAX_NAME_CHARS,
    MAX_POINTS, MAX_POWERSGD_RANK, MAX_PROCESS_GROUPS, MAX_SLOWDOWN, NAME_PATTERN, _CAP_SCHEMA,
    _CAP_TEXT, Bool, Cap, CapList, Hook, Int, Jitter, Listed, Number, OptCap, OptText, Options, Stragglers,
    Text, _fail, _is_cap, _is_cap_list, _is_int, _mapping, _section, _whole, _with_shorthand, section_of)

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


class PowerSgd(section_of(PowerSGDState)):
    """``ddp.powersgd``: PowerSGD's ``PowerSGDState`` arguments
    (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook)."""


class MixedPrecisionSpec(section_of(MixedPrecision)):
    """``ddp.mixed_precision``: DDP's ``_MixedPrecision``, dtypes by name (null: left as it is)."""


class JoinSpec(Schema):
    """``ddp.join``: an epoch under DDP's ``Join`` with uneven inputs (:mod:`ddpsim.engine.join`):
    the batch count of every rank, or their mean and spread (drawn with ``simulation.seed``)."""

    batches_per_rank: Annotated[Optional[Annotated[list[Int(1, MAX_BATCHES)], Field(min_length=1, max_length=MAX_LIST)]],
                                rule(f"a non-empty list of batch counts (integers >= 1 and <= {MAX_BATCHES}), one per rank, "
                                      "or null", lambda v: v is None or (isinstance(v, list) and 0 < len(v) <= MAX_LIST))] = Field(
        None, description="each rank's batches in the epoch (as many as the world size)")
    mean_batches: Int(1, MAX_BATCHES, null=True) = Field(None, description="the ranks' mean batches per epoch (with spread)")
    spread: Number(0.0, 1.0) = Field(0.0, description="coefficient of variation of the ranks' batch counts, 0 to 1 "
                                                      "(with mean_batches)")

    @model_validator(mode="after")
    def _one_way(self) -> "JoinSpec":
        if (self.batches_per_rank is None) == (self.mean_batches is None):
            _fail(("batches_per_rank",), self.batches_per_rank, "either batches_per_rank or mean_batches (one of them)")
        return self

    def batches(self, world_size: int, seed: int) -> tuple[int, ...]:
        """The batch count of each of ``world_size`` ranks (one line naming the field when they do not fit)."""
        if self.batches_per_rank is not None:
            if len(self.batches_per_rank) != world_size:
                raise InputError(f"ddp.join.batches_per_rank: {len(self.batches_per_rank)} counts are not accepted; "
                                 f"expected {world_size}, one per rank")
            return tuple(self.batches_per_rank)
        import numpy as np

        rng = np.random.default_rng(seed)
        sigma = float(np.sqrt(np.log1p(self.spread ** 2)))
        draws = self.mean_batches * np.exp(sigma * rng.standard_normal(world_size) - sigma ** 2 / 2)
        return tuple(max(1, int(round(float(x)))) for x in draws)


class DdpSection(section_of(DDPOptions, skip=("semantics", "small_bucket_last"),
                            types={"mixed_precision": Optional[MixedPrecisionSpec]})):
    """``ddp``: DistributedDataParallel's constructor arguments, its comm hook and SyncBatchNorm."""

    sync_batchnorm: Bool = Field(False, description="the BatchNorm layers are nn.SyncBatchNorm (convert_sync_batchnorm)")
    comm_hook: Hook = Field("none", description=f"DDP.register_comm_hook: one of {', '.join(COMM_HOOKS)}")
    powersgd: _section(PowerSgd) = Field(default_factory=PowerSgd, description="PowerSGDState's arguments (comm_hook: powersgd)")
    process_groups: Int(1, MAX_PROCESS_GROUPS) = Field(
        1, description=f"communicators the buckets' collectives are dealt to in turn (_round_robin_process_groups), "
                       f"1 to {MAX_PROCESS_GROUPS}")
    join: Optional[_section(JoinSpec)] = Field(None, description="an epoch under model.join() with uneven inputs: "
                                                                 "{batches_per_rank} or {mean_batches, spread}; null: even")

    @model_validator(mode="after")
    def _both_or_neither(self) -> "DdpSection":
        check_delayed(self)
        return self

    def options(self) -> DDPOptions:
        """The DDP constructor options of this section (its keys that are ``DDPOptions`` fields)."""
        return validate(DDPOptions, self.model_dump(include=set(DDPOptions.__dataclass_fields__)), "ddp")


#: the weightings a scenario may give ('table' needs the GPU prior's size table)
SCENARIO_WEIGHTINGS = tuple(w for w in WEIGHTINGS if w != "table")


ScenarioWeighting = Annotated[Literal[SCENARIO_WEIGHTINGS], rule(f"one of {', '.join(SCENARIO_WEIGHTINGS)}",
                                                              lambda v: v in SCENARIO_WEIGHTINGS)]


class InterferenceSpec(section_of(Interference, skip=("size_weights",),
                                  types={"weighting": ScenarioWeighting})):
    """``simulation.interference``: mutual slowdown of compute and communication
    (:class:`ddpsim.network.interference.Interference`)."""


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
    interference: Annotated[Optional[_section(InterferenceSpec)], AfterValidator(
        lambda v: None if v is None else Interference(**v.model_dump()))] = Field(
        None, description="given compute / communication interference (null: the calibration's or the GPU prior)")
    compute_statistic: ComputeStatistic = Field("median", description="the trace statistic each compute time is "
                                                                      "taken from")
    copy_bandwidth_gbps: Number(0, MAX_GBPS, above=True, unit=" of GB/s", null=True) = Field(
        None, description="gradient copy bandwidth, GB/s (overrides the calibration's and the topology's)")

    @model_validator(mode="after")
    def _warmup_below_iterations(self) -> "SimulationSpec":
        if self.warmup is not None and self.warmup >= self.iterations:
            _fail(("warmup",), self.warmup, f"fewer than simulation.iterations ({self.iterations}) or null")
        return self


class CostModelSection(section_of(CostModelSpec, flat=("host_costs",))):
    """``cost_model``: which GPU cost terms apply and their values (:mod:`ddpsim.network.cost_terms`)."""

    def spec(self) -> CostModelSpec:
        values = self.model_dump()
        host = HostCosts(**{k: values.pop(k) for k in HostCosts.__dataclass_fields__})
        return CostModelSpec(**values, host_costs=host)


class CompileSection(section_of(CompileOptions)):
    """``compile``: the model runs as ``torch.compile(DDP(model))`` (:mod:`ddpsim.plan.compiled`)."""

    @model_validator(mode="after")
    def _one_mode(self) -> "CompileSection":
        if self.compiled_autograd and self.ddp_optimizer and "ddp_optimizer" in self.model_fields_set:
            _fail(("ddp_optimizer",), True, "false with compiled_autograd: true (optimize_ddp='python_reducer' "
                                            "replaces DDPOptimizer)")
        return self

    def options(self) -> CompileOptions:
        """The runtime options; ``ddp_optimizer`` not given: on unless compiled autograd is."""
        given = "ddp_optimizer" in self.model_fields_set
        return CompileOptions(ddp_optimizer=self.ddp_optimizer if given else not self.compiled_autograd,
                              compiled_autograd=self.compiled_autograd)


class CapRange(Schema):
    """``sweep.bucket_cap_mb: {min, max, points, scale}``: caps spaced over a range."""

    min: Cap = Field(description=f"the smallest cap, MiB (<= {MAX_CAP_MB})")
    max: Cap = Field(description=f"the largest cap, MiB (>= min, <= {MAX_CAP_MB})")
    points: Int(1, MAX_POINTS) = Field(description=f"how many caps, 1 to {MAX_POINTS}")
    scale: Annotated[Literal["log", "linear"], rule("'log' or 'linear'", lambda v: v in ("log", "linear"))] = Field(
        "log", description="log or linear spacing")

    @model_validator(mode="after")
    def _ordered(self) -> "CapRange":
        if self.max < self.min:
            _fail(("max",), self.max, f"a number >= min ({self.min!r})")
        return self

    def caps(self) -> list[int | float]:
        """The caps, 3 significant digits (readable point ids), duplicates dropped."""
        lo, hi, n = self.min, self.max, self.points
        fs = [i / (n - 1) if n > 1 else 0.0 for i in range(n)]
        vals = (lo * (hi / lo) ** f if self.scale == "log" else lo + (hi - lo) * f for f in fs)
        return list(dict.fromkeys(_whole(float(f"{v:.3g}")) for v in vals))


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
    process_groups: Listed(Int(1, MAX_PROCESS_GROUPS)) = Field(None, description="round-robin communicator counts "
                                                                              "(ddp.process_groups' values)")

    def caps(self, ddp: DdpSection) -> tuple[Any, ...]:
        """The swept caps: DDP's default (null) first where not written, the rest as written (a range's
        caps), deduplicated; not given: ``ddp.bucket_cap_mb``."""
        if self.bucket_cap_mb is None:
            caps = [ddp.bucket_cap_mb]
        elif isinstance(self.bucket_cap_mb, CapRange):
            caps = self.bucket_cap_mb.caps()
        else:
            caps = list(dict.fromkeys(self.bucket_cap_mb))
        return tuple(caps) if None in caps else (None, *caps)

    def cap_lists(self, ddp: DdpSection) -> tuple[tuple[Any, ...], ...]:
        """The swept cap lists, deduplicated, one point each after the caps; not given: ``ddp.bucket_cap_mb_list``."""
        if self.bucket_cap_mb_list is not None:
            return tuple(dict.fromkeys(tuple(x) for x in self.bucket_cap_mb_list))
        return (tuple(ddp.bucket_cap_mb_list),) if ddp.bucket_cap_mb_list else ()

    def axes(self) -> tuple[tuple[str, tuple[Any, ...] | None], ...]:
        """The other axes in the schema's order: (key, its values deduplicated, or None: the scenario's own value)."""
        return tuple((k, None if getattr(self, k) is None else tuple(dict.fromkeys(getattr(self, k))))
                     for k in type(self).model_fields if k not in ("bucket_cap_mb", "bucket_cap_mb_list"))


def _tuples(v: Any) -> Any:
    """YAML lists as tuples (strict tuples take no list)."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


ValidationCap = Annotated[Union[OptCap, Annotated[tuple[Cap, ...], Field(min_length=1, max_length=MAX_LIST)]], rule(
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
    bucket_cap_mb: Annotated[Optional[tuple[ValidationCap, ...]], rule(
        f"a non-empty list of at most {MAX_LIST} caps or null",
        lambda v: v is None or (isinstance(v, (list, tuple)) and 0 < len(v) <= MAX_LIST)),
        BeforeValidator(_tuples)] = Field(None, description="caps run for real (a list in it: a cap list); null: the "
                                                            "sweep's")
    options: Options = Field(default_factory=dict, description="keyword arguments of the model's builder")


# ---- explore: a design space over the scenario's keys ----------------------------------------

#: the short names of the design-space axes -> the scenario key each one sets
#: (``batch_size`` re-times the trace: :mod:`ddpsim.pipeline.explore`)
EXPLORE_ALIASES = {"system": "cluster.topology", "nodes": "cluster.nodes", "world_size": "world_size",
                   "bucket_cap_mb": "ddp.bucket_cap_mb", "bucket_cap_mb_list": "ddp.bucket_cap_mb_list",
                   "comm_hook": "ddp.comm_hook", "batch_size": "batch_size"}
#: keys an axis may not set (they are the design space itself, or paths of the run)
EXPLORE_FIXED = ("name", "description", "trace", "model", "sweep", "timelines", "validation", "explore")
#: points of a design space (crossed, or the population a sample is drawn from) and of a sample
MAX_EXPLORE_POINTS = 10_000_000
MAX_EXPLORE_SAMPLE = 1_000_000


def _axis_key_ok(key: Any) -> bool:
    """An alias of :data:`EXPLORE_ALIASES`, or a dotted scenario key of a settable field."""
    if not isinstance(key, str) or not key:
        return False
    if key in EXPLORE_ALIASES:
        return True
    parts = key.split(".")
    if parts[0] in EXPLORE_FIXED:
        return False
    model: Any = ScenarioFile
    for i, part in enumerate(parts):
        field = model.model_fields.get(part) if model is not None else None
        if field is None:
            return False
        if part == "options" and i == len(parts) - 2:  # a preset's or a model builder's keyword
            return True
        model = next(iter(models_in(field.annotation)), None)
        if i < len(parts) - 1 and model is None:
            return False
    return True


_AXES_TEXT = (f"a mapping of axis -> a non-empty list of values (at most {MAX_LIST}); an axis is one of "
              f"{', '.join(EXPLORE_ALIASES)} or a dotted scenario key (e.g. ddp.gradient_as_bucket_view, "
              "simulation.seed, cluster.options.nic_gbit)")


class ExploreSample(Schema):
    """``explore.sample``: a seeded random subset of the crossed design space."""

    points: Int(1, MAX_EXPLORE_SAMPLE) = Field(description=f"how many points, 1 to {MAX_EXPLORE_SAMPLE} (at most the "
                                                           "crossed space's)")
    seed: Int(0, MAX_SEED) = Field(0, description="the seed of the draw")


PriceFile = Annotated[Optional[str], rule("a prices YAML path (a non-empty string) or null",
                                           lambda v: v is None or (isinstance(v, str) and v != ""))]


class ExploreSection(Schema):
    """``explore``: the design space ``ddpsim explore`` simulates (``ddpsim.pipeline.explore``):
    its axes (crossed in the order written, the first outermost, or sampled), where each system's
    trace comes from, and the GPU-hour prices of the cost columns."""

    axes: Annotated[dict[str, list[Any]], rule(_AXES_TEXT, lambda v: isinstance(v, dict) and 0 < len(v) and all(
        _axis_key_ok(k) and isinstance(x, list) and 0 < len(x) <= MAX_LIST for k, x in v.items()))] = Field(
        description="axis -> values: system (cluster.topology), nodes, world_size, bucket_cap_mb (null: DDP's "
                    "default), bucket_cap_mb_list, comm_hook, batch_size (re-times the trace; needs retime), or "
                    "any dotted scenario key")
    sample: Optional[ExploreSample] = Field(None, description="a seeded random subset of the points; null: all "
                                                              "of them (crossed)")
    retime: Bool = Field(False, description="re-time the trace for each system's GPU (and batch_size) with the "
                                            "roofline model of 'ddpsim retime' (needs torch)")
    traces: Annotated[dict[str, str], rule("a mapping of system -> trace JSON path",
                                            lambda v: isinstance(v, dict) and all(
                                                isinstance(k, str) and isinstance(x, str) and x for k, x in v.items()))
                      ] = Field(default_factory=dict, description="system -> its own trace JSON (else the "
                                                                  "scenario's trace)")
    prices: PriceFile = Field(None, description="a YAML of GPU-hour prices per system (cost columns); null: GPU-hours "
                                                "only")


# ---- the document --------------------------------------------------------------------------

Name = Annotated[Optional[str], Field(pattern=NAME_PATTERN, max_length=MAX_NAME_CHARS), rule(
    f"a folder name of letters, digits, '.', '_' or '-' (at most {MAX_NAME_CHARS} characters)",
    lambda v: v is None or (isinstance(v, str) and len(v) <= MAX_NAME_CHARS and re.match(NAME_PATTERN, v) is not None))]
WorldSize = Annotated[Union[Annotated[int, Field(ge=1, le=MAX_WORLD_SIZE)], Literal["all"], None], rule(
    f"an integer >= 1 and <= {MAX_WORLD_SIZE}, 'all' or null (every device of the cluster)",
    lambda v: v in (None, "all") or (_is_int(v) and 1 <= v <= MAX_WORLD_SIZE))]
_TIMELINE_TEXT = "a bucket_cap_mb of the sweep, a bucket_cap_mb_list of the sweep, 'best' or a point id"
Timeline = Annotated[Any, rule(_TIMELINE_TEXT,
                                lambda v: v is None or _is_cap(v) or _is_cap_list(v) or (isinstance(v, str) and v != "")),
                     BeforeValidator(lambda v: _whole(v) if is_num(v) else v),
                     WithJsonSchema({"anyOf": [_CAP_SCHEMA, {"type": "null"}, {"type": "string", "minLength": 1},
                                               {"type": "array", "items": _CAP_SCHEMA, "minItems": 1}]})]
FilePath = Annotated[Optional[str], rule("a file path (a non-empty string) or null",
                                          lambda v: v is None or (isinstance(v, str) and v != ""))]


#: sections a file may give as one string: the key of the mapping that string stands for
SHORTHANDS = {"model": "name", "cluster": "topology"}


def _shorthand(section: str) -> BeforeValidator:
    return BeforeValidator(lambda v: {SHORTHANDS[section]: v} if isinstance(v, str) else v)


class ScenarioFile(Schema):
    """A scenario YAML: what to simulate and what to sweep (``ddpsim.pipeline.scenario``)."""

    name: Name = Field(None, description="the report folder reports/<name>/; null: the file's stem")
    description: Annotated[str, BeforeValidator(lambda v: "" if v is None else v), AfterValidator(str.strip)] = Field(
        "", description="free text, shown in the report")
    trace: FilePath = Field(None, description="a trace JSON (relative to the cwd, the scenario's folder or its parent); "
                                              "exactly one of trace and model")
    model: Annotated[Optional[ModelSpec], _shorthand("model")] = Field(
        None, json_schema_extra=_with_shorthand({"type": "string", "minLength": 1}),
        description="a bundled model to capture a trace from (a name, or a mapping); exactly one of trace and model")
    cluster: Annotated[ClusterSpec, _mapping(ClusterSpec), _shorthand("cluster")] = Field(
        json_schema_extra=_with_shorthand({"type": "string", "minLength": 1}),
        description="the cluster: a preset name / topology YAML path, or a mapping")
    world_size: WorldSize = Field(2, description="ranks; null or 'all': every device of the cluster's topology")
    ddp: _section(DdpSection) = Field(default_factory=DdpSection, description="DDP's options, PyTorch's names")
    simulation: _section(SimulationSpec) = Field(default_factory=SimulationSpec, description="the engine's knobs")
    calibration: FilePath = Field(None, description="a calibration JSON written by the executor, an nccl-tests all_reduce_perf log, or null")
    # no sweep (or null): the scenario's own DDP options only (the default-cap point, and the
    # point at ddp.bucket_cap_mb / ddp.bucket_cap_mb_list where given)
    sweep: _section(SweepSection) = Field(default_factory=SweepSection,
                                          description="the values the sweep's points take")
    timelines: Annotated[list[Timeline], Field(max_length=MAX_LIST),
                         rule(f"at most {MAX_LIST} timelines", lambda v: len(v) <= MAX_LIST),
                         BeforeValidator(lambda v: v if isinstance(v, list) else [v])] = Field(
        default_factory=lambda: [None], description=f"sweep points that get a timeline: {_TIMELINE_TEXT}")
    validation: Optional[ValidationSpec] = Field(None, description="what 'ddpsim validate' runs for real, or null")
    cost_model: _section(CostModelSection) = Field(default_factory=CostModelSection, description="GPU cost terms")
    plan: FilePath = Field(None, description="an explicit bucket plan JSON ('ddpsim plan --format json') used at "
                                             "every point instead of DDP's buckets, or null")
    compile: Annotated[Optional[CompileSection], _mapping(CompileSection)] = Field(
        None, description="torch.compile(DDP(model)): {ddp_optimizer, compiled_autograd} (Dynamo's graph split or "
                          "compiled autograd's python reducer); null: eager DDP")
    explore: Optional[ExploreSection] = Field(None, description="the design space of 'ddpsim explore', or null")

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
        nodes = dict(self.sweep.axes())["nodes"]
        if nodes is not None and ws is not None and len(nodes) > 1:
            _fail(("world_size",), ws, "null (every device of the cluster) when sweep.nodes lists several node counts")
        self.timeline_keys()
        if self.compile is not None and self.compile.options().ddp_optimizer:
            # DDPOptimizer refuses a cap under its 1 MiB first bucket (DDPOptimizer.__init__)
            for key, caps in (("bucket_cap_mb", self.sweep.caps(self.ddp)),
                              ("bucket_cap_mb_list", [max(x) for x in self.sweep.cap_lists(self.ddp)])):
                for cap in (c for c in caps if c is not None and c < 1):
                    where = "sweep" if getattr(self.sweep, key) is not None else "ddp"
                    _fail((where, key), cap, "a cap >= 1 MiB with compile.ddp_optimizer (torch's "
                                             "DDPOptimizer asserts its 1 MiB first bucket is not larger)")
        return self

    @property
    def ranks(self) -> int | None:
        """``world_size``; None: every device of the cluster."""
        return None if self.world_size in (None, "all") else self.world_size

    def timeline_keys(self) -> tuple[Any, ...]:
        """``timelines`` as :meth:`ddpsim.pipeline.scenario.Scenario.timeline_points` reads them: caps of
        the sweep, 'best' and point ids (a cap list of the sweep becomes its point id)."""
        caps, cap_lists = self.sweep.caps(self.ddp), self.sweep.cap_lists(self.ddp)
        out: list[Any] = []
        for i, t in enumerate(self.timelines):
            if isinstance(t, list):
                if (cap_list := tuple(_whole(x) for x in t)) not in cap_lists:
                    _fail(("timelines", i), t, _TIMELINE_TEXT)
                t = cap_point_id(None, cap_list)
            elif not isinstance(t, str) and t not in caps:  # a cap (or null)
                listed = ", ".join("null" if c is None else f"{c:g}" for c in caps)
                _fail(("timelines", i), t,
                      f"a bucket_cap_mb of the sweep ({listed}), 'best' or a point id")
            out.append(t)
        return tuple(out)


def json_schema() -> str:
    """``scenarios/schema.json``: :class:`ScenarioFile`'s JSON Schema (draft 2020-12), sorted keys."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **ScenarioFile.model_json_schema(by_alias=True)}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(json_schema(), end="")
