"""Study: what does DDP's backward add per parameter on a CPU (gloo), and what does ddpsim charge?

One command, prints figures; no assertions:

    python studies/ddp_cpu_hook_cost.py [--layers 100,400] [--rounds 5] [--reps 30]

A model of ``L`` tiny ``nn.Linear(4, 4)`` layers (``2 L`` parameters, one bucket at the default
cap, so nearly all of DDP's backward cost is per parameter): the median backward of the plain
module and of the same module under ``DistributedDataParallel`` (gloo, world size 1, one
thread), interleaved round by round, with and without ``find_unused_parameters``. The
difference per parameter is what DDP's reducer pays per gradient on the CPU: the autograd hook
(``Reducer::autograd_hook`` -> ``mark_variable_ready_dense``: the copy into the bucket view with
the division), the bucket's all-reduce and ``finalize_backward``'s copy-out, and with
``find_unused_parameters`` the autograd-graph walk of ``prepare_for_backward``
(``Reducer::search_unused_parameters``; it runs in the forward, so it is timed with it: the
step's forward + backward is the second column). Beside it, what ddpsim's engine charges on gloo
per parameter: no host cost per hook (``cost_model`` host costs apply to NCCL only), and
``GRAPH_SEARCH_S_PER_PARAM`` for the graph walk.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from ddpsim.engine.features import GRAPH_SEARCH_S_PER_PARAM


def step_s(model: nn.Module, x: torch.Tensor, reps: int) -> tuple[float, float]:
    """Median backward and median forward + backward of ``reps`` steps (grads cleared between)."""
    bwd, both = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        loss = model(x).sum()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        bwd.append(t2 - t1)
        both.append(t2 - t0)
        for p in model.parameters():
            p.grad = None
    return statistics.median(bwd), statistics.median(both)


def per_param_s(layers: int, find_unused: bool, rounds: int, reps: int) -> tuple[float, float]:
    """Median over rounds of (DDP - plain) / parameters: backward, and forward + backward."""
    torch.manual_seed(0)
    plain = nn.Sequential(*[nn.Linear(4, 4) for _ in range(layers)])
    ddp = nn.parallel.DistributedDataParallel(nn.Sequential(*[nn.Linear(4, 4) for _ in range(layers)]),
                                              find_unused_parameters=find_unused)
    x = torch.randn(2, 4)
    n = 2 * layers
    bwd, both = [], []
    for _ in range(rounds):
        a, a2 = step_s(plain, x, reps)
        b, b2 = step_s(ddp, x, reps)
        bwd.append((b - a) / n)
        both.append((b2 - a2) / n)
    return statistics.median(bwd), statistics.median(both)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", default="100,400", help="Linear(4, 4) layers per model, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        print("DDP's extra CPU time per parameter (gloo, world size 1, one thread; medians)")
        print(f"{'find_unused':>11s} {'params':>6s} {'backward us':>11s} {'fwd+bwd us':>10s}   ddpsim charges per parameter")
        for fup in (False, True):
            for layers in (int(v) for v in args.layers.split(",")):
                b, fb = per_param_s(layers, fup, args.rounds, args.reps)
                charged = f"{GRAPH_SEARCH_S_PER_PARAM * 1e6:g} us graph walk" if fup else "0 us host cost"
                print(f"{str(fup):>11s} {2 * layers:6d} {b * 1e6:11.1f} {fb * 1e6:10.1f}   {charged} (+ copies at memory bandwidth)")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
