"""``ddpsim``: one subcommand per verb; each lives in ``ddpsim/cli/<verb>.py`` and
exposes ``add_parser(subparsers)`` (which sets ``func``) and keeps heavy imports (torch,
simpy, pandas, matplotlib) inside its run function, so ``ddpsim --help`` stays fast.

Errors: an :class:`~ddpsim.errors.InputError` becomes ``ddpsim: error: <one line>`` on
stderr and exit status 2 (argparse's own usage errors also exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from ddpsim import __version__
from ddpsim.errors import InputError

COMMANDS = ("run", "trace", "plan", "topology", "collectives", "simulate", "sweep", "validate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddpsim",
        description="Predict PyTorch DDP training speed on a machine you do not have: trace a real model, "
                    "plan DDP's buckets exactly, simulate the Reducer over a modelled network, sweep "
                    "bucket_cap_mb, and validate against real torch.distributed runs.",
        epilog="Run 'ddpsim COMMAND --help' for each command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"ddpsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        modname = f"ddpsim.cli.{name}"
        if importlib.util.find_spec(modname) is None:
            continue
        importlib.import_module(modname).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except InputError as exc:
        print(f"ddpsim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ddpsim: interrupted; files already written are kept", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
