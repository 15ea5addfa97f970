"""The comm model's declared capabilities (:class:`ddpsim.network.comm_model.CommModel`), read once
per simulation and checked (an :class:`~ddpsim.errors.InputError` names the model and the
capability): ``comm_lanes`` / ``concurrent_rate`` (ProcessGroupGloo's worker threads,
``torch/csrc/distributed/c10d/ProcessGroupGloo.cpp``), ``idle_launch_extra_s``, DDP's fixed
costs ``iteration_overhead_s`` and ``broadcast_per_tensor_s`` (``torch/nn/parallel/distributed.py``
``_pre_forward`` / ``_sync_buffers``), ``ddp_forward_factor``, and ``backend == "nccl"`` (a comm
hook's futures complete at enqueue). docs/MODEL.md, "The comm model's capabilities"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ddpsim.engine.config import checked_s
from ddpsim.errors import InputError
from ddpsim.network.comm_model import CommModel


@dataclass(frozen=True, kw_only=True)
class EngineCapabilities:
    """A comm model's capabilities as the engine uses them."""

    #: collectives of the process group that progress at once; 1: one in-order stream
    lanes: int
    concurrent_rate: Callable[[str | None, int, int], float]
    idle_launch_extra_s: Callable[[int], float] | None
    ddp_forward_factor: float
    iteration_overhead_s: float
    broadcast_per_tensor_s: float
    #: ProcessGroupNCCL: a collective's future completes at enqueue, so a comm hook's whole
    #: ``.then()`` chain runs on the CPU inside the autograd hook (gloo's completes when done)
    futures_at_enqueue: bool


def _seconds(comm: CommModel, name: str, v: object) -> float:
    """A capability in seconds (None: 0), checked."""
    return checked_s(0.0 if v is None else v, f"comm model {type(comm).__name__}.{name}:")


def engine_capabilities(comm: CommModel) -> EngineCapabilities:
    """``comm``'s capabilities, checked (an InputError names the first bad one)."""
    overhead_s = _seconds(comm, "iteration_overhead_s", comm.iteration_overhead_s)
    per_tensor_s = _seconds(comm, "broadcast_per_tensor_s", comm.broadcast_per_tensor_s)
    ff = checked_s(comm.ddp_forward_factor, f"comm model {type(comm).__name__}.ddp_forward_factor:", True)
    idle = comm.idle_launch_extra_s
    lanes = comm.comm_lanes
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
        raise InputError(f"comm model {type(comm).__name__}.comm_lanes: {lanes!r} is not accepted; expected an integer >= 1")
    return EngineCapabilities(lanes=lanes, concurrent_rate=comm.concurrent_rate,
                              idle_launch_extra_s=idle if callable(idle) else None,
                              ddp_forward_factor=ff, iteration_overhead_s=overhead_s,
                              broadcast_per_tensor_s=per_tensor_s, futures_at_enqueue=comm.backend == "nccl")
