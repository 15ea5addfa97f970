"""Whether gloo runs queued all-reduces side by side: per-op time of back-to-back blocking calls
against the same calls queued at once (``async_op=True``, then every wait).

One command, prints figures; no assertions::

    python studies/gloo_concurrency.py                 # 2 ranks, 64 KiB to 16 MiB
    python studies/gloo_concurrency.py --ops 16 --repeats 5
    python studies/gloo_concurrency.py --groups 3 --sizes 262144   # queued over 1, 2, 3 groups

ProcessGroupGloo works its queue with ``threads`` worker threads (``_Options._threads``,
2 by default), so when DDP's reducer has queued several buckets, up to that many all-reduces
progress at once. A calibration's loop curve is the back-to-back blocking loop; with
``executor collectives``' queued curve (``allreduce_queued``, measured the way of this
benchmark) the engine runs a gloo group's collectives on that many lanes, each at
``b / (n q)`` of its pace alone while ``n`` progress (ddpsim/engine/simulate.py, "lanes"); without it,
one at a time in launch order, as NCCL does, which charges a backward whose buckets queue up
(many small buckets) more communication than the host spends. Each size alternates blocking and queued batches ``--repeats`` times (the fastest
batch of each kind is kept, per op), 2 gloo ranks of one thread each.

``--groups N`` (N > 1) adds, per size, the same queued batch dealt in turn over ``k`` extra
process groups (``dist.new_group``, each with its own worker threads, as round-robin DDP deals
its buckets: ``process_groups`` in ``executor ddp --options``) for k = 1..N: whether more groups' threads on
the same cores move more all-reduces per second than one group's, which the engine assumes
they do not (:mod:`ddpsim.engine.process_groups`: the calibrated concurrency is shared by every
collective in flight on all groups).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SIZES = (64 << 10, 1 << 20, 4 << 20, 16 << 20)


def worker(rank: int, world: int, port: int, ops: int, repeats: int, sizes: tuple[int, ...], groups: int = 1) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    extra = [dist.new_group(backend="gloo") for _ in range(groups)] if groups > 1 else []
    if rank == 0:
        threads = getattr(dist.ProcessGroupGloo._Options(), "_threads", "?")
        print(f"{world} gloo ranks x 1 thread, ProcessGroupGloo worker threads per rank: {threads}; {ops} ops per batch")
        print(f"{'size':>10s} {'blocking ms/op':>15s} {'queued ms/op':>13s} {'queued / blocking':>18s}"
              + "".join(f" {f'{k} groups ms/op':>16s}" for k in range(1, len(extra) + 1)))
    for size in sizes:
        bufs = [torch.ones(size // 4) for _ in range(ops)]
        best = {"blocking": float("inf"), "queued": float("inf"), **{k: float("inf") for k in range(1, len(extra) + 1)}}
        for _ in range(repeats):
            for mode in best:
                dist.barrier()
                t0 = time.perf_counter()
                if mode == "blocking":
                    for b in bufs:
                        dist.all_reduce(b)
                else:  # "queued": the default group; k: dealt over k extra groups in turn
                    deal = [None] if mode == "queued" else extra[:mode]
                    for w in [dist.all_reduce(b, group=deal[j % len(deal)], async_op=True) for j, b in enumerate(bufs)]:
                        w.wait()
                best[mode] = min(best[mode], (time.perf_counter() - t0) / ops)
        if rank == 0:
            print(f"{size:>10d} {best['blocking'] * 1e3:15.3f} {best['queued'] * 1e3:13.3f} "
                  f"{best['queued'] / best['blocking']:18.2f}"
                  + "".join(f" {best[k] * 1e3:16.3f}" for k in range(1, len(extra) + 1)), flush=True)
    dist.destroy_process_group()


def main(argv: list[str]) -> int:
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=16, help="all-reduces per batch (default 16)")
    ap.add_argument("--repeats", type=int, default=3, help="batches of each kind per size (default 3)")
    ap.add_argument("--port", type=int, default=29561, help="rendezvous port (default 29561)")
    ap.add_argument("--groups", type=int, default=1, help="also deal the queued batch over 1..N extra groups (default 1: no)")
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="bytes per all-reduce, comma-separated")
    args = ap.parse_args(argv)
    try:
        sizes = tuple(int(x) for x in args.sizes.split(","))
    except ValueError:
        sizes = ()
    if not sizes or any(x < 4 for x in sizes):
        print(f"gloo_concurrency: --sizes: {args.sizes!r} is not accepted; expected comma-separated byte counts >= 4",
              file=sys.stderr)
        return 2
    for v, flag in ((args.ops, "--ops"), (args.repeats, "--repeats"), (args.groups, "--groups")):
        if v < 1:
            print(f"gloo_concurrency: {flag}: {v!r} is not accepted; expected an integer >= 1", file=sys.stderr)
            return 2
    mp.spawn(worker, args=(2, args.port, args.ops, args.repeats, sizes, args.groups), nprocs=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
