"""What a simulation returns: every span, per-bucket timings and per-iteration figures.

Times are seconds from the simulation's start; iterations are numbered from 1. Streams:
``"compute"`` and ``"comm"`` (the process group's). Span kinds: ``forward``, ``backward``,
``copy_in``, ``copy_out``, ``optimizer``, ``zero_grad``, ``graph_search``, ``compress``,
``rebuild``, ``broadcast``, ``allreduce``, ``used_map_allreduce``, ``syncbn_allgather`` /
``syncbn_allreduce`` and ``wait`` (the compute stream waiting for communication)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from collections.abc import Sequence
from typing import Any, Callable, Iterator

from ddpsim.formats import quantile

COMPUTE_STREAM = "compute"
COMM_STREAM = "comm"


@dataclass(frozen=True, kw_only=True)
class Span:
    rank: int
    stream: str
    kind: str
    name: str
    iteration: int
    start_s: float
    end_s: float
    bucket: int | None = None
    size_bytes: int | None = None

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


class LazyTuple(Sequence):
    """A tuple of a simulation's records, ``build(*args)``, built the first time it is read (a
    sweep's summary figures read neither its spans nor its bucket timings, tens of thousands
    each); it compares equal to that tuple and pickles as it."""

    __slots__ = ("_build", "_args", "_items")

    def __init__(self, build: Callable[..., Sequence[Any]], *args: Any) -> None:
        self._build, self._args, self._items = build, args, None

    def _tuple(self) -> tuple:
        if self._items is None:
            self._items = tuple(self._build(*self._args))
            self._build = self._args = None
        return self._items

    def __len__(self) -> int:
        return len(self._tuple())

    def __getitem__(self, i):  # type: ignore[override]
        return self._tuple()[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._tuple())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyTuple):
            other = other._tuple()
        return self._tuple() == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __repr__(self) -> str:
        return repr(self._tuple())

    def __reduce__(self):
        return (tuple, (self._tuple(),))


def merged_spans(kept: list[tuple[int, list[tuple]]], comm_rows: list[tuple]) -> list[Span]:
    """A simulation's spans (kept as the engine's rows until read: ``LazyTuple(merged_spans, ...)``)
    from per simulated rank its compute rows ``(start, 0, order, end, kind, name, iteration,
    bucket, size)`` and the collectives' rows (1 for 0): each rank's in time order, at equal
    start compute first, then issue order."""
    out_spans: list[Span] = []
    append = out_spans.append
    new, setattr_ = object.__new__, object.__setattr__
    for rank, rank_rows in kept:
        rows = rank_rows + comm_rows
        rows.sort()  # two sorted runs: a linear merge; (start, stream, order) is unique
        for (start, flag, _, end, kind, name, it, bucket, size) in rows:
            # NOTE: what Span(...) builds, without the frozen dataclass __init__'s nine
            # object.__setattr__ calls (tens of thousands of spans; Span has no __post_init__)
            sp = new(Span)
            setattr_(sp, "__dict__", {"rank": rank, "stream": COMM_STREAM if flag else COMPUTE_STREAM, "kind": kind,
                                      "name": name, "iteration": it, "start_s": start, "end_s": end,
                                      "bucket": bucket, "size_bytes": size})
            append(sp)
    return out_spans


def compute_s_by_kind(spans: Sequence[Span], keys: set[tuple[int, int]]) -> dict[str, float]:
    """Summed durations of the compute spans whose (rank, iteration) is in ``keys``, by kind,
    added in span order (unbuilt :func:`merged_spans`: from their rows, the same additions)."""
    if isinstance(spans, LazyTuple) and spans._build is merged_spans:
        rows = ((rank, not flag, kind, it, start, end) for rank, rank_rows in spans._args[0]
                for (start, flag, _, end, kind, _, it, _, _) in sorted(rank_rows))
    else:
        rows = ((sp.rank, sp.stream == COMPUTE_STREAM, sp.kind, sp.iteration, sp.start_s, sp.end_s)
                for sp in spans)
    out: dict[str, float] = {}
    for rank, compute, kind, it, start, end in rows:
        if compute and (rank, it) in keys:
            out[kind] = out.get(kind, 0.0) + (end - start)
    return out


@dataclass(frozen=True, kw_only=True)
class BucketTiming:
    """One bucket's life in one iteration on one rank (absolute seconds)."""

    rank: int
    iteration: int
    bucket: int
    size_bytes: int
    num_params: int
    ready_s: float     # its last gradient copied in
    launch_s: float    # DDP launched its collective (in-order rule)
    start_s: float     # the collective started on the comm stream (all ranks launched, stream free)
    end_s: float


