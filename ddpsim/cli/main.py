"""``ddpsim``: one subcommand per verb, each in ``ddpsim/cli/<verb>.py`` with ``add_parser(subparsers)``
and ``run(args)`` (the verb's ``func``), its heavy imports (torch, simpy, pandas, matplotlib) inside
``run``, so ``ddpsim --help`` stays fast. An :class:`~ddpsim.errors.InputError` (argparse's own
errors included) becomes ``ddpsim: error: <one line>`` on stderr and exit status 2; the
``ddpsim`` logger writes the plain message to stderr, INFO (WARNING with ``--quiet``).
"""

from __future__ import annotations

import importlib
import logging
import sys

from ddpsim import __version__
from ddpsim.cli.args import ArgParser
from ddpsim.errors import InputError

COMMANDS = ("run", "sweep", "simulate", "plan", "collectives", "topology", "trace", "retime", "validate", "compare",
            "explore")


def build_parser(commands: tuple[str, ...] = COMMANDS) -> ArgParser:
    """The parser of ``ddpsim`` with the verbs ``commands`` (each verb's module imported by it)."""
    parser = ArgParser(
        prog="ddpsim",
        description="Predict PyTorch DDP training speed on a machine you do not have: trace a real model, "
                    "plan DDP's buckets exactly, simulate the Reducer over a modelled network, sweep "
                    "bucket_cap_mb, and validate against real torch.distributed runs.",
        epilog="Run 'ddpsim COMMAND --help' for each command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"ddpsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in commands:
        verb = importlib.import_module(f"ddpsim.cli.{name}")
        verb.add_parser(sub)
        sub.choices[name].set_defaults(func=verb.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    logger = logging.getLogger("ddpsim")
    level = logger.level
    handler = logging.StreamHandler(sys.stderr)  # on the sys.stderr of this call (a test's captured one included)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        args = build_parser(_verb(sys.argv[1:] if argv is None else argv)).parse_args(argv)
        if getattr(args, "quiet", False):
            logger.setLevel(logging.WARNING)
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"ddpsim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ddpsim: interrupted; files already written are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away ('| head'): stop quietly, as a Unix filter does
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:  # the logger as it was: main() called in-process (a notebook, a test) leaves no handler behind
        logger.removeHandler(handler)
        logger.setLevel(level)
        if argv is None:  # the process's own command line: it exits next, so its objects need no last collection
            import gc

            gc.freeze()


def _verb(argv: list[str]) -> tuple[str, ...]:
    """The verbs the parser needs for ``argv``: the one it starts with, else all."""
    return (argv[0],) if argv and argv[0] in COMMANDS else COMMANDS
