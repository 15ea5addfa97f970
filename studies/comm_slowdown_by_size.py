"""Study: does an all-reduce's slowdown under compute depend on its size on a CPU (gloo) host?

One command, prints figures; no assertions:

    python studies/comm_slowdown_by_size.py [--sizes 65536,262144,1048576,8388608] [--rounds 5] [--repeats 8]

A calibration measures the slowdown of an all-reduce while the ranks compute at one size
(``executor collectives --interference-bytes``, default 8 MiB) and the engine applies it to every
collective whatever its size (:class:`ddpsim.network.interference.Interference`). This runs the
same microbenchmark (:func:`executor.collectives_step.measure_interference`: an all-reduce timed
alone, then launched asynchronously while the main thread runs 256x256 matmuls, on 2 gloo ranks
of one thread) at several sizes, the sizes interleaved round by round so that the host's drift
hits them alike, and prints per size the median over rounds of ``comm_slowdown`` (and of
``compute_slowdown``) with their range. A small all-reduce is latency-bound: each of its ring
steps waits for the peer's gloo thread to be scheduled, which a busy core delays.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SIZES = (64 << 10, 256 << 10, 1 << 20, 8 << 20)


def worker(sizes: list[int], rounds: int, repeats: int) -> None:
    import torch

    from executor.collectives_step import measure_interference
    from executor.runtime import distributed

    with distributed(backend="gloo", timeout_s=300.0, num_threads=1) as rt:
        got: dict[int, list[tuple[float, float]]] = {s: [] for s in sizes}
        for r in range(rounds):
            for s in sizes[r % len(sizes):] + sizes[:r % len(sizes)]:
                m = measure_interference(rt, s, repeats, torch.float32)
                got[s].append((m["comm_slowdown"], m["compute_slowdown"]))
        if rt.rank == 0:
            print(f"2 gloo ranks x 1 thread; {rounds} rounds x {repeats} all-reduces per size "
                  "(executor.collectives_step.measure_interference)")
            print(f"{'size':>10s} {'comm_slowdown':>13s} {'range':>13s} {'compute_slowdown':>16s} {'range':>13s}")
            for s in sizes:
                comm = [c for c, _ in got[s]]
                comp = [c for _, c in got[s]]
                print(f"{s:>10d} {statistics.median(comm):13.2f} {min(comm):6.2f}..{max(comm):<6.2f}"
                      f" {statistics.median(comp):16.2f} {min(comp):6.2f}..{max(comp):<6.2f}", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="all-reduce bytes, comma-separated")
    ap.add_argument("--rounds", type=int, default=5, help="rounds over every size (default 5)")
    ap.add_argument("--repeats", type=int, default=8, help="all-reduces per phase of one measurement (default 8)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(s < 4 for s in sizes):
        print(f"comm_slowdown_by_size: --sizes: {args.sizes!r} is not accepted; expected comma-separated byte counts >= 4",
              file=sys.stderr)
        return 2
    for v, flag in ((args.rounds, "--rounds"), (args.repeats, "--repeats")):
        if v < 1:
            print(f"comm_slowdown_by_size: {flag}: {v!r} is not accepted; expected an integer >= 1", file=sys.stderr)
            return 2
    if args.worker:
        worker(sizes, args.rounds, args.repeats)
        return 0
    from ddpsim.validation.launch import REPO_ROOT, torchrun_command

    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    cmd = torchrun_command(["--worker", "--sizes", args.sizes, "--rounds", str(args.rounds), "--repeats", str(args.repeats)],
                           target=(os.path.abspath(__file__),))
    return subprocess.run(cmd, cwd=str(REPO_ROOT), env=env).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
