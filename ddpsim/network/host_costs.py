"""Host (CPU) costs of DDP on GPUs: what the CPU does per step, per parameter and per bucket.

On a GPU the CPU only enqueues work; it runs ahead of the device unless its own work per
step exceeds the device's. The engine (:mod:`ddpsim.engine.simulate`) keeps one CPU clock per rank
beside the compute stream's: a kernel cannot start before the CPU has enqueued it, and a
collective cannot start before the CPU has issued it. Defaults, from the code paths they
model (PyTorch ``torch/csrc/distributed/c10d/``, NCCL ``src/enqueue.cc``):

``pre_forward_s`` (100 us)
    ``DistributedDataParallel.forward``'s Python before the module runs (``_pre_forward``:
    ``record_function``, ``_rebuild_buckets``, ``prepare_for_forward``, the buffer-sync check)
    and after it (``_post_forward``: ``prepare_for_backward``'s walk of the outputs). The
    executor's calibrations of gloo hosts measure DDP's whole per-iteration fixed cost
    (``ddp_iteration_overhead_s`` in ``reports/cpu-gloo-*``); a server CPU is at the low end
    of what they measure. The engine assumes the CPU meets the device once per step (a
    ``loss.item()``, the optimizer), so this is on the critical path of every step.
``hook_s_per_param`` (8 us)
    ``Reducer::autograd_hook`` -> ``mark_variable_ready`` -> ``mark_variable_ready_dense``
    (``reducer.cpp``): bookkeeping and one kernel launch (the gradient copied into the
    bucket view with the division fused, ``at::mul_out`` / ``copy_``): a dispatcher round
    (~3-5 us) and a ``cudaLaunchKernel`` (~3-5 us).
``bucket_launch_s`` (5 us)
    ``Reducer::mark_bucket_ready`` -> ``all_reduce_bucket`` -> ``run_comm_hook``: a
    ``GradBucket``, the default ``_AllReduceBySumCommHook`` and its future.
``enqueue_s`` (10 us)
    ``ProcessGroupNCCL::collective`` (``ProcessGroupNCCL.cpp``): ``syncStream``
    (``cudaEventRecord`` + ``cudaStreamWaitEvent``), the ``WorkNCCL`` with its CUDA events,
    ``ncclAllReduce`` (NCCL's host path ``ncclEnqueueCheck`` -> ``ncclGroupEndInternal`` ->
    ``cudaLaunchKernelExC``: about 3 us, the gap NVIDIA/nccl#1984 measured between small
    all-reduces with and without CUDA graphs), the end event and the watchdog's queue.
    Charged to every collective the engine issues (buckets, the used map, broadcasts).

All four are uncertain by about a factor of two either way (CPU model, clock, Python
version); the uncertainty pass of the sweep varies them. A calibration measured on the
machine replaces them (its ``ddp_iteration_overhead_s`` already holds the per-step part).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ddpsim.errors import InputError

#: the defaults of the module docstring, seconds
PRE_FORWARD_S = 100e-6
HOOK_S_PER_PARAM = 8e-6
BUCKET_LAUNCH_S = 5e-6
ENQUEUE_S = 10e-6

def check_seconds(v: Any, key: str) -> None:
    """``v`` must be a finite number of seconds >= 0; else one line naming ``key``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"{key}: {v!r} is not accepted; expected a finite number of seconds >= 0")


FIELDS = ("pre_forward_s", "hook_s_per_param", "bucket_launch_s", "enqueue_s")


@dataclass(frozen=True, kw_only=True)
class HostCosts:
    """CPU seconds per step, per parameter's autograd hook, per bucket, per collective."""

    pre_forward_s: float = PRE_FORWARD_S
    hook_s_per_param: float = HOOK_S_PER_PARAM
    bucket_launch_s: float = BUCKET_LAUNCH_S
    enqueue_s: float = ENQUEUE_S

    def __post_init__(self) -> None:
        for k in FIELDS:
            check_seconds(getattr(self, k), f"cost_model.{k}")

    def scaled(self, factor: float) -> "HostCosts":
        """Every cost times ``factor`` (the uncertainty pass)."""
        return HostCosts(**{k: getattr(self, k) * factor for k in FIELDS})

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in FIELDS}

    def explain(self) -> str:
        return (f"host costs on the CPU timeline: {self.pre_forward_s * 1e6:g} us per step before forward, "
                f"{self.hook_s_per_param * 1e6:g} us per parameter's autograd hook, {self.bucket_launch_s * 1e6:g} us "
                f"per bucket launch, {self.enqueue_s * 1e6:g} us per ProcessGroupNCCL collective (reducer.cpp, "
                f"ProcessGroupNCCL.cpp; defaults, not measured here)")
