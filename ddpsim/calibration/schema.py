"""The calibration file's declared format: the pydantic schema :func:`ddpsim.calibration.loader.calibration_from_dict` validates.

Every key as ``executor collectives`` writes it (``executor/collectives_step.py``,
``executor/probe.py``): its type, bound and default, once. Times are finite seconds in
``[0, MAX_SECONDS]``, sizes integers of bytes in ``(0, MAX_BYTES]``; the executor's records of how
a figure was measured are free objects. Checks across keys are the loader's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ddpsim.network.host_costs import HostCosts
from ddpsim.network.interference import WEIGHTINGS
from ddpsim.schema import Schema, format_version
from ddpsim.trace.records import MAX_BYTES, MAX_SECONDS, Trace
from ddpsim.units import MAX_WORLD_SIZE

FORMAT = "ddpsim-calibration"
VERSION = 1

Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
#: a difference of two measured times (may be negative)
SignedSeconds = Annotated[float, Field(ge=-MAX_SECONDS, le=MAX_SECONDS, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1, le=1 << 31)]


class PointDoc(Schema):
    """One measured size of a curve: its mean time and spread (``executor.runtime.stats``)."""

    size_bytes: Annotated[int, Field(gt=0, le=MAX_BYTES)]
    time_s: PositiveSeconds
    median_s: Seconds | None = None
    p10_s: Seconds | None = None
    p90_s: Seconds | None = None
    num_samples: Count | None = None
    ops_per_sample: Count | None = None
    gap_ms: Annotated[float, Field(ge=0, le=MAX_SECONDS * 1e3, allow_inf_nan=False)] | None = None


class CollectivesDoc(Schema):
    allreduce: list[PointDoc]
    broadcast: list[PointDoc] | None = None


class InterferenceDoc(Schema):
    """The executor's interference microbenchmark; an absent slowdown is
    :class:`ddpsim.network.interference.Interference`'s default."""

    compute_slowdown: Annotated[float, Field(ge=1, le=1e3, allow_inf_nan=False)] | None = None
    comm_slowdown: Annotated[float, Field(ge=1, le=1e3, allow_inf_nan=False)] | None = None
    weighting: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("weighting")
    @classmethod
    def _weighting(cls, v: str | None) -> str | None:
        if v is not None and v not in WEIGHTINGS:
            raise ValueError(f"expected one of {', '.join(WEIGHTINGS)}")
        return v


class CalibratedHostCosts(Schema):
    """Host costs measured on the machine; an absent one is :class:`ddpsim.network.host_costs.HostCosts`' default."""

    pre_forward_s: Seconds | None = None
    hook_s_per_param: Seconds | None = None
    bucket_launch_s: Seconds | None = None
    enqueue_s: Seconds | None = None
    copy_back_s_per_param: Seconds | None = None

    def build(self) -> HostCosts:
        return HostCosts(**{k: v for k, v in self.model_dump().items() if v is not None})


class DdpOverheadDoc(Schema):
    """``ddp_overhead``: the tiny model's steps behind ``ddp_iteration_overhead_s``
    (``executor.collectives_step.measure_ddp_overhead``); the loader recomputes the overhead
    from them when all four step figures (:meth:`step_figures`) are given."""

    model: str | None = None
    gradient_bytes: Annotated[int, Field(ge=0, le=MAX_BYTES)] | None = None
    bare_step_s: Seconds | None = None
    ddp_step_s: Seconds | None = None
    ddp_step_p10_s: Seconds | None = None
    ddp_step_p90_s: Seconds | None = None
    allreduce_curve_s: Seconds | None = None
    copy_s: Seconds | None = None
    raw_overhead_s: SignedSeconds | None = None
    num_steps: Count | None = None
    rounds: Count | None = None

    def step_figures(self) -> tuple[int, float, float, float] | None:
        """``(gradient_bytes, ddp_step_s, bare_step_s, copy_s)``, or None when one is absent."""
        figures = (self.gradient_bytes, self.ddp_step_s, self.bare_step_s, self.copy_s)
        return None if any(v is None for v in figures) else figures  # type: ignore[return-value]


class ProbeDoc(Schema):
    """``interference_probe``: the probe model's trace and its DDP steps (``executor/probe.py``)."""

    model: str | None = None
    model_args: dict[str, Any] = Field(default_factory=dict)
    batch_size: Count | None = None
    bucket_cap_mb: Annotated[float, Field(gt=0, le=1 << 20, allow_inf_nan=False)]
    rounds: Count | None = None
    iterations: Count | None = None
    warmup: Annotated[int, Field(ge=0, le=1 << 31)] | None = None
    ddp_step_s: PositiveSeconds
    ddp_step_samples_s: list[PositiveSeconds] | None = None
    ddp_phase_samples_s: dict[str, list[Seconds]] | None = None
    host_other_pct: Annotated[float, Field(ge=-100, le=100, allow_inf_nan=False)] | None = None
    host_steal_pct: Annotated[float, Field(ge=-100, le=100, allow_inf_nan=False)] | None = None
    trace: Trace


class CalibrationDoc(Schema):
    """A calibration file (``format`` ``ddpsim-calibration``, ``version`` 1)."""

    format: Literal["ddpsim-calibration"]
    version: format_version(VERSION)
    backend: Literal["nccl", "gloo"]
    world_size: Annotated[int, Field(ge=2, le=MAX_WORLD_SIZE)]
    device: str = ""
    environment: dict[str, Any] = Field(default_factory=dict)
    collectives: CollectivesDoc
    interference: InterferenceDoc | None = None
    copy_bandwidth_bytes_per_s: Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)] | None = None
    ddp_iteration_overhead_s: Seconds | None = None
    ddp_overhead: DdpOverheadDoc | None = None
    broadcast_per_tensor_s: Seconds | None = None
    buffer_broadcast: dict[str, Any] | None = None
    interference_probe: ProbeDoc | None = None
    host_costs: CalibratedHostCosts | None = None
    allreduce_after_compute: list[PointDoc] | None = None
    allreduce_queued: list[PointDoc] | None = None
    comm_threads: Annotated[int, Field(ge=1, le=1024)] | None = None
    #: a Python comm hook's host time per bucket beyond its kernels (``studies/comm_hook_cost.py``)
    comm_hook_call_s: Seconds | None = None

