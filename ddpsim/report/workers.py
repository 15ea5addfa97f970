"""A report's files written side by side: its PNGs and Perfetto traces, independent of one another
and of the tables, are written by a pool of forked workers (``concurrent.futures``; on Linux,
where fork is safe) while this process searches the recommended plan and writes the tables and the
summary. Each idle worker is given the first piece nobody has taken, one at a time; this process,
once its own work is done, takes them from the back (:meth:`SideBySide.results`). A piece is a
function of no arguments that writes its files and returns a few bytes (file names, overlap
figures); the pieces listed before the fork are inherited with the run's data, later ones pickled.
Elsewhere, or with no worker, the pieces run here in turn. Either way each file is written by one
process from the same data with the same code: the same bytes.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import multiprocessing
import sys
import threading
from collections import deque
from functools import partial
from typing import Any, Callable, Sequence

#: where workers are forked: Linux (elsewhere fork without exec is unsafe or missing)
_FORK = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
#: the work listed when the workers were forked (a worker reads it, inherited, by index)
_WORK: list[Callable[[], Any] | None] = []


def _run(piece: int | Callable[[], Any]) -> Any:
    """A worker's piece: an index into :data:`_WORK`, or a function."""
    return (_WORK[piece] if isinstance(piece, int) else piece)()


class SideBySide:
    """``work`` (None: nothing to do) run on ``workers`` forked processes (0: none); :meth:`result`
    gives a piece's return value or raises its error. One open at a time."""

    def __init__(self, work: Sequence[Callable[[], Any] | None], workers: int) -> None:
        self.work: list[Callable[[], Any] | None] = []
        self.futures: list[cf.Future] = []
        self.todo: deque[int] = deque()  # pieces nobody has taken
        self.lock = threading.RLock()
        self.workers, self.pool, self.forked, self.idle = workers if _FORK else 0, None, 0, 0
        todo = sum(w is not None for w in work)
        if todo and self.workers > 0:
            self._fork(list(work), min(self.workers, todo))
        for w in work:
            self.submit(w)

    def _fork(self, work: list[Callable[[], Any] | None], n: int) -> None:
        _WORK[:] = work  # read by the workers, forked when the first piece is given them
        # the run's objects out of the collector's reach until close: neither a worker (whose
        # collections would copy every page it shares with this process) nor this process
        # (drawing too) walks them again
        gc.freeze()
        self.forked, self.idle = len(work), n
        self.pool = cf.ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"))

    def _feed(self, i: int | None = None, done: cf.Future | None = None) -> None:
        """Piece ``i``'s result from its worker (``done``); then each idle worker given the first
        piece nobody has taken, one at a time (the rest stay for this process to take)."""
        if done is not None and done.exception() is not None:
            self.futures[i].set_exception(done.exception())
        elif done is not None:
            self.futures[i].set_result(done.result())
        with self.lock:
            self.idle += done is not None
            while self.idle and self.todo:
                j, self.idle = self.todo.popleft(), self.idle - 1
                self.futures[j].set_running_or_notify_cancel()
                try:
                    future = self.pool.submit(_run, j if j < self.forked else self.work[j])
                except RuntimeError as e:  # a worker gone (BrokenProcessPool): raised by result
                    self.futures[j].set_exception(e)
                    continue
                future.add_done_callback(partial(self._feed, j))

    def submit(self, work: Callable[[], Any] | None) -> int:
        """Add a piece (pickled to a worker; None: nothing to do); its index for :meth:`result`."""
        i = len(self.work)
        self.work.append(work)
        self.futures.append(cf.Future())
        if work is None:
            self.futures[i].set_result(None)
            return i
        with self.lock:
            self.todo.append(i)
        if self.workers > 0:
            if self.pool is None:
                self._fork(self.work, self.workers)
            self._feed()
        return i

    def _take(self, i: int) -> None:
        """Run piece ``i`` here if nobody has taken it."""
        with self.lock:
            if i not in self.todo:
                return
            self.todo.remove(i)
            self.futures[i].set_running_or_notify_cancel()
        try:
            self.futures[i].set_result(self.work[i]())
        except BaseException as e:  # noqa: BLE001  (raised by result)
            self.futures[i].set_exception(e)

    def result(self, i: int) -> Any:
        """The return value of piece ``i`` (run here now when no worker is there to take it)."""
        if self.pool is None:
            self._take(i)
        return self.futures[i].result()

    def results(self) -> list[Any]:
        """Every piece's return value, in order; the pieces no worker took run here, the last first."""
        for i in reversed(range(len(self.futures))):
            self._take(i)
        return [f.result() for f in self.futures]

    def close(self) -> None:
        """Drop the pieces nobody has taken, wait for those the workers run, stop the workers."""
        with self.lock:
            while self.todo:
                self.futures[self.todo.pop()].cancel()
        if self.pool is not None:
            self.pool.shutdown()
            gc.unfreeze()
            self.pool = None
        _WORK[:] = []

    def __enter__(self) -> "SideBySide":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
