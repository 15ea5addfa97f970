"""Several ``python -m executor`` command lines in one torchrun launch (a test helper).

Run as ``torchrun --nproc-per-node N tests/executor_jobs.py JOBS.json OUT_DIR``: JOBS.json holds
``"launch"``, the group's ``distributed()`` settings (``backend``, ``timeout_s``, ``num_threads``,
``malloc``), and ``"jobs"``, an object of job names to executor argument lists, run in its order,
every one in that process group (a job's own ``--backend``, ``--timeout-s``, ``--num-threads``
and ``--malloc`` must be the launch's). Each job is parsed by the executor's own parser
and run by its step's ``run`` under :func:`executor.__main__.exit_status`, the exit statuses
and one-line refusals of ``python -m executor``; its stdout and stderr are captured per rank
into ``OUT_DIR/<job>.rank<R>.stdout`` / ``.stderr``, its exit status into
``OUT_DIR/<job>.rank<R>.rc``. What it saves is the launch: torchrun's start, each rank's
import of torch and the group's set-up, paid once for every job instead of once per job.
A job that refuses its input must refuse it on every rank alike (the next job shares the group).
A job ``["python", SCRIPT]`` runs a test's own script in the group instead, with ``rt`` (the
:class:`executor.runtime.Runtime`) among its globals; exit status 1 and the traceback on stderr
if it raises.

:func:`launch_jobs` is the tests' side: it starts that launch and reads every job's captures
back as a :class:`Job`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

LAUNCH_OPTIONS = ("backend", "timeout_s", "num_threads", "malloc")


def run_jobs(launch: dict[str, object], jobs: dict[str, list[str]], out_dir: Path) -> None:
    from executor.__main__ import build_parser, exit_status
    from executor.runtime import distributed

    parsed = {name: build_parser().parse_args(argv) for name, argv in jobs.items() if argv[0] != "python"}
    for name, args in parsed.items():
        if {k: getattr(args, k) for k in LAUNCH_OPTIONS} != launch:
            raise SystemExit(f"executor_jobs: job {name!r}: its {LAUNCH_OPTIONS} differ from the launch's {launch}")
    with distributed(**launch) as rt:
        for name, argv in jobs.items():
            stem = out_dir / f"{name}.rank{rt.rank}"
            with open(f"{stem}.stdout", "w") as out, open(f"{stem}.stderr", "w") as err, \
                    contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                if argv[0] == "python":
                    code = _run_script(argv[1], rt)
                else:
                    args = parsed[name]
                    code = exit_status(args.step, lambda: int(args.module.run(rt, args) or 0))
            Path(f"{stem}.rc").write_text(f"{code}\n")
            rt.barrier()


def _run_script(path: str, rt) -> int:
    import runpy
    import traceback

    try:
        runpy.run_path(path, init_globals={"rt": rt}, run_name="__main__")
    except Exception:  # noqa: BLE001 -- the job's failure is the test's to read
        traceback.print_exc()
        return 1
    return 0


@dataclass(frozen=True)
class Job:
    """One job's outcome: its ranks' exit statuses (None: the launch never finished it), their
    stdout and stderr (rank 0's first), and the folder its outputs went to."""

    dir: Path
    returncodes: tuple[int | None, ...]
    stdout: str
    stderr: str
    launch: subprocess.CompletedProcess

    @property
    def returncode(self) -> int | None:
        """0 when every rank returned 0, else the first rank's non-zero status (None: unfinished)."""
        bad = [c for c in self.returncodes if c != 0]
        return bad[0] if bad else 0

    def log(self) -> str:
        """Everything there is to read when the job did not do what a test expects."""
        return (f"job rcs {self.returncodes}\n{self.stdout}\n{self.stderr}\n--- launch rc {self.launch.returncode} "
                f"stderr tail:\n{self.launch.stderr[-3000:]}")


def launch_jobs(jobs: dict[str, list[str]], out_dir: Path, *, nproc: int = 2, num_threads: int = 1,
                pythonpath: Sequence[str] = (), timeout_s: float = 900.0) -> dict[str, Job]:
    """Run ``jobs`` (name -> executor arguments) in one launch (:func:`ddpsim.validation.launch.launch_local`)
    of ``nproc`` local gloo ranks, ``num_threads`` each, a 60 s timeout; each job's outputs go where its
    arguments say, its captures to ``out_dir/logs``."""
    from ddpsim.validation.launch import launch_local

    logs = out_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    spec = out_dir / "jobs.json"
    launch = {"backend": "gloo", "timeout_s": 60.0, "num_threads": num_threads, "malloc": "steady"}
    flags = ["--backend", "gloo", "--timeout-s", "60", "--num-threads", str(num_threads), "--malloc", "steady"]
    spec.write_text(json.dumps({"launch": launch, "jobs": {name: argv if argv[0] == "python" else [argv[0], *flags, *argv[1:]]
                                                           for name, argv in jobs.items()}}))
    r = launch_local([str(spec), str(logs)], nproc=nproc, num_threads=num_threads, timeout_s=timeout_s,
                     target=[str(Path(__file__).resolve())], pythonpath=pythonpath)
    return {name: _read_job(logs, name, nproc, r) for name in jobs}


def _read_job(logs: Path, name: str, nproc: int, launch: subprocess.CompletedProcess) -> Job:
    def text(rank: int, ext: str) -> str:
        f = logs / f"{name}.rank{rank}.{ext}"
        return f.read_text() if f.exists() else ""

    codes = tuple(int(text(r, "rc")) if text(r, "rc").strip() else None for r in range(nproc))
    return Job(dir=logs.parent / name, returncodes=codes, stdout="".join(text(r, "stdout") for r in range(nproc)),
               stderr="".join(text(r, "stderr") for r in range(nproc)), launch=launch)


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text())
    run_jobs(spec["launch"], spec["jobs"], Path(sys.argv[2]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # as executor.__main__._exit_now: no interpreter teardown under gloo's threads
