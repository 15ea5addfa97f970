"""The kind of a device event -- communication, memory, computation or other -- as
HolisticTraceAnalysis classifies kernels (v0.6.0, ``hta/common/types.py``'s grouping patterns,
tried in ``hta/utils/utils.py`` ``get_kernel_type``'s order). One classifier serves the profile's
import, ``ddpsim compare``'s overlap and the Chrome traces ddpsim writes
(:mod:`ddpsim.report.perfetto`), so predicted and measured overlap count the same kernels.
"""

from __future__ import annotations

import re

COMM, MEMORY, COMP, OTHER = "comm", "memory", "comp", "other"

_COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)|(^hip)"
    r"|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)")


def kernel_kind(name: str) -> str:
    """``comm``, ``memory``, ``comp`` or ``other`` for a device event's name: HTA's patterns above, tried in its order."""
    if _COMM.match(name):
        return COMM
    if _MEMORY.match(name):
        return MEMORY
    if not _NOT_COMPUTE.match(name):
        return COMP
    return OTHER
