"""Whether gloo runs queued all-reduces side by side: per-op time of back-to-back blocking calls
against the same calls queued at once (``async_op=True``, then every wait).

One command, prints figures; no assertions::

    python studies/gloo_concurrency.py                 # 2 ranks, 64 KiB to 16 MiB
    python studies/gloo_concurrency.py --ops 16 --repeats 5

ProcessGroupGloo works its queue with ``threads`` worker threads (``_Options._threads``,
2 by default), so when DDP's reducer has queued several buckets, up to that many all-reduces
progress at once. A calibration's loop curve is the back-to-back blocking loop; with
``executor collectives``' queued curve (``allreduce_queued``, measured the way of this
benchmark) the engine runs a gloo group's collectives on that many lanes, each at
``b / (n q)`` of its pace alone while ``n`` progress (ddpsim/engine/simulate.py, "lanes"); without it,
one at a time in launch order, as NCCL does, which charges a backward whose buckets queue up
(many small buckets) more communication than the host spends. Each size alternates blocking and queued batches ``--repeats`` times (the fastest
batch of each kind is kept, per op), 2 gloo ranks of one thread each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SIZES = (64 << 10, 1 << 20, 4 << 20, 16 << 20)


def worker(rank: int, world: int, port: int, ops: int, repeats: int, sizes: tuple[int, ...]) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == 0:
        threads = getattr(dist.ProcessGroupGloo._Options(), "_threads", "?")
        print(f"{world} gloo ranks x 1 thread, ProcessGroupGloo worker threads per rank: {threads}; {ops} ops per batch")
        print(f"{'size':>10s} {'blocking ms/op':>15s} {'queued ms/op':>13s} {'queued / blocking':>18s}")
    for size in sizes:
        bufs = [torch.ones(size // 4) for _ in range(ops)]
        best = {"blocking": float("inf"), "queued": float("inf")}
        for _ in range(repeats):
            for mode in best:
                dist.barrier()
                t0 = time.perf_counter()
                if mode == "blocking":
                    for b in bufs:
                        dist.all_reduce(b)
                else:
                    for w in [dist.all_reduce(b, async_op=True) for b in bufs]:
                        w.wait()
                best[mode] = min(best[mode], (time.perf_counter() - t0) / ops)
        if rank == 0:
            print(f"{size:>10d} {best['blocking'] * 1e3:15.3f} {best['queued'] * 1e3:13.3f} "
                  f"{best['queued'] / best['blocking']:18.2f}", flush=True)
    dist.destroy_process_group()


def main(argv: list[str]) -> int:
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=16, help="all-reduces per batch (default 16)")
    ap.add_argument("--repeats", type=int, default=3, help="batches of each kind per size (default 3)")
    ap.add_argument("--port", type=int, default=29561, help="rendezvous port (default 29561)")
    args = ap.parse_args(argv)
    for v, flag in ((args.ops, "--ops"), (args.repeats, "--repeats")):
        if v < 1:
            print(f"gloo_concurrency: {flag}: {v!r} is not accepted; expected an integer >= 1", file=sys.stderr)
            return 2
    mp.spawn(worker, args=(2, args.port, args.ops, args.repeats, SIZES), nprocs=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
