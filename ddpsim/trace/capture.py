"""Capture a trace: time a real model's training step on one device.

One step is forward (+ loss), backward, ``optimizer.step()`` and ``zero_grad(set_to_none=True)``,
each timed apart (CUDA synchronised at each boundary, never inside a hook), after unrecorded
warm-up steps. A gradient is ready when its post-accumulate-grad hook fires, as DDP's reducer
marks it (CPU: ``perf_counter_ns`` in the hook; CUDA: an event recorded in it), over the
parameters DDP's reducer gets, in its order (:func:`ddpsim.trace.models.ddp_params`). The hooks'
own cost is measured by timing backward with and without them in adjacent pairs, alternating
which goes first: ``hook_overhead_frac = max(0, median(with / without - 1))``
(:func:`hook_overhead_estimate`; a pair shares the host's load of the moment; on CPU in process
CPU time). On CPU each phase is also kept in process CPU time (``environment.cpu_phase_s``,
:func:`ddpsim.validation.stability.cpu_clock_trace`). :func:`derive_depth` extends a
reduced-depth capture of identical blocks.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import platform
import re
import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from ddpsim.errors import InputError, require
from ddpsim.trace.records import IterationSample, Trace, buffer_records, param_records

DTYPES = ("float32", "bfloat16", "float16")
AUTOCASTS = ("bf16", "fp16")
OPTIMIZERS = ("sgd", "adamw")
DEVICES = ("cpu", "cuda")


def check_count(value: Any, field: str, minimum: int) -> int:
    """``value`` if it is an integer (not a bool) >= ``minimum``; InputError naming ``field`` otherwise."""
    integer = isinstance(value, int) and not isinstance(value, bool)
    require(integer and value >= minimum, field, value, f"an integer >= {minimum}")
    return value


def check_choice(value: Any, field: str, accepted: Sequence[Any]) -> Any:
    """``value`` if it is one of ``accepted``; InputError naming ``field`` otherwise."""
    require(value in accepted, field, value, f"one of {list(accepted)}")
    return value


def _cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _load_average() -> float | None:
    with contextlib.suppress(OSError, AttributeError):  # no load average on this OS
        return os.getloadavg()[0]
    return None


def batch_shapes(batch: Any) -> Any:
    """The shape of a batch tensor, or of each tensor of a tuple or list batch."""
    if isinstance(batch, (tuple, list)):
        return [list(b.shape) for b in batch]
    return list(batch.shape)


def to_channels_last(tree: Any) -> Any:
    """``tree`` with its 4-D tensors in ``torch.channels_last`` memory format."""
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.contiguous(memory_format=torch.channels_last)
                    if isinstance(t, torch.Tensor) and t.dim() == 4 else t, tree)


def hook_overhead_estimate(with_s: Sequence[float], without_s: Sequence[float]) -> tuple[float, float]:
    """``(hook_overhead_frac, raw)`` from backward times with and without the hooks, paired by
    position (pair ``k`` ran back to back): ``raw = median_k(with_k / without_k - 1)``, the
    fraction ``max(0, raw)``."""
    if not with_s or len(with_s) != len(without_s):
        raise InputError(f"hook overhead: {len(with_s)} timings with hooks and {len(without_s)} without; expected equal, >= 1")
    raw = statistics.median(a / b - 1.0 for a, b in zip(with_s, without_s))
    return max(0.0, raw), raw


def capture_trace(spec: Any, *, device: str = "cpu", batch_size: int, num_iters: int, num_warmup: int,
                  dtype: str | None = None, autocast: str | None = None, optimizer: str = "sgd",
                  num_threads: int | None = None, measure_hook_overhead: bool = True,
                  command: str | None = None, seed: int = 0,
                  step_barrier: Callable[[], None] | None = None) -> Trace:
    """The :class:`Trace` of ``num_iters`` training steps of ``spec`` on ``device`` after ``num_warmup``
    (``dtype`` casts parameters and float inputs; ``autocast`` runs forward under ``torch.autocast``).
    ``step_barrier`` is called, untimed, before every step and its optimizer (``executor trace``: its
    ranks' forwards and optimizers compete for the host as under DDP). InputError: bad counts or
    choices, CUDA unavailable, or the model raising (one line naming the model and the phase)."""
    import torch

    check_count(batch_size, "batch_size", 1)
    check_count(num_iters, "num_iters", 1)
    check_count(num_warmup, "num_warmup", 0)
    check_choice(device, "device", DEVICES)
    check_choice(dtype, "dtype", (None, *DTYPES))
    check_choice(autocast, "autocast", (None, *AUTOCASTS))
    check_choice(optimizer, "optimizer", OPTIMIZERS)
    if num_threads is not None:
        torch.set_num_threads(check_count(num_threads, "num_threads", 1))
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("device: 'cuda' is not available on this machine (torch.cuda.is_available() is False); expected 'cpu'")
    torch.manual_seed(seed)
    dev = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")
    runner = StepRunner(torch, spec, dev=dev, batch_size=batch_size, dtype=dtype, autocast=autocast,
                        optimizer=optimizer, step_barrier=step_barrier)
    load_before = _load_average()
    samples, orders = runner.run(num_warmup, num_iters)
    overhead = _measure_hook_overhead(runner, samples) if measure_hook_overhead else None

    first = orders[0]
    consistent = all(o == first for o in orders)
    ready = set(first)
    records = param_records(runner.plist, ready.__contains__)
    # NOTE: a parameter ready in a later iteration but not the first would break the trace's
    # has_grad/order contract; null it so the trace stays self-consistent
    samples = [replace(s, grad_ready_s=tuple(t if i in ready else None for i, t in enumerate(s.grad_ready_s)))
               for s in samples]
    # the environment: the device, software, capture settings and host load
    own = {str(p.dtype).removeprefix("torch.") for p in runner.params}  # the model's, if not cast
    env: dict[str, Any] = {
        "device": device,
        "device_name": torch.cuda.get_device_name(runner.dev) if runner.cuda else _cpu_name(),
        "torch_version": torch.__version__,
        "batch_size": batch_size,
        "dtype": dtype or (own.pop() if len(own) == 1 else "mixed"),
        "autocast": autocast,
        "optimizer": optimizer,
        "num_threads": torch.get_num_threads(),
        "input_shape": batch_shapes(runner.batch),
        "num_warmup": num_warmup,
        "num_iters": num_iters,
        "seed": seed,
        "grad_ready_order_consistent": consistent,
    }
    if runner.cuda:
        env["cuda_version"] = torch.version.cuda
        try:
            env["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # NOTE: builds without NCCL
            env["nccl_version"] = None
    for k, v in (spec.info or {}).items():
        env.setdefault(k, v)
    env.update(overhead[1] if overhead is not None else {})
    if not runner.cuda:
        # this process's CPU time (every thread) per measured iteration's forward, backward and
        # optimizer: beside the wall-clock phases, how much of them the process had a CPU for
        env["cpu_phase_s"] = [[round(x, 6) for x in c[:3]] for c in runner.cpu_steps[num_warmup:]]
    if load_before is not None:
        # NOTE: on a shared machine, other processes inflate the times; this says how busy it was
        env["load_average_1m"] = [round(load_before, 2), round(_load_average() or 0.0, 2)]
        env["num_cpus"] = os.cpu_count()
    if not consistent:
        env["note"] = ("hook firing order differed across measured iterations; grad_ready_order is "
                       "the first measured iteration's")
    return Trace(model=spec.name, params=records, buffers=buffer_records(runner.module),
                 grad_ready_order=tuple(first), iterations=tuple(samples), environment=env,
                 hook_overhead_frac=None if overhead is None else overhead[0], command=command)


#: the phases of a training step as a model error names them (:func:`_model_error`)
_PHASE_WORDS = {"optimizer": "optimizer step", "zero_grad": "optimizer step"}


class StepRunner:
    """One model's training step on ``dev`` (``dtype`` casts parameters and float inputs;
    ``channels_last`` its memory format), timed phase by phase on ``clock``: ``start(phase)``,
    ``stop()`` and ``now()`` in seconds, the roofline mode of :mod:`ddpsim.trace.retime`,
    or (None) the runner's own wall clock in ``perf_counter`` seconds: CUDA synchronised at each
    phase's start and end, ``step_barrier`` called (untimed) before forward and optimizer, this
    process's CPU time kept per phase of each step (``cpu_steps``), a gradient stamped with
    ``perf_counter`` (CPU) or a CUDA event recorded in its hook. While :func:`ready_hooks` call
    :meth:`ready`, ``fired`` holds the current backward's ``(parameter index, stamp)`` in firing
    order; ``phase`` names the phase running (for :func:`_model_error`)."""

    def __init__(self, torch: Any, spec: Any, *, dev: Any, batch_size: int, dtype: str | None, autocast: str | None,
                 optimizer: str, clock: Any = None, step_barrier: Callable[[], None] | None = None,
                 channels_last: bool = False, sgd_foreach: bool | None = None) -> None:
        from ddpsim.trace.models import ddp_params, default_loss, make_optimizer, to_device

        self.torch = torch
        self.name = spec.name
        self.dev = dev
        self.cuda = dev.type == "cuda"
        tdtype = None if dtype is None else getattr(torch, dtype)
        module = spec.module.to(device=dev, dtype=tdtype)
        module.train()
        self.loss_fn = spec.loss_fn or default_loss
        self.phase = "making its batch"
        try:
            self.batch = to_device(spec.make_batch(batch_size), dev, tdtype)
        except Exception as exc:  # NOTE: the user's model code: one line, not a traceback
            raise _model_error(spec.name, self.phase, exc) from None
        if channels_last:
            module, self.batch = module.to(memory_format=torch.channels_last), to_channels_last(self.batch)
        self.module = module
        self.plist = ddp_params(module)
        self.params = [p for _, p, _ in self.plist]
        self.opt = make_optimizer(optimizer, self.params, sgd_foreach=sgd_foreach)
        self.ac_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(autocast or "")
        self.clock = self if clock is None else clock
        self.step_barrier = step_barrier
        self.cpu_steps: list[list[float]] = []
        self.fired: list[tuple[int, Any]] = []

    def ready(self, i: int) -> None:
        """Parameter ``i``'s gradient is ready now."""
        self.fired.append((i, self.clock.now()))

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.dev)

    def start(self, phase: str) -> float:
        self.sync()
        if self.step_barrier is not None and phase in ("forward", "optimizer"):
            self.step_barrier()  # before optimizer: DDP's ranks leave backward together (its last all-reduce)
        if phase == "forward":
            self.cpu_steps.append([])
        if phase == "backward" and self.cuda:
            self.start_ev = self.now()
        self.cpu_start = time.process_time()
        return time.perf_counter_ns() / 1e9

    def stop(self) -> float:
        self.sync()
        t = time.perf_counter_ns() / 1e9
        self.cpu_steps[-1].append(time.process_time() - self.cpu_start)
        return t

    def now(self) -> Any:
        if not self.cuda:
            return time.perf_counter_ns() / 1e9
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def forward(self) -> Any:
        from ddpsim.trace.models import run_forward

        self.phase = "forward"
        with (self.torch.autocast(device_type=self.dev.type, dtype=self.ac_dtype) if self.ac_dtype is not None
              else contextlib.nullcontext()):
            return self.loss_fn(run_forward(self.module, self.batch))

    def _timed(self, phase: str, run: Callable[[], Any]) -> tuple[float, float, Any]:
        """``run()`` as ``phase`` on the clock: its start, its duration and what it returned."""
        start = self.clock.start(phase)
        self.phase = _PHASE_WORDS.get(phase, phase)
        out = run()
        return start, self.clock.stop() - start, out

    def step(self, record: bool) -> IterationSample | None:
        """One training step; its phase times and gradient-ready offsets when ``record``."""
        self.fired.clear()
        _, forward_s, loss = self._timed("forward", self.forward)
        b0, backward_s, _ = self._timed("backward", loss.backward)
        _, optimizer_s, _ = self._timed("optimizer", self.opt.step)
        _, zero_grad_s, _ = self._timed("zero_grad", lambda: self.opt.zero_grad(set_to_none=True))
        if not record:
            return None
        ready: list[float | None] = [None] * len(self.params)
        for i, stamp in self.fired:
            ready[i] = self.start_ev.elapsed_time(stamp) / 1e3 if self.cuda else stamp - b0
        return IterationSample(forward_s=forward_s, backward_s=backward_s, optimizer_s=optimizer_s,
                               zero_grad_s=zero_grad_s, grad_ready_s=tuple(ready))

    def run(self, num_warmup: int, num_iters: int) -> tuple[list[IterationSample], list[list[int]]]:
        """Warm-up steps, then the measured steps' samples and hook firing orders; the model's code
        raising is one InputError naming the model and the phase."""
        from ddpsim.trace.models import ready_hooks

        samples: list[IterationSample] = []
        orders: list[list[int]] = []
        try:
            with ready_hooks(self.params, self.ready):
                for _ in range(num_warmup):
                    self.step(False)
                for _ in range(num_iters):
                    samples.append(self.step(True))
                    orders.append([i for i, _ in self.fired])
        except InputError:
            raise
        except Exception as exc:  # NOTE: the user's model code: one line, not a traceback
            raise _model_error(self.name, self.phase, exc) from None
        return samples, orders

    def timed_backward(self, hooks: bool) -> float:
        """Forward, then backward timed (CPU: this process's CPU time, so that a wait for a CPU is
        not taken for the hooks' cost; CUDA: wall time), with the hooks or without them."""
        from ddpsim.trace.models import ready_hooks

        with ready_hooks(self.params, self.ready) if hooks else contextlib.nullcontext():
            loss = self.forward()
            self.sync()
            tb, cb = time.perf_counter_ns(), time.process_time()
            loss.backward()
            self.sync()
            elapsed_s = (time.perf_counter_ns() - tb) / 1e9 if self.cuda else time.process_time() - cb
        self.opt.zero_grad(set_to_none=True)
        self.fired.clear()
        return elapsed_s


