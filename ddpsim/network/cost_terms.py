"""The scenario's ``cost_model`` block: which GPU cost terms apply and their values. Every term
(contention prior, gradient copies as kernels, host costs, uncertainty pass) is on by default for an
analytical NCCL model on GPUs and off for gloo and calibrated models, whose measurements replace them;
:class:`CostModelSpec` declares the section's keys
(:class:`ddpsim.pipeline.scenario_schema.CostModelSection`).
:func:`terms_in_force` is the policy every simulation's inputs go through
(:func:`ddpsim.pipeline.inputs.build_point_inputs`): the interference (given, else the calibration's,
else the contention prior), the gradient-copy bandwidth and kernel floor (the calibration's, else the
device memory's share) and the host costs (the calibration's, else the spec's on an analytical NCCL
model). A calibration is read by its attributes, so this module does not import the calibration layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Callable

from pydantic import Field

from ddpsim.network.contention import (MEMORY_BOUND_FRACTION, MEMORY_EFFICIENCY, contention_prior,
                                       gpu_terms)
from ddpsim.network.host_costs import HostCosts
from ddpsim.network.interference import Interference
from ddpsim.schema import is_num, record, rule
from ddpsim.value_types import Bool, Fraction, Seconds

#: retime's RooflineAssumptions.min_kernel_s: a kernel's launch and tail on a GPU
MIN_KERNEL_S = 4e-6



@record("cost_model.")
class CostModelSpec:
    """Switches and values of the GPU cost terms, the scenario's ``cost_model`` section
    (:func:`~ddpsim.value_types.section_of`); the host costs, flat keys in the YAML, as one
    :class:`HostCosts`."""

    contention: Bool = Field(True, description="compute-communication contention prior")
    memory_bound_fraction: Fraction = Field(MEMORY_BOUND_FRACTION,
                                            description="backward's memory-bound share, in [0, 1]")
    memory_efficiency: Annotated[Fraction, rule("a number in (0, 1]", lambda v: not is_num(v) or v > 0)] = \
        Field(MEMORY_EFFICIENCY, description="HBM share a memory-bound kernel reaches, in (0, 1]")
    copy_kernels: Bool = Field(True, description="gradient copies as kernels")
    min_kernel_s: Seconds = Field(MIN_KERNEL_S, description="a kernel's launch and tail, seconds")
    host: Bool = Field(True, description="CPU timeline with DDP's host costs")
    host_costs: HostCosts = Field(default_factory=HostCosts)
    uncertainty: Bool = Field(True, description="re-simulate every point under the uncertain inputs")


# ---- which terms apply --------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class TermsInForce:
    """The cost terms of one simulation, as :class:`ddpsim.engine.config.SimConfig` takes them."""

    interference: Interference
    copy_bandwidth_bytes_per_s: float | None
    copy_kernel_floor_s: float
    host_costs: HostCosts | None


def terms_in_force(spec: CostModelSpec, *, graph: Any, comm: Any, calibration: Any = None,
                   interference: Interference | None = None,
                   copy_bandwidth_bytes_per_s: float | None = None,
                   prior_of: Callable[[CostModelSpec, Any, Any], Any] = contention_prior) -> TermsInForce:
    """The cost terms of a simulation over ``comm`` (module docstring); ``graph`` None: no topology.
    Given ``interference`` / ``copy_bandwidth_bytes_per_s`` override the calibration's and the priors;
    ``prior_of`` derives the contention prior (``contention.contention_prior``, or a cache of it)."""
    from ddpsim.network.topology import MEMORY_BANDWIDTH, rank_nodes

    copy_bw = floor = None
    if calibration is not None:
        interference = interference or getattr(calibration, "interference", None)
        copy_bw = getattr(calibration, "copy_bandwidth_bytes_per_s", None)
        host = getattr(calibration, "host_costs", None) if spec.host else None  # measured, when the file has them
    else:
        host = spec.host_costs if spec.host and gpu_terms(comm) else None  # gloo: none
        if interference is None and spec.contention and graph is not None:
            prior = prior_of(spec, graph, comm)
            interference = prior.interference if prior is not None else None
    # the devices' smallest memory bandwidth (every device has one)
    mem = None if graph is None else float(min(graph.nodes[n][MEMORY_BANDWIDTH] for n in rank_nodes(graph)))
    if calibration is None and copy_bw is None and gpu_terms(comm) and spec.copy_kernels and mem is not None:
        # gradient copies as kernels (retime's roofline assumptions): a share of HBM, a floor each
        copy_bw, floor = mem * spec.memory_efficiency, spec.min_kernel_s
    if copy_bw is None:
        copy_bw = mem
    if copy_bandwidth_bytes_per_s is not None:
        copy_bw = copy_bandwidth_bytes_per_s
    return TermsInForce(interference=interference or Interference(), copy_bandwidth_bytes_per_s=copy_bw,
                        copy_kernel_floor_s=floor or 0.0, host_costs=host)


def explain_terms(spec: CostModelSpec, config: Any, comm: Any, prior: Any = None) -> list[str]:
    """One line per GPU cost term in force in ``config`` (a SimConfig), for a report's setup:
    ``prior``'s derivation (the contention prior the simulation used, or None), the gradient
    copies as kernels, the host costs, PowerSGD's and SyncBatchNorm's synchronisation."""
    out: list[str] = []
    if prior is not None:
        out.append(prior.explain())
    if config.copy_kernel_floor_s > 0:
        out.append(f"gradient copies as kernels: {config.copy_bandwidth_bytes_per_s / 1e9:.0f} GB/s (HBM x "
                   f"{spec.memory_efficiency:g}), at least {config.copy_kernel_floor_s * 1e6:g} us per parameter's "
                   "copy-in and copy-out (retime's roofline assumptions)")
    if config.host_costs is not None:
        out.append(config.host_costs.explain())
    if config.comm_hook == "powersgd" and comm.backend == "nccl":
        out.append("PowerSGD on NCCL: the hook's .then() chain runs at enqueue and its torch.cuda.synchronize stops "
                   "the backward until each bucket's three all-reduces are done (powerSGD_hook.py)")
    if config.sync_batchnorm:
        out.append("SyncBatchNorm: each BatchNorm layer's forward all-gather and backward all-reduce run on the "
                   "process group's stream with the buckets, and the layer waits for them (_functions.py)")
    return out
