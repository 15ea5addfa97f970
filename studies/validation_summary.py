"""Validation summary: the accuracy figures of every committed validation report, one line per
scenario, as the accuracy table of README.md and docs/VALIDATION.md gives them.

    python studies/validation_summary.py [REPORTS_DIR]      # default: reports

It reads ``REPORTS_DIR/<scenario>/validation.json`` (written by ``ddpsim validate``, rebuilt by
``ddpsim validate SCENARIO --reanalyze``) and prints per scenario: the median and the largest
|error| of the predicted mean step against the measured one over the validated
``bucket_cap_mb`` points, how many points lie in the measured p10..p90 band or within 10 % of
the measured mean, how much slower the predicted-best cap measured than the measured best
(with its 95 % interval from the runs paired by round, when the two differ), the best-cap
verdict and, when unresolved, how many rounds would decide it, whether real DDP's rebuilt
buckets equalled ddpsim's plan at every point, and the median run-to-run spread (the
measurement's own noise floor). Then how many scenarios meet the three targets:
median |error| <= 5 %, every point in band or within 10 %, best-cap gap <= 2 %.

Nothing is measured or simulated here (``ddpsim validate`` does that); it reads and prints
(:mod:`ddpsim.validation.summary`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddpsim.validation.summary import print_summary

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default="reports", help="folder holding <scenario>/validation.json (default: reports)")
    sys.exit(print_summary(Path(ap.parse_args().root)))
