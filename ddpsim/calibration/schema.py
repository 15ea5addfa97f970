"""The calibration file's declared format (:func:`ddpsim.calibration.loader.calibration_from_dict`):
every key as ``executor collectives`` writes it (``executor/collectives_step.py``, ``executor/probe.py``),
its type, bound and default, once, and the checks across keys. Times are finite seconds in
``[0, MAX_SECONDS]``, sizes integers of bytes in ``(0, MAX_BYTES]``; the executor's records of how a
figure was measured are free objects.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from ddpsim.errors import require
from ddpsim.formats import CALIBRATION_VERSION
from ddpsim.network.curve_fit import CalibrationPoint
from ddpsim.network.host_costs import HostCosts
from ddpsim.network.interference import Interference, Weighting
from ddpsim.schema import Schema, format_version
from ddpsim.trace.records import MAX_BYTES, MAX_SECONDS, Seconds, Trace
from ddpsim.units import MAX_WORLD_SIZE

#: ``Interference.weighting`` when the file names none: every collective in flight slows compute
#: by the whole ``compute_slowdown`` (on a CPU host even a small gloo all-reduce is CPU work on
#: backward's cores); over the bundled gloo validations it gives a lower median |error| than
#: "bandwidth" under most calibrations (docs/VALIDATION.md, "The interference model").
CALIBRATION_WEIGHTING = "uniform"

PositiveSeconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
#: a difference of two measured times (may be negative)
SignedSeconds = Annotated[float, Field(ge=-MAX_SECONDS, le=MAX_SECONDS, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1, le=1 << 31)]
#: a measured curve, its points in increasing size
Curve = Annotated[list[CalibrationPoint], AfterValidator(lambda ps: sorted(ps, key=lambda p: p.size_bytes))]


class CollectivesDoc(Schema):
    allreduce: Curve
    broadcast: Curve | None = None


class InterferenceDoc(Schema):
    """The executor's interference microbenchmark; an absent slowdown is
    :class:`ddpsim.network.interference.Interference`'s default."""

    compute_slowdown: Annotated[float, Field(ge=1, le=1e3, allow_inf_nan=False)] | None = None
    comm_slowdown: Annotated[float, Field(ge=1, le=1e3, allow_inf_nan=False)] | None = None
    weighting: Weighting | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    def build(self) -> Interference:
        given = self.model_dump(exclude={"details", "weighting"}, exclude_none=True)
        return Interference(**given, weighting=self.weighting or CALIBRATION_WEIGHTING)


class DdpOverheadDoc(Schema):
    """``ddp_overhead``: the tiny model's steps behind ``ddp_iteration_overhead_s``
    (``executor.collectives_step.measure_ddp_overhead``); the loader recomputes the overhead
    from them when ``gradient_bytes``, ``ddp_step_s``, ``bare_step_s`` and ``copy_s`` are given."""

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
    version: format_version(CALIBRATION_VERSION)
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
    #: host costs measured on the machine, an absent one at its default
    host_costs: HostCosts | None = None
    #: all-reduces launched one at a time after compute (none, or at least 2 sizes)
    allreduce_after_compute: Curve | None = None
    #: per-op times of ``ops_per_sample`` all-reduces issued at once (none, or 2+ sizes; with ``comm_threads``)
    allreduce_queued: Curve | None = None
    #: the process group's worker threads (ProcessGroupGloo's ``_threads``), with ``allreduce_queued``
    comm_threads: Annotated[int, Field(ge=1, le=1024)] | None = None
    #: a Python comm hook's host time per bucket beyond its kernels (``studies/comm_hook_cost.py``)
    comm_hook_call_s: Seconds | None = None

    @model_validator(mode="after")
    def _curves(self) -> CalibrationDoc:
        """At least 2 distinct sizes per curve (none for the optional ones), ``comm_threads``
        beside ``allreduce_queued``."""
        curves = {"collectives.allreduce": self.collectives.allreduce, "collectives.broadcast": self.collectives.broadcast,
                  "allreduce_after_compute": self.allreduce_after_compute, "allreduce_queued": self.allreduce_queued}
        for key, pts in curves.items():
            sizes = [p.size_bytes for p in pts or ()]
            accepted = "at least 2 measured sizes" if key == "collectives.allreduce" else "none or at least 2 measured sizes"
            require(len(sizes) >= 2 or (not sizes and key != "collectives.allreduce"), key, f"{len(sizes)} point(s)",
                    accepted)
            require(len(set(sizes)) == len(sizes), key, "a repeated size_bytes", "distinct sizes")
        require(not self.allreduce_queued or self.comm_threads is not None, "comm_threads", self.comm_threads,
                "the process group's worker threads beside allreduce_queued")
        return self
