"""The scenario's ``cost_model`` block: which GPU cost terms apply and their values.

Every term is on by default for an analytical NCCL model on GPUs (a preset, or a topology
YAML giving ``sm_count``) and off for gloo and for calibrated models, whose measurements
replace them::

    cost_model:
      contention: true              # compute-communication contention prior (ddpsim.contention)
      memory_bound_fraction: 0.5    # backward's memory-bound share (the prior's phi)
      memory_efficiency: 0.75       # HBM share a memory-bound kernel reaches (retime's assumption)
      copy_kernels: true            # gradient copies as kernels: HBM x memory_efficiency, a floor each
      min_kernel_s: 4.0e-6          # the floor: a kernel's launch and tail (retime's assumption)
      host: true                    # CPU timeline with DDP's host costs (ddpsim.hostcost)
      pre_forward_s: 100.0e-6       # and their values, seconds
      hook_s_per_param: 8.0e-6
      bucket_launch_s: 5.0e-6
      enqueue_s: 10.0e-6
      uncertainty: true             # re-simulate every point under the uncertain inputs (ddpsim.uncertainty)

A bad value stops with one line naming the key (``cost_model.memory_bound_fraction: 2 is not
accepted; expected a number in [0, 1]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ddpsim import hostcost
from ddpsim.contention import MEMORY_BOUND_FRACTION, MEMORY_EFFICIENCY
from ddpsim.errors import InputError
from ddpsim.hostcost import HostCosts

#: retime's RooflineAssumptions.min_kernel_s: a kernel's launch and tail on a GPU
MIN_KERNEL_S = 4e-6

KEYS = ("contention", "memory_bound_fraction", "memory_efficiency", "copy_kernels", "min_kernel_s",
        "host") + hostcost.FIELDS + ("uncertainty",)


@dataclass(frozen=True, kw_only=True)
class CostModelSpec:
    """Switches and values of the GPU cost terms (module docstring)."""

    contention: bool = True
    memory_bound_fraction: float = MEMORY_BOUND_FRACTION
    memory_efficiency: float = MEMORY_EFFICIENCY
    copy_kernels: bool = True
    min_kernel_s: float = MIN_KERNEL_S
    host: bool = True
    pre_forward_s: float = hostcost.PRE_FORWARD_S
    hook_s_per_param: float = hostcost.HOOK_S_PER_PARAM
    bucket_launch_s: float = hostcost.BUCKET_LAUNCH_S
    enqueue_s: float = hostcost.ENQUEUE_S
    uncertainty: bool = True

    def __post_init__(self) -> None:
        for k in ("contention", "copy_kernels", "host", "uncertainty"):
            if not isinstance(getattr(self, k), bool):
                raise InputError(f"cost_model.{k}: {getattr(self, k)!r} is not accepted; expected true or false")
        _fraction(self.memory_bound_fraction, "cost_model.memory_bound_fraction")
        _fraction(self.memory_efficiency, "cost_model.memory_efficiency")
        if self.memory_efficiency <= 0:
            raise InputError(f"cost_model.memory_efficiency: {self.memory_efficiency!r} is not accepted; expected a number in (0, 1]")
        v = self.min_kernel_s
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise InputError(f"cost_model.min_kernel_s: {v!r} is not accepted; expected a finite number of seconds >= 0")
        self.host_costs()  # validates the four values

    def host_costs(self) -> HostCosts:
        return HostCosts(**{k: getattr(self, k) for k in hostcost.FIELDS})

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in KEYS}


def _fraction(v: Any, key: str) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1:
        raise InputError(f"{key}: {v!r} is not accepted; expected a number in [0, 1]")


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
        return CostModelSpec(**d)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
