"""Launch the executor locally (``ddpsim validate``, CPU gloo runs): ``python -m torch.distributed.run``
on a free loopback port; on GPU nodes run ``torchrun`` yourself. Standard library only."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
#: what a launch runs unless told otherwise
EXECUTOR = ("-m", "executor")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_command(step_args: Sequence[str], *, nproc: int = 2, port: int | None = None,
                     target: Sequence[str] = EXECUTOR) -> list[str]:
    """``python -m torch.distributed.run`` on ``nproc`` local ranks, a free loopback port, running
    ``target`` (the executor, or a script such as a benchmark's worker) with ``step_args``."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(port or free_port()),
            *target, *step_args]


def launch_local(step_args: Sequence[str], *, nproc: int = 2, num_threads: int | None = 1,
                 timeout_s: float = 600.0, target: Sequence[str] = EXECUTOR,
                 pythonpath: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """Run ``target <step_args>`` (default: the executor) on ``nproc`` local ranks for at most
    ``timeout_s``, with ``pythonpath`` after the repository on PYTHONPATH; ``num_threads`` is set as
    OMP_NUM_THREADS and passed to the executor as ``--num-threads``."""
    args = list(step_args)
    if num_threads is not None and tuple(target) == EXECUTOR and "--num-threads" not in args:
        args[1:1] = ["--num-threads", str(num_threads)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *pythonpath, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if num_threads is not None:
        env["OMP_NUM_THREADS"] = str(num_threads)
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    for _ in range(3):
        r = _launch_once(torchrun_command(args, nproc=nproc, target=target), env=env, timeout_s=timeout_s)
        # NOTE: the free port can be taken by another process between free_port() and torchrun's
        # bind (a busy shared host): retry on a fresh port, nothing else
        err = r.stderr.lower()
        if r.returncode == 0 or not ("address already in use" in err or "eaddrinuse" in err):
            return r
    return r


def _launch_once(cmd: list[str], *, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    """One launch of ``cmd`` as a new process group; past ``timeout_s`` the group is stopped (SIGTERM,
    then SIGKILL after 15 s) and the launch fails with exit status 124."""
    proc = subprocess.Popen(cmd, cwd=str(REPO_ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return subprocess.CompletedProcess(cmd, 124, out, err + f"\nexecutor launch: timed out after {timeout_s:g} s")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ddpsim.validation.launch [--nproc N] STEP ...``: local launch, output passed through."""
    argv = list(sys.argv[1:] if argv is None else argv)
    nproc, argv = (int(argv[1]), argv[2:]) if argv[:1] == ["--nproc"] else (2, argv)
    r = launch_local(argv, nproc=nproc, num_threads=None if "--num-threads" in argv else 1)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
