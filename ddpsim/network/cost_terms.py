"""The scenario's ``cost_model`` block: which GPU cost terms apply and their values.

Every term is on by default for an analytical NCCL model on GPUs (a preset, or a topology
YAML giving ``sm_count``) and off for gloo and for calibrated models, whose measurements
replace them::

    cost_model:
      contention: true              # compute-communication contention prior (ddpsim.network.contention)
      memory_bound_fraction: 0.5    # backward's memory-bound share (the prior's phi)
      memory_efficiency: 0.75       # HBM share a memory-bound kernel reaches (retime's assumption)
      copy_kernels: true            # gradient copies as kernels: HBM x memory_efficiency, a floor each
      min_kernel_s: 4.0e-6          # the floor: a kernel's launch and tail (retime's assumption)
      host: true                    # CPU timeline with DDP's host costs (ddpsim.network.host_costs)
      pre_forward_s: 100.0e-6       # and their values, seconds
      hook_s_per_param: 8.0e-6
      bucket_launch_s: 5.0e-6
      enqueue_s: 10.0e-6
      uncertainty: true             # re-simulate every point under the uncertain inputs (ddpsim.pipeline.resampling)

A bad value stops with one line naming the key (``cost_model.memory_bound_fraction: 2 is not
accepted; expected a number in [0, 1]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddpsim.network import host_costs as hostcost
from ddpsim.network.contention import MEMORY_BOUND_FRACTION, MEMORY_EFFICIENCY, check_fraction
from ddpsim.errors import InputError
from ddpsim.network.host_costs import HostCosts, check_seconds

#: retime's RooflineAssumptions.min_kernel_s: a kernel's launch and tail on a GPU
MIN_KERNEL_S = 4e-6

KEYS = ("contention", "memory_bound_fraction", "memory_efficiency", "copy_kernels", "min_kernel_s",
        "host") + hostcost.FIELDS + ("uncertainty",)


@dataclass(frozen=True, kw_only=True)
class CostModelSpec:
    """Switches and values of the GPU cost terms (module docstring); the four host costs,
    flat keys in the YAML, are held as one :class:`~ddpsim.network.host_costs.HostCosts`."""

    contention: bool = True
    memory_bound_fraction: float = MEMORY_BOUND_FRACTION
    memory_efficiency: float = MEMORY_EFFICIENCY
    copy_kernels: bool = True
    min_kernel_s: float = MIN_KERNEL_S
    host: bool = True
    host_costs: HostCosts = field(default_factory=HostCosts)
    uncertainty: bool = True

    def __post_init__(self) -> None:
        for k in ("contention", "copy_kernels", "host", "uncertainty"):
            if not isinstance(getattr(self, k), bool):
                raise InputError(f"cost_model.{k}: {getattr(self, k)!r} is not accepted; expected true or false")
        check_fraction(self.memory_bound_fraction, "cost_model.memory_bound_fraction")
        check_fraction(self.memory_efficiency, "cost_model.memory_efficiency")
        if self.memory_efficiency <= 0:
            raise InputError(f"cost_model.memory_efficiency: {self.memory_efficiency!r} is not accepted; expected a number in (0, 1]")
        check_seconds(self.min_kernel_s, "cost_model.min_kernel_s")

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in KEYS if k not in hostcost.FIELDS}
        out.update(self.host_costs.as_dict())
        return out


def parse_cost_model(d: Any, source: str) -> CostModelSpec:
    """Validate a scenario's ``cost_model`` mapping (None: every default)."""
    if d is None:
        return CostModelSpec()
    if not isinstance(d, dict):
        raise InputError(f"{source}: cost_model: {d!r} is not accepted; expected a mapping of {', '.join(KEYS)}")
    for k in d:
        if k not in KEYS:
            raise InputError(f"{source}: cost_model.{k}: unknown key; expected one of {', '.join(KEYS)}")
    try:
        host = HostCosts(**{k: v for k, v in d.items() if k in hostcost.FIELDS})
        return CostModelSpec(**{k: v for k, v in d.items() if k not in hostcost.FIELDS}, host_costs=host)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
