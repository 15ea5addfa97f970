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
``hook_s_per_param`` (17 us)
    ``Reducer::autograd_hook`` -> ``mark_variable_ready`` -> ``mark_variable_ready_dense``
    (``reducer.cpp``): bookkeeping and one kernel launch (the gradient copied into the
    bucket view with the division fused, ``torch::distributed::reducer::mul_out``).
``bucket_launch_s`` (62 us)
    ``Reducer::mark_bucket_ready`` -> ``all_reduce_bucket`` -> ``run_comm_hook``: a
    ``GradBucket``, the default ``_AllReduceBySumCommHook`` and its future, the dispatch of
    ``c10d::allreduce_``.
``enqueue_s`` (65 us)
    ``ProcessGroupNCCL::collective`` (``ProcessGroupNCCL.cpp``, the profiles'
    ``record_param_comms``): ``syncStream`` (``cudaEventRecord`` + ``cudaStreamWaitEvent``), the
    ``WorkNCCL`` with its CUDA events, ``ncclAllReduce`` (NCCL's host path ``ncclEnqueueCheck`` ->
    ``ncclGroupEndInternal`` -> ``cudaLaunchKernelExC``, the profiles' ``nccl:all_reduce``), the end
    event and the watchdog's queue. Charged to every collective the engine issues (buckets, the
    used map, broadcasts).
``copy_back_s_per_param`` (10 us)
    ``Reducer::finalize_backward`` -> ``finalize_bucket_dense`` -> ``copy_bucket_to_grad``
    (``reducer.cpp``, the profiles' ``copy_bucket_to_grad``): one ``copy_`` launch per parameter,
    from the bucket into its ``.grad``, after the bucket's wait; none with
    ``gradient_as_bucket_view`` (the gradients are views). The device cannot run a gradient's
    copy-out before the CPU has enqueued it.

The last four are measured, not estimated: :mod:`ddpsim.network.host_cost_profiles` takes them
bucket by bucket from the committed torch.profiler traces of DDP (``tests/data/*_ddp_*_rank0``:
ResNet-50 on V100, H100, H200, GPT-2 124M on H100, and both on H200 at a 1 MiB cap, 35 and 50
buckets a step), each the median over the profiles of the profile's median, with the profiler's
own cost per nested event removed (a lower bound of it, so these remain upper bounds) and a
host-bound profile (the A100 one: every op several times slower) left out.
``tests/test_bucket_host_costs.py`` checks every bucket of every profile against them, scaled by
the profile's host speed (its cheapest op against the profiles' median; the committed profiles'
hosts differ by up to 2.5x). One constant for every GPU: the code path is the host's.
``pre_forward_s`` stays an estimate (the profiles' pre-forward holds the buffer broadcast, which
the engine times apart).

All five are uncertain by about a factor of two either way (CPU model, clock, Python
version, profiler); the uncertainty pass of the sweep varies them. A calibration measured on the
machine replaces them (its ``ddp_iteration_overhead_s`` already holds the per-step part).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ddpsim.errors import InputError

#: the defaults of the module docstring, seconds
PRE_FORWARD_S = 100e-6
HOOK_S_PER_PARAM = 17e-6
BUCKET_LAUNCH_S = 62e-6
ENQUEUE_S = 65e-6
COPY_BACK_S_PER_PARAM = 10e-6

def check_seconds(v: Any, key: str) -> None:
    """``v`` must be a finite number of seconds >= 0; else one line naming ``key``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"{key}: {v!r} is not accepted; expected a finite number of seconds >= 0")


FIELDS = ("pre_forward_s", "hook_s_per_param", "bucket_launch_s", "enqueue_s", "copy_back_s_per_param")


@dataclass(frozen=True, kw_only=True)
class HostCosts:
    """CPU seconds per step, per parameter's autograd hook, per bucket, per collective."""

    pre_forward_s: float = PRE_FORWARD_S
    hook_s_per_param: float = HOOK_S_PER_PARAM
    bucket_launch_s: float = BUCKET_LAUNCH_S
    enqueue_s: float = ENQUEUE_S
    copy_back_s_per_param: float = COPY_BACK_S_PER_PARAM

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
                f"per bucket launch, {self.enqueue_s * 1e6:g} us per ProcessGroupNCCL collective, "
                f"{self.copy_back_s_per_param * 1e6:g} us per gradient's copy back at finalize (reducer.cpp, "
                f"ProcessGroupNCCL.cpp; defaults from profiles of other machines, not measured here)")
