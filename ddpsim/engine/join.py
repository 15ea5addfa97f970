"""DDP under ``Join`` (uneven inputs): the epoch as phases of active ranks, and Join's collectives.

Source, torch 2.13: ``torch/distributed/algorithms/join.py`` (``Join.notify_join_context``,
``Join.__exit__``, ``_get_num_nonjoined_procs``) and ``torch/nn/parallel/distributed.py``
(``_pre_forward``, ``_find_common_rank``, ``_check_global_requires_backward_grad_sync``,
``_DDPJoinHook``'s ``main_hook`` / ``post_hook``, ``_sync_final_model``). An active rank issues
Join's count, the common rank (with a buffer broadcast) and the grad-sync flag before its
buckets; a joined rank shadows them and every bucket with zeros, so it is simulated as a rank of
compute factor 0. The epoch is a sequence of phases (who is active, for how long), each
simulated over a few steady iterations; a phase's step is the mean gap between its counts' last
arrivals, and ``iteration_mean_s`` becomes the epoch's mean step. docs/MODEL.md, "Join"."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import simpy

from ddpsim.engine.features import BROADCAST_BUCKET_BYTES
from ddpsim.plan.planner import compute_bucket_assignment_by_size

#: ``torch.ones(1)`` / ``torch.zeros(1)``: the count and the grad-sync flag, float32
FLAG_BYTES = 4
#: ``_find_common_rank``'s ``torch.tensor([rank])``: int64
RANK_BYTES = 8
#: simulated iterations shared by the phases after the first (each gets at least one)
TAIL_SIM_ITERATIONS = 64
#: the collectives' names (all ranks issue them alike)
COUNT, COMMON_RANK, GRAD_SYNC, EXIT_COUNT = "join:count", "join:common_rank", "join:grad_sync", "join:exit_count"


@dataclass(frozen=True)
class JoinPhase:
    """Epoch iterations in which the same ranks are active, and the simulated iterations standing for them."""

    active: tuple[int, ...]
    epoch_iterations: int
    first_sim: int
    last_sim: int


@dataclass(frozen=True)
class JoinSchedule:
    """The epoch's phases and the simulated iterations' active-rank mask."""

    batches: tuple[int, ...]
    phases: tuple[JoinPhase, ...]
    warmup: int
    num_iterations: int

    @classmethod
    def of(cls, batches: Sequence[int], num_iterations: int, warmup: int) -> "JoinSchedule":
        """Phase 0 (every rank active) over ``num_iterations`` simulated iterations, of which
        ``warmup`` are left out of its step; each later phase over ``num_iterations - warmup``
        iterations at most, and at most :data:`TAIL_SIM_ITERATIONS` over all of them (a large
        world has as many phases as distinct batch counts)."""
        levels = sorted(set(batches))
        steady = max(1, min(num_iterations - warmup, TAIL_SIM_ITERATIONS // max(1, len(levels) - 1)))
        phases: list[JoinPhase] = []
        prev, sim = 0, 0
        for j, level in enumerate(levels):
            active = tuple(r for r, b in enumerate(batches) if b >= level)
            n = num_iterations if j == 0 else min(steady, level - prev)
            phases.append(JoinPhase(active=active, epoch_iterations=level - prev, first_sim=sim + 1, last_sim=sim + n))
            prev, sim = level, sim + n
        return cls(batches=tuple(batches), phases=tuple(phases), warmup=warmup, num_iterations=sim)

    def mask(self, world_size: int) -> np.ndarray:
        """``mask[k, r]``: 1 when rank ``r`` is active in simulated iteration ``k + 1``, else 0."""
        m = np.zeros((self.num_iterations, world_size))
        for ph in self.phases:
            m[ph.first_sim - 1:ph.last_sim, list(ph.active)] = 1.0
        return m


class JoinProgram:
    """Join's end of the epoch and its figures; a rank's program (:mod:`ddpsim.engine.reducer`)
    issues the count, the common rank and the grad-sync flag of each iteration itself."""

    def __init__(self, schedule: JoinSchedule, eng: Any) -> None:
        self.schedule = schedule
        trace = eng.trace
        sizes = [p.size_bytes for p in trace.params]
        dtypes = [p.dtype for p in trace.params]
        if eng.buffer_buckets:  # _sync_module_states broadcasts the buffers too when they are forward-synced
            sizes += [b.size_bytes for b in trace.buffers]
            dtypes += [b.dtype for b in trace.buffers]
        groups, _ = compute_bucket_assignment_by_size(sizes, dtypes, [BROADCAST_BUCKET_BYTES])
        #: ``_sync_final_model``'s broadcasts: parameters and buffers in 250 MiB buckets per dtype
        self.final_buckets = [sum(sizes[i] for i in g) for g in groups]

    def exit(self, rank: Any) -> Iterator[simpy.Event]:
        """``Join.__exit__`` once every rank has joined: the last count (0 active), then
        ``_sync_final_model``: the common rank and the model's broadcast, each waited."""
        yield from rank.wait(rank.launch("join", EXIT_COUNT, None, FLAG_BYTES), EXIT_COUNT)
        yield from rank.wait(rank.launch("join", "join:final_common_rank", None, RANK_BYTES), "join:final_common_rank")
        c = None
        for j, nbytes in enumerate(self.final_buckets):
            c = rank.launch("join", f"join:sync_final_model[{j}]", None, nbytes, broadcast=True)
        if c is not None:
            yield from rank.wait(c, "join:sync_final_model")

    def figures(self, colls: Sequence[Any]) -> dict[str, Any]:
        """Per phase its mean step; the epoch's loop time, exit and mean step (seconds)."""
        starts = {c.iteration: c.arrival_max_s for c in colls if c.name == COUNT}
        exits = [c for c in colls if c.kind == "join" and c.iteration == self.schedule.num_iterations
                 and c.name.startswith(("join:exit", "join:final", "join:sync_final"))]
        exit_start = min(c.arrival_max_s for c in exits if c.name == EXIT_COUNT)
        starts[self.schedule.num_iterations + 1] = exit_start
        phases = []
        loop_s = 0.0
        for j, ph in enumerate(self.schedule.phases):
            first = ph.first_sim + (self.schedule.warmup if j == 0 else 0)
            gaps = [starts[k + 1] - starts[k] for k in range(first, ph.last_sim + 1)]
            step = float(np.mean(gaps))
            loop_s += step * ph.epoch_iterations
            phases.append({"active_ranks": len(ph.active), "epoch_iterations": ph.epoch_iterations,
                           "simulated_iterations": [ph.first_sim, ph.last_sim], "step_s": step})
        exit_s = max(c.end_s for c in exits) - exit_start
        longest = max(self.schedule.batches)
        return {"batches_per_rank": list(self.schedule.batches), "phases": phases, "epoch_iterations": longest,
                "loop_s": loop_s, "exit_s": exit_s, "epoch_s": loop_s + exit_s, "epoch_mean_step_s": loop_s / longest}


def add_even_baseline(fig: dict[str, Any], even_step_s: float, world_size: int) -> dict[str, Any]:
    """The cost of the uneven inputs against the same samples dealt evenly without Join:
    ``ceil(sum(batches) / world_size)`` iterations (``DistributedSampler`` pads to equal
    shares) of the plain steady step ``even_step_s``."""
    even_iters = math.ceil(sum(fig["batches_per_rank"]) / world_size)
    even_epoch_s = even_iters * even_step_s
    all_active = fig["phases"][0]["step_s"]
    return {**fig, "even_step_s": even_step_s, "even_epoch_iterations": even_iters, "even_epoch_s": even_epoch_s,
            "per_iteration_cost_s": all_active - even_step_s,
            "per_iteration_cost_pct": 100.0 * (all_active - even_step_s) / even_step_s if even_step_s > 0 else 0.0,
            "epoch_cost_pct": 100.0 * (fig["epoch_s"] - even_epoch_s) / even_epoch_s if even_epoch_s > 0 else 0.0}
