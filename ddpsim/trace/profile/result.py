"""What :func:`ddpsim.trace.profile.import_profile` takes from one rank's torch.profiler trace,
read once for both the import (a ddpsim trace) and ``ddpsim compare``: per ``ProfilerStep#N`` a
:class:`ProfileIteration` with its phases, gradients (:class:`HookSpan`), DDP's bucket launches
(:class:`RecordedBucket`) and collective kernels (:class:`CollectiveKernel`). Figures are in
seconds, elements (``numel``) or bytes; times are from their step's CPU start unless named
otherwise (Kineto puts CUPTI's GPU timestamps on the host clock). docs/MODEL.md, "How a profile
becomes a trace"."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from itertools import groupby
from typing import Literal

from ddpsim.trace.records import Trace

#: how the profile's gradients were tied to named parameters
MappingMethod = Literal["factory", "bucket-sizes", "shapes"]


@dataclass(frozen=True, kw_only=True)
class PhaseTimes:
    """One phase (forward, backward or optimizer) of one iteration, on both timelines."""

    cpu_start_s: float  # when the phase began on the CPU (after the step's start)
    cpu_s: float  # its span on the CPU (the thread that ran it; backward: the autograd thread)
    cpu_end_s: float  # when it ended on the CPU (after the step's start)
    gpu_start_s: float | None  # when the first kernel it launched began on the GPU (None: it launched none)
    gpu_s: float  # first start to last end of the non-NCCL kernels it launched: its span on the GPU
    gpu_busy_s: float  # the union of those kernels' intervals (time the GPU was busy with them)
    num_kernels: int  # kernels (and memcpy/memset) it launched


@dataclass(frozen=True, kw_only=True)
class RecordedBucket:
    """One gradient bucket as DDP launched it (a ``record_param_comms`` all-reduce in the backward)."""

    index: int  # launch position in its iteration (DDP's reducer order: bucket 0 first)
    numel: int  # ``In msg nelems``
    dtype: str  # the profile's dtype name mapped to ddpsim's (``Float`` -> ``float32``)
    size_bytes: int  # ``numel`` times the element size
    launch_cpu_s: float  # when the all-reduce was launched on the CPU (``record_param_comms`` start)
    num_grads: int  # AccumulateGrad ops since the previous launch (the gradients that made it ready)
    #: when the ``c10d::allreduce_`` op holding it began on the CPU (else the ``record_param_comms``'s start)
    op_start_s: float
    op_s: float  # that op's time on the CPU (the dispatcher, ProcessGroupNCCL's collective path)
    #: the ``record_param_comms``'s own time (``ProcessGroupNCCL::collective``: sync, ``ncclAllReduce``)
    enqueue_s: float
    process_group: str | None = None  # its ``Process Group Name`` (torch 2.3 on; None: not recorded)


@dataclass(frozen=True, kw_only=True)
class CollectiveKernel:
    """One NCCL (or RCCL) kernel on the GPU timeline."""

    iteration: int  # position of its iteration in :attr:`ProfileImport.iterations`
    collective: str  # ``allreduce``, ``broadcast``, ... (the kernel's ``Collective name`` arg, else from its name)
    bucket_index: int | None  # the gradient bucket it reduces (None: not a backward bucket)
    numel: int | None  # elements (``In msg nelems``); None where the profile does not record them
    dtype: str  # ddpsim's dtype name
    start_s: float  # kernel start after the step's start
    duration_s: float  # kernel duration: the transfer plus any wait for the other ranks
    algorithm: str | None  # as :func:`~ddpsim.trace.profile.nccl_kernels.ran` reads it (None: several)
    protocol: str | None  # likewise (never the one in the kernel's name)
    ran: str  # what the launch can have run, as text (``ring/simple``, ``ring/ll128 or nvls/simple``)
    channels: int | None  # the launch grid's x dimension (NCCL launches one block per channel)
    launch_cpu_s: float | None  # when the CPU launched it (the cuda runtime call tied by correlation id)
    name: str  # the kernel's name
    phase: str | None  # the phase whose CPU window holds its launch (None: outside them)

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True, kw_only=True)
class StepHostTimes:
    """What the host (CPU) paid in one iteration, from the profile's CPU ops (the measured times; the
    model is :class:`ddpsim.network.host_costs.HostCosts`)."""

    accumulate_grad_s: float  # total of the backward's ``torch::autograd::AccumulateGrad`` ops
    num_accumulate_grad: int  # their count (one per parameter that got a gradient)
    reducer_hook_s: float  # total of DDP's per-gradient hook op ``torch::distributed::reducer::mul_out``
    bucket_launch_s: float  # total of the ``c10d::allreduce_`` ops (bucket launches) in the backward
    num_bucket_launches: int  # their count
    copy_bucket_to_grad_s: float  # total of ``torch.distributed.ddp.reducer::copy_bucket_to_grad`` (finalize)
    kernel_launch_s: float  # total of the calls that launch device work in the step (``steps.KERNEL_LAUNCHES``)
    num_kernel_launches: int  # their count
    sync_wait_s: float  # total of blocking runtime calls (``steps.SYNC_CALLS``): the CPU waiting for the GPU


@dataclass(frozen=True, kw_only=True)
class HookSpan:
    """One ``AccumulateGrad`` of the backward and DDP's hook after it (seconds from the step start)."""

    op_end_s: float  # the AccumulateGrad op ended: the gradient exists, DDP's hook runs next
    start_s: float  # start and end of its ``evaluate_function`` (hook and any bucket launch included)
    end_s: float
    op_s: float  # the AccumulateGrad op's own time
    launches: int  # bucket all-reduces (``c10d::allreduce_``) launched inside it
    gpu_ready_s: float | None  # the device finished what was launched before the op ended (None: nothing was)


