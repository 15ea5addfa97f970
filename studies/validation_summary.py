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

Nothing is measured or simulated here (``ddpsim validate`` does that); it reads and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

TARGET_MEDIAN_PCT = 5.0      # median |error| of the mean step over the validated points
TARGET_BEST_GAP_PCT = 2.0    # the predicted-best cap measured at most this much slower than the measured best


def targets_met(s: dict[str, Any]) -> tuple[bool, bool, bool]:
    """Which of the three targets a report's ``summary`` meets: median |error|, every point in
    band or within 10 %, the predicted-best cap within 2 % of the measured best."""
    return (s["median_abs_error_pct"] <= TARGET_MEDIAN_PCT, s["num_in_band_or_within_10pct"] == s["num_points"],
            s["predicted_best_gap_pct"] <= TARGET_BEST_GAP_PCT)


def summary_line(d: dict[str, Any]) -> str:
    """One table line of a ``validation.json`` (as a dict)."""
    s = d["summary"]
    ci = s.get("best_pair_gap_ci95_pct")
    gap = f"{s['predicted_best_gap_pct']:.1f} %" + ("" if ci is None else f" ({ci[0]:+.1f}..{ci[1]:+.1f} %)")
    verdict = s.get("best_cap_verdict") or "n/a"
    if s.get("best_pair_rounds_to_decide") is not None:
        verdict += f", ~{s['best_pair_rounds_to_decide']} rounds"
    spread = s.get("median_run_spread_pct")
    return (f"{d['scenario']:20s} {s['num_points']:6d} {s['median_abs_error_pct']:7.1f} % {s['max_abs_error_pct']:7.1f} % "
            f"{s['num_in_band_or_within_10pct']:>5d}/{s['num_points']:<3d} {gap:>24s} {verdict:>22s} "
            f"{str(s['plan_matches_all']).lower():>6s} {'n/a' if spread is None else format(spread, '6.1f') + ' %':>9s}")


def main(root: Path) -> int:
    reports = [json.loads(p.read_text()) for p in sorted(root.glob("*/validation.json"))]
    reports = [d for d in reports if d.get("summary")]
    if not reports:
        print(f"validation_summary: no */validation.json with a summary under {str(root)!r}; "
              f"expected the folders 'ddpsim validate' writes", file=sys.stderr)
        return 2
    print(f"{'scenario':20s} {'points':>6s} {'med|err|':>9s} {'max|err|':>9s} {'band/10%':>9s} "
          f"{'best-cap gap (95 % CI)':>24s} {'verdict':>22s} {'plan':>6s} {'spread':>9s}")
    met = 0
    for d in reports:
        print(summary_line(d))
        met += all(targets_met(d["summary"]))
    first = reports[0]
    print(f"\nscenarios meeting all three targets (median <= {TARGET_MEDIAN_PCT:g} %, every point in band or within 10 %, "
          f"best-cap gap <= {TARGET_BEST_GAP_PCT:g} %): {met} of {len(reports)}")
    print(f"measured on {first['world_size']} gloo ranks x {first['num_threads']} thread(s), one calibration: "
          f"{first['calibration']}")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default="reports", help="folder holding <scenario>/validation.json (default: reports)")
    sys.exit(main(Path(ap.parse_args().root)))
