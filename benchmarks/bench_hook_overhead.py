"""Benchmark: cost of ddpsim's post-accumulate-grad hooks on backward (target <= 2 %).

One command, prints figures; no assertions:

    python benchmarks/bench_hook_overhead.py [--models mlp,resnet50,gpt2-124m] [--pairs 8] [--num-threads 1]

For each model: backward timed with the capture hooks and without them, interleaved and
alternating which goes first (``pairs`` of each), on the current device (CPU here). Prints the
median backward with and without hooks and the overhead. On a shared machine the noise of one
backward can exceed the hooks' cost; the raw (unclamped) figure is printed for that reason.

Then the cost of ONE hook, measured where it dominates: a model of ``2000`` one-element
parameters (backward is almost all per-parameter work), ``(with - without) / 2000``; and
the overhead it implies for each model: ``num_params x per_hook / backward_without``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from ddpsim.trace.models import build_model, ddp_params, default_loss

SIZES = {"mlp": dict(batch_size=32), "resnet50": dict(batch_size=2), "gpt2-124m": dict(batch_size=2, seq_len=128),
         "bert-base": dict(batch_size=2, seq_len=128)}


def timed_backward_s(params: list, make_loss, with_hooks: bool) -> float:
    """Seconds of one ``make_loss().backward()``, with a capture-like timestamp hook on every
    parameter when ``with_hooks``; grads are cleared afterwards."""
    stamps: list[int] = []
    handles = [p.register_post_accumulate_grad_hook(lambda _p: stamps.append(time.perf_counter_ns()))
               for p in params] if with_hooks else []
    loss = make_loss()
    t0 = time.perf_counter_ns()
    loss.backward()
    dt = (time.perf_counter_ns() - t0) / 1e9
    for h in handles:
        h.remove()
    for p in params:
        p.grad = None
    return dt


def bench(name: str, pairs: int) -> tuple[float, float, int]:
    opts = dict(SIZES.get(name, {"batch_size": 2}))
    batch_size = opts.pop("batch_size")
    spec = build_model(name, **opts)
    module = spec.module.train()
    batch = spec.make_batch(batch_size)
    loss_fn = spec.loss_fn or default_loss
    params = [p for _, p, _ in ddp_params(module)]

    def backward_s(with_hooks: bool) -> float:
        return timed_backward_s(params, lambda: loss_fn(module(batch)), with_hooks)

    backward_s(True), backward_s(False)  # warm-up
    on, off = [], []
    for k in range(pairs):
        order = (True, False) if k % 2 == 0 else (False, True)
        for w in order:
            (on if w else off).append(backward_s(w))
    return statistics.median(on), statistics.median(off), len(params)


def per_hook_s(num_params: int = 2000, pairs: int = 20) -> float:
    """Seconds one capture hook adds to backward, from a model of many one-element parameters."""
    params = [torch.nn.Parameter(torch.ones(1)) for _ in range(num_params)]

    def backward_s(with_hooks: bool) -> float:
        return timed_backward_s(params, lambda: torch.stack(params).sum(), with_hooks)

    on, off = [], []
    for k in range(pairs):
        for w in ((True, False) if k % 2 == 0 else (False, True)):
            (on if w else off).append(backward_s(w))
    return (statistics.median(on) - statistics.median(off)) / num_params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp,resnet50,gpt2-124m")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--num-threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.num_threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {a.pairs} pairs per model")
    print(f"{'model':<12} {'params':>6} {'backward with hooks':>20} {'without':>12} {'overhead':>9}")
    rows = []
    for name in a.models.split(","):
        with_s, without_s, n = bench(name, a.pairs)
        rows.append((name, n, without_s))
        print(f"{name:<12} {n:>6} {with_s * 1e3:>17.3f} ms {without_s * 1e3:>9.3f} ms {100 * (with_s / without_s - 1):>8.2f}%")
    hook_s = per_hook_s()
    print(f"one hook costs {hook_s * 1e6:.2f} us (2000 one-element parameters, 20 pairs); implied overhead:")
    for name, n, without_s in rows:
        print(f"  {name:<12} {n} hooks x {hook_s * 1e6:.2f} us / {without_s * 1e3:.3f} ms backward = {100 * n * hook_s / without_s:.3f} %")


if __name__ == "__main__":
    main()
