"""The executor's lifecycle: torchrun environment, process group, watchdog, timers, output.

Every step runs inside :func:`distributed`:

1. torchrun's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
   ``MASTER_PORT``) is validated; a missing or bad variable is one clear line, exit 2.
2. ``init_process_group`` with an explicit timeout (it also bounds every gloo collective;
   NCCL gets ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` so its watchdog aborts on timeout).
3. On a CPU (gloo) run, glibc's allocator is held steady (:func:`steady_malloc`, unless
   ``--malloc default``): freed memory stays in the process, so that every process, trace
   capture and DDP run alike, reuses its pages from one iteration to the next.
4. A watchdog thread ends the rank (exit 3, one line on stderr) when the step reports no
   progress for ``timeout_s``: a peer that died mid-collective never leaves a rank hanging.
5. ``destroy_process_group()`` in ``finally``.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ddpsim.errors import InputError
from ddpsim.formats import MEASUREMENT_FORMAT, MEASUREMENT_VERSION, quantile
from ddpsim.io import write_text_atomic

EXIT_INPUT = 2
EXIT_RUNTIME = 3

REQUIRED_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class ExecutorFailure(RuntimeError):
    """A run failed at run time (peer died, timeout): one line, exit status 3."""


@dataclass(frozen=True, kw_only=True)
class DistEnv:
    """What torchrun tells each worker."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int


def read_env(environ: dict[str, str] | None = None) -> DistEnv:
    """Validate torchrun's variables. Raises InputError naming the variable."""
    env = os.environ if environ is None else environ
    missing = [k for k in REQUIRED_ENV if not env.get(k)]
    if missing:
        raise InputError(
            f"environment: {', '.join(missing)} not set; expected to run under torchrun, "
            f"e.g. 'torchrun --nproc-per-node 2 -m executor ...' (or set {', '.join(REQUIRED_ENV)})")
    vals: dict[str, int] = {}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
        try:
            vals[k] = int(env[k])
        except ValueError:
            raise InputError(f"environment: {k}={env[k]!r} is not accepted; expected an integer") from None
    if vals["WORLD_SIZE"] < 1:
        raise InputError(f"environment: WORLD_SIZE={vals['WORLD_SIZE']} is not accepted; expected an integer >= 1")
    if not 0 <= vals["RANK"] < vals["WORLD_SIZE"]:
        raise InputError(f"environment: RANK={vals['RANK']} is not accepted; expected 0 <= RANK < WORLD_SIZE ({vals['WORLD_SIZE']})")
    if vals["LOCAL_RANK"] < 0:
        raise InputError(f"environment: LOCAL_RANK={vals['LOCAL_RANK']} is not accepted; expected an integer >= 0")
    if not 0 < vals["MASTER_PORT"] < 65536:
        raise InputError(f"environment: MASTER_PORT={vals['MASTER_PORT']} is not accepted; expected a port in 1..65535")
    return DistEnv(rank=vals["RANK"], world_size=vals["WORLD_SIZE"], local_rank=vals["LOCAL_RANK"],
                   master_addr=env["MASTER_ADDR"], master_port=vals["MASTER_PORT"])


class Watchdog:
    """Ends the process when no :meth:`beat` came for ``timeout_s`` seconds."""

    def __init__(self, timeout_s: float, rank: int) -> None:
        self.timeout_s = float(timeout_s)
        self.rank = rank
        self._last = time.monotonic()
        self._what = "start-up"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="executor-watchdog", daemon=True)

    def start(self) -> "Watchdog":
        self._thread.start()
        return self

    def beat(self, what: str | None = None) -> None:
        self._last = time.monotonic()
        if what is not None:
            self._what = what

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(min(0.25, self.timeout_s / 4)):
            idle = time.monotonic() - self._last
            if idle > self.timeout_s:
                print(f"executor: error: rank {self.rank}: no progress for {idle:.1f} s (timeout {self.timeout_s:g} s) "
                      f"during {self._what}; a peer rank probably died or hangs; exiting", file=sys.stderr, flush=True)
                os._exit(EXIT_RUNTIME)


@dataclass
class Runtime:
    """What a step gets: its rank, the group, its device, a watchdog and a timer factory."""

    env: DistEnv
    backend: str
    device: Any  # torch.device
    timeout_s: float
    watchdog: Watchdog
    malloc: str = "default"

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.is_cuda:
            import torch

            torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        import torch.distributed as dist

        self.watchdog.beat()
        if self.is_cuda:
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()
        self.watchdog.beat()

    def log(self, msg: str) -> None:
        if self.rank == 0:
            print(msg, flush=True)


