"""The scenario's ``cost_model`` block: which GPU cost terms apply and their values. Every term
(contention prior, gradient copies as kernels, host costs, uncertainty pass) is on by default for an
analytical NCCL model on GPUs and off for gloo and calibrated models, whose measurements replace them;
the section is declared in :class:`ddpsim.pipeline.scenario_schema.CostModelSection` with this module's
defaults. :func:`terms_in_force` is the policy every simulation's inputs go through
(:func:`ddpsim.pipeline.inputs.build_point_inputs`): the interference (given, else the calibration's,
else the contention prior), the gradient-copy bandwidth and kernel floor (the calibration's, else the
device memory's share) and the host costs (the calibration's, else the spec's on an analytical NCCL
model). A calibration is read by its attributes, so this module does not import the calibration layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ddpsim.network import host_costs as hostcost
from ddpsim.network.contention import MEMORY_BOUND_FRACTION, MEMORY_EFFICIENCY, contention_prior
from ddpsim.network.host_costs import HostCosts
from ddpsim.network.interference import Interference

#: retime's RooflineAssumptions.min_kernel_s: a kernel's launch and tail on a GPU
MIN_KERNEL_S = 4e-6

KEYS = ("contention", "memory_bound_fraction", "memory_efficiency", "copy_kernels", "min_kernel_s",
        "host") + hostcost.FIELDS + ("uncertainty",)


@dataclass(frozen=True, kw_only=True)
class CostModelSpec:
    """Switches and values of the GPU cost terms, as the scenario's ``cost_model`` section (which checks
    them) gives them; the host costs, flat keys in the YAML, as one :class:`HostCosts`."""

    contention: bool = True
    memory_bound_fraction: float = MEMORY_BOUND_FRACTION
    memory_efficiency: float = MEMORY_EFFICIENCY
    copy_kernels: bool = True
    min_kernel_s: float = MIN_KERNEL_S
    host: bool = True
    host_costs: HostCosts = field(default_factory=HostCosts)
    uncertainty: bool = True


# ---- which terms apply --------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class TermsInForce:
    """The cost terms of one simulation, as :class:`ddpsim.engine.config.SimConfig` takes them."""

    interference: Interference
    copy_bandwidth_bytes_per_s: float | None
    copy_kernel_floor_s: float
    host_costs: HostCosts | None


def gpu_terms(comm: Any) -> bool:
    """The GPU cost terms apply to the analytical NCCL model only."""
    from ddpsim.network.collective_cost import NcclCommModel

    return isinstance(comm, NcclCommModel)


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