def _measure_hook_overhead(runner: StepRunner,
                           samples: Sequence[IterationSample]) -> tuple[float, dict[str, Any]]:
    """Backward timed with and without the hooks in adjacent pairs, alternating which goes first
    (module docstring): the hook overhead fraction and its ``environment`` entries."""
    with_s: list[float] = []
    without_s: list[float] = []
    # NOTE: enough pairs to cover about 1 s of backward, from 4 to 100, an even number
    median_backward_s = statistics.median(s.backward_s for s in samples)
    num_pairs = max(4, min(100, math.ceil(0.5 / max(median_backward_s, 1e-6))))
    num_pairs += num_pairs % 2
    for rep in range(num_pairs):
        pair = ((True, with_s), (False, without_s))
        for on, sink in (pair if rep % 2 == 0 else pair[::-1]):  # alternate who goes first
            sink.append(runner.timed_backward(on))
    frac, raw = hook_overhead_estimate(with_s, without_s)
    return frac, {"hook_overhead_raw_frac": round(raw, 6), "hook_overhead_pairs": num_pairs,
                  "hook_overhead_pair_fracs": [round(a / b - 1.0, 6) for a, b in zip(with_s, without_s)]}


def _model_error(name: str, phase: str, exc: BaseException) -> InputError:
    text = str(exc).strip().splitlines()
    return InputError(f"model {name!r}: {phase} raised {type(exc).__name__}"
                      f"{': ' + text[0] if text else ''}; expected a model that trains one step on its batch")


