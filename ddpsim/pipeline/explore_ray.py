"""A design space's points on a Ray cluster (``ddpsim explore --ray`` / ``--cluster ray://HOST:PORT``).

Ray (``pip install ddpsim[ray]``) schedules the tasks; ddpsim only cuts the points into chunks
of neighbours (:func:`ddpsim.pipeline.explore.chunks`) and hands each to a Ray task that runs
:func:`ddpsim.pipeline.explore.evaluate`, the same function local processes run, on the job
put once in Ray's object store. Results come back as each task ends (``ray.wait``) and
:func:`ddpsim.pipeline.explore.run_explore` writes every point's file at once, so a lost
worker loses nothing kept: Ray re-runs a task whose worker died (``max_retries``), and a rerun
of the command simulates only the points not yet written.

``--ray`` starts a local Ray (one worker per CPU) for this command; ``--cluster ADDRESS`` joins a
running cluster (``ray://HOST:10001`` through Ray Client, or ``auto`` on a cluster node) and
ships this ddpsim package to the workers (``runtime_env.py_modules``); the workers need
ddpsim's dependencies installed (``pip install ddpsim[ray]`` in the cluster's image).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpsim.errors import InputError

log = logging.getLogger(__name__)

#: Ray re-runs a task this many times when its worker process or node dies
MAX_RETRIES = 3


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--ray: Ray is not installed; expected 'pip install ddpsim[ray]' (or 'pip install ray')") from None
    return ray


def _chunk(job: Any, indices: Sequence[int]) -> list[dict[str, Any]]:
    from ddpsim.pipeline.explore import evaluate

    return evaluate(job, indices)


class RayRunner:
    """Runs a job's points on Ray: a local one (``address`` None) or the cluster at ``address``.

    ``num_cpus`` caps a local Ray's CPUs (None: all of them). A Ray already initialised in this
    process (a notebook's, a test's) is used as it is and left running."""

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None) -> None:
        self.address = address
        self.num_cpus = num_cpus

    def _init(self, ray: Any) -> bool:
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if self.address is None:
            kwargs["num_cpus"] = self.num_cpus
        else:
            import ddpsim

            kwargs["address"] = self.address
            kwargs["runtime_env"] = {"py_modules": [str(Path(ddpsim.__file__).resolve().parent)]}
        try:
            ray.init(**kwargs)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError(f"--cluster: {self.address!r} is not accepted ({str(exc).splitlines()[0][:200]}); expected "
                             "a running Ray cluster's address (ray://HOST:10001 or auto)") from None
        return True

    def run(self, job: Any, todo: Sequence[int], finish: Callable[[list[dict[str, Any]]], None]) -> None:
        """Simulate ``job.points[todo]`` on Ray; ``finish`` each chunk's records as it arrives."""
        if not todo:
            return
        from ddpsim.pipeline.explore import chunks

        ray = _ray()
        started = self._init(ray)
        try:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
            task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(_chunk)
            job_ref = ray.put(job)
            pending = [task.remote(job_ref, c) for c in chunks(list(todo), workers)]
            log.info("explore: %d point(s) in %d task(s) on Ray (%d CPU(s))", len(todo), len(pending), workers)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    finish(_result(ray, ref))
        finally:
            if started:
                ray.shutdown()


def _result(ray: Any, ref: Any) -> list[dict[str, Any]]:
    """A task's records; an input error raised in a task is raised here as it was."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, InputError):
            raise InputError(str(cause)) from None
        raise