@dataclass(frozen=True, kw_only=True)
class IterationStats:
    """Per-iteration figures of one rank. ``exposed_comm_s``: from the end of backward compute
    to the end of the last collective (0 if communication finished first). ``overlap_ratio``:
    communication time overlapped by compute / total communication time (HTA's
    ``get_comm_comp_overlap``)."""

    rank: int
    iteration: int
    start_s: float
    end_s: float
    forward_s: float
    backward_compute_s: float
    exposed_comm_s: float
    comm_s: float
    overlap_ratio: float
    optimizer_s: float
    warmup: bool = False

    @property
    def iteration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, kw_only=True)
class SimResult:
    """The whole output of :func:`ddpsim.engine.simulate.simulate`; ``ranks`` lists the ranks
    simulated explicitly (ranks that behave alike share one representative; ``world_size`` is
    the group's size)."""

    world_size: int
    ranks: tuple[int, ...]
    spans: tuple[Span, ...]
    buckets: tuple[BucketTiming, ...]
    iterations: tuple[IterationStats, ...]
    meta: dict[str, Any] = field(default_factory=dict)

    def steady_iterations(self) -> list[IterationStats]:
        """Iterations after the warm-up (first iteration, rebuild), all simulated ranks."""
        return [it for it in self.iterations if not it.warmup]

    def exposed_comm_s(self, iteration: int) -> float:
        """Exposed communication of ``iteration``: its worst simulated rank's (the values whose
        p95 over steady iterations is a report's exposed-communication tail)."""
        return max((it.exposed_comm_s for it in self.iterations if it.iteration == iteration), default=0.0)

    def step_times_s(self) -> list[float]:
        """Per steady iteration, what the job sees: from the previous iteration's end on its
        slowest rank (the first simulated: its earliest start) to this one's end on its slowest
        rank; they add up to the wall time, where each rank's own iteration time maxed per
        iteration counts a rank's delay after a last collective in two iterations (the measured
        step, ``ddpsim.formats.step_times``, is the mean over ranks for the same reason)."""
        ends: dict[int, float] = {}
        starts: dict[int, float] = {}
        for it in self.iterations:
            ends[it.iteration] = max(ends.get(it.iteration, it.end_s), it.end_s)
            starts[it.iteration] = min(starts.get(it.iteration, it.start_s), it.start_s)
        steady = {it.iteration for it in self.steady_iterations()}
        out: list[float] = []
        prev: float | None = None
        for k in sorted(ends):
            if k in steady:
                out.append(ends[k] - (starts[k] if prev is None else prev))
            prev = ends[k]
        return out

    def summary(self) -> dict[str, float]:
        """p50/p95 step time and mean breakdown over steady iterations."""
        steady = self.steady_iterations() or list(self.iterations)
        steps = self.step_times_s() or [it.iteration_s for it in steady]
        p50, p95, mean = statistics.median(steps), quantile(steps, 0.95), statistics.fmean(steps)
        out = {"iteration_p50_s": p50, "iteration_p95_s": p95, "iteration_mean_s": mean}
        for attr in ("forward_s", "backward_compute_s", "exposed_comm_s", "comm_s", "overlap_ratio",
                     "optimizer_s"):  # their means over the steady iterations
            out[attr] = statistics.fmean(getattr(it, attr) for it in steady)
        if "join" in self.meta:  # under Join: the epoch's mean step (ddpsim.engine.join)
            out["iteration_mean_s"] = self.meta["join"]["epoch_mean_step_s"]
        return out

    # pandas is imported lazily: the engine itself does not need it
    def spans_df(self):  # -> pandas.DataFrame, one row per span
        return _frame(asdict(s) for s in self.spans)

    def buckets_df(self):  # one row per bucket timing
        return _frame(asdict(b) for b in self.buckets)

    def iterations_df(self):  # one row per (rank, iteration), with its iteration_s
        return _frame(dict(asdict(it), iteration_s=it.iteration_s) for it in self.iterations)


def _frame(rows: Iterator[dict[str, Any]]):  # -> pandas.DataFrame
    import pandas as pd

    return pd.DataFrame(list(rows))
