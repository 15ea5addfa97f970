"""A job's points on a Ray cluster (``ddpsim explore --ray`` / ``--cluster ray://HOST:PORT``): the
points cut into chunks of neighbours (:func:`ddpsim.pipeline.sweep.chunks`), each a Ray task running
:func:`ddpsim.pipeline.sweep.worker_chunk` (what local processes run) on the job put once in Ray's
object store; :func:`ddpsim.pipeline.sweep.run_points` writes each point's file as its task ends, so
a lost worker loses nothing kept (Ray re-runs its task, ``max_retries``). ``--ray`` starts a local
Ray; ``--cluster ADDRESS`` joins a running one (``ray://HOST:10001`` or ``auto``) and ships this
package to the workers (``runtime_env.py_modules``), which need ddpsim's dependencies
(``pip install ddpsim[ray]``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.errors import InputError

log = logging.getLogger(__name__)

#: Ray re-runs a task this many times when its worker process or node dies
MAX_RETRIES = 3


def run_on_ray(address: str | None, job: Any, units: Sequence[Any],
               finish: Callable[[tuple], Sequence[Any]]) -> None:
    """Simulate the ``units`` of ``job`` on a local Ray (``address`` None) or the cluster at
    ``address``; ``finish`` each row as its task ends, and send the units it returns as tasks of
    their own. A Ray already initialised in this process (a notebook's, a test's) is used as it is
    and left running."""
    if not units:
        return
    from ddpsim.pipeline.sweep import chunks, drive, worker_chunk

    try:
        import ray
    except ImportError:
        raise InputError("--ray: Ray is not installed; expected 'pip install ddpsim[ray]' "
                         "(or 'pip install ray')") from None
    started = not ray.is_initialized()
    if started:
        _init(ray, address)
    try:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(worker_chunk)
        job_ref = ray.put(job)
        log.info("%d point(s) on Ray (%d CPU(s))", len(units), workers)

        def wait(pending: list) -> tuple[list, list]:
            done, rest = ray.wait(pending, num_returns=1)
            return [row for ref in done for row in _result(ray, ref)], rest

        drive(chunks(list(units), workers), lambda c: task.remote(c, job_ref), wait, finish)
    finally:
        if started:
            ray.shutdown()


def _init(ray: Any, address: str | None) -> None:
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address is not None:
        import ddpsim

        kwargs["address"] = address
        kwargs["runtime_env"] = {"py_modules": [str(Path(ddpsim.__file__).resolve().parent)]}
    try:
        ray.init(**kwargs)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise InputError(f"--cluster: {address!r} is not accepted ({str(exc).splitlines()[0][:200]}); expected "
                         "a running Ray cluster's address (ray://HOST:10001 or auto)") from None


def _result(ray: Any, ref: Any) -> list[tuple]:
    """A task's rows; an input error raised in a task is raised here as it was."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, InputError):
            raise InputError(str(cause)) from None
        raise
