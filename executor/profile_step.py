"""``executor profile``: a model under real DDP, recorded by torch.profiler on every rank.

Writes what ``ddpsim trace --from-profile`` and ``ddpsim compare`` read: one Chrome/Kineto
trace per rank (``OUT_DIR/rank<R>.json.gz``), recorded as the README asks of a user's own
profile -- ``torch.profiler.profile(activities=[CPU, CUDA], record_shapes=True,
schedule=schedule(wait=1, warmup=1, active=N))`` with ``prof.step()`` once per step, so each
active step is a ``ProfilerStep#k`` span. The run is ``--warmup`` unprofiled steps (past DDP's
bucket rebuild at iteration 2), then the profiler's wait, warm-up and active steps: zero_grad,
forward (under ``torch.autocast`` with ``--autocast``), loss, backward (the reducer's all-reduces
overlap it), SGD step. A rank's trace is written to a temporary file and gzipped into place,
so a failed run leaves no partial trace behind.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
from pathlib import Path

from executor.ddp_step import parse_cap
from executor.runtime import Runtime
from executor.workload import add_model_arguments, at_least, build_workload, forward

AUTOCASTS = {"bf16": "bfloat16", "fp16": "float16", "none": None}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--bucket-cap-mb", default=None, help="DDP's bucket_cap_mb in MiB (default: DDP's own, 25)")
    p.add_argument("--autocast", default="none", choices=tuple(AUTOCASTS), help="forward under torch.autocast (default none)")
    p.add_argument("--active", type=int, default=3, help="profiled steps (default 3)")
    p.add_argument("--out-dir", required=True, help="folder for rank<R>.json.gz")


def check(args: argparse.Namespace) -> None:
    at_least(args.batch_size, "--batch-size", 1)
    at_least(args.warmup, "--warmup", 2)
    at_least(args.active, "--active", 1)


def gzip_into(src: Path, dst: Path) -> None:
    """``src`` gzipped to ``dst`` through a temporary file beside it (never a partial ``dst``)."""
    tmp = dst.with_name(dst.name + ".part")
    with open(src, "rb") as fi, gzip.GzipFile(tmp, "wb", mtime=0) as fo:
        shutil.copyfileobj(fi, fo)
    os.replace(tmp, dst)
    src.unlink()


def run(rt: Runtime, args: argparse.Namespace) -> int:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule

    check(args)
    cap = parse_cap(args.bucket_cap_mb)
    wl = build_workload(args, rt.device)
    kwargs = {"device_ids": [rt.device.index]} if rt.is_cuda else {}
    if cap is not None:
        kwargs["bucket_cap_mb"] = cap
    model = DDP(wl.module, **kwargs)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    dtype = AUTOCASTS[args.autocast]

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=rt.device.type, dtype=getattr(torch, dtype or "float32"), enabled=dtype is not None):
            loss = wl.loss_fn(forward(model, wl.batch))
        loss.backward()
        opt.step()

    rt.barrier()
    for i in range(args.warmup):
        step()
        rt.watchdog.beat(f"profile warm-up {i + 1}")
    rt.sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if rt.is_cuda else [])
    with profile(activities=activities, record_shapes=True, schedule=schedule(wait=1, warmup=1, active=args.active)) as prof:
        for i in range(2 + args.active):
            step()
            rt.sync()
            prof.step()
            rt.watchdog.beat(f"profile step {i + 1}")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    raw = out / f".rank{rt.rank}.json"
    prof.export_chrome_trace(str(raw))
    gzip_into(raw, out / f"rank{rt.rank}.json.gz")
    rt.barrier()
    rt.log(f"profile: {wl.name} batch {args.batch_size} autocast {args.autocast} on {rt.world_size} rank(s): "
           f"wrote {out}/rank*.json.gz")
    return 0