# ---- reduced-depth captures ---------------------------------------------------------------

_BLOCK_RE = re.compile(r"^(?P<prefix>.*?\.)(?P<k>\d+)\.(?P<rest>.+)$")


def _find_blocks(trace: Trace, block_prefix: str | None,
                 num_blocks: int) -> tuple[str, dict[int, dict[str, int]], range, range]:
    """The identical, contiguous blocks ``<prefix>0 .. <prefix>K-1`` of ``trace`` (3 <= K <= ``num_blocks``):
    the prefix, per block its parameters by their name inside the block (block 0's order), and the
    parameter indices before and after the blocks."""
    names = [p.name for p in trace.params]
    if block_prefix is None:
        prefixes = [m.group("prefix") for n in names if (m := _BLOCK_RE.match(n))]
        if not prefixes:
            raise InputError(f"trace {trace.model!r}: no repeated blocks (names like 'h.0.x') found; expected a transformer-style model to derive depth")
        block_prefix = statistics.mode(prefixes)
    in_block = re.compile(re.escape(block_prefix) + r"(\d+)\.(.+)", re.S)  # (block index, name inside the block)
    blk = [(int(m[1]), m[2]) if (m := in_block.fullmatch(n)) else None for n in names]
    ks = sorted({b[0] for b in blk if b})
    K = len(ks)
    if K < 3 or ks != list(range(K)):
        raise InputError(f"derive_depth: the capture has {K} blocks under {block_prefix!r}; expected at least 3 (0..K-1) to derive depth")
    check_count(num_blocks, "num_blocks", K)
    block_idx = [i for i, b in enumerate(blk) if b]
    lo, hi = min(block_idx), max(block_idx)
    if any(not blk[i] for i in range(lo, hi + 1)):
        raise InputError(f"derive_depth: parameters of blocks under {block_prefix!r} are not contiguous in DDP order")
    per_block = {k: {blk[i][1]: i for i in block_idx if blk[i][0] == k} for k in range(K)}
    if any(list(per_block[k]) != list(per_block[0]) for k in range(K)):
        raise InputError(f"derive_depth: blocks under {block_prefix!r} differ in their parameters; expected identical blocks")
    return block_prefix, per_block, range(lo), range(hi + 1, len(names))