def choose_backend(requested: str) -> str:
    import torch

    if requested == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if requested not in ("nccl", "gloo"):
        raise InputError(f"--backend: {requested!r} is not accepted; expected auto, nccl or gloo")
    if requested == "nccl" and not torch.cuda.is_available():
        raise InputError("--backend: 'nccl' is not accepted on this node (no CUDA device); expected gloo or auto")
    return requested


MALLOC_MODES = ("steady", "default")
# glibc's mallopt(3) parameters and the values "steady" sets
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
STEADY_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)


def steady_malloc() -> str:
    """Hold glibc's allocator steady for a training loop; returns what was done, for the record.

    By default glibc adapts its mmap threshold as chunks are freed and trims the top of its heap
    when more than twice that threshold lies free there; either way memory goes back to the
    kernel, and the next iteration faults its pages in afresh. How often that happens depends
    on the process's whole allocation history. With glibc's defaults a ResNet-50 DDP process
    can fault tens of MiB of pages into every forward where a trace captured in the same process
    pair faults none, and the DDP forward runs the longer. Fixing the mmap
    threshold (at glibc's largest, 32 MiB) ends its adaptation; ``M_TRIM_THRESHOLD = -1`` ends
    trimming; ``M_MMAP_MAX = 0`` maps no chunk on its own at all, so that blocks above 32 MiB come
    from the heap too and are kept there. Without it every block above
    32 MiB -- gpt2-124m's 147 MiB embedding gradient and its ~50 MB logits, bert-base's 89 MiB
    word-embedding gradient -- is mapped and faulted in afresh every step, and how many such
    blocks a step allocates differs between a bare trace capture and a DDP step (for gpt2-124m
    the minor faults per step differ severalfold between them).
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "default (no glibc mallopt here)"
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if (mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD) != 1 or mallopt(M_TRIM_THRESHOLD, -1) != 1
            or mallopt(M_MMAP_MAX, 0) != 1):
        return "default (mallopt refused)"
    return f"steady (glibc mallopt: M_MMAP_THRESHOLD={STEADY_MMAP_THRESHOLD}, M_TRIM_THRESHOLD=-1, M_MMAP_MAX=0)"


@contextmanager
def distributed(*, backend: str = "auto", timeout_s: float = 120.0, num_threads: int | None = None,
                malloc: str = "steady", environ: dict[str, str] | None = None) -> Iterator[Runtime]:
    """Validate the environment, create the process group, yield a :class:`Runtime`, tear down."""
    import datetime

    if not (timeout_s > 0):
        raise InputError(f"--timeout-s: {timeout_s!r} is not accepted; expected a number of seconds > 0")
    if malloc not in MALLOC_MODES:
        raise InputError(f"--malloc: {malloc!r} is not accepted; expected one of {', '.join(MALLOC_MODES)}")
    env = read_env(environ)  # before torch's import: a run outside torchrun is refused at once
    import torch
    import torch.distributed as dist

    backend = choose_backend(backend)
    if num_threads is not None:
        if num_threads < 1:
            raise InputError(f"--num-threads: {num_threads!r} is not accepted; expected an integer >= 1")
        torch.set_num_threads(num_threads)
    if backend == "nccl":
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    # NOTE: CPU runs only: a GPU step's tensors live in CUDA's caching allocator
    malloc_used = steady_malloc() if malloc == "steady" and backend == "gloo" else "default"
    wd = Watchdog(timeout_s + 5.0, env.rank).start()
    initialised = False
    try:
        wd.beat("init_process_group")
        kwargs: dict[str, Any] = {}
        if backend == "nccl":
            kwargs["device_id"] = device
        dist.init_process_group(backend=backend, rank=env.rank, world_size=env.world_size,
                                timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
        initialised = True
        wd.beat("run")
        rt = Runtime(env=env, backend=backend, device=device, timeout_s=timeout_s, watchdog=wd, malloc=malloc_used)
        yield rt
        # NOTE: on success every rank leaves together, so no rank tears the group down while a
        # peer is still finishing its last collective or write (only reached when the step returned).
        wd.beat("teardown barrier")
        rt.barrier()
    finally:
        if initialised:
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 -- teardown after a failure must not mask it
                pass
        wd.stop()


# ---- timing -----------------------------------------------------------------------------

class Stopwatch:
    """Wall-clock intervals on the CPU, or CUDA events on a GPU stream."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def start(self) -> Any:
        if self.rt.is_cuda:
            import torch

            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def stop(self, token: Any) -> float:
        """Seconds since ``token`` (synchronises the stream on a GPU)."""
        if self.rt.is_cuda:
            import torch

            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            return token.elapsed_time(end) / 1e3
        return time.perf_counter() - token

    def between(self, a: Any, b: Any) -> float:
        """Seconds from token ``a`` to token ``b`` (on a GPU, both events recorded and synchronised)."""
        return a.elapsed_time(b) / 1e3 if self.rt.is_cuda else b - a


