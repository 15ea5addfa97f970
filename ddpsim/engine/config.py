"""What a simulation is asked to do besides the trace, the plan and the comm model; apart from the
engine so that scenarios, sweeps and validation build configs without importing SimPy."""

from __future__ import annotations

from dataclasses import field, replace
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, InstanceOf, SkipValidation

from ddpsim.errors import InputError
from ddpsim.schema import is_num, record, rule
from ddpsim.network.host_costs import HostCosts
from ddpsim.network.interference import Interference
from ddpsim.trace.records import COMPUTE_STATISTICS
from ddpsim.units import MAX_ITERATIONS, MAX_SEED, MAX_WORLD_SIZE
from ddpsim.value_types import MAX_POWERSGD_RANK, MAX_PROCESS_GROUPS, Bool, Hook, Int, Jitter, Seconds, Stragglers

#: a validation scores the mean step, so it predicts from the trace's mean phases and ready
#: times (``SimConfig.compute_statistic``): with the medians, slow iterations that the measured
#: means hold would be left out of the prediction (``studies/estimator.py``)
VALIDATION_STATISTIC = "mean"
#: the trace statistic each compute time is taken from
ComputeStatistic = Annotated[Literal[COMPUTE_STATISTICS], rule(f"one of {', '.join(COMPUTE_STATISTICS)}",
                                                               lambda v: v in COMPUTE_STATISTICS)]


@record("powersgd.")
class PowerSGDState:
    """PowerSGD's ``PowerSGDState`` arguments
    (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook), as the scenario's
    ``ddp.powersgd`` takes them (:func:`~ddpsim.value_types.section_of`)."""

    matrix_approximation_rank: Int(1, MAX_POWERSGD_RANK) = Field(
        1, description=f"the rank of the low-rank approximation, 1 to {MAX_POWERSGD_RANK}")
    start_powerSGD_iter: Int(0, MAX_ITERATIONS) = Field(
        0, description=f"iterations of plain all-reduce first, 0 to {MAX_ITERATIONS}")


@record("")
class SimConfig:
    """Knobs of one simulated run."""

    world_size: Int(1, MAX_WORLD_SIZE) = 2  # number of ranks in the process group
    #: synchronised iterations to simulate (>= 1); iteration 1 is DDP's first (single-bucket) iteration
    num_iterations: Int(1, MAX_ITERATIONS) = 4
    #: warm-up iterations left out of the steady figures; None: through the first iteration on the
    #: rebuilt buckets (1 if never rebuilt)
    num_warmup_iterations: Int(0, MAX_ITERATIONS, null=True) = None
    seed: Int(0, MAX_SEED) = 0  # seeds every random draw (jitter). Same inputs and seed -> same result
    comm_hook: Hook = "none"  # one of :data:`~ddpsim.value_types.COMM_HOOKS`
    #: comm_hook powersgd's arguments (plain all-reduce before ``start_powerSGD_iter``)
    powersgd: PowerSGDState = field(default_factory=PowerSGDState)
    #: gradient-accumulation micro-steps under ``no_sync()`` before each synchronised step (0 = none)
    no_sync_steps: Int(0, MAX_ITERATIONS) = 0
    #: "trace" (each rank's compute drawn from the trace's measured spread), "none", or a float: the coefficient of
    #: variation of a lognormal factor
    jitter: Jitter = "trace"
    #: rank -> slowdown factor (>= 1) applied to that rank's compute
    stragglers: Stragglers = field(default_factory=dict)
    interference: SkipValidation[Interference] = field(default_factory=Interference)  # see :class:`Interference`
    #: device memory bandwidth of the gradients' copies (each reads and writes); None: free
    copy_bandwidth_bytes_per_s: Annotated[Optional[Union[int, float]], rule(
        "a number > 0 or null", lambda v: v is None or (is_num(v) and v > 0))] = None
    #: ranks that behave alike (same jitter class) are represented by one simulated process; None lets the engine
    #: choose
    rank_group_size: Int(1, MAX_WORLD_SIZE, null=True) = None
    #: the least a gradient-copy kernel takes (launch and tail on a GPU: one kernel per parameter for copy-in,
    #: zero-fill and copy-out); 0 = none
    copy_kernel_floor_s: Seconds = 0.0
    #: CPU costs per step, hook, bucket and collective on a CPU timeline per rank (:mod:`ddpsim.network.host_costs`);
    #: None = the CPU is never the bottleneck
    host_costs: Optional[InstanceOf[HostCosts]] = None
    #: seconds a Python comm hook costs the backward per bucket beyond its kernels (the call, the future, the ``.then``
    #: callback; a calibration's ``comm_hook_call_s``); 0 = not charged. Only with ``comm_hook`` other than none
    comm_hook_call_s: Seconds = 0.0
    #: the model's BatchNorm layers are ``nn.SyncBatchNorm`` (``convert_sync_batchnorm``): their forward all-gathers
    #: and backward all-reduces run on the process group's stream (the engine finds the layers by their
    #: ``running_mean``/``running_var`` buffers in the trace)
    sync_batchnorm: Bool = False
    #: how the trace's iterations give each compute phase and each gradient-ready time: ``"median"`` (robust to an
    #: outlying iteration; default) or ``"mean"`` (what a mean step adds up: ``ddpsim validate`` predicts its measured
    #: mean steps with it)
    compute_statistic: ComputeStatistic = "median"
    #: communicators DDP's collectives are dealt to in turn (``_round_robin_process_groups``;
    #: :mod:`ddpsim.engine.process_groups`); 1 = one
    process_groups: Int(1, MAX_PROCESS_GROUPS) = 1
    #: per-rank batch counts of an epoch under ``Join`` (:mod:`ddpsim.engine.join`); None: no Join
    join_batches: Optional[tuple[Any, ...]] = None

    def for_validation(self) -> "SimConfig":
        """This config as a validation predicts with it: :data:`VALIDATION_STATISTIC`."""
        return replace(self, compute_statistic=VALIDATION_STATISTIC)

    def __post_init__(self) -> None:
        if self.num_warmup_iterations is not None and self.num_warmup_iterations >= self.num_iterations:
            raise InputError(f"num_warmup_iterations: {self.num_warmup_iterations} is not accepted; expected fewer than num_iterations ({self.num_iterations})")
        for r in self.stragglers:
            if r >= self.world_size:
                raise InputError(f"stragglers: rank {r!r} is not accepted; expected a rank in [0, {self.world_size})")
        b = self.join_batches
        if b is not None:
            if len(b) != self.world_size or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in b):
                raise InputError(f"join_batches: {b!r} is not accepted; expected {self.world_size} batch counts "
                                 "(one per rank), each an integer >= 1")
            if self.no_sync_steps:
                raise InputError(f"join_batches: {list(b)!r} is not accepted with no_sync_steps "
                                 f"{self.no_sync_steps}; expected no_sync_steps 0 (Join under no_sync is not modelled)")


def checked_s(v: object, where: str, positive: bool = False) -> float:
    """``v`` as a float when it is a finite number of seconds >= 0 (``positive``: a finite number
    > 0); else an InputError ``"<where> <v> is not accepted; expected ..."``."""
    if not is_num(v) or (v <= 0 if positive else v < 0):
        raise InputError(f"{where} {v!r} is not accepted; expected a finite number {'> 0' if positive else 'of seconds >= 0'}")
    return float(v)