def _captured_position(p: int, *, K: int, N: int) -> int:
    """The captured backward position ``m(p)`` whose hook offsets target backward position ``p`` copies."""
    if p == 0:
        return 0
    if p == N - 1:
        return K - 1
    return 1 + (p - 1) % (K - 2)


def _derived_iteration(it: IterationSample, per_block: dict[int, dict[str, int]],
                       new: Sequence[tuple[int, str, int | None]], *, N: int,
                       bytes_ratio: float) -> tuple[IterationSample, float]:
    """One measured iteration extended to ``N`` blocks (``per_block``: :func:`_find_blocks`), and its
    per-block backward time ``d``."""
    K = len(per_block)
    ready_s = [[t for i in per_block[k].values() if (t := it.grad_ready_s[i]) is not None]
               for k in range(K)]
    means = [statistics.fmean(ts) if ts else math.nan for ts in ready_s]
    diffs = [means[k - 1] - means[k] for k in range(1, K) if not math.isnan(means[k - 1] - means[k])]
    d = max(0.0, statistics.median(diffs)) if diffs else 0.0
    # parameters not in blocks: those ready after block 0 (e.g. embeddings) are shifted
    after = means[0] if not math.isnan(means[0]) else 0.0
    ready: list[float | None] = []
    for i, _, j in new:
        t = it.grad_ready_s[i]
        if t is None:
            ready.append(None)
        elif j is None:
            ready.append(t + (N - K) * d if t > after else t)
        else:
            p = N - 1 - j
            ready.append(t + (p - _captured_position(p, K=K, N=N)) * d)
    extra_s = (N - K) * d
    fwd = it.forward_s * (1 + extra_s / it.backward_s) if it.backward_s > 0 else it.forward_s
    sample = IterationSample(forward_s=fwd, backward_s=it.backward_s + extra_s,
                             optimizer_s=it.optimizer_s * bytes_ratio, zero_grad_s=it.zero_grad_s * bytes_ratio,
                             grad_ready_s=tuple(ready))
    return sample, d


