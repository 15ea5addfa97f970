"""``ddpsim zoo``: validate every model of the zoo unattended (:mod:`ddpsim.validation.zoo_driver`)."""

from __future__ import annotations

from typing import Any

DESCRIPTION = """\
How accurate is ddpsim on models it was never tuned on, on this machine?

Validate the model zoo ('ddpsim trace --list-models', zoo:<name>; the torchvision ones need
the 'zoo' extra) one model after another, as 'ddpsim validate' validates a scenario:
calibrated once, a model already done skipped, and write <out-dir>/zoo/summary.md: per
model the median |error| (wall clock, CPU clock, CPU clock at the runs' load), how often the
measured mean lies in its prediction interval, and how far predictions from single captures
land apart; each model's interval joined with the method's error measured on the other
models (the split-conformal band of their residuals measured / predicted - 1) is scored
beside it, and every residual is written to <out-dir>/zoo/method_error.json, which
'ddpsim run' and 'ddpsim validate' take as --method-error FILE on the same host.
The eleven models at 3 caps x 3 rounds take tens of minutes on a small CPU host
(studies/zoo/README.md); --models and fewer --caps / --repeats give a quick subset. With --reanalyze nothing runs: the models done are analysed
again. Needs PyTorch (pip install "ddpsim[capture]")."""

EPILOG = """\
examples:
  ddpsim zoo --models resnet18,tied_lm --caps 5,25 --repeats 2   # a quick subset
  ddpsim zoo --reanalyze --calibration reports/zoo/calibration.json"""


def add_parser(subparsers: Any) -> None:
    from ddpsim.cli.args import add_verb, nonempty
    from ddpsim.cli.validate import add_run_flags, run_zoo_args

    p = add_verb(subparsers, "zoo", help="validate the model zoo on this machine", description=DESCRIPTION,
                 epilog=EPILOG)
    p.add_argument("--models", dest="zoo_models", metavar="LIST", default=None, type=nonempty,
                   help="comma list of zoo models (names from 'ddpsim trace --list-models', zoo: optional); default: all")
    add_run_flags(p, caps_default="1,5,25", iterations_default="20", warmup_default="5")
    p.add_argument("--reanalyze", action="store_true",
                   help="run nothing: analyse the models done again with the current engine and intervals")
    p.set_defaults(func=run_zoo_args)
