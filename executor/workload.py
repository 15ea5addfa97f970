"""The model a step trains: a built-in ``ddpsim.trace.models`` model (or ``pkg.mod:factory``) with
its deterministic batch and loss, on the step's device; options shared by ``ddp`` and ``replay``."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from ddpsim.errors import InputError


def add_model_arguments(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--model", required=required, help="built-in model (mlp, resnet50, bert-base, gpt2-124m, ...) or pkg.mod:factory")
    p.add_argument("--batch-size", type=int, default=8, help="per-rank batch size (default 8)")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="model option, e.g. seq_len=64 or n_layer=2 (JSON values; repeatable)")
    p.add_argument("--seed", type=int, default=0, help="model and batch seed (default 0)")
    p.add_argument("--lr", type=float, default=1e-3, help="SGD learning rate (default 1e-3, as ddpsim trace)")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9, as ddpsim trace)")
    p.add_argument("--iterations", type=int, default=20, help="measured iterations (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="iterations before measuring (default 5; >= 2 to pass DDP's rebuild)")


def parse_model_args(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items:
        if "=" not in it:
            raise InputError(f"--model-arg: {it!r} is not accepted; expected KEY=VALUE, e.g. seq_len=64")
        k, v = it.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v
    return out


def at_least(value: int, flag: str, minimum: int) -> None:
    """Raise the one-line InputError for an integer option below ``minimum``."""
    if value < minimum:
        raise InputError(f"{flag}: {value!r} is not accepted; expected an integer >= {minimum}")


def check_counts(args: argparse.Namespace) -> None:
    at_least(args.batch_size, "--batch-size", 1)
    at_least(args.iterations, "--iterations", 1)
    at_least(args.warmup, "--warmup", 0)


@dataclass
class Workload:
    name: str
    module: Any       # torch.nn.Module on the device
    batch: Any        # input on the device
    loss_fn: Any      # output -> scalar
    info: dict[str, Any]


def build_workload(args: argparse.Namespace, device: Any) -> Workload:
    from ddpsim.trace.models import build_model

    spec = build_model(args.model, seed=args.seed, **parse_model_args(args.model_arg))
    return workload_from_spec(spec, args.batch_size, device, args.seed)


def workload_from_spec(spec: Any, batch_size: int, device: Any, seed: int = 0) -> Workload:
    """A built :class:`ddpsim.trace.models.BuiltModel` on ``device``, with its batch and loss."""
    import torch

    from ddpsim.trace.models import default_loss

    batch = spec.make_batch(batch_size)
    if isinstance(batch, (tuple, list)):
        batch = type(batch)(b.to(device) for b in batch)
    else:
        batch = batch.to(device)
    module = spec.module.to(device)
    torch.manual_seed(seed)
    return Workload(name=spec.name, module=module, batch=batch, loss_fn=spec.loss_fn or default_loss,
                    info=dict(spec.info or {}))


def forward(module: Any, batch: Any) -> Any:
    return module(*batch) if isinstance(batch, (tuple, list)) else module(batch)


def sync_clock(rt: Any) -> Any:
    """A clock that first waits for the device (``rt.sync``), so an interval covers its kernels."""
    import time

    def clock() -> float:
        rt.sync()
        return time.perf_counter()

    return clock


def timed_step(clock: Any, model: Any, opt: Any, wl: Workload) -> dict[str, float]:
    """One training step (zero_grad, forward, loss, backward, SGD step) timed with ``clock``:
    ``{"forward_s", "backward_s", "optimizer_s", "iteration_s"}``."""
    t0 = clock()
    opt.zero_grad(set_to_none=True)
    loss = wl.loss_fn(forward(model, wl.batch))
    t1 = clock()
    loss.backward()
    t2 = clock()
    opt.step()
    t3 = clock()
    return {"forward_s": t1 - t0, "backward_s": t2 - t1, "optimizer_s": t3 - t2, "iteration_s": t3 - t0}


def timed_steps(rt: Any, model: Any, opt: Any, wl: Workload, *, warmup: int, iterations: int,
                label: str = "ddp", before: Any = None) -> list[dict[str, float]]:
    """Train ``warmup + iterations`` steps (:func:`timed_step`) after a barrier; per measured step
    ``{"iteration", "forward_s", "backward_s", "optimizer_s", "iteration_s"}`` on this rank
    (device-synchronised clock). ``before(i)`` runs before step ``i`` (1-based), e.g. a bucket
    timer's ``start_iteration``. Each sample also holds the step's
    :func:`executor.runtime.host_counters` deltas (read just outside the timed interval): this
    process's CPU time and involuntary switches, the host's busy, stolen and total CPU time."""
    from executor.runtime import counter_deltas, host_counters

    clock = sync_clock(rt)
    samples: list[dict[str, float]] = []
    rt.barrier()
    for it in range(1, warmup + iterations + 1):
        if before is not None:
            before(it)
        h0 = host_counters()
        phases = timed_step(clock, model, opt, wl)
        h1 = host_counters()
        rt.watchdog.beat(f"{label} iteration {it}")
        if it > warmup:
            samples.append({"iteration": it, **phases, **counter_deltas(h0, h1)})
    return samples
