"""A report's files written side by side: its PNGs and Perfetto traces are independent of one
another and of the tables, so they can be drawn by forked worker processes while this process
writes the traces, the tables and the summary (on Linux, where fork is safe). A report's five PNGs
go to ``jobs`` - 1 workers: with two CPUs, one worker (matplotlib imported once) and this process
take about the same time.

Each piece of work is a function of no arguments that writes its files and returns what the
report keeps of them (file names, overlap figures: a few bytes, pickled back). The workers are
forked after the functions are listed, so they inherit the run's data (the records, the spans)
rather than receiving it pickled. Elsewhere, or with no worker, the pieces
run in this process, in turn, when their results are asked for. Either way each file is written
by one process from the same data with the same code: the same bytes.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import sys
from typing import Any, Callable, Sequence

#: where workers are forked: Linux (elsewhere fork without exec is unsafe or missing)
_FORK = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
#: the work of the pool being started (a forked worker reads it, inherited, by index)
_WORK: list[Callable[[], Any]] = []


def _call(i: int) -> Any:
    return _WORK[i]()


class SideBySide:
    """``work`` (None: nothing to do) started on ``workers`` forked processes (module docstring;
    0: none; forked at the first piece); :meth:`result` gives each piece's return value (an
    error raised by a piece is raised there). One at a time: the workers read the work of the
    one open."""

    def __init__(self, work: Sequence[Callable[[], Any] | None], workers: int) -> None:
        self.work: list[Callable[[], Any] | None] = list(work)
        self.done: dict[int, Any] = {}
        self.pool, self.futures, self.workers = None, {}, workers if _FORK else 0
        todo = [i for i, w in enumerate(self.work) if w is not None]
        if todo and self.workers > 0:
            self._fork(len(todo))
            self.futures = {i: self.pool.submit(_call, i) for i in todo}

    def _fork(self, pieces: int) -> None:
        _WORK[:] = self.work  # read by the workers forked from now on
        self.pool = cf.ProcessPoolExecutor(max_workers=min(self.workers, pieces),
                                           mp_context=multiprocessing.get_context("fork"))

    def submit(self, work: Callable[[], Any] | None) -> int:
        """Start one more piece (pickled to a worker: a module-level function and plain values;
        None: nothing to do); its index for :meth:`result`."""
        self.work.append(work)
        if work is not None and self.workers > 0:
            if self.pool is None:
                self._fork(self.workers)
            self.futures[len(self.work) - 1] = self.pool.submit(work)
        return len(self.work) - 1

    def result(self, i: int) -> Any:
        """The return value of piece ``i`` (run here now when it went to no worker; None: no piece)."""
        if i not in self.done:
            work = self.work[i]
            self.done[i] = self.futures[i].result() if i in self.futures else None if work is None else work()
        return self.done[i]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
            _WORK[:] = []

    def __enter__(self) -> "SideBySide":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
