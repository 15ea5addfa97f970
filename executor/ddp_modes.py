"""Real DDP run the two ways ``ddpsim.engine.join`` and the engine's round-robin groups
(``GroupStreams``) model.

N round-robin groups (a run mode of ``--options``): torch 2.13 has neither the round-robin
wrapper of ``distributed_c10d.py`` nor ``ProcessGroupRoundRobin`` (removed by pytorch/pytorch#132888), so the same dealing is a comm
hook: N extra groups of the backend (``dist.new_group``, each with its own communicator or, on
gloo, its own worker threads), and the hook sends its ``k``-th call's all-reduce to group
``k mod N`` after dividing the bucket by the world size (what DDP's default ``allreduce_hook``
does, ``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py``).

Uneven inputs (a run mode of ``--options``, one batch count per rank): every rank trains its
own number of batches inside ``Join([ddp, recorder])`` (``torch/distributed/algorithms/join.py``), ``ddp.join()``'s context
with a second joinable: its ``main_hook`` runs after DDP's shadow in each of a joined rank's
iterations of ``Join.__exit__``, and records when each ends; its ``post_hook`` runs after
``_sync_final_model``. So a joined rank's iteration ``i`` lasts from the end of its shadow of
``i - 1`` (or of its last own step) to the end of its shadow of ``i``, and every rank has one
sample per iteration of the longest rank: the job's step per iteration is their mean, as for
an even run (``ddpsim.formats.step_times``).
"""

from __future__ import annotations

from typing import Any



class RoundRobin:
    """N process groups dealt to in turn, one call after another (``ProcessGroupRoundRobin::next``)."""

    def __init__(self, backend: str, n: int) -> None:
        import torch.distributed as dist

        self.groups = [dist.new_group(backend=backend) for _ in range(n)]
        self.calls = 0

    def next(self) -> Any:
        g = self.groups[self.calls % len(self.groups)]
        self.calls += 1
        return g

    def hook(self, world_size: int):
        """A DDP comm hook: the bucket divided by the world size, all-reduced on the next group."""
        import torch
        import torch.distributed as dist

        def round_robin_allreduce_hook(state, bucket):
            buf = bucket.buffer().div_(world_size)
            fut = dist.all_reduce(buf, group=self.next(), async_op=True).get_future()
            return fut.then(lambda f: f.value()[0])

        round_robin_allreduce_hook.__annotations__ = {"state": object, "bucket": dist.GradBucket,
                                                      "return": torch.futures.Future[torch.Tensor]}
        return round_robin_allreduce_hook


def join_recorder(ddp: Any, clock: Any) -> Any:
    """A :class:`~torch.distributed.algorithms.Joinable` beside ``ddp`` that records when each of
    this rank's shadow iterations ends (``marks``) and when the final sync ends (``exit_s``)."""
    from torch.distributed.algorithms import Joinable, JoinHook

    class _Hook(JoinHook):
        def __init__(self, rec: Any) -> None:
            self.rec = rec

        def main_hook(self) -> None:
            self.rec.marks.append(clock())

        def post_hook(self, is_last_joiner: bool) -> None:
            self.rec.exit_s = clock()

    class Recorder(Joinable):
        def __init__(self) -> None:
            super().__init__()
            self.marks: list[float] = []
            self.exit_s = None

        def join_hook(self, **kwargs: Any) -> JoinHook:
            return _Hook(self)

        @property
        def join_device(self) -> Any:
            return ddp.join_device

        @property
        def join_process_group(self) -> Any:
            return ddp.join_process_group

    return Recorder()


def join_steps(rt: Any, model: Any, opt: Any, wl: Any, batches: list[int], *, label: str) -> tuple[list[dict[str, float]], float]:
    """This rank's ``batches[rank]`` steps under Join, then its shadow iterations: one sample per
    iteration of the longest rank (a joined rank's: its shadow, phases 0); and the seconds from
    the start to the end of the final model sync."""
    from torch.distributed.algorithms import Join

    from executor.workload import sync_clock, timed_step

    clock = sync_clock(rt)
    rec = join_recorder(model, clock)
    mine = batches[rt.rank]
    samples: list[dict[str, float]] = []
    rt.barrier()
    start = clock()
    with Join([model, rec]):
        for it in range(1, mine + 1):
            phases = timed_step(clock, model, opt, wl)
            rt.watchdog.beat(f"{label} join iteration {it}")
            samples.append({"iteration": it, **phases})
        last = clock()
    for k, t in enumerate(rec.marks, start=mine + 1):
        samples.append({"iteration": k, "forward_s": 0.0, "backward_s": 0.0, "optimizer_s": 0.0, "iteration_s": t - last})
        last = t
    return samples[:max(batches)], (rec.exit_s or clock()) - start