@dataclass(frozen=True, kw_only=True)
class ProfileIteration:
    """One ``ProfilerStep#N`` of the profile (the fields from ``module_start_s`` on, its boundaries
    on both timelines: :func:`ddpsim.trace.profile.critical.critical_fields`)."""

    step: int  # ``N``
    start_us: float  # the step's start in the profile's own clock (microseconds, as in the file)
    step_s: float  # the step's CPU span
    gpu_step_s: float  # first to last kernel end of everything the step launched (NCCL included)
    forward: PhaseTimes
    backward: PhaseTimes
    optimizer: PhaseTimes
    grad_ready_s: tuple[float, ...]  # per AccumulateGrad (ready order): the trace's gradient-ready times
    buckets: tuple[RecordedBucket, ...]  # in launch order
    host: StepHostTimes
    collectives: tuple[CollectiveKernel, ...]  # the step's NCCL kernels, in start order
    zero_grad_s: float  # the ``Optimizer.zero_grad`` op's time (0 without one)
    optimizer_annotated: bool  # an ``Optimizer.step`` annotation (else: the backward's end to the step's end)
    module_start_s: float  # the module's forward start on the CPU (after DDP's pre-forward)
    model_backward_cpu_end_s: float  # the model's last autograd op's end (DDP's finalize follows)
    gpu_done: dict[str, float | None]  # per boundary, when the device finished the work launched before it
    hooks: tuple[HookSpan, ...]  # per AccumulateGrad, its hook
    intervals: tuple[tuple[float, float, str], ...]  # every device interval ``(start_s, end_s, kind)``
    inherited_s: float = 0.0  # device work inherited from before the profile

    @property
    def optimizer_cpu_end_s(self) -> float:
        """The optimizer's end on the CPU: the annotation's end, else the backward's."""
        return self.optimizer.cpu_end_s if self.optimizer_annotated else self.backward.cpu_end_s

    @functools.cached_property
    def allreduces(self) -> tuple[CollectiveKernel, ...]:
        """The all-reduce kernels launched in the backward (buckets and the used map), in start order."""
        return tuple(c for c in self.collectives if c.phase == "backward" and c.collective == "allreduce")


@dataclass(frozen=True, kw_only=True)
class ProfileEnvironment:
    """What the profile says about the run (None where it does not say)."""

    gpu_name: str | None
    num_sms: int | None
    world_size: int | None
    rank: int | None
    backend: str | None
    nccl_version: str | None
    batch_size: int | None


@dataclass(frozen=True, kw_only=True)
class ParamMapping:
    """How the profile's gradients were tied to parameters, and how sure that is."""

    method: MappingMethod  # :mod:`ddpsim.trace.profile.mapping`
    confidence: str  # ``exact``, ``count``, ``shapes``, ``bucket-totals`` or ``order-only``
    detail: str  # one line saying what was matched


@dataclass(frozen=True, kw_only=True)
class ProfileImport:
    """Everything taken from one rank's profile."""

    trace: Trace  # the phases on the GPU timeline; its ``environment`` says it came from a profile and how
    source: str  # the profile's path as given
    environment: ProfileEnvironment  # GPU, world size, rank, NCCL version, batch size
    iterations: tuple[ProfileIteration, ...]  # the profile's steps, in order
    mapping: ParamMapping  # how gradients were tied to parameters
    model: str | None  # the ``--model`` factory used, or None
    notes: tuple[str, ...] = ()  # facts the import could not settle (one line each)
    ddp_modules: int = 1  # ``DistributedDataParallel.forward`` calls in the last step (each its own buckets)

    @property
    def collectives(self) -> tuple[CollectiveKernel, ...]:
        """Every NCCL kernel of the measured steps, step by step, in start order."""
        return tuple(c for it in self.iterations for c in it.collectives)

    def bucket_kernels(self) -> dict[int, list[CollectiveKernel]]:
        """Per bucket (launch order), its all-reduce kernels over the steps, in step order."""
        kernels = sorted((c for c in self.collectives if c.bucket_index is not None),
                         key=lambda c: (c.bucket_index, c.iteration))
        return {b: list(cs) for b, cs in groupby(kernels, key=lambda c: c.bucket_index)}

    def recorded_bucket_numels(self) -> tuple[int, ...]:
        """The last iteration's bucket sizes in elements, in launch order (DDP's rebuilt plan)."""
        return tuple(b.numel for b in self.iterations[-1].buckets)
