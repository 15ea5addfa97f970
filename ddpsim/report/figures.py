"""The figures of a scenario's summary, typed: :func:`typed` reads ``summary.json``'s document
(:func:`ddpsim.report.summary.summarize`'s, fresh or loaded) into these frozen dataclasses, each
figure's type checked (pydantic); the renderers read only them. Where each section's figures come
from is said on its :class:`Summary` field.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ddpsim.report.ddp_modes import DdpModeFields, frozen


@frozen
class PointFigures:
    point: str
    iteration_p50_s: float
    iteration_p95_s: float
    iteration_mean_s: float
    forward_s: float
    backward_compute_s: float
    exposed_comm_s: float
    exposed_comm_p95_s: float
    comm_s: float
    overlap_ratio: float
    optimizer_s: float
    other_s: float
    first_iteration_s: float | None
    first_iteration_exposed_comm_s: float | None
    rebuild_iteration: int | None
    rebuild_iteration_s: float | None
    num_buckets: int | None
    num_buckets_initial: int | None
    bucket_sizes_bytes: tuple[int, ...] | None
    first_bucket_sizes_bytes: tuple[int, ...] | None
    num_steady_iterations: int
    compute_by_kind_s: dict[str, float] | None
    gain_over_default: float | None = None


#: the figures summary.json keeps of each point (in ``best``, ``default`` and ``points``)
POINT_KEYS = tuple(f.name for f in fields(PointFigures) if f.name not in ("point", "gain_over_default"))


@frozen
class BestFigures(PointFigures):
    bucket_cap_mb: float | None
    bucket_cap_mb_list: tuple[float, ...] | None = None


@frozen
class TraceFigures:
    model: str
    num_params: int
    param_bytes: int
    device: Any                  # device, device_name, batch_size: as the trace's environment gives them
    device_name: Any
    batch_size: Any
    synthetic: bool
    forward_s: float
    backward_s: float
    optimizer_s: float
    path: str | None = None


@frozen
class CapList:
    paste: str
    reproduces_recommended_plan: bool
    reason: str
    iteration_p50_s: float
    gain_over_default: float | None
    gain_over_best_cap: float | None
    best_cap_point: str
    best_cap_mb: float | None
    default_point: str


@frozen
class Recommendation:
    better: bool
    num_buckets: int
    iteration_p50_s: float
    gain_over_best_cap: float
    method: str
    cap_list: CapList | None = None


@frozen
class Sensitivity:
    prior_best_regret: float
    regret_shift: float


@frozen
class Uncertainty:
    tolerance: float
    samples: tuple[str, ...]
    inputs: tuple[str, ...]
    points: tuple[dict[str, Any], ...]
    robust: tuple[str, ...]
    prior_best: str
    safest: str
    safest_regret_max: float
    sensitivity: dict[str, Sensitivity]
    most_sensitive: str | None


@frozen
class MethodError:
    source: str
    level: float
    models: int
    points: int
    band: tuple[float, float] | None
    trend_band: tuple[float, float] | None
    best: str
    best_mean_s: float
    best_range_s: tuple[float, float] | None
    tied: tuple[str, ...]
    note: str | None = None


@frozen
class CompiledPoint:
    point: str
    subgraphs: int | None
    compiled_p50_s: float
    eager_p50_s: float


@frozen
class Compiled:
    mode: str
    eager_best: str
    points: tuple[CompiledPoint, ...]


@frozen
class BucketCostRow:
    point: str
    num_buckets: int
    host_buckets_s: float
    copy_kernels_s: float
    comm_s: float
    exposed_comm_s: float
    iteration_p50_s: float
    gain_over_default: float | None


@frozen
class BucketCosts:
    host_per_bucket_s: float
    host_hooks_s: float
    num_params: int
    rows: tuple[BucketCostRow, ...]


@frozen
class TermsOff:
    off: tuple[str, ...]
    best: str
    best_p50_s: float
    lost: float


@frozen
class TermEffects:
    best: str
    terms: tuple[str, ...]
    moved_by: tuple[str, ...]
    without: tuple[TermsOff, ...]


@frozen
class Cluster:
    topology: str
    nodes: int


@frozen
class Summary(DdpModeFields):
    """``summary.json``: the best point against the default, every point, and the optional
    sections' figures (None where the scenario has none)."""

    scenario: str
    description: str | None
    world_size: int
    backend: str
    cluster: Cluster
    comm_model: dict[str, Any]                  # the comm model's own description, as it words it
    num_points: int
    best: BestFigures
    default: PointFigures
    gain_over_default: float | None
    saved_per_step_s: float
    overlaps: dict[str, dict[int, float]]       # per timeline point and rank written: HTA's overlap
    trace_files: dict[str, tuple[str, ...]]
    recommendation: Recommendation | None       # pipeline.run.recommend's info
    points: tuple[PointFigures, ...]            # point_metrics, with gain_over_default
    warnings: tuple[str, ...] = ()
    cost_terms: tuple[str, ...] = ()
    method_error: MethodError | None = None     # pipeline.method_error.answer
    compile: Compiled | None = None             # pipeline.run.eager_comparison
    bucket_costs: BucketCosts | None = None     # report.summary.bucket_cost_figures
    term_effects: TermEffects | None = None     # pipeline.term_effects.term_effects
    uncertainty: Uncertainty | None = None      # pipeline.resampling.summarize
    trace: TraceFigures | None = None           # the trace's phases (per-step medians)


def typed(cls: type, doc: dict[str, Any]) -> Any:
    """``doc`` (a section of ``summary.json``) as the dataclass ``cls``, its figures' types checked."""
    import pydantic

    return pydantic.TypeAdapter(cls).validate_python(doc)
