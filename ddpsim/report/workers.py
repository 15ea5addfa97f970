"""A report's files written side by side: its PNGs and Perfetto traces, independent of one another
and of the tables, are written by forked worker processes (on Linux, where fork is safe) while
this process searches the recommended plan and writes the tables and the summary. ``jobs`` - 1
workers take the pieces from the front of one list, one at a time; this process, once its own
work is done, takes them from the back (:meth:`SideBySide.results`). A piece is a function of no
arguments that writes its files and returns a few bytes (file names, overlap figures); the
pieces listed before the fork are inherited with the run's data, later ones pickled. Elsewhere,
or with no worker, the pieces run here in turn. Either way each file is written by one process
from the same data with the same code: the same bytes.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import multiprocessing
import sys
import threading
from collections import deque
from typing import Any, Callable, Sequence

#: where workers are forked: Linux (elsewhere fork without exec is unsafe or missing)
_FORK = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
#: the work listed when the workers were forked (a worker reads it, inherited, by index)
_WORK: list[Callable[[], Any] | None] = []


def _serve(conn: Any) -> None:
    """A worker: run each piece received (an index into :data:`_WORK`, or a function), send back
    ``(True, result)`` or ``(False, error)``, until None."""
    while (piece := conn.recv()) is not None:
        try:
            out = (True, (_WORK[piece] if isinstance(piece, int) else piece)())
        except BaseException as e:  # noqa: BLE001  (raised where the result is asked for)
            out = (False, e)
        try:
            conn.send(out)
        except Exception as e:  # noqa: BLE001  (a result or an error that does not pickle)
            conn.send((False, RuntimeError(f"a report piece's result could not be sent back: {e!r}")))


class SideBySide:
    """``work`` (None: nothing to do) run on ``workers`` forked processes (0: none); :meth:`result`
    gives a piece's return value or raises its error. One open at a time."""

    def __init__(self, work: Sequence[Callable[[], Any] | None], workers: int) -> None:
        self.work: list[Callable[[], Any] | None] = []
        self.futures: list[cf.Future] = []
        self.todo: deque[int] = deque()  # pieces nobody has taken
        self.cond = threading.Condition()
        self.workers, self.forked, self.threads, self.closing = workers if _FORK else 0, 0, [], False
        for w in work:
            self._add(w)
        if self.todo and self.workers > 0:
            self._fork(min(self.workers, len(self.todo)))

    def _add(self, work: Callable[[], Any] | None) -> int:
        f: cf.Future = cf.Future()
        self.work.append(work)
        self.futures.append(f)
        if work is None:
            f.set_result(None)
        else:
            with self.cond:
                self.todo.append(len(self.work) - 1)
                self.cond.notify()
        return len(self.work) - 1

    def _fork(self, n: int) -> None:
        _WORK[:] = self.work  # read by the workers forked now
        # the run's objects out of the collector's reach until close: neither a worker (whose
        # collections would copy every page it shares with this process) nor this process
        # (drawing too) walks them again
        gc.freeze()
        self.forked = len(self.work)
        ctx = multiprocessing.get_context("fork")
        started = []
        for _ in range(n):  # every worker forked before any thread here starts
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(there,), daemon=True)
            proc.start()
            there.close()
            started.append((threading.Thread(target=self._feed, args=(here,), daemon=True), here, proc))
        for t, _, _ in started:
            t.start()
        self.threads = started

    def _feed(self, conn: Any) -> None:
        """Give the worker at ``conn`` the first piece nobody has taken, one at a time, until closed."""
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.todo or self.closing)
                if not self.todo:
                    return
                i = self.todo.popleft()
                self.futures[i].set_running_or_notify_cancel()
            try:
                conn.send(i if i < self.forked else self.work[i])
                ok, value = conn.recv()
            except BaseException as e:  # noqa: BLE001  (a worker gone, a piece that does not pickle)
                ok, value = False, e
            (self.futures[i].set_result if ok else self.futures[i].set_exception)(value)

    def submit(self, work: Callable[[], Any] | None) -> int:
        """Add a piece (pickled to a worker; None: nothing to do); its index for :meth:`result`."""
        i = self._add(work)
        if work is not None and self.workers > 0 and not self.threads:
            self._fork(self.workers)
        return i

    def _take(self, i: int | None = None) -> int | None:
        """Piece ``i`` (None: the last) if nobody has taken it, now this process's; else None."""
        with self.cond:
            if not self.todo or (i is not None and i not in self.todo):
                return None
            if i is None:
                i = self.todo.pop()
            else:
                self.todo.remove(i)
            self.futures[i].set_running_or_notify_cancel()
        try:
            self.futures[i].set_result(self.work[i]())
        except BaseException as e:  # noqa: BLE001  (raised by result)
            self.futures[i].set_exception(e)
        return i

    def result(self, i: int) -> Any:
        """The return value of piece ``i`` (run here now when no worker is there to take it)."""
        if not self.threads:
            self._take(i)
        return self.futures[i].result()

    def results(self) -> list[Any]:
        """Every piece's return value, in order; the pieces no worker took run here, the last first."""
        while self._take() is not None:
            pass
        return [f.result() for f in self.futures]

    def close(self) -> None:
        """Drop the pieces nobody has taken, wait for those the workers run, stop the workers."""
        with self.cond:
            self.closing = True
            while self.todo:
                self.futures[self.todo.pop()].cancel()
            self.cond.notify_all()
        if self.threads:
            gc.unfreeze()
        for t, conn, proc in self.threads:
            t.join()
            try:
                conn.send(None)
            except OSError:  # the worker is gone
                pass
            proc.join()
            conn.close()
        self.threads = []
        _WORK[:] = []

    def __enter__(self) -> "SideBySide":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