_DERIVE_METHOD = ("blocks are identical: block parameters copied from block 0 and renamed in DDP order; "
                  "per-iteration block backward time d = median difference of adjacent captured blocks' mean hook times; "
                  "target block at backward position p copies captured position m(p) (first, middle round-robin, last) "
                  "shifted by (p - m(p)) * d; parameters ready after all blocks shifted by (N - K) * d; "
                  "backward_s += (N - K) * d; forward_s scaled by the same factor as backward_s; "
                  "optimizer_s and zero_grad_s scaled by parameter bytes")


def derive_depth(trace: Trace, *, num_blocks: int, block_prefix: str | None = None, command: str | None = None) -> Trace:
    """Extend a trace captured with ``K >= 3`` identical blocks ``<prefix>0 .. <prefix>K-1``
    (``block_prefix`` None: found from the names) to ``num_blocks`` = N blocks by the method of
    :data:`_DERIVE_METHOD`, recorded in ``synthetic``. InputError: no repeated blocks, fewer than 3,
    or N < K."""
    prefix, per_block, pre, post = _find_blocks(trace, block_prefix, num_blocks)
    K = len(per_block)
    N = num_blocks
    names = [p.name for p in trace.params]
    # new parameter list: (source index, new name, target block or None)
    new: list[tuple[int, str, int | None]] = [(i, names[i], None) for i in pre]
    for j in range(N):
        src_block = K - 1 - _captured_position(N - 1 - j, K=K, N=N)
        for rest in per_block[0]:
            new.append((per_block[src_block][rest], f"{prefix}{j}.{rest}", j))
    new += [(i, names[i], None) for i in post]
    src = trace.params
    records = tuple(replace(src[i], index=n, name=name) for n, (i, name, _) in enumerate(new))
    bytes_ratio = sum(r.size_bytes for r in records) / trace.total_param_bytes
    iterations, ds = zip(*(_derived_iteration(it, per_block, new, N=N, bytes_ratio=bytes_ratio)
                           for it in trace.iterations))
    first = iterations[0].grad_ready_s
    rank = {i: r for r, i in enumerate(trace.grad_ready_order)}
    order = sorted((n for n, r in enumerate(records) if r.has_grad and first[n] is not None),
                   key=lambda n: (first[n], rank.get(new[n][0], 0), -n))
    env = copy.deepcopy(trace.environment)
    env["n_layer"] = N
    env["captured_n_layer"] = K
    synthetic = {
        "kind": "derived-depth",
        "from_blocks": K, "to_blocks": N, "block_prefix": prefix,
        "source_command": trace.command,
        "per_block_backward_s": [round(d, 9) for d in ds],
        "method": _DERIVE_METHOD,
    }
    return Trace(model=trace.model, params=records, buffers=trace.buffers, grad_ready_order=tuple(order),
                 iterations=tuple(iterations), environment=env, hook_overhead_frac=trace.hook_overhead_frac,
                 synthetic=synthetic, command=command or trace.command)
