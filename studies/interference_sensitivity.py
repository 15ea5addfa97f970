"""How much one model's backward slows while gloo all-reduces run beside it, and how repeatable that is.

One command::

    python studies/interference_sensitivity.py
    python studies/interference_sensitivity.py --models mlp,zoo:resnet18 --batches 4 --pairs 4

The calibration's compute slowdown is fitted to real DDP on ONE probe model (the built-in mlp,
width 2048, depth 6, batch 128: ``ddpsim/calibration/interference_fit.py``) and used for every model. Models
could differ in how much the collectives beside their compute slow them; if they did, and if a
capture could measure it, the fit could be scaled per model. This benchmark measures it the
way a capture would: 2 gloo ranks of one thread each, in lockstep (a barrier before every
forward), backward timed alone and with asynchronous all-reduces of 4 MiB queued just before it
(cycling over distinct buffers that together hold the model's gradients, as DDP's buckets do;
enough of them to outlast the backward at a 4x slowdown), in pairs whose order alternates. Per
model it prints each batch's median ratio (with-load / alone) and the spread of those medians:
if the spread of one model's batches is as wide as the gap between models, one capture's
measurement cannot rank models, let alone scale a fit by them.

Timing on a shared machine is noisy: run it when the machine is quiet.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time

CHUNK_BYTES = 4 * 2 ** 20
OUTLAST = 4.0
MODEL_ARGS = {"mlp": {"width": 2048, "depth": 6}}
BATCH = {"mlp": 128}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, models: list[str], batches: int, pairs: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from ddpsim.trace.models import build_model, default_loss
    from ddpsim.trace.models.zoo import zoo_entry

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)

    def agree(v: float) -> float:
        t = torch.tensor([float(v)], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t)

    chunk = torch.zeros(CHUNK_BYTES // 4)
    dist.all_reduce(chunk)
    t0 = time.perf_counter()
    for _ in range(8):
        dist.all_reduce(chunk)
    chunk_s = agree((time.perf_counter() - t0) / 8)
    lines = []
    for name in models:
        bs = zoo_entry(name.split(":", 1)[1]).batch_size if name.startswith("zoo:") else BATCH.get(name, 8)
        spec = build_model(name, seed=0, **MODEL_ARGS.get(name, {}))
        m = spec.module.train()
        loss_fn = spec.loss_fn or default_loss
        batch = spec.make_batch(bs)
        grad_bytes = sum(p.numel() * p.element_size() for p in m.parameters() if p.requires_grad)
        ring = [torch.zeros(CHUNK_BYTES // 4) for _ in range(max(1, min(512 * 2 ** 20, grad_bytes) // CHUNK_BYTES))]

        def backward(n: int) -> float:
            dist.barrier()
            loss = loss_fn(m(*batch) if isinstance(batch, tuple) else m(batch))
            works = [dist.all_reduce(ring[i % len(ring)], async_op=True) for i in range(n)]
            tb = time.perf_counter()
            loss.backward()
            t = time.perf_counter() - tb
            for w in works:
                w.wait()
            m.zero_grad(set_to_none=True)
            return t

        for _ in range(3):
            backward(0)
        alone = statistics.median(backward(0) for _ in range(3))
        n = int(agree(max(2, -(-OUTLAST * alone // chunk_s))))
        backward(n)  # the ring's first use: its pages touched outside the timings
        medians = []
        for _ in range(batches):
            ratios = []
            for k in range(pairs):
                timed = {}
                for loaded in ((False, True) if k % 2 == 0 else (True, False)):
                    timed[loaded] = backward(n if loaded else 0)
                ratios.append(timed[True] / timed[False])
            medians.append(statistics.median(ratios))
        spread = 100.0 * (max(medians) - min(medians)) / statistics.median(medians)
        lines.append(f"{name:24s} batch {bs:4d}  backward alone {alone * 1e3:8.1f} ms  with {n} x 4 MiB queued: "
                     f"batch medians {' '.join(f'{x:.2f}' for x in medians)}  median {statistics.median(medians):.2f}  "
                     f"spread {spread:.0f} %")
    if rank == 0:
        with open(out, "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mlp,zoo:tied_lm,zoo:transformer_encoder",
                    help="comma-separated models (built-in or zoo:<name>; torchvision ones need the zoo extra)")
    ap.add_argument("--batches", type=int, default=3, help="batches of pairs per model (default 3)")
    ap.add_argument("--pairs", type=int, default=4, help="pairs per batch (default 4)")
    args = ap.parse_args(argv)
    if args.batches < 1 or args.pairs < 1:
        print("interference_sensitivity: --batches and --pairs: expected integers >= 1", file=sys.stderr)
        return 2
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result.txt")
        mp.spawn(_worker, args=(2, _free_port(), args.models.split(","), args.batches, args.pairs, out), nprocs=2)
        print("2 gloo ranks x 1 thread; ratio = backward with all-reduces queued / alone, paired, order alternating")
        print(open(out).read(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
