"""Scenarios: one YAML file in ``scenarios/`` says what to simulate and what to sweep;
:func:`load_scenario` reads a file (or a bundled name) with ``--set`` overrides, validates it
against :class:`ddpsim.pipeline.scenario_schema.ScenarioFile` (one error line naming the file
and key path) and returns a :class:`Scenario`, a read-only view of it whose points are the
product of the sweep's axes, caps outermost (``null`` cap: DDP's default, always included).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, replace
from functools import cached_property
from os.path import exists, isfile
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from ddpsim.errors import InputError, shorten
from ddpsim.io import read_yaml
from ddpsim.network.cost_terms import CostModelSpec
from ddpsim.pipeline.inputs import PointInputs, build_point_inputs
from ddpsim.pipeline.scenario_schema import NAME_PATTERN, SHORTHANDS, ScenarioFile
from ddpsim.pipeline.specs import Point, crossed, sweep_label
from ddpsim.plan.planner import DDPOptions
from ddpsim.schema import Schema, validate

# ---- the scenario ------------------------------------------------------------------------

@dataclass(frozen=True)
class Scenario:
    """A validated scenario: a read-only view of its file model ``doc`` (its paths resolved and
    its name given by :func:`scenario_from_dict`) that reads each section as the engine's
    builders take it. Build one with :func:`load_scenario` or :func:`scenario_from_dict`; change
    one with :meth:`updated`."""

    doc: ScenarioFile
    #: the file it was read from (relative paths were resolved from it), or None
    path: Path | None = None

    def updated(self, **changes: Any) -> "Scenario":
        """This scenario with top-level keys set; a mapping given for a section sets those keys of
        it (values of the file model's types, not checked again), e.g.
        ``sc.updated(cost_model={"contention": False}, compile=None)``."""
        update = {}
        for key, value in changes.items():
            section = getattr(self.doc, key)
            if isinstance(value, dict) and isinstance(section, Schema):
                assert set(value) <= set(type(section).model_fields), f"{key}: {sorted(value)}"
                value = section.model_copy(update=value)
            update[key] = value
        return Scenario(self.doc.model_copy(update=update), self.path)

    # -- the sections, as the builders read them ---------------------------------------------
    name = property(lambda self: self.doc.name)
    description = property(lambda self: self.doc.description)
    model = property(lambda self: self.doc.model)
    cluster = property(lambda self: self.doc.cluster)
    #: ``world_size``; None: every device of the cluster
    world_size = property(lambda self: self.doc.ranks)
    simulation = property(lambda self: self.doc.simulation)
    validation = property(lambda self: self.doc.validation)
    trace_path = property(lambda self: self.doc.trace and Path(self.doc.trace))
    calibration_path = property(lambda self: self.doc.calibration and Path(self.doc.calibration))
    #: ``plan``: an explicit bucket plan JSON used at every point instead of DDP's buckets
    plan_path = property(lambda self: self.doc.plan and Path(self.doc.plan))
    #: ``ddp.join``: an epoch under Join with uneven inputs (a JoinSpec), or None
    join = property(lambda self: self.doc.ddp.join)

    @cached_property
    def ddp(self) -> DDPOptions:
        return self.doc.ddp.options()

    @cached_property
    def timelines(self) -> tuple[Any, ...]:
        return self.doc.timeline_keys()

    @cached_property
    def cost_model(self) -> CostModelSpec:
        return self.doc.cost_model.spec()

    @cached_property
    def compile(self) -> Any:
        """torch.compile(DDP(model)) (a :class:`ddpsim.plan.compiled.CompileOptions`), or None: eager."""
        return None if self.doc.compile is None else self.doc.compile.options()

    # -- sweep points ------------------------------------------------------------------------
    def own_values(self) -> dict[str, Any]:
        """The scenario's own value of each sweep axis but the cap, in the sweep's order."""
        return {k: self.cluster.nodes if k == "nodes" else getattr(self.doc.ddp, k) for k, _ in self.doc.sweep.axes()}

    def points(self) -> list[Point]:
        """The sweep's points: its axes (the caps and cap lists first, then each other axis, the
        scenario's own value where not swept) crossed as a design space's (:func:`~ddpsim.pipeline.specs.crossed`),
        each naming the cap and the axes with more than one value."""
        sweep, ddp = self.doc.sweep, self.doc.ddp
        swept = dict(sweep.axes())
        dims = [(k, swept[k] or (v,)) for k, v in self.own_values().items()]
        named = (("cap", "cap"), *((k, sweep_label(k)) for k, vals in dims if len(vals) > 1))
        caps = [(c, None) for c in sweep.caps(ddp)] + [(None, lst) for lst in sweep.cap_lists(ddp)]
        return [Point(values=v, named=named) for v in crossed([("cap", caps), *dims])]

    def base_point(self) -> Point:
        """The point holding the scenario's own DDP options at the default cap."""
        pts, own = self.points(), self.own_values()
        return next((p for p in pts if p.is_default_cap and all(p.value(k) == v for k, v in own.items())), pts[0])

    def point_at(self, bucket_cap_mb: float | None, bucket_cap_mb_list: tuple[float, ...] | None = None) -> Point:
        """The point with the scenario's own DDP options at this cap (or cap list)."""
        return self.base_point().with_value("cap", (bucket_cap_mb, None if not bucket_cap_mb_list else tuple(bucket_cap_mb_list)))

    def timeline_points(self, best: Point | None = None) -> list[Point]:
        """Sweep points that get a timeline (``timelines:``), deduplicated, in order."""
        pts = self.points()
        base = self.base_point()
        out: list[Point] = []
        for t in self.timelines:
            if t == "best":
                chosen = best
            elif isinstance(t, str):
                chosen = next((p for p in pts if p.point_id == t), None)
            else:
                caps = [p for p in pts if p.bucket_cap_mb == t and not p.bucket_cap_mb_list]
                chosen = next((p for p in caps if p.with_value("cap", (None, None)) == base), None)
                chosen = chosen or next(iter(caps), None)
            if chosen is not None and chosen not in out:
                out.append(chosen)
        return out

    # -- building the inputs of one point ----------------------------------------------------
    def ddp_options(self, point: Point) -> DDPOptions:
        return replace(self.ddp, bucket_cap_mb=point.bucket_cap_mb, bucket_cap_mb_list=point.bucket_cap_mb_list,
                       find_unused_parameters=point.find_unused_parameters,
                       gradient_as_bucket_view=point.gradient_as_bucket_view)

    def load_trace(self):
        """The scenario's trace: read from ``trace`` or captured from ``model`` (slow)."""
        if self.trace_path is not None:
            from ddpsim.trace.records import load_trace

            return load_trace(self.trace_path)
        from ddpsim.trace.capture import capture_trace
        from ddpsim.trace.models import build_model

        m = self.model
        assert m is not None
        spec = build_model(m.name, **m.options)
        return capture_trace(spec, device=m.device, batch_size=m.batch_size, num_iters=m.iterations,
                             num_warmup=m.warmup, num_threads=m.num_threads,
                             command=f"ddpsim run {self.path or self.name} (model {m.name})")

    @cached_property
    def calibration(self):
        """The scenario's calibration (None without one), read once per Scenario: loading fits the
        probe with the engine, and every point, the CLI's warning and the report ask for it."""
        if self.calibration_path is None:
            return None
        from ddpsim.calibration.loader import load_calibration

        return load_calibration(self.calibration_path)

    def graph(self, nodes: int | None = None):
        """The cluster's topology graph at ``nodes`` nodes (None: a latency + bandwidth model)."""
        if self.cluster.topology is None:
            return None
        from ddpsim.hardware.catalogue import load_catalogue
        from ddpsim.network.topology import resolve_topology

        n = self.cluster.nodes if nodes is None else nodes
        return resolve_topology(self.cluster.topology, num_nodes=n, catalogue=load_catalogue(self.cluster.catalogue),
                                **self.cluster.options)

    def world_size_for(self, graph) -> int:
        """``world_size``, checked against the devices of ``graph`` (None: no devices to count)."""
        if graph is None:
            return self.world_size
        from ddpsim.network.topology import rank_nodes

        avail = len(rank_nodes(graph))
        if self.world_size is None:
            return avail
        if self.world_size > avail:
            raise InputError(f"{self.where()}world_size: {self.world_size} is not accepted; expected at most "
                             f"{avail} (the devices of cluster {self.cluster.topology!r} x {self.cluster.nodes} node(s))")
        return self.world_size

    def build_point(self, point: Point, *, trace=None, calibration=None, graph=None) -> PointInputs:
        """The (trace, plan, comm model, SimConfig) of one sweep point
        (:func:`ddpsim.pipeline.inputs.build_point_inputs`)."""
        return build_point_inputs(self, point, trace=trace, calibration=calibration, graph=graph)

    def where(self) -> str:
        """``<path>: `` for error messages (empty for a scenario built from a mapping without a file)."""
        return f"{self.path}: " if self.path is not None else ""


def resolve_file(text: str | None, base: Path | None, where: str, expected: str) -> Path | None:
    """A file key (``trace``, ``calibration``, ``explore.prices`` ...): None, or a path that exists,
    absolute, else relative to the cwd, the scenario's folder ``base`` or its parent."""
    if text is None:
        return None
    p = Path(text)
    if not p.is_absolute() and base is not None:
        p = next((c for c in (Path.cwd() / p, base / p, base.parent / p) if exists(c)), p)
    if not isfile(p):
        raise InputError(f"{where}: {shorten(text)} does not exist or is not a file; expected {expected}")
    return p


def scenario_from_dict(data: Any, *, source: str = "scenario", path: Path | None = None) -> Scenario:
    """Validate a decoded scenario mapping against :class:`~ddpsim.pipeline.scenario_schema.ScenarioFile`;
    ``source`` prefixes every error message, ``path`` is the file it came from (relative paths
    are resolved from it; each file it names must exist)."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: top level is {type(data).__name__}; expected a mapping of scenario keys "
                         f"({', '.join(ScenarioFile.model_fields)})")
    doc = validate(ScenarioFile, data, source)
    base = path.resolve().parent if path is not None else None
    name = doc.name or (path.stem if path is not None else "scenario")  # no name: the file's stem
    if not re.match(NAME_PATTERN, name):
        raise InputError(f"{source}: name: {shorten(name)} (the file's stem) is not accepted; "
                         "expected a folder name of letters, digits, '.', '_' or '-' (give "
                         "'name:')")

    def path_of(text: str | None, key: str, expected: str) -> str | None:
        found = resolve_file(text, base, f"{source}: {key}", expected)
        return None if found is None else str(found)

    trace = path_of(doc.trace, "trace", "a trace JSON (e.g. traces/mlp.cpu.json)")
    c = doc.cluster  # a topology YAML path and a catalogue path resolved like the other paths
    topology_file = c.topology is not None and c.topology.endswith((".yaml", ".yml"))
    cluster = c.model_copy(update={
        "catalogue": path_of(c.catalogue, "cluster.catalogue", "a hardware catalogue YAML or null"),
        "topology": path_of(c.topology, "cluster.topology", "a preset name or a topology YAML path")
        if topology_file else c.topology})
    calibration = path_of(doc.calibration, "calibration", "a calibration JSON or null")
    plan = path_of(doc.plan, "plan", "a bucket plan JSON ('ddpsim plan --format json') or null")
    return Scenario(doc.model_copy(update={"name": name, "trace": trace, "cluster": cluster,
                                           "calibration": calibration, "plan": plan}), path)


def find_scenario(spec: str | Path | None) -> Path:
    """A scenario path from a path or a bundled name (``default``, ``gpt2-1.5b-h100-8n``...)."""
    spec = "default" if spec is None else str(spec)
    bundled = Path(__file__).resolve().parents[2] / "scenarios"
    for c in (Path(spec), Path("scenarios") / f"{spec}.yaml", bundled / f"{spec}.yaml", bundled / spec):
        if isfile(c):
            return c
    names = sorted(x.stem for x in bundled.glob("*.yaml"))
    raise InputError(f"scenario: {shorten(spec)} does not exist; expected a scenario YAML path or a bundled name ({', '.join(names) or 'none found'})")


def load_scenario(spec: str | Path | None = None, overrides: Sequence[str] = (),
                  build: Callable[..., Any] | None = None) -> Any:
    """Load and validate a scenario YAML (a path or a bundled name; None = the default), with
    ``overrides`` (``KEY=VALUE``, :func:`apply_overrides`) applied before validation by ``build``
    (default :func:`scenario_from_dict`; a design space's:
    :func:`ddpsim.pipeline.explore.space_from_dict`)."""
    path = find_scenario(spec)
    source = str(spec) if spec is not None and isfile(str(spec)) else str(path)
    data = read_yaml(path, "scenario", "a scenario YAML (a mapping of scenario keys)")
    return (build or scenario_from_dict)(apply_overrides(data, overrides), source=source, path=path)


SET_EXAMPLE = "KEY=VALUE with a dotted scenario key and a YAML value, e.g. ddp.bucket_cap_mb=50"


def apply_overrides(data: Any, overrides: Sequence[str]) -> Any:
    """``data`` (a decoded scenario file) with each ``KEY=VALUE`` of ``overrides`` set: ``KEY`` a
    dotted scenario key (``simulation.interference.comm_slowdown``), ``VALUE`` read as YAML
    (``null``, ``50``, ``[1, 25]``, ``{a: 1}``); the schema then checks the result like a file."""
    if not overrides:
        return data
    out = copy.deepcopy(data) if isinstance(data, dict) else data
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise InputError(f"--set: {item!r} is not accepted; expected {SET_EXAMPLE}")
        try:
            value = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError):  # ValueError: an integer of more digits than Python converts
            raise InputError(f"--set {key}: {shorten(text)} is not a YAML value; expected e.g. 50, null, true, "
                             "[1, 25] or {a: 1}") from None
        if isinstance(out, dict):
            set_dotted(out, parts, value)
    return out


def set_dotted(data: dict, parts: list[str], value: Any) -> None:
    """``data`` with the key at path ``parts`` set to ``value``, the sections on the way made
    (null: an empty one; a shorthand string: its mapping)."""
    holder = data
    for i, part in enumerate(parts[:-1]):
        cur = holder.get(part)
        if i == 0 and part in SHORTHANDS and isinstance(cur, str):
            cur = {SHORTHANDS[part]: cur}
        if cur is None:
            cur = {}
        if not isinstance(cur, dict):
            raise InputError(f"--set {'.'.join(parts)}: {'.'.join(parts[:i + 1])} is {cur!r}, not a mapping; "
                             f"expected a key of a section (set {'.'.join(parts[:i + 1])} itself instead)")
        holder[part] = cur
        holder = cur
    holder[parts[-1]] = value
