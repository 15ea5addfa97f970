"""Host (CPU) costs of DDP on GPUs: what the CPU does per step, per parameter and per bucket. The engine
keeps one CPU clock per rank (:mod:`ddpsim.engine.simulate`): a kernel cannot start before the CPU has
enqueued it, nor a collective before it has issued it. The defaults follow the code paths they model
(``torch/csrc/distributed/c10d/``: ``reducer.cpp``, ``ProcessGroupNCCL.cpp``; NCCL ``src/enqueue.cc``):
``pre_forward_s`` (100 us, an estimate: ``DistributedDataParallel.forward``'s
``_pre_forward``/``_post_forward``, on every step's critical path), ``hook_s_per_param`` (17 us:
``Reducer::autograd_hook`` -> ``mark_variable_ready_dense``, the fused ``mul_out`` launch),
``bucket_launch_s`` (62 us: ``mark_bucket_ready`` -> ``all_reduce_bucket`` -> ``run_comm_hook``),
``enqueue_s`` (65 us: ``ProcessGroupNCCL::collective``, ``ncclEnqueueCheck`` -> ``cudaLaunchKernelExC``,
per collective issued) and ``copy_back_s_per_param`` (10 us: ``finalize_bucket_dense`` ->
``copy_bucket_to_grad``; none with ``gradient_as_bucket_view``). The last four are measured bucket by
bucket on the committed torch.profiler traces (:mod:`ddpsim.network.host_cost_profiles`, checked by
``tests/test_bucket_host_costs.py``; one constant for every GPU: the code path is the host's). Each is
uncertain by about x2 (the uncertainty pass varies them); a calibration replaces them. Details:
docs/MODEL.md, "GPU cost terms".
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import Field

from ddpsim.schema import record
from ddpsim.value_types import Seconds

#: the defaults of the module docstring, seconds
PRE_FORWARD_S = 100e-6
HOOK_S_PER_PARAM = 17e-6
BUCKET_LAUNCH_S = 62e-6
ENQUEUE_S = 65e-6
COPY_BACK_S_PER_PARAM = 10e-6


@record("cost_model.")
class HostCosts:
    """CPU seconds per step, per parameter's autograd hook, per bucket, per collective."""

    pre_forward_s: Seconds = Field(PRE_FORWARD_S, description="host seconds per step before forward")
    hook_s_per_param: Seconds = Field(HOOK_S_PER_PARAM, description="host seconds per autograd hook")
    bucket_launch_s: Seconds = Field(BUCKET_LAUNCH_S, description="host seconds per bucket launch")
    enqueue_s: Seconds = Field(ENQUEUE_S, description="host seconds per collective enqueued")
    copy_back_s_per_param: Seconds = Field(COPY_BACK_S_PER_PARAM,
                                           description="host seconds per gradient's copy back at finalize")

    def scaled(self, factor: float) -> "HostCosts":
        """Every cost times ``factor`` (the uncertainty pass)."""
        return HostCosts(**{k: v * factor for k, v in self.as_dict().items()})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def explain(self) -> str:
        return (f"host costs on the CPU timeline: {self.pre_forward_s * 1e6:g} us per step before forward, "
                f"{self.hook_s_per_param * 1e6:g} us per parameter's autograd hook, {self.bucket_launch_s * 1e6:g} us "
                f"per bucket launch, {self.enqueue_s * 1e6:g} us per ProcessGroupNCCL collective, "
                f"{self.copy_back_s_per_param * 1e6:g} us per gradient's copy back at finalize (reducer.cpp, "
                f"ProcessGroupNCCL.cpp; defaults from profiles of other machines, not measured here)")