HOST_COUNTERS = ("cpu_s", "nivcsw", "host_busy_s", "host_steal_s", "host_all_s")


def host_counters(stat_path: str = "/proc/stat") -> dict[str, float]:
    """Cumulative counters read around each measured step, to tell what else the host did
    while it ran: ``cpu_s``, this process's CPU time (every thread: the rank's compute and
    gloo's); ``nivcsw``, its involuntary context switches (``getrusage``); and, where
    ``/proc/stat`` exists (Linux), the host's CPU time summed over CPUs, in seconds:
    ``host_busy_s`` (user + nice + system + irq + softirq), ``host_steal_s`` (taken by the
    hypervisor) and ``host_all_s`` (every state, idle included: about wall time x CPUs).
    The host's counters tick at ``SC_CLK_TCK`` (100 Hz): meaningful over a run, not over a
    millisecond step."""
    out: dict[str, float] = {"cpu_s": time.process_time()}
    try:
        import resource

        out["nivcsw"] = float(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)
    except (ImportError, OSError):
        pass
    try:
        with open(stat_path) as f:
            head = f.readline().split()
        ticks = [int(x) for x in head[1:9]] if head and head[0] == "cpu" else []
    except (OSError, ValueError):
        ticks = []
    if len(ticks) == 8:
        hz = float(os.sysconf("SC_CLK_TCK"))
        user, nice, system, idle, iowait, irq, softirq, steal = ticks
        out["host_busy_s"] = (user + nice + system + irq + softirq) / hz
        out["host_steal_s"] = steal / hz
        out["host_all_s"] = sum(ticks) / hz
    return out


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """``after - before`` for the counters both hold (:func:`host_counters`)."""
    return {k: after[k] - before[k] for k in HOST_COUNTERS if k in before and k in after}


def stats(xs: Sequence[float]) -> dict[str, float]:
    """``{"time_s": mean, "median_s", "p10_s", "p90_s", "num_samples"}``.

    ``time_s`` is the MEAN: the expected cost, what a run of many operations pays (nccl-tests
    report the mean too). On a small busy host small collectives are bimodal (a fast and a
    several times slower regime), and the median of a bimodal sample jumps between the modes from one size
    to the next; the mean converges.
    """
    return {"time_s": statistics.fmean(xs), "median_s": statistics.median(xs), "p10_s": quantile(xs, 0.1),
            "p90_s": quantile(xs, 0.9), "num_samples": len(xs)}


def _reduce_across_ranks(rt: Runtime, values: Sequence[float], op: str) -> list[float]:
    """Element-wise all-reduce (``op``: ``"SUM"`` or ``"MAX"``) of one float64 vector per rank."""
    import torch
    import torch.distributed as dist

    t = torch.tensor(list(values), dtype=torch.float64, device=rt.device)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    rt.watchdog.beat()
    return [float(v) for v in t.cpu().tolist()]


def mean_across_ranks(rt: Runtime, values: Sequence[float]) -> list[float]:
    """Element-wise mean over ranks (a step time: see :func:`ddpsim.formats.step_times`)."""
    return [v / rt.world_size for v in _reduce_across_ranks(rt, values, "SUM")]


def max_across_ranks(rt: Runtime, values: Sequence[float]) -> list[float]:
    """Element-wise max over ranks (a collective ends for the job when its slowest rank ends)."""
    return _reduce_across_ranks(rt, values, "MAX")


def environment_info(rt: Runtime) -> dict[str, Any]:
    import hashlib

    import torch

    info: dict[str, Any] = {
        "torch_version": torch.__version__,
        "hostname_hash": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
        "num_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "malloc": rt.malloc,
    }
    if rt.is_cuda:
        info["device_name"] = torch.cuda.get_device_name(rt.device)
        nccl = getattr(torch.cuda, "nccl", None)
        try:
            info["nccl_version"] = ".".join(map(str, nccl.version())) if nccl else None
        except Exception:  # noqa: BLE001
            info["nccl_version"] = None
    return info


def write_json(path: str | Path, data: dict[str, Any]) -> Path:
    """Atomic JSON write (temp file + rename)."""
    return write_text_atomic(path, json.dumps(data, indent=1) + "\n")


def measurement(kind: str, rt: Runtime, **fields: Any) -> dict[str, Any]:

    return {"format": MEASUREMENT_FORMAT, "version": MEASUREMENT_VERSION, "kind": kind,
            "backend": rt.backend, "world_size": rt.world_size, "device": rt.device.type,
            "environment": environment_info(rt), **fields}
