"""``python -m executor STEP ...`` (under torchrun). See :mod:`executor`.

Exit status: 0 done; 2 bad input or environment (one line on stderr); 3 run-time failure
(a peer died, a timeout; one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

EPILOG = """examples:
  torchrun --nproc-per-node 2 -m executor collectives --out cal.json --num-threads 1
  torchrun --nproc-per-node 2 -m executor ddp --model mlp --batch-size 8 --bucket-cap-mb 5 \\
      --options '{"gradient_as_bucket_view": true}' --trace traces/mlp.json --out m.json
  torchrun --nproc-per-node 2 -m executor replay --plan plan.json --trace traces/mlp.json \\
      --compute synthetic --out r.json
  torchrun --nproc-per-node 2 -m executor round --model mlp --batch-size 32 --caps none,1,25 \\
      --iterations 20 --warmup 5 --round 1 --out-dir raw/
  torchrun --nproc-per-node 1 -m executor profile --model resnet50 --batch-size 64 --autocast bf16 \
      --out-dir prof/
"""


def build_parser() -> argparse.ArgumentParser:
    from executor import capture_step, collectives_step, ddp_step, profile_step, replay, round_step
    from executor.runtime import MALLOC_MODES

    parser = argparse.ArgumentParser(prog="python -m executor", description=__doc__.splitlines()[0],
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", metavar="STEP", required=True)
    for name, mod, help_ in (("collectives", collectives_step, "all-reduce/broadcast sweep, interference, copy bandwidth -> calibration JSON"),
                             ("ddp", ddp_step, "a model under real DDP -> measurement JSON"),
                             ("replay", replay, "any bucket plan with the executor's own reducer -> measurement JSON"),
                             ("trace", capture_step, "a trace captured on every rank at once (the run's conditions)"),
                             ("round", round_step, "a trace slice and real DDP at each cap, all in one launch "
                                                   "(one validation round)"),
                             ("profile", profile_step, "a model under real DDP, torch.profiler trace per rank -> rank<R>.json.gz")):
        p = sub.add_parser(name, help=help_, description=(mod.__doc__ or "").strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--backend", default="auto", help="auto (nccl with CUDA, else gloo), nccl or gloo")
        p.add_argument("--timeout-s", type=float, default=300.0,
                       help="process-group and watchdog timeout in seconds (default 300)")
        p.add_argument("--num-threads", type=int, default=None,
                       help="torch.set_num_threads per rank (CPU runs; use 1 on a machine with one core per rank)")
        p.add_argument("--malloc", default="steady", choices=MALLOC_MODES,
                       help="CPU runs: 'steady' (default) holds glibc's allocator steady -- fixed mmap threshold, no "
                            "trimming -- so that no process faults its pages in afresh every iteration; 'default' "
                            "leaves glibc's adaptive behaviour (see executor.runtime.steady_malloc)")
        mod.add_arguments(p)
        p.set_defaults(module=mod)
    return parser


def main(argv: list[str] | None = None) -> int:
    from executor.runtime import distributed

    args = build_parser().parse_args(argv)

    def step() -> int:
        with distributed(backend=args.backend, timeout_s=args.timeout_s, num_threads=args.num_threads,
                         malloc=args.malloc) as rt:
            return int(args.module.run(rt, args) or 0)

    return exit_status(args.step, step)


def exit_status(step: str, body: Callable[[], int]) -> int:
    """``body()``'s exit status under the executor's rules: its own return; a refusal
    (InputError) or a run-time failure (a peer died, a timeout) as one line on stderr and
    :data:`executor.runtime.EXIT_INPUT` / :data:`executor.runtime.EXIT_RUNTIME`."""
    from ddpsim.errors import InputError

    from executor.runtime import EXIT_INPUT, EXIT_RUNTIME, ExecutorFailure

    try:
        return body()
    except InputError as exc:
        print(f"executor: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_INPUT
    except ExecutorFailure as exc:
        print(f"executor: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_RUNTIME
    except RuntimeError as exc:  # torch.distributed errors: a peer died, a timeout
        first = " ".join(str(exc).split())[:300]
        print(f"executor: error: {step} failed: {type(exc).__name__}: {first} "
              f"(a peer rank died, timed out, or the group broke)", file=sys.stderr, flush=True)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        print("executor: interrupted", file=sys.stderr, flush=True)
        return 130


def _exit_now(code: int) -> None:
    """Flush and leave without interpreter finalization.

    The process group is already destroyed and every output written atomically and closed.
    Finalization can still abort a gloo process ('terminate called without an active
    exception', SIGABRT) when backend worker threads outlive the interpreter's teardown
    (pytorch/pytorch#190489, #179291), after the measurement is written: leaving through
    ``os._exit`` keeps such a run from counting as failed.
    """
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
