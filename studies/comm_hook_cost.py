"""Study: what does a Python comm hook add per bucket on a CPU (gloo), beyond what ddpsim charges?

One command, prints figures; no assertions:

    python studies/comm_hook_cost.py [--layers 32] [--rounds 7] [--reps 20]

A model of ``L`` ``nn.Linear(256, 256)`` layers at ``bucket_cap_mb`` 0.25 (one layer per
bucket: ``B`` buckets of 257 KiB, the size of ``cpu-gloo-round-robin``'s), under
``DistributedDataParallel`` on gloo, world size 1, one thread, backward timed (it returns after
``finalize_backward`` has waited for every bucket's future). Each round times every mode once,
in a rotated order; the figure is the median over rounds of ``(mode - plain) / B``:

* ``plain``: no hook (the reducer divides at copy-in, ``_AllReduceBySumCommHook`` in C++);
* ``builtin``: ``register_builtin_comm_hook(ALLREDUCE)`` (``default_comm_hooks.cpp``: the
  reducer copies without dividing, the C++ hook divides the bucket, then all-reduces): the
  division's extra pass, no Python;
* ``python``: ``default_hooks.allreduce_hook`` (``_allreduce_fut``: ``div_``, an async
  ``all_reduce``, ``get_future().then(...)``): the division plus the Python hook call and the
  ``.then`` callback, which gloo's worker thread runs under the GIL when the work completes;
* ``rr1`` .. ``rr3``: the round-robin hook ``executor ddp --options '{"process_groups": N}'`` runs
  (:class:`executor.ddp_modes.RoundRobin`, the same calls as ``python`` over N ``new_group``\\ s).

``python - builtin`` is the Python hook's own cost per bucket (both divide the bucket): the call
into Python, the future and its ``.then`` callback -- the calibration's ``comm_hook_call_s``
(``--write FILE`` sets it in a calibration file). Beside them, what ddpsim's engine charges per
bucket for the ``allreduce`` hook: the division (``read_write_s`` at the calibration's
copy bandwidth) and the calibration's ``comm_hook_call_s`` (``--calibration``). World size 1
keeps the network out: what is left is the hook path's host cost on this CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

MODES = ("plain", "builtin", "python", "rr1", "rr2", "rr3")


def build(mode: str, layers: int):
    """A fresh DDP over ``layers`` Linear(256, 256) at cap 0.25 with ``mode``'s hook."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    from executor.ddp_modes import RoundRobin

    torch.manual_seed(0)
    module = nn.Sequential(*[nn.Linear(256, 256) for _ in range(layers)])
    ddp = nn.parallel.DistributedDataParallel(module, bucket_cap_mb=0.25)
    if mode == "builtin":
        ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    elif mode == "python":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif mode.startswith("rr"):
        ddp.register_comm_hook(None, RoundRobin("gloo", int(mode[2:])).hook(dist.get_world_size()))
    return ddp


def backward_s(ddp, x, reps: int) -> float:
    """Median backward of ``reps`` steps (grads cleared between)."""
    out = []
    for _ in range(reps):
        loss = ddp(x).sum()
        t0 = time.perf_counter()
        loss.backward()
        out.append(time.perf_counter() - t0)
        for p in ddp.parameters():
            p.grad = None
    return statistics.median(out)


def num_buckets(ddp) -> int:
    sizes = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", "")
    return len([s for s in str(sizes).split(",") if s.strip()])


def engine_charge_s(calibration: str | None) -> tuple[float, float]:
    """ddpsim's charge per bucket for the allreduce hook: the division, the Python call."""
    from ddpsim.network.kernel_costs import read_write_s

    doc = {}
    if calibration:
        with open(calibration) as f:
            doc = json.load(f)
    return (read_write_s((256 * 256 + 256) * 4, doc.get("copy_bandwidth_bytes_per_s")),
            float(doc.get("comm_hook_call_s") or 0.0))


def write_call_s(path: str, call_s: float) -> None:
    """Set ``comm_hook_call_s`` in the calibration file ``path`` (checked by the loader first)."""
    from ddpsim.calibration.loader import calibration_from_dict
    from ddpsim.io import write_text_atomic

    with open(path) as f:
        doc = json.load(f)
    doc["comm_hook_call_s"] = max(0.0, call_s)
    calibration_from_dict(doc, path)
    write_text_atomic(path, json.dumps(doc, indent=1) + "\n")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32, help="Linear(256, 256) layers, one bucket each (default 32)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds of every mode (default 7)")
    ap.add_argument("--reps", type=int, default=20, help="backwards per mode and round (default 20)")
    ap.add_argument("--calibration", default="reports/cpu-gloo-calibration.json",
                    help="calibration whose copy bandwidth and comm_hook_call_s ddpsim charges")
    ap.add_argument("--write", metavar="FILE", default=None,
                    help="set the measured python - builtin as comm_hook_call_s in this calibration file")
    args = ap.parse_args(argv)
    for v, flag in ((args.layers, "--layers"), (args.rounds, "--rounds"), (args.reps, "--reps")):
        if v < 1:
            print(f"comm_hook_cost: {flag}: {v!r} is not accepted; expected an integer >= 1", file=sys.stderr)
            return 2
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        x = torch.randn(32, 256)
        models = {m: build(m, args.layers) for m in MODES}
        for m in MODES:  # past DDP's bucket rebuild
            backward_s(models[m], x, 3)
        nb = num_buckets(models["plain"])
        per: dict[str, list[float]] = {m: [] for m in MODES}
        for r in range(args.rounds):
            order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
            times = {m: backward_s(models[m], x, args.reps) for m in order}
            for m in MODES:
                per[m].append((times[m] - times["plain"]) / nb)
        call = [p - b for p, b in zip(per["python"], per["builtin"])]
        div_s, call_s = engine_charge_s(args.calibration)
        print(f"gloo, world size 1, one thread: {args.layers} x Linear(256, 256), cap 0.25 MiB -> {nb} buckets; "
              f"{args.rounds} rounds x {args.reps} backwards")
        print(f"{'mode':>8s} {'extra us/bucket':>15s} {'min':>7s} {'max':>7s}")
        for m in MODES[1:]:
            v = per[m]
            print(f"{m:>8s} {statistics.median(v) * 1e6:15.1f} {min(v) * 1e6:7.1f} {max(v) * 1e6:7.1f}")
        print(f"{'python - builtin':>16s} {statistics.median(call) * 1e6:7.1f} {min(call) * 1e6:7.1f} {max(call) * 1e6:7.1f}"
              "   (the Python hook's call, future and callback per bucket)")
        print(f"ddpsim charges per bucket (allreduce hook): division {div_s * 1e6:.1f} us + Python hook call "
              f"{call_s * 1e6:.1f} us = {(div_s + call_s) * 1e6:.1f} us ({args.calibration})")
        if args.write:
            write_call_s(args.write, statistics.median(call))
            print(f"wrote comm_hook_call_s = {max(0.0, statistics.median(call)) * 1e6:.1f} us into {args.write}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
